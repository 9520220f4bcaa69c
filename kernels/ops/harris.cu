// harris: the Harris corner response from grad_x and grad_y.
//
//   M = sum over the 3x3 window (border replicate) of [gx^2, gx gy; gx gy, gy^2]
//   R = det(M) - k trace(M)^2 = a c - b^2 - k (a + c)^2
// The window sums are the unnormalised 3x3 box filter of the products, rows then columns, as
// OpenCV's boxFilter(normalize=false, BORDER_REPLICATE) computes them.
//
// Variants:
//   v1_direct        each thread reads its 3x3 windows of gx and gy through __ldg and forms the
//                    products itself: 18 loads and 27 multiplies per pixel, no shared memory.
//   v2_smem_products the block stages gx and gy with a 1-pixel apron, forms each product once
//                    per tile pixel in shared memory, then box-sums rows and columns there.
//   v3_rows          each thread walks 8 rows of one column: the row sums of 10 rows, loaded
//                    up front (60 independent loads), feed 8 responses.
//   v4_rows_shfl     v3 with the x-1 and x+1 taps exchanged by warp shuffles: 40 loads instead
//                    of 60.
//   v5_rows16        v3 with 16 rows per thread: 2 halo rows per 16 instead of per 8 (ncu on v3
//                    at 4K: L2 83%, DRAM 56%).
//
// Bench: kernel-lab bench --stage harris --sweep-variants --size 3840x2160
#include <vector>

#include "common.h"
#include "launch.cuh"
#include "harris_kernels.cuh"
#include "warp_row.cuh"

namespace lab::ops {

struct HarrisParams {
  float k = 0.04f;
  template <class V>
  void visit(V& v) {
    v("k", k, 0.0, 0.25, "Harris sensitivity k in R = det(M) - k trace(M)^2");
  }
};

inline std::vector<ImageDesc> harris_shape(const std::vector<ImageDesc>& in, const ParamMap&) {
  const ImageDesc d = require_f32_plane("harris", in[0]);
  if (in[1] != d)
    throw Error(ErrorKind::Data,
                "harris: grad_x and grad_y differ: " + d.str() + " vs " + in[1].str());
  return {d};
}

inline void harris_reference(const StageArgs& args) {
  const auto gx = args.in[0].view<const float>(), gy = args.in[1].view<const float>();
  const auto dst = args.out[0].view<float>();
  const float k = decode_params<HarrisParams>(args.params).k;
  const int w = gx.width, h = gx.height;
  // Products, then the row sums of the box filter, then the column sums.
  std::vector<float> p[3], rs[3];
  for (auto& v : p) v.resize(size_t(w) * h);
  for (auto& v : rs) v.resize(size_t(w) * h);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      const float dx = gx.at(x, y), dy = gy.at(x, y);
      const size_t i = size_t(y) * w + x;
      p[0][i] = dx * dx, p[1][i] = dx * dy, p[2][i] = dy * dy;
    }
  for (int q = 0; q < 3; ++q)
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w; ++x) {
        const float* r = &p[q][size_t(y) * w];
        rs[q][size_t(y) * w + x] = r[clamp_idx(x - 1, w)] + r[x] + r[clamp_idx(x + 1, w)];
      }
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      float m[3];
      for (int q = 0; q < 3; ++q)
        m[q] = rs[q][size_t(clamp_idx(y - 1, h)) * w + x] + rs[q][size_t(y) * w + x] +
               rs[q][size_t(clamp_idx(y + 1, h)) * w + x];
      dst.at(x, y) = harris_response(m[0], m[1], m[2], k);
    }
}

}  // namespace lab::ops

namespace lab::ops::LAB_MATH_NS {

// ---- launchers -------------------------------------------------------------------------------

static void launch_v1(LaunchContext& ctx, const StageArgs& a) {
  const auto dst = a.out[0].view<float>();
  launch(ctx, "harris_v1_direct", harris_v1_direct_kernel, grid_2d(dst.width, dst.height, a.block),
         dim3(a.block.x, a.block.y), 0, a.in[0].view<const float>(), a.in[1].view<const float>(),
         dst, decode_params<HarrisParams>(a.params).k);
}

template <int BX, int BY>
static void launch_v2_tile(LaunchContext& ctx, const StageArgs& a) {
  static const std::string name = instance_name("harris_v2_smem_products", BX, BY);
  const auto dst = a.out[0].view<float>();
  launch(ctx, name.c_str(), harris_v2_smem_products_kernel<BX, BY>,
         grid_2d(dst.width, dst.height, {BX, BY}), dim3(BX, BY), 0, a.in[0].view<const float>(),
         a.in[1].view<const float>(), dst, decode_params<HarrisParams>(a.params).k);
}

// The tile shape is a template parameter: these instances are the variant's allowed blocks.
using Tiles = BlockInstances<B<32, 8>, B<32, 4>, B<16, 16>, B<64, 4>, B<32, 16>>;
static void launch_v2(LaunchContext& ctx, const StageArgs& a) {
  Tiles::dispatch(a.block, "harris v2_smem_products", [&](auto x, auto y) {
    launch_v2_tile<decltype(x)::value, decltype(y)::value>(ctx, a);
  });
}

using RowsKernel = void (*)(ImageView<const float>, ImageView<const float>, ImageView<float>,
                            float);

static void launch_rows(LaunchContext& ctx, const StageArgs& a, int rows, RowsKernel kernel,
                        const char* name) {
  const auto dst = a.out[0].view<float>();
  launch(ctx, name, kernel, grid_2d(dst.width, (dst.height + rows - 1) / rows, a.block),
         dim3(a.block.x, a.block.y), 0, a.in[0].view<const float>(), a.in[1].view<const float>(),
         dst, decode_params<HarrisParams>(a.params).k);
}

static void launch_v3(LaunchContext& c, const StageArgs& a) {
  launch_rows(c, a, 8, harris_v3_rows_kernel<8>, "harris_v3_rows");
}
static void launch_v4(LaunchContext& c, const StageArgs& a) {
  launch_rows(c, a, 8, harris_v4_rows_shfl_kernel<8>, "harris_v4_rows_shfl");
}
static void launch_v5(LaunchContext& c, const StageArgs& a) {
  launch_rows(c, a, 16, harris_v3_rows_kernel<16>, "harris_v5_rows16");
}

static size_t v2_smem(Block b) {
  return sizeof(float) * 3 * (size_t(b.y + 2) * (b.x + 2) + size_t(b.y + 2) * b.x);
}

// ---- variant table ---------------------------------------------------------------------------

OpDef harris_op(const OpLookup&) {
  const std::vector<Block> any = {{32, 8},  {32, 4},  {16, 16}, {64, 4},
                                  {32, 16}, {128, 2}, {32, 32}};
  // 16-row strips use ~72 registers: a 1024-thread block would need more than the 64 K a block
  // can have, so those shapes stop at 512.
  const std::vector<Block> upto_512 = {{32, 8}, {32, 4}, {16, 16}, {64, 4}, {32, 16}, {128, 2}};
  OpDef op;
  op.name = "harris";
  op.summary = "Harris response det(M) - k trace(M)^2 over 3x3 windows of gradient products";
  op.inputs = {"grad_x", "grad_y"};
  op.outputs = {"harris"};
  op.params = param_specs<HarrisParams>();
  op.shape = harris_shape;
  op.reference = harris_reference;
  // a c and b^2 (each up to (9 max g^2)^2) are rounded before they cancel; the error is a few
  // ulp of those products, which max|R| bounds from below on any image with corners. The spec
  // states the bound relative to max|R|.
  op.tol_precise = kHarrisTolerance;  // {1e-12, 1e-5}
  op.tol_fast = kHarrisTolerance;
  op.tol_why =
      "det and trace^2 cancel: error of a few ulp of a*c, reported relative to max|R| (the "
      "spec's 1e-5); fast math only flushes denormals";
  // clang-format off
  // Fastest at 4K; v5 is 5 % faster at 1280x736 but 9 % slower at 4K (BENCHMARKS.md, "harris").
  op.default_variant = "v3_rows";
  op.variants = {
      {"v1_direct", "3x3 windows of gx and gy through __ldg, products formed per tap",
       any, {32, 8}, launch_v1, nullptr},
      {"v2_smem_products", "gx, gy staged once; each product formed once per tile pixel in smem",
       Tiles::blocks(), {32, 8}, launch_v2, v2_smem},
      {"v3_rows", "8 rows per thread: 60 loads in flight feed 8 responses",
       any, {64, 4}, launch_v3, nullptr},
      {"v4_rows_shfl", "v3 + warp shuffles for the x-1, x+1 taps: 40 loads instead of 60",
       warp_rows_blocks(), {32, 4}, launch_v4, nullptr},
      {"v5_rows16", "v3 with 16 rows per thread: halo re-reads from L2 drop from 1.25x to 1.125x",
       upto_512, {64, 4}, launch_v5, nullptr},
  };
  // clang-format on
  const std::string args = "(in[0], in[1], out[0], p.v[0])";  // p.v[0]: k
  set_live_copy(op, "v1_direct", "harris_v1_direct_kernel" + args);
  set_live_copy(op, "v2_smem_products",
                "harris_v2_smem_products_kernel<LAB_BLOCK_X, LAB_BLOCK_Y>" + args, 1, 1, true);
  set_live_copy(op, "v3_rows", "harris_v3_rows_kernel<8>" + args, 1, 8);
  set_live_copy(op, "v4_rows_shfl", "harris_v4_rows_shfl_kernel<8>" + args, 1, 8);
  set_live_copy(op, "v5_rows16", "harris_v3_rows_kernel<16>" + args, 1, 16);
  return op;
}

}  // namespace lab::ops::LAB_MATH_NS
