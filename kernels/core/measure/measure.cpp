#include "measure.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>

#include "delay.h"
#include "stats.h"

namespace lab {

double median_noise(const std::vector<double>& us) {
  const size_t n = us.size();
  if (n < 2) return NAN;
  double mean = 0;
  for (double v : us) mean += v;
  mean /= double(n);
  double ss = 0;
  for (double v : us) ss += (v - mean) * (v - mean);
  const double sd = std::sqrt(ss / double(n - 1));
  const double med = median(us);
  // The standard error of a median is sqrt(pi / 2) times the mean's for a normal sample.
  return med > 0 ? 1.2533 * sd / std::sqrt(double(n)) / med : NAN;
}

Timing summarize(const std::vector<double>& us) {
  Timing t;
  t.n = int(us.size());
  if (us.empty()) return t;
  t.median_us = median(us);
  t.p95_us = percentile(us, 95);
  t.min_us = *std::min_element(us.begin(), us.end());
  t.noise = median_noise(us);
  return t;
}

bool ClockDrift::moved() const {
  return std::isfinite(before_mhz) && std::isfinite(after_mhz) && before_mhz > 0 &&
         std::fabs(after_mhz - before_mhz) > 0.02 * before_mhz;
}

std::string ClockDrift::note() const {
  if (!moved()) return "";
  char buf[160];
  std::snprintf(buf, sizeof buf,
                "the SM clock moved from %.0f to %.0f MHz during the run (boost or throttling): "
                "the figures mix clocks",
                before_mhz, after_mhz);
  return buf;
}

void timed_run(Runner& r, const MeasureOptions& o, size_t stage, const ResolvedStage* cfg) {
  r.run_queued(o.queue_ahead_us, stage, cfg, o.cold_l2);
}

namespace {

double clock_now(Runner& r) {
  return r.backend() == Backend::Cuda ? measure_sm_clock_mhz(r.stream()) : NAN;
}

// Read outside the timed runs (NVML or sysfs: well under a millisecond, host only).
DeviceState state_now(Runner& r) {
  return r.backend() == Backend::Cuda
             ? read_device_state()
             : unavailable_state("CPU references: no GPU ran, its state is not recorded");
}

// Timed runs of `one` (which appends each run's total to `total`) until the count, or the noise
// target, is reached.
template <typename Run>
void timed_loop(const MeasureOptions& o, std::vector<double>& total, Run&& one) {
  for (int k = 1; k <= std::max(1, o.reps); ++k) {
    one();
    if (o.max_noise > 0 && k >= std::max(2, o.min_reps) && k % 10 == 0) {
      const double noise = median_noise(total);
      if (std::isfinite(noise) && noise <= o.max_noise) return;
    }
  }
}

void take_launches(const Runner& r, std::vector<LaunchRecord>& recs,
                   std::vector<std::vector<double>>& per_launch) {
  const auto& L = r.launches();
  per_launch.resize(L.size());
  for (size_t n = 0; n < L.size(); ++n)
    if (std::isfinite(L[n].ms)) per_launch[n].push_back(1e3 * L[n].ms);
  recs = L;
}

Measurement finish(const std::vector<LaunchRecord>& recs,
                   const std::vector<std::vector<double>>& per_launch,
                   const std::vector<double>& total) {
  Measurement m;
  for (size_t n = 0; n < recs.size(); ++n)
    m.launches.push_back(
        {recs[n], summarize(n < per_launch.size() ? per_launch[n] : std::vector<double>{})});
  m.total = summarize(total);
  m.reps = int(total.size());
  return m;
}

}  // namespace

Measurement measure_stage(Runner& r, size_t i, const ResolvedStage& cfg, const MeasureOptions& o) {
  for (int w = 0; w < o.warmup; ++w) {
    if (o.poison_each) r.poison_outputs(i, &cfg);
    r.run_stage(i, &cfg);
  }
  DeviceState state_start = state_now(r);
  const double before = clock_now(r);
  std::vector<LaunchRecord> recs;
  std::vector<std::vector<double>> per_launch;
  std::vector<double> total;
  timed_loop(o, total, [&] {
    if (o.poison_each) r.poison_outputs(i, &cfg);  // enqueued before the run's delay and events
    timed_run(r, o, i, &cfg);
    take_launches(r, recs, per_launch);
    total.push_back(1e3 * r.stage_ms()[i]);
  });
  Measurement m = finish(recs, per_launch, total);
  m.clock = {before, clock_now(r)};
  m.state_start = std::move(state_start);
  m.state_end = state_now(r);
  return m;
}

Measurement measure_frame(Runner& r, FrameMode mode, const MeasureOptions& o) {
  const bool graph = r.graph(), per_launch_timing = r.per_launch_timing();
  r.set_graph(mode == FrameMode::Graph);
  r.set_per_launch_timing(mode == FrameMode::PerLaunch);
  Measurement m;
  try {
    for (int w = 0; w < o.warmup; ++w) r.run();
    DeviceState state_start = state_now(r);
    const double before = clock_now(r);
    std::vector<LaunchRecord> recs;
    std::vector<std::vector<double>> per_launch;
    std::vector<double> total;
    timed_loop(o, total, [&] {
      timed_run(r, o);
      take_launches(r, recs, per_launch);
      total.push_back(1e3 * r.frame_ms());
    });
    m = finish(recs, per_launch, total);
    if (mode != FrameMode::PerLaunch) m.launches.clear();  // no per-launch times exist
    m.clock = {before, clock_now(r)};
    m.state_start = std::move(state_start);
    m.state_end = state_now(r);
  } catch (...) {
    r.set_graph(graph);
    r.set_per_launch_timing(per_launch_timing);
    throw;
  }
  r.set_graph(graph);
  r.set_per_launch_timing(per_launch_timing);
  return m;
}

// ---- hardware counters ----------------------------------------------------------------------

namespace {
// Forwards the runner's ranges to the collector's sink for the duration of one pass.
struct RangeScope {
  Runner& r;
  RangeScope(Runner& runner, RangeSink& s) : r(runner) { r.set_ranges(&s); }
  ~RangeScope() {
    r.set_ranges(nullptr);
    r.set_flush_before_launch(false);
  }
};
}  // namespace

CounterRun collect_counters(Runner& r, CounterCollector& c, size_t stage,
                            const ResolvedStage* cfg) {
  CounterRun out;
  if (r.backend() != Backend::Cuda) {
    out.report.why = "counters unavailable: the CPU references are running (no kernels)";
    return out;
  }
  if (!c.unavailable().empty()) {
    out.report.why = c.unavailable();
    return out;
  }
  // A graph replays without the host: its launches would open no ranges.
  const bool graph = r.graph();
  r.set_graph(false);
  try {
    out.report = c.collect([&](RangeSink& sink) {
      r.set_flush_before_launch(true);  // outside each range (RangeScope turns it off)
      const RangeScope scope(r, sink);
      if (stage == SIZE_MAX)
        r.run();
      else
        r.run_stage(stage, cfg);
      out.launches = r.launches();
    });
  } catch (...) {
    r.set_graph(graph);
    throw;
  }
  r.set_graph(graph);
  // A launch in the kernel host opened no range here: its counters come from the child, which
  // collects them on a launch of its own (after this session: one profiler at a time).
  if (out.report.ok) {
    for (size_t k = 0; k < out.launches.size() && k <= out.report.ranges.size(); ++k) {
      if (!out.launches[k].remote) continue;
      std::string why;
      CounterValues v = r.remote_counters(out.launches[k].stage, &why);
      v.range = r.stages()[out.launches[k].stage].label() + " " + out.launches[k].kernel;
      if (!why.empty()) {
        out.report.ok = false;
        out.report.why = "counters of the kernel host's launch: " + why;
        break;
      }
      out.report.ranges.insert(out.report.ranges.begin() + long(k), std::move(v));
    }
  }
  if (out.report.ok && out.report.ranges.size() != out.launches.size()) {
    std::string names;
    for (size_t k = 0; k < out.report.ranges.size() && k < 40; ++k)
      names += (k ? "; " : "") + out.report.ranges[k].range;
    out.report.ok = false;
    out.report.why = "counters: " + std::to_string(out.report.ranges.size()) + " ranges for " +
                     std::to_string(out.launches.size()) + " launches (" + names + ")";
  }
  return out;
}

namespace {
std::string shell_quote(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                        "0123456789_-./=:,@+") == std::string::npos)
    return s;
  std::string q = "'";
  for (char ch : s) q += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return q + "'";
}

// The shortest text that reads back as the same double.
std::string fmt_param(double v) {
  char buf[32];
  for (int digits = 6; digits <= 17; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}
}  // namespace

std::string ncu_command(const std::string& exe, const std::string& input_args,
                        const std::vector<ResolvedStage>& stages, size_t stage, int launches) {
  const ResolvedStage& s = stages.at(stage);
  std::ostringstream cmd;
  cmd << "ncu --clock-control none --cache-control all --nvtx --nvtx-include "
      << shell_quote(s.op->def.name + "/" + s.variant_def().name + "/" + s.block.str() + "/" +
                     math_name(s.math) + "/")
      // run --cold's flush kernels run inside the stage's range: profile only the stage's own.
      << " --kernel-name " << shell_quote("regex:^(?!.*(_flush_kernel|discard_kernel))")
      << " --launch-count " << std::max(1, launches) << " --metrics ";
  // Jetson Orin's GPU (GA10B, sm_87) has no dram__ metrics, and ncu refuses a command that names
  // one it lacks.
  const DeviceInfo& d = device_info();
  const bool orin = d.present && d.major == 8 && d.minor == 7;
  bool first = true;
  for (const std::string& m : counter_metrics()) {
    if (orin && m.rfind("dram__", 0) == 0) continue;
    cmd << (first ? "" : ",") << m;
    first = false;
  }
  cmd << " " << shell_quote(exe) << " run --frames 1 --cold " << input_args;
  for (const ResolvedStage& st : stages) {
    const std::string& op = st.op->def.name;
    if (st.variant_def().live) {
      cmd << "  # " << op << " runs a live kernel: save it and add --kernel-file FILE --replace "
          << op;
      continue;
    }
    cmd << " --variant " << op << "=" << st.variant_def().name << " --block " << op << "="
        << st.block.str() << " --math " << op << "=" << math_name(st.math);
    for (const auto& [name, value] : st.params)
      cmd << " --param " << shell_quote(op + "." + name + "=" + fmt_param(value));
  }
  return cmd.str();
}

// ---- checking -------------------------------------------------------------------------------

void fill_fused_slots(Runner& r, size_t i) {
  for (size_t j = 0; j < i && j < r.stages().size(); ++j)
    if (r.skipped(j) && !r.disabled(j)) r.run_stage(j);
}

std::vector<CheckResult> check_stage(Runner& r, size_t i, bool quick,
                                     const std::function<void(const CheckResult&)>& each) {
  fill_fused_slots(r, i);
  const ResolvedStage configured = r.stages().at(i);
  const DeviceInfo* dev = r.backend() == Backend::Cuda ? &device_info() : nullptr;
  // A fused variant has its own reference (over other inputs): one per reference function.
  std::map<ReferenceFn, std::vector<HostImage>> refs;
  std::vector<CheckResult> out;
  const auto& variants = configured.op->def.variants;
  for (size_t v = 0; v < variants.size(); ++v) {
    std::vector<Block> blocks = variants[v].blocks;
    if (quick) blocks = {variants[v].default_block};
    for (const Block& b : blocks)
      for (MathMode m : {MathMode::Precise, MathMode::Fast}) {
        CheckResult res;
        res.cfg = configured;
        res.cfg.variant = v, res.cfg.block = b, res.cfg.math = m;
        if (!refs.count(res.cfg.reference())) refs[res.cfg.reference()] = r.reference(i, &res.cfg);
        res.why = block_refusal(variants[v], b, dev);
        res.refused = !res.why.empty();
        if (!res.refused) {
          r.poison_outputs(i, &res.cfg);
          try {
            r.run_stage(i, &res.cfg);
            res.launches = r.launches();
            res.diff = r.compare(i, refs[res.cfg.reference()], m, &res.cfg);
          } catch (const Error& e) {
            // A shape the variant allows but this build of the kernel cannot launch (its
            // registers on this GPU): refused with the reason, like the checks above.
            if (e.kind() != ErrorKind::Refused) throw;
            res.refused = res.at_launch = true;
            res.why = e.what();
          }
        }
        if (each) each(res);
        out.push_back(std::move(res));
      }
  }
  r.run_stage(i);  // the configured variant's output feeds the next stage
  return out;
}

StageCompare compare_stage(const Runner& r, size_t i) {
  StageCompare c;
  c.reference = r.reference(i);
  c.diff = r.compare(i, c.reference, r.stages().at(i).math);
  return c;
}

}  // namespace lab
