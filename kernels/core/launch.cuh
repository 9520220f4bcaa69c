// The one launch helper every op uses. Device-compiled code only (it contains <<<>>>).
#pragma once

#include <utility>

#include "device_util.cuh"
#include "op.h"

namespace lab {

// Launches `kernel` on the stage's stream between before_launch / after_launch: the runner
// validates the block against the kernel's attributes, times it with an event pair, checks
// cudaGetLastError() and records grid, block and shared memory for the occupancy report.
template <typename... P, typename... A>
void launch(LaunchContext& ctx, const char* name, void (*kernel)(P...), dim3 grid, dim3 block,
            size_t smem, A&&... args) {
  ctx.before_launch(reinterpret_cast<const void*>(kernel), name, grid, block, smem);
  kernel<<<grid, block, smem, ctx.stream()>>>(std::forward<A>(args)...);
  ctx.after_launch();
}

// A library call (CUB) that launches kernels of its own on the stage's stream: timed as one
// record between an event pair, without occupancy (its kernels and shapes are CUB's).
template <typename F>
void library_call(LaunchContext& ctx, const char* name, F&& call) {
  ctx.before_launch(nullptr, name, dim3(1), dim3(1), 0);
  LAB_CUDA_CHECK(call());
  ctx.after_launch();
}

// Grid covering a w x h image with `block`; grids overshoot, kernels bounds-check.
inline dim3 grid_2d(int w, int h, Block block) {
  return dim3(unsigned((w + block.x - 1) / block.x), unsigned((h + block.y - 1) / block.y));
}

}  // namespace lab
