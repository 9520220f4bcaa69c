// The one way the lab measures and checks kernels. `bench`, `check`, the GUI's engine job and
// the tests all call these functions, so a figure means the same wherever it is shown: the
// GUI's median for a launch is the median `bench` prints for the same configuration and input.
//
// Timing follows nvbench's discipline: the launches are queued behind a GPU-side delay (so
// their event pairs time the kernels, not the host's launch latency), warm-up runs first, the
// statistics are medians and tails, an optional L2 flush makes DRAM-cold figures, the run can
// stop once the median is known well enough, and a change of the SM clock during the run is
// reported.
#pragma once

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "device_state.h"
#include "runner.h"
#include "subprocess.h"  // self_executable(), for ncu_command

namespace lab {

struct MeasureOptions {
  int warmup = 10;              // untimed runs first (caches, clocks, lazy module loading)
  int reps = 100;               // timed runs, at most
  int min_reps = 20;            // with max_noise: at least this many
  double max_noise = 0;         // > 0: stop once the median's relative standard error is below
  bool cold_l2 = false;         // flush the L2 before each timed run (DRAM-cold figures)
  double queue_ahead_us = 200;  // the GPU-side delay the launches queue behind (0: none)
  // measure_stage: poison the stage's outputs before each warm-up and timed run, outside its
  // events (exercise submissions: a kernel that skips work once its output looks written fails
  // the check after the last run).
  bool poison_each = false;
};

// Order statistics of one timed quantity, in microseconds.
struct Timing {
  double median_us = NAN, p95_us = NAN, min_us = NAN;
  double noise = NAN;  // the median's relative standard error (1.2533 s / sqrt(n) / median)
  int n = 0;
};
Timing summarize(const std::vector<double>& us);
// The median's relative standard error of a sample (NaN under two values).
double median_noise(const std::vector<double>& us);

// The SM clock before and after a measurement (MHz, from clock64 over %globaltimer on the GPU).
struct ClockDrift {
  double before_mhz = NAN, after_mhz = NAN;
  bool moved() const;        // by more than 2 %
  std::string note() const;  // "" unless it moved
};

// One timed run, exactly as every path times it: the queue-ahead delay, the L2 flush when cold,
// then the whole pipeline (stage == SIZE_MAX) or one stage with `cfg`, collected. The GUI calls
// this once a frame; the measure_* functions below call it in a loop.
void timed_run(Runner& r, const MeasureOptions& o, size_t stage = SIZE_MAX,
               const ResolvedStage* cfg = nullptr);

// A launch's record and its timing over the runs.
struct LaunchTiming {
  LaunchRecord rec;
  Timing t;
};

struct Measurement {
  std::vector<LaunchTiming> launches;  // per launch, in launch order (empty in a graph)
  Timing total;                        // the stage's launches together, or the frame
  ClockDrift clock;
  // The device's state just before the first timed run and just after the last (clocks, power,
  // temperature, throttling; device_state.h): every figure carries the state it was taken in.
  DeviceState state_start, state_end;
  int reps = 0;  // timed runs made
  // state_warnings(state_start, state_end): what moved or slowed the clocks, and what to do.
  std::vector<std::string> state_warnings() const {
    return lab::state_warnings(state_start, state_end);
  }
};

// Stage i with `cfg`: warm-up, then timed runs until reps (or the noise target). Throws
// Error(Refused) when the device refuses the configuration at launch.
Measurement measure_stage(Runner& r, size_t i, const ResolvedStage& cfg, const MeasureOptions& o);

// The whole pipeline as it is configured: each launch between its own event pair (PerLaunch;
// total = first start to last end), one event pair around the frame (Stream), or replayed as
// one CUDA graph (Graph). The runner's graph and per-launch settings are restored after.
enum class FrameMode { PerLaunch, Stream, Graph };
Measurement measure_frame(Runner& r, FrameMode mode, const MeasureOptions& o);

// ---- hardware counters ----------------------------------------------------------------------

// The counters of stage i with `cfg` (stage == SIZE_MAX: the whole pipeline as configured, stage
// by stage, outside any graph), one CounterValues per launch record, in launch order; never part
// of a timing sample. On the CPU backend, or where counters are unavailable, report.ok is false
// and report.why says why.
struct CounterRun {
  CounterReport report;
  std::vector<LaunchRecord> launches;  // report.ranges[n] belongs to launches[n]
};
// Counters are DRAM-cold, whatever the timings were: the L2 is flushed before every launch,
// outside its range, as ncu does by default (--cache-control all). Their DRAM bytes are then
// what the launch must fetch and write, comparable with the lab's bytes model and with ncu.
// (CUPTI's passes disturb the L2 between replays anyway: warm counters would not be warm.)
CounterRun collect_counters(Runner& r, CounterCollector& c, size_t stage = SIZE_MAX,
                            const ResolvedStage* cfg = nullptr);

// The command line that profiles stage `stage`'s kernels of this configuration with ncu and the
// lab's metrics: `exe run --frames 1 --cold` on the same input (`input_args`: "--input F --size
// WxH", or "--lab NAME --size S --seed N"), its kernels picked by the runner's NVTX ranges and
// the flush kernels left out by name. `--cold` flushes the L2 before each kernel as the lab's
// counters do, so both sides start from the same cache state (ncu's --cache-control all
// flushes once more). A live kernel cannot be named on a command line: the line then says so.
std::string ncu_command(const std::string& exe, const std::string& input_args,
                        const std::vector<ResolvedStage>& stages, size_t stage, int launches);

// ---- checking -------------------------------------------------------------------------------

// One configuration of a stage against its CPU reference.
struct CheckResult {
  ResolvedStage cfg;
  bool refused = false;    // the device cannot run it (why): not a failure
  bool at_launch = false;  // refused by the launch itself (this build's registers), not a rule
  std::string why;
  DiffStats diff;
  std::vector<LaunchRecord> launches;  // what ran
  bool pass() const { return refused || diff.pass(); }
  // Another step's code that ran for this one (LaunchRecord::runs); empty: its own.
  std::string runs() const { return launches.empty() ? "" : launches.front().runs; }
};

// Runs the stages before stage i that a fused variant skips (nms/v5_fused_front skips blur,
// sobel and harris), so that the slots they write hold this frame's data: the other variants of
// stage i, or a skipped stage checked on its own, read them.
void fill_fused_slots(Runner& r, size_t i);

// Every variant x allowed block (only the default block when quick) x math mode of stage i
// against its CPU reference on the current input slots (fill_fused_slots first), each with its
// outputs poisoned first; `each` sees every result as it is made. The stage's configured output
// is restored after.
std::vector<CheckResult> check_stage(Runner& r, size_t i, bool quick,
                                     const std::function<void(const CheckResult&)>& each = {});

// Stage i as configured against its reference: the reference outputs and the statistics (what
// the GUI's Diff panel shows).
struct StageCompare {
  std::vector<HostImage> reference;
  DiffStats diff;
};
StageCompare compare_stage(const Runner& r, size_t i);

}  // namespace lab
