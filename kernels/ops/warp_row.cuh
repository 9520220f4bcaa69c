// Horizontal windows through warp shuffles: a warp spanning 32 consecutive x of one row reads
// the taps x-R..x+R of every lane with two loads per lane (its own pixel and one halo pixel)
// instead of 2R+1, and exchanges the rest in registers. Border replicate is kept: every index is
// clamped, so lanes past the right edge hold the edge pixel and must still take part (no early
// return before the shuffles). Needs blockDim.x to be a multiple of 32.
#pragma once

#include "device_util.cuh"

namespace lab::ops {

// One lane's share of a row: its own pixel and its halo pixel. Loading every row of a strip
// first, then exchanging, keeps all the loads in flight together.
struct WarpRowLoad {
  float c, h;
};

template <int R>
__device__ __forceinline__ WarpRowLoad warp_row_load(const float* row, int x, int width) {
  const int lane = threadIdx.x & 31;
  // Lanes 0..15 fetch x - R, lanes 16..31 fetch x + R: the edges' halo.
  return {__ldg(row + clampi(x, 0, width - 1)),
          __ldg(row + clampi(x + (lane < 16 ? -R : R), 0, width - 1))};
}

template <int R>
__device__ __forceinline__ void warp_row_taps(WarpRowLoad l, float (&t)[2 * R + 1]) {
  static_assert(R >= 1 && R <= 8, "the halo of a lane must come from the same half-warp");
  constexpr unsigned FULL = 0xffffffffu;
  const int lane = threadIdx.x & 31;
  t[R] = l.c;
#pragma unroll
  for (int d = 1; d <= R; ++d) {
    const float up = __shfl_up_sync(FULL, l.c, d);
    const float left_halo = __shfl_sync(FULL, l.h, lane + R - d);  // lane j < 16 holds x_j - R
    t[R - d] = lane >= d ? up : left_halo;
    const float down = __shfl_down_sync(FULL, l.c, d);
    const float right_halo = __shfl_sync(FULL, l.h, lane + d - R);  // lane j >= 16 holds x_j + R
    t[R + d] = lane <= 31 - d ? down : right_halo;
  }
}

}  // namespace lab::ops
