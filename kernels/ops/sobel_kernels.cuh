// sobel's device code: the helpers and kernels of kernels/ops/sobel.cu, in a header that nvcc
// and NVRTC both compile, so that "edit a copy" in the live-kernel editor starts from exactly the
// kernel that ships (no standard library here; LAB_MATH_NS is precise, fast, or live).
#pragma once

#include "device_util.cuh"
#include "front.cuh"  // sobel_row_* and sobel_col_* (v4's; nms v5 computes with them too)
#include "image_view.h"

namespace lab::ops {

// a[r][c]: the 3x3 window, r and c in 0..2 for offsets -1..1.
LAB_HD float sobel_gx(const float a[3][3]) {
  const float d0 = a[0][2] - a[0][0], d1 = a[1][2] - a[1][0], d2 = a[2][2] - a[2][0];
  return d0 + 2.0f * d1 + d2;
}
LAB_HD float sobel_gy(const float a[3][3]) {
  const float s0 = a[0][0] + 2.0f * a[0][1] + a[0][2];
  const float s2 = a[2][0] + 2.0f * a[2][1] + a[2][2];
  return s2 - s0;
}

}  // namespace lab::ops

namespace lab::ops::LAB_MATH_NS {

__device__ __forceinline__ void load_window(const ImageView<const float>& src, int x, int y,
                                            float w[3][3]) {
#pragma unroll
  for (int r = 0; r < 3; ++r) {
    const float* row = src.row(clampi(y + r - 1, 0, src.height - 1));
#pragma unroll
    for (int c = 0; c < 3; ++c) w[r][c] = __ldg(row + clampi(x + c - 1, 0, src.width - 1));
  }
}

template <bool DX>
__global__ void sobel_v1_unfused_kernel(ImageView<const float> src, ImageView<float> dst) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x;
  const int y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= src.width || y >= src.height) return;
  float w[3][3];
  load_window(src, x, y, w);
  dst.at(x, y) = DX ? sobel_gx(w) : sobel_gy(w);
}

__global__ void sobel_v2_fused_ldg_kernel(ImageView<const float> src, ImageView<float> gx,
                                          ImageView<float> gy) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x;
  const int y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= src.width || y >= src.height) return;
  float w[3][3];
  load_window(src, x, y, w);
  gx.at(x, y) = sobel_gx(w);
  gy.at(x, y) = sobel_gy(w);
}

template <int BX, int BY>
__global__ void __launch_bounds__(BX* BY)
    sobel_v3_smem_tile_kernel(ImageView<const float> src, ImageView<float> gx,
                              ImageView<float> gy) {
  constexpr int TW = BX + 2, TH = BY + 2;
  __shared__ float tile[TH][TW];
  const int x0 = blockIdx.x * BX - 1, y0 = blockIdx.y * BY - 1;
  load_tile_clamped<TW, BX * BY>(tile, src, x0, y0, threadIdx.y * BX + threadIdx.x);
  __syncthreads();
  const int x = blockIdx.x * BX + threadIdx.x, y = blockIdx.y * BY + threadIdx.y;
  if (x >= src.width || y >= src.height) return;
  float w[3][3];
#pragma unroll
  for (int r = 0; r < 3; ++r)
#pragma unroll
    for (int c = 0; c < 3; ++c) w[r][c] = tile[threadIdx.y + r][threadIdx.x + c];
  gx.at(x, y) = sobel_gx(w);
  gy.at(x, y) = sobel_gy(w);
}

template <int SOBEL_ROWS>
__global__ void sobel_v4_rows_kernel(ImageView<const float> src, ImageView<float> gx,
                                     ImageView<float> gy) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x;
  const int y0 = (blockIdx.y * blockDim.y + threadIdx.y) * SOBEL_ROWS;
  if (x >= src.width || y0 >= src.height) return;
  const int xl = clampi(x - 1, 0, src.width - 1), xr = clampi(x + 1, 0, src.width - 1);
  float d[SOBEL_ROWS + 2], s[SOBEL_ROWS + 2];  // the row filters [-1 0 1] and [1 2 1]
#pragma unroll
  for (int r = 0; r < SOBEL_ROWS + 2; ++r) {
    const float* row = src.row(clampi(y0 + r - 1, 0, src.height - 1));
    const float a = __ldg(row + xl), b = __ldg(row + x), c = __ldg(row + xr);
    d[r] = sobel_row_d(a, c);
    s[r] = sobel_row_s(a, b, c);
  }
#pragma unroll
  for (int r = 0; r < SOBEL_ROWS; ++r) {
    if (y0 + r >= src.height) break;
    gx.at(x, y0 + r) = sobel_col_gx(d[r], d[r + 1], d[r + 2]);
    gy.at(x, y0 + r) = sobel_col_gy(s[r], s[r + 2]);
  }
}

}  // namespace lab::ops::LAB_MATH_NS
