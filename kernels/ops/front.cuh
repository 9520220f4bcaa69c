// The dense front's shared arithmetic: the expressions the default kernels of blur (v6), sobel
// (v4), harris (v3) and nms (v3) compute with, in one header that those kernels' headers and
// the fused front (front_kernels.cuh) all include. Each is one expression in one order, so that
// every kernel built from them rounds alike: the same products, the same fused multiply-adds, in
// the same order. nvcc and NVRTC both compile it (no standard library; LAB_MATH_NS is precise,
// fast, or live).
#pragma once

#include "device_util.cuh"
#include "image_view.h"

namespace lab::ops {

constexpr int BLUR_R = 2;

// getGaussianKernel(5, 1.0): exp(-(i-2)^2 / 2) normalised, in double, rounded to float.
LAB_HD constexpr float gauss5(int i) {
  return i == 2               ? 0.40261995792388916f
         : (i == 1 || i == 3) ? 0.24420134723186493f
                              : 0.054488684982061386f;
}

LAB_HD float harris_response(float a, float b, float c, float k) {
  return a * c - b * b - k * (a + c) * (a + c);
}

}  // namespace lab::ops

namespace lab::ops::LAB_MATH_NS {

// blur: the 5-tap Gaussian of t0..t4, summed in tap order from 0 (a row pass over x-2..x+2, a
// column pass over y-2..y+2).
__device__ __forceinline__ float gauss5_dot(float t0, float t1, float t2, float t3, float t4) {
  float s = 0.0f;
  s += gauss5(0) * t0;
  s += gauss5(1) * t1;
  s += gauss5(2) * t2;
  s += gauss5(3) * t3;
  s += gauss5(4) * t4;
  return s;
}

// sobel, separably (sobel_gx and sobel_gy split into rows and columns): the row filters
// [-1 0 1] and [1 2 1] of a row's taps a, b, c (x-1, x, x+1), then the column filters of three
// rows' results (y-1, y, y+1).
__device__ __forceinline__ float sobel_row_d(float a, float c) {
  return c - a;
}
__device__ __forceinline__ float sobel_row_s(float a, float b, float c) {
  return a + 2.0f * b + c;
}
__device__ __forceinline__ float sobel_col_gx(float d0, float d1, float d2) {
  return d0 + 2.0f * d1 + d2;
}
__device__ __forceinline__ float sobel_col_gy(float s0, float s2) {
  return s2 - s0;
}

// harris: one tap of a row's product sums (the taps x-1, x, x+1 are added in that order onto
// zeros), and the response from three rows of those sums (y-1, y, y+1, added in that order).
__device__ __forceinline__ void harris_add_tap(float dx, float dy, float& a, float& b, float& c) {
  a += dx * dx, b += dx * dy, c += dy * dy;
}
__device__ __forceinline__ float harris_from_rows(float a0, float a1, float a2, float b0, float b1,
                                                  float b2, float c0, float c1, float c2, float k) {
  return harris_response(a0 + a1 + a2, b0 + b1 + b2, c0 + c1 + c2, k);
}

// nms: the keep rule, and the maximum of five values in one pairing (exact in any order).
__device__ __forceinline__ float nms_keep(float v, float m, float thr) {
  return v > thr && v >= m ? v : 0.0f;
}
__device__ __forceinline__ float max5(float a, float b, float c, float d, float e) {
  return fmaxf(fmaxf(fmaxf(a, b), fmaxf(c, d)), e);
}

}  // namespace lab::ops::LAB_MATH_NS
