// The bench report: one row per launch (or stage total), as a table, CSV or JSON.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "app/commands.h"
#include "runner.h"

namespace lab::app {

struct BenchRow {
  std::string stage, variant, block, math, kernel;
  double median_us = 0, p95_us = 0, gbs = 0, pct_copy = 0;
  double pct_copy_same = 0;  // of a copy moving the same bytes (same cache regime)
  bool total = false;        // the stage's total over several launches
  bool library = false;      // a library call (CUB): its own launches, no occupancy of ours
  LaunchRecord rec;
};

BenchRow bench_row(const ResolvedStage& s, const std::string& kernel);

// snprintf of one number, as a string ("%.1f").
std::string fmt(const char* format, double v);

// The whole pipeline's time per frame, one way of launching it.
struct FrameTiming {
  std::string key;   // JSON key stem: "frame" (an event pair per launch), "frame_stream", ...
  std::string what;  // how it was launched and timed
  double median_us = 0, p95_us = 0;
};

void print_rows(std::ostream& out, const std::vector<BenchRow>& rows, const BenchOptions& o,
                double copy_gbs, const std::string& header, const std::vector<FrameTiming>& frames);

}  // namespace lab::app
