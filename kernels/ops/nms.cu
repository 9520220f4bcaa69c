// nms: non-maximum suppression of the Harris response.
//
//   nms(p) = R(p) * S(p)   where R(p) > threshold and R(p) = max of R over the 5x5 window
//                          centred on p (the window clipped at the border; tied maxima all kept)
//          = 0             elsewhere
// S is an optional second score map (a reliability map, as in an XFeat head) read by the fused
// variant; without it S = 1. Clipping the window equals replicating the border: a replicated
// pixel is a border pixel already inside the clipped window. Comparisons and one multiply: the
// result is exact.
//
// Variants:
//   v1_ldg         each thread reads its 25 neighbours through __ldg; the read-only cache
//                  captures the overlap between neighbouring threads' windows.
//   v2_smem_tile   the block stages its tile with a 2-pixel apron in shared memory, takes row
//                  maxima there, then column maxima: 10 comparisons per pixel instead of 24.
//   v3_rows        each thread walks 8 rows of one column: the row maxima of 12 rows feed 8
//                  outputs (12 x 5 loads for 8 pixels instead of 8 x 25).
//   v4_fused_score v3 multiplied by the second score map in the same pass: one read of each map
//                  and one write, instead of a second kernel that reads nms and S and writes
//                  again.
//
// Bench: kernel-lab bench --stage nms --sweep-variants --size 3840x2160
#include <cfloat>
#include <vector>

#include "common.h"
#include "keypoint_slots.h"
#include "launch.cuh"
#include "nms_kernels.cuh"

namespace lab::ops {

struct NmsParams {
  float threshold = 1e-3f;
  template <class V>
  void visit(V& v) {
    v("threshold", threshold, 0.0, 1e30, "keep R(p) only where R(p) > threshold (and a 5x5 max)");
  }
};

inline std::vector<ImageDesc> nms_shape(const std::vector<ImageDesc>& in, const ParamMap&) {
  const ImageDesc d = require_f32_plane("nms", in[0]);
  if (in.size() > 1 && !in[1].empty() && in[1] != d)
    throw Error(ErrorKind::Data,
                "nms: the second score map is " + in[1].str() + ", the response " + d.str());
  return {d};
}

// Optional second map: a view with data == nullptr means S = 1.
inline ImageView<const float> score_map(const StageArgs& a) {
  return a.in.size() > 1 && a.in[1].data ? a.in[1].view<const float>() : ImageView<const float>{};
}

inline void nms_reference(const StageArgs& args) {
  const auto r = args.in[0].view<const float>();
  const auto s = score_map(args);
  const auto dst = args.out[0].view<float>();
  const float thr = decode_params<NmsParams>(args.params).threshold;
  for (int y = 0; y < r.height; ++y)
    for (int x = 0; x < r.width; ++x) {
      const float v = r.at(x, y);
      float m = v;
      for (int yy = std::max(0, y - 2); yy <= std::min(r.height - 1, y + 2); ++yy)
        for (int xx = std::max(0, x - 2); xx <= std::min(r.width - 1, x + 2); ++xx)
          m = std::max(m, r.at(xx, yy));
      const float keep = v > thr && v >= m ? v : 0.0f;
      dst.at(x, y) = s.data ? keep * s.at(x, y) : keep;
    }
}

}  // namespace lab::ops

namespace lab::ops::LAB_MATH_NS {

// ---- launchers -------------------------------------------------------------------------------

static float threshold_of(const StageArgs& a) {
  return decode_params<NmsParams>(a.params).threshold;
}

static void launch_v1(LaunchContext& ctx, const StageArgs& a) {
  const auto dst = a.out[0].view<float>();
  launch(ctx, "nms_v1_ldg", nms_v1_ldg_kernel, grid_2d(dst.width, dst.height, a.block),
         dim3(a.block.x, a.block.y), 0, a.in[0].view<const float>(), dst, threshold_of(a));
}

template <int BX, int BY>
static void launch_v2_tile(LaunchContext& ctx, const StageArgs& a) {
  static const std::string name = instance_name("nms_v2_smem_tile", BX, BY);
  const auto dst = a.out[0].view<float>();
  launch(ctx, name.c_str(), nms_v2_smem_tile_kernel<BX, BY>,
         grid_2d(dst.width, dst.height, {BX, BY}), dim3(BX, BY), 0, a.in[0].view<const float>(),
         dst, threshold_of(a));
}

// The tile shape is a template parameter: these instances are the variant's allowed blocks.
using Tiles = BlockInstances<B<32, 8>, B<32, 4>, B<16, 16>, B<64, 4>, B<32, 16>>;
static void launch_v2(LaunchContext& ctx, const StageArgs& a) {
  Tiles::dispatch(a.block, "nms v2_smem_tile", [&](auto x, auto y) {
    launch_v2_tile<decltype(x)::value, decltype(y)::value>(ctx, a);
  });
}

template <bool FUSED>
static void launch_rows(LaunchContext& ctx, const StageArgs& a, const char* name) {
  constexpr int kRows = 8;
  const auto dst = a.out[0].view<float>();
  launch(ctx, name, nms_rows_kernel<kRows, FUSED>,
         grid_2d(dst.width, (dst.height + kRows - 1) / kRows, a.block), dim3(a.block.x, a.block.y),
         0, a.in[0].view<const float>(), FUSED ? score_map(a) : ImageView<const float>{}, dst,
         threshold_of(a));
}

static void launch_v3(LaunchContext& c, const StageArgs& a) {
  launch_rows<false>(c, a, "nms_v3_rows");
}
static void launch_v4(LaunchContext& c, const StageArgs& a) {
  launch_rows<true>(c, a, "nms_v4_fused_score");
}

static size_t v2_smem(Block b) {
  return sizeof(float) * (size_t(b.y + 4) * (b.x + 5) + size_t(b.y + 4) * (b.x + 1));
}

// ---- variant table ---------------------------------------------------------------------------

OpDef nms_op() {
  const std::vector<Block> any = {{32, 8},  {32, 4},  {16, 16}, {64, 4},
                                  {32, 16}, {128, 2}, {32, 32}};
  OpDef op;
  op.name = "nms";
  op.summary = "5x5 non-maximum suppression of the Harris response above a threshold";
  op.inputs = {"harris"};
  op.outputs = {slots::kNms};
  op.params = param_specs<NmsParams>();
  op.shape = nms_shape;
  op.reference = nms_reference;
  // Comparisons and at most one multiply by S: exact. Fast math flushes denormal responses to 0.
  op.tol_precise = {0, 0};
  op.tol_fast = {FLT_MIN, 0};
  op.tol_why = "comparisons and one multiply: exact; fast math flushes denormals (< FLT_MIN)";
  // clang-format off
  op.default_variant = "v3_rows";
  op.variants = {
      {"v1_ldg", "25 reads per pixel through __ldg; the read-only cache holds the overlap",
       any, {32, 8}, launch_v1, nullptr},
      {"v2_smem_tile", "tile + 2-pixel apron in smem, separable max: 10 comparisons, not 24",
       Tiles::blocks(), {32, 8}, launch_v2, v2_smem},
      {"v3_rows", "8 rows per thread: row maxima of 12 rows feed 8 outputs (60 loads, not 200)",
       any, {64, 4}, launch_v3, nullptr},
      {"v4_fused_score", "v3 x an optional second score map in the same pass: one read, one write",
       any, {64, 4}, launch_v4, nullptr, "", {"harris", "reliability?"}},
  };
  // clang-format on
  // v4 also reads the optional second score map, which a live kernel does not get.
  set_live_copy(op, "v1_ldg", "nms_v1_ldg_kernel(in[0], out[0], p.v[0])");  // p.v[0]: threshold
  set_live_copy(op, "v2_smem_tile",
                "nms_v2_smem_tile_kernel<LAB_BLOCK_X, LAB_BLOCK_Y>(in[0], out[0], p.v[0])", 1, 1,
                true);
  set_live_copy(op, "v3_rows", "nms_rows_kernel<8, false>(in[0], ImageIn{}, out[0], p.v[0])", 1, 8);
  return op;
}

}  // namespace lab::ops::LAB_MATH_NS
