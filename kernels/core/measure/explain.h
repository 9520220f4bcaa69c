// "Why is this step faster?": two measured configurations of one stage (consecutive steps of a
// ladder, or A and B) turned into ranked, worded changes.
//
// The rules are data (explain_rules()): each names a quantity read from a step's facts, the
// direction in which it makes a kernel faster, the smallest change that counts and a clause
// saying why it matters. A change explains the time when it moved in the direction of the faster
// side; changes are ranked by how far they moved (log ratio) times the rule's weight, the weight
// raised for memory rules on a memory-bound step and for instruction rules on an SM-bound one.
// The honest cases are verdicts and notes: a time difference within the two measurements' noise,
// a step that is slower here, counters unavailable (time, bytes and static facts only).
#pragma once

#include <array>
#include <cmath>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "ladder.h"
#include "listing.h"

namespace lab {

// What an explanation reads of one configuration: measured (time, counters), static (the
// build's registers, shared memory, spills, SASS instruction mix, theoretical occupancy) or
// modelled (bytes). NaN or empty where unknown. It is also what `explain --json` records, so
// the rules are tested on recorded sets.
struct StepFacts {
  std::string name;    // "v2_smem 32x8 precise"
  std::string delta;   // the variant's own delta: what changed from the previous step
  double us = NAN;     // median of the timed runs
  double noise = NAN;  // the median's relative standard error
  double model_bytes = NAN;
  int launches = 0;  // kernel launches of the stage (library calls count one each)
  // Counters (DRAM-cold, summed or weighted over the stage's launches).
  bool counted = false;
  std::string counters_why;                  // when not counted: why not
  double dram_read = NAN, dram_write = NAN;  // bytes
  double l2_hit_pct = NAN;                   // weighted by duration
  double achieved_occ = NAN;                 // 0..1, weighted by duration
  double sm_pct = NAN, mem_pct = NAN;        // throughput, % of peak, weighted by duration
  double inst_executed = NAN;                // warp instructions executed
  std::map<std::string, double> stalls;      // reason -> stall cycles per issued instruction
  // Static facts of the stage's own kernels (the largest of them; mix: summed over distinct
  // kernels, from the SASS of this GPU's architecture; NaN without SASS).
  double theoretical_occ = NAN;  // 0..1
  std::string limiter;           // what caps theoretical occupancy ("registers")
  double regs = NAN, smem = NAN, local_bytes = NAN;
  std::array<double, kMixClasses> mix;
  std::string mix_why;  // when the mix is unknown: why
  StepFacts() { mix.fill(NAN); }
};

// The facts of a measured step; `sass` adds the static instruction mix (cuobjdump on this
// executable, a few hundred milliseconds the first time per kernel).
StepFacts step_facts(const LadderStep& s, bool sass);

// One rule: a quantity, its direction, its threshold and its words. explain_rules() is the table
// (one stall rule per stall reason, one mix rule per instruction class).
struct ExplainRule {
  std::string id;        // "dram_read", "stall:long_scoreboard", "mix:LDG"
  std::string quantity;  // "DRAM reads"
  enum Source { Counter, Static, Model } source;
  int faster;      // -1: lower is faster, +1: higher is faster, 0: context only (never explains)
  double min_rel;  // the smallest relative change that counts (|b - a| / max(|a|, |b|))
  double min_abs;  // and the smallest absolute change, in the quantity's own unit
  double weight;   // rank weight
  enum Kind { Memory, Instructions, Occupancy, Other } kind;  // which regime raises its weight
  std::function<double(const StepFacts&)> get;
  std::function<std::string(double)> show;  // the value with its unit: "27.4 MB"
  std::string why;  // why the direction matters, in words a student understands
};
const std::vector<ExplainRule>& explain_rules();

struct ExplainChange {
  std::string rule;  // the rule's id
  double a = NAN, b = NAN;
  double score = 0;       // rank: weight x |ln(b / a)|
  bool explains = false;  // moved in the direction of the faster side
  bool measured = false;  // a counter or a static fact of the build (not the model, not the mix)
  std::string sentence;   // "DRAM reads fell 3.1x, from 27.4 to 8.8 MB: ..."
};

enum class Verdict { Faster, Slower, Noise, Unknown };  // Unknown: a time is missing
const char* verdict_name(Verdict v);                    // "faster", "slower", "noise", "unknown"

struct Explanation {
  std::string stage;  // the stage or playground (set by the caller; JSON only)
  StepFacts a, b;
  double ratio = NAN;  // a.us / b.us: above 1, B is faster
  Verdict verdict = Verdict::Noise;
  std::string headline;                // the time, in one sentence
  std::vector<ExplainChange> changes;  // ranked: those that explain first, then the others
  std::string regime;                  // what limited each side ("memory bandwidth" ...)
  std::vector<std::string> notes;      // counters unavailable, static mix missing
  // The highest-ranked change that explains the time (null: none).
  const ExplainChange* top() const;
};

// Each step against the one before (a ladder's story), every step's facts computed once.
std::vector<Explanation> explain_steps(const std::vector<StepFacts>& steps);

// B against A. Within the noise: |ln(a/b)| under max(1 %, 2 x the two noises combined).
Explanation explain(const StepFacts& a, const StepFacts& b);

// The explanation as text (`explain`'s output, the panels' words) and as JSON (both sides'
// facts, the verdict and every change).
std::string explanation_text(const Explanation& e, size_t max_changes = 4);
std::string explanation_json(const std::vector<Explanation>& es);
// Facts back from explanation_json's sides: recorded sets for the tests. Throws Error(Data).
std::vector<std::pair<StepFacts, StepFacts>> facts_from_json(const std::string& text);

}  // namespace lab
