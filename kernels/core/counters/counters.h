// Hardware counters per launch, through CUPTI's range profiler (CUDA 12.6+), loaded at run time.
//
// CUPTI is opened with dlopen and the driver API is reached through cudaGetDriverEntryPoint, so
// the lab starts and runs on machines without a GPU, without CUPTI or without counter access;
// there, unavailable() says why in one line, and how to enable counters, and nothing else
// changes. Collection replays the work it is given once per pass that the metrics need (user
// replay): the runner's stages read their inputs and write other slots, so every pass sees the
// same data. Profiled runs never enter timing samples.
#pragma once

#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace lab {

// Named ranges opened around launches: the runner calls push() before each launch it records
// and pop() after it (NVTX always; CUPTI's user ranges while counters are collected).
class RangeSink {
 public:
  virtual ~RangeSink() = default;
  virtual void push(const std::string& name) = 0;
  virtual void pop() = 0;
};

// One warp-stall reason: smsp__average_warps_issue_stalled_<metric>_per_issue_active.ratio,
// the warps stalled for that reason per issued instruction.
struct StallReason {
  std::string metric;  // "long_scoreboard"
  std::string words;   // "waiting on global or local memory (long scoreboard)"
  double per_issue = 0;
};

// The counters of one range (one launch record; a library call's kernels together).
struct CounterValues {
  std::string range;
  double achieved_occupancy_pct = NAN;  // sm__warps_active.avg.pct_of_peak_sustained_active
  double dram_read_bytes = NAN;         // dram__bytes_read.sum
  double dram_write_bytes = NAN;        // dram__bytes_write.sum
  double l2_hit_pct = NAN;              // lts__t_sector_hit_rate.pct
  double sm_throughput_pct = NAN;       // sm__throughput.avg.pct_of_peak_sustained_elapsed
  double mem_throughput_pct =
      NAN;                   // gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed
  double duration_ns = NAN;  // gpu__time_duration.sum (under the profiler: not a timing)
  // FP32 and FP64 operations executed: fadd + fmul + 2 ffma (and d*) thread instructions,
  // smsp__sass_thread_inst_executed_op_*_pred_on.sum; NaN where a metric is missing.
  double fp32_flops = NAN;
  double fp64_flops = NAN;
  double inst_executed = NAN;  // warp instructions issued and executed (smsp__inst_executed.sum)
  std::vector<StallReason> stalls;      // every reason measured above 0, largest first
  std::vector<StallReason> top_stalls;  // the three largest, largest first
};

struct CounterReport {
  bool ok = false;
  std::string why;  // when !ok: one line, what failed and how to enable counters
  int passes = 0;   // replay passes the metrics needed
  double ms = 0;    // host wall time of the whole collection (set-up, passes, evaluation)
  std::vector<CounterValues> ranges;  // in the order the ranges were opened in a pass
};

// Launches' counters added up (a stage's traffic and work): DRAM bytes read and written, FP32 and
// FP64 operations, instructions executed, over the ranges `pick` chooses (all without one); NaN
// where one is missing.
CounterValues sum_counters(const std::vector<CounterValues>& ranges,
                           const std::function<bool(size_t)>& pick = {});

// The metrics the lab asks for, in ncu's names (the --print-ncu command line uses them too).
const std::vector<std::string>& counter_metrics();
// The stall reasons asked for (metric suffixes), and each one in words a student understands.
const std::vector<std::string>& stall_reasons();
std::string stall_words(const std::string& reason);

// What the counter layer needs from CUPTI, one call per step; make_cupti_backend() is the real
// one, tests substitute fakes. Each call returns "" or the one-line reason it failed.
class CounterBackend {
 public:
  virtual ~CounterBackend() = default;
  // Opens the libraries and checks that this process can profile (device, permission).
  virtual std::string load() = 0;
  // Starts a session on the current CUDA context for `metrics`, at most `max_ranges` ranges a
  // pass; `passes` receives the number of replay passes.
  virtual std::string begin(const std::vector<std::string>& metrics, int max_ranges,
                            int& passes) = 0;
  virtual std::string begin_pass() = 0;
  virtual void push_range(const std::string& name) = 0;
  virtual void pop_range() = 0;
  // Ends a pass (after the work has finished); `done` is set once every pass was submitted.
  virtual std::string end_pass(bool& done) = 0;
  // The values of `metrics` per range, in range order; `names` receives the range names.
  virtual std::string evaluate(std::vector<std::string>& names,
                               std::vector<std::vector<double>>& values) = 0;
  virtual void end() = 0;  // always safe, also after a failure
};
std::unique_ptr<CounterBackend> make_cupti_backend();

// Seen on the H200 (driver 580, CUPTI 13.0): the first work submitted after a range-profiler
// session can be dropped (a poisoned output came back untouched). This runs one short kernel and
// waits for it, to take that place; errors are left for the next real call to report.
void settle_after_profiling();

// The collector: turns the backend's values into CounterValues, keeps the first reason counters
// are unavailable, and times the collection. After every session it began (however it ended) it
// calls `settle` once: the one place the workaround above runs.
class CounterCollector {
 public:
  explicit CounterCollector(std::unique_ptr<CounterBackend> backend = make_cupti_backend(),
                            std::function<void()> settle = settle_after_profiling);
  ~CounterCollector();
  // "" when counters can be collected here, else why not (checked once, then cached).
  const std::string& unavailable();
  // Calls `pass(ranges)` once per replay pass: it enqueues the work, opening a range around
  // each launch through `ranges`, and waits for it. `max_ranges` bounds the ranges of a pass
  // (the bitonic sort's first step launches 212 kernels at its default size, 300 at 2^24).
  CounterReport collect(const std::function<void(RangeSink& ranges)>& pass, int max_ranges = 1024);
  // Called after each replay pass: the GUI's long jobs count a pass as a sign of life, since one
  // step's counters replay its kernels tens of times.
  std::function<void()> on_pass;

 private:
  std::unique_ptr<CounterBackend> m_backend;
  std::function<void()> m_settle;
  bool m_checked = false;
  std::string m_unavailable;
};

}  // namespace lab
