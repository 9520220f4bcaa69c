// The letterbox's conversion to gray: the geometry, the resize's tap tables, the one gray
// expression, and the device helpers that turn source bytes into exact floats and lerp them
// (letterbox.cu, and detect's front that reads the frame). Only nvcc compiles it (host code below
// uses the standard library).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "image_view.h"
#include "launch.cuh"
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

// One output column (or row) of a bilinear resize: two source indices and the weight of i1.
struct AxisTap {
  int i0, i1;
  float frac;
};

// OpenCV's resize tap computation for INTER_LINEAR: double coordinate rounded to float, the
// fraction taken in float, clamped to the edge pixel (fraction 0) outside the image.
inline std::vector<AxisTap> resize_taps(int src_n, int dst_n) {
  const double scale = 1.0 / (double(dst_n) / src_n);
  std::vector<AxisTap> taps(dst_n);
  for (int d = 0; d < dst_n; ++d) {
    const float f = float((d + 0.5) * scale - 0.5);
    int i0 = int(std::floor(f));
    float frac = f - float(i0);
    if (i0 < 0) i0 = 0, frac = 0.0f;
    if (i0 >= src_n - 1) i0 = src_n - 1, frac = 0.0f;
    taps[d] = {i0, std::min(i0 + 1, src_n - 1), frac};
  }
  return taps;
}

// The tap tables depend only on the sizes: uploaded once per size, kept by the stage.
inline const AxisTap* device_taps(LaunchContext& ctx, int w, int h, const LetterboxGeometry& g) {
  const uint64_t key = (uint64_t(w) << 48) ^ (uint64_t(h) << 32) ^ (uint64_t(g.rw) << 16) ^
                       uint64_t(g.rh) ^ (uint64_t(g.ox) << 40) ^ (uint64_t(g.oy) << 24);
  return static_cast<const AxisTap*>(
      ctx.persistent(sizeof(AxisTap) * size_t(g.rw + g.rh), key, [&](void* taps) {
        std::vector<AxisTap> host = resize_taps(w, g.rw);
        const auto yt = resize_taps(h, g.rh);
        host.insert(host.end(), yt.begin(), yt.end());
        LAB_CUDA_CHECK(cudaMemcpyAsync(taps, host.data(), sizeof(AxisTap) * host.size(),
                                       cudaMemcpyHostToDevice, ctx.stream()));
        LAB_CUDA_CHECK(cudaStreamSynchronize(ctx.stream()));  // `host` dies here; once per size
      }));
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

// The horizontal lerp between the pixel at byte o of a row and the next. When i1 == i0 (the
// right edge) the weight of the second pixel is exactly 0, so reading the next (padding) pixel
// is harmless.
template <int C>
__device__ __forceinline__ float row_lerp(const uint8_t* row, int o, float frac) {
  const uint2 b = load_8_bytes(row, o);
  return gray_at<C, 0>(b) * (1.0f - frac) + gray_at<C, C>(b) * frac;
}

}  // namespace lab::ops::LAB_MATH_NS
