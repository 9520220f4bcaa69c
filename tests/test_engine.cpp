// The engine's pieces on the CPU: registry invariants, parameters, pipeline overrides, block
// refusals, diff statistics, percentiles, and the runner's CPU backend.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>

#include "image_source.h"
#include "support.h"
#include "live.h"
#include "runner.h"
#include "stats.h"

using namespace lab;

namespace {

HostImage plane(int w, int h, float v) {
  HostImage img(ImageDesc{w, h, 1, PixelType::F32});
  auto p = img.view<float>();
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) p.at(x, y) = v;
  return img;
}

ErrorKind kind_of(void (*f)()) {
  try {
    f();
  } catch (const Error& e) {
    return e.kind();
  }
  return ErrorKind::Internal;  // "nothing thrown" shows as a mismatch below
}

}  // namespace

TEST_SUITE("cpu") {
  TEST_CASE("registry: every op is complete and the pipeline's slots chain") {
    std::set<std::string> produced{"input"};
    for (const Op& op : registry()) {
      INFO(op.def.name);
      CHECK(op.def.variants.size() >= 2);  // every stage teaches at least one step
      CHECK((op.def.reference != nullptr));
      CHECK((op.def.shape != nullptr));
      CHECK(op.fast_launch.size() == op.def.variants.size());
      // Exact ops (comparisons, integer selection) have a zero tolerance; tol_why says why.
      CHECK((op.def.tol_precise.abs >= 0 && op.def.tol_precise.rel >= 0));
      CHECK((op.def.tol_fast.abs >= op.def.tol_precise.abs));
      CHECK(!op.def.tol_why.empty());
      CHECK((op.def.default_variant.empty() || op.find_variant(op.def.default_variant) >= 0));
      // A playground's inputs are generated (lab_inputs), the pipeline's come from earlier stages.
      if (op.def.lab_inputs)
        for (size_t k = 1; k < op.def.inputs.size(); ++k) produced.insert(op.def.inputs[k]);
      for (const std::string& in : op.def.inputs) CHECK(produced.count(in) == 1);
      for (const std::string& out : op.def.outputs) produced.insert(out);
      for (size_t v = 0; v < op.def.variants.size(); ++v) {
        const VariantDef& vd = op.def.variants[v];
        INFO(vd.name);
        CHECK((vd.launch != nullptr));
        CHECK((op.fast_launch[v] != nullptr));
        CHECK((vd.launch != op.fast_launch[v]));  // really two compilations
        CHECK(!vd.delta.empty());
        CHECK(vd.delta.size() <= 100);  // one line: the step's technique, not its history
        // A fused variant reads slots written earlier and replaces earlier ops; slots of its
        // own are the op's first, then slots earlier ops write, with a shape rule for them.
        for (const std::string& in : vd.inputs)
          CHECK((optional_slot(in) || produced.count(in) == 1));
        for (const std::string& fused : vd.fuses) {
          INFO(fused);
          CHECK(produced.count(find_op(fused).def.outputs[0]) == 1);
          CHECK((vd.reference != nullptr));
        }
        if (!vd.outputs.empty()) {
          CHECK((vd.shape != nullptr));
          CHECK(vd.outputs.size() >= op.def.outputs.size());
          for (size_t k = 0; k < vd.outputs.size(); ++k)
            CHECK((k < op.def.outputs.size() ? vd.outputs[k] == op.def.outputs[k]
                                             : produced.count(vd.outputs[k]) == 1));
        }
        CHECK(block_refusal(vd, vd.default_block, nullptr).empty());
        for (const Block& b : vd.blocks) CHECK(b.threads() <= 1024);
        // Warp-shuffle and float4 kernels need each warp on 32 consecutive x of one row.
        if (vd.name.find("shfl") != std::string::npos ||
            vd.name.find("float4") != std::string::npos)
          for (const Block& b : vd.blocks) CHECK_MESSAGE(b.x % 32 == 0, b.str());
      }
    }
    CHECK_THROWS_AS(find_op("nope"), Error);
  }

  TEST_CASE(
      "every op file opens with a header of at most 40 lines and has at most 900; runs_when "
      "names a step") {
    // The header says what the op computes and how its ladder climbs; the steps' details live
    // in their one-line deltas. Counted to the first line that is not a comment.
    const std::filesystem::path src = std::filesystem::path(data_path("")) / ".." / "..";
    size_t files = 0;
    for (const char* dir : {"kernels/ops", "kernels/lab"})
      for (const auto& e : std::filesystem::directory_iterator(src / dir)) {
        if (e.path().extension() != ".cu") continue;
        std::ifstream f(e.path());
        std::string line;
        int header = 0;
        while (std::getline(f, line) && line.rfind("//", 0) == 0) ++header;
        INFO(e.path().string());
        CHECK(header <= 40);
        int lines = header + 1;  // a ladder a learner reads whole: topk.cu, detect.cu, ...
        while (std::getline(f, line)) ++lines;
        CHECK(lines <= 900);
        ++files;
      }
    CHECK(files >= 15);
    for (const Op& op : registry())
      for (const VariantDef& v : op.def.variants) {
        if (v.runs_when.empty()) continue;
        INFO(op.def.name << "/" << v.name << ": " << v.runs_when);
        bool names_step = false;  // "where: vN_name" (a step of the same op) or "op/vN_name"
        for (const Op& other : registry())
          for (const VariantDef& o : other.def.variants) {
            const std::string name = &other == &op ? o.name : other.def.name + "/" + o.name;
            names_step |= &o != &v && v.runs_when.find(": " + name) != std::string::npos;
          }
        CHECK(names_step);
      }
  }

  TEST_CASE("registry: ops.def gives the pipelines, the live stages and the sweeps' sizes") {
    const PipelineConfig k = default_pipeline("keypoints"), h = default_pipeline("harris");
    std::vector<std::string> ks, hs;
    for (const StageConfig& s : k.stages) ks.push_back(s.op);
    for (const StageConfig& s : h.stages) hs.push_back(s.op);
    CHECK(ks == std::vector<std::string>{"letterbox", "blur", "sobel", "harris", "nms", "topk",
                                         "sample", "l2norm"});
    CHECK(hs == std::vector<std::string>{"letterbox", "blur", "sobel", "harris"});
    for (const Op& op : registry()) {
      INFO(op.def.name);
      if (op.def.lab_inputs) {  // a playground: a pipeline of its own, odd sizes to sweep
        CHECK(op.pipelines == 0u);
        CHECK(op.test_sizes.size() >= 3);
        for (const std::string& size : op.test_sizes) CHECK_NOTHROW(make_lab_inputs(op, size, 1));
      } else {
        CHECK(op.pipelines != 0u);
      }
      CHECK(live_refusal(op).empty() == op.live);
    }
  }

  TEST_CASE("parameters: decode, defaults, validation") {
    const Op& harris = find_op("harris");
    REQUIRE(harris.def.params.size() == 1);
    CHECK(harris.def.params[0].name == "k");
    CHECK(harris.def.params[0].def == doctest::Approx(0.04));
    CHECK_NOTHROW(validate_params("harris", harris.def.params, {{"k", 0.06}}));
    CHECK_THROWS_AS(validate_params("harris", harris.def.params, {{"k", 0.5}}), Error);
    CHECK_THROWS_AS(validate_params("harris", harris.def.params, {{"q", 0.1}}), Error);
    const Op& lb = find_op("letterbox");
    CHECK_THROWS_AS(validate_params("letterbox", lb.def.params, {{"width", 12.5}}), Error);
    CHECK_THROWS_AS(validate_params("letterbox", lb.def.params, {{"width", 0}}), Error);
  }

  TEST_CASE("pipeline overrides and their errors") {
    PipelineConfig p = default_pipeline();
    size_t image_ops = 0;
    for (const Op& op : registry())
      image_ops += op.def.lab_inputs == nullptr && !(op.pipelines & LAB_ON_DEMAND);
    REQUIRE(p.stages.size() == image_ops);
    apply_variant(p, "blur=v2_separable");
    apply_block(p, "blur=16x16");
    apply_math(p, "fast");
    apply_math(p, "sobel=precise");
    apply_param(p, "harris.k=0.06");
    apply_size(p, "640x480");
    const auto r = resolve(p, nullptr);
    CHECK(r[1].variant_def().name == "v2_separable");
    CHECK(r[1].block == Block{16, 16});
    CHECK(r[1].math == MathMode::Fast);
    CHECK(r[2].math == MathMode::Precise);
    CHECK(r[3].params.at("k") == doctest::Approx(0.06));
    CHECK(r[0].params.at("width") == 640);
    apply_variant(p, "letterbox=v2_fused");
    CHECK(resolve(p, nullptr)[0].label() == "letterbox/v2_fused 32x8 fast");

    auto usage = [](auto f) {
      try {
        f();
      } catch (const Error& e) {
        return e.kind() == ErrorKind::Usage;
      }
      return false;
    };
    CHECK(usage([&] { apply_variant(p, "blur"); }));
    CHECK(usage([&] { apply_variant(p, "nope=v1"); }));
    CHECK(usage([&] { apply_block(p, "blur=32"); }));
    CHECK(usage([&] { apply_block(p, "blur=axb"); }));
    CHECK(usage([&] { apply_math(p, "quick"); }));
    CHECK(usage([&] { apply_math(p, "blur=quick"); }));
    CHECK(usage([&] { apply_param(p, "harris.k=abc"); }));
    CHECK(usage([&] { apply_param(p, "harris=1"); }));
    CHECK(usage([&] { apply_size(p, "640"); }));
    PipelineConfig q = default_pipeline();
    apply_variant(q, "blur=v9_magic");
    CHECK(usage([&] { resolve(q, nullptr); }));
  }

  TEST_CASE("block refusals say why") {
    const Op& blur = find_op("blur");
    const VariantDef& tile = blur.def.variants[size_t(blur.find_variant("v3_smem_tile"))];
    CHECK(block_refusal(tile, {32, 8}, nullptr).empty());
    CHECK(block_refusal(tile, {64, 32}, nullptr).find("1024") != std::string::npos);
    CHECK(block_refusal(tile, {8, 8}, nullptr).find("allowed") != std::string::npos);
    CHECK(block_refusal(tile, {0, 8}, nullptr).find("at least one") != std::string::npos);
    DeviceInfo tiny;  // a made-up device with 4 KiB of shared memory per block
    tiny.present = true;
    tiny.smem_per_block = 4096;
    CHECK(block_refusal(tile, {32, 32}, &tiny).find("shared memory") != std::string::npos);
    CHECK(block_refusal(tile, {32, 4}, &tiny).empty());  // 8*37*4 + 8*32*4 = 2208 bytes
  }

  TEST_CASE("diff statistics") {
    const HostImage ref = plane(4, 3, 1.0f);
    HostImage got = plane(4, 3, 1.0f);
    DiffStats same = diff_images(got, ref, {1e-6, 0});
    CHECK(same.pass());
    CHECK(same.max_abs == 0);
    CHECK(std::isinf(same.psnr));
    CHECK(same.bad_x == -1);

    got.view<float>().at(2, 1) = 1.5f;  // one value off by 0.5
    got.view<float>().at(3, 2) = 1.25f;
    DiffStats d = diff_images(got, ref, {0.1, 0}, "blur");
    CHECK_FALSE(d.pass());
    CHECK(d.over == 2);
    CHECK(d.count == 12);
    CHECK(d.max_abs == doctest::Approx(0.5));
    CHECK(d.mean_abs == doctest::Approx(0.75 / 12));
    // PSNR with peak max|ref| = 1: MSE = (0.25 + 0.0625) / 12.
    CHECK(d.psnr == doctest::Approx(10 * std::log10(12 / 0.3125)));
    CHECK(d.bad_slot == "blur");
    CHECK(d.bad_x == 2);
    CHECK(d.bad_y == 1);
    CHECK(d.bad_got == doctest::Approx(1.5));

    // A relative tolerance scales with max|ref|.
    const HostImage big = plane(2, 2, 1000.0f);
    HostImage big_got = plane(2, 2, 1000.0f);
    big_got.view<float>().at(0, 0) = 1000.5f;
    CHECK(diff_images(big_got, big, {0, 1e-3}).pass());
    CHECK_FALSE(diff_images(big_got, big, {0, 1e-4}).pass());

    // NaN (a poisoned pixel) never passes, whatever the tolerance.
    HostImage nan = plane(2, 2, 1.0f);
    nan.view<float>().at(1, 1) = std::numeric_limits<float>::quiet_NaN();
    const DiffStats n = diff_images(nan, plane(2, 2, 1.0f), {1e9, 0});
    CHECK_FALSE(n.pass());
    CHECK(n.nans == 1);

    DiffStats m = diff_images(plane(4, 3, 1.0f), ref, {1e-6, 0}, "grad_x");
    merge_diff(m, d);
    CHECK(m.count == 24);
    CHECK(m.over == 2);
    CHECK(m.bad_slot == "blur");
    CHECK(m.max_abs == doctest::Approx(0.5));

    CHECK_THROWS_AS(diff_images(plane(2, 2, 0), plane(3, 2, 0), {}), Error);
  }

  TEST_CASE("percentiles by nearest rank") {
    std::vector<double> v;
    for (int i = 100; i >= 1; --i) v.push_back(i);
    CHECK(median(v) == 50);
    CHECK(percentile(v, 95) == 95);
    CHECK(percentile(v, 100) == 100);
    CHECK(percentile(v, 0) == 1);
    CHECK(median({}) == 0);
    CHECK(median({7}) == 7);
  }

  TEST_CASE("runner, CPU backend: the whole pipeline on the references") {
    Runner r(Backend::Cpu);
    const HostImage in = io::synthetic_frame(320, 200);
    PipelineConfig p = default_pipeline();
    apply_size(p, "160x96");
    r.configure(p, in.desc());
    r.set_input(in);
    for (size_t i = 0; i < r.stages().size(); ++i) r.poison_outputs(i);
    r.run();
    const auto slots = r.slots();
    REQUIRE(slots.size() == 10);
    CHECK(slots[0].name == "input");
    CHECK(slots[5].name == "harris");
    CHECK(slots[6].name == "nms");
    CHECK(slots[7].desc == ImageDesc{4096, 1, 3, PixelType::F32});   // keypoints
    CHECK(slots[9].desc == ImageDesc{64, 4096, 1, PixelType::F32});  // descriptors
    for (size_t k = 1; k < slots.size(); ++k) {
      const HostImage img = r.read_slot(slots[k].name);
      if (k <= 6) CHECK(img.desc() == ImageDesc{160, 96, 1, PixelType::F32});
      const auto v = img.view<float>();
      size_t bad = 0;
      for (int y = 0; y < v.height; ++y)
        for (int x = 0; x < v.width * v.channels; ++x) bad += !std::isfinite(v.row(y)[x]);
      CHECK_MESSAGE(bad == 0, slots[k].name);
    }
    // The reference of a stage on the slot contents reproduces that stage's output.
    const auto ref = r.reference(2);
    CHECK(r.compare(2, ref, MathMode::Precise).max_abs == 0);
    CHECK(r.stage_bytes(1) == 2.0 * 160 * 96 * 4);
  }

  TEST_CASE("runner: bad input shapes are data errors, bad configs usage errors") {
    Runner r(Backend::Cpu);
    CHECK(kind_of([] {
            Runner q(Backend::Cpu);
            q.configure(default_pipeline(), ImageDesc{8, 8, 2, PixelType::U8});
          }) == ErrorKind::Data);
    CHECK(kind_of([] {
            Runner q(Backend::Cpu);
            q.configure(default_pipeline(), ImageDesc{0, 8, 3, PixelType::U8});
          }) == ErrorKind::Data);
    CHECK(kind_of([] {
            PipelineConfig p = default_pipeline();
            p.stages.erase(p.stages.begin());  // blur with no letterbox to read
            Runner q(Backend::Cpu);
            q.configure(p, ImageDesc{8, 8, 3, PixelType::U8});
          }) == ErrorKind::Usage);
    CHECK_THROWS_AS(r.read_slot("nope"), Error);
  }

  TEST_CASE("runner, CUDA backend without a device is 'unavailable'" *
            doctest::skip(device_info().present)) {
    CHECK(kind_of([] { Runner q(Backend::Cuda); }) == ErrorKind::Unavailable);
  }

  TEST_CASE("exit codes follow sysexits") {
    CHECK(exit_code(ErrorKind::Usage) == 64);
    CHECK(exit_code(ErrorKind::Data) == 65);
    CHECK(exit_code(ErrorKind::NoInput) == 66);
    CHECK(exit_code(ErrorKind::Unavailable) == 69);
    CHECK(exit_code(ErrorKind::Internal) == 70);
    CHECK(exit_code(ErrorKind::CantCreate) == 73);
    CHECK(exit_code(ErrorKind::Io) == 74);
  }
}
