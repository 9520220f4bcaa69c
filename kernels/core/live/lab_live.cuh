// The live kernel's world (NVRTC pre-includes this before the user's source).
//
// A live kernel has one fixed signature:
//
//   __global__ void user_kernel(Inputs in, Outputs out, Params p)
//
//   in[i]   the stage's i-th input slot, a float plane (ImageIn = lab::ImageView<const float>:
//           .width, .height, .pitch in bytes, .row(y), .at(x, y))
//   out[i]  the stage's i-th output slot (ImageOut = lab::ImageView<float>)
//   p.v[i]  the stage's i-th parameter, in the order `kernel-lab list` shows (harris: p.v[0] = k)
//
// One thread block is LAB_BLOCK_X x LAB_BLOCK_Y threads (compile-time constants, set from the
// editor's block). The grid covers out[0] with LAB_PX x LAB_ROWS outputs per thread:
// gridDim = ceil(width / (LAB_BLOCK_X * LAB_PX)) x ceil(height / (LAB_BLOCK_Y * LAB_ROWS)).
// Every output pixel must be written (outputs are poisoned with NaN before a check).
//
// Helpers below: global coordinates, bounds, border-replicate and __ldg reads, and bilinear
// sampling with the lab's align_corners=False convention (letterbox, sample).
#pragma once

#include "device_util.cuh"
#include "image_view.h"

#ifndef LAB_BLOCK_X
#define LAB_BLOCK_X 32
#endif
#ifndef LAB_BLOCK_Y
#define LAB_BLOCK_Y 8
#endif
#ifndef LAB_PX
#define LAB_PX 1
#endif
#ifndef LAB_ROWS
#define LAB_ROWS 1
#endif

using ImageIn = lab::ImageView<const float>;
using ImageOut = lab::ImageView<float>;

struct Inputs {
  ImageIn img[4];
  int count;
  __device__ const ImageIn& operator[](int i) const { return img[i]; }
};

struct Outputs {
  ImageOut img[4];
  int count;
  __device__ const ImageOut& operator[](int i) const { return img[i]; }
};

struct Params {
  float v[8];
  int count;
};

// This thread's first output pixel.
__device__ __forceinline__ int lab_x() {
  return (blockIdx.x * blockDim.x + threadIdx.x) * LAB_PX;
}
__device__ __forceinline__ int lab_y() {
  return (blockIdx.y * blockDim.y + threadIdx.y) * LAB_ROWS;
}

__device__ __forceinline__ bool inside(const ImageOut& img, int x, int y) {
  return x >= 0 && y >= 0 && x < img.width && y < img.height;
}
__device__ __forceinline__ bool inside(const ImageIn& img, int x, int y) {
  return x >= 0 && y >= 0 && x < img.width && y < img.height;
}

// A read through the read-only data cache.
__device__ __forceinline__ float ldg(const ImageIn& img, int x, int y) {
  return __ldg(&img.at(x, y));
}

// Border replicate: coordinates clamped into the image (as the built-in filters and OpenCV's
// BORDER_REPLICATE).
__device__ __forceinline__ float clamped(const ImageIn& img, int x, int y) {
  return __ldg(&img.at(lab::clampi(x, 0, img.width - 1), lab::clampi(y, 0, img.height - 1)));
}

// Bilinear sample at continuous source coordinates (sx, sy), pixel centres at integers, border
// replicate. For a resize from `in` to `out` with align_corners=False, the source coordinate of
// output pixel x is (x + 0.5) * in.width / out.width - 0.5 (what letterbox and sample use).
__device__ __forceinline__ float bilinear(const ImageIn& img, float sx, float sy) {
  const float fx = floorf(sx), fy = floorf(sy);
  const int x0 = int(fx), y0 = int(fy);
  const float ax = sx - fx, ay = sy - fy;
  const float a = clamped(img, x0, y0), b = clamped(img, x0 + 1, y0);
  const float c = clamped(img, x0, y0 + 1), d = clamped(img, x0 + 1, y0 + 1);
  const float top = a + (b - a) * ax, bottom = c + (d - c) * ax;
  return top + (bottom - top) * ay;
}
__device__ __forceinline__ float source_coord(int x, int in_size, int out_size) {
  return (float(x) + 0.5f) * float(in_size) / float(out_size) - 0.5f;
}
