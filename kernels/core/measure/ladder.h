// A ladder: every step (variant, and optionally every block and both math modes) of one stage or
// playground, each timed as `bench` times it (measure_stage), with its rates, resources and,
// when a counter collector is given, its hardware counters. `bench`, the GUI's "run the ladder"
// button and the tests all call run_ladder() or its two parts (ladder_configs, measure_step),
// so a step's figures are the same wherever they are shown.
#pragma once

#include <cmath>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "measure.h"

namespace lab {

struct LadderSpec {
  bool every_variant = true;  // false: only the configured variant
  bool every_block = false;   // every allowed block of each variant (else its default block)
  bool both_math = false;     // precise and fast (else the configured math mode)
};

// The configurations of stage i the spec asks for, in the op's step order, blocks this device
// refuses left out. The configured variant keeps its configured block.
std::vector<ResolvedStage> ladder_configs(const Runner& r, size_t i, const LadderSpec& s);

// A step as the ladder's views name it: "v3_smem_tile 32x8 precise".
std::string step_text(const ResolvedStage& s);

// Device-to-device copy bandwidth by size, each size measured once (GB/s, read + write): a copy
// of a step's own bytes shares its cache regime (1280x736 fits the H200's L2, 4K does not).
class CopyCeiling {
 public:
  double at(double bytes);

 private:
  std::map<size_t, double> m_gbs;
};

// One measured step.
struct LadderStep {
  ResolvedStage cfg;
  Measurement meas;          // per launch and the stage's total
  double model_bytes = 0;    // the bytes the stage must move (Runner::stage_bytes)
  double flops = 0;          // the op's FLOP model for this input; 0: none
  double copy_same_gbs = 0;  // a copy of the same bytes, this run (0: not measured, CPU)
  bool counted = false;      // counters were collected
  CounterRun counters;       // per launch, DRAM-cold (collect_counters)

  double median_us() const { return meas.total.median_us; }
  // Another step's code that ran for this one (LaunchRecord::runs); empty: its own.
  std::string runs() const { return meas.launches.empty() ? "" : meas.launches.front().rec.runs; }
  double gbs() const;     // model bytes over the median; NaN without a model
  double gflops() const;  // FLOP model over the median; NaN without a model
  // The most registers and shared memory (static + dynamic) of its own launches; 0 when every
  // launch is a library call's.
  int regs() const;
  size_t smem() const;
  size_t local_bytes() const;  // spills and local arrays per thread
  // Theoretical occupancy of its first own launch on this GPU, 0..1 (NaN: none).
  double theoretical_occupancy() const;
  // From the counters (NaN without): achieved occupancy (mean of its launches weighted by
  // duration, 0..1), DRAM bytes read + written, FP32 and FP64 operations executed (an FMA counts
  // two).
  double achieved_occupancy() const;
  double dram_bytes() const;
  double measured_flops() const;
};

// Times one configuration of stage i: runs it once (refusals show there), then measure_stage;
// with `counters`, collects them after the timed runs. Throws Error(Refused) when the device
// refuses the configuration; Error(Unavailable) when counters were asked for and failed.
LadderStep measure_step(Runner& r, size_t i, const ResolvedStage& cfg, const MeasureOptions& m,
                        CounterCollector* counters, CopyCeiling& copy);

struct Ladder {
  size_t stage = 0;
  std::string op;
  std::string device;           // the device line
  std::string measured;         // how: warm-up, runs, L2, queue
  double copy_gbs = 0;          // device copy bandwidth, 256 MiB, this run (0: CPU)
  std::string ceiling_variant;  // the op's library variant (cuBLAS, CUB), if any
  std::vector<LadderStep> steps;
  std::vector<std::string> notes;  // refusals, clock changes, counter passes

  // The fastest median of the ceiling variant's steps (NaN: none ran).
  double ceiling_us() const;
  // A step's percent of the ceiling measured in this run: the ceiling variant's best time over
  // the step's (same work), or, for an op without one, its GB/s over a copy of the same bytes.
  double pct_of_ceiling(const LadderStep& s) const;
  std::string ceiling_name() const;  // what pct_of_ceiling is a percent of
};

// The measure options a step runs with on this runner: as given on a GPU; on the CPU backend
// (the references, up to a second a run) at most 1 warm-up and 5 timed runs.
MeasureOptions step_options(const Runner& r, MeasureOptions m);

// Called after each step with (steps done, steps in all); return false to stop early.
using LadderProgress = std::function<bool(size_t done, size_t total)>;

// Every step of stage i the spec asks for. The stage's configured output is restored after.
// On the CPU backend the steps time the CPU references (wall clock), with step_options' runs.
// Refused steps are left out, with a note.
Ladder run_ladder(Runner& r, size_t i, const LadderSpec& s, const MeasureOptions& m,
                  CounterCollector* counters = nullptr, const LadderProgress& progress = {});

// The ladder as a table: CSV (a header line, one line per step) and JSON (the run's facts, one
// object per step; unknown values null).
std::string ladder_csv(const Ladder& l);
std::string ladder_json(const Ladder& l);

}  // namespace lab
