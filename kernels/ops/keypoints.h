// The keypoint list shared by topk, sample and l2norm (host-safe).
//
// The `keypoints` slot is one row of K float triples (x, y, score): K x 1, 3 channels, so that a
// kernel reads keypoint i at one address and the row is contiguous. The first N rows hold the
// keypoints found (N <= K); the rest hold the pad row (-1, -1, 0), which sample and l2norm turn
// into zero vectors. `patches` and `descriptors` are K rows of 64 floats, row i for keypoint i.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "common.h"
#include "keypoint_slots.h"

namespace lab::ops {

constexpr int kDescriptorSize = 64;  // 8 x 8 samples
constexpr float kPadCoord = -1.0f;

inline ImageDesc keypoints_desc(int k) {
  return {k, 1, 3, PixelType::F32};
}
inline ImageDesc rows64_desc(int k) {
  return {kDescriptorSize, k, 1, PixelType::F32};
}

// Checks a keypoint list's shape; returns K.
inline int require_keypoints(const char* op, const ImageDesc& d) {
  if (d.type != PixelType::F32 || d.channels != 3 || d.height != 1 || d.width < 1)
    throw Error(ErrorKind::Data,
                std::string(op) + ": keypoints must be K x 1 float triples, got " + d.str());
  return d.width;
}

LAB_HD bool is_pad(float x) {
  return x < 0.0f;
}

// Rounded products and sums with no fused multiply-add, on the device and on the host alike,
// so that the CPU reference of bilinear sampling is bit-identical to the kernel's.
#if defined(__CUDA_ARCH__)
__device__ __forceinline__ float mul_rn(float a, float b) {
  return __fmul_rn(a, b);
}
__device__ __forceinline__ float add_rn(float a, float b) {
  return __fadd_rn(a, b);
}
#else
inline float mul_rn(float a, float b) {
  volatile float p = a * b;  // volatile: the compiler may not fuse it into an FMA
  return p;
}
inline float add_rn(float a, float b) {
  return a + b;
}
#endif

// Bilinear sample at (sx, sy) with pixel centres at integer coordinates (align_corners=False
// convention), the coordinates clamped to the image.
LAB_HD float bilinear_clamped(ImageView<const float> img, float sx, float sy) {
  sx = fminf(fmaxf(sx, 0.0f), float(img.width - 1));
  sy = fminf(fmaxf(sy, 0.0f), float(img.height - 1));
  const int x0 = int(floorf(sx)), y0 = int(floorf(sy));
  const int x1 = x0 + 1 < img.width ? x0 + 1 : x0, y1 = y0 + 1 < img.height ? y0 + 1 : y0;
  const float fx = sx - float(x0), fy = sy - float(y0);  // exact (Sterbenz)
  const float a = img.at(x0, y0), b = img.at(x1, y0), c = img.at(x0, y1), d = img.at(x1, y1);
  const float top = add_rn(a, mul_rn(fx, b - a)), bot = add_rn(c, mul_rn(fx, d - c));
  return add_rn(top, mul_rn(fy, bot - top));
}

// Sample t (0..63) of the 8 x 8 grid around (x, y): i = t % 8 inner, j = t / 8 outer, at
// (x + 2 (i - 3.5), y + 2 (j - 3.5)).
LAB_HD float patch_sample(ImageView<const float> img, float x, float y, int t) {
  const int i = t & 7, j = t >> 3;
  return bilinear_clamped(img, x + float(2 * i - 7), y + float(2 * j - 7));
}

// Float bits made monotonic as unsigned integers (negative floats reversed), so that a radix
// sort or a histogram of the bits orders scores.
LAB_HD uint32_t score_order(float s) {
#if defined(__CUDA_ARCH__)
  const uint32_t b = __float_as_uint(s);
#else
  uint32_t b;
  std::memcpy(&b, &s, 4);
#endif
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

LAB_HD float score_of_order(uint32_t o) {
  const uint32_t b = (o & 0x80000000u) ? (o & 0x7FFFFFFFu) : ~o;
#if defined(__CUDA_ARCH__)
  return __uint_as_float(b);
#else
  float s;
  std::memcpy(&s, &b, 4);
  return s;
#endif
}

// The top-K order as one 64-bit key: score descending, then linear index y * W + x ascending.
// Distinct for distinct pixels, never 0 for a non-zero score (0 marks "no keypoint").
LAB_HD uint64_t topk_key(float score, uint32_t index) {
  return (uint64_t(score_order(score)) << 32) | uint64_t(0xFFFFFFFFu - index);
}
LAB_HD uint32_t topk_key_index(uint64_t key) {
  return 0xFFFFFFFFu - uint32_t(key & 0xFFFFFFFFu);
}
LAB_HD float topk_key_score(uint64_t key) {
  return score_of_order(uint32_t(key >> 32));
}

// The histogram variant's bins: the top 12 bits of the ordered score (sign, exponent and three
// mantissa bits: a bin spans a factor of 2^(1/8) of positive scores).
constexpr int kTopkBins = 4096;
LAB_HD uint32_t topk_bin(float score) {
  return score_order(score) >> 20;
}

}  // namespace lab::ops
