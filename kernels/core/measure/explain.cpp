#include "explain.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "check.h"
#include "device.h"
#include "json_number.h"
#include "live.h"
#include "occupancy.h"
#include "text.h"

namespace lab {

// ---- facts -----------------------------------------------------------------------------------

namespace {

// A mean of `value` over the ranges weighted by `weight` (its duration, or 1), finite values only.
template <class V, class W>
double weighted(const std::vector<CounterValues>& ranges, V value, W weight) {
  double sum = 0, total = 0;
  for (const CounterValues& c : ranges) {
    const double v = value(c), w = weight(c);
    if (!std::isfinite(v) || !std::isfinite(w) || w <= 0) continue;
    sum += v * w, total += w;
  }
  return total > 0 ? sum / total : NAN;
}

double duration_weight(const CounterValues& c) {
  return std::isfinite(c.duration_ns) && c.duration_ns > 0 ? c.duration_ns : 1;
}

// The static SASS mix of the step's own kernels (each distinct kernel once), for this GPU's
// architecture; "" or why there is none.
std::string sass_mix(const LadderStep& s, std::array<double, kMixClasses>& mix) {
  const DeviceInfo& d = device_info();
  if (const auto& live = s.cfg.variant_def().live) {  // a live kernel: its own cubin's SASS
    const SassResult r = cubin_sass(live->build().cubin);
    if (!r.ok) return r.message;
    std::array<double, kMixClasses> sum{};
    for (const AsmFunction& f : r.functions) {  // user_kernel and any function it did not inline
      const InstructionMix m = count_mix(f.lines, AsmKind::Sass);
      for (size_t k = 0; k < kMixClasses; ++k) sum[k] += m.count[k];
    }
    if (r.functions.empty()) return "no SASS in the live kernel's cubin";
    mix = sum;
    return "";
  }
  std::set<const void*> seen;
  std::array<double, kMixClasses> sum{};
  for (const LaunchTiming& l : s.meas.launches) {
    if (!l.rec.func || !seen.insert(l.rec.func).second) continue;
    const std::string mangled = kernel_mangled_name(l.rec.func);
    if (mangled.empty()) return "the kernel's name could not be read";
    const SassResult r = builtin_sass(mangled);
    if (!r.ok) return r.message;
    const AsmFunction* f = pick_arch(r.functions, d.present ? 10 * d.major + d.minor : 0);
    if (!f) return "no SASS for " + l.rec.kernel;
    const InstructionMix m = count_mix(f->lines, AsmKind::Sass);
    for (size_t k = 0; k < kMixClasses; ++k) sum[k] += m.count[k];
  }
  if (seen.empty()) return "every launch is a library call";
  mix = sum;
  return "";
}

}  // namespace

StepFacts step_facts(const LadderStep& s, bool sass) {
  StepFacts f;
  f.name = step_text(s.cfg);
  f.delta = s.cfg.variant_def().delta;
  f.us = s.median_us();
  f.noise = s.meas.total.noise;
  f.model_bytes = s.model_bytes > 0 ? s.model_bytes : NAN;
  f.launches = int(s.meas.launches.size());
  const std::vector<CounterValues>& ranges = s.counters.report.ranges;
  if (s.counted && s.counters.report.ok && !ranges.empty()) {
    f.counted = true;
    const CounterValues sum = sum_counters(ranges);
    f.dram_read = sum.dram_read_bytes, f.dram_write = sum.dram_write_bytes;
    f.inst_executed = sum.inst_executed;
    f.l2_hit_pct = weighted(
        ranges, [](const CounterValues& c) { return c.l2_hit_pct; }, duration_weight);
    f.achieved_occ = s.achieved_occupancy();
    f.sm_pct = weighted(
        ranges, [](const CounterValues& c) { return c.sm_throughput_pct; }, duration_weight);
    f.mem_pct = weighted(
        ranges, [](const CounterValues& c) { return c.mem_throughput_pct; }, duration_weight);
    // Stall cycles per instruction over the stage: each launch weighted by its instructions
    // (a reason a launch does not list is 0 there).
    for (const std::string& reason : stall_reasons()) {
      const double v = weighted(
          ranges,
          [&](const CounterValues& c) {
            for (const StallReason& st : c.stalls)
              if (st.metric == reason) return st.per_issue;
            return 0.0;
          },
          [](const CounterValues& c) {
            return std::isfinite(c.inst_executed) ? c.inst_executed : duration_weight(c);
          });
      if (std::isfinite(v) && v > 0) f.stalls[reason] = v;
    }
  } else {
    f.counters_why =
        !s.counters.report.why.empty() ? s.counters.report.why : "counters were not collected";
  }
  for (const LaunchTiming& l : s.meas.launches)
    if (l.rec.func) {
      f.limiter = limiter_name(l.rec.est.limiter);
      break;
    }
  f.theoretical_occ = s.theoretical_occupancy();
  if (s.regs() > 0) {
    f.regs = s.regs();
    f.smem = double(s.smem());
    f.local_bytes = double(s.local_bytes());
  }
  if (sass) f.mix_why = sass_mix(s, f.mix);
  return f;
}

// ---- the rules -------------------------------------------------------------------------------

namespace {

std::string show_mb(double v) {  // 27.4 MB, 1.07 GB: three digits, never an exponent
  if (std::fabs(v) >= 999.5e6) return fmt("%.3g GB", v / 1e9);
  if (std::fabs(v) >= 999.5e3) return fmt("%.3g MB", v / 1e6);
  return fmt("%.3g kB", v / 1e3);
}
std::string show_pct(double v) {
  return fmt("%.0f %%", v);
}
std::string show_count(double v) {
  return fmt("%.0f", v);
}

const char* mix_why(MixClass c) {
  switch (c) {
    case MixClass::LdGlobal:
      return "each global load waits hundreds of cycles; fewer, wider loads fetch the same bytes "
             "with fewer requests";
    case MixClass::StGlobal:
      return "fewer, wider stores write the same bytes with fewer requests";
    case MixClass::LdShared:
    case MixClass::StShared:
      return "shared memory is fast, but each access still takes an issue slot and may conflict "
             "on its banks";
    case MixClass::LdLocal:
    case MixClass::StLocal:
      return "local memory is per-thread global memory: spills and arrays indexed at run time";
    case MixClass::Fp32:
    case MixClass::Fp64:
    case MixClass::Mufu:
      return "arithmetic the SM must issue; it limits a kernel once memory no longer does";
    case MixClass::Integer:
      return "index and address arithmetic: work that moves no data";
    case MixClass::Control:
      return "branches, barriers and predicates: overhead beside the work";
    default:
      return "instructions the SM must issue";
  }
}

std::vector<ExplainRule> make_rules() {
  using R = ExplainRule;
  std::vector<R> r = {
      {"dram_read", "DRAM reads", R::Counter, -1, 0.10, 65536, 1.0, R::Memory,
       [](const StepFacts& f) { return f.dram_read; }, show_mb,
       "every byte read from DRAM spends the bandwidth a memory-bound kernel waits on"},
      {"dram_write", "DRAM writes", R::Counter, -1, 0.10, 65536, 1.0, R::Memory,
       [](const StepFacts& f) { return f.dram_write; }, show_mb,
       "every byte written goes back to DRAM through the same bandwidth"},
      {"l2_miss", "L2 misses", R::Counter, -1, 0.20, 3, 0.6, R::Memory,
       [](const StepFacts& f) { return 100 - f.l2_hit_pct; },
       [](double v) { return fmt("%.0f %% of sectors", v); },
       "a sector found in the L2 is not fetched from DRAM"},
      {"model_bytes", "bytes the stage must move (the lab's model)", R::Model, -1, 0.10, 65536, 0.8,
       R::Memory, [](const StepFacts& f) { return f.model_bytes; }, show_mb,
       "fewer bytes to move take less time at the same bandwidth"},
      {"inst_executed", "instructions executed", R::Counter, -1, 0.10, 1000, 0.9, R::Instructions,
       [](const StepFacts& f) { return f.inst_executed; },
       [](double v) { return fmt("%.3g M", v / 1e6); },
       "every warp instruction takes an issue slot: fewer of them finish sooner when the SM, "
       "not memory, is the limit"},
      {"launches", "kernel launches", R::Static, -1, 0.01, 1, 0.5, R::Other,
       [](const StepFacts& f) { return f.launches > 0 ? double(f.launches) : NAN; }, show_count,
       "each launch adds its start-up gap, and data passed between two kernels goes through "
       "memory"},
      // Two points: a small grid's 9.5 % -> 5.6 % (blur v7 -> v8 at 1280x736) is a third of its
      // warps, and the reason that step is slower.
      {"achieved_occ", "achieved occupancy", R::Counter, +1, 0.15, 2, 0.6, R::Occupancy,
       [](const StepFacts& f) { return 100 * f.achieved_occ; }, show_pct,
       "more resident warps give the scheduler other work while some wait"},
      // Last in rank: the same bytes in a longer span (thrust's reduce against CUB's: a copy to
      // the host and a synchronisation inside the call) show as a memory system idle more often.
      {"mem_busy", "memory throughput (% of peak over the kernels' span)", R::Counter, +1, 0.25, 5,
       0.25, R::Other, [](const StepFacts& f) { return f.counted ? f.mem_pct : double(NAN); },
       show_pct,
       "the share of the span in which memory was busy: the same bytes over a longer span mean "
       "the GPU waited (on the host, a copy, the gap between launches)"},
      {"theoretical_occ", "theoretical occupancy", R::Static, +1, 0.15, 5, 0.5, R::Occupancy,
       [](const StepFacts& f) { return 100 * f.theoretical_occ; }, show_pct,
       "the most warps an SM can hold with this block, these registers and this shared memory"},
      {"local_bytes", "local memory per thread (spills, local arrays)", R::Static, -1, 0.01, 4, 1.0,
       R::Memory, [](const StepFacts& f) { return f.local_bytes; },
       [](double v) { return fmt("%.0f B", v); },
       "local memory lives in DRAM and the caches: every spill is a memory round trip"},
      {"regs", "registers per thread", R::Static, 0, 0.15, 4, 0.2, R::Occupancy,
       [](const StepFacts& f) { return f.regs; }, show_count,
       "registers hold a thread's values; more of them can cap how many warps fit"},
      {"smem", "shared memory per block", R::Static, 0, 0.20, 256, 0.15, R::Occupancy,
       [](const StepFacts& f) { return f.smem; }, [](double v) { return fmt("%.0f B", v); },
       "shared memory holds what a block reuses; more of it can cap how many blocks fit"},
  };
  for (const std::string& reason : stall_reasons()) {
    if (reason == "selected") continue;
    // stall_words: "waiting on global or local memory (long scoreboard)"
    const std::string words = stall_words(reason);
    const size_t open = words.rfind(" (");
    const std::string name =
        open == std::string::npos ? reason : words.substr(open + 2, words.size() - open - 3);
    const std::string what = open == std::string::npos ? words : words.substr(0, open);
    // A stall reason counts by the share of all stall cycles it moved (explain() checks 15 %):
    // a compute-bound kernel stalls little, and 0.24 -> 0.06 can be a third of what it waits.
    r.push_back({"stall:" + reason, name + " stalls (" + what + ") per instruction", R::Counter, -1,
                 0.20, 0.02, 0.7, R::Other,
                 [reason](const StepFacts& f) {
                   if (!f.counted) return double(NAN);
                   const auto it = f.stalls.find(reason);
                   return it == f.stalls.end() ? 0.0 : it->second;
                 },
                 [](double v) { return fmt("%.2f", v); },
                 "the fewer cycles a warp waits per instruction, the sooner it issues the next"});
  }
  for (size_t k = 0; k < kMixClasses; ++k) {
    const auto c = MixClass(k);
    if (c == MixClass::Other || c == MixClass::LdConst) continue;
    r.push_back({std::string("mix:") + mix_name(c),
                 std::string(mix_name(c)) + " instructions in the SASS", R::Static, -1, 0.25, 2,
                 0.35, R::Instructions, [k](const StepFacts& f) { return f.mix[k]; }, show_count,
                 mix_why(c)});
  }
  return r;
}

// What limited a side: memory, the SM's pipelines, or neither (latency). "" without counters.
std::string regime_of(const StepFacts& f) {
  if (!f.counted || !std::isfinite(f.mem_pct) || !std::isfinite(f.sm_pct)) return "";
  if (f.mem_pct >= 60 && f.mem_pct >= f.sm_pct) return "memory bandwidth";
  if (f.sm_pct >= 60) return "the SM's pipelines";
  return "latency";
}

std::string regime_text(const StepFacts& f) {
  const std::string r = regime_of(f);
  if (r.empty()) return "";
  return r + fmt(" (memory %.0f %%, ", f.mem_pct) + fmt("SM %.0f %% of peak)", f.sm_pct);
}

// The rule's weight on this pair: memory rules count more when the slower side was memory
// bound, instruction rules when it was SM bound, occupancy and stall rules when it was neither.
double regime_weight(const ExplainRule& rule, const std::string& regime) {
  if (regime == "memory bandwidth" && rule.kind == ExplainRule::Memory) return 1.5;
  if (regime == "the SM's pipelines" && rule.kind == ExplainRule::Instructions) return 1.5;
  if (regime == "latency" &&
      (rule.kind == ExplainRule::Occupancy || starts_with(rule.id, "stall:")))
    return 1.3;
  return 1.0;
}

double stall_total(const StepFacts& f) {
  double t = 0;
  for (const auto& [reason, v] : f.stalls) t += v;
  return t;
}

std::string ratio_text(double a, double b) {
  const double hi = std::max(a, b), lo = std::min(a, b);
  return lo > 0 ? fmt(" %.2gx", hi / lo) : "";
}

std::string sentence(const ExplainRule& rule, const StepFacts& A, const StepFacts& B, double a,
                     double b) {
  std::string s = rule.quantity + (b < a ? " fell" : " rose");
  const std::string sa = rule.show(a), sb = rule.show(b);
  const std::string ratio = ends_with(sa, "%") || ends_with(sa, "sectors") ? "" : ratio_text(a, b);
  s += ratio.empty() ? " from " + sa + " to " + sb : ratio + ", from " + sa + " to " + sb;
  if (rule.id == "theoretical_occ") {  // what capped it, and how that moved
    if (A.limiter != B.limiter)
      s += " (limited by " + A.limiter + ", then by " + B.limiter + ")";
    else if (!A.limiter.empty())
      s += " (limited by " + A.limiter + ")";
    const StepFacts& low = b < a ? B : A;
    if (low.limiter == "registers" && std::isfinite(A.regs) && std::isfinite(B.regs) &&
        A.regs != B.regs)
      s += fmt(": registers per thread %.0f", A.regs) + fmt(" -> %.0f", B.regs);
  }
  return s + ": " + rule.why;
}

}  // namespace

const std::vector<ExplainRule>& explain_rules() {
  static const std::vector<ExplainRule> rules = make_rules();
  return rules;
}

const char* verdict_name(Verdict v) {
  switch (v) {
    case Verdict::Faster:
      return "faster";
    case Verdict::Slower:
      return "slower";
    case Verdict::Unknown:
      return "unknown";
    default:
      return "noise";
  }
}

const ExplainChange* Explanation::top() const {
  return !changes.empty() && changes.front().explains ? &changes.front() : nullptr;
}

Explanation explain(const StepFacts& a, const StepFacts& b) {
  Explanation e;
  e.a = a, e.b = b;
  e.ratio = a.us / b.us;
  const double na = std::isfinite(a.noise) ? a.noise : 0, nb = std::isfinite(b.noise) ? b.noise : 0;
  const double noise = std::max(0.01, 2 * std::sqrt(na * na + nb * nb));
  const double lr = std::log(e.ratio);
  if (!std::isfinite(lr)) {
    e.verdict = Verdict::Unknown;
    e.headline =
        "the time of A or B is not known (" + fmt("%.3g", a.us) + fmt(" and %.3g us)", b.us);
  } else if (std::fabs(lr) < noise) {
    e.verdict = Verdict::Noise;
    e.headline =
        "the difference is within the noise of the two measurements: " + fmt("%.2f", a.us) +
        fmt(" and %.2f us", b.us) + fmt(" (the medians' standard errors %.1f %%", 100 * na) +
        fmt(" and %.1f %%)", 100 * nb);
  } else if (lr > 0) {
    e.verdict = Verdict::Faster;
    e.headline =
        fmt("B is %.2fx faster than A: ", e.ratio) + fmt("%.2f", a.us) + fmt(" -> %.2f us", b.us);
  } else {
    e.verdict = Verdict::Slower;
    e.headline = fmt("this step is slower here: B takes %.2fx A's time, ", 1 / e.ratio) +
                 fmt("%.2f", a.us) + fmt(" -> %.2f us", b.us);
  }
  const int dir = e.verdict == Verdict::Faster ? +1 : e.verdict == Verdict::Slower ? -1 : 0;
  const StepFacts& slower = lr > 0 ? a : b;
  const std::string regime = regime_of(slower);
  for (const ExplainRule& rule : explain_rules()) {
    const double va = rule.get(a), vb = rule.get(b);
    if (!std::isfinite(va) || !std::isfinite(vb)) continue;
    const double d = std::fabs(vb - va), m = std::max(std::fabs(va), std::fabs(vb));
    if (d < rule.min_abs || m <= 0 || d / m < rule.min_rel) continue;
    if (starts_with(rule.id, "stall:") && d < 0.15 * std::max(stall_total(a), stall_total(b)))
      continue;
    ExplainChange c;
    c.rule = rule.id, c.a = va, c.b = vb;
    // How far it moved: the log ratio (a floor, so that a change from 0 is finite); a stall
    // reason by the share of all stall cycles it moved, so that 4.1 -> 0.9 outranks 1.0 -> 0.
    const double f = rule.min_abs;
    double moved_by = std::fabs(std::log((std::fabs(vb) + f) / (std::fabs(va) + f)));
    if (starts_with(rule.id, "stall:"))
      moved_by =
          std::fabs(std::log(1 - std::min(0.94, d / std::max(stall_total(a), stall_total(b)))));
    c.score = rule.weight * regime_weight(rule, regime) * std::min(moved_by, std::log(16.0));
    // B faster (dir +1): a quantity explains when it moved toward faster; B slower: away.
    const int moved = vb > va ? +1 : -1;
    c.explains = rule.faster != 0 && dir != 0 && moved * rule.faster * dir > 0;
    // The SASS mix is static: an unrolled loop has more load instructions in its code and
    // executes fewer. It ranks with the bytes model, below what was measured or is certain.
    c.measured = rule.source != ExplainRule::Model && !starts_with(rule.id, "mix:");
    c.sentence = sentence(rule, a, b, va, vb);
    e.changes.push_back(std::move(c));
  }
  std::stable_sort(e.changes.begin(), e.changes.end(),
                   [](const ExplainChange& x, const ExplainChange& y) {
                     if (x.explains != y.explains) return x.explains;
                     if (x.measured != y.measured) return x.measured;
                     return x.score > y.score;
                   });
  const std::string ra = regime_text(a), rb = regime_text(b);
  if (!ra.empty() && !rb.empty())
    e.regime = regime_of(a) == regime_of(b) ? "both limited by " + regime_of(a) + ": A " +
                                                  ra.substr(regime_of(a).size() + 1) + ", B " +
                                                  rb.substr(regime_of(b).size() + 1)
                                            : "the limiter moved from " + ra + " to " + rb;
  if (!a.counted || !b.counted)
    e.notes.push_back("counters unavailable (" + (a.counted ? b : a).counters_why +
                      "): the explanation uses time, bytes and the static facts only");
  if (!a.mix_why.empty() || !b.mix_why.empty())
    e.notes.push_back("no SASS instruction mix: " + (a.mix_why.empty() ? b : a).mix_why);
  if (dir != 0 && !e.top())
    e.notes.push_back(
        "no quantity the lab reads moved enough to explain the time: the difference lies in "
        "what these counters do not separate (instruction-level parallelism, scheduling, the "
        "order of memory requests)");
  return e;
}

std::vector<Explanation> explain_steps(const std::vector<StepFacts>& steps) {
  std::vector<Explanation> out;
  for (size_t k = 1; k < steps.size(); ++k) out.push_back(explain(steps[k - 1], steps[k]));
  return out;
}

// ---- output ----------------------------------------------------------------------------------

std::string explanation_text(const Explanation& e, size_t max_changes) {
  std::ostringstream o;
  o << "A  " << e.a.name << fmt("   %.2f us", e.a.us) << "\n";
  o << "B  " << e.b.name << fmt("   %.2f us", e.b.us) << "\n";
  o << e.headline << ".\n";
  if (!e.b.delta.empty()) o << "B's step: " << e.b.delta << "\n";
  size_t shown = 0;
  for (const ExplainChange& c : e.changes) {
    if (!c.explains || shown == max_changes) continue;
    if (shown++ == 0) o << "Why, ranked:\n";
    o << "  " << shown << ". " << c.sentence << "\n";
  }
  size_t other = 0;
  for (const ExplainChange& c : e.changes) {
    if (c.explains || other == 2) continue;
    if (other++ == 0)
      o << (e.verdict == Verdict::Noise || e.verdict == Verdict::Unknown
                ? "Moved all the same:\n"
                : "Moved the other way, or context:\n");
    o << "  - " << c.sentence << "\n";
  }
  if (!e.regime.empty()) o << "Limiter: " << e.regime << "\n";
  for (const std::string& n : e.notes) o << "Note: " << n << "\n";
  return o.str();
}

namespace {

nlohmann::json facts_json(const StepFacts& f) {
  nlohmann::json stalls = nlohmann::json::object(), mix = nlohmann::json::object();
  for (const auto& [k, v] : f.stalls) stalls[k] = json_number(v);
  for (size_t k = 0; k < kMixClasses; ++k) mix[mix_name(MixClass(k))] = json_number(f.mix[k]);
  return {{"name", f.name},
          {"delta", f.delta},
          {"us", json_number(f.us)},
          {"noise", json_number(f.noise)},
          {"model_bytes", json_number(f.model_bytes)},
          {"launches", f.launches},
          {"counted", f.counted},
          {"counters_why", f.counters_why},
          {"dram_read", json_number(f.dram_read)},
          {"dram_write", json_number(f.dram_write)},
          {"l2_hit_pct", json_number(f.l2_hit_pct)},
          {"achieved_occ", json_number(f.achieved_occ)},
          {"sm_pct", json_number(f.sm_pct)},
          {"mem_pct", json_number(f.mem_pct)},
          {"inst_executed", json_number(f.inst_executed)},
          {"stalls", stalls},
          {"theoretical_occ", json_number(f.theoretical_occ)},
          {"limiter", f.limiter},
          {"regs", json_number(f.regs)},
          {"smem", json_number(f.smem)},
          {"local_bytes", json_number(f.local_bytes)},
          {"mix", mix},
          {"mix_why", f.mix_why}};
}

double number(const nlohmann::json& j, const char* key) {
  const auto it = j.find(key);
  return it == j.end() || !it->is_number() ? NAN : it->get<double>();
}

StepFacts facts_back(const nlohmann::json& j) {
  StepFacts f;
  f.name = j.value("name", "");
  f.delta = j.value("delta", "");
  f.us = number(j, "us");
  f.noise = number(j, "noise");
  f.model_bytes = number(j, "model_bytes");
  f.launches = j.value("launches", 0);
  f.counted = j.value("counted", false);
  f.counters_why = j.value("counters_why", "");
  f.dram_read = number(j, "dram_read");
  f.dram_write = number(j, "dram_write");
  f.l2_hit_pct = number(j, "l2_hit_pct");
  f.achieved_occ = number(j, "achieved_occ");
  f.sm_pct = number(j, "sm_pct");
  f.mem_pct = number(j, "mem_pct");
  f.inst_executed = number(j, "inst_executed");
  if (j.contains("stalls"))
    for (const auto& [k, v] : j["stalls"].items())
      if (v.is_number()) f.stalls[k] = v.get<double>();
  f.theoretical_occ = number(j, "theoretical_occ");
  f.limiter = j.value("limiter", "");
  f.regs = number(j, "regs");
  f.smem = number(j, "smem");
  f.local_bytes = number(j, "local_bytes");
  if (j.contains("mix"))
    for (size_t k = 0; k < kMixClasses; ++k) f.mix[k] = number(j["mix"], mix_name(MixClass(k)));
  f.mix_why = j.value("mix_why", "");
  return f;
}

}  // namespace

std::string explanation_json(const std::vector<Explanation>& es) {
  nlohmann::json out = nlohmann::json::array();
  for (const Explanation& e : es) {
    nlohmann::json changes = nlohmann::json::array();
    for (const ExplainChange& c : e.changes)
      changes.push_back({{"rule", c.rule},
                         {"a", json_number(c.a)},
                         {"b", json_number(c.b)},
                         {"score", json_number(c.score)},
                         {"explains", c.explains},
                         {"measured", c.measured},
                         {"sentence", c.sentence}});
    out.push_back({{"stage", e.stage},
                   {"a", facts_json(e.a)},
                   {"b", facts_json(e.b)},
                   {"ratio", json_number(e.ratio)},
                   {"verdict", verdict_name(e.verdict)},
                   {"headline", e.headline},
                   {"regime", e.regime},
                   {"changes", changes},
                   {"notes", e.notes}});
  }
  return out.dump(2) + "\n";
}

std::vector<std::pair<StepFacts, StepFacts>> facts_from_json(const std::string& text) {
  std::vector<std::pair<StepFacts, StepFacts>> out;
  try {
    const nlohmann::json j = nlohmann::json::parse(text);
    if (!j.is_array()) throw Error(ErrorKind::Data, "explain facts: expected a JSON array");
    for (const nlohmann::json& e : j) {
      if (!e.is_object() || !e.contains("a") || !e.contains("b"))
        throw Error(ErrorKind::Data, "explain facts: every entry needs \"a\" and \"b\"");
      out.emplace_back(facts_back(e["a"]), facts_back(e["b"]));
    }
  } catch (const nlohmann::json::exception& x) {
    throw Error(ErrorKind::Data, std::string("explain facts: ") + x.what());
  }
  return out;
}

}  // namespace lab
