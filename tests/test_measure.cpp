// The measuring module (measure.h): its statistics, its stopping rule, the check loop and the
// ncu command line, on the CPU references; the CLI options that drive it.
#include <cuda_runtime_api.h>

#include <cmath>
#include <string>
#include <vector>

#include "delay.h"
#include "frame_budget.h"
#include "measure.h"
#include "support.h"

using namespace lab;

namespace {
// The harris pipeline at `size`, configured and run once on a patterned input of `in`.
void run_harris(Runner& r, const std::string& size, const ImageDesc& in, unsigned step) {
  PipelineConfig p = default_pipeline("harris");
  apply_size(p, size);
  HostImage img(in);
  for (size_t k = 0; k < in.bytes(); ++k) img.bytes()[k] = uint8_t(k * step);
  r.configure(p, in);
  r.set_input(img);
  r.run();
}
}  // namespace

TEST_SUITE("cpu") {
  TEST_CASE("frame budget: each part's rate, the slowest names the limit, the source's own rate") {
    // A 4K still image over pinned upload: the DMA limits, not the kernels.
    FrameBudget b = frame_budget(0.002, 0, 0.455, 0.076, 0.2, 0);
    CHECK(b.limit() == "upload");
    CHECK(b.parts[2].fps() == doctest::Approx(1e3 / 0.455));
    const std::string l = b.line();
    INFO(l);
    CHECK(l.find("upload 0.455 ms (2198 fps)") != std::string::npos);
    CHECK(l.find("host copy 0 ms") != std::string::npos);  // measured, and nothing to copy
    CHECK(l.find("; the limit: upload") != std::string::npos);
    // A camera at 30 fps limits a lab that could run faster; parts not measured are left out.
    b = frame_budget(33.0, -1, -1, 0.08, -1, 30);
    CHECK(b.limit() == "the source's own rate");
    CHECK(b.line().find("display") == std::string::npos);
    CHECK(b.line().find("the source delivers 30 fps") != std::string::npos);
    // A camera slower than its nominal rate: its reads limit.
    CHECK(frame_budget(50.0, -1, -1, 0.08, -1, 30).limit() == "decode or capture");
    // Without a GPU, the references take the pipeline's part.
    b = frame_budget(1.0, -1, -1, 40.0, -1, 0, "CPU references");
    CHECK(b.limit() == "CPU references");
    CHECK(frame_budget(-1, -1, -1, -1, -1, 0).limit().empty());
  }

  TEST_CASE("measure: order statistics and the median's standard error") {
    const Timing t = summarize({5, 1, 4, 2, 3});
    CHECK(t.n == 5);
    CHECK(t.median_us == 3);
    CHECK(t.p95_us == 5);
    CHECK(t.min_us == 1);
    // sd of 1..5 is sqrt(2.5); 1.2533 sd / sqrt(5) / median 3.
    CHECK(t.noise == doctest::Approx(1.2533 * std::sqrt(2.5) / std::sqrt(5.0) / 3));
    CHECK(median_noise({7, 7, 7, 7}) == 0);
    CHECK(std::isnan(median_noise({7})));
    const Timing none = summarize({});
    CHECK(none.n == 0);
    CHECK(std::isnan(none.median_us));
  }

  TEST_CASE("measure: the SM clock note appears only when the clock moved") {
    CHECK_FALSE(ClockDrift{1980, 1975}.moved());
    CHECK(ClockDrift{1980, 1975}.note().empty());
    CHECK(ClockDrift{1980, 1500}.moved());
    CHECK(ClockDrift{1980, 1500}.note().find("1980 to 1500 MHz") != std::string::npos);
    CHECK_FALSE(ClockDrift{}.moved());  // unknown (CPU): no note
  }

  TEST_CASE("measure: a stage on the CPU references, a fixed count or a noise target") {
    Runner r(Backend::Cpu);
    run_harris(r, "64x48", ImageDesc{96, 64, 1, PixelType::U8}, 37);
    MeasureOptions m;
    m.warmup = 1, m.reps = 7;
    const Measurement fixed = measure_stage(r, 1, r.stages()[1], m);
    CHECK(fixed.reps == 7);
    CHECK(fixed.total.n == 7);
    CHECK(fixed.total.median_us > 0);
    CHECK(fixed.launches.empty());                      // the CPU references launch nothing
    m.reps = 500, m.min_reps = 20, m.max_noise = 10.0;  // any spread meets 1000 %
    const Measurement noisy = measure_stage(r, 1, r.stages()[1], m);
    CHECK(noisy.reps == 20);
    m.max_noise = 0;  // no target: every run
    m.reps = 30;
    CHECK(measure_frame(r, FrameMode::PerLaunch, m).reps == 30);
  }

  TEST_CASE("check loop: every variant and math mode of a stage, on the CPU references") {
    Runner r(Backend::Cpu);
    run_harris(r, "33x17", ImageDesc{40, 30, 3, PixelType::U8}, 13);
    int seen = 0;
    const auto results = check_stage(r, 1, true, [&](const CheckResult&) { ++seen; });
    const size_t variants = r.stages()[1].op->def.variants.size();
    CHECK(results.size() == 2 * variants);  // quick: one block per variant, two math modes
    CHECK(seen == int(results.size()));
    for (const CheckResult& c : results) {
      CHECK_MESSAGE(c.pass(), c.cfg.label());
      CHECK_FALSE(c.refused);
    }
    // The configured output was restored.
    const StageCompare cmp = compare_stage(r, 1);
    CHECK(cmp.diff.pass());
    CHECK(cmp.diff.max_abs == 0);
  }

  TEST_CASE("ncu command line: the configuration's NVTX range, the lab's metrics, its flags") {
    PipelineConfig p = default_pipeline();
    apply_variant(p, "blur=v2_separable");
    apply_param(p, "harris.k=0.05");
    const auto stages = resolve(p, nullptr);
    const std::string cmd =
        ncu_command("/opt/kernel lab/kernel-lab", "--input x.png", stages, 1, 2);
    const ResolvedStage& b = stages[1];
    CHECK(cmd.rfind("ncu --clock-control none --cache-control all --nvtx --nvtx-include ", 0) == 0);
    CHECK(cmd.find("blur/v2_separable/" + b.block.str() + "/precise/") != std::string::npos);
    CHECK(cmd.find("--launch-count 2") != std::string::npos);
    // run --cold's flush kernels are not the stage's: ncu leaves them out.
    CHECK(cmd.find("--kernel-name 'regex:^(?!.*(_flush_kernel|discard_kernel))'") !=
          std::string::npos);
    CHECK(cmd.find("dram__bytes_read.sum") != std::string::npos);
    CHECK(cmd.find("sm__warps_active.avg.pct_of_peak_sustained_active") != std::string::npos);
    CHECK(cmd.find("'/opt/kernel lab/kernel-lab' run --frames 1 --cold --input x.png") !=
          std::string::npos);
    CHECK(cmd.find("--variant blur=v2_separable") != std::string::npos);
    CHECK(cmd.find("--param harris.k=0.05") != std::string::npos);
    CHECK(cmd.find("--variant topk=") != std::string::npos);
  }

  TEST_CASE("bench: measurement options on the command line") {
    const Result ncu = lab_cli("bench --print-ncu --stage blur --input synthetic:64x48");
    CHECK(ncu.code == 0);
    CHECK(has(ncu, "--cache-control all --nvtx --nvtx-include blur/"));
    CHECK(has(ncu, " run --frames 1 --cold --input synthetic:64x48"));
    // What that command runs: run --cold (on the CPU references there is no L2 to flush).
    CHECK(lab_cli("run --device cpu --cold --input synthetic:64x48 --size 32x16").code == 0);
    CHECK(lab_cli("run --cold --graph --input synthetic:64x48").code ==
          64);  // a graph: no launch to flush before
    CHECK(lab_cli("bench --noise 150").code == 64);
    CHECK(lab_cli("bench --queue-ahead -5").code == 64);
    CHECK(lab_cli("bench --min-reps 1").code == 64);
    // No GPU in use: bench (with counters or not) says why in one line, exit 69.
    const Result cpu = lab_cli("bench --device cpu --counters --input synthetic:64x48");
    CHECK(cpu.code == 69);
    CHECK(has(cpu, "no CUDA device in use"));
  }
}

TEST_SUITE("gpu") {
  LAB_GPU_CASE("bench: without --input it times a real image, with it the input given") {
    const Result real = lab_cli("bench --stage blur --warmup 2 --reps 5");
    CHECK(real.code == 0);
    CHECK(has(real, "box_in_scene.png"));
    const Result syn = lab_cli("bench --stage blur --warmup 2 --reps 5 --input synthetic:640x480");
    CHECK(syn.code == 0);
    CHECK(!has(syn, "box_in_scene.png"));
  }

  LAB_GPU_CASE("measure: the SM clock is read on the GPU, and a cold run starts DRAM-cold") {
    Runner r(Backend::Cuda);
    const double mhz = measure_sm_clock_mhz(r.stream());
    MESSAGE("SM clock " << mhz << " MHz");
    CHECK(mhz > 300);
    CHECK(mhz < 4000);
    r.configure_lab(default_pipeline("access"),
                    make_lab_inputs(*find_playground("access"), "2^20", 3));
    MeasureOptions m;
    m.warmup = 3, m.reps = 30;
    const Measurement warm = measure_stage(r, 0, r.stages()[0], m);
    m.cold_l2 = true;
    const Measurement cold = measure_stage(r, 0, r.stages()[0], m);
    MESSAGE("4 MiB in, 4 MiB out: warm " << warm.total.median_us << " us, cold "
                                         << cold.total.median_us << " us");
    CHECK(cold.total.median_us > warm.total.median_us);  // the input comes from DRAM
    CHECK(cold.reps == 30);
  }

  LAB_GPU_CASE("counters: a copy kernel moves exactly the bytes it must (buffer >> L2)") {
    CounterCollector c;
    if (!c.unavailable().empty()) {  // gVisor hosts or no permission: said, not failed
      MESSAGE("counters unavailable: " << c.unavailable());
      return;
    }
    Runner r(Backend::Cuda);
    // access/v1_coalesced: out[i] = 2 in[i] over 2^27 floats, 512 MiB read and 512 MiB written,
    // against a 60 MB L2: DRAM must see every byte once.
    r.configure_lab(default_pipeline("access"),
                    make_lab_inputs(*find_playground("access"), "2^27", 3));
    ResolvedStage s = r.stages()[0];
    s.variant = size_t(s.op->find_variant("v1_coalesced"));
    s.block = s.variant_def().default_block;
    r.run_stage(0, &s);
    const CounterRun run = collect_counters(r, c, 0, &s);
    REQUIRE_MESSAGE(run.report.ok, run.report.why);
    REQUIRE(run.report.ranges.size() == 1);
    const CounterValues& v = run.report.ranges[0];
    const double half = double(size_t(1) << 29);
    MESSAGE("read " << v.dram_read_bytes << " B, written " << v.dram_write_bytes << " B, "
                    << run.report.passes << " passes, " << run.report.ms << " ms; achieved "
                    << v.achieved_occupancy_pct << " %, memory " << v.mem_throughput_pct << " %");
    CHECK(std::fabs(v.dram_read_bytes - half) <= 0.02 * half);
    // Writes inside the range are the write-backs the L2 makes before the kernel ends: all of
    // the output but what is still dirty in the L2 at its end, at most the L2's size.
    int l2 = 0;
    REQUIRE(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device_info().index) == 0);
    CHECK(v.dram_write_bytes <= 1.02 * half);
    CHECK(v.dram_write_bytes >= half - double(l2));
  }
}
