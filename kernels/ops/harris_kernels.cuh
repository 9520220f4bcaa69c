// harris's device code: the constants and kernels of kernels/ops/harris.cu, in a header that nvcc
// and NVRTC both compile, so that "edit a copy" in the live-kernel editor starts from exactly the
// kernel that ships (no standard library here; LAB_MATH_NS is precise, fast, or live).
#pragma once

#include "device_util.cuh"
// harris_response, and harris_add_tap and harris_from_rows (v3's; nms v5 computes with them too)
#include "front.cuh"
#include "image_view.h"
#include "warp_row.cuh"

namespace lab::ops::LAB_MATH_NS {

__global__ void harris_v1_direct_kernel(ImageView<const float> gx, ImageView<const float> gy,
                                        ImageView<float> dst, float k) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x;
  const int y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= dst.width || y >= dst.height) return;
  float a = 0.0f, b = 0.0f, c = 0.0f;
#pragma unroll
  for (int r = -1; r <= 1; ++r) {
    const int yy = clampi(y + r, 0, dst.height - 1);
    const float* rx = gx.row(yy);
    const float* ry = gy.row(yy);
    float ra = 0.0f, rb = 0.0f, rc = 0.0f;  // row sums first, as the box filter
#pragma unroll
    for (int d = -1; d <= 1; ++d) {
      const int xx = clampi(x + d, 0, dst.width - 1);
      const float dx = __ldg(rx + xx), dy = __ldg(ry + xx);
      ra += dx * dx, rb += dx * dy, rc += dy * dy;
    }
    a += ra, b += rb, c += rc;
  }
  dst.at(x, y) = harris_response(a, b, c, k);
}

template <int BX, int BY>
__global__ void __launch_bounds__(BX* BY)
    harris_v2_smem_products_kernel(ImageView<const float> gx, ImageView<const float> gy,
                                   ImageView<float> dst, float k) {
  constexpr int TW = BX + 2, TH = BY + 2;
  __shared__ float prod[3][TH][TW];
  __shared__ float rows[3][TH][BX];
  const int x0 = blockIdx.x * BX - 1, y0 = blockIdx.y * BY - 1;
  const int tid = threadIdx.y * BX + threadIdx.x;
  for (int i = tid; i < TW * TH; i += BX * BY) {
    const int ty = i / TW, tx = i - ty * TW;
    const int xx = clampi(x0 + tx, 0, dst.width - 1), yy = clampi(y0 + ty, 0, dst.height - 1);
    const float dx = __ldg(&gx.at(xx, yy)), dy = __ldg(&gy.at(xx, yy));
    prod[0][ty][tx] = dx * dx;
    prod[1][ty][tx] = dx * dy;
    prod[2][ty][tx] = dy * dy;
  }
  __syncthreads();
  for (int i = tid; i < TH * BX; i += BX * BY) {
    const int ty = i / BX, tx = i - ty * BX;
#pragma unroll
    for (int q = 0; q < 3; ++q)
      rows[q][ty][tx] = prod[q][ty][tx] + prod[q][ty][tx + 1] + prod[q][ty][tx + 2];
  }
  __syncthreads();
  const int x = blockIdx.x * BX + threadIdx.x, y = blockIdx.y * BY + threadIdx.y;
  if (x >= dst.width || y >= dst.height) return;
  float m[3];
#pragma unroll
  for (int q = 0; q < 3; ++q)
    m[q] = rows[q][threadIdx.y][threadIdx.x] + rows[q][threadIdx.y + 1][threadIdx.x] +
           rows[q][threadIdx.y + 2][threadIdx.x];
  dst.at(x, y) = harris_response(m[0], m[1], m[2], k);
}

template <int HARRIS_ROWS>
__global__ void harris_v3_rows_kernel(ImageView<const float> gx, ImageView<const float> gy,
                                      ImageView<float> dst, float k) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x;
  const int y0 = (blockIdx.y * blockDim.y + threadIdx.y) * HARRIS_ROWS;
  if (x >= dst.width || y0 >= dst.height) return;
  const int xs[3] = {clampi(x - 1, 0, dst.width - 1), x, clampi(x + 1, 0, dst.width - 1)};
  float ra[HARRIS_ROWS + 2], rb[HARRIS_ROWS + 2], rc[HARRIS_ROWS + 2];
#pragma unroll
  for (int r = 0; r < HARRIS_ROWS + 2; ++r) {
    const int yy = clampi(y0 + r - 1, 0, dst.height - 1);
    const float* px = gx.row(yy);
    const float* py = gy.row(yy);
    float a = 0.0f, b = 0.0f, c = 0.0f;
#pragma unroll
    for (int i = 0; i < 3; ++i) harris_add_tap(__ldg(px + xs[i]), __ldg(py + xs[i]), a, b, c);
    ra[r] = a, rb[r] = b, rc[r] = c;
  }
#pragma unroll
  for (int r = 0; r < HARRIS_ROWS; ++r) {
    if (y0 + r >= dst.height) break;
    dst.at(x, y0 + r) = harris_from_rows(ra[r], ra[r + 1], ra[r + 2], rb[r], rb[r + 1], rb[r + 2],
                                         rc[r], rc[r + 1], rc[r + 2], k);
  }
}

template <int HARRIS_ROWS>
__global__ void harris_v4_rows_shfl_kernel(ImageView<const float> gx, ImageView<const float> gy,
                                           ImageView<float> dst, float k) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x;
  const int y0 = (blockIdx.y * blockDim.y + threadIdx.y) * HARRIS_ROWS;
  if (y0 >= dst.height) return;  // uniform across the warp (blockDim.x % 32 == 0)
  constexpr int N = HARRIS_ROWS + 2;
  WarpRowLoad lx[N], ly[N];  // every load of the strip issued before the first is used
#pragma unroll
  for (int r = 0; r < N; ++r) {
    const int yy = clampi(y0 + r - 1, 0, dst.height - 1);
    lx[r] = warp_row_load<1>(gx.row(yy), x, dst.width);
    ly[r] = warp_row_load<1>(gy.row(yy), x, dst.width);
  }
  float ra[N], rb[N], rc[N];
#pragma unroll
  for (int r = 0; r < N; ++r) {
    float tx[3], ty[3];
    warp_row_taps<1>(lx[r], tx);
    warp_row_taps<1>(ly[r], ty);
    float a = 0.0f, b = 0.0f, c = 0.0f;
#pragma unroll
    for (int i = 0; i < 3; ++i) a += tx[i] * tx[i], b += tx[i] * ty[i], c += ty[i] * ty[i];
    ra[r] = a, rb[r] = b, rc[r] = c;
  }
  if (x >= dst.width) return;
#pragma unroll
  for (int r = 0; r < HARRIS_ROWS; ++r) {
    if (y0 + r >= dst.height) break;
    dst.at(x, y0 + r) =
        harris_response(ra[r] + ra[r + 1] + ra[r + 2], rb[r] + rb[r + 1] + rb[r + 2],
                        rc[r] + rc[r + 1] + rc[r + 2], k);
  }
}

}  // namespace lab::ops::LAB_MATH_NS
