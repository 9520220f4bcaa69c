// sobel: the 3x3 Sobel derivatives of `blur` into `grad_x` and `grad_y`, unscaled, border
// replicate: gx = [-1 0 1; -2 0 2; -1 0 1] * I, gy = its transpose * I (OpenCV's
// Sobel(CV_32F, ksize 3, BORDER_REPLICATE), computed in its separable order: the row filter,
// then the column filter).
//
// Variants:
//   v1_unfused     one kernel per derivative: two launches, the input read twice.
//   v2_fused_ldg   both derivatives from one 3x3 window read through __ldg (the read-only cache
//                  serves the neighbours' overlap): one read, two writes, one launch.
//   v3_smem_tile   the tile plus a 1-pixel apron staged in shared memory, then both derivatives.
//   v4_rows        each thread walks 8 rows of one column: 10 rows of 3 taps, loaded up front,
//                  give 16 outputs; many independent loads in flight per thread.
//   v5_rows16      v4 with 16 rows per thread: 2 halo rows per 16 instead of per 8 (ncu on v4 at
//                  4K: L2 85%, DRAM 57%: the halo re-reads load the L2).
//
// Bench: kernel-lab bench --stage sobel --sweep-variants --size 3840x2160
#include <vector>

#include "common.h"
#include "launch.cuh"
#include "sobel_kernels.cuh"

namespace lab::ops {

struct SobelParams {
  template <class V>
  void visit(V&) {}
};

inline std::vector<ImageDesc> sobel_shape(const std::vector<ImageDesc>& in, const ParamMap&) {
  const ImageDesc d = require_f32_plane("sobel", in[0]);
  return {d, d};
}

inline void sobel_reference(const StageArgs& a) {
  const auto src = a.in[0].view<const float>();
  const auto gx = a.out[0].view<float>(), gy = a.out[1].view<float>();
  for (int y = 0; y < src.height; ++y)
    for (int x = 0; x < src.width; ++x) {
      float w[3][3];
      for (int r = 0; r < 3; ++r)
        for (int c = 0; c < 3; ++c)
          w[r][c] = src.at(clamp_idx(x + c - 1, src.width), clamp_idx(y + r - 1, src.height));
      gx.at(x, y) = sobel_gx(w);
      gy.at(x, y) = sobel_gy(w);
    }
}

}  // namespace lab::ops

namespace lab::ops::LAB_MATH_NS {

// ---- launchers -------------------------------------------------------------------------------

static void launch_v1(LaunchContext& ctx, const StageArgs& a) {
  const auto src = a.in[0].view<const float>();
  const dim3 grid = grid_2d(src.width, src.height, a.block), block(a.block.x, a.block.y);
  launch(ctx, "sobel_v1_dx", sobel_v1_unfused_kernel<true>, grid, block, 0, src,
         a.out[0].view<float>());
  launch(ctx, "sobel_v1_dy", sobel_v1_unfused_kernel<false>, grid, block, 0, src,
         a.out[1].view<float>());
}

static void launch_v2(LaunchContext& ctx, const StageArgs& a) {
  const auto src = a.in[0].view<const float>();
  launch(ctx, "sobel_v2_fused_ldg", sobel_v2_fused_ldg_kernel,
         grid_2d(src.width, src.height, a.block), dim3(a.block.x, a.block.y), 0, src,
         a.out[0].view<float>(), a.out[1].view<float>());
}

template <int BX, int BY>
static void launch_v3_tile(LaunchContext& ctx, const StageArgs& a) {
  static const std::string name = instance_name("sobel_v3_smem_tile", BX, BY);
  const auto src = a.in[0].view<const float>();
  launch(ctx, name.c_str(), sobel_v3_smem_tile_kernel<BX, BY>,
         grid_2d(src.width, src.height, {BX, BY}), dim3(BX, BY), 0, src, a.out[0].view<float>(),
         a.out[1].view<float>());
}

// The tile shape is a template parameter: these instances are the variant's allowed blocks.
using Tiles = BlockInstances<B<32, 8>, B<32, 4>, B<16, 16>, B<64, 4>, B<32, 16>>;
static void launch_v3(LaunchContext& ctx, const StageArgs& a) {
  Tiles::dispatch(a.block, "sobel v3_smem_tile", [&](auto x, auto y) {
    launch_v3_tile<decltype(x)::value, decltype(y)::value>(ctx, a);
  });
}

template <int SOBEL_ROWS>
static void launch_v4_rows(LaunchContext& ctx, const StageArgs& a, const char* name) {
  const auto src = a.in[0].view<const float>();
  launch(ctx, name, sobel_v4_rows_kernel<SOBEL_ROWS>,
         grid_2d(src.width, (src.height + SOBEL_ROWS - 1) / SOBEL_ROWS, a.block),
         dim3(a.block.x, a.block.y), 0, src, a.out[0].view<float>(), a.out[1].view<float>());
}

static size_t v3_smem(Block b) {
  return sizeof(float) * size_t(b.x + 2) * size_t(b.y + 2);
}

static void launch_v4(LaunchContext& c, const StageArgs& a) {
  launch_v4_rows<8>(c, a, "sobel_v4_rows");
}
static void launch_v5(LaunchContext& c, const StageArgs& a) {
  launch_v4_rows<16>(c, a, "sobel_v5_rows16");
}

// ---- variant table ---------------------------------------------------------------------------

OpDef sobel_op(const OpLookup&) {
  const std::vector<Block> any = {{32, 8},  {32, 4},  {16, 16}, {64, 4},
                                  {32, 16}, {128, 2}, {32, 32}};
  // 16-row strips use 64 registers on sm_90: exactly the limit of a 1024-thread block, and any
  // other build may need one more. Those shapes stop at 512.
  const std::vector<Block> upto_512 = {{32, 8}, {32, 4}, {16, 16}, {64, 4}, {32, 16}, {128, 2}};
  OpDef op;
  op.name = "sobel";
  op.summary = "3x3 Sobel derivatives of blur, unscaled, border replicate";
  op.inputs = {"blur"};
  op.outputs = {"grad_x", "grad_y"};
  op.params = param_specs<SobelParams>();
  op.shape = sobel_shape;
  op.reference = sobel_reference;
  // Sums of 6 terms of magnitude <= 2 max|x|: at most ~8 roundings of values <= 4 max|x|.
  // The bound scales with the input, not the output (smooth regions cancel), so it is
  // expressed on the input range: inputs are in [0,1] in this pipeline.
  op.tol_precise = {4e-6, 0};
  op.tol_fast = {4e-6, 0};
  op.tol_why =
      "6-term sums of inputs in [0,1]: <= ~8 roundings of values <= 4 (1e-6); same order as the "
      "reference, FMA contraction aside; fast math only flushes denormals";
  // clang-format off
  op.default_variant = "v4_rows";  // fastest at 1280x736 and at 4K (BENCHMARKS.md)
  op.variants = {
      {"v1_unfused", "one kernel per derivative: two launches, the input read twice",
       any, {32, 8}, launch_v1, nullptr},
      {"v2_fused_ldg", "one 3x3 window through __ldg feeds both outputs: one read, two writes",
       any, {32, 8}, launch_v2, nullptr},
      {"v3_smem_tile", "tile + 1px apron staged in shared memory, then both derivatives",
       Tiles::blocks(), {32, 8}, launch_v3, v3_smem},
      {"v4_rows", "8 rows per thread: 30 loads in flight feed 16 outputs",
       any, {128, 2}, launch_v4, nullptr},
      {"v5_rows16", "v4 with 16 rows per thread: halo re-reads from L2 drop from 1.25x to 1.125x",
       upto_512, {32, 4}, launch_v5, nullptr},
  };
  // clang-format on
  // v1 is two launches (one per gradient): no single-kernel copy.
  const std::string args = "(in[0], out[0], out[1])";
  set_live_copy(op, "v2_fused_ldg", "sobel_v2_fused_ldg_kernel" + args);
  set_live_copy(op, "v3_smem_tile", "sobel_v3_smem_tile_kernel<LAB_BLOCK_X, LAB_BLOCK_Y>" + args, 1,
                1, true);
  set_live_copy(op, "v4_rows", "sobel_v4_rows_kernel<8>" + args, 1, 8);
  set_live_copy(op, "v5_rows16", "sobel_v4_rows_kernel<16>" + args, 1, 16);
  return op;
}

}  // namespace lab::ops::LAB_MATH_NS
