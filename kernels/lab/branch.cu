// branch: warp divergence. Each element x of a float array is iterated `iters` times,
//   odd i:  path A  x = fma(x, 0.999, 0.001 * sin(x + 0.5))
//   even i: path B  x = fma(x, 0.998, -0.002 * sin(x - 0.5))
// The same arithmetic per element in every variant, and the same results: only which threads
// of a warp take which path differs.
//
// Variants:
//   v1_divergent     thread i takes element i and branches on its parity: the even and odd
//                    lanes of every warp want different paths, so the warp runs both, one after
//                    the other, each with half its lanes masked off.
//   v2_warp_uniform  threads remapped so that each warp takes 32 elements of one parity: warp w
//                    of a block takes the even (w even) or odd (w odd) elements of a 64-element
//                    group, branching on (threadIdx.x >> 5) & 1. No divergence, same work, same
//                    outputs; loads and stores now skip every other float (each pair of warps
//                    still covers whole sectors).
//   v3_branchless    A and B are one formula with different constants: select (c0, c1, phase)
//                    by parity and run one loop. No branch at all, natural mapping.
//
// Bench: kernel-lab bench --lab branch --sweep-variants --size 2^22 --param branch.iters=32
#include <cmath>
#include <vector>

#include "lab_common.cuh"

namespace lab::ops {

struct BranchParams {
  int iters = 32;
  template <class V>
  void visit(V& v) {
    v("iters", iters, 1, 256, "steps of arithmetic (a sin and an fma) per path and element");
  }
};

constexpr long long BRANCH_MAX = 1LL << 28;

// Path A (odd elements) and B (even), x <- fma(x, c0, c1 * sin(x + phase)). |c0| + |c1| = 1:
// |x| <= 1 stays <= 1, so sin's argument stays in [-1.5, 1.5] (where __sinf is accurate), and
// each step is a contraction: |d/dx| = |c0 + c1 cos(.)| <= c0 + |c1| = 1.
constexpr float BR_A0 = 0.999f, BR_A1 = 0.001f, BR_APH = 0.5f;
constexpr float BR_B0 = 0.998f, BR_B1 = -0.002f, BR_BPH = -0.5f;

inline LabSlots branch_inputs(const std::string& size) {
  return array_inputs(size, "branch", BRANCH_MAX, PixelType::F32);
}

inline std::vector<ImageDesc> branch_shape(const std::vector<ImageDesc>& in, const ParamMap&) {
  return {require_array("branch", in[0], PixelType::F32, BRANCH_MAX)};
}

// The same float operations in the same order as the kernels; fma written out on both sides so
// that neither compiler contracts differently.
inline void branch_reference(const StageArgs& a) {
  const int iters = decode_params<BranchParams>(a.params).iters;
  const float* in = a.in[0].view<const float>().row(0);
  float* out = a.out[0].view<float>().row(0);
  const long long n = array_len(a.in[0].desc);
  for (long long i = 0; i < n; ++i) {
    const bool odd = i & 1;
    const float c0 = odd ? BR_A0 : BR_B0, c1 = odd ? BR_A1 : BR_B1, ph = odd ? BR_APH : BR_BPH;
    float x = in[i];
    for (int k = 0; k < iters; ++k) x = std::fma(x, c0, c1 * std::sin(x + ph));
    out[i] = x;
  }
}

}  // namespace lab::ops

namespace lab::ops::LAB_MATH_NS {

// ---- kernels ---------------------------------------------------------------------------------

// sinf is __sinf under --use_fast_math.
__device__ __forceinline__ float branch_path(float x, int iters, float c0, float c1, float ph) {
  for (int k = 0; k < iters; ++k) x = fmaf(x, c0, c1 * sinf(x + ph));
  return x;
}

__global__ void branch_v1_divergent_kernel(const float* __restrict__ in, float* __restrict__ out,
                                           int n, int iters) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float x = in[i];
  if (i & 1)  // = threadIdx.x & 1 (blockDim.x is even): neighbouring lanes disagree
    x = branch_path(x, iters, BR_A0, BR_A1, BR_APH);
  else
    x = branch_path(x, iters, BR_B0, BR_B1, BR_BPH);
  out[i] = x;
}

// blockDim.x % 64 == 0: warps 2k and 2k+1 of a block share the 64 elements starting at
// blockIdx.x * blockDim.x + 64k, the even ones to warp 2k, the odd ones to warp 2k+1.
__global__ void branch_v2_warp_uniform_kernel(const float* __restrict__ in, float* __restrict__ out,
                                              int n, int iters) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int i = blockIdx.x * blockDim.x + (warp >> 1) * 64 + 2 * lane + (warp & 1);
  if (i >= n) return;
  float x = in[i];
  if (warp & 1)  // the parity of i, the same for the whole warp
    x = branch_path(x, iters, BR_A0, BR_A1, BR_APH);
  else
    x = branch_path(x, iters, BR_B0, BR_B1, BR_BPH);
  out[i] = x;
}

__global__ void branch_v3_branchless_kernel(const float* __restrict__ in, float* __restrict__ out,
                                            int n, int iters) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const bool odd = i & 1;  // selects, not branches
  const float c0 = odd ? BR_A0 : BR_B0, c1 = odd ? BR_A1 : BR_B1, ph = odd ? BR_APH : BR_BPH;
  out[i] = branch_path(in[i], iters, c0, c1, ph);
}

// ---- launchers -------------------------------------------------------------------------------

static void branch_launch(LaunchContext& ctx, const StageArgs& a, const char* name,
                          void (*kernel)(const float*, float*, int, int)) {
  const int n = int(array_len(a.in[0].desc));
  const int iters = decode_params<BranchParams>(a.params).iters;
  launch(ctx, name, kernel, dim3(unsigned((n + a.block.x - 1) / a.block.x)), dim3(a.block.x), 0,
         a.in[0].view<const float>().row(0), a.out[0].view<float>().row(0), n, iters);
}

static void branch_launch_v1(LaunchContext& ctx, const StageArgs& a) {
  branch_launch(ctx, a, "branch_v1_divergent", branch_v1_divergent_kernel);
}

static void branch_launch_v2(LaunchContext& ctx, const StageArgs& a) {
  if (a.block.x % 64 != 0 || a.block.y != 1)
    throw Error(ErrorKind::Usage, "branch v2_warp_uniform: block " + a.block.str() +
                                      ": needs blockDim.x a multiple of 64 (warp pairs)");
  branch_launch(ctx, a, "branch_v2_warp_uniform", branch_v2_warp_uniform_kernel);
}

static void branch_launch_v3(LaunchContext& ctx, const StageArgs& a) {
  branch_launch(ctx, a, "branch_v3_branchless", branch_v3_branchless_kernel);
}

// ---- variant table ---------------------------------------------------------------------------

OpDef branch_op(const OpLookup&) {
  // 1-D blocks, multiples of 64 threads: v2 pairs warps over 64-element groups.
  const std::vector<Block> blocks = {{64, 1}, {128, 1}, {256, 1}, {512, 1}, {1024, 1}};
  OpDef op;
  op.name = "branch";
  op.summary = "iterate one of two formulas per element, by parity (warp divergence)";
  op.inputs = {"input"};
  op.outputs = {"branch"};
  op.params = param_specs<BranchParams>();
  op.shape = branch_shape;
  op.reference = branch_reference;
  // Per step, GPU and CPU apply the same float operations in the same order; only sin differs
  // (CUDA sinf <= 2 ulp, glibc sinf < 1 ulp; __sinf abs error <= 2^-21.4 on [-pi, pi]). That
  // error is scaled by |c1| <= 0.002 (<= 1e-9), below the rounding of x (ulp 2^-24 below 1):
  // it can at most flip the fma's rounding, 1 ulp = 2^-24. The step is a contraction
  // (|df/dx| <= 1), so differences add up at most linearly: |gpu - cpu| <= iters * (2^-24 +
  // 1e-9) <= 256 * 6.1e-8 = 1.6e-5 for the largest iters. Fast math also flushes denormal
  // addends (< 1.2e-38). Measured (H200, up to 256 iters): 1.2e-7 precise, 3.3e-7 fast.
  op.tol_precise = {2e-5, 0};
  op.tol_fast = {2e-5, 0};
  op.tol_why =
      "same ops in the same order; sin's error (<= 2 ulp, __sinf 2^-21.4) x |c1| <= 0.002 can "
      "flip an fma rounding (2^-24) per step; contraction: <= 256 steps x 6.1e-8 = 1.6e-5";
  op.lab_inputs = branch_inputs;
  op.lab_fill = fill_uniform_pm1;
  op.lab_size_help = "N or 2^k: float elements (1 to 2^28)";
  op.lab_default_size = "2^20";
  op.story =
      "A warp issues one instruction for its 32 threads. When threads of one warp take "
      "different sides of a branch, the warp runs both sides, one after the other, masking off "
      "the threads not on the current side. Here every element runs `iters` steps of one of two "
      "formulas; which one depends on the element's parity. Branching per thread makes every "
      "warp run both (v1); giving each warp elements of one parity removes the divergence "
      "without changing the work (v2); and since both formulas have the same shape, selecting "
      "the constants instead of branching needs no remapping (v3). Compute-bound: GB/s means "
      "little here, time does.";
  // clang-format off
  op.variants = {
      {"v1_divergent", "branch on the element's parity: odd and even lanes of each warp diverge",
       blocks, {256, 1}, branch_launch_v1, nullptr},
      {"v2_warp_uniform", "remap threads: each warp takes 32 elements of one parity, no divergence",
       blocks, {256, 1}, branch_launch_v2, nullptr},
      {"v3_branchless", "one formula, constants selected by parity: no branch at all",
       blocks, {256, 1}, branch_launch_v3, nullptr},
  };
  // clang-format on
  // Measured on an H200, iters 32, 256 threads: 2^20: v1 80 us, v2 44, v3 45 (fast math: 26,
  // 16, 16); 2^22: v1 291, v2 150, v3 155 (fast: 76, 42, 41). The CPU reference of 2^20 x 32
  // steps takes ~0.5 s (glibc sinf), hence the default size.
  op.variants[0].expect =
      "The slowest: every warp runs path A with half its lanes, then path B with the other "
      "half: ~1.6-1.9x v2's time at iters 32 (less at small iters, where loads, stores and "
      "launch, which do not diverge, weigh more).";
  op.variants[1].expect =
      "About half of v1's time: the same work, but each warp runs only its own path, all 32 "
      "lanes active. Loads skip every other float; no matter, this is compute-bound.";
  op.variants[2].expect =
      "Within a few percent of v2 (half of v1): one path per thread, three selects up front, "
      "the natural element order. The fix when both sides of a branch have the same shape.";
  op.default_variant = "v3_branchless";
  return op;
}

}  // namespace lab::ops::LAB_MATH_NS
