// The letterbox's conversion to gray: the geometry, the one gray expression, and the device
// helpers that turn source bytes into exact floats. Only nvcc compiles it (host code below uses
// the standard library).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "image_view.h"
#include "op.h"

namespace lab::ops {

constexpr float LETTERBOX_PAD = 114.0f / 255.0f;
constexpr float INV_255 = 1.0f / 255.0f;

struct LetterboxGeometry {
  int rw, rh;  // size of the resized image
  int ox, oy;  // where it sits in the output
};

// round() is half-to-even (std::nearbyint), as numpy's and OpenCV's cvRound.
inline LetterboxGeometry letterbox_geometry(int w, int h, int wt, int ht) {
  const double s = std::min(double(wt) / w, double(ht) / h);
  const int rw = std::clamp(int(std::nearbyint(w * s)), 1, wt);
  const int rh = std::clamp(int(std::nearbyint(h * s)), 1, ht);
  return {rw, rh, (wt - rw) / 2, (ht - rh) / 2};
}

// The gray of a BGR pixel whose bytes are exact floats: the one expression every path uses, so
// that they all round (and contract) alike.
LAB_HD float gray_bgr(float b, float g, float r) {
  return (0.114f * b + 0.587f * g + 0.299f * r) * INV_255;
}

LAB_HD float gray_of(const uint8_t* p, int channels) {
  if (channels == 1) return float(p[0]) * INV_255;
  return gray_bgr(float(p[0]), float(p[1]), float(p[2]));
}

}  // namespace lab::ops

namespace lab::ops::LAB_MATH_NS {

// Byte to float without the conversion unit: 2^23 + b has b in its low mantissa bits, so one OR
// and one full-rate subtraction give exactly float(b). I2F runs at a quarter of the FMA rate;
// with 12 conversions per output pixel it, not memory, bounded v2 at 4K.
__device__ __forceinline__ float u8_to_float(uint32_t b) {
  return __int_as_float(0x4B000000u | b) - 8388608.0f;
}

template <int C>
__device__ __forceinline__ float ldg_gray(const ImageView<const uint8_t>& src, int x, int y) {
  const uint8_t* p = src.row(y) + x * C;
  if (C == 1) return u8_to_float(__ldg(p)) * INV_255;
  return gray_bgr(u8_to_float(__ldg(p)), u8_to_float(__ldg(p + 1)), u8_to_float(__ldg(p + 2)));
}

// Bytes o..o+7 of a row as two words (byte 0 = row[o]), from three aligned 32-bit loads through
// the read-only cache (LDG). Device rows carry at least 16 bytes of initialised padding
// (DeviceImage), so the words past the last pixel stay inside the allocation.
__device__ __forceinline__ uint2 load_8_bytes(const uint8_t* row, int o) {
  const auto* w = reinterpret_cast<const uint32_t*>(row + (o & ~3));
  const uint32_t w0 = __ldg(w), w1 = __ldg(w + 1), w2 = __ldg(w + 2);
  const int shift = 8 * (o & 3);
  return {__funnelshift_r(w0, w1, shift), __funnelshift_r(w1, w2, shift)};
}

// Byte K of the 8 as an exact float: PRMT builds the bits 0x4B0000bb, FADD removes 2^23.
template <int K>
__device__ __forceinline__ float byte_as_float(uint2 b) {
  return __int_as_float(__byte_perm(K < 4 ? b.x : b.y, 0x4B000000u, 0x7440 | (K & 3))) - 8388608.0f;
}

// Gray of the pixel whose first byte is byte K.
template <int C, int K>
__device__ __forceinline__ float gray_at(uint2 b) {
  if (C == 1) return byte_as_float<K>(b) * INV_255;
  return gray_bgr(byte_as_float<K>(b), byte_as_float<K + 1>(b), byte_as_float<K + 2>(b));
}

}  // namespace lab::ops::LAB_MATH_NS
