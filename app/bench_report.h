// The bench report: one row per launch (or stage total), as a table, CSV or JSON.
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "commands.h"
#include "device_state.h"
#include "orin.h"
#include "runner.h"
#include "text.h"

namespace lab::app {

struct BenchRow {
  std::string stage, variant, block, math, kernel;
  double median_us = 0, p95_us = 0, gbs = 0, pct_copy = 0;
  double pct_copy_same = 0;  // of a copy moving the same bytes (same cache regime)
  bool total = false;        // the stage's total over several launches
  bool library = false;      // a library call (CUB): its own launches, no occupancy of ours
  bool in_frame = false;     // timed inside the whole pipeline's frame (what the GUI shows)
  double gflops = 0;         // arithmetic rate (ops with a FLOP count: matmul); 0: none
  double pct_ceiling = -1;   // percent of the ceiling variant's rate (cuBLAS, CUB); -1: none
  double model_bytes = 0;  // the bytes the stage must move (the lab's model); 0: per launch unknown
  double noise = NAN;      // the median's relative standard error
  int reps = 0;            // timed runs
  LaunchRecord rec;
  bool has_counters = false;  // --counters
  CounterValues counters;
  // The device's state at the start and end of the row's measurement (measure.h).
  DeviceState state_start, state_end;
  std::vector<std::string> state_warnings() const {
    return lab::state_warnings(state_start, state_end);
  }
  // The bandwidth-bound estimate on Jetson AGX Orin (orin.h); NaN without a model.
  double orin_gbs = kOrinCopyGBs;  // orin_bandwidth_for: this Orin's EMC clock where read
  double orin_estimate_us() const { return lab::orin_estimate_us(model_bytes, orin_gbs); }
};

BenchRow bench_row(const ResolvedStage& s, const std::string& kernel);
// The device's state at the start (a) and end (b) of a measurement, as bench's JSON holds it.
nlohmann::json state_json(const DeviceState& a, const DeviceState& b);
// The counters of a row in one line of words (the table prints it under the row).
std::string counters_line(const BenchRow& r);

// The whole pipeline's time per frame, one way of launching it.
struct FrameTiming {
  std::string key;   // JSON key stem: "frame" (an event pair per launch), "frame_stream", ...
  std::string what;  // how it was launched and timed
  double median_us = 0, p95_us = 0;
  DeviceState state_start, state_end;  // source None: not recorded

  FrameTiming() = default;
  // The state is optional (the callers that build frames from names and figures leave it out).
  FrameTiming(std::string k, std::string w, double median = 0, double p95 = 0,
              DeviceState start = {}, DeviceState end = {})
      : key(std::move(k)),
        what(std::move(w)),
        median_us(median),
        p95_us(p95),
        state_start(std::move(start)),
        state_end(std::move(end)) {}
};

// The table's footer: the device's state at the first row's start and the last row's end, then
// each distinct warning once (its rows are marked "!" at the end of their line).
std::string state_footer(const std::vector<BenchRow>& rows, const std::vector<FrameTiming>& frames);

// `story`: a playground's lesson, each variant's prediction beside its measurement (table output;
// JSON gets it as "story"); empty for the image pipeline.
void print_rows(std::ostream& out, const std::vector<BenchRow>& rows, const BenchOptions& o,
                double copy_gbs, const std::string& header, const std::vector<FrameTiming>& frames,
                const std::string& story = "");

// Fills gflops and pct_ceiling of a playground's rows: each stage-level row (a single launch or a
// stage total) against the fastest row of the op's ceiling variant in the same run.
void add_ceiling(std::vector<BenchRow>& rows, const Op& op, double flops);

// The story block for a playground: its lesson, then per variant what changed, what should
// move and what was measured (the best block of each).
std::string story_text(const Op& op, const std::vector<BenchRow>& rows);

}  // namespace lab::app
