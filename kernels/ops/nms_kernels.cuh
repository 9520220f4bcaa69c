// nms's device code: the helpers and kernels of kernels/ops/nms.cu, in a header that nvcc
// and NVRTC both compile, so that "edit a copy" in the live-kernel editor starts from exactly the
// kernel that ships (no standard library here; LAB_MATH_NS is precise, fast, or live).
#pragma once

#include "device_util.cuh"
#include "front.cuh"  // nms_keep and max5 (v3's)
#include "image_view.h"

#if defined(__CUDACC_RTC__)
#define FLT_MAX 3.402823466e+38F  // NVRTC has no <cfloat>
#else
#include <cfloat>
#endif

namespace lab::ops::LAB_MATH_NS {

__global__ void nms_v1_ldg_kernel(ImageView<const float> r, ImageView<float> dst, float thr) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x;
  const int y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= dst.width || y >= dst.height) return;
  float m = -FLT_MAX;
#pragma unroll
  for (int dy = -2; dy <= 2; ++dy) {
    const float* row = r.row(clampi(y + dy, 0, dst.height - 1));
#pragma unroll
    for (int dx = -2; dx <= 2; ++dx) m = fmaxf(m, __ldg(row + clampi(x + dx, 0, dst.width - 1)));
  }
  dst.at(x, y) = nms_keep(__ldg(&r.at(x, y)), m, thr);
}

template <int BX, int BY>
__global__ void __launch_bounds__(BX* BY)
    nms_v2_smem_tile_kernel(ImageView<const float> r, ImageView<float> dst, float thr) {
  constexpr int TW = BX + 4, TH = BY + 4;
  __shared__ float tile[TH][TW + 1];  // +1: column reads of the second pass avoid bank conflicts
  __shared__ float rowmax[TH][BX + 1];
  const int x0 = blockIdx.x * BX - 2, y0 = blockIdx.y * BY - 2;
  const int tid = threadIdx.y * BX + threadIdx.x;
  load_tile_clamped<TW, BX * BY>(tile, r, x0, y0, tid);  // r is dst's size
  __syncthreads();
  for (int i = tid; i < TH * BX; i += BX * BY) {
    const int ty = i / BX, tx = i - ty * BX;
    const float* t = &tile[ty][tx];
    rowmax[ty][tx] = fmaxf(fmaxf(fmaxf(t[0], t[1]), fmaxf(t[2], t[3])), t[4]);
  }
  __syncthreads();
  const int x = blockIdx.x * BX + threadIdx.x, y = blockIdx.y * BY + threadIdx.y;
  if (x >= dst.width || y >= dst.height) return;
  float m = rowmax[threadIdx.y][threadIdx.x];
#pragma unroll
  for (int k = 1; k < 5; ++k) m = fmaxf(m, rowmax[threadIdx.y + k][threadIdx.x]);
  dst.at(x, y) = nms_keep(tile[threadIdx.y + 2][threadIdx.x + 2], m, thr);
}

// v3 and v4: a column strip of NMS_ROWS outputs per thread. FUSED multiplies by the second map
// when it is given (s.data != nullptr).
template <int NMS_ROWS, bool FUSED>
__global__ void nms_rows_kernel(ImageView<const float> r, ImageView<const float> s,
                                ImageView<float> dst, float thr) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x;
  const int y0 = (blockIdx.y * blockDim.y + threadIdx.y) * NMS_ROWS;
  if (x >= dst.width || y0 >= dst.height) return;
  int xs[5];
#pragma unroll
  for (int d = 0; d < 5; ++d) xs[d] = clampi(x + d - 2, 0, dst.width - 1);
  constexpr int N = NMS_ROWS + 4;
  float rm[N], centre[N];
#pragma unroll
  for (int k = 0; k < N; ++k) {
    const float* row = r.row(clampi(y0 + k - 2, 0, dst.height - 1));
    float v[5];
#pragma unroll
    for (int d = 0; d < 5; ++d) v[d] = __ldg(row + xs[d]);
    centre[k] = v[2];
    rm[k] = max5(v[0], v[1], v[2], v[3], v[4]);
  }
#pragma unroll
  for (int k = 0; k < NMS_ROWS; ++k) {
    const int y = y0 + k;
    if (y >= dst.height) break;
    const float m = max5(rm[k], rm[k + 1], rm[k + 2], rm[k + 3], rm[k + 4]);
    float out = nms_keep(centre[k + 2], m, thr);
    if (FUSED && s.data) out *= __ldg(&s.at(x, y));
    dst.at(x, y) = out;
  }
}

}  // namespace lab::ops::LAB_MATH_NS
