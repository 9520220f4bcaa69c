#include "counters.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <utility>

#include "check.h"
#include "delay.h"

namespace lab {

namespace {

// counter_metrics() starts with these, in this order; the stall reasons follow.
enum Metric {
  kOccupancy,
  kDramRead,
  kDramWrite,
  kL2Hit,
  kSmThroughput,
  kMemThroughput,
  kDuration,
  kFadd,
  kFmul,
  kFfma,
  kDadd,
  kDmul,
  kDfma,
  kInstExecuted,
  kFirstStall
};

// CUPTI's user replay needs one pass per counter group (14 for the lab's metrics on GH100);
// far more means a backend that never reports the last pass.
constexpr int kMaxPasses = 64;

std::string stall_metric(const std::string& reason) {
  return "smsp__average_warps_issue_stalled_" + reason + "_per_issue_active.ratio";
}

}  // namespace

CounterValues sum_counters(const std::vector<CounterValues>& ranges,
                           const std::function<bool(size_t)>& pick) {
  CounterValues s;
  s.dram_read_bytes = s.dram_write_bytes = s.fp32_flops = s.fp64_flops = s.inst_executed = 0;
  for (size_t i = 0; i < ranges.size(); ++i) {
    if (pick && !pick(i)) continue;
    s.dram_read_bytes += ranges[i].dram_read_bytes;
    s.dram_write_bytes += ranges[i].dram_write_bytes;
    s.fp32_flops += ranges[i].fp32_flops;
    s.fp64_flops += ranges[i].fp64_flops;
    s.inst_executed += ranges[i].inst_executed;
  }
  return s;
}

const std::vector<std::string>& counter_metrics() {
  static const std::vector<std::string> metrics = [] {
    std::vector<std::string> m = {
        "sm__warps_active.avg.pct_of_peak_sustained_active",
        "dram__bytes_read.sum",
        "dram__bytes_write.sum",
        "lts__t_sector_hit_rate.pct",
        "sm__throughput.avg.pct_of_peak_sustained_elapsed",
        "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
        "gpu__time_duration.sum",
        // Executed floating-point instructions by thread (predicated-off lanes excluded): the
        // measured FLOPs of the roofline, as ncu's roofline section counts them.
        "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum",
        "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum",
        "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum",
        "smsp__sass_thread_inst_executed_op_dadd_pred_on.sum",
        "smsp__sass_thread_inst_executed_op_dmul_pred_on.sum",
        "smsp__sass_thread_inst_executed_op_dfma_pred_on.sum",
        // Warp instructions executed: what the issue slots of an SM-bound kernel spend.
        "smsp__inst_executed.sum",
    };
    for (const std::string& r : stall_reasons()) m.push_back(stall_metric(r));
    return m;
  }();
  return metrics;
}

// Every one exists on GH100 (sm_90) and GA10B (Orin, sm_87), checked against CUPTI 13.0's
// metric tables; a metric a chip lacks is left out of the session and reads NaN.
const std::vector<std::string>& stall_reasons() {
  static const std::vector<std::string> reasons = {
      "long_scoreboard",  "short_scoreboard",   "barrier",      "membar",   "mio_throttle",
      "lg_throttle",      "math_pipe_throttle", "tex_throttle", "wait",     "not_selected",
      "selected",         "dispatch_stall",     "drain",        "imc_miss", "no_instruction",
      "branch_resolving", "sleeping",           "misc",
  };
  return reasons;
}

std::string stall_words(const std::string& reason) {
  static const std::pair<const char*, const char*> words[] = {
      {"long_scoreboard", "waiting on global or local memory (long scoreboard)"},
      {"short_scoreboard", "waiting on shared memory or special math (short scoreboard)"},
      {"barrier", "waiting at a barrier (__syncthreads)"},
      {"membar", "waiting at a memory fence (__threadfence)"},
      {"mio_throttle", "the shared-memory and special-math queue is full (MIO throttle)"},
      {"lg_throttle", "the global and local memory queue is full (LG throttle)"},
      {"math_pipe_throttle", "the math pipe is busy (math pipe throttle)"},
      {"tex_throttle", "the texture unit is busy (tex throttle)"},
      {"wait", "waiting for a fixed-latency dependency (wait)"},
      {"not_selected", "ready but another warp was picked (not selected)"},
      {"selected", "issuing an instruction (selected; not a stall)"},
      {"dispatch_stall", "the dispatcher held the instruction back (dispatch stall)"},
      {"drain", "waiting for its stores to drain before exiting (drain)"},
      {"imc_miss", "waiting for a constant-cache miss (IMC miss)"},
      {"no_instruction", "waiting for instructions to be fetched (no instruction)"},
      {"branch_resolving", "waiting for a branch target to be computed (branch resolving)"},
      {"sleeping", "sleeping (__nanosleep, or all its threads blocked)"},
      {"misc", "other reasons (misc)"},
  };
  for (const auto& w : words)
    if (reason == w.first) return w.second;
  return reason;
}

void settle_after_profiling() {
  try {
    measure_sm_clock_mhz(nullptr);
  } catch (const Error&) {  // a context already lost says so at its next real call
  }
}

CounterCollector::CounterCollector(std::unique_ptr<CounterBackend> backend,
                                   std::function<void()> settle)
    : m_backend(std::move(backend)), m_settle(std::move(settle)) {}

CounterCollector::~CounterCollector() = default;

const std::string& CounterCollector::unavailable() {
  if (!m_checked) {
    m_checked = true;
    m_unavailable = m_backend ? m_backend->load() : "counters unavailable: no counter backend";
  }
  return m_unavailable;
}

CounterReport CounterCollector::collect(const std::function<void(RangeSink& ranges)>& pass,
                                        int max_ranges) {
  const auto start = std::chrono::steady_clock::now();
  CounterReport report;
  auto finish = [&](std::string why) {
    report.ok = why.empty();
    report.why = std::move(why);
    if (!report.ok) report.ranges.clear();
    report.ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    return report;
  };
  if (!unavailable().empty()) return finish(m_unavailable);
  if (max_ranges < 1) return finish("counters failed: max_ranges must be at least 1");

  class Sink : public RangeSink {
   public:
    explicit Sink(CounterBackend& b) : m_b(b) {}
    void push(const std::string& name) override { m_b.push_range(name); }
    void pop() override { m_b.pop_range(); }

   private:
    CounterBackend& m_b;
  };
  // end() and the settle also when `pass` throws (a CUDA error of the lab's own), before that
  // propagates.
  struct Ender {
    CounterBackend& b;
    const std::function<void()>& settle;
    ~Ender() {
      b.end();
      if (settle) settle();
    }
  };

  const std::vector<std::string>& metrics = counter_metrics();
  std::vector<std::string> names;
  std::vector<std::vector<double>> values;
  std::string why;
  {
    Ender ender{*m_backend, m_settle};
    Sink sink(*m_backend);
    why = m_backend->begin(metrics, max_ranges, report.passes);
    bool done = false;
    for (int p = 0; why.empty() && !done; ++p) {
      if (p == kMaxPasses) {
        why = "counters failed: CUPTI still asked for passes after " + std::to_string(kMaxPasses);
        break;
      }
      why = m_backend->begin_pass();
      if (!why.empty()) break;
      pass(sink);
      why = m_backend->end_pass(done);
      if (on_pass) on_pass();
    }
    if (why.empty()) why = m_backend->evaluate(names, values);
  }
  if (!why.empty()) return finish(why);

  for (size_t r = 0; r < names.size() && r < values.size(); ++r) {
    const std::vector<double>& v = values[r];
    auto at = [&](size_t k) { return k < v.size() ? v[k] : NAN; };
    CounterValues c;
    c.range = names[r];
    c.achieved_occupancy_pct = at(kOccupancy);
    c.dram_read_bytes = at(kDramRead);
    c.dram_write_bytes = at(kDramWrite);
    // A hit rate is at most 100 %; a small range reads up to ~102 % from counter noise.
    c.l2_hit_pct = std::isfinite(at(kL2Hit)) ? std::min(100.0, at(kL2Hit)) : NAN;
    c.sm_throughput_pct = at(kSmThroughput);
    c.mem_throughput_pct = at(kMemThroughput);
    c.duration_ns = at(kDuration);
    c.fp32_flops = at(kFadd) + at(kFmul) + 2 * at(kFfma);  // an FMA is two operations
    c.fp64_flops = at(kDadd) + at(kDmul) + 2 * at(kDfma);
    c.inst_executed = at(kInstExecuted);
    const std::vector<std::string>& reasons = stall_reasons();
    for (size_t s = 0; s < reasons.size(); ++s) {
      const double x = at(kFirstStall + s);
      // "selected" is the issuing warp, not a stall; a zero says nothing either.
      if (reasons[s] != "selected" && std::isfinite(x) && x > 0)
        c.stalls.push_back({reasons[s], stall_words(reasons[s]), x});
    }
    std::stable_sort(
        c.stalls.begin(), c.stalls.end(),
        [](const StallReason& a, const StallReason& b) { return a.per_issue > b.per_issue; });
    c.top_stalls.assign(c.stalls.begin(), c.stalls.begin() + std::min<size_t>(3, c.stalls.size()));
    report.ranges.push_back(std::move(c));
  }
  return finish("");
}

}  // namespace lab
