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
//   v5_fused_front the dense front in one kernel: blur, sobel, harris and nms from the letterbox
//                  plane, intermediates in registers (those stages skipped): one plane read and
//                  two written (the map; blur, which sample reads) where four launches move ten.
//                  Bit for bit the default four kernels' result (front_kernels.cuh says how).
//   v6_front_pairs v5 with a lane on two adjacent columns: 56 of a warp's 64 columns are
//                  outputs, three 8-byte loads give two columns' taps, half the shuffles; at 114
//                  registers (v5: 80). Interior blocks run first, the border ones after.
//
// v5's comparison. The GPU's Harris response differs from the CPU chain's by up to harris's
// bound tau (1e-5 of max|R|; blur and sobel round alike on both sides but for FMA contraction,
// far below it). A keep/drop decision compares R(p) with the other responses of its window and
// with the threshold, so it can differ between the two sides only where the CPU's R(p) is
// within 2 tau of the largest other response in its window, or within tau of the threshold.
// The map is therefore held to: every pixel equal, except that a pixel one side keeps and the
// other drops passes when it is such a near tie (and a value the GPU keeps is within tau of the
// CPU's R there); a pixel both keep holds R, within tau. Anything else, or a NaN, fails.
//
// Bench: kernel-lab bench --stage nms --sweep-variants --size 3840x2160
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <string>
#include <vector>

#include "common.h"
#include "front_host.h"
#include "front_kernels.cuh"
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

// ---- v5_fused_front: reference, slots, comparison ---------------------------------------------

// sobel then harris on the CPU, from a blur plane: the Harris response; k from the harris stage
// ("harris.k" in the fused variant's parameters).
inline HostImage front_harris(const ImageRef& blur, const ParamMap& params) {
  HostImage gx(blur.desc), gy(blur.desc), r(blur.desc);
  run_reference(front_stages().sobel, {blur}, {gx.ref(), gy.ref()}, {});
  run_reference(front_stages().harris, {gx.ref(), gy.ref()}, {r.ref()},
                fused_params(params, "harris"));
  return r;
}

// The CPU references of blur, sobel, harris and nms in sequence on the letterbox plane: out[0]
// the NMS map, out[1] the blur plane.
inline void nms_front_reference(const StageArgs& a) {
  run_reference(front_stages().blur, {a.in[0]}, {a.out[1]}, {});
  const HostImage r = front_harris(a.out[1], a.params);
  nms_reference(StageArgs{{r.ref()}, {a.out[0]}, a.params, a.block});
}

// Reads the letterbox plane, writes the NMS map and the blur plane.
inline std::vector<ImageDesc> nms_front_shape(const std::vector<ImageDesc>& in, const ParamMap&) {
  const ImageDesc d = require_f32_plane("nms", in[0]);
  return {d, d};
}

// The rule in the header comment: the blur plane within blur's bound; the NMS map equal to the
// CPU chain's except at near ties of the CPU's own Harris response.
inline DiffStats nms_front_compare(const CompareArgs& a) {
  const HostImage &got = (*a.got)[0], &ref = (*a.ref)[0];
  DiffStats blur = diff_images((*a.got)[1], (*a.ref)[1], kBlurTolerance, (*a.out_names)[1]);
  const HostImage r_img = front_harris((*a.ref)[1].ref(), *a.params);
  const auto r = r_img.view<const float>();
  const auto g = got.view<const float>(), c = ref.view<const float>();
  double r_max = 0;
  for (int y = 0; y < r.height; ++y)
    for (int x = 0; x < r.width; ++x) r_max = std::max(r_max, std::abs(double(r.at(x, y))));
  const double tau = kHarrisTolerance.limit(r_max);
  const double thr = decode_params<NmsParams>(*a.params).threshold;
  DiffAccumulator acc;
  size_t flips = 0;
  const std::string& slot = (*a.out_names)[0];
  for (int y = 0; y < r.height; ++y)
    for (int x = 0; x < r.width; ++x) {
      const double gv = g.at(x, y), cv = c.at(x, y), rv = r.at(x, y);
      double limit = 0;                      // equal, unless one of the rules below allows more
      if (gv != cv && gv != 0 && cv != 0) {  // both keep the pixel: both hold R there
        limit = tau;
      } else if (gv != cv && std::isfinite(gv)) {  // one keeps it, the other drops it
        double others = -INFINITY;  // the largest other response in the (clipped) window
        for (int yy = std::max(0, y - 2); yy <= std::min(r.height - 1, y + 2); ++yy)
          for (int xx = std::max(0, x - 2); xx <= std::min(r.width - 1, x + 2); ++xx)
            if (xx != x || yy != y) others = std::max(others, double(r.at(xx, yy)));
        const bool near_tie = std::abs(rv - others) <= 2 * tau || std::abs(rv - thr) <= tau;
        if (near_tie && (gv == 0 || std::abs(gv - rv) <= tau)) {
          limit = std::abs(gv - cv);
          ++flips;
        }
      }
      acc.add(gv, cv, limit, slot, x, y);
    }
  DiffStats d = acc.finish();
  d.limit = tau;
  if (flips)
    d.note = std::to_string(flips) + " near-tie NMS flip" + (flips > 1 ? "s" : "") + " accepted";
  merge_diff(d, blur);
  return d;
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

// block.x / 32 warps side by side, each on FRONT_COLS (24) output columns of FRONT_ROWS rows,
// the border blocks first.
static void launch_v5(LaunchContext& ctx, const StageArgs& a) {
  const auto src = a.in[0].view<const float>();
  const dim3 grid = front_grid(src.width, src.height, a.block, FRONT_COLS, FRONT_ROWS);
  launch(ctx, "nms_v5_fused_front", nms_v5_fused_front_kernel<FRONT_ROWS, FrontNoSink>, grid,
         dim3(a.block.x, a.block.y), 0, src, a.out[1].view<float>(), a.out[0].view<float>(),
         front_k(a.params), threshold_of(a), FrontNoSink{},
         v5_order(src.width, src.height, int(a.block.x / 32), grid));
}

// v6: block.x / 32 warps side by side, each on PAIR_COLS (56) output columns of FRONT_ROWS rows;
// v5's kernel where a plane's rows are not 8-byte aligned (never, for the lab's pitched planes).
static void launch_v6(LaunchContext& ctx, const StageArgs& a) {
  const auto src = a.in[0].view<const float>();
  const auto blur = a.out[1].view<float>(), dst = a.out[0].view<float>();
  if (!front_pairs_aligned(src.data, blur.data, dst.data, src.pitch, blur.pitch, dst.pitch)) {
    ctx.runs_step("v5_fused_front", "planes not 8-byte aligned");
    return launch_v5(ctx, a);
  }
  const dim3 grid = front_grid(src.width, src.height, a.block, PAIR_COLS, FRONT_ROWS);
  launch(ctx, "nms_v6_front_pairs", nms_v6_front_pairs_kernel<FRONT_ROWS, FrontNoSink, true>, grid,
         dim3(a.block.x, a.block.y), 0, PlaneSource{src}, blur, dst, front_k(a.params),
         threshold_of(a), FrontNoSink{},
         pair_order(src.width, src.height, int(a.block.x / 32), grid));
}

static size_t v2_smem(Block b) {
  return sizeof(float) * (size_t(b.y + 4) * (b.x + 5) + size_t(b.y + 4) * (b.x + 1));
}

// ---- variant table ---------------------------------------------------------------------------

OpDef nms_op(const OpLookup& earlier) {
  borrow_front_stages(earlier);  // v5 and v6 check against blur's, sobel's and harris's references
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
       any, {64, 4}, launch_v4, nullptr, {}, {"harris", "reliability?"}},
      {"v5_fused_front",
       "blur + sobel + harris + nms in one kernel, intermediates in registers: 3 planes moved, "
       "not 10",
       {{32, 1}, {64, 1}, {128, 1}, {256, 1}}, {64, 1}, launch_v5, nullptr,
       {"blur", "sobel", "harris"}, {"letterbox"}, nms_front_reference,
       "against the CPU chain blur -> sobel -> harris -> nms: the blur plane within blur's "
       "bound; the NMS map exact except where the CPU's Harris response is a near tie (within 2 "
       "tau of the largest other response of its 5x5 window, or tau of the threshold; tau = "
       "harris's bound), where keeping or dropping the pixel is accepted; kept values within tau. "
       "On the GPU it equals the four default kernels bit for bit",
       "the bytes model drops from 10 planes to 3 (Orin's estimate with it: the four stages' "
       "sum / 3.3); on the H200 the planes live in the L2, so the gain is three launches and the "
       "L2 round trips, less the recomputed aprons (24 of 32 lanes write; 28 rows walked per 16 "
       "outputs)"},
      {"v6_front_pairs",
       "v5 with a lane on two adjacent columns: 56 of 64 columns written, not 24 of 32; half "
       "the loads",
       {{32, 1}, {64, 1}, {128, 1}, {256, 1}}, {64, 1}, launch_v6, nullptr,
       {"blur", "sobel", "harris"}, {"letterbox"}, nms_front_reference,
       "as v5_fused_front: the blur plane within blur's bound and the NMS map exact but at near "
       "ties of the CPU's Harris response; on the GPU v5's bytes (the four default kernels')",
       "v5 issues in 65-70 % of its slots with DRAM 29 % busy at 4K: its instructions bound "
       "it, and a third go to aprons and to taps and neighbours fetched once per column; pairs "
       "cut them by a quarter or more, but at 114 registers an SM holds 16 warps, not 24, and "
       "a small frame has too few of them"},
  };
  // clang-format on
  op.variant("v6_front_pairs").runs_when =
      "planes not 8-byte aligned (not the lab's): v5_fused_front";
  for (VariantDef& v : op.variants) {  // v5 and v6 also write blur (sample reads it), from the
    if (v.launch != launch_v5 && v.launch != launch_v6) continue;  // letterbox plane: their own
    v.outputs = {slots::kNms, "blur"};                             // slots and check
    v.shape = nms_front_shape;
    v.compare = nms_front_compare;
  }
  // v4 also reads the optional second score map, which a live kernel does not get; v5 and v6
  // read and write other slots than nms's.
  set_live_copy(op, "v1_ldg", "nms_v1_ldg_kernel(in[0], out[0], p.v[0])");  // p.v[0]: threshold
  set_live_copy(op, "v2_smem_tile",
                "nms_v2_smem_tile_kernel<LAB_BLOCK_X, LAB_BLOCK_Y>(in[0], out[0], p.v[0])", 1, 1,
                true);
  set_live_copy(op, "v3_rows", "nms_rows_kernel<8, false>(in[0], ImageIn{}, out[0], p.v[0])", 1, 8);
  return op;
}

}  // namespace lab::ops::LAB_MATH_NS
