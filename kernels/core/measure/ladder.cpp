#include "ladder.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "device.h"
#include "json_number.h"
#include "text.h"

namespace lab {

std::vector<ResolvedStage> ladder_configs(const Runner& r, size_t i, const LadderSpec& s) {
  const ResolvedStage& configured = r.stages().at(i);
  const auto& variants = configured.op->def.variants;
  const DeviceInfo* dev = r.backend() == Backend::Cuda ? &device_info() : nullptr;
  std::vector<ResolvedStage> out;
  for (size_t v = 0; v < variants.size(); ++v) {
    if (!s.every_variant && v != configured.variant) continue;
    std::vector<Block> blocks{v == configured.variant ? configured.block
                                                      : variants[v].default_block};
    if (s.every_block) blocks = variants[v].blocks;
    std::vector<MathMode> maths{configured.math};
    if (s.both_math) maths = {MathMode::Precise, MathMode::Fast};
    for (const Block& b : blocks)
      for (MathMode m : maths) {
        if (!block_refusal(variants[v], b, dev).empty()) continue;
        ResolvedStage cfg = configured;
        cfg.variant = v, cfg.block = b, cfg.math = m;
        out.push_back(cfg);
      }
  }
  return out;
}

std::string step_text(const ResolvedStage& s) {
  return s.variant_def().name + " " + s.block.str() + " " + math_name(s.math);
}

double CopyCeiling::at(double bytes) {
  // Half read, half written, whole 256-byte lines, at least 1 MiB (below, the copy is launch-
  // bound and says nothing about bandwidth).
  const size_t half = std::max(size_t(1) << 20, size_t(bytes / 2) & ~size_t(255));
  auto it = m_gbs.find(half);
  if (it == m_gbs.end()) it = m_gbs.emplace(half, measure_copy_bandwidth(half, 50)).first;
  return it->second;
}

// ---- a step's derived figures ----------------------------------------------------------------

double LadderStep::gbs() const {
  return model_bytes > 0 ? model_bytes / (median_us() * 1e-6) / 1e9 : NAN;
}

double LadderStep::gflops() const {
  return flops > 0 ? flops / (median_us() * 1e-6) / 1e9 : NAN;
}

int LadderStep::regs() const {
  int most = 0;
  for (const LaunchTiming& l : meas.launches)
    if (l.rec.func) most = std::max(most, l.rec.attrs.regs);
  return most;
}

size_t LadderStep::smem() const {
  size_t most = 0;
  for (const LaunchTiming& l : meas.launches)
    if (l.rec.func) most = std::max(most, l.rec.attrs.static_smem + l.rec.dyn_smem);
  return most;
}

size_t LadderStep::local_bytes() const {
  size_t most = 0;
  for (const LaunchTiming& l : meas.launches)
    if (l.rec.func) most = std::max(most, l.rec.attrs.local_bytes);
  return most;
}

double LadderStep::theoretical_occupancy() const {
  for (const LaunchTiming& l : meas.launches)
    if (l.rec.func) return l.rec.est.occupancy;
  return NAN;
}

double LadderStep::achieved_occupancy() const {
  if (!counted) return NAN;
  double sum = 0, weight = 0;
  for (const CounterValues& v : counters.report.ranges) {
    const double w = std::isfinite(v.duration_ns) && v.duration_ns > 0 ? v.duration_ns : 1;
    if (!std::isfinite(v.achieved_occupancy_pct)) continue;
    sum += w * v.achieved_occupancy_pct / 100, weight += w;
  }
  return weight > 0 ? sum / weight : NAN;
}

double LadderStep::dram_bytes() const {
  if (!counted || counters.report.ranges.empty()) return NAN;
  const CounterValues sum = sum_counters(counters.report.ranges);
  return sum.dram_read_bytes + sum.dram_write_bytes;
}

double LadderStep::measured_flops() const {
  if (!counted || counters.report.ranges.empty()) return NAN;
  const CounterValues sum = sum_counters(counters.report.ranges);
  return sum.fp32_flops + sum.fp64_flops;
}

// ---- measuring -------------------------------------------------------------------------------

namespace {

// The op's FLOP model for the stage's current input slots (0: the op has none).
double stage_flops(const Runner& r, const ResolvedStage& cfg) {
  if (!cfg.op->def.flops) return 0;
  std::vector<ImageDesc> in;
  for (const std::string& name : cfg.inputs())
    for (const SlotInfo& slot : r.slots())
      if (slot.name == slot_name(name)) in.push_back(slot.desc);
  return cfg.op->def.flops(in, cfg.params);
}

}  // namespace

LadderStep measure_step(Runner& r, size_t i, const ResolvedStage& cfg, const MeasureOptions& m,
                        CounterCollector* counters, CopyCeiling& copy) {
  LadderStep s;
  s.cfg = cfg;
  r.run_stage(i, &cfg);  // a refusal (registers, shared memory) shows here, untimed
  s.meas = measure_stage(r, i, cfg, m);
  s.model_bytes = r.stage_bytes(i, &cfg);
  s.flops = stage_flops(r, cfg);
  if (r.backend() == Backend::Cuda) s.copy_same_gbs = copy.at(s.model_bytes);
  if (counters) {
    // A step whose counters cannot be had (a library's kernels past the ranges a pass holds, a
    // profiler refusal) is measured without them; its report says why.
    s.counters = collect_counters(r, *counters, i, &cfg);
    s.counted = s.counters.report.ok;
  }
  return s;
}

double Ladder::ceiling_us() const {
  double best = NAN;
  for (const LadderStep& s : steps)
    if (s.cfg.variant_def().name == ceiling_variant && !(s.median_us() >= best))
      best = s.median_us();
  return best;
}

double Ladder::pct_of_ceiling(const LadderStep& s) const {
  if (!ceiling_variant.empty()) {
    const double c = ceiling_us();
    return std::isfinite(c) && s.median_us() > 0 ? 100 * c / s.median_us() : NAN;
  }
  return s.copy_same_gbs > 0 && std::isfinite(s.gbs()) ? 100 * s.gbs() / s.copy_same_gbs : NAN;
}

std::string Ladder::ceiling_name() const {
  return !ceiling_variant.empty()
             ? "% of " + ceiling_variant + " (its best time over the step's)"
             : "% of a device copy moving the same bytes, measured in this run";
}

MeasureOptions step_options(const Runner& r, MeasureOptions m) {
  if (r.backend() != Backend::Cuda) {
    m.warmup = std::min(m.warmup, 1);
    m.reps = std::min(m.reps, 5);
    m.min_reps = std::min(m.min_reps, m.reps);
  }
  return m;
}

Ladder run_ladder(Runner& r, size_t i, const LadderSpec& spec, const MeasureOptions& given,
                  CounterCollector* counters, const LadderProgress& progress) {
  Ladder l;
  l.stage = i;
  const ResolvedStage& configured = r.stages().at(i);
  l.op = configured.op->def.name;
  for (const VariantDef& v : configured.op->def.variants)
    if (v.ceiling && l.ceiling_variant.empty()) l.ceiling_variant = v.name;
  const MeasureOptions m = step_options(r, given);
  const bool gpu = r.backend() == Backend::Cuda;
  l.device = gpu ? device_info().name + " (" + device_info().arch() + ")"
                 : "CPU references (no GPU in use)";
  char how[256];
  std::snprintf(how, sizeof how, "warm-up %d, median of %s%d timed runs; %s%s", m.warmup,
                m.max_noise > 0 ? "up to " : "", m.reps,
                gpu ? (m.cold_l2 ? "L2 flushed before each run (DRAM-cold)"
                                 : "L2-warm (the previous run's data left in the L2)")
                    : "host wall clock of the reference",
                gpu && m.queue_ahead_us > 0 ? ", queued behind a GPU-side delay" : "");
  l.measured = how;
  if (gpu) l.copy_gbs = measure_copy_bandwidth();
  CopyCeiling copy;
  const std::vector<ResolvedStage> configs = ladder_configs(r, i, spec);
  fill_fused_slots(r, i);  // the unfused steps read slots a fused configuration never writes
  try {
    for (size_t k = 0; k < configs.size(); ++k) {
      try {
        LadderStep s = measure_step(r, i, configs[k], m, counters, copy);
        if (s.meas.clock.moved())
          l.notes.push_back(configs[k].label() + ": " + s.meas.clock.note());
        for (const std::string& w : s.meas.state_warnings())
          if (std::find(l.notes.begin(), l.notes.end(), w) == l.notes.end()) l.notes.push_back(w);
        l.steps.push_back(std::move(s));
      } catch (const Error& e) {
        if (e.kind() != ErrorKind::Refused) throw;
        l.notes.push_back("skipped " + configs[k].label() + ": " + e.what());
      }
      if (progress && !progress(k + 1, configs.size())) {
        l.notes.push_back("stopped after " + std::to_string(k + 1) + " of " +
                          std::to_string(configs.size()) + " steps");
        break;
      }
    }
  } catch (...) {
    r.run_stage(i);
    throw;
  }
  r.run_stage(i);  // the configured output back, for the stages after and the viewport
  return l;
}

// ---- export ----------------------------------------------------------------------------------

std::string ladder_csv(const Ladder& l) {
  std::ostringstream out;
  out << "op,variant,block,math,median_us,p95_us,noise,reps,pct_ceiling,gbs,gflops,model_bytes,"
         "model_flops,regs,smem_bytes,local_bytes,theoretical_occupancy,achieved_occupancy,"
         "dram_bytes,measured_flops";
  for (const std::string& n : state_column_names()) out << "," << n;  // the state, then runs
  out << ",runs\n";
  for (const LadderStep& s : l.steps) {
    out << l.op << "," << s.cfg.variant_def().name << "," << s.cfg.block.str() << ","
        << math_name(s.cfg.math) << "," << csv_num(s.median_us()) << ","
        << csv_num(s.meas.total.p95_us) << "," << csv_num(s.meas.total.noise) << ","
        << s.meas.total.n << "," << csv_num(l.pct_of_ceiling(s)) << "," << csv_num(s.gbs()) << ","
        << csv_num(s.gflops()) << "," << csv_num(s.model_bytes) << "," << csv_num(s.flops) << ","
        << s.regs() << "," << s.smem() << "," << s.local_bytes() << ","
        << csv_num(s.theoretical_occupancy()) << "," << csv_num(s.achieved_occupancy()) << ","
        << csv_num(s.dram_bytes()) << "," << csv_num(s.measured_flops());
    for (const StateColumn& c : state_columns(s.meas.state_start, s.meas.state_end))
      out << "," << (c.is_text ? csv_text(c.text) : csv_num(c.num));
    out << "," << csv_text(s.runs()) << "\n";
  }
  return out.str();
}

std::string ladder_json(const Ladder& l) {
  nlohmann::json j;
  j["op"] = l.op;
  j["device"] = l.device;
  j["measured"] = l.measured;
  j["copy_gbs"] = json_number(l.copy_gbs);
  j["ceiling"] = l.ceiling_name();
  j["notes"] = l.notes;
  j["steps"] = nlohmann::json::array();
  for (const LadderStep& s : l.steps) {
    const VariantDef& v = s.cfg.variant_def();
    j["steps"].push_back({{"variant", v.name},
                          {"delta", v.delta},
                          {"expect", v.expect},
                          {"runs", s.runs()},
                          {"block", s.cfg.block.str()},
                          {"math", math_name(s.cfg.math)},
                          {"median_us", json_number(s.median_us())},
                          {"p95_us", json_number(s.meas.total.p95_us)},
                          {"noise", json_number(s.meas.total.noise)},
                          {"reps", s.meas.total.n},
                          {"pct_ceiling", json_number(l.pct_of_ceiling(s))},
                          {"gbs", json_number(s.gbs())},
                          {"gflops", json_number(s.gflops())},
                          {"model_bytes", json_number(s.model_bytes)},
                          {"model_flops", json_number(s.flops)},
                          {"regs", s.regs()},
                          {"smem_bytes", s.smem()},
                          {"local_bytes", s.local_bytes()},
                          {"theoretical_occupancy", json_number(s.theoretical_occupancy())},
                          {"achieved_occupancy", json_number(s.achieved_occupancy())},
                          {"dram_bytes", json_number(s.dram_bytes())},
                          {"measured_flops", json_number(s.measured_flops())}});
    nlohmann::json st;
    for (const StateColumn& c : state_columns(s.meas.state_start, s.meas.state_end))
      st[c.name] = c.is_text ? (c.text.empty() ? nlohmann::json(nullptr) : nlohmann::json(c.text))
                             : json_number(c.num);
    st["start"] = s.meas.state_start.summary();
    st["end"] = s.meas.state_end.summary();
    j["steps"].back()["state"] = st;
  }
  return j.dump(2) + "\n";
}

}  // namespace lab
