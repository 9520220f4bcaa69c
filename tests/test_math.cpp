// The math playground: its references on hand-computed cases, its per-step bounds, and (GPU)
// the directions its story claims.
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "measure.h"
#include "runner.h"
#include "support.h"

namespace {

const lab::Op& math_op() {
  return lab::find_op("math");
}

size_t variant(const std::string& name) {
  const int v = math_op().find_variant(name);
  REQUIRE(v >= 0);
  return size_t(v);
}

// The three input slots: `in` as the array, an image given by f(x, y), keypoints (5 floats each).
struct Inputs {
  std::vector<lab::HostImage> img;
  Inputs(const std::vector<float>& in, float (*f)(int, int), std::vector<float> kp) {
    img.emplace_back(lab::ImageDesc{int(in.size()), 1, 1, lab::PixelType::F32});
    std::memcpy(img[0].bytes(), in.data(), in.size() * 4);
    img.emplace_back(lab::ImageDesc{1280, 960, 1, lab::PixelType::F32});
    const auto v = img[1].view<float>();
    for (int y = 0; y < v.height; ++y)
      for (int x = 0; x < v.width; ++x) v.at(x, y) = f(x, y);
    kp.resize(size_t((in.size() + 63) / 64) * 5, 0.0f);
    img.emplace_back(lab::ImageDesc{int(kp.size()), 1, 1, lab::PixelType::F32});
    std::memcpy(img[2].bytes(), kp.data(), kp.size() * 4);
  }
};

float ramp(int x, int y) {
  return float(x + 2 * y);  // bilinear interpolation of a linear function is exact
}
float flat(int, int) {
  return 0.5f;
}

// Variant `name`'s reference on the inputs.
std::vector<float> reference(const std::string& name, Inputs& in, int iters = 32) {
  const lab::VariantDef& v = math_op().def.variants[variant(name)];
  lab::HostImage out(lab::ImageDesc{in.img[0].desc().width, 1, 1, lab::PixelType::F32});
  lab::StageArgs a;
  for (auto& i : in.img) a.in.push_back(i.ref());
  a.out.push_back(out.ref());
  a.params = {{"iters", double(iters)}};
  REQUIRE(bool(v.reference));
  v.reference(a);
  std::vector<float> r(size_t(out.desc().width));
  std::memcpy(r.data(), out.bytes(), r.size() * 4);
  return r;
}

// The op's comparison of `got` against `ref` as variant `name` would be judged in `math`.
lab::DiffStats judge(const std::string& name, Inputs& in, const std::vector<float>& got,
                     const std::vector<float>& ref, lab::MathMode math) {
  auto image = [](const std::vector<float>& v) {
    lab::HostImage h(lab::ImageDesc{int(v.size()), 1, 1, lab::PixelType::F32});
    std::memcpy(h.bytes(), v.data(), v.size() * 4);
    return h;
  };
  const std::vector<lab::HostImage> g{image(got)}, r{image(ref)};
  const std::vector<std::string> names{"math"};
  lab::CompareArgs a{
      &in.img, &g, &r, &names, &math_op().def.variants[variant(name)], math_op().tolerance(math),
      math};
  return math_op().def.compare(a);
}

std::vector<float> plus(std::vector<float> v, float d) {
  for (float& x : v) x += d;
  return v;
}

}  // namespace

TEST_SUITE("cpu") {
  TEST_CASE("math playground: references on hand-computed cases") {
    // (a) y <- y * 0.5 + y0 / 4: 1 -> 0.75 -> 0.625; both literals share the reference.
    Inputs a({1.0f, -0.5f, 0.0f}, flat, {});
    CHECK(reference("v1_double_literal", a, 1) == std::vector<float>{0.75f, -0.375f, 0.0f});
    CHECK(reference("v2_float_literal", a, 2) == std::vector<float>{0.625f, -0.3125f, 0.0f});
    // (b) x <- 0.75 x + 0.25 exp(x - 1) sin(2x) / (1 + x/2): 0 is fixed, 1 -> 0.75 + sin(2)/6.
    Inputs b({0.0f, 1.0f}, flat, {});
    const std::vector<float> rb = reference("v3_libm", b, 1);
    CHECK(rb[0] == 0.0f);
    CHECK(rb[1] == doctest::Approx(0.75 + std::sin(2.0) / 6.0).epsilon(1e-7));
    CHECK(reference("v4_intrinsics", b, 1) == rb);
    // (c) A keypoint at the centre, size 8 (a 1-px grid), angle 90 degrees, no roll, on
    // I = x + 2y: sample (i, j) sits at (639.5 - (j - 3.5), 479.5 + (i - 3.5)).
    std::vector<float> in64(64, 0.0f);
    Inputs c(in64, ramp, {639.5f, 479.5f, 90.0f, 8.0f, 0.0f});
    const std::vector<float> rc = reference("v5_coords_libm", c);
    for (int t = 0; t < 64; ++t) {
      const double x = 639.5 - ((t >> 3) - 3.5), y = 479.5 + ((t & 7) - 3.5);
      CHECK(rc[size_t(t)] == doctest::Approx(x + 2 * y).epsilon(1e-7));
    }
    // A roll of pi (a float: off by 8.7e-8) about the centre mirrors the grid through it.
    Inputs c2(in64, ramp, {700.0f, 500.0f, 0.0f, 8.0f, float(M_PI)});
    const std::vector<float> rc2 = reference("v6_coords_intrinsics", c2);
    for (int t = 0; t < 64; ++t) {
      const double x = 2 * 639.5 - (700 + (t & 7) - 3.5), y = 2 * 479.5 - (500 + (t >> 3) - 3.5);
      CHECK(rc2[size_t(t)] == doctest::Approx(x + 2 * y).epsilon(1e-6));
    }
    // Clamped at the border: a keypoint beyond the corner samples the corner pixel.
    Inputs c3({0.0f}, ramp, {5000.0f, -5000.0f, 0.0f, 8.0f, 0.0f});
    CHECK(reference("v5_coords_libm", c3)[0] == 1279.0f);
    // (d) groups of 64 (the last one shorter) scaled to unit length; a zero group stays zero.
    std::vector<float> dv(66, 0.0f);
    dv[0] = 3.0f, dv[1] = 4.0f, dv[64] = -5.0f, dv[65] = 12.0f;
    Inputs d(dv, flat, {});
    for (const char* v : {"v7_norm_div_sqrt", "v8_norm_rsqrt"}) {
      const std::vector<float> r = reference(v, d);
      CHECK(r[0] == 0.6f);
      CHECK(r[1] == 0.8f);
      CHECK(r[2] == 0.0f);
      CHECK(r[64] == doctest::Approx(-5.0 / 13).epsilon(1e-7));
      CHECK(r[65] == doctest::Approx(12.0 / 13).epsilon(1e-7));
    }
    Inputs z({0.0f, 0.0f}, flat, {});
    CHECK(reference("v8_norm_rsqrt", z) == std::vector<float>{0.0f, 0.0f});
  }

  TEST_CASE("ulps: floats between a result and its reference") {
    CHECK(lab::ulps_off(1.0, 1.0) == 0);
    CHECK(lab::ulps_off(std::nextafter(1.0f, 2.0f), 1.0) == 1);
    CHECK(lab::ulps_off(1.0 + 3 * 0x1p-23, 1.0) == doctest::Approx(3));
    CHECK(lab::ulps_off(-2.0 - 0x1p-22, -2.0) == doctest::Approx(1));  // the spacing doubles
    CHECK(lab::ulps_off(std::nextafter(0.25f, 0.0f), 0.25) == 1);      // and halves below
    CHECK(lab::ulps_off(0x1p-149, 0.0) == 1);  // below the normal range: FLT_TRUE_MIN
  }

  TEST_CASE("math playground: each step's bound") {
    using lab::MathMode;
    // (a) exact: one ulp off fails, in both builds.
    Inputs a({1.0f, -0.5f}, flat, {});
    const std::vector<float> ra = reference("v2_float_literal", a);
    CHECK(judge("v2_float_literal", a, ra, ra, MathMode::Precise).pass());
    std::vector<float> off = ra;
    off[1] = std::nextafter(off[1], 1.0f);
    const lab::DiffStats da = judge("v1_double_literal", a, off, ra, MathMode::Fast);
    CHECK(!da.pass());
    CHECK(da.over == 1);
    CHECK(da.bad_x == 1);
    CHECK(da.max_ulp == 1);  // counted in floats at the reference
    CHECK(da.detail().find("max 1 ulp") != std::string::npos);
    CHECK(judge("v2_float_literal", a, ra, ra, MathMode::Precise).max_ulp == 0);
    // (b) 256 steps x 3e-7 precise, x 6e-7 fast (per element, absolute).
    Inputs b({0.25f, -0.75f}, flat, {});
    const std::vector<float> rb = reference("v3_libm", b);
    CHECK(judge("v3_libm", b, plus(rb, 7e-5f), rb, MathMode::Precise).pass());
    CHECK(!judge("v3_libm", b, plus(rb, 1e-4f), rb, MathMode::Precise).pass());
    CHECK(judge("v4_intrinsics", b, plus(rb, 1e-4f), rb, MathMode::Fast).pass());
    CHECK(!judge("v4_intrinsics", b, plus(rb, 2e-4f), rb, MathMode::Fast).pass());
    // (c) on I = x + 2y the slope is 3: precise 3 x 1e-3 px; the approximate step and the fast
    // build add __sincosf's error, x 912 px for a roll of 40 rad: ~0.1.
    std::vector<float> in64(64, 0.0f);
    Inputs c(in64, ramp, {600.0f, 400.0f, 33.0f, 31.0f, 40.0f});
    const std::vector<float> rc = reference("v5_coords_libm", c);
    CHECK(judge("v5_coords_libm", c, plus(rc, 0.0025f), rc, MathMode::Precise).pass());
    const lab::DiffStats dc = judge("v5_coords_libm", c, plus(rc, 0.01f), rc, MathMode::Precise);
    CHECK(!dc.pass());
    CHECK(dc.has_cosine);
    CHECK(dc.cos_min > 0.999999);  // a shift of 0.01 on values ~2000
    CHECK(judge("v5_coords_libm", c, plus(rc, 0.01f), rc, MathMode::Fast).pass());
    CHECK(judge("v6_coords_intrinsics", c, plus(rc, 0.01f), rc, MathMode::Precise).pass());
    CHECK(!judge("v6_coords_intrinsics", c, plus(rc, 0.5f), rc, MathMode::Fast).pass());
    CHECK(!math_op().def.variants[variant("v6_coords_intrinsics")].approx.empty());
    CHECK(math_op().def.variants[variant("v5_coords_libm")].approx.empty());
    // (d) relative: a few ulps pass in both builds, 1e-5 fails; the cosine is per group.
    std::vector<float> dv(64);
    for (int i = 0; i < 64; ++i) dv[size_t(i)] = float(i % 7) - 3.0f;
    Inputs d(dv, flat, {});
    const std::vector<float> rd = reference("v7_norm_div_sqrt", d);
    std::vector<float> few = rd, bad = rd;
    for (float& x : few) x = std::nextafter(std::nextafter(std::nextafter(x, 2.0f), 2.0f), 2.0f);
    for (float& x : bad) x *= 1.00001f;
    for (MathMode m : {MathMode::Precise, MathMode::Fast}) {
      CHECK(judge("v8_norm_rsqrt", d, few, rd, m).pass());
      CHECK(!judge("v7_norm_div_sqrt", d, bad, rd, m).pass());
    }
    const lab::DiffStats dd = judge("v8_norm_rsqrt", d, bad, rd, MathMode::Precise);
    CHECK(dd.has_cosine);
    CHECK(dd.cos_min == doctest::Approx(1.0).epsilon(1e-12));  // a uniform scale: parallel
    // A NaN never passes.
    std::vector<float> nan = rd;
    nan[3] = NAN;
    CHECK(!judge("v8_norm_rsqrt", d, nan, rd, MathMode::Fast).pass());
  }

  TEST_CASE("math playground: every step's reference on generated inputs") {
    const lab::LabInputs li = lab::make_lab_inputs(*lab::find_playground("math"), "1000", 5);
    REQUIRE(li.slots.size() == 3);
    std::vector<float> in(1000);
    std::memcpy(in.data(), li.slots[0].second.bytes(), 4000);
    const auto kp = li.slots[2].second.view<const float>();
    CHECK(kp.width == 16 * 5);
    for (int k = 0; k < 16; ++k) {
      CHECK(kp.at(5 * k, 0) >= 0.0f);
      CHECK(kp.at(5 * k, 0) < 1280.0f);
      CHECK(kp.at(5 * k + 2, 0) < 360.0f);
      CHECK(std::abs(kp.at(5 * k + 4, 0)) <= 50.0f);
    }
    Inputs gen(in, flat, {});
    for (size_t s = 0; s < 3; ++s) gen.img[s] = li.slots[s].second;
    for (const lab::VariantDef& v : math_op().def.variants) {
      INFO(v.name);
      const std::vector<float> r = reference(v.name, gen);
      for (float x : r) REQUIRE(std::isfinite(x));
      CHECK(judge(v.name, gen, r, r, lab::MathMode::Precise).pass());
    }
    // (a)'s two literals: one reference (the same bits); (c)'s one too, judged differently.
    CHECK(reference("v1_double_literal", gen) == reference("v2_float_literal", gen));
  }
}

TEST_SUITE("gpu") {
  // The story's directions on the H200: the FP64 literal is slower, the fast coordinates leave
  // the precise bound, rsqrtf stays inside it.
  LAB_GPU_CASE("math playground: FP64 literal slower than the float literal") {
    lab::Runner r(lab::Backend::Cuda);
    r.configure_lab(lab::default_pipeline("math"),
                    lab::make_lab_inputs(*lab::find_playground("math"), "2^22", 1));
    lab::MeasureOptions m;
    m.warmup = 3, m.reps = 20;
    lab::ResolvedStage s = r.stages()[0];
    s.params["iters"] = 64;
    s.variant = variant("v1_double_literal");
    const double dbl = lab::measure_stage(r, 0, s, m).total.median_us;
    s.variant = variant("v2_float_literal");
    const double flt = lab::measure_stage(r, 0, s, m).total.median_us;
    s.variant = variant("v3_libm");
    const double libm = lab::measure_stage(r, 0, s, m).total.median_us;
    s.variant = variant("v4_intrinsics");
    const double intr = lab::measure_stage(r, 0, s, m).total.median_us;
    MESSAGE("2^22 x 64 steps: double literal " << dbl << " us, float " << flt << " us; libm "
                                               << libm << " us, intrinsics " << intr << " us");
    CHECK(dbl > 2.0 * flt);
    CHECK(libm > 1.3 * intr);
  }

  LAB_GPU_CASE("math playground: fast coordinates leave the precise bound, rsqrtf does not") {
    lab::Runner r(lab::Backend::Cuda);
    r.configure_lab(lab::default_pipeline("math"),
                    lab::make_lab_inputs(*lab::find_playground("math"), "2^20", 2));
    lab::ResolvedStage s = r.stages()[0];
    s.block = {256, 1};
    auto run_as = [&](const std::string& run, lab::MathMode math, const std::string& judged_as) {
      s.variant = variant(run), s.math = math;
      r.poison_outputs(0);
      r.run_stage(0, &s);
      lab::ResolvedStage j = s;
      j.variant = variant(judged_as);
      return r.compare(0, r.reference(0, &j), lab::MathMode::Precise, &j);
    };
    const lab::DiffStats precise =
        run_as("v5_coords_libm", lab::MathMode::Precise, "v5_coords_libm");
    const lab::DiffStats fast =
        run_as("v6_coords_intrinsics", lab::MathMode::Precise, "v5_coords_libm");
    const lab::DiffStats fast_build =
        run_as("v5_coords_libm", lab::MathMode::Fast, "v5_coords_libm");
    MESSAGE("descriptors: precise max " << precise.max_abs << " " << precise.detail()
                                        << "; __sincosf max " << fast.max_abs << " "
                                        << fast.detail() << ", " << fast.over << " over");
    CHECK(precise.pass());
    CHECK(fast.over > 0);  // past the precise bound
    CHECK(fast_build.over > 0);
    CHECK(fast.max_abs > 3 * precise.max_abs);
    CHECK(fast.cos_min > 0.999);  // visible, not catastrophic
    const lab::DiffStats rs = run_as("v8_norm_rsqrt", lab::MathMode::Fast, "v7_norm_div_sqrt");
    const lab::DiffStats dv = run_as("v7_norm_div_sqrt", lab::MathMode::Fast, "v7_norm_div_sqrt");
    MESSAGE("normalisation, fast build: rsqrtf max " << rs.max_abs << ", 1/sqrtf max "
                                                     << dv.max_abs);
    CHECK(rs.pass());
    CHECK(dv.pass());
  }
}
