// The teaching playgrounds: their inputs, references, CLI, and (GPU) every variant x block x
// math against the reference on odd sizes.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "npy.h"
#include "measure.h"
#include "runner.h"
#include "support.h"

namespace fs = std::filesystem;

namespace {

// Every playground the registry has: a new one joins these tests by its line in ops.def.
const std::vector<std::string> kLabs = [] {
  std::vector<std::string> v;
  for (const lab::Op& op : lab::registry())
    if (op.def.lab_inputs) v.push_back(op.def.name);
  return v;
}();

// The op's CPU reference on the given inputs (its first output).
lab::HostImage reference(const std::string& name, std::vector<lab::HostImage> in,
                         const lab::ParamMap& params = {}) {
  const lab::Op& op = lab::find_op(name);
  std::vector<lab::ImageDesc> descs;
  for (const auto& i : in) descs.push_back(i.desc());
  const std::vector<lab::ImageDesc> out_descs = op.def.shape(descs, params);
  lab::HostImage out(out_descs.at(0));
  lab::StageArgs a;
  for (auto& i : in) a.in.push_back(i.ref());
  a.out.push_back(out.ref());
  a.params = params;
  op.def.reference(a);
  return out;
}

lab::HostImage f32(int w, int h, std::vector<float> v) {
  lab::HostImage img(lab::ImageDesc{w, h, 1, lab::PixelType::F32});
  REQUIRE(v.size() == size_t(w) * h);
  std::memcpy(img.bytes(), v.data(), v.size() * 4);
  return img;
}

lab::HostImage u32(std::vector<uint32_t> v) {
  lab::HostImage img(lab::ImageDesc{int(v.size()), 1, 1, lab::PixelType::U32});
  std::memcpy(img.bytes(), v.data(), v.size() * 4);
  return img;
}

template <typename T>
std::vector<T> values(const lab::HostImage& img) {
  std::vector<T> v(img.desc().pixels());
  std::memcpy(v.data(), img.bytes(), v.size() * sizeof(T));  // one row, or a contiguous host image
  return v;
}

// Odd sizes for each playground: 1 element, not multiples of any block or tile, and larger.
// The odd sizes ops.def gives the playground.
std::vector<std::string> odd_sizes(const std::string& lab) {
  return lab::find_op(lab).test_sizes;
}

}  // namespace

TEST_SUITE("cpu") {
  TEST_CASE("playgrounds: listed as pipelines, each complete") {
    const auto names = lab::pipeline_names();
    for (const std::string& n : kLabs) {
      INFO(n);
      CHECK(std::find(names.begin(), names.end(), n) != names.end());
      const lab::Op* op = lab::find_playground(n);
      REQUIRE(op != nullptr);
      CHECK(!op->def.story.empty());
      CHECK(!op->def.lab_size_help.empty());
      CHECK(op->def.inputs.at(0) == "input");
      const lab::PipelineConfig p = lab::default_pipeline(n);
      REQUIRE(p.stages.size() == 1);
      CHECK(lab::playground_of(p) == op);
      for (const lab::VariantDef& v : op->def.variants) {
        INFO(v.name);
        CHECK(!v.expect.empty());  // every step says what it should do
      }
      int ceilings = 0;
      for (const lab::VariantDef& v : op->def.variants) ceilings += v.ceiling;
      CHECK(ceilings <= 1);
    }
    for (const char* n : {"matmul", "reduce", "scan", "sort"}) {
      int ceilings = 0;
      for (const lab::VariantDef& v : lab::find_op(n).def.variants) ceilings += v.ceiling;
      CHECK_MESSAGE(ceilings == 1, std::string(n));  // cuBLAS or CUB: the line the story climbs to
    }
    // The image pipelines hold no playground stage.
    for (const auto& s : lab::default_pipeline("keypoints").stages)
      CHECK(lab::find_playground(s.op) == nullptr);
    CHECK(lab::playground_of(lab::default_pipeline("keypoints")) == nullptr);
  }

  TEST_CASE("playgrounds: sizes are parsed strictly, inputs are deterministic in the seed") {
    for (const std::string& n : kLabs) {
      INFO(std::string(n));
      const lab::Op& op = *lab::find_playground(n);
      for (const char* bad :
           {"", "0", "-3", "x", "1x", "12abc", "99999999999999999999", "1x2x3x4", "2^99"})
        CHECK_THROWS_AS(op.def.lab_inputs(bad), lab::Error);
      for (const std::string& size : odd_sizes(n)) {
        INFO(size);
        const lab::LabInputs a = lab::make_lab_inputs(op, size, 7);
        const lab::LabInputs b = lab::make_lab_inputs(op, size, 7);
        const lab::LabInputs c = lab::make_lab_inputs(op, size, 8);
        REQUIRE(a.slots.size() == op.def.inputs.size());
        CHECK(a.slots[0].first == "input");
        bool differs = false;
        for (size_t k = 0; k < a.slots.size(); ++k) {
          const lab::HostImage& x = a.slots[k].second;
          CHECK(std::memcmp(x.bytes(), b.slots[k].second.bytes(), x.desc().bytes()) == 0);
          differs =
              differs || std::memcmp(x.bytes(), c.slots[k].second.bytes(), x.desc().bytes()) != 0;
        }
        if (a.slots[0].second.desc().pixels() > 4) CHECK(differs);
      }
      CHECK_NOTHROW(lab::make_lab_inputs(op, "", 1));  // the default size
    }
    // The problem size is refused before anything is allocated when it cannot fit.
    CHECK_THROWS_AS(lab::make_lab_inputs(*lab::find_playground("matmul"), "16384x16384x16384", 1),
                    lab::Error);
  }

  TEST_CASE("playground references: hand-computed cases") {
    // matmul: [1 2 3; 4 5 6] x [1 0; 0 1; 2 -1] = [7 -1; 16 -1]
    const lab::HostImage c =
        reference("matmul", {f32(3, 2, {1, 2, 3, 4, 5, 6}), f32(2, 3, {1, 0, 0, 1, 2, -1})});
    CHECK(c.desc() == lab::ImageDesc{2, 2, 1, lab::PixelType::F32});
    CHECK(values<float>(c) == std::vector<float>{7, -1, 16, -1});
    // reduce: a sum
    const lab::HostImage s = reference("reduce", {f32(5, 1, {0.5f, 0.25f, 1, 2, 4})});
    CHECK(values<float>(s) == std::vector<float>{7.75f});
    // scan: inclusive, modulo 2^32
    const lab::HostImage p = reference("scan", {u32({3, 1, 4, 0xFFFFFFFFu, 2})});
    CHECK(values<uint32_t>(p) == std::vector<uint32_t>{3, 4, 8, 7, 9});
    // sort: ascending, duplicates kept
    const lab::HostImage o = reference("sort", {u32({5, 0xFFFFFFFFu, 1, 5, 0})});
    CHECK(values<uint32_t>(o) == std::vector<uint32_t>{0, 1, 5, 5, 0xFFFFFFFFu});
    // transpose: 3 wide, 2 tall -> 2 wide, 3 tall
    const lab::HostImage t = reference("transpose", {f32(3, 2, {1, 2, 3, 4, 5, 6})});
    CHECK(t.desc() == lab::ImageDesc{2, 3, 1, lab::PixelType::F32});
    CHECK(values<float>(t) == std::vector<float>{1, 4, 2, 5, 3, 6});
  }

  TEST_CASE("playgrounds run on the CPU references through the runner") {
    for (const std::string& n : kLabs) {
      INFO(n);
      const lab::PipelineConfig p = lab::default_pipeline(n);
      lab::Runner r(lab::Backend::Cpu);
      r.configure_lab(p, lab::make_lab_inputs(*lab::find_playground(n), odd_sizes(n)[1], 3));
      r.poison_outputs(0);
      r.run();
      const lab::HostImage out = r.read_slot(r.stages()[0].op->def.outputs[0]);
      CHECK(out.desc().pixels() > 0);
      if (out.desc().type == lab::PixelType::F32)
        for (float v : values<float>(out)) REQUIRE(std::isfinite(v));
      // Back to the image pipeline: the playground's extra slots are dropped.
      r.configure(lab::default_pipeline("harris"), lab::ImageDesc{64, 48, 3, lab::PixelType::U8});
      for (const lab::SlotInfo& s : r.slots()) CHECK(s.name != "b");
    }
  }

  TEST_CASE("cli: playgrounds in list, check on the CPU, run --dump, bad sizes") {
    const Result l = lab_cli("list");
    CHECK(has(l, "matmul (playground, --lab matmul)"));
    CHECK(has(l, "lesson:"));
    CHECK(has(l, "expect:"));
    const Result c = lab_cli("check --device cpu --lab sort --size 1000");
    CHECK(c.code == 0);
    CHECK(has(c, "sort playground, inputs generated 1000, seed 1"));
    const fs::path d = fs::temp_directory_path() / ("lab_labs_" + std::to_string(::getpid()));
    const Result r =
        lab_cli("run --device cpu --lab transpose --size 17x13 --seed 5 --dump " + d.string());
    CHECK(r.code == 0);
    const lab::HostImage t = lab::io::read_npy((d / "transpose.npy").string());
    CHECK(t.desc() == lab::ImageDesc{13, 17, 1, lab::PixelType::F32});
    const lab::HostImage in = lab::io::read_npy((d / "input.npy").string());
    CHECK(t.view<float>().at(4, 9) == in.view<float>().at(9, 4));
    fs::remove_all(d);
    CHECK(lab_cli("check --device cpu --lab matmul --size 0x1x1").code == 64);
    CHECK(lab_cli("check --device cpu --lab reduce --size lots").code == 64);
    CHECK(lab_cli("check --device cpu --lab nope").code == 64);
    CHECK(lab_cli("check --device cpu --lab sort --pipeline harris").code == 64);
  }
}

TEST_SUITE("gpu") {
  LAB_GPU_CASE("playground sweep: odd sizes, every variant x block x math against the reference") {
    for (const std::string& n : kLabs)
      for (const std::string& size : odd_sizes(n)) {
        lab::Runner r(lab::Backend::Cuda);
        r.configure_lab(lab::default_pipeline(n),
                        lab::make_lab_inputs(*lab::find_playground(n), size, 11));
        int runs = 0;
        lab::check_stage(r, 0, false, [&](const lab::CheckResult& res) {
          const std::string label = n + " " + size + ": " + res.cfg.label();
          if (res.refused) {  // by a rule of the device, or at launch (this build's registers)
            MESSAGE(label << ": refused: " << res.why);
            return;
          }
          const lab::DiffStats& d = res.diff;
          CHECK_MESSAGE(d.pass(), label << ": " << d.detail() << " max_abs " << d.max_abs
                                        << " limit " << d.limit << " over " << d.over << " nan "
                                        << d.nans << " first bad (" << d.bad_x << "," << d.bad_y
                                        << ") got " << d.bad_got << " ref " << d.bad_ref);
          for (const lab::LaunchRecord& rec : res.launches)
            CHECK_MESSAGE(rec.ms >= 0, label << " " << rec.kernel);
          ++runs;
        });
        CHECK_MESSAGE(runs > 0, n << " " << size);
      }
  }

  LAB_GPU_CASE("matmul: every variant against cuBLAS at 512^3, and the lab bench story") {
    lab::Runner r(lab::Backend::Cuda);
    r.configure_lab(lab::default_pipeline("matmul"),
                    lab::make_lab_inputs(*lab::find_playground("matmul"), "512x512x512", 2));
    const lab::Op& op = lab::find_op("matmul");
    const int cublas = op.find_variant("cublas");
    REQUIRE(cublas >= 0);
    lab::ResolvedStage s = r.stages()[0];
    s.variant = size_t(cublas), s.block = op.def.variants[size_t(cublas)].default_block;
    r.run_stage(0, &s);
    std::vector<lab::HostImage> blas{r.read_slot("matmul")};
    for (size_t v = 0; v < op.def.variants.size(); ++v) {
      s.variant = v, s.block = op.def.variants[v].default_block;
      r.poison_outputs(0);
      r.run_stage(0, &s);
      const lab::DiffStats d = r.compare(0, blas, lab::MathMode::Precise, &s);
      CHECK_MESSAGE(d.pass(), op.def.variants[v].name << ": " << d.max_abs << " > " << d.limit);
    }
    const Result b = lab_cli("bench --lab matmul --size 256x256x256 --warmup 2 --reps 5");
    CHECK(b.code == 0);
    CHECK(has(b, "expect:"));
    CHECK(has(b, "of cublas"));
  }
}
