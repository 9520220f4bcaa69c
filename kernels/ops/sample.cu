// sample: for every keypoint, 64 bilinear samples of the blurred image on an 8 x 8 grid with a
// 2-pixel step: value t = i + 8 j (j outer, i inner, 0..7) at (x + 2 (i - 3.5), y + 2 (j - 3.5)),
// pixel centres at integer coordinates (grid_sample's align_corners=False convention), the
// coordinates clamped to the image. A pad keypoint (fewer than K found) gives a zero row.
//
// One block row of 64 threads per keypoint, one value per thread: the 64 samples of a keypoint
// are 8 short row segments, and neighbouring threads read neighbouring pixels.
//
// Variants:
//   v1_block64   64 threads per keypoint; the block's y is how many keypoints a block takes
//                (64x1 is the spec's one block per keypoint; on sm_87 a 64-thread block caps the
//                SM at 16 blocks = 1024 of its 1536 threads, so 64x2 and up are measured too).
//   v2_warp      one warp per keypoint, two samples per lane (rows j and j + 4): half the
//                threads, each with two independent loads of four pixels in flight.
//
// Bench: kernel-lab bench --stage sample --sweep-blocks
#include <vector>

#include "keypoints.h"
#include "launch.cuh"

namespace lab::ops {

inline std::vector<ImageDesc> sample_shape(const std::vector<ImageDesc>& in, const ParamMap&) {
  require_f32_plane("sample", in[0]);
  return {rows64_desc(require_keypoints("sample", in[1]))};
}

inline void sample_reference(const StageArgs& args) {
  const auto img = args.in[0].view<const float>();
  const auto kp = args.in[1].view<const float>();
  const auto dst = args.out[0].view<float>();
  for (int k = 0; k < kp.width; ++k) {
    const float x = kp.at(k, 0, 0), y = kp.at(k, 0, 1);
    for (int t = 0; t < kDescriptorSize; ++t)
      dst.at(t, k) = is_pad(x) ? 0.0f : patch_sample(img, x, y, t);
  }
}

}  // namespace lab::ops

namespace lab::ops::LAB_MATH_NS {

__global__ void sample_v1_block64_kernel(ImageView<const float> img, ImageView<const float> kp,
                                         ImageView<float> dst) {
  const int k = blockIdx.x * blockDim.y + threadIdx.y;
  if (k >= dst.height) return;
  const float x = kp.at(k, 0, 0), y = kp.at(k, 0, 1);
  dst.at(threadIdx.x, k) = is_pad(x) ? 0.0f : patch_sample(img, x, y, threadIdx.x);
}

__global__ void sample_v2_warp_kernel(ImageView<const float> img, ImageView<const float> kp,
                                      ImageView<float> dst) {
  const int k = blockIdx.x * blockDim.y + threadIdx.y;
  if (k >= dst.height) return;
  const float x = kp.at(k, 0, 0), y = kp.at(k, 0, 1);
  const int t = threadIdx.x;
  const bool pad = is_pad(x);
  const float a = pad ? 0.0f : patch_sample(img, x, y, t);
  const float b = pad ? 0.0f : patch_sample(img, x, y, t + 32);
  dst.at(t, k) = a;
  dst.at(t + 32, k) = b;
}

static void launch_v2(LaunchContext& ctx, const StageArgs& a) {
  const auto dst = a.out[0].view<float>();
  launch(ctx, "sample_v2_warp", sample_v2_warp_kernel,
         dim3((dst.height + a.block.y - 1) / a.block.y), dim3(a.block.x, a.block.y), 0,
         a.in[0].view<const float>(), a.in[1].view<const float>(), dst);
}

static void launch_v1(LaunchContext& ctx, const StageArgs& a) {
  const auto dst = a.out[0].view<float>();
  launch(ctx, "sample_v1_block64", sample_v1_block64_kernel,
         dim3((dst.height + a.block.y - 1) / a.block.y), dim3(a.block.x, a.block.y), 0,
         a.in[0].view<const float>(), a.in[1].view<const float>(), dst);
}

OpDef sample_op(const OpLookup&) {
  OpDef op;
  op.name = "sample";
  op.summary = "64 bilinear samples of the blurred image on an 8x8 grid around each keypoint";
  op.inputs = {"blur", slots::kKeypoints};
  op.outputs = {slots::kPatches};
  op.shape = sample_shape;
  op.reference = sample_reference;
  // The kernel and the reference round every product and sum separately (no FMA on either
  // side: keypoints.h), in the same order: bit-identical. Fast math changes none of these
  // operations; it only flushes denormals.
  op.tol_precise = {0, 0};
  op.tol_fast = {1.2e-38, 0};
  op.tol_why =
      "the same rounded operations in the same order on both sides: exact (fast math: "
      "denormals flushed)";
  op.variants = {
      {"v1_block64",
       "64 threads per keypoint, one sample each; block y = keypoints per block",
       {{64, 1}, {64, 2}, {64, 4}, {64, 8}},
       {64, 1},
       launch_v1,
       nullptr},
      {"v2_warp",
       "one warp per keypoint, two samples per lane",
       {{32, 2}, {32, 4}, {32, 8}},
       {32, 4},
       launch_v2,
       nullptr},
  };
  op.default_variant = "v2_warp";  // fastest on every input and size (BENCHMARKS.md, "sample")
  return op;
}

}  // namespace lab::ops::LAB_MATH_NS
