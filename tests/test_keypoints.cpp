// The keypoint head (nms, topk, sample, l2norm) on inputs whose answer is worked out by hand:
// ties and plateaus in the NMS window, a bright pixel in each corner, fewer survivors than K, K
// larger than the image, keypoints on the border (sampling clamps), a constant patch. Each case
// runs on the CPU reference (suite cpu) and on every GPU variant in both math modes (suite gpu).
// Also: the fused variants (nms v5_fused_front: the dense front in one kernel, its comparison),
// the CUDA graph, and run --dump's keypoint files.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>
#include <functional>
#include <map>
#include <memory>

#include "device.h"
#include "front_order.h"
#include "image_source.h"
#include "support.h"
#include "runner.h"

using namespace lab;

namespace {

HostImage plane(int w, int h, float v = 0.0f) {
  HostImage img(ImageDesc{w, h, 1, PixelType::F32});
  auto p = img.view<float>();
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) p.at(x, y) = v;
  return img;
}

HostImage keypoint_list(const std::vector<std::array<float, 3>>& kps) {
  HostImage img(ImageDesc{int(kps.size()), 1, 3, PixelType::F32});
  auto p = img.view<float>();
  for (size_t i = 0; i < kps.size(); ++i)
    for (int c = 0; c < 3; ++c) p.at(int(i), 0, c) = kps[i][c];
  return img;
}

// One or more stages fed by hand-made slots; returns the named output after one run.
struct Harness {
  std::unique_ptr<Runner> r;
  Harness(Backend b, const std::vector<StageConfig>& stages,
          const std::map<std::string, HostImage>& slots) {
    r = std::make_unique<Runner>(b);
    for (const auto& [name, img] : slots) r->set_extra_slot(name, img.desc());
    PipelineConfig p;
    p.stages = stages;
    r->configure(p, ImageDesc{1, 1, 1, PixelType::U8});
    for (const auto& [name, img] : slots) r->write_slot(name, img);
    for (size_t i = 0; i < stages.size(); ++i) r->poison_outputs(i);
    r->run();
  }
  HostImage out(const std::string& slot) const { return r->read_slot(slot); }
};

StageConfig stage(const std::string& op, const std::string& variant = "",
                  MathMode m = MathMode::Precise, ParamMap params = {}) {
  StageConfig s;
  s.op = op, s.variant = variant, s.math = m, s.params = std::move(params);
  return s;
}

// A front's block order (front_order.h) for a w x h image and blocks of `warps` warps, each warp
// on `cols` output columns (nms v6's pair front 56, v5 24): every block of the grid exactly once,
// and the interior ones (by the kernels' own `edge` test, restated here) first, or, rotated
// (`ring_first`, as v5 runs it), last. Both kernels' first lane is 4 columns left of their
// outputs, their strips 16 rows reading 6 more above and below, blur reaching 2 columns.
void front_order_case(int w, int h, int warps, int cols, bool ring_first) {
  INFO(w << "x" << h << ", " << warps << " warps of " << cols << " columns"
         << (ring_first ? ", ring first" : ""));
  const int block_cols = cols * warps, gx = (w + block_cols - 1) / block_cols, gy = (h + 15) / 16;
  const lab::ops::FrontOrder o = lab::ops::front_order(w, h, warps, cols, 16, 4, 6, 2, gx, gy);
  auto edge = [&](int bx, int by) {
    const int block_x = bx * block_cols - 4, y0 = by * 16;
    return y0 == 0 || y0 + 16 + 6 > h || block_x - 2 < 0 ||
           block_x + block_cols + 8 - 1 + 2 > w - 1;
  };
  int interior = 0;
  for (int by = 0; by < gy; ++by)
    for (int bx = 0; bx < gx; ++bx) interior += !edge(bx, by);
  REQUIRE((o.bx1 - o.bx0) * (o.by1 - o.by0) == interior);
  const int ring = gx * gy - interior;
  std::vector<int> seen(size_t(gx) * gy, 0);
  bool in_order = true, in_grid = true;
  for (int i = 0; i < gx * gy; ++i) {
    int bx = -1, by = -1;
    if (ring_first)
      lab::ops::front_block_ring_first(o, i, bx, by);
    else
      lab::ops::front_block(o, i, bx, by);
    if (bx < 0 || bx >= gx || by < 0 || by >= gy) {
      in_grid = false;
      continue;
    }
    ++seen[size_t(by) * gx + bx];
    in_order &= edge(bx, by) == (ring_first ? i < ring : i >= interior);
  }
  CHECK(in_grid);
  CHECK(in_order);
  CHECK(std::count(seen.begin(), seen.end(), 1) == gx * gy);
}

// Runs `body(backend, variant, math)` for the CPU reference, or for every GPU variant of `op`
// in both math modes.
void for_each_config(bool gpu, const std::string& op,
                     const std::function<void(Backend, const std::string&, MathMode)>& body) {
  if (!gpu) return body(Backend::Cpu, "", MathMode::Precise);
  for (const VariantDef& v : find_op(op).def.variants)
    for (MathMode m : {MathMode::Precise, MathMode::Fast}) {
      INFO(op << "/" << v.name << " " << math_name(m));
      body(Backend::Cuda, v.name, m);
    }
}

// detect's variants: the dense front's work and topk's (their input is the letterbox plane).
std::vector<std::string> detect_variants() {
  std::vector<std::string> v;
  for (const VariantDef& d : find_op("detect").def.variants) v.push_back(d.name);
  return v;
}
// The sizes the fused fronts' GPU cases run at: 4K, odd, small, one pixel.
const std::vector<std::string> kFrontSizes = {"3840x2160", "3833x2157", "1280x736", "1001x333",
                                              "64x48",     "17x13",     "40x7",     "1x1"};
// nms's variants that do the dense front's work (blur, sobel, harris and nms from the letterbox
// plane).
const std::vector<std::string> kFronts = {"v5_fused_front", "v6_front_pairs"};
bool front(const std::string& v) {
  return std::count(kFronts.begin(), kFronts.end(), v) > 0;
}

void nms_cases(bool gpu) {
  for_each_config(gpu, "nms", [](Backend b, const std::string& v, MathMode m) {
    if (front(v)) return;  // reads the letterbox plane: the fused front's cases below
    {                      // a bright pixel in each corner of 17x13: all four kept, nothing else
      HostImage h = plane(17, 13);
      auto p = h.view<float>();
      p.at(0, 0) = 1, p.at(16, 0) = 2, p.at(0, 12) = 3, p.at(16, 12) = 4;
      const HostImage out = Harness(b, {stage("nms", v, m)}, {{"harris", h}}).out("nms");
      const auto o = out.view<float>();
      int nonzero = 0;
      for (int y = 0; y < 13; ++y)
        for (int x = 0; x < 17; ++x) nonzero += o.at(x, y) != 0.0f;
      CHECK(nonzero == 4);
      CHECK(o.at(0, 0) == 1.0f);
      CHECK(o.at(16, 0) == 2.0f);
      CHECK(o.at(0, 12) == 3.0f);
      CHECK(o.at(16, 12) == 4.0f);
    }
    {  // ties, a plateau, the window's reach and the strict threshold
      HostImage h = plane(20, 20);
      auto p = h.view<float>();
      p.at(5, 5) = 2, p.at(7, 5) = 2;  // tied maxima in one window: both kept
      p.at(6, 6) = 0.9f;               // beside them: suppressed
      p.at(5, 8) = 1;                  // 3 rows away: outside the 5x5 window, kept
      for (int y = 12; y < 15; ++y)
        for (int x = 12; x < 15; ++x) p.at(x, y) = 1.5f;  // a plateau: all nine kept
      p.at(18, 2) = 1e-3f;                                // equal to the threshold: dropped
      p.at(2, 18) = 2e-3f;                                // above it: kept
      const HostImage out = Harness(b, {stage("nms", v, m)}, {{"harris", h}}).out("nms");
      const auto o = out.view<float>();
      CHECK(o.at(5, 5) == 2.0f);
      CHECK(o.at(7, 5) == 2.0f);
      CHECK(o.at(6, 6) == 0.0f);
      CHECK(o.at(5, 8) == 1.0f);
      for (int y = 12; y < 15; ++y)
        for (int x = 12; x < 15; ++x) CHECK(o.at(x, y) == 1.5f);
      CHECK(o.at(18, 2) == 0.0f);
      CHECK(o.at(2, 18) == 2e-3f);
      int nonzero = 0;
      for (int y = 0; y < 20; ++y)
        for (int x = 0; x < 20; ++x) nonzero += o.at(x, y) != 0.0f;
      CHECK(nonzero == 2 + 1 + 9 + 1);
    }
  });
  // The fused variant multiplies what it keeps by the second score map.
  const std::vector<Backend> backends =
      gpu ? std::vector<Backend>{Backend::Cuda} : std::vector<Backend>{Backend::Cpu};
  for (Backend b : backends) {
    HostImage h = plane(9, 7), s = plane(9, 7, 0.5f);
    h.view<float>().at(4, 3) = 3, h.view<float>().at(4, 4) = 1;
    s.view<float>().at(4, 3) = 0.25f;
    const HostImage out =
        Harness(b, {stage("nms", "v4_fused_score")}, {{"harris", h}, {"reliability", s}})
            .out("nms");
    CHECK(out.view<float>().at(4, 3) == 0.75f);
    CHECK(out.view<float>().at(4, 4) == 0.0f);
  }
}

// Rows of a keypoint list as (x, y, score).
std::vector<std::array<float, 3>> rows_of(const HostImage& kp) {
  std::vector<std::array<float, 3>> v;
  const auto p = kp.view<float>();
  for (int i = 0; i < p.width; ++i) v.push_back({p.at(i, 0, 0), p.at(i, 0, 1), p.at(i, 0, 2)});
  return v;
}

void topk_cases(bool gpu) {
  for_each_config(gpu, "topk", [](Backend b, const std::string& v, MathMode m) {
    const bool approx =
        !v.empty() &&
        !find_op("topk").def.variants[size_t(find_op("topk").find_variant(v))].approx.empty();
    {  // fewer survivors than K: sorted, then pad rows
      HostImage s = plane(6, 5);
      s.view<float>().at(1, 1) = 0.5f, s.view<float>().at(4, 3) = 2.0f,
                            s.view<float>().at(0, 4) = 1.0f;
      const auto kp =
          rows_of(Harness(b, {stage("topk", v, m, {{"k", 5}})}, {{"nms", s}}).out("keypoints"));
      REQUIRE(kp.size() == 5);
      if (!approx) {
        CHECK(kp[0] == std::array<float, 3>{4, 3, 2.0f});
        CHECK(kp[1] == std::array<float, 3>{0, 4, 1.0f});
        CHECK(kp[2] == std::array<float, 3>{1, 1, 0.5f});
      }
      for (int i = 3; i < 5; ++i) CHECK(kp[i] == std::array<float, 3>{-1, -1, 0});
    }
    if (!approx) {  // tied scores: the lower linear index first, also across the K cut
      HostImage s = plane(4, 3);
      auto p = s.view<float>();
      p.at(3, 0) = 1, p.at(1, 0) = 1, p.at(0, 2) = 1, p.at(2, 1) = 1;  // indices 3, 1, 8, 6
      const auto kp =
          rows_of(Harness(b, {stage("topk", v, m, {{"k", 2}})}, {{"nms", s}}).out("keypoints"));
      REQUIRE(kp.size() == 2);
      CHECK(kp[0] == std::array<float, 3>{1, 0, 1});
      CHECK(kp[1] == std::array<float, 3>{3, 0, 1});
    }
    {  // K larger than the image: every pixel, in order
      HostImage s = plane(17, 13);
      auto p = s.view<float>();
      for (int y = 0; y < 13; ++y)
        for (int x = 0; x < 17; ++x) p.at(x, y) = float((x * 7 + y * 31) % 97 + 1);
      const auto kp =
          rows_of(Harness(b, {stage("topk", v, m, {{"k", 4096}})}, {{"nms", s}}).out("keypoints"));
      REQUIRE(kp.size() == 4096);
      std::set<std::pair<int, int>> seen;
      for (int i = 0; i < 17 * 13; ++i) {
        seen.insert({int(kp[i][0]), int(kp[i][1])});
        CHECK(kp[i][2] == p.at(int(kp[i][0]), int(kp[i][1])));
        if (!approx && i > 0) {
          const bool ordered = kp[i - 1][2] > kp[i][2] ||
                               (kp[i - 1][2] == kp[i][2] &&
                                kp[i - 1][1] * 17 + kp[i - 1][0] < kp[i][1] * 17 + kp[i][0]);
          CHECK(ordered);
        }
      }
      CHECK(seen.size() == size_t(17 * 13));
      CHECK(kp[17 * 13] == std::array<float, 3>{-1, -1, 0});
      CHECK(kp[4095] == std::array<float, 3>{-1, -1, 0});
    }
    {  // nothing survives: all pad
      const auto kp = rows_of(
          Harness(b, {stage("topk", v, m, {{"k", 3}})}, {{"nms", plane(5, 5)}}).out("keypoints"));
      for (const auto& r : kp) CHECK(r == std::array<float, 3>{-1, -1, 0});
    }
  });
}

void sample_cases(bool gpu) {
  // A ramp f = x + 100 y: bilinear sampling reproduces it exactly where it does not clamp.
  HostImage ramp = plane(40, 30);
  for (int y = 0; y < 30; ++y)
    for (int x = 0; x < 40; ++x) ramp.view<float>().at(x, y) = float(x + 100 * y);
  const HostImage kps =
      keypoint_list({{20, 15, 1}, {20.25f, 15.5f, 1}, {0, 0, 1}, {39, 29, 1}, {-1, -1, 0}});
  for_each_config(gpu, "sample", [&](Backend b, const std::string& v, MathMode m) {
    const HostImage out =
        Harness(b, {stage("sample", v, m)}, {{"blur", ramp}, {"keypoints", kps}}).out("patches");
    const auto o = out.view<float>();
    REQUIRE(o.height == 5);
    for (int t = 0; t < 64; ++t) {
      const int i = t % 8, j = t / 8;
      INFO("sample " << t);
      CHECK(o.at(t, 0) == float(20 + 2 * i - 7 + 100 * (15 + 2 * j - 7)));
      CHECK(o.at(t, 1) == float(20.25 + 2 * i - 7 + 100 * (15.5 + 2 * j - 7)));
      // On the border the coordinates clamp to the image.
      CHECK(o.at(t, 2) == float(std::max(0, 2 * i - 7) + 100 * std::max(0, 2 * j - 7)));
      CHECK(o.at(t, 3) == float(std::min(39, 39 + 2 * i - 7) + 100 * std::min(29, 29 + 2 * j - 7)));
      CHECK(o.at(t, 4) == 0.0f);  // a pad keypoint
    }
  });
}

void l2norm_cases(bool gpu) {
  HostImage patches(ImageDesc{64, 3, 1, PixelType::F32});
  auto p = patches.view<float>();
  for (int t = 0; t < 64; ++t) {
    p.at(t, 0) = 0.1f;  // constant, and 64 x 0.1f is not exactly representable
    p.at(t, 1) = float(t);
    p.at(t, 2) = 12345.678f;  // a large constant
  }
  double norm1 = 0;
  for (int t = 0; t < 64; ++t) norm1 += (t - 31.5) * (t - 31.5);
  norm1 = std::sqrt(norm1);
  for_each_config(gpu, "l2norm", [&](Backend b, const std::string& v, MathMode m) {
    if (v == "v3_fused_sample" || v == "v4_fused_warp" || v == "v5_overlapped")
      return;  // the fused case below
    const HostImage out =
        Harness(b, {stage("l2norm", v, m)}, {{"patches", patches}}).out("descriptors");
    const auto o = out.view<float>();
    double mean = 0, sq = 0;
    for (int t = 0; t < 64; ++t) {
      CHECK(o.at(t, 0) == 0.0f);
      CHECK(std::abs(o.at(t, 1) - (t - 31.5) / norm1) < 1e-6);
      CHECK(o.at(t, 2) == 0.0f);
      mean += o.at(t, 1), sq += double(o.at(t, 1)) * o.at(t, 1);
    }
    CHECK(std::abs(mean) < 1e-5);
    CHECK(std::abs(sq - 1.0) < 1e-5);
  });
}

// sample -> l2norm against the fused variant, which skips the sample stage.
void fused_descriptor_case(Backend b, MathMode m) {
  const HostImage img = [] {
    HostImage g = io::synthetic_frame(64, 48, 1, 3);
    HostImage f = plane(64, 48);
    for (int y = 0; y < 48; ++y)
      for (int x = 0; x < 64; ++x) f.view<float>().at(x, y) = g.view<uint8_t>().at(x, y) / 255.0f;
    return f;
  }();
  const HostImage kps =
      keypoint_list({{10, 10, 3}, {0, 47, 2}, {63.5f, 0.25f, 1}, {30, 20, 0.5f}, {-1, -1, 0}});
  const std::map<std::string, HostImage> slots{{"blur", img}, {"keypoints", kps}};
  // Each fused variant does its unfused partner's arithmetic on the same samples: bit for bit.
  for (const auto& pair : {std::pair<const char*, const char*>{"v3_fused_sample", "v1_block64"},
                           {"v4_fused_warp", "v2_warp"},
                           {"v5_overlapped", "v2_warp"}}) {
    INFO(pair.first);
    Harness two(b, {stage("sample", "", m), stage("l2norm", pair.second, m)}, slots);
    Harness fused(b, {stage("sample", "", m), stage("l2norm", pair.first, m)}, slots);
    CHECK_FALSE(two.r->skipped(0));
    CHECK(fused.r->skipped(0));
    CHECK(fused.r->fused_into(0) == std::string("l2norm/") + pair.first);
    const auto a = two.out("descriptors"), c = fused.out("descriptors");
    for (int k = 0; k < 5; ++k)
      for (int t = 0; t < 64; ++t) CHECK(a.view<float>().at(t, k) == c.view<float>().at(t, k));
    CHECK(c.view<float>().at(0, 4) == 0.0f);  // the pad keypoint's row
    // The fused variant's own reference agrees with it too.
    const auto ref = fused.r->reference(1);
    CHECK(fused.r->compare(1, ref, m).pass());
  }
}

// ---- nms v5_fused_front, v6_front_pairs: the dense front in one kernel --------------------------

constexpr size_t kBlur = 1, kSobel = 2, kHarris = 3, kNms = 4;

bool same_bytes(const HostImage& a, const HostImage& b) {
  return a.desc() == b.desc() && std::memcmp(a.bytes(), b.bytes(), a.desc().bytes()) == 0;
}

// The NMS survivors in a map: its non-zero values.
size_t survivors_in(const HostImage& map) {
  const auto m = map.view<const float>();
  size_t n = 0;
  for (int y = 0; y < m.height; ++y)
    for (int x = 0; x < m.width; ++x) n += m.at(x, y) != 0.0f;
  return n;
}

// The default keypoint pipeline at `size` on `in`, with the extra overrides; every output
// poisoned before the run.
std::unique_ptr<Runner> run_pipeline(Backend b, const HostImage& in, const std::string& size,
                                     const std::vector<std::string>& variants,
                                     const std::vector<std::string>& params = {},
                                     const std::string& math = "precise",
                                     const std::vector<std::string>& blocks = {}) {
  PipelineConfig p = default_pipeline();
  apply_size(p, size);
  apply_math(p, math);
  for (const std::string& v : variants) apply_variant(p, v);
  for (const std::string& v : params) apply_param(p, v);
  for (const std::string& v : blocks) apply_block(p, v);
  auto r = std::make_unique<Runner>(b);
  r->configure(p, in.desc());
  r->set_input(in);
  for (size_t i = 0; i < r->stages().size(); ++i) r->poison_outputs(i);
  r->run();
  return r;
}

// The runner's bookkeeping of the fused front, and (on the CPU) its reference against the four
// stages' references, which must agree bit for bit: the same functions, in the same order.
void fused_front_cpu_case(const std::string& file, const std::string& size) {
  INFO(file << " -> " << size);
  const HostImage in = io::load_image(data_path(file));
  for (const std::string& v : kFronts)
    for (const std::string k : {"harris.k=0.04", "harris.k=0.06"}) {
      INFO(v << " " << k);
      const auto four = run_pipeline(Backend::Cpu, in, size, {}, {k});
      const auto one = run_pipeline(Backend::Cpu, in, size, {"nms=" + v}, {k});
      for (size_t i : {kBlur, kSobel, kHarris}) {
        CHECK_FALSE(four->skipped(i));
        CHECK(one->skipped(i));
        CHECK_FALSE(one->disabled(i));
        CHECK(one->fused_into(i) == "nms/" + v);
      }
      CHECK_FALSE(one->skipped(kNms));
      CHECK(one->fused_into(0).empty());
      CHECK(one->fused_into(kNms).empty());
      CHECK(one->stages()[kNms].outputs() == std::vector<std::string>{"nms", "blur"});
      for (const char* slot : {"nms", "blur", "keypoints", "descriptors"})
        CHECK_MESSAGE(same_bytes(four->read_slot(slot), one->read_slot(slot)), std::string(slot));
      // The bytes model: one plane read, two written (nms alone: one read, one written).
      const double plane = double(four->read_slot("nms").desc().bytes());
      CHECK(four->stage_bytes(kNms) == 2 * plane);
      CHECK(one->stage_bytes(kNms) == 3 * plane);
      // Against its own reference (here the run was that reference): exact, no flips.
      const DiffStats d = one->compare(kNms, one->reference(kNms), MathMode::Precise);
      CHECK_MESSAGE(d.pass(), d.detail());
      CHECK(d.max_abs == 0);
      CHECK(d.note.empty());
    }
  // k reaches the fused variant: another k, another map.
  const auto a = run_pipeline(Backend::Cpu, in, size, {"nms=v5_fused_front"}, {"harris.k=0.04"});
  const auto b = run_pipeline(Backend::Cpu, in, size, {"nms=v5_fused_front"}, {"harris.k=0.06"});
  CHECK_FALSE(same_bytes(a->read_slot("nms"), b->read_slot("nms")));
}

// detect on the CPU: the runner adds its stage after topk and skips blur, sobel, harris, nms and
// topk, and its reference (the CPU chain, then topk's) gives the six stages' bytes.
constexpr size_t kTopk = 5, kDetect = 6;
void listed_front_cpu_case(const std::string& file, const std::string& size) {
  for (const std::string& v : detect_variants())
    for (const std::string k : {"topk.k=4096", "topk.k=7"}) {
      INFO(file << " -> " << size << " " << v << " " << k);
      const HostImage in = io::load_image(data_path(file));
      const auto five = run_pipeline(Backend::Cpu, in, size, {}, {k, "harris.k=0.05"});
      const auto one = run_pipeline(Backend::Cpu, in, size, {"detect=" + v}, {k, "harris.k=0.05"});
      REQUIRE(one->stages().size() == 9);
      for (size_t i : {kBlur, kSobel, kHarris, kNms, kTopk}) {
        CHECK(one->skipped(i));
        CHECK(one->fused_into(i) == "detect/" + v);
      }
      CHECK_FALSE(one->skipped(0));
      CHECK(one->fused_into(0).empty());
      CHECK_FALSE(one->skipped(kDetect));
      CHECK(one->stages()[kDetect].outputs() ==
            std::vector<std::string>{"keypoints", "nms", "blur"});
      for (const char* slot : {"nms", "blur", "keypoints", "descriptors"})
        CHECK_MESSAGE(same_bytes(five->read_slot(slot), one->read_slot(slot)), std::string(slot));
      // The bytes model: the letterbox plane read; the keypoints, the map and blur written.
      const double plane = double(five->read_slot("nms").desc().bytes());
      const double kps = double(five->read_slot("keypoints").desc().bytes());
      CHECK(one->stage_bytes(kDetect) == 3 * plane + kps);
      const DiffStats d = one->compare(kDetect, one->reference(kDetect), MathMode::Precise);
      CHECK_MESSAGE(d.pass(), d.detail());
      CHECK(d.max_abs == 0);
      // With nms on its fused front too: nms is skipped, so its variant fuses nothing.
      const auto both = run_pipeline(Backend::Cpu, in, size, {"nms=v5_fused_front", "detect=" + v},
                                     {k, "harris.k=0.05"});
      for (size_t i : {kBlur, kSobel, kHarris, kNms, kTopk})
        CHECK(both->fused_into(i) == "detect/" + v);
      for (const char* slot : {"keypoints", "descriptors"})
        CHECK_MESSAGE(same_bytes(both->read_slot(slot), one->read_slot(slot)), std::string(slot));
    }
}

// The CPU chain's Harris response from a letterbox plane (the registry's references).
HostImage chain_harris(const HostImage& lb) {
  const ImageDesc d = lb.desc();
  HostImage bl(d), gx(d), gy(d), r(d);
  auto run = [](const char* op, std::vector<ImageRef> in, std::vector<ImageRef> out) {
    StageArgs a;
    a.in = std::move(in), a.out = std::move(out);
    find_op(op).def.reference(a);
  };
  run("blur", {lb.ref()}, {bl.ref()});
  run("sobel", {bl.ref()}, {gx.ref(), gy.ref()});
  run("harris", {gx.ref(), gy.ref()}, {r.ref()});
  return r;
}

// The fused front's comparison on constructed cases: a 2x2 bright square, whose responses come
// in mirror pairs equal but for rounding (near ties), and a bright rectangle's corner, a strict
// maximum.
void fused_front_compare_cases() {
  const Op& nms = find_op("nms");
  const VariantDef& v5 = nms.def.variants.at(size_t(nms.find_variant("v5_fused_front")));
  REQUIRE((v5.reference && v5.compare));
  HostImage lb = plane(48, 40, 0.1f);
  for (int y = 12; y < 14; ++y)
    for (int x = 12; x < 14; ++x) lb.view<float>().at(x, y) = 0.9f;
  for (int y = 24; y < 40; ++y)
    for (int x = 30; x < 48; ++x) lb.view<float>().at(x, y) = 0.8f;
  const ImageDesc desc = lb.desc();
  const std::vector<HostImage> in{lb};
  const std::vector<std::string> names{"nms", "blur"};
  auto reference = [&](const ParamMap& p) {
    std::vector<HostImage> ref{HostImage(desc), HostImage(desc)};
    v5.reference(StageArgs{{lb.ref()}, {ref[0].ref(), ref[1].ref()}, p, {}});
    return ref;
  };
  auto compare = [&](const std::vector<HostImage>& got, const std::vector<HostImage>& ref,
                     const ParamMap& p) {
    const CompareArgs a{
        &in, &got, &ref, &names, &v5, nms.tolerance(MathMode::Precise), MathMode::Precise, &p};
    return v5.compare(a);
  };
  const ParamMap none;
  const std::vector<HostImage> ref = reference(none);
  const HostImage r_img = chain_harris(lb);
  const auto r = r_img.view<const float>();
  const auto kept = ref[0].view<const float>();
  double r_max = 0;
  for (int y = 0; y < desc.height; ++y)
    for (int x = 0; x < desc.width; ++x) r_max = std::max(r_max, std::abs(double(r.at(x, y))));
  const double tau = 1e-12 + 1e-5 * r_max, thr = 1e-3;
  auto others = [&](int x, int y) {  // the largest other response of the 5x5 window
    double m = -INFINITY;
    for (int yy = std::max(0, y - 2); yy <= std::min(desc.height - 1, y + 2); ++yy)
      for (int xx = std::max(0, x - 2); xx <= std::min(desc.width - 1, x + 2); ++xx)
        if (xx != x || yy != y) m = std::max(m, double(r.at(xx, yy)));
    return m;
  };
  // A kept pixel with a near tie in its window, and one that is a strict maximum.
  int tx = -1, ty = -1, sx = -1, sy = -1;
  for (int y = 0; y < desc.height; ++y)
    for (int x = 0; x < desc.width; ++x) {
      if (kept.at(x, y) == 0) continue;
      const double gap = r.at(x, y) - others(x, y);
      if (gap <= 2 * tau && tx < 0) tx = x, ty = y;
      if (gap > 100 * tau && r.at(x, y) - thr > 100 * tau && sx < 0) sx = x, sy = y;
    }
  REQUIRE_MESSAGE(tx >= 0, "the square gives no near tie");
  REQUIRE_MESSAGE(sx >= 0, "the corner gives no strict maximum");
  auto edited = [&](int x, int y, float v, int slot = 0) {
    std::vector<HostImage> got = ref;
    got[size_t(slot)].view<float>().at(x, y) = v;
    return got;
  };
  {  // the reference itself: exact
    const DiffStats d = compare(ref, ref, none);
    CHECK(d.pass());
    CHECK(d.note.empty());
  }
  {  // a near tie dropped: accepted, and said
    const DiffStats d = compare(edited(tx, ty, 0.0f), ref, none);
    CHECK_MESSAGE(d.pass(), d.detail());
    CHECK(d.note == "1 near-tie NMS flip accepted");
    CHECK(d.detail().find("near-tie") != std::string::npos);
  }
  {  // a strict maximum dropped: a genuine mismatch
    const DiffStats d = compare(edited(sx, sy, 0.0f), ref, none);
    CHECK_FALSE(d.pass());
    CHECK(d.bad_x == sx);
    CHECK(d.bad_y == sy);
  }
  {  // a pixel kept that is no maximum: a genuine mismatch
    const DiffStats d = compare(edited(sx + 1, sy, r.at(sx + 1, sy)), ref, none);
    CHECK_FALSE(d.pass());
  }
  // A near tie the CPU drops: kept with R there, accepted; kept with another value, not.
  int qx = -1, qy = -1;
  for (int y = 0; y < desc.height && qx < 0; ++y)
    for (int x = 0; x < desc.width && qx < 0; ++x)
      if (kept.at(x, y) == 0 && r.at(x, y) > thr && others(x, y) - r.at(x, y) <= 2 * tau)
        qx = x, qy = y;
  REQUIRE_MESSAGE(qx >= 0, "the square gives no near tie the CPU drops");
  CHECK(compare(edited(qx, qy, r.at(qx, qy)), ref, none).pass());
  CHECK_FALSE(compare(edited(qx, qy, float(r.at(qx, qy) + 10 * tau)), ref, none).pass());
  const float v = kept.at(sx, sy);
  {  // a kept value within tau passes; 10 tau off fails
    CHECK(compare(edited(sx, sy, float(v + 0.5 * tau)), ref, none).pass());
    CHECK_FALSE(compare(edited(sx, sy, float(v + 10 * tau)), ref, none).pass());
  }
  {  // the threshold: a maximum within tau of it may be dropped, one further above it not
    const ParamMap near{{"threshold", v - 0.5 * tau}}, far{{"threshold", v - 10 * tau}};
    const std::vector<HostImage> ref_near = reference(near), ref_far = reference(far);
    REQUIRE(ref_near[0].view<float>().at(sx, sy) == v);
    REQUIRE(ref_far[0].view<float>().at(sx, sy) == v);
    std::vector<HostImage> got = ref_near;
    got[0].view<float>().at(sx, sy) = 0.0f;
    CHECK(compare(got, ref_near, near).pass());
    got = ref_far;
    got[0].view<float>().at(sx, sy) = 0.0f;
    CHECK_FALSE(compare(got, ref_far, far).pass());
  }
  // Unwritten (NaN) values fail, in either plane; the blur plane is held to blur's bound.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  CHECK_FALSE(compare(edited(0, 0, nan), ref, none).pass());
  CHECK_FALSE(compare(edited(tx, ty, nan), ref, none).pass());
  CHECK_FALSE(compare(edited(5, 5, nan, 1), ref, none).pass());
  const float b = ref[1].view<float>().at(5, 5);
  CHECK(compare(edited(5, 5, b + 1e-7f, 1), ref, none).pass());
  CHECK_FALSE(compare(edited(5, 5, b + 1e-4f, 1), ref, none).pass());
}

}  // namespace

TEST_SUITE("cpu") {
  TEST_CASE("nms reference: corners, ties, plateau, window reach, threshold, fused score") {
    nms_cases(false);
  }
  TEST_CASE("topk reference: fewer than K, ties by index, K larger than the image, none") {
    topk_cases(false);
  }
  TEST_CASE("sample reference: exact on a ramp, clamped on the border, zero for a pad") {
    sample_cases(false);
  }
  TEST_CASE("l2norm reference: constant patches give zeros, a ramp a unit zero-mean vector") {
    l2norm_cases(false);
  }
  TEST_CASE("fused sample + l2norm reference equals the two stages; the pipeline skips sample") {
    fused_descriptor_case(Backend::Cpu, MathMode::Precise);
  }
  TEST_CASE("fused dense front: the runner skips blur, sobel, harris; the references agree") {
    fused_front_cpu_case("box_in_scene.png", "320x184");
    fused_front_cpu_case("graf1.png", "101x57");
    fused_front_cpu_case("graf1.png", "7x5");
  }
  TEST_CASE("the fronts' block orders: every block once; v6 interior first, v5 border first") {
    for (const auto& [cols, ring_first] :
         std::vector<std::pair<int, bool>>{{56, false}, {24, true}})
      for (int warps : {1, 2, 4, 8}) {
        for (int w = 1; w <= 700; w += 23)
          for (int h = 1; h <= 130; h += 7) front_order_case(w, h, warps, cols, ring_first);
        for (const auto& [w, h] : std::vector<std::pair<int, int>>{
                 {3840, 2160}, {3833, 2157}, {2561, 1443}, {1280, 736}, {113, 29}, {120, 22}})
          front_order_case(w, h, warps, cols, ring_first);
      }
  }
  TEST_CASE("detect: the runner skips the dense front and topk; the references agree") {
    listed_front_cpu_case("box_in_scene.png", "320x184");
    listed_front_cpu_case("graf1.png", "101x57");
    listed_front_cpu_case("graf1.png", "7x5");
    listed_front_cpu_case("box_in_scene.png", "512x401");  // 17 pad rows
  }
  TEST_CASE("fused dense front: its comparison passes near ties, fails genuine mismatches") {
    fused_front_compare_cases();
  }
  TEST_CASE("the keypoints pipeline has eight stages, the harris pipeline four") {
    CHECK(default_pipeline().stages.size() == 8);
    CHECK(default_pipeline("keypoints").stages.back().op == "l2norm");
    CHECK(default_pipeline("harris").stages.size() == 4);
    CHECK_THROWS_AS(default_pipeline("nope"), Error);
  }
  TEST_CASE("a CUDA graph needs the cuda backend") {
    Runner r(Backend::Cpu);
    CHECK_THROWS_AS(r.set_graph(true), Error);
  }
}

TEST_SUITE("gpu") {
  LAB_GPU_CASE("nms on the GPU: every variant, both math modes, hand-made cases") {
    nms_cases(true);
  }
  LAB_GPU_CASE("topk on the GPU: every variant, both math modes, hand-made cases") {
    topk_cases(true);
  }
  LAB_GPU_CASE("sample on the GPU: every variant, both math modes, hand-made cases") {
    sample_cases(true);
  }
  LAB_GPU_CASE("l2norm on the GPU: every variant, both math modes, hand-made cases") {
    l2norm_cases(true);
  }
  LAB_GPU_CASE("fused sample + l2norm on the GPU equals the two stages") {
    fused_descriptor_case(Backend::Cuda, MathMode::Precise);
    fused_descriptor_case(Backend::Cuda, MathMode::Fast);
  }

  LAB_GPU_CASE(
      "fused dense fronts (nms v5, v6) on the GPU: the four default kernels' bytes, every block "
      "and math mode, real images") {
    const Op& nms = find_op("nms");
    for (const std::string file : {"box_in_scene.png", "graf1.png"}) {
      const HostImage in = io::load_image(data_path(file));
      for (const std::string& size : kFrontSizes)
        for (const std::string math : {"precise", "fast"}) {
          INFO(file << " -> " << size << " " << math);
          const MathMode m = math == "fast" ? MathMode::Fast : MathMode::Precise;
          const auto four = run_pipeline(Backend::Cuda, in, size, {}, {}, math);
          REQUIRE(four->stages()[kNms].variant_def().name == "v3_rows");
          for (const std::string& fv : kFronts) {
            INFO(fv);
            bool compared = false;
            for (const Block& b : nms.def.variants.at(size_t(nms.find_variant(fv))).blocks) {
              INFO("block " << b.str());
              const auto one = run_pipeline(Backend::Cuda, in, size, {"nms=" + fv}, {}, math,
                                            {"nms=" + b.str()});
              for (size_t i : {kBlur, kSobel, kHarris}) CHECK(one->fused_into(i) == "nms/" + fv);
              CHECK(one->launches().size() + 3 == four->launches().size());
              for (const char* slot : {"nms", "blur", "keypoints", "descriptors"})
                CHECK_MESSAGE(same_bytes(four->read_slot(slot), one->read_slot(slot)),
                              std::string(slot));
              if (compared) continue;
              // And against the CPU chain, by its comparison rule (once per image, size, math).
              const DiffStats d = one->compare(kNms, one->reference(kNms), m);
              CHECK_MESSAGE(d.pass(), d.detail());
              MESSAGE(file << " -> " << size << " " << math << ": " << fv
                           << " vs the CPU chain: max " << d.max_abs << ", limit " << d.limit << " "
                           << d.detail());
              // topk after it sees the same map: the same keypoints as after the four kernels.
              CHECK(rows_of(one->read_slot("keypoints")) == rows_of(four->read_slot("keypoints")));
              compared = true;
            }
          }
        }
      // harris.k reaches the kernels.
      const auto four = run_pipeline(Backend::Cuda, in, "1001x333", {}, {"harris.k=0.06"});
      CHECK_FALSE(same_bytes(four->read_slot("nms"),
                             run_pipeline(Backend::Cuda, in, "1001x333", {})->read_slot("nms")));
      for (const std::string& fv : kFronts) {
        INFO(fv);
        const auto one =
            run_pipeline(Backend::Cuda, in, "1001x333", {"nms=" + fv}, {"harris.k=0.06"});
        CHECK(same_bytes(four->read_slot("nms"), one->read_slot("nms")));
      }
    }
  }

  LAB_GPU_CASE(
      "detect on the GPU: the default pipeline's bytes, every variant, block and math mode, K at "
      "and past the cap, every pixel a candidate, real images") {
    // chessboard.png: its corners tie, score for score (the keys differ by the index only).
    const std::vector<std::string> files = {"box_in_scene.png", "graf1.png", "coffee.png",
                                            "chessboard.png"};
    for (const std::string& v : detect_variants())
      for (const std::string& file : files) {
        INFO(v);
        const HostImage in = io::load_image(data_path(file));
        for (const std::string& size : kFrontSizes)
          for (const std::string math : {"precise", "fast"}) {
            INFO(file << " -> " << size << " " << math);
            const MathMode m = math == "fast" ? MathMode::Fast : MathMode::Precise;
            const auto five = run_pipeline(Backend::Cuda, in, size, {}, {}, math);
            bool compared = false;
            const Op& detect = find_op("detect");
            for (const Block& b : detect.def.variants.at(size_t(detect.find_variant(v))).blocks) {
              INFO("block " << b.str());
              const auto one = run_pipeline(Backend::Cuda, in, size, {"detect=" + v}, {}, math,
                                            {"detect=" + b.str()});
              for (size_t i : {kBlur, kSobel, kHarris, kNms, kTopk}) CHECK(one->skipped(i));
              for (const char* slot : {"nms", "blur", "keypoints", "descriptors"})
                CHECK_MESSAGE(same_bytes(five->read_slot(slot), one->read_slot(slot)),
                              std::string(slot));
              if (compared) continue;
              const DiffStats d = one->compare(kDetect, one->reference(kDetect), m);
              CHECK_MESSAGE(d.pass(), d.detail());
              MESSAGE(file << " -> " << size << " " << math << ": " << v
                           << " vs the CPU chain: " << d.detail());
              compared = true;
            }
          }
        // K = 1, at the 8192 cap and past it (the front, then topk v2); threshold 0 leaves every
        // local maximum, tens of thousands of survivors (v2 takes v1's path; v3 selects its
        // candidates once with K = 4096 and 1000, and with K = 8192 they pass the cap: v1's
        // refining select); lower thresholds put the survivors between K and v2's 8192 (the
        // log says how many).
        for (const std::vector<std::string>& params : {std::vector<std::string>{"topk.k=1"},
                                                       {"topk.k=8192"},
                                                       {"topk.k=9000"},
                                                       {"nms.threshold=0", "topk.k=4096"},
                                                       {"nms.threshold=0", "topk.k=8192"},
                                                       {"nms.threshold=0", "topk.k=1000"},
                                                       {"nms.threshold=0.0003", "topk.k=4096"},
                                                       {"nms.threshold=0.0001", "topk.k=4096"},
                                                       {"nms.threshold=0.00003", "topk.k=2000"}}) {
          INFO(params.front() << " " << params.back());
          const auto five = run_pipeline(Backend::Cuda, in, "1280x736", {}, params);
          const auto one = run_pipeline(Backend::Cuda, in, "1280x736", {"detect=" + v}, params);
          for (const char* slot : {"nms", "keypoints"})
            CHECK_MESSAGE(same_bytes(five->read_slot(slot), one->read_slot(slot)),
                          std::string(slot));
          const size_t survivors = survivors_in(five->read_slot("nms"));
          MESSAGE(v << " " << file << " " << params.front() << " " << params.back() << ": "
                    << survivors << " survivors");
        }
      }
  }

  LAB_GPU_CASE("detect v3 on thousands of tied corners: one bucket, told apart by the index") {
    // Checkerboards of 22, 24 and 26-pixel squares at 1280x736 (scale 1, no resampling): each
    // inner corner leaves 4 survivors, and thousands of them share one score bit for bit (on the
    // CPU: 7,656, 6,360 and 5,488 survivors, 2,871, 2,385 and 2,058 of the top score), so they
    // fall in one bucket, more than kMinBucketedKeys in all (the bucketed path, not v2's count,
    // nor v1's select past 8,192), and only the index bits order them.
    for (int square : {22, 24, 26}) {
      INFO("square " << square);
      HostImage in(ImageDesc{1280, 736, 1, PixelType::U8});
      auto p = in.view<uint8_t>();
      for (int y = 0; y < 736; ++y)
        for (int x = 0; x < 1280; ++x) p.at(x, y) = ((x / square + y / square) & 1) ? 230 : 20;
      for (const std::string k : {"topk.k=4096", "topk.k=1", "topk.k=8192"}) {
        INFO(k);
        const auto six = run_pipeline(Backend::Cuda, in, "1280x736", {}, {k});
        const auto three =
            run_pipeline(Backend::Cuda, in, "1280x736", {"detect=v3_selected_once"}, {k});
        for (const char* slot : {"nms", "keypoints"})
          CHECK_MESSAGE(same_bytes(six->read_slot(slot), three->read_slot(slot)),
                        std::string(slot));
        const auto m = six->read_slot("nms");
        const auto v = m.view<float>();
        std::map<float, size_t> scores;
        size_t survivors = 0;
        for (int y = 0; y < v.height; ++y)
          for (int x = 0; x < v.width; ++x)
            if (v.at(x, y) != 0.0f) ++survivors, ++scores[v.at(x, y)];
        size_t most = 0;
        for (const auto& s : scores) most = std::max(most, s.second);
        MESSAGE(survivors << " survivors, " << most << " of one score");
        CHECK(survivors >= 3072);
        CHECK(survivors <= 8192);
        CHECK(most >= 2000);
      }
    }
  }

  LAB_GPU_CASE(
      "detect v4 (the pair front as the interior, then the ring, every launch programmatic) "
      "gives v3's bytes at 4K and odd sizes, every block and math mode; in a stream and as a "
      "graph, frame after frame") {
    // The interior and the ring run where the pair front's blocks fill the GPU twice over (the
    // 4K-class sizes here, not 2560x1440 on the H200) on a device with programmatic dependent
    // launch (sm_90 and up), else v3. Odd widths and heights move the ring's last column and row
    // of blocks (at 3847x2177 the last row of blocks holds one plane row, and the ring's lower
    // half-strip there none); every block width, the interior's columns.
    const bool split = device_info().major >= 9;
    const Op& detect = find_op("detect");
    const VariantDef& v4 =
        detect.def.variants.at(size_t(detect.find_variant("v4_split_overlapped")));
    std::vector<std::pair<std::string, HostImage>> inputs;
    for (const std::string file : {"pier_4k.jpg", "chessboard.png"})
      inputs.emplace_back(file, io::load_image(data_path(file)));
    inputs.emplace_back("synthetic", io::synthetic_frame(3840, 2160));
    for (const auto& input : inputs) {  // not a structured binding: INFO captures these
      const std::string& name = input.first;
      const HostImage& in = input.second;
      for (const std::string size : {"3840x2160", "3833x2157", "3847x2177", "2560x1440"})
        for (const std::string math : {"precise", "fast"})
          for (const Block& b : v4.blocks) {
            INFO(name << " -> " << size << " " << math << " block " << b.str());
            const std::vector<std::string> block = {"detect=" + b.str()};
            const auto three =
                run_pipeline(Backend::Cuda, in, size, {"detect=v3_selected_once"}, {}, math, block);
            const auto one = run_pipeline(Backend::Cuda, in, size, {"detect=v4_split_overlapped"},
                                          {}, math, block);
            for (const char* slot : {"nms", "blur", "keypoints", "descriptors"})
              CHECK_MESSAGE(same_bytes(three->read_slot(slot), one->read_slot(slot)),
                            std::string(slot));
            bool interior = false, ring = false, whole = false, zero = false;
            for (const LaunchRecord& l : one->launches()) {
              interior |= l.kernel == "topk_pair_front_interior";
              ring |= l.kernel == "topk_pair_front_ring";
              whole |= l.kernel == "topk_front_listed";
              zero |= l.kernel == "topk_zero_counters";
            }
            CHECK(interior == ring);
            CHECK(interior != whole);
            CHECK(zero == interior);
            if (b == Block{64, 1} && size == "3840x2160") CHECK(interior == split);
            if (b == Block{64, 1} && size == "2560x1440") CHECK_FALSE(interior);
          }
    }
    // Three frames in a stream without an event between the launches (the ring starts while the
    // interior runs), then three as a CUDA graph (a programmatic edge between the two nodes):
    // the ring's count of finished blocks starts again from zero each frame. Behind letterbox v7
    // and ahead of l2norm v5 (which starts early behind the rank): every launch after the
    // letterbox may start before the one before it ends.
    const HostImage pier = io::load_image(data_path("pier_4k.jpg"));
    const auto eager =
        run_pipeline(Backend::Cuda, pier, "3840x2160",
                     {"detect=v3_selected_once", "letterbox=v7_identity", "l2norm=v4_fused_warp"});
    for (const bool graph : {false, true}) {
      PipelineConfig p = default_pipeline();
      for (const char* v :
           {"detect=v4_split_overlapped", "letterbox=v7_identity", "l2norm=v5_overlapped"})
        apply_variant(p, v);
      apply_size(p, "3840x2160");
      Runner r(Backend::Cuda);
      r.configure(p, pier.desc());
      r.set_input(pier);
      r.set_per_launch_timing(false);
      r.set_graph(graph);
      for (int frame = 0; frame < 3; ++frame) {
        INFO((graph ? "graph" : "stream") << " frame " << frame);
        for (size_t i = 0; i < r.stages().size(); ++i) r.poison_outputs(i);
        r.run();
        CHECK(r.graph() == graph);
        for (const char* slot : {"nms", "blur", "keypoints", "descriptors"})
          CHECK_MESSAGE(same_bytes(eager->read_slot(slot), r.read_slot(slot)), std::string(slot));
      }
    }
  }

  LAB_GPU_CASE(
      "detect v3 past the cap: a real 4K photo's tens of thousands of survivors, v2's bytes, "
      "every math mode") {
    // pier_4k.jpg keeps 32,140 survivors at 4K (26,418 at 3833x2157: odd, and rescaled): v3's
    // candidates are selected once and ranked within their bins (K = 4096; K = 1: a single bin),
    // or, with K = 8192, pass the cap and take v1's refining select.
    const HostImage pier = io::load_image(data_path("pier_4k.jpg"));
    for (const std::string size : {"3840x2160", "3833x2157"})
      for (const std::string math : {"precise", "fast"})
        for (const std::string k : {"topk.k=4096", "topk.k=1", "topk.k=8192"}) {
          INFO(size << " " << math << " " << k);
          const auto two =
              run_pipeline(Backend::Cuda, pier, size, {"detect=v2_counted_rank"}, {k}, math);
          const auto one =
              run_pipeline(Backend::Cuda, pier, size, {"detect=v3_selected_once"}, {k}, math);
          for (const char* slot : {"nms", "blur", "keypoints", "descriptors"})
            CHECK_MESSAGE(same_bytes(two->read_slot(slot), one->read_slot(slot)),
                          std::string(slot));
          bool selected = false;
          for (const LaunchRecord& l : one->launches())
            selected |= l.kernel == "topk_selected_rank";
          CHECK(selected);
          const size_t survivors = survivors_in(one->read_slot("nms"));
          CHECK(survivors > 8192);
          if (k != "topk.k=4096" || math != "precise") continue;
          const DiffStats d = one->compare(kDetect, one->reference(kDetect), MathMode::Precise);
          CHECK_MESSAGE(d.pass(), d.detail());
          MESSAGE("pier_4k.jpg -> " << size << ": " << survivors
                                    << " survivors; v3 vs the CPU chain: " << d.detail());
        }
  }

  LAB_GPU_CASE("letterbox v6 gives v5's bytes at every scale (each reuse path), every block") {
    // Enlarged (pairs reused): box_in_scene (gray) and graf1 (BGR) to 3840x2160 and 1280x736.
    // Shrunk by up to 1.6x (v5's reuse): box_in_scene to 1001x333. Further (v4, no reuse):
    // chessboard (BGRA, 3595x3723) at every size, graf1 to 1001x333, all to 17x13.
    const Op& lb = find_op("letterbox");
    const VariantDef& v6 = lb.def.variants.at(size_t(lb.find_variant("v6_reuse_by_scale")));
    for (const std::string file : {"box_in_scene.png", "graf1.png", "chessboard.png"}) {
      const HostImage in = io::load_image(data_path(file));
      for (const std::string size : {"3840x2160", "1280x736", "1001x333", "17x13"})
        for (const std::string math : {"precise", "fast"})
          for (const Block& b : v6.blocks) {
            INFO(file << " -> " << size << " " << math << " block " << b.str());
            const std::vector<std::string> block = {"letterbox=" + b.str()};
            const auto v5 =
                run_pipeline(Backend::Cuda, in, size, {"letterbox=v5_row_reuse"}, {}, math, block);
            const auto six = run_pipeline(Backend::Cuda, in, size, {"letterbox=v6_reuse_by_scale"},
                                          {}, math, block);
            CHECK(same_bytes(v5->read_slot("letterbox"), six->read_slot("letterbox")));
          }
    }
  }

  LAB_GPU_CASE(
      "letterbox v7 at scale 1 gives v6's bytes (padded or not, any offset), every block") {
    // The identity path runs where the source fits the target at scale 1: W x H into W x H,
    // into W x (H + 17) (pad rows), into (W + 7) x H (pad columns at an odd offset: unaligned
    // source words, pixels at the pad's edge one by one); gray, BGR and BGRA. (W + 2) x (H + 3)
    // (enlarged) and 17x13 (shrunk) are not at scale 1: v6's paths.
    const Op& lb = find_op("letterbox");
    const VariantDef& v7 = lb.def.variants.at(size_t(lb.find_variant("v7_identity")));
    for (const std::string file : {"box_in_scene.png", "graf1.png", "chessboard.png"}) {
      const HostImage in = io::load_image(data_path(file));
      const int w = in.desc().width, h = in.desc().height;
      auto wxh = [](int a, int b) { return std::to_string(a) + "x" + std::to_string(b); };
      for (const std::string& size :
           {wxh(w, h), wxh(w, h + 17), wxh(w + 7, h), wxh(w + 2, h + 3), std::string("17x13")})
        for (const std::string math : {"precise", "fast"})
          for (const Block& b : v7.blocks) {
            INFO(file << " -> " << size << " " << math << " block " << b.str());
            const std::vector<std::string> block = {"letterbox=" + b.str()};
            const auto six = run_pipeline(Backend::Cuda, in, size, {"letterbox=v6_reuse_by_scale"},
                                          {}, math, block);
            const auto seven =
                run_pipeline(Backend::Cuda, in, size, {"letterbox=v7_identity"}, {}, math, block);
            CHECK(same_bytes(six->read_slot("letterbox"), seven->read_slot("letterbox")));
            std::string kernel;  // letterbox's (stage 0)
            for (const LaunchRecord& l : seven->launches())
              if (l.stage == 0 && kernel.empty()) kernel = l.kernel;
            const bool identity =
                size == wxh(w, h) || size == wxh(w, h + 17) || size == wxh(w + 7, h);
            CHECK((kernel.rfind("letterbox_v7_identity", 0) == 0) == identity);
          }
    }
  }

  LAB_GPU_CASE("the pipeline as a CUDA graph gives the eager pipeline's bytes, frame after frame") {
    const HostImage in = io::load_image(data_path("box_in_scene.png"));
    for (const std::string spec :
         {"topk=v1_sort_all", "topk=v2_select_sort", "topk=v4_compact_select", "topk=v5_in_flight",
          "topk=v6_shared_select", "detect=v1_listed", "detect=v2_counted_rank",
          "detect=v3_selected_once", "detect=v4_split_overlapped"}) {
      INFO(spec);
      PipelineConfig p = default_pipeline();
      apply_variant(p, spec);
      Runner r(Backend::Cuda);
      r.configure(p, in.desc());
      r.set_input(in);
      r.run();
      std::map<std::string, HostImage> eager;
      for (const char* s : {"nms", "keypoints", "patches", "descriptors"})
        eager[s] = r.read_slot(s);
      CHECK(rows_of(eager["keypoints"])[0][2] > 0);  // the image has keypoints
      r.set_graph(true);
      for (int frame = 0; frame < 3; ++frame) {
        for (size_t i = 0; i < r.stages().size(); ++i) r.poison_outputs(i);
        r.run();
        CHECK(r.frame_ms() > 0);
        size_t ran = 0;  // the stages that launch (a fused variant skips those it does)
        for (size_t i = 0; i < r.stages().size(); ++i) ran += !r.skipped(i);
        CHECK(r.launches().size() >= ran);
        for (const auto& slot : eager) {
          const std::string& s = slot.first;
          const HostImage& img = slot.second;
          const HostImage g = r.read_slot(s);
          CHECK_MESSAGE(std::equal(img.bytes(), img.bytes() + img.desc().bytes(), g.bytes()), s);
        }
      }
      // A new input size re-captures.
      const HostImage small = io::synthetic_frame(320, 240);
      r.configure(p, small.desc());
      r.set_input(small);
      r.run();
      CHECK(r.graph());
      CHECK(r.frame_ms() > 0);
    }
  }

  LAB_GPU_CASE("topk at scale: 2^20 scores with heavy ties, a plateau, a wide spread") {
    for (int plateau : {0, 1, 2}) {
      const int w = plateau == 1 ? 256 : 1024;
      const char* what = plateau == 0 ? "ties " : plateau == 1 ? "plateau " : "spread ";
      HostImage s = plane(w, w);
      for (int y = 0; y < w; ++y)
        for (int x = 0; x < w; ++x) {
          const uint32_t h = uint32_t(y * w + x) * 2654435761u;
          // ties: 1000 distinct values, each ~1000 times; spread: a quarter of the pixels survive
          // with scores over 2^-20..2^10 (most distinct, some hundreds of 13-bit bins: v6 ranks
          // within each bin), as on a real image.
          s.view<float>().at(x, y) = plateau == 0   ? float(h % 1000u + 1u)
                                     : plateau == 1 ? 1.0f
                                     : (h >> 30) == 0
                                         ? std::ldexp(1.0f + float((h >> 7) & 0xFFFFu) / 65536.0f,
                                                      int((h >> 23) % 31u) - 20)
                                         : 0.0f;
        }
      for (const VariantDef& v : find_op("topk").def.variants) {
        // v4 to v6 hold at most 8192 candidates in a block: K at that cap, K past it (v2's
        // path), K = 1; the plateau (65,536 equal scores) and the ties (a 13-bit bin holds ~60
        // values x ~1000 pixels) overflow that buffer, so their select refines down to the
        // index bits.
        const bool v4 = v.name.rfind("v4_", 0) == 0 || v.name.rfind("v5_", 0) == 0 ||
                        v.name.rfind("v6_", 0) == 0;
        for (int k : v4 ? std::vector<int>{4096, 8192, 9000, 1} : std::vector<int>{4096}) {
          INFO(std::string(what) << v.name << " k=" << k);
          Harness h(Backend::Cuda, {stage("topk", v.name, MathMode::Precise, {{"k", k}})},
                    {{"nms", s}});
          const auto ref = h.r->reference(0);
          const DiffStats d = h.r->compare(0, ref, MathMode::Precise);
          CHECK_MESSAGE(d.pass(), d.detail());
          MESSAGE(std::string(what) << v.name << " k=" << k << ": " << d.detail());
        }
      }
    }
  }

  LAB_GPU_CASE("histogram top-K: its guarantees hold and its recall is reported") {
    for (const char* file : {"box_in_scene.png", "graf1.png", "chessboard.png"}) {
      INFO(std::string(file));
      const HostImage in = io::load_image(data_path(file));
      PipelineConfig p = default_pipeline();
      apply_variant(p, "topk=v3_histogram");
      apply_param(p, "topk.k=512");
      Runner r(Backend::Cuda);
      r.configure(p, in.desc());
      r.set_input(in);
      r.run();
      const size_t i = 5;
      REQUIRE(r.stages()[i].op->def.name == "topk");
      const auto ref = r.reference(i);
      const DiffStats d = r.compare(i, ref, MathMode::Precise);
      CHECK_MESSAGE(d.pass(), d.detail());
      CHECK(d.has_set);
      CHECK(d.recall() > 0.5);
      MESSAGE(std::string(file) << ": histogram top-512 " << d.detail());
    }
  }
}
