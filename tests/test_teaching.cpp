// The teaching views' engine: the ladder (every step of a stage, measured as bench measures it)
// and its exports, the roofline's maths, A/B compare; and the GUI's Ladder and A/B requests.
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "ab_compare.h"
#include "app_state.h"
#include "image_source.h"
#include "ladder.h"
#include "roofline.h"
#include "runner.h"
#include "support.h"

using namespace lab;

namespace {

// A runner (not copyable) on a playground's generated inputs, run once.
void playground(Runner& r, const std::string& name, const std::string& size) {
  r.configure_lab(default_pipeline(name), make_lab_inputs(*find_playground(name), size, 7));
  r.run();
}

size_t lines(const std::string& s) {
  size_t n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

// A step made by hand: `variant` of `op` with a median time and a model.
LadderStep step(const std::string& op, const std::string& variant, double us, double flops,
                double bytes) {
  LadderStep s;
  s.cfg.op = &find_op(op);
  s.cfg.variant = size_t(s.cfg.op->find_variant(variant));
  s.cfg.block = s.cfg.variant_def().default_block;
  s.meas.total.median_us = us;
  s.meas.total.n = 10;
  s.flops = flops;
  s.model_bytes = bytes;
  return s;
}

}  // namespace

TEST_SUITE("cpu") {
  TEST_CASE("ladder: the configurations follow the spec, in step order") {
    Runner r(Backend::Cpu);
    playground(r, "branch", "1000");
    const auto& variants = r.stages()[0].op->def.variants;
    LadderSpec s;
    std::vector<ResolvedStage> c = ladder_configs(r, 0, s);
    REQUIRE(c.size() == variants.size());
    for (size_t v = 0; v < c.size(); ++v) {
      CHECK(c[v].variant == v);
      CHECK(c[v].math == MathMode::Precise);
    }
    s.every_block = true;
    size_t blocks = 0;
    for (const VariantDef& v : variants) blocks += v.blocks.size();
    CHECK(ladder_configs(r, 0, s).size() == blocks);
    s.both_math = true;
    c = ladder_configs(r, 0, s);
    REQUIRE(c.size() == 2 * blocks);
    CHECK(c[0].math == MathMode::Precise);
    CHECK(c[1].math == MathMode::Fast);
    s = LadderSpec{};
    s.every_variant = false;
    c = ladder_configs(r, 0, s);
    REQUIRE(c.size() == 1);
    CHECK(c[0].variant == r.stages()[0].variant);
    CHECK(c[0].block == r.stages()[0].block);
  }

  TEST_CASE("ladder: on the CPU references every step is timed, and the exports hold them") {
    Runner r(Backend::Cpu);
    playground(r, "branch", "4099");
    const HostImage before = r.read_slot("branch");
    std::vector<std::pair<size_t, size_t>> seen;
    MeasureOptions m;  // bench's defaults: the CPU caps them
    const Ladder l = run_ladder(r, 0, LadderSpec{}, m, nullptr, [&](size_t done, size_t total) {
      seen.push_back({done, total});
      return true;
    });
    CHECK(l.op == "branch");
    CHECK(l.copy_gbs == 0);
    CHECK(l.ceiling_variant.empty());
    REQUIRE(l.steps.size() == 3);
    REQUIRE(seen.size() == 3);
    CHECK(seen.back() == std::make_pair(size_t(3), size_t(3)));
    for (const LadderStep& s : l.steps) {
      CHECK(s.median_us() > 0);
      CHECK(s.meas.total.n == 5);
      CHECK(s.model_bytes == 2.0 * 4099 * 4);  // a float read and written per element
      CHECK(std::isfinite(s.gbs()));
      CHECK(std::isnan(s.gflops()));           // branch has no FLOP model
      CHECK(std::isnan(l.pct_of_ceiling(s)));  // no copy ceiling without a GPU
      CHECK(s.regs() == 0);                    // no kernel launched
      CHECK_FALSE(s.counted);
      CHECK(std::isnan(s.dram_bytes()));
    }
    // The configured output is back.
    const HostImage after = r.read_slot("branch");
    CHECK(std::memcmp(before.bytes(), after.bytes(), before.desc().bytes()) == 0);

    const std::string csv = ladder_csv(l);
    CHECK(lines(csv) == 4);
    CHECK(csv.rfind("op,variant,block,math,median_us", 0) == 0);
    CHECK(csv.find("branch,v2_warp_uniform,256x1,precise,") != std::string::npos);
    const nlohmann::json j = nlohmann::json::parse(ladder_json(l));
    REQUIRE(j["steps"].size() == 3);
    CHECK(j["steps"][0]["variant"] == "v1_divergent");
    CHECK(j["steps"][0]["median_us"].get<double>() == l.steps[0].median_us());
    CHECK(j["steps"][0]["pct_ceiling"].is_null());
    CHECK(j["steps"][0]["delta"].get<std::string>().size() > 10);
    CHECK(j["measured"].get<std::string>().find("5 timed runs") != std::string::npos);
  }

  TEST_CASE("ladder: stopping keeps the steps done; a ceiling variant sets the percent") {
    Runner r(Backend::Cpu);
    playground(r, "matmul", "33x65x129");
    const Ladder stopped = run_ladder(r, 0, LadderSpec{}, MeasureOptions{}, nullptr,
                                      [](size_t done, size_t) { return done < 2; });
    CHECK(stopped.steps.size() == 2);
    REQUIRE(!stopped.notes.empty());
    CHECK(stopped.notes.back().find("stopped after 2 of") != std::string::npos);

    Ladder l;
    l.ceiling_variant = "cublas";
    l.steps = {step("matmul", "v1_naive", 400, 2e9, 1e8), step("matmul", "cublas", 100, 2e9, 1e8),
               step("matmul", "cublas", 80, 2e9, 1e8)};
    CHECK(l.ceiling_us() == 80);
    CHECK(l.pct_of_ceiling(l.steps[0]) == doctest::Approx(20));
    CHECK(l.pct_of_ceiling(l.steps[2]) == doctest::Approx(100));
    CHECK(l.ceiling_name().find("cublas") != std::string::npos);
    CHECK(l.steps[0].gflops() == doctest::Approx(5000));  // 2e9 FLOPs in 400 us
    CHECK(l.steps[0].gbs() == doctest::Approx(250));      // 1e8 bytes in 400 us
    // Without a ceiling variant: against a copy of the same bytes.
    Ladder c;
    c.steps = {step("branch", "v1_divergent", 100, 0, 1e8)};
    c.steps[0].copy_same_gbs = 2000;
    CHECK(c.pct_of_ceiling(c.steps[0]) == doctest::Approx(50));  // 1000 of 2000 GB/s
  }

  TEST_CASE("roofline: roofs, the ridge, and points from given counts") {
    RoofCeilings c;
    c.gbs = 100, c.gflops = 1000;
    CHECK(c.roof(1) == 100);
    CHECK(c.roof(0.5) == 50);
    CHECK(c.roof(100) == 1000);
    CHECK(c.ridge() == 10);
    RoofPoint p{"a", 1e8, 1e8, 1000, false};  // 1 FLOP per byte, 100 GFLOP/s
    CHECK(p.intensity() == 1);
    CHECK(p.gflops() == doctest::Approx(100));
    CHECK(p.pct_of_roof(c) == doctest::Approx(100));
    RoofPoint q{"b", 1e9, 1e7, 2000, false};  // 100 FLOPs per byte, 500 GFLOP/s: compute roof
    CHECK(q.pct_of_roof(c) == doctest::Approx(50));
    CHECK(std::isnan(RoofPoint{}.pct_of_roof(c)));

    const RoofCeilings o = orin_ceilings();
    CHECK(o.estimate);
    CHECK(o.gbs == 183);
    CHECK(o.gflops == doctest::Approx(5324.8));
    CHECK(o.ridge() == doctest::Approx(5324.8 / 183));
    CHECK(o.gflops_what.find("2048") != std::string::npos);

    // A ladder's points: the model where the op has one, the counters where collected.
    Ladder l;
    l.steps = {step("matmul", "v1_naive", 500, 2e9, 1e7),
               step("matmul", "v3_smem_tile", 100, 2e9, 1e7),
               step("branch", "v1_divergent", 50, 0, 1e6)};
    l.steps[1].counted = true;
    CounterValues v;
    v.fp32_flops = 2e9, v.fp64_flops = 0, v.dram_read_bytes = 3e7, v.dram_write_bytes = 1e7;
    v.achieved_occupancy_pct = 40, v.duration_ns = 1;
    l.steps[1].counters.report.ranges = {v, v};
    const std::vector<RoofPoint> model = roof_points(l, false);
    REQUIRE(model.size() == 2);  // branch has no FLOP model
    CHECK(model[0].intensity() == doctest::Approx(200));
    CHECK(model[1].gflops() == doctest::Approx(20000));
    const std::vector<RoofPoint> measured = roof_points(l, true);
    REQUIRE(measured.size() == 1);
    CHECK(measured[0].measured);
    CHECK(measured[0].flops == 4e9);  // two launches
    CHECK(measured[0].bytes == 8e7);  // read + written, two launches
    CHECK(measured[0].intensity() == doctest::Approx(50));
    CHECK(l.steps[1].achieved_occupancy() == doctest::Approx(0.4));
    CHECK(l.steps[1].measured_flops() == 4e9);
  }

  TEST_CASE("gui: --ladder runs every step headless and prints them; a wrong stage is said") {
    const std::string base =
        (std::filesystem::temp_directory_path() / ("lab_ladder_" + std::to_string(::getpid())))
            .string();
    const Result r = lab_cli(
        "gui --headless --frames 8 --device cpu --lab matmul --size 17x13x5 --ladder matmul "
        "--ladder-view roofline --ladder-export " +
        base);
    INFO(r.out);
    CHECK(r.code == 0);
    CHECK(has(r, "gui: ladder matmul: 8 steps"));
    size_t steps = 0;
    for (size_t at = r.out.find("gui: ladder step"); at != std::string::npos;
         at = r.out.find("gui: ladder step", at + 1))
      ++steps;
    CHECK(steps == 8);
    CHECK(has(r, "gui: ladder step cublas"));
    CHECK(has(r, "gui: ladder why: explanations compare GPU kernels (none on the CPU)"));
    // The exports: the table twice and the roofline as drawn.
    std::ifstream csv(base + ".csv"), json(base + ".json");
    std::string line;
    size_t rows = 0;
    while (std::getline(csv, line)) ++rows;
    CHECK(rows == 9);  // a header and 8 steps
    const nlohmann::json j = nlohmann::json::parse(json);
    CHECK(j["steps"].size() == 8);
    CHECK(std::filesystem::file_size(base + ".png") > 1000);
    for (const char* ext : {".csv", ".json", ".png"}) std::filesystem::remove(base + ext);

    const Result wrong =
        lab_cli("gui --headless --frames 4 --device cpu --lab branch --size 17 --ladder harris");
    INFO(wrong.out);
    CHECK(wrong.code == 0);
    CHECK(has(wrong, "gui: ladder: not run"));
    CHECK(lab_cli("gui --headless --ladder-view bars").code == 64);
    // The "why" tab on the CPU: drawn, and it says why it has nothing to show.
    const Result why = lab_cli(
        "gui --headless --frames 8 --device cpu --lab branch --size 4099 --ladder branch "
        "--ladder-view why");
    INFO(why.out);
    CHECK(why.code == 0);
    CHECK(has(why, "gui: ladder branch:"));
  }
  TEST_CASE("A/B: two variants on the same input, each against its reference, B against A") {
    Runner r(Backend::Cpu);
    playground(r, "branch", "4099");
    const HostImage before = r.read_slot("branch");
    ResolvedStage a = r.stages()[0], b = r.stages()[0];
    a.variant = size_t(a.op->find_variant("v1_divergent"));
    b.variant = size_t(b.op->find_variant("v3_branchless"));
    const AbCompare c = compare_ab(r, 0, a, b, MeasureOptions{});
    CHECK(c.output_names == std::vector<std::string>{"branch"});
    CHECK(c.a.step.cfg.variant_def().name == "v1_divergent");
    CHECK(c.b.step.cfg.variant_def().name == "v3_branchless");
    CHECK(c.a.step.median_us() > 0);
    CHECK(c.b.step.meas.total.n == 5);  // the CPU's capped runs
    CHECK(c.a.vs_reference.pass());
    CHECK(c.b.vs_reference.pass());
    // The CPU references of both variants compute the same values: B equals A.
    CHECK(c.a_vs_b.count == 4099);
    CHECK(c.a_vs_b.max_abs == 0);
    CHECK(c.a_vs_b.over == 0);
    REQUIRE(c.difference.size() == 1);
    CHECK(c.difference[0].desc() == c.a.outputs[0].desc());
    // The configured output is back.
    const HostImage after = r.read_slot("branch");
    CHECK(std::memcmp(before.bytes(), after.bytes(), before.desc().bytes()) == 0);
  }

  TEST_CASE("A/B: the difference image, and a different op refused") {
    HostImage x(ImageDesc{3, 2, 1, PixelType::F32}), y(ImageDesc{3, 2, 1, PixelType::F32});
    for (int k = 0; k < 6; ++k) {
      x.view<float>().at(k % 3, k / 3) = float(k);
      y.view<float>().at(k % 3, k / 3) = float(k) + (k == 4 ? -2.5f : 0.0f);
    }
    const HostImage d = abs_difference(x, y);
    REQUIRE(d.desc() == x.desc());
    CHECK(d.view<float>().at(1, 1) == 2.5f);
    CHECK(d.view<float>().at(0, 0) == 0.0f);
    CHECK(abs_difference(x, HostImage(ImageDesc{2, 2, 1, PixelType::F32})).desc().width == 0);
    CHECK(abs_difference(HostImage(ImageDesc{3, 2, 3, PixelType::F32}),
                         HostImage(ImageDesc{3, 2, 3, PixelType::F32}))
              .desc()
              .width == 0);
    Runner r(Backend::Cpu);
    playground(r, "branch", "17");
    ResolvedStage other = r.stages()[0];
    other.op = &find_op("reduce");
    other.variant = 0;
    CHECK_THROWS_AS(compare_ab(r, 0, other, r.stages()[0], MeasureOptions{}), Error);
  }

  TEST_CASE("gui engine job, CPU: pin A, change the variant, compare; a ladder request") {
    Runner r(Backend::Cpu);
    ui::JobInput first;
    first.lab = ui::LabRequest{"1000", 3};
    first.pipeline = default_pipeline("branch");
    REQUIRE(ui::run_job(r, std::move(first)).ran);
    ui::JobInput pin;
    pin.pin_stage = 0;
    ui::FrameResult pinned = ui::run_job(r, std::move(pin));
    REQUIRE(pinned.pinned);
    CHECK(pinned.pinned->variant_def().name == r.stages()[0].variant_def().name);
    PipelineConfig p = default_pipeline("branch");
    p.stages[0].variant = "v1_divergent";
    ui::JobInput change;
    change.pipeline = p;
    change.lab = ui::LabRequest{"1000", 3};
    REQUIRE(ui::run_job(r, std::move(change)).ran);
    ui::JobInput ab;
    auto ticks = std::make_shared<ui::JobProgress>();
    ab.ab = ui::AbRequest{0, *pinned.pinned, nullptr, ticks};
    const ui::FrameResult res = ui::run_job(r, std::move(ab));
    INFO(res.error, res.ab_error);
    REQUIRE(res.ab);
    CHECK(res.ab->a.step.cfg.variant_def().name == pinned.pinned->variant_def().name);
    CHECK(res.ab->b.step.cfg.variant_def().name == "v1_divergent");
    CHECK(res.ab->a_vs_b.over == 0);
    CHECK(ticks->last_step_ns > 0);  // its parts told the hang report they ended

    ui::JobInput lad;
    auto progress = std::make_shared<ui::JobProgress>();
    lad.ladder = ui::LadderRequest{0, LadderSpec{}, nullptr, progress};
    const ui::FrameResult lr = ui::run_job(r, std::move(lad));
    REQUIRE(lr.ladder_ran);
    REQUIRE(lr.ladder);
    CHECK(lr.ladder->steps.size() == 3);
    CHECK(progress->done == 3);
    CHECK(lr.ceilings.gflops == 0);  // no GPU: no measured roofs
  }
}

TEST_SUITE("gpu") {
  LAB_GPU_CASE("ladder on the GPU: every step timed, resources read, counters and ceilings") {
    Runner r(Backend::Cuda);
    playground(r, "matmul", "256x256x256");
    CounterCollector counters;
    const bool counted = counters.unavailable().empty();
    if (!counted) MESSAGE("counters unavailable, their checks skipped: " << counters.unavailable());
    MeasureOptions m;
    m.reps = 30;
    const Ladder l = run_ladder(r, 0, LadderSpec{}, m, counted ? &counters : nullptr);
    CHECK(l.copy_gbs > 100);
    CHECK(l.ceiling_variant == "cublas");
    REQUIRE(l.steps.size() == r.stages()[0].op->def.variants.size());
    for (const LadderStep& s : l.steps) {
      INFO(s.cfg.label());
      CHECK(s.median_us() > 0);
      CHECK(s.gflops() > 0);
      CHECK(std::isfinite(l.pct_of_ceiling(s)));
      if (s.cfg.variant_def().name != "cublas") {
        CHECK(s.regs() > 0);
        CHECK(s.theoretical_occupancy() > 0);
      }
      if (counted) {
        CHECK(s.achieved_occupancy() > 0);
        CHECK(s.achieved_occupancy() <= 1.01);
        CHECK(s.dram_bytes() > 0);
        // 2 MNK FLOPs at least (cuBLAS may split K and add partial sums).
        CHECK(s.measured_flops() >= 0.99 * 2.0 * 256 * 256 * 256);
      }
    }
    const RoofCeilings c = measured_ceilings(l.copy_gbs);
    CHECK(c.gflops > 1000);
    CHECK_FALSE(c.estimate);
    CHECK(roof_points(l, false).size() == l.steps.size());
    if (counted) CHECK(roof_points(l, true).size() == l.steps.size());
  }

  LAB_GPU_CASE("gui engine job: a ladder request runs the ladder and the roofline's ceilings") {
    Runner r(Backend::Cuda);
    ui::JobInput first;
    first.frame = io::synthetic_frame(640, 480);
    first.pipeline = default_pipeline();
    REQUIRE(ui::run_job(r, std::move(first)).ran);
    ui::JobInput in;
    auto progress = std::make_shared<ui::JobProgress>();
    in.ladder = ui::LadderRequest{1, LadderSpec{}, nullptr, progress};  // blur
    const ui::FrameResult res = ui::run_job(r, std::move(in));
    INFO(res.error, res.ladder_error);
    REQUIRE(res.ran);
    REQUIRE(res.ladder);
    CHECK(res.ladder->op == "blur");
    CHECK(res.ladder->steps.size() == r.stages()[1].op->def.variants.size());
    CHECK(progress->done == res.ladder->steps.size());
    CHECK(res.ceilings.gflops > 0);
    for (const LadderStep& s : res.ladder->steps) CHECK(std::isfinite(s.median_us()));
  }

  LAB_GPU_CASE("A/B on the GPU: precise against fast math, each within its own tolerance") {
    Runner r(Backend::Cuda);
    playground(r, "branch", "1000999");
    ResolvedStage a = r.stages()[0], b = r.stages()[0];
    a.math = MathMode::Precise, b.math = MathMode::Fast;
    MeasureOptions m;
    m.reps = 30;
    const AbCompare c = compare_ab(r, 0, a, b, m);
    CHECK(c.a.vs_reference.pass());
    CHECK(c.b.vs_reference.pass());
    CHECK(c.a.step.regs() > 0);
    CHECK(c.a.step.median_us() > 0);
    // __sinf and sinf differ: so do the outputs, by less than the looser tolerance.
    CHECK(c.a_vs_b.max_abs > 0);
    CHECK(c.a_vs_b.over == 0);
    // Fast math is faster here (branch is compute-bound on sinf).
    CHECK(c.b.step.median_us() < c.a.step.median_us());
  }
}
