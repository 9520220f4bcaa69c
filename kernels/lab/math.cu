// math: where the math mode matters, and why. Element i of a float array goes through one of
// four small computations, two steps each; every step writes one float per element.
//
// Variants:
//   v1_double_literal   (a) `iters` steps of y = y * 0.5 + c: the bare 0.5 is a double, so y and
//                       c are converted to FP64 (F2F), multiplied and added in FP64 (DFMA), and
//                       converted back, every step.
//   v2_float_literal    (a) the same with 0.5f: one FFMA per step. Bit-identical results.
//   v3_libm             (b) `iters` steps of x = fma(x, 0.75, 0.25 exp(x - 1) sin(2x) / (1 + x/2))
//                       with expf, sinf and '/': accurate (<= 2 ulp) in the precise build; the
//                       fast build turns them into v4's intrinsics.
//   v4_intrinsics       (b) the same with __expf, __sinf, __fdividef (SFU approximations).
//   v5_coords_libm      (c) keypoint patches: element i is sample i % 64 of keypoint i / 64, an
//                       8x8 grid rotated by the keypoint's angle (degrees, as a detector gives
//                       it) and mapped into the camera image by the camera's roll (an unwrapped,
//                       integrated gyro angle in radians) about the image centre, then sampled
//                       bilinearly. sincosf: exact range reduction in the precise build,
//                       __sincosf in the fast one.
//   v6_coords_intrinsics (c) the same with __sincosf, as --use_fast_math compiles v5: the SFU's
//                       error grows with |angle|, and the roll multiplies it by the distance to
//                       the centre (up to ~900 px). Approximate: its bound is looser.
//   v7_norm_div_sqrt    (d) L2 normalisation of each 64-element group: x / sqrtf(sum x^2).
//   v8_norm_rsqrt       (d) x * rsqrtf(sum x^2): one SFU op, no division; harmless here.
//
// Bench: kernel-lab bench --lab math --sweep-variants --size 2^22 --param math.iters=64
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <string>
#include <vector>

#include "lab_common.cuh"

namespace lab::ops {

struct MathParams {
  int iters = 32;
  template <class V>
  void visit(V& v) {
    v("iters", iters, 1, 256, "steps per element of (a) and (b)");
  }
};

constexpr long long MATH_MAX = 1LL << 24;
// The generated camera image of (c) and its centre (pixel centres at integers).
constexpr int MATH_W = 1280, MATH_H = 960;
constexpr float MATH_CX = 0.5f * (MATH_W - 1), MATH_CY = 0.5f * (MATH_H - 1);
// Per keypoint: x, y (px), angle (degrees, [0, 360)), size (px: ORB's 31 * 1.2^level), roll
// (radians, unwrapped: [-50, 50), a few turns of a spinning camera).
constexpr int MATH_KP = 5;
constexpr int MATH_GROUP = 64;  // samples per keypoint, elements per normalised vector
constexpr float MATH_ROLL_MAX = 50.0f;
constexpr float MATH_DEG = 0.017453292519943295f;  // pi / 180

inline long long math_keypoints(long long n) {
  return (n + MATH_GROUP - 1) / MATH_GROUP;
}

inline LabSlots math_inputs(const std::string& size) {
  const long long n = parse_count(size, "math", MATH_MAX);
  return {{"input", array_desc(n, PixelType::F32)},
          {"math_image", ImageDesc{MATH_W, MATH_H, 1, PixelType::F32}},
          {"math_kp", array_desc(math_keypoints(n) * MATH_KP, PixelType::F32)}};
}

// The input uniform in [-1, 1); the image a smooth pattern with texture in [0, 1]; keypoints
// anywhere in the image, ORB's pyramid sizes, the detector's angle in degrees.
inline void math_fill(uint64_t seed, std::vector<HostImage>& imgs) {
  fill_uniform_pm1(seed, imgs);
  if (imgs.size() < 3) return;
  const auto img = imgs[1].view<float>();
  const double p1 = 6.283 * uniform01(seed, 1ull << 40), p2 = 6.283 * uniform01(seed, 1ull << 41);
  for (int y = 0; y < img.height; ++y)
    for (int x = 0; x < img.width; ++x) {
      const double t = 0.5 + 0.22 * std::sin(0.031 * x + 0.017 * y + p1) +
                       0.16 * std::sin(0.013 * x - 0.029 * y + p2) +
                       0.1 * (uniform01(seed, (2ull << 40) + uint64_t(y) * MATH_W + x) - 0.5);
      img.at(x, y) = float(t);
    }
  float* kp = imgs[2].view<float>().row(0);
  const long long k = array_len(imgs[2].desc()) / MATH_KP;
  for (long long i = 0; i < k; ++i) {
    const uint64_t b = (3ull << 40) + uint64_t(i) * 8;
    float* p = kp + i * MATH_KP;
    p[0] = float(MATH_W) * uniform01(seed, b);
    p[1] = float(MATH_H) * uniform01(seed, b + 1);
    p[2] = 360.0f * uniform01(seed, b + 2);
    p[3] = float(31.0 * std::pow(1.2, double(mix64(seed, b + 3) % 8)));
    p[4] = 2.0f * MATH_ROLL_MAX * (uniform01(seed, b + 4) - 0.5f);
  }
}

inline std::vector<ImageDesc> math_shape(const std::vector<ImageDesc>& in, const ParamMap&) {
  if (in.size() != 3) throw Error(ErrorKind::Data, "math: needs input, math_image, math_kp");
  const ImageDesc d = require_array("math", in[0], PixelType::F32, MATH_MAX);
  if (!(in[1] == ImageDesc{MATH_W, MATH_H, 1, PixelType::F32}))
    throw Error(ErrorKind::Data,
                "math: math_image must be a 1280x960 float plane, got " + in[1].str());
  const ImageDesc kp = require_array("math (keypoints)", in[2], PixelType::F32, MATH_MAX);
  if (array_len(kp) != math_keypoints(array_len(d)) * MATH_KP)
    throw Error(ErrorKind::Data, "math: math_kp must hold 5 floats per 64 elements");
  return {d};
}

// ---- the computations, on both sides ---------------------------------------------------------

// (b)'s step for the double reference.
inline double math_step_b(double x) {
  return x * 0.75 + 0.25 * (std::exp(x - 1.0) * std::sin(2.0 * x) / (1.0 + 0.5 * x));
}

// Bilinear sample, coordinates clamped to the image (align_corners=False pixel centres).
template <class T>
LAB_HD T math_bilinear(const ImageView<const float>& img, T x, T y) {
  x = x < T(0) ? T(0) : (x > T(MATH_W - 1) ? T(MATH_W - 1) : x);
  y = y < T(0) ? T(0) : (y > T(MATH_H - 1) ? T(MATH_H - 1) : y);
  int x0 = int(x), y0 = int(y);
  if (x0 > MATH_W - 2) x0 = MATH_W - 2;  // x = W - 1: the last cell, fx = 1
  if (y0 > MATH_H - 2) y0 = MATH_H - 2;
  const T fx = x - T(x0), fy = y - T(y0);
  // Rows by the view's pitch: on the device an image's rows are padded.
  const float* r0 = img.row(y0) + x0;
  const float* r1 = img.row(y0 + 1) + x0;
  const T top = T(r0[0]) + fx * (T(r0[1]) - T(r0[0]));
  const T bot = T(r1[0]) + fx * (T(r1[1]) - T(r1[0]));
  return top + fy * (bot - top);
}

// Sample t (0..63: i = t % 8 across, j = t / 8 down) of a keypoint's patch: offsets on a grid of
// size / 8 px rotated by the angle (ca, sa), the point then rotated about the image centre by
// the roll (cr, sr). T = double for the reference, float in the kernels.
template <class T>
LAB_HD void math_patch_point(const float* kp, int t, T ca, T sa, T cr, T sr, T& qx, T& qy) {
  const T step = T(kp[3]) * T(0.125);
  const T u = T((t & 7) - 3.5f) * step, v = T((t >> 3) - 3.5f) * step;
  const T px = T(kp[0]) + ca * u - sa * v - T(MATH_CX);
  const T py = T(kp[1]) + sa * u + ca * v - T(MATH_CY);
  qx = T(MATH_CX) + (cr * px - sr * py);
  qy = T(MATH_CY) + (sr * px + cr * py);
}

// ---- references ------------------------------------------------------------------------------

struct MathArrays {
  const float* in;
  float* out;
  long long n;
  int iters;
};
inline MathArrays math_arrays(const StageArgs& a) {
  return {a.in[0].view<const float>().row(0), a.out[0].view<float>().row(0),
          array_len(a.in[0].desc), decode_params<MathParams>(a.params).iters};
}

// (a): the kernels' float operations. y * 0.5 is exact and y + c rounds once, in float or in
// double then to float alike: every variant and build gives these bits.
inline void math_reference_a(const StageArgs& s) {
  const MathArrays a = math_arrays(s);
  for (long long i = 0; i < a.n; ++i) {
    float y = a.in[i];
    const float c = a.in[i] * 0.25f;
    for (int k = 0; k < a.iters; ++k) y = y * 0.5f + c;
    a.out[i] = y;
  }
}

// (b): the exact chain, in double, rounded once.
inline void math_reference_b(const StageArgs& s) {
  const MathArrays a = math_arrays(s);
  for (long long i = 0; i < a.n; ++i) {
    double x = a.in[i];
    for (int k = 0; k < a.iters; ++k) x = math_step_b(x);
    a.out[i] = float(x);
  }
}

// (c): the coordinates and the interpolation in double (angle converted exactly).
inline void math_reference_c(const StageArgs& s) {
  const MathArrays a = math_arrays(s);
  const ImageView<const float> img = s.in[1].view<const float>();
  const float* kps = s.in[2].view<const float>().row(0);
  for (long long i = 0; i < a.n; ++i) {
    const float* kp = kps + (i / MATH_GROUP) * MATH_KP;
    const double th = double(kp[2]) * (M_PI / 180.0), ro = double(kp[4]);
    double qx, qy;
    math_patch_point<double>(kp, int(i % MATH_GROUP), std::cos(th), std::sin(th), std::cos(ro),
                             std::sin(ro), qx, qy);
    a.out[i] = float(math_bilinear<double>(img, qx, qy));
  }
}

// (d): each group of 64 (the last one shorter) divided by its L2 norm, in double.
inline void math_reference_d(const StageArgs& s) {
  const MathArrays a = math_arrays(s);
  for (long long g = 0; g < a.n; g += MATH_GROUP) {
    const long long e = std::min(a.n, g + MATH_GROUP);
    double ss = 0;
    for (long long i = g; i < e; ++i) ss += double(a.in[i]) * a.in[i];
    for (long long i = g; i < e; ++i) a.out[i] = ss > 0 ? float(a.in[i] / std::sqrt(ss)) : 0.0f;
  }
}

// ---- the bounds ------------------------------------------------------------------------------

// (b), per step, |x| <= 1 (|F(x)| <= 0.75 + 0.25 |h| <= 1, h = exp(x - 1) sin(2x) / (1 + x/2),
// |h| <= 0.61) and |F'| = |0.75 + 0.25 h'| <= 1 (|h'| <= 0.9): a difference never grows, the
// errors of the steps add up at most linearly. One step's error, precise: expf, sinf 2 ulp
// each, x - 1, 1 + x/2, the product, the quotient, 0.25 h and the fma 0.5 ulp each: |h| x
// (2 + 2 + 4 x 0.5) 2^-23 x 0.25 + 2^-25 (the fma, |x| < 1) + 1.2e-7 x 0.25 (x - 1 rounded,
// through exp) < 1.6e-7; 3e-7 leaves room for the double reference's own rounding. Fast:
// __expf on [-2, 0] 2 + 1.16 x 2 ulp, __sinf on [-2, 2] absolute 2^-21.41 (x 2 after the
// division by 1 + x/2 >= 0.5), __fdividef 2 ulp: 0.25 (0.61 x 8 x 2^-23 + 7.2e-7) + 3e-8 <
// 3.2e-7; 6e-7 leaves the same room. Flush-to-zero adds <= FLT_MIN per operation.
constexpr double MATH_B_STEP_PRECISE = 3e-7, MATH_B_STEP_FAST = 6e-7;

// (c): the error of a sample position (px, each axis). Precise: with |x|, |qx| < 1280, |p - c|
// < 912, |offset| < 78: seven roundings of coordinates below 2048 (<= 6.1e-5 each) and of
// rotated values below 1024 (<= 3.1e-5): 3.1e-4; sincosf of the roll (2 ulp, <= 1.2e-7
// absolute) x |p - c| x 2 terms: 2.2e-4; the angle's conversion to radians (<= 4.3e-7) and its
// sincosf x 78 px x 2: 1e-4; the offsets' error carried through the roll (x 1.42): 1.4e-4.
// 1e-3 px in all, with room. Fast: __sincosf's absolute error grows with |angle| (the SFU
// reduces its argument by a single-precision multiply by 1/2pi: about |a| 2^-23 plus 2^-21.41;
// measured on an H200: see MATH_C_SIN_FAST), times |p - c| x 2 for the roll, 78 x 2 for the
// angle (< 6.3 rad).
constexpr double MATH_C_COORD_PRECISE = 1e-3;
inline double math_sin_fast_err(double a) {
  return std::ldexp(1.0, -21) + std::abs(a) * std::ldexp(1.0, -21);
}
inline double math_c_coord_fast(double roll) {
  return MATH_C_COORD_PRECISE + 2.0 * 912.0 * math_sin_fast_err(roll) +
         2.0 * 78.0 * math_sin_fast_err(6.3);
}
// The interpolation's own rounding (values in [0, 1], five roundings) and the double
// reference's rounding to float.
constexpr double MATH_C_VALUE = 6e-7;

// (d): relative to |ref|: the sum of 64 squares (any order, fma or not) is within gamma_64 =
// 64 u / (1 - 64 u) of the exact sum, u = 2^-24; the norm takes half of that; sqrtf and the
// division (approximate in fast math: 2 ulp each), rsqrtf (2 ulp) and the product: <= 5 ulp,
// 5 x 2^-23. Fast math's flush-to-zero: squares below FLT_MIN are lost: 64 FLT_MIN in the sum.
constexpr double MATH_D_REL = 0.5 * 64.0 / double(1 << 24) * 1.0001 + 5.0 / double(1 << 23);

// The largest |I(x+1, y) - I(x, y)| + |I(x, y+1) - I(x, y)| around (x, y): a bilinear sample
// moves by at most this times the larger shift of its coordinates (within a pixel).
inline double math_slope(const ImageView<const float>& img, double x, double y) {
  const int xi = int(std::floor(std::clamp(x, 0.0, double(MATH_W - 1))));
  const int yi = int(std::floor(std::clamp(y, 0.0, double(MATH_H - 1))));
  double gx = 0, gy = 0;
  for (int yy = std::max(0, yi - 1); yy <= std::min(MATH_H - 1, yi + 2); ++yy)
    for (int xx = std::max(0, xi - 1); xx <= std::min(MATH_W - 1, xi + 2); ++xx) {
      const float v = img.at(xx, yy);
      if (xx + 1 < MATH_W) gx = std::max(gx, double(std::abs(img.at(xx + 1, yy) - v)));
      if (yy + 1 < MATH_H) gy = std::max(gy, double(std::abs(img.at(xx, yy + 1) - v)));
    }
  return gx + gy;
}

// Each element against its step's bound; descriptors and normalised vectors also get the
// cosine of each group of 64 with its reference.
inline DiffStats math_compare(const CompareArgs& c) {
  const bool fast = c.math == MathMode::Fast;
  const HostImage& in_img = (*c.in)[0];
  const float* in = in_img.view<const float>().row(0);
  const float* got = (*c.got)[0].view<const float>().row(0);
  const float* ref = (*c.ref)[0].view<const float>().row(0);
  const long long n = array_len(in_img.desc());
  const std::string slot =
      c.out_names && !c.out_names->empty() ? (*c.out_names)[0] : std::string("math");
  const ReferenceFn r = c.variant ? c.variant->reference : nullptr;
  const bool approx = c.variant && !c.variant->approx.empty();
  DiffAccumulator acc;
  if (r == math_reference_a) {
    for (long long i = 0; i < n; ++i) acc.add(got[i], ref[i], 0.0, slot, int(i), 0);
  } else if (r == math_reference_b) {
    // The steps the stage ran (256, the most allowed, when the caller gives no parameters).
    const int iters = c.params ? decode_params<MathParams>(*c.params).iters : 256;
    const double step = fast ? MATH_B_STEP_FAST : MATH_B_STEP_PRECISE;
    const double lim = double(iters) * (step + 4.0 * FLT_MIN);
    for (long long i = 0; i < n; ++i) acc.add(got[i], ref[i], lim, slot, int(i), 0);
  } else if (r == math_reference_c) {
    const ImageView<const float> img = (*c.in)[1].view<const float>();
    const float* kps = (*c.in)[2].view<const float>().row(0);
    for (long long i = 0; i < n; ++i) {
      const float* kp = kps + (i / MATH_GROUP) * MATH_KP;
      const double th = double(kp[2]) * (M_PI / 180.0), ro = double(kp[4]);
      double qx, qy;
      math_patch_point<double>(kp, int(i % MATH_GROUP), std::cos(th), std::sin(th), std::cos(ro),
                               std::sin(ro), qx, qy);
      const double coord = fast || approx ? math_c_coord_fast(ro) : MATH_C_COORD_PRECISE;
      acc.add(got[i], ref[i], math_slope(img, qx, qy) * coord + MATH_C_VALUE, slot, int(i), 0);
    }
  } else {
    for (long long i = 0; i < n; ++i)
      acc.add(got[i], ref[i], std::abs(double(ref[i])) * MATH_D_REL + 64.0 * FLT_MIN, slot, int(i),
              0);
  }
  DiffStats d = acc.finish();
  // How many floats off, against the double reference rounded to float: the unit the lesson on
  // libm and the intrinsics speaks in.
  d.max_ulp = 0;
  for (long long i = 0; i < n; ++i) {
    const double u = ulps_off(got[i], ref[i]);
    if (std::isfinite(u)) d.max_ulp = std::max(d.max_ulp, u);
  }
  if (r == math_reference_c || r == math_reference_d) {
    d.has_cosine = true;
    double sum = 0;
    size_t groups = 0;
    for (long long g = 0; g < n; g += MATH_GROUP) {
      double gg = 0, rr = 0, gr = 0;
      for (long long i = g; i < std::min(n, g + MATH_GROUP); ++i)
        gg += double(got[i]) * got[i], rr += double(ref[i]) * ref[i], gr += double(got[i]) * ref[i];
      double cs = gg == 0 && rr == 0 ? 1.0 : (gg == 0 || rr == 0 ? 0.0 : gr / std::sqrt(gg * rr));
      if (!std::isfinite(cs)) cs = -1;
      d.cos_min = groups ? std::min(d.cos_min, cs) : cs;
      sum += cs, ++groups;
    }
    d.cos_mean = groups ? sum / double(groups) : 1.0;
  }
  return d;
}

}  // namespace lab::ops

namespace lab::ops::LAB_MATH_NS {

// ---- kernels ---------------------------------------------------------------------------------

// (a) The bare 0.5 makes y * 0.5 + c a double expression: F2F up, DFMA, F2F down, each step.
__global__ void math_v1_double_literal_kernel(const float* __restrict__ in, float* __restrict__ out,
                                              int n, int iters) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float y = in[i];
  const float c = in[i] * 0.25f;
  for (int k = 0; k < iters; ++k) y = y * 0.5 + c;  // the lesson: a double literal
  out[i] = y;
}

__global__ void math_v2_float_literal_kernel(const float* __restrict__ in, float* __restrict__ out,
                                             int n, int iters) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float y = in[i];
  const float c = in[i] * 0.25f;
  for (int k = 0; k < iters; ++k) y = y * 0.5f + c;  // one FFMA
  out[i] = y;
}

// (b) expf, sinf and '/' are the accurate library versions in the precise build; the fast build
// replaces them with v4's intrinsics.
__global__ void math_v3_libm_kernel(const float* __restrict__ in, float* __restrict__ out, int n,
                                    int iters) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float x = in[i];
  for (int k = 0; k < iters; ++k)
    x = fmaf(x, 0.75f, 0.25f * (expf(x - 1.0f) * sinf(2.0f * x) / (1.0f + 0.5f * x)));
  out[i] = x;
}

__global__ void math_v4_intrinsics_kernel(const float* __restrict__ in, float* __restrict__ out,
                                          int n, int iters) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float x = in[i];
  for (int k = 0; k < iters; ++k)
    x = fmaf(x, 0.75f, 0.25f * __fdividef(__expf(x - 1.0f) * __sinf(2.0f * x), 1.0f + 0.5f * x));
  out[i] = x;
}

// (c) One sample per thread: 64 consecutive threads share a keypoint (its five floats are one
// broadcast load per warp).
template <bool INTRINSICS>
__global__ void math_coords_kernel(ImageView<const float> img, const float* __restrict__ kps,
                                   float* __restrict__ out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float* kp = kps + (i / MATH_GROUP) * MATH_KP;
  float ca, sa, cr, sr;
  if (INTRINSICS) {
    __sincosf(kp[2] * MATH_DEG, &sa, &ca);
    __sincosf(kp[4], &sr, &cr);
  } else {  // __sincosf under --use_fast_math
    sincosf(kp[2] * MATH_DEG, &sa, &ca);
    sincosf(kp[4], &sr, &cr);
  }
  float qx, qy;
  math_patch_point<float>(kp, i % MATH_GROUP, ca, sa, cr, sr, qx, qy);
  out[i] = math_bilinear<float>(img, qx, qy);
}

// (d) Each thread sums the squares of its own group (64 loads, served by L1 after the first
// warp) and scales its element.
template <bool RSQRT>
__global__ void math_norm_kernel(const float* __restrict__ in, float* __restrict__ out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const int g = i - i % MATH_GROUP, e = min(n, g + MATH_GROUP);
  float ss = 0.0f;
  for (int k = g; k < e; ++k) ss = fmaf(in[k], in[k], ss);
  const float x = in[i];
  if (ss <= 0.0f)
    out[i] = 0.0f;
  else
    out[i] = RSQRT ? x * rsqrtf(ss) : x / sqrtf(ss);
}

// ---- launchers -------------------------------------------------------------------------------

static unsigned math_grid(int n, const Block& b) {
  return unsigned((n + b.x - 1) / b.x);
}

static void math_launch_iter(LaunchContext& ctx, const StageArgs& a, const char* name,
                             void (*kernel)(const float*, float*, int, int)) {
  const int n = int(array_len(a.in[0].desc));
  launch(ctx, name, kernel, dim3(math_grid(n, a.block)), dim3(a.block.x), 0,
         a.in[0].view<const float>().row(0), a.out[0].view<float>().row(0), n,
         decode_params<MathParams>(a.params).iters);
}

static void math_launch_v1(LaunchContext& ctx, const StageArgs& a) {
  math_launch_iter(ctx, a, "math_v1_double_literal", math_v1_double_literal_kernel);
}
static void math_launch_v2(LaunchContext& ctx, const StageArgs& a) {
  math_launch_iter(ctx, a, "math_v2_float_literal", math_v2_float_literal_kernel);
}
static void math_launch_v3(LaunchContext& ctx, const StageArgs& a) {
  math_launch_iter(ctx, a, "math_v3_libm", math_v3_libm_kernel);
}
static void math_launch_v4(LaunchContext& ctx, const StageArgs& a) {
  math_launch_iter(ctx, a, "math_v4_intrinsics", math_v4_intrinsics_kernel);
}

template <bool INTRINSICS>
static void math_launch_coords(LaunchContext& ctx, const StageArgs& a) {
  const int n = int(array_len(a.in[0].desc));
  launch(ctx, INTRINSICS ? "math_v6_coords_intrinsics" : "math_v5_coords_libm",
         math_coords_kernel<INTRINSICS>, dim3(math_grid(n, a.block)), dim3(a.block.x), 0,
         a.in[1].view<const float>(), a.in[2].view<const float>().row(0),
         a.out[0].view<float>().row(0), n);
}

template <bool RSQRT>
static void math_launch_norm(LaunchContext& ctx, const StageArgs& a) {
  const int n = int(array_len(a.in[0].desc));
  launch(ctx, RSQRT ? "math_v8_norm_rsqrt" : "math_v7_norm_div_sqrt", math_norm_kernel<RSQRT>,
         dim3(math_grid(n, a.block)), dim3(a.block.x), 0, a.in[0].view<const float>().row(0),
         a.out[0].view<float>().row(0), n);
}

// ---- variant table ---------------------------------------------------------------------------

OpDef math_op(const OpLookup&) {
  const std::vector<Block> blocks = {{64, 1}, {128, 1}, {256, 1}, {512, 1}, {1024, 1}};
  OpDef op;
  op.name = "math";
  op.summary =
      "double literals, intrinsics, fast-math coordinates, rsqrtf: what the math mode does";
  op.inputs = {"input", "math_image", "math_kp"};
  op.outputs = {"math"};
  op.params = param_specs<MathParams>();
  op.shape = math_shape;
  op.reference = math_reference_a;  // each variant names its own
  op.compare = math_compare;
  op.tol_precise = {0, 0};  // unused: math_compare computes each step's bound
  op.tol_fast = {0, 0};
  op.tol_why =
      "per step: (a) exact (the same float roundings; the double literal rounds to the same "
      "bits); (b) 256 x 3e-7 precise, 256 x 6e-7 fast against the double chain (per step: expf, "
      "sinf 2 ulp or __expf 4 ulp, __sinf 2^-21.41, division 0.5 or 2 ulp; the chain contracts, "
      "so errors add at most linearly); (c) the local slope x the coordinate error (precise: "
      "1e-3 px: roundings at 1280 px and sincosf's 2 ulp x 912 px; fast, and the approximate "
      "step: + 2 (2^-21 (1 + |roll|)) x 912 px for __sincosf) + 6e-7; (d) |ref| (gamma_64 / 2 + "
      "5 ulp) for sums of 64 squares, sqrt and division or rsqrtf, fast or not. Cosines per 64";
  op.lab_inputs = math_inputs;
  op.lab_fill = math_fill;
  op.lab_size_help =
      "N or 2^k: float elements (1 to 2^24), uniform in [-1, 1); also a 1280x960 image and one "
      "keypoint per 64 elements for (c)";
  op.lab_default_size = "2^18";
  op.story =
      "The same source compiled two ways (the math switch: precise, or --use_fast_math) and "
      "small edits in it change speed and accuracy. (a) A bare 0.5 is a double: y * 0.5 + c "
      "converts to FP64 and back every step; the FP64 units and, more, the conversions cost "
      "(FP64 is 1/2 the FP32 rate on an H200, 1/32 to 1/64 on Orin-class GPUs). (b) expf, sinf and "
      "'/' against __expf, __sinf "
      "and __fdividef: the intrinsics are one SFU instruction each and a few ulps off; the fast "
      "build makes that swap for you. (c) The fast build also turns sincosf into __sincosf, "
      "whose error grows with the angle: rotating keypoint patches by an unwrapped camera roll "
      "moves the sample points by hundredths of a pixel, and the descriptors past the precise "
      "bound (KERNEL-CRAFT: never fast-math coordinates). (d) Normalising by rsqrtf instead of "
      "1/sqrtf is harmless: a relative error of a few ulps in a scale factor. Compare each "
      "step in both math modes: time and max error.";
  // clang-format off
  op.variants = {
      {"v1_double_literal", "(a) y = y * 0.5 + c: the double literal promotes to FP64 every step",
       blocks, {256, 1}, math_launch_v1, nullptr},
      {"v2_float_literal", "(a) 0.5f: one FFMA per step, the same bits",
       blocks, {256, 1}, math_launch_v2, nullptr},
      {"v3_libm", "(b) expf, sinf, '/' (the fast build makes them v4's intrinsics)",
       blocks, {256, 1}, math_launch_v3, nullptr},
      {"v4_intrinsics", "(b) __expf, __sinf, __fdividef: one SFU op each, a few ulps off",
       blocks, {256, 1}, math_launch_v4, nullptr},
      {"v5_coords_libm", "(c) keypoint patches rotated by angle and roll with sincosf, bilinear",
       blocks, {256, 1}, math_launch_coords<false>, nullptr},
      {"v6_coords_intrinsics", "(c) the same with __sincosf, as --use_fast_math compiles v5",
       blocks, {256, 1}, math_launch_coords<true>, nullptr},
      {"v7_norm_div_sqrt", "(d) each 64-group divided by sqrtf of its sum of squares",
       blocks, {256, 1}, math_launch_norm<false>, nullptr},
      {"v8_norm_rsqrt", "(d) multiplied by rsqrtf instead: no division, one SFU op",
       blocks, {256, 1}, math_launch_norm<true>, nullptr},
  };
  // clang-format on
  const ReferenceFn refs[] = {math_reference_a, math_reference_a, math_reference_b,
                              math_reference_b, math_reference_c, math_reference_c,
                              math_reference_d, math_reference_d};
  for (size_t v = 0; v < op.variants.size(); ++v) op.variants[v].reference = refs[v];
  op.variants[5].approx =
      "__sincosf's error grows with |angle| (~2^-21 (1 + |a|)); x 912 px from the centre for the "
      "roll: held to the slope x that coordinate error, not to the precise 1e-3 px";
  // Measured on an H200 (a separate test kernel, 2^22 elements, 256 steps): FP64-literal 554
  // us against 47 for the float literal; expf/sinf/'/' 1790 us against 797 for the intrinsics.
  op.variants[0].expect =
      "Several times slower than v2 at many steps (an H200: ~10x, more than FP64's 1/2 rate: the "
      "F2F conversions are slow too); on Orin, whose FP64 is 1/32-1/64 rate, worse still. The same "
      "bits as v2. SASS: F2F.F64.F32, DFMA, F2F.F32.F64 in the loop.";
  op.variants[1].expect =
      "The baseline: one FFMA per step, compute-bound at many steps. Exact against the "
      "reference in both builds.";
  op.variants[2].expect =
      "Precise build: the slow one, ~2x v4 (range reduction and polynomials in FP32 code); "
      "error a few 1e-8 against the double chain. Fast build: as fast as v4, v4's error.";
  op.variants[3].expect =
      "About half of v3's precise time: ex2, sin and rcp on the SFU. Error several times v3's "
      "(still ~1e-7, well inside the fast bound); the same in both builds.";
  op.variants[4].expect =
      "Precise build: within its 1e-3 px bound, cosine 1.000000. Fast build: the sample points "
      "move by up to ~1e-2 px where the roll is large; max error several times the precise "
      "one, cosine still > 0.9999 (the fast bound holds).";
  op.variants[5].expect =
      "Like v5 in the fast build in both: max error well past the precise bound (the warning, "
      "made visible), cosine ~0.99999; the same time as v5 fast: the sincos is per sample but "
      "the loads dominate.";
  op.variants[6].expect =
      "Memory-light, load-bound (64 L1 loads per element); error a few ulps relative, cosine "
      "1.000000, in both builds.";
  op.variants[7].expect =
      "Within the same bound as v7, in both builds, cosine 1.000000; about v7's time (the "
      "loads dominate): rsqrtf is the harmless kind of fast math.";
  op.default_variant = "v1_double_literal";
  return op;
}

}  // namespace lab::ops::LAB_MATH_NS
