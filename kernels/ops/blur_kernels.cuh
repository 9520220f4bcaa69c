// blur's device code: the constants and kernels of kernels/ops/blur.cu, in a header that nvcc
// and NVRTC both compile, so that "edit a copy" in the live-kernel editor starts from exactly the
// kernel that ships (no standard library here; LAB_MATH_NS is precise, fast, or live).
#pragma once

#include "device_util.cuh"
#include "front.cuh"  // BLUR_R, gauss5 and gauss5_dot (v5/v6's passes; nms v5 computes with it too)
#include "image_view.h"
#include "warp_row.cuh"

namespace lab::ops::LAB_MATH_NS {

__global__ void blur_v1_naive_2d_kernel(ImageView<const float> src, ImageView<float> dst) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x;
  const int y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= dst.width || y >= dst.height) return;
  float s = 0.0f;
#pragma unroll
  for (int j = -BLUR_R; j <= BLUR_R; ++j) {
    const float* r = src.row(clampi(y + j, 0, src.height - 1));
    float h = 0.0f;
#pragma unroll
    for (int i = -BLUR_R; i <= BLUR_R; ++i)
      h += gauss5(i + BLUR_R) * r[clampi(x + i, 0, src.width - 1)];
    s += gauss5(j + BLUR_R) * h;
  }
  dst.at(x, y) = s;
}

__global__ void blur_v2_rows_kernel(ImageView<const float> src, ImageView<float> tmp) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x;
  const int y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= src.width || y >= src.height) return;
  const float* r = src.row(y);
  float s = 0.0f;
#pragma unroll
  for (int i = -BLUR_R; i <= BLUR_R; ++i)
    s += gauss5(i + BLUR_R) * r[clampi(x + i, 0, src.width - 1)];
  tmp.at(x, y) = s;
}

__global__ void blur_v2_cols_kernel(ImageView<const float> tmp, ImageView<float> dst) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x;
  const int y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= dst.width || y >= dst.height) return;
  float s = 0.0f;
#pragma unroll
  for (int j = -BLUR_R; j <= BLUR_R; ++j)
    s += gauss5(j + BLUR_R) * tmp.at(x, clampi(y + j, 0, dst.height - 1));
  dst.at(x, y) = s;
}

// Tile of (BY + 4) x (BX + 4) inputs; the row pass leaves (BY + 4) x BX in `rows`.
template <int BX, int BY>
__global__ void __launch_bounds__(BX* BY)
    blur_v3_smem_tile_kernel(ImageView<const float> src, ImageView<float> dst) {
  constexpr int TW = BX + 2 * BLUR_R, TH = BY + 2 * BLUR_R;
  __shared__ float tile[TH][TW + 1];  // +1: column reads of the next pass avoid bank conflicts
  __shared__ float rows[TH][BX];
  const int x0 = blockIdx.x * BX - BLUR_R, y0 = blockIdx.y * BY - BLUR_R;
  const int tid = threadIdx.y * BX + threadIdx.x;
  // No early return before the barriers: every thread must reach __syncthreads().
  load_tile_clamped<TW, BX * BY>(tile, src, x0, y0, tid);
  __syncthreads();
  for (int i = tid; i < TH * BX; i += BX * BY) {
    const int ty = i / BX, tx = i - ty * BX;
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k <= 2 * BLUR_R; ++k) s += gauss5(k) * tile[ty][tx + k];
    rows[ty][tx] = s;
  }
  __syncthreads();
  const int x = blockIdx.x * BX + threadIdx.x, y = blockIdx.y * BY + threadIdx.y;
  if (x >= dst.width || y >= dst.height) return;
  float s = 0.0f;
#pragma unroll
  for (int k = 0; k <= 2 * BLUR_R; ++k) s += gauss5(k) * rows[threadIdx.y + k][threadIdx.x];
  dst.at(x, y) = s;
}

template <int BLUR_ROWS>
__global__ void blur_v4_rows_kernel(ImageView<const float> src, ImageView<float> dst) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x;
  const int y0 = (blockIdx.y * blockDim.y + threadIdx.y) * BLUR_ROWS;
  if (x >= dst.width || y0 >= dst.height) return;
  int xs[5];
#pragma unroll
  for (int i = 0; i < 5; ++i) xs[i] = clampi(x + i - BLUR_R, 0, src.width - 1);
  float h[BLUR_ROWS + 2 * BLUR_R];
#pragma unroll
  for (int r = 0; r < BLUR_ROWS + 2 * BLUR_R; ++r) {
    const float* row = src.row(clampi(y0 + r - BLUR_R, 0, src.height - 1));
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < 5; ++i) s += gauss5(i) * __ldg(row + xs[i]);
    h[r] = s;
  }
#pragma unroll
  for (int r = 0; r < BLUR_ROWS; ++r) {
    if (y0 + r >= dst.height) break;
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < 5; ++k) s += gauss5(k) * h[r + k];
    dst.at(x, y0 + r) = s;
  }
}

template <int BLUR_ROWS>
__global__ void blur_v5_rows_shfl_kernel(ImageView<const float> src, ImageView<float> dst) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x;
  const int y0 = (blockIdx.y * blockDim.y + threadIdx.y) * BLUR_ROWS;
  if (y0 >= dst.height) return;  // uniform across the warp (blockDim.x % 32 == 0)
  constexpr int N = BLUR_ROWS + 2 * BLUR_R;
  WarpRowLoad in[N];  // every load of the strip issued before the first is used
#pragma unroll
  for (int r = 0; r < N; ++r)
    in[r] =
        warp_row_load<BLUR_R>(src.row(clampi(y0 + r - BLUR_R, 0, src.height - 1)), x, src.width);
  float h[N];
#pragma unroll
  for (int r = 0; r < N; ++r) {
    float t[2 * BLUR_R + 1];
    warp_row_taps<BLUR_R>(in[r], t);
    h[r] = gauss5_dot(t[0], t[1], t[2], t[3], t[4]);
  }
  if (x >= dst.width) return;
#pragma unroll
  for (int r = 0; r < BLUR_ROWS; ++r) {
    if (y0 + r >= dst.height) break;
    dst.at(x, y0 + r) = gauss5_dot(h[r], h[r + 1], h[r + 2], h[r + 3], h[r + 4]);
  }
}

template <int ROWS>
__global__ void blur_v7_float4_kernel(ImageView<const float> src, ImageView<float> dst) {
  constexpr unsigned FULL = 0xffffffffu;
  const int lane = threadIdx.x & 31;
  const int x = 4 * (blockIdx.x * blockDim.x + threadIdx.x);
  const int y0 = (blockIdx.y * blockDim.y + threadIdx.y) * ROWS;
  if (y0 >= dst.height) return;  // uniform across the warp (blockDim.x % 32 == 0)
  const int w = src.width;
  const int warp_x = x - 4 * lane;  // the warp covers [warp_x, warp_x + 128)
  const bool interior = warp_x >= BLUR_R && warp_x + 128 + BLUR_R <= w;  // uniform
  constexpr int N = ROWS + 2 * BLUR_R;
  // Column sums accumulate as rows arrive: output o takes g(k) * row (o + k), so only the five
  // outputs a row touches are live (20 registers, not 4 * N).
  float4 acc[ROWS];
#pragma unroll
  for (int o = 0; o < ROWS; ++o) acc[o] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
  for (int r = 0; r < N; ++r) {
    const float* row = src.row(clampi(y0 + r - BLUR_R, 0, src.height - 1));
    float v[8];  // x-2 .. x+5
    if (interior) {
      const float4 c = __ldg(reinterpret_cast<const float4*>(row + x));
      float2 halo = make_float2(0.0f, 0.0f);  // lane 0: x-2, x-1; lane 31: x+4, x+5
      if (lane == 0) halo = __ldg(reinterpret_cast<const float2*>(row + x - 2));
      if (lane == 31) halo = __ldg(reinterpret_cast<const float2*>(row + x + 4));
      const float lz = __shfl_up_sync(FULL, c.z, 1), lw = __shfl_up_sync(FULL, c.w, 1);
      const float rx = __shfl_down_sync(FULL, c.x, 1), ry = __shfl_down_sync(FULL, c.y, 1);
      v[0] = lane == 0 ? halo.x : lz;
      v[1] = lane == 0 ? halo.y : lw;
      v[2] = c.x, v[3] = c.y, v[4] = c.z, v[5] = c.w;
      v[6] = lane == 31 ? halo.x : rx;
      v[7] = lane == 31 ? halo.y : ry;
    } else {
#pragma unroll
      for (int i = 0; i < 8; ++i) v[i] = __ldg(row + clampi(x - BLUR_R + i, 0, w - 1));
    }
    float hr[4];  // the row pass, 4 outputs wide
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      float s = 0.0f;
#pragma unroll
      for (int i = 0; i < 5; ++i) s += gauss5(i) * v[k + i];
      hr[k] = s;
    }
#pragma unroll
    for (int k = 0; k < 5; ++k) {  // row r is tap k of output r - k
      const int o = r - k;
      if (o < 0 || o >= ROWS) continue;
      const float g = gauss5(k);
      acc[o].x += g * hr[0], acc[o].y += g * hr[1], acc[o].z += g * hr[2], acc[o].w += g * hr[3];
    }
    const int done = r - 2 * BLUR_R;  // the output whose last tap was this row
    if (done >= 0 && x < w && y0 + done < dst.height) {
      float* out = dst.row(y0 + done) + x;
      const float4 s = acc[done];
      if (x + 3 < w) {
        *reinterpret_cast<float4*>(out) = s;
      } else {  // the last, partial vector of the row
        out[0] = s.x;
        if (x + 1 < w) out[1] = s.y;
        if (x + 2 < w) out[2] = s.z;
      }
    }
  }
}

}  // namespace lab::ops::LAB_MATH_NS
