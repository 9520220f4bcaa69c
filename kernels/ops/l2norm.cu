// l2norm: each 64-value patch minus its mean, divided by its L2 norm; a constant patch (and a pad
// row) gives all zeros.
//
// Every thread keeps its value in a register; the block sums across its two warps (shuffles,
// then one shared-memory exchange), takes one rsqrtf and scales. The values are first taken
// relative to the patch's first sample: an exactly constant patch then sums to exactly 0 (64
// times a float is not always exactly 64 x), and the shift costs no accuracy (Sterbenz).
//
// Variants:
//   v1_block64       64 threads per descriptor (two warps), as sample: warp shuffles, then the
//                    two warp sums through shared memory, twice (mean, then norm).
//   v2_warp          one warp per descriptor, two values per lane: shuffles only, no shared
//                    memory and no __syncthreads.
//   v3_fused_sample  sample + l2norm in one kernel: the 64 samples never leave registers, so the
//                    patches are neither written nor read back (the sample stage is skipped).
//   v4_fused_warp    v3's fusion in v2's layout: one warp per descriptor samples its 64 values
//                    (two per lane) and normalises them with shuffles alone.
//   v5_overlapped    v4 launched programmatically (sm_90 and up): its blocks take their places
//                    while the kernel before it (topk's rank) finishes, and wait there for it
//                    before they read the keypoints. A few thousand descriptors are a short
//                    kernel: the gap before it is a good part of its time.
//
// Bench: kernel-lab bench --stage l2norm --sweep-variants
#include <cfloat>
#include <vector>

#include "keypoints.h"
#include "launch.cuh"

namespace lab::ops {

inline std::vector<ImageDesc> l2norm_shape(const std::vector<ImageDesc>& in, const ParamMap&) {
  if (in.size() == 2) {  // the fused variant reads blur and keypoints
    require_f32_plane("l2norm", in[0]);
    return {rows64_desc(require_keypoints("l2norm", in[1]))};
  }
  const ImageDesc& d = in[0];
  if (d.type != PixelType::F32 || d.channels != 1 || d.width != kDescriptorSize || d.height < 1)
    throw Error(ErrorKind::Data, "l2norm: patches must be K rows of 64 floats, got " + d.str());
  return {d};
}

inline void l2norm_rows(ImageView<const float> src, ImageView<float> dst) {
  for (int k = 0; k < src.height; ++k) {
    const float* p = src.row(k);
    float s[kDescriptorSize], sum = 0.0f, n = 0.0f;
    for (int t = 0; t < kDescriptorSize; ++t) sum += (s[t] = p[t] - p[0]);
    const float mean = sum * (1.0f / kDescriptorSize);
    for (int t = 0; t < kDescriptorSize; ++t) n += (s[t] - mean) * (s[t] - mean);
    const float inv = n > 0.0f ? 1.0f / std::sqrt(n) : 0.0f;
    for (int t = 0; t < kDescriptorSize; ++t) dst.at(t, k) = (s[t] - mean) * inv;
  }
}

inline void l2norm_reference(const StageArgs& args) {
  l2norm_rows(args.in[0].view<const float>(), args.out[0].view<float>());
}

// The fused variant's reference: sample's, then l2norm's.
inline void l2norm_fused_reference(const StageArgs& args) {
  const auto img = args.in[0].view<const float>();
  const auto kp = args.in[1].view<const float>();
  HostImage patches(rows64_desc(kp.width));
  auto p = patches.view<float>();
  for (int k = 0; k < kp.width; ++k)
    for (int t = 0; t < kDescriptorSize; ++t)
      p.at(t, k) =
          is_pad(kp.at(k, 0, 0)) ? 0.0f : patch_sample(img, kp.at(k, 0, 0), kp.at(k, 0, 1), t);
  l2norm_rows(patches.ref().view<const float>(), args.out[0].view<float>());
}

// Every value within the tolerance, and every row's cosine similarity to the reference at least
// 0.9999 (pad rows and constant patches: both zero, similarity 1).
inline DiffStats l2norm_compare(const CompareArgs& a) {
  DiffStats d = diff_images((*a.got)[0], (*a.ref)[0], a.tol, (*a.out_names)[0]);
  add_cosine(d, (*a.got)[0], (*a.ref)[0], size_t((*a.ref)[0].desc().height));
  if (d.cos_min < 0.9999) d.fail = "a descriptor's cosine similarity is under 0.9999";
  return d;
}

}  // namespace lab::ops

namespace lab::ops::LAB_MATH_NS {

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

constexpr int kMaxRowsPerBlock = 8;

// v1 and v3: blockDim = (64, rows per block). FUSED samples the blurred image itself.
template <bool FUSED>
__global__ void l2norm_block64_kernel(ImageView<const float> patches, ImageView<const float> img,
                                      ImageView<const float> kp, ImageView<float> dst) {
  __shared__ float pivot[kMaxRowsPerBlock], part_sum[kMaxRowsPerBlock][2],
      part_sq[kMaxRowsPerBlock][2];
  const int t = threadIdx.x, ty = threadIdx.y, warp = t >> 5;
  const int k = blockIdx.x * blockDim.y + ty;
  const bool active = k < dst.height;  // no early return: every thread reaches the barriers
  float v = 0.0f;
  if (active) {
    if (FUSED) {
      const float x = kp.at(k, 0, 0), y = kp.at(k, 0, 1);
      v = is_pad(x) ? 0.0f : patch_sample(img, x, y, t);
    } else {
      v = __ldg(&patches.at(t, k));
    }
  }
  if (t == 0) pivot[ty] = v;
  __syncthreads();
  const float s = v - pivot[ty];
  const float ws = warp_sum(s);
  if ((t & 31) == 0) part_sum[ty][warp] = ws;
  __syncthreads();
  const float r = s - (part_sum[ty][0] + part_sum[ty][1]) * (1.0f / kDescriptorSize);
  const float wq = warp_sum(r * r);
  if ((t & 31) == 0) part_sq[ty][warp] = wq;
  __syncthreads();
  const float n = part_sq[ty][0] + part_sq[ty][1];
  if (active) dst.at(t, k) = n > 0.0f ? r * rsqrtf(n) : 0.0f;
}

// v2 and v4: one warp per descriptor, lane l holding values a = l and b = l + 32 of row k.
__device__ __forceinline__ void l2norm_warp_row(float a, float b, int l, int k,
                                                ImageView<float> dst) {
  const float pv = __shfl_sync(0xffffffffu, a, 0);
  const float sa = a - pv, sb = b - pv;
  const float mean = warp_sum(sa + sb) * (1.0f / kDescriptorSize);
  const float ra = sa - mean, rb = sb - mean;
  const float n = warp_sum(ra * ra + rb * rb);
  const float inv = n > 0.0f ? rsqrtf(n) : 0.0f;
  dst.at(l, k) = ra * inv;
  dst.at(l + 32, k) = rb * inv;
}

// v2: blockDim = (32, rows per block).
__global__ void l2norm_v2_warp_kernel(ImageView<const float> patches, ImageView<float> dst) {
  const int k = blockIdx.x * blockDim.y + threadIdx.y;
  if (k >= dst.height) return;  // a whole warp: no barrier follows
  const int l = threadIdx.x;
  const float* p = &patches.at(0, k);
  l2norm_warp_row(__ldg(p + l), __ldg(p + l + 32), l, k, dst);
}

// v4: v2's layout sampling the blurred image itself (sample's v2_warp, then v2's arithmetic).
// WAIT (v5): launched programmatically, so first wait for the kernel before it.
template <bool WAIT>
__global__ void l2norm_v4_fused_warp_kernel(ImageView<const float> img, ImageView<const float> kp,
                                            ImageView<float> dst) {
  if (WAIT) griddep_wait();
  const int k = blockIdx.x * blockDim.y + threadIdx.y;
  if (k >= dst.height) return;
  const int l = threadIdx.x;
  const float x = kp.at(k, 0, 0), y = kp.at(k, 0, 1);
  const bool pad = is_pad(x);
  const float a = pad ? 0.0f : patch_sample(img, x, y, l);
  const float b = pad ? 0.0f : patch_sample(img, x, y, l + 32);
  l2norm_warp_row(a, b, l, k, dst);
}

static dim3 rows_grid(int rows, Block b) {
  return dim3(unsigned((rows + b.y - 1) / b.y));
}

static void launch_v1(LaunchContext& ctx, const StageArgs& a) {
  const auto dst = a.out[0].view<float>();
  launch(ctx, "l2norm_v1_block64", l2norm_block64_kernel<false>, rows_grid(dst.height, a.block),
         dim3(a.block.x, a.block.y), 0, a.in[0].view<const float>(), ImageView<const float>{},
         ImageView<const float>{}, dst);
}

static void launch_v2(LaunchContext& ctx, const StageArgs& a) {
  const auto dst = a.out[0].view<float>();
  launch(ctx, "l2norm_v2_warp", l2norm_v2_warp_kernel, rows_grid(dst.height, a.block),
         dim3(a.block.x, a.block.y), 0, a.in[0].view<const float>(), dst);
}

static void launch_v3(LaunchContext& ctx, const StageArgs& a) {
  const auto dst = a.out[0].view<float>();
  launch(ctx, "l2norm_v3_fused_sample", l2norm_block64_kernel<true>, rows_grid(dst.height, a.block),
         dim3(a.block.x, a.block.y), 0, ImageView<const float>{}, a.in[0].view<const float>(),
         a.in[1].view<const float>(), dst);
}

static void launch_v4(LaunchContext& ctx, const StageArgs& a) {
  const auto dst = a.out[0].view<float>();
  launch(ctx, "l2norm_v4_fused_warp", l2norm_v4_fused_warp_kernel<false>,
         rows_grid(dst.height, a.block), dim3(a.block.x, a.block.y), 0, a.in[0].view<const float>(),
         a.in[1].view<const float>(), dst);
}

static void launch_v5(LaunchContext& ctx, const StageArgs& a) {
  const auto dst = a.out[0].view<float>();
  if (device_info().major < 9) ctx.runs_step("v4_fused_warp", "below sm_90 (launched plainly)");
  launch_programmatic(ctx, "l2norm_v5_overlapped", l2norm_v4_fused_warp_kernel<true>,
                      rows_grid(dst.height, a.block), dim3(a.block.x, a.block.y), 0,
                      a.in[0].view<const float>(), a.in[1].view<const float>(), dst);
}

OpDef l2norm_op(const OpLookup&) {
  const std::vector<Block> block64 = {{64, 1}, {64, 2}, {64, 4}, {64, 8}};
  OpDef op;
  op.name = "l2norm";
  op.summary = "each 64-value patch minus its mean, over its L2 norm (zeros for a constant patch)";
  op.inputs = {slots::kPatches};
  op.outputs = {slots::kDescriptors};
  op.shape = l2norm_shape;
  op.reference = l2norm_reference;
  op.compare = l2norm_compare;
  // Two sums of 64 terms in another order (a few ulp of the norm: ~1e-6 of a unit vector) and
  // rsqrtf's 2 ulp; fast math changes none of these operations.
  op.tol_precise = {1e-5, 0};
  op.tol_fast = {1e-5, 0};
  op.tol_why =
      "sums of 64 in another order + rsqrtf (2 ulp): 1e-5 per value of a unit vector, "
      "and cosine >= 0.9999 per descriptor; fast math: the same operations";
  // clang-format off
  op.default_variant = "v2_warp";  // fastest unfused step everywhere (BENCHMARKS.md, "l2norm")
  op.variants = {
      {"v1_block64", "two warps per descriptor: shuffles, then a shared-memory exchange",
       block64, {64, 1}, launch_v1, nullptr},
      {"v2_warp", "one warp per descriptor, two values per lane: shuffles only, no barrier",
       {{32, 2}, {32, 4}, {32, 8}}, {32, 4}, launch_v2, nullptr},
      {"v3_fused_sample", "sample + l2norm in one kernel: patches never written (sample skipped)",
       block64, {64, 1}, launch_v3, nullptr, {"sample"}, {"blur", slots::kKeypoints},
       l2norm_fused_reference},
      {"v4_fused_warp", "sample + l2norm, one warp per descriptor: shuffles only (sample skipped)",
       {{32, 2}, {32, 4}, {32, 8}}, {32, 4}, launch_v4, nullptr, {"sample"},
       {"blur", slots::kKeypoints}, l2norm_fused_reference},
      {"v5_overlapped", "v4 launched before its predecessor ends, its blocks waiting in place "
       "(sm_90+: programmatic launch)",
       {{32, 2}, {32, 4}, {32, 8}}, {32, 4}, launch_v5, nullptr, {"sample"},
       {"blur", slots::kKeypoints}, l2norm_fused_reference},
  };
  // clang-format on
  op.variant("v5_overlapped").runs_when = "below sm_90 (Orin): v4_fused_warp, launched plainly";
  return op;
}

}  // namespace lab::ops::LAB_MATH_NS
