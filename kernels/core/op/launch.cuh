// The one launch helper every op uses. Device-compiled code only (it contains <<<>>>).
#pragma once

#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "device.h"
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

// launch() for a kernel that synchronises its whole grid (cooperative_groups::this_grid().sync()):
// cudaLaunchCooperativeKernel, which refuses a grid whose blocks cannot all be resident at once
// instead of letting the barrier deadlock. The caller sizes the grid from the occupancy.
template <typename... P, typename... A>
void launch_cooperative(LaunchContext& ctx, const char* name, void (*kernel)(P...), dim3 grid,
                        dim3 block, size_t smem, A&&... args) {
  std::tuple<P...> values(std::forward<A>(args)...);  // the kernel's own parameter types
  void* argv[sizeof...(P)];
  std::apply(
      [&](auto&... v) {
        int i = 0;
        ((argv[i++] = static_cast<void*>(&v)), ...);
      },
      values);
  ctx.before_launch(reinterpret_cast<const void*>(kernel), name, grid, block, smem);
  LAB_CUDA_CHECK(cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(kernel), grid, block,
                                             argv, smem, ctx.stream()));
  ctx.after_launch();
}

// launch() for a kernel that may start before the previous kernel in the stream has finished:
// cudaLaunchKernelEx with programmatic stream serialization on devices of compute capability 9.0
// and up (elsewhere a plain launch). It starts once every block of the previous kernel has
// issued griddepcontrol.launch_dependents or exited, so it must not read what that kernel writes
// before a griddepcontrol.wait (device_util.cuh). Inside a graph capture the edge between the two
// kernel nodes becomes a programmatic one; with an event recorded between the launches (each
// launch timed apart) it starts after the previous kernel, as a plain launch does.
// `cooperative`: launch_cooperative's guarantee too (every block resident at once).
template <typename... P, typename... A>
void launch_programmatic_as(bool cooperative, LaunchContext& ctx, const char* name,
                            void (*kernel)(P...), dim3 grid, dim3 block, size_t smem, A&&... args) {
  cudaLaunchAttribute attr[2] = {};
  unsigned n = 0;
  if (cooperative) attr[n].id = cudaLaunchAttributeCooperative, attr[n++].val.cooperative = 1;
  if (device_info().major >= 9) {
    attr[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[n++].val.programmaticStreamSerializationAllowed = 1;
  }
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid, cfg.blockDim = block, cfg.dynamicSmemBytes = smem;
  cfg.attrs = attr, cfg.numAttrs = n;
  ctx.before_launch(reinterpret_cast<const void*>(kernel), name, grid, block, smem);
  cfg.stream = ctx.stream();
  LAB_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, std::forward<A>(args)...));
  ctx.after_launch();
}
template <typename... P, typename... A>
void launch_programmatic(LaunchContext& ctx, const char* name, void (*kernel)(P...), dim3 grid,
                         dim3 block, size_t smem, A&&... args) {
  launch_programmatic_as(false, ctx, name, kernel, grid, block, smem, std::forward<A>(args)...);
}

// A library call (CUB) that launches kernels of its own on the stage's stream: timed as one
// record between an event pair, without occupancy (its kernels and shapes are CUB's).
template <typename F>
void library_call(LaunchContext& ctx, const char* name, F&& call) {
  ctx.before_launch(nullptr, name, dim3(1), dim3(1), 0);
  LAB_CUDA_CHECK(call());
  ctx.after_launch();
}

// A kernel whose block shape is a template parameter (static shared tiles, unrolled loops) exists
// only for the shapes instantiated. BlockInstances names them once: the variant's allowed blocks
// (blocks()) and the launcher's dispatch (dispatch()) both come from that one list, so they
// cannot drift. Each instance is `B<X, Y>`; the launch functor is called with
// std::integral_constant<int, X> and <int, Y> (a generic lambda reads them as constants):
//   using Tiles = BlockInstances<B<32, 8>, B<16, 16>>;
//   Tiles::dispatch(a.block, "blur v3_smem_tile",
//                   [&](auto x, auto y) { launch_tile<x.value, y.value>(ctx, a); });
template <int X, int Y>
struct B {};

template <class... Bs>
struct BlockInstances;

template <int... X, int... Y>
struct BlockInstances<B<X, Y>...> {
  static std::vector<Block> blocks() { return {Block{X, Y}...}; }

  template <class F>
  static void dispatch(Block b, const char* what, F&& launch_instance) {
    const bool found = ((b == Block{X, Y} ? (launch_instance(std::integral_constant<int, X>{},
                                                             std::integral_constant<int, Y>{}),
                                             true)
                                          : false) ||
                        ...);
    if (found) return;
    std::string list;
    for (const Block& i : blocks()) list += (list.empty() ? "" : ", ") + i.str();
    throw Error(ErrorKind::Usage,
                std::string(what) + ": no instantiation for block " + b.str() + " (" + list + ")");
  }
};

// A kernel's name with its template shape: "blur_v3_smem_tile<32,8>". Records keep a pointer
// to the name, so a launcher stores it in a function-local static of its own (one per instance).
inline std::string instance_name(const char* base, int x, int y) {
  return std::string(base) + "<" + std::to_string(x) + "," + std::to_string(y) + ">";
}

// Grid covering a w x h image with `block`; grids overshoot, kernels bounds-check.
inline dim3 grid_2d(int w, int h, Block block) {
  return dim3(unsigned((w + block.x - 1) / block.x), unsigned((h + block.y - 1) / block.y));
}

}  // namespace lab
