// The bench report's three formats, on rows made up here (bench itself needs a GPU).
#include <nlohmann/json.hpp>

#include <sstream>

#include "bench_report.h"
#include "support.h"

using namespace lab;

namespace {

std::vector<app::BenchRow> sample_rows() {
  PipelineConfig p = default_pipeline();
  apply_variant(p, "blur=v3_smem_tile");
  const auto stages = resolve(p, nullptr);
  app::BenchRow one = app::bench_row(stages[1], "blur_v3_smem_tile<32,8>");
  one.median_us = 12.5, one.p95_us = 13.0, one.gbs = 2500, one.pct_copy = 62.5;
  one.pct_copy_same = 88.0;
  one.rec.attrs.regs = 32, one.rec.attrs.static_smem = 3312, one.rec.blocks_per_sm = 8;
  one.rec.est.occupancy = 1.0, one.rec.est.limiter = Limiter::Warps;
  one.rec.orin.occupancy = 1.0, one.rec.orin.limiter = Limiter::Warps;
  app::BenchRow total = app::bench_row(stages[2], "");
  total.total = true, total.median_us = 30.0, total.p95_us = 31.0, total.gbs = 3300;
  return {one, total};
}

}  // namespace

TEST_SUITE("cpu") {
  TEST_CASE("bench report: table, CSV and JSON carry every row") {
    const auto rows = sample_rows();
    app::BenchOptions o;
    std::ostringstream table;
    const std::vector<app::FrameTiming> frames = {{"frame", "per launch", 32.5, 33.0},
                                                  {"frame_graph", "as a graph", 20.25, 21.0}};
    app::print_rows(table, rows, o, 4000, "header line\n", frames);
    const std::string t = table.str();
    CHECK(t.find("header line") == 0);
    CHECK(t.find("blur_v3_smem_tile<32,8>") != std::string::npos);
    CHECK(t.find("12.50") != std::string::npos);
    CHECK(t.find("62.5%") != std::string::npos);
    CHECK(t.find("88.0%") != std::string::npos);
    CHECK(t.find("(stage total)") != std::string::npos);
    CHECK(t.find("per launch: median 32.50 us") != std::string::npos);
    CHECK(t.find("as a graph: median 20.25 us") != std::string::npos);

    o.csv = true;
    std::ostringstream csv;
    app::print_rows(csv, rows, o, 4000, "", {});
    std::istringstream lines(csv.str());
    std::string header, first;
    std::getline(lines, header);
    std::getline(lines, first);
    // The kernel name holds a comma: quoted, so every line has the header's column count.
    auto columns = [](const std::string& l) {
      int n = 1;
      bool quoted = false;
      for (char c : l) {
        if (c == '"') quoted = !quoted;
        n += c == ',' && !quoted;
      }
      return n;
    };
    CHECK(columns(first) == columns(header));
    CHECK(first.find("\"blur_v3_smem_tile<32,8>\"") != std::string::npos);

    o.csv = false, o.json = true;
    std::ostringstream js;
    app::print_rows(js, rows, o, 4000, "h", {{"frame", "per launch", 32.5, 33.0}});
    const auto j = nlohmann::json::parse(js.str());
    REQUIRE(j["launches"].size() == 2);
    CHECK(j["launches"][0]["regs"] == 32);
    CHECK(j["launches"][0]["limiter"] == "warps");
    CHECK(j["launches"][1]["total"] == true);
    CHECK(j["frame_median_us"] == doctest::Approx(32.5));
  }
}
