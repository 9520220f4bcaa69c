// reduce: the sum of a float array, out = sum_i x[i] (one 1x1 float). The inputs are uniform in
// [0, 1), so the sum grows with n and the comparison bound is relative to it (see
// reduce_compare).
//
// The lesson (Mark Harris's "Optimizing parallel reduction", updated for today's GPUs): a sum
// reads every byte once and does one add per 4 bytes, so it is bandwidth-bound; the steps
// remove the things that keep it from streaming at the DRAM bandwidth: contention on one
// address, barriers, and too few loads in flight.
//
// Variants:
//   v1_atomic        every thread atomicAdd's its element into the output: n atomics on one
//                    address, serialised in the L2. The output is zeroed first (memset).
//   v2_smem_tree     one element per thread, a shared-memory tree per block with sequential
//                    addressing (the active threads are contiguous, so warps retire whole and
//                    there are no bank conflicts); one atomicAdd per block: n / B atomics.
//   v3_warp_shuffle  the in-block tree done with __shfl_down_sync inside each warp, warp
//                    partials through shared memory: 1 barrier per block instead of log2(B) + 1.
//                    Still one element per thread and one atomic per block.
//   v4_multi_elem    a grid of a few blocks per SM (from the occupancy API) strides over the
//                    array with float4 loads, 4 independent loads in flight per thread and 16
//                    running sums; a shuffle tree per block writes one partial per block to
//                    scratch, and a second 1-block kernel adds the partials. Two passes rather
//                    than an atomic: the order of the adds is fixed, so the result is the same on
//                    every run (as CUB's), and the second pass costs one small launch.
//   cub              cub::DeviceReduce::Sum (the ceiling).
//   thrust           thrust::reduce: CUB underneath, but it returns the sum to the host (a
//                    synchronous copy), which is then copied back into the output.
//
// Bench: kernel-lab bench --lab reduce --sweep-variants --sweep-blocks --size 2^28
#include <cub/device/device_reduce.cuh>
#include <thrust/execution_policy.h>
#include <thrust/reduce.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "device.h"
#include "lab_common.cuh"

namespace lab::ops {

constexpr long long REDUCE_MAX = 1LL << 30;

inline LabSlots reduce_inputs(const std::string& size) {
  return array_inputs(size, "reduce", REDUCE_MAX, PixelType::F32);
}

inline void reduce_fill(uint64_t seed, std::vector<HostImage>& imgs) {
  float* x = imgs[0].view<float>().row(0);
  const long long n = array_len(imgs[0].desc());
  for (long long i = 0; i < n; ++i) x[i] = uniform01(seed, uint64_t(i));
}

inline std::vector<ImageDesc> reduce_shape(const std::vector<ImageDesc>& in, const ParamMap&) {
  require_array("reduce", in[0], PixelType::F32, REDUCE_MAX);
  return {ImageDesc{1, 1, 1, PixelType::F32}};
}

// The exact sum up to double rounding (compensation is not needed: see reduce_compare), stored
// as float.
inline void reduce_reference(const StageArgs& a) {
  const float* x = a.in[0].view<const float>().row(0);
  const long long n = array_len(a.in[0].desc);
  double s = 0;
  for (long long i = 0; i < n; ++i) s += x[i];
  a.out[0].view<float>().at(0, 0) = float(s);
}

// The v4 launcher's grid: one block per 4 * B elements up to `occupancy` blocks per SM. At
// least one block per SM when there is that much work, at most 32 per SM (the sm_80..sm_90
// limit): reduce_height relies on both.
inline long long reduce_v4_grid(long long n, int threads, int blocks_per_sm) {
  const long long sms = std::max(1, device_info().sms);
  const long long need = std::max(1LL, (n / 4 + threads - 1) / threads);
  return std::min(need, std::max(1, blocks_per_sm) * sms);
}
constexpr int REDUCE_FINAL_THREADS = 1024;  // v4's second pass: one block

// The height h of the summation tree a variant uses for n elements: the most rounded adds on
// any element's way to the result. A float sum whose tree has height h has error
// <= gamma_h sum|x|, gamma_h = h u / (1 - h u), u = 2^-24 (Higham, Accuracy and Stability of
// Numerical Algorithms, 4.2). Any order of n - 1 adds has h <= n - 1 (adds of padding zeros
// are exact), so that caps every case. B (the block) is not known here: each case takes its
// worst over B in [64, 1024].
inline double reduce_height(const std::string& variant, long long n) {
  const double cap = double(n - 1);
  const double sms = std::max(1, device_info().sms);
  const double log2n = std::ceil(std::log2(double(n)));
  double h = cap;  // v1_atomic, and anything unknown: recursive summation in any order
  if (variant == "v2_smem_tree" || variant == "v3_warp_shuffle") {
    // log2(B) <= 10 in the block's tree, then the G = ceil(n / B) block sums added one after
    // the other by atomics: G - 1 rounded adds (the first lands on 0, exactly).
    h = 10 + std::ceil(double(n) / 64);
  } else if (variant == "v4_multi_elem") {
    // Per thread, a running sum over its float4 loads: at most ceil(n4 / T) + 3 adds per lane
    // sum, T = G B threads. T >= n4 (one load each) or T >= 64 SMs (a full grid has a block
    // per SM): ceil(n4 / T) <= ceil(n / (256 SMs)). Then 4 adds combine the 16 lane sums, 2
    // the scalar head and tail, <= 10 the block's shuffle tree; the second pass adds <= ceil(G
    // / 1024) <= ceil(32 SMs / 1024) partials per thread and a 10-level tree.
    h = std::ceil(double(n) / (256 * sms)) + 3 + 4 + 2 + 10 + std::ceil(sms / 32) + 10;
  } else if (variant == "cub" || variant == "thrust") {
    // CUB's DeviceReduce (thrust::reduce calls it) is a two-pass even-share reduce: each
    // thread reduces <= 32 items of a tile, keeps a running sum over the tiles its block is
    // given, then trees of <= 10 levels per block and the same again in the single-block second
    // pass. Assumed here, not documented: tiles of >= 2^10 items and >= one block per SM, so
    // the running sums are <= ceil(n / (2^10 SMs)) long. 2 log2 n + 128 covers the rest.
    h = std::ceil(double(n) / (1024 * sms)) + 2 * log2n + 128;
  }
  return std::min(h, cap);
}

inline double gamma_of(double k, double unit) {
  return k * unit < 1 ? k * unit / (1 - k * unit) : std::numeric_limits<double>::infinity();
}

// |got - ref| <= (gamma_{h+1} + 2 gamma'_n) sum|x|: gamma_h sum|x| for the GPU's sum, u |sum|
// for rounding the reference to float (gamma_h + u <= gamma_{h+1}), and the reference's own
// double sum, <= gamma'_n sum|x| with u' = 2^-53 (twice, for its effect on that rounding).
// NaN or inf fails. Fast math changes no add here (no denormals in [0, 1) multiples of 2^-24):
// the same bound.
inline DiffStats reduce_compare(const CompareArgs& a) {
  const HostImage& in = (*a.in)[0];
  const float* x = in.view<float>().row(0);
  const long long n = array_len(in.desc());
  double sum_abs = 0;
  for (long long i = 0; i < n; ++i) sum_abs += std::fabs(double(x[i]));
  const double got = (*a.got)[0].view<float>().at(0, 0);
  const double ref = (*a.ref)[0].view<float>().at(0, 0);
  const double h = reduce_height(a.variant->name, n);
  DiffAccumulator acc;
  acc.add(got, ref, (gamma_of(h + 1, 0x1p-24) + 2 * gamma_of(double(n), 0x1p-53)) * sum_abs,
          "reduce", 0, 0);
  return acc.finish();
}

}  // namespace lab::ops

namespace lab::ops::LAB_MATH_NS {

// ---- kernels ---------------------------------------------------------------------------------

constexpr unsigned REDUCE_FULL = 0xffffffffu;

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(REDUCE_FULL, v, o);
  return v;  // the warp's sum in lane 0
}

// The block's sum, valid in thread 0: a shuffle tree per warp, the warp sums through shared
// memory, a shuffle tree over them in warp 0. blockDim.x: a multiple of 32, at most 1024. Once
// per kernel (the shared array is not guarded for reuse).
__device__ __forceinline__ float block_sum(float v) {
  __shared__ float warp_part[32];
  const unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_sum(v);
  if (lane == 0) warp_part[warp] = v;
  __syncthreads();
  if (warp == 0) v = warp_sum(lane < (blockDim.x >> 5) ? warp_part[lane] : 0.0f);
  return v;
}

// v1: n atomics on one address. Each is a read-modify-write the L2 must serialise.
__global__ void reduce_v1_atomic_kernel(const float* __restrict__ x, int n, float* out) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) atomicAdd(out, x[i]);
}

// v2: shared-memory tree with sequential addressing: at each level the lower half of the
// active threads adds the upper half (stride halves from B / 2), so active threads stay
// contiguous (whole warps idle, no divergence inside a warp) and a warp reads 32 consecutive
// words (no bank conflicts). log2(B) + 1 barriers. blockDim.x: a power of two.
__global__ void reduce_v2_smem_tree_kernel(const float* __restrict__ x, int n, float* out) {
  extern __shared__ float s[];  // blockDim.x floats
  const unsigned t = threadIdx.x;
  const int i = blockIdx.x * blockDim.x + t;
  s[t] = i < n ? x[i] : 0.0f;
  __syncthreads();
  for (unsigned stride = blockDim.x >> 1; stride > 0; stride >>= 1) {
    if (t < stride) s[t] += s[t + stride];
    __syncthreads();
  }
  if (t == 0) atomicAdd(out, s[0]);
}

// v3: the same one element per thread, reduced with register shuffles: no shared-memory
// traffic inside a warp, one barrier per block.
__global__ void reduce_v3_warp_shuffle_kernel(const float* __restrict__ x, int n, float* out) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  const float s = block_sum(i < n ? x[i] : 0.0f);
  if (threadIdx.x == 0) atomicAdd(out, s);
}

__device__ __forceinline__ void add4(float4& a, const float4 v) {
  a.x += v.x, a.y += v.y, a.z += v.z, a.w += v.w;
}

// v4: grid-stride over float4s with 4 loads in flight per thread (16 independent running sums,
// no dependency between the loads of one iteration). The scalar head (before the first 16-byte
// boundary: none for an image row, whose base is 256-byte aligned) and tail (n4 * 4 to n, < 4
// elements) go to the first threads of block 0. One partial per block into `partials`.
__global__ void reduce_v4_multi_elem_kernel(const float* __restrict__ x, long long n,
                                            float* __restrict__ partials) {
  const long long align = ((16 - (reinterpret_cast<uintptr_t>(x) & 15)) & 15) / 4;
  const long long head = align < n ? align : n;
  const float4* x4 = reinterpret_cast<const float4*>(x + head);
  const long long n4 = (n - head) / 4;
  const long long tail = head + 4 * n4;  // [tail, n): the last n - tail < 4 elements
  const long long stride = (long long)gridDim.x * blockDim.x;
  const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  float4 a = make_float4(0.0f, 0.0f, 0.0f, 0.0f), b = a, c = a, d = a;
  long long i = t;
  for (; i + 3 * stride < n4; i += 4 * stride) {
    const float4 v0 = __ldg(x4 + i), v1 = __ldg(x4 + i + stride);
    const float4 v2 = __ldg(x4 + i + 2 * stride), v3 = __ldg(x4 + i + 3 * stride);
    add4(a, v0), add4(b, v1), add4(c, v2), add4(d, v3);
  }
  for (; i < n4; i += stride) add4(a, __ldg(x4 + i));  // at most 3 more
  float s = (((a.x + a.y) + (a.z + a.w)) + ((b.x + b.y) + (b.z + b.w))) +
            (((c.x + c.y) + (c.z + c.w)) + ((d.x + d.y) + (d.z + d.w)));
  if (t < head) s += x[t];
  if (t < n - tail) s += x[tail + t];
  s = block_sum(s);
  if (threadIdx.x == 0) partials[blockIdx.x] = s;
}

// v4's second pass, one block of REDUCE_FINAL_THREADS: the partials in a fixed order.
__global__ void reduce_final_kernel(const float* __restrict__ partials, int g, float* out) {
  float s = 0.0f;
  for (int i = threadIdx.x; i < g; i += blockDim.x) s += partials[i];
  s = block_sum(s);
  if (threadIdx.x == 0) *out = s;
}

// ---- launchers -------------------------------------------------------------------------------

struct ReduceIo {
  const float* x;
  long long n;
  float* out;
};

static ReduceIo reduce_io(const StageArgs& a) {
  return {a.in[0].view<const float>().row(0), array_len(a.in[0].desc),
          a.out[0].view<float>().row(0)};
}

// v1..v3: one thread per element. n <= 2^30, so the index fits an int; the grid (<= 2^24
// blocks of 64) fits grid.x.
static void launch_one_per_thread(LaunchContext& ctx, const StageArgs& a, const char* name,
                                  void (*kernel)(const float*, int, float*), size_t smem) {
  const ReduceIo io = reduce_io(a);
  LAB_CUDA_CHECK(cudaMemsetAsync(io.out, 0, sizeof(float), ctx.stream()));  // atomics add to it
  launch(ctx, name, kernel, dim3(unsigned((io.n + a.block.x - 1) / a.block.x)), dim3(a.block.x),
         smem, io.x, int(io.n), io.out);
}

static void launch_v1(LaunchContext& ctx, const StageArgs& a) {
  launch_one_per_thread(ctx, a, "reduce_v1_atomic", reduce_v1_atomic_kernel, 0);
}
static void launch_v2(LaunchContext& ctx, const StageArgs& a) {
  launch_one_per_thread(ctx, a, "reduce_v2_smem_tree", reduce_v2_smem_tree_kernel,
                        sizeof(float) * size_t(a.block.x));
}
static void launch_v3(LaunchContext& ctx, const StageArgs& a) {
  launch_one_per_thread(ctx, a, "reduce_v3_warp_shuffle", reduce_v3_warp_shuffle_kernel, 0);
}

static void launch_v4(LaunchContext& ctx, const StageArgs& a) {
  const ReduceIo io = reduce_io(a);
  const int threads = a.block.x;
  int per_sm = 0;  // host-side occupancy calculation, no device round trip
  LAB_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, reduce_v4_multi_elem_kernel,
                                                               threads, 0));
  const int g = int(reduce_v4_grid(io.n, threads, per_sm));
  auto* partials = static_cast<float*>(ctx.scratch(sizeof(float) * size_t(g), 0));
  launch(ctx, "reduce_v4_multi_elem", reduce_v4_multi_elem_kernel, dim3(unsigned(g)), dim3(threads),
         0, io.x, io.n, partials);
  launch(ctx, "reduce_final", reduce_final_kernel, dim3(1), dim3(REDUCE_FINAL_THREADS), 0,
         static_cast<const float*>(partials), g, io.out);
}

static void launch_cub(LaunchContext& ctx, const StageArgs& a) {
  const ReduceIo io = reduce_io(a);
  size_t temp_bytes = 0;  // the size query runs on the host only
  LAB_CUDA_CHECK(
      cub::DeviceReduce::Sum(nullptr, temp_bytes, io.x, io.out, int(io.n), ctx.stream()));
  void* temp = ctx.scratch(temp_bytes, 0);
  library_call(ctx, "cub::DeviceReduce::Sum", [&] {
    return cub::DeviceReduce::Sum(temp, temp_bytes, io.x, io.out, int(io.n), ctx.stream());
  });
}

// thrust::reduce returns the sum by value, so it copies it to the host and waits for the
// stream: a round trip the API forces (this variant cannot be captured in a CUDA graph). The
// value then goes back into the output from the host stack: a copy from pageable memory
// returns only once the source has been read, so `sum` may go out of scope after it. Both are
// timed as one record: they are what this variant costs.
static void launch_thrust(LaunchContext& ctx, const StageArgs& a) {
  const ReduceIo io = reduce_io(a);
  ThrustScratch alloc{&ctx};
  library_call(ctx, "thrust::reduce + copy back", [&] {
    const float sum =
        thrust::reduce(thrust::cuda::par_nosync(alloc).on(ctx.stream()), io.x, io.x + io.n, 0.0f);
    return cudaMemcpyAsync(io.out, &sum, sizeof(float), cudaMemcpyHostToDevice, ctx.stream());
  });
}

// ---- variant table ---------------------------------------------------------------------------

OpDef reduce_op(const OpLookup&) {
  const std::vector<Block> blocks = {{64, 1}, {128, 1}, {256, 1}, {512, 1}, {1024, 1}};
  OpDef op;
  op.name = "reduce";
  op.summary = "sum of a float array: atomics, shared-memory tree, shuffles, float4 grid-stride";
  op.inputs = {"input"};
  op.outputs = {"reduce"};
  op.shape = reduce_shape;
  op.reference = reduce_reference;
  op.compare = reduce_compare;
  op.tol_precise = {0, 0};  // unused: reduce_compare derives the bound from the inputs
  op.tol_fast = {0, 0};
  op.tol_why =
      "|sum - ref| <= (gamma_{h+1} + 2 gamma'_n) sum|x|, gamma_k = k u / (1 - k u), u = 2^-24, "
      "u' = 2^-53: a float sum whose tree has height h errs by <= gamma_h sum|x| (Higham 4.2), "
      "+u for the reference's rounding to float, gamma'_n for its double sum. h per variant: "
      "n - 1 for atomics in any order (v1); 10 + n / 64 for a block tree plus n / B block sums "
      "added by atomics (v2, v3); n / (256 SMs) + SMs / 32 + 32 for v4's per-thread running sums "
      "and trees; n / (1024 SMs) + 2 log2 n + 128 for CUB and Thrust (assumes CUB's two-pass "
      "even-share shape); never more than n - 1. Loose at large n (the true error is a random "
      "walk); fast math changes no add here";
  op.lab_inputs = reduce_inputs;
  op.lab_fill = reduce_fill;
  op.lab_size_help = "N or 2^k: float elements (1 to 2^30), uniform in [0, 1)";
  op.lab_default_size = "2^24";
  op.story =
      "A sum reads each float once and does one add per 4 bytes: the DRAM bandwidth is the "
      "limit, and CUB gets close to it. Adding everything into one address with atomics (v1) "
      "serialises n read-modify-writes in the L2. A tree per block (v2) leaves one atomic per "
      "block; warp shuffles (v3) replace most of its barriers and shared-memory traffic. Both "
      "still launch a thread per element, each with one load in flight, and n / B atomics. "
      "v4 launches only a few blocks per SM, each thread streaming float4 loads, four in "
      "flight, and the blocks' partials are added by a second, tiny pass: that is CUB's recipe, "
      "and it should land within ~10% of CUB at 2^28.";
  // clang-format off
  // H200, 2^28 floats: v4 0.245 ms (4.4 TB/s), CUB 0.244 ms, Thrust 0.271 ms; v3 0.96 ms and v2
  // 1.36 ms at their best block; 2^24: v1 29 ms (2.3 GB/s).
  op.default_variant = "v4_multi_elem";
  op.variants = {
      {"v1_atomic", "every thread atomicAdd's its element into one address: n serialised atomics",
       blocks, {256, 1}, launch_v1, nullptr},
      {"v2_smem_tree", "shared-memory tree per block (sequential addressing), one atomic per block",
       blocks, {256, 1}, launch_v2, nullptr},
      {"v3_warp_shuffle", "warp shuffles instead of the shared-memory tree: 1 barrier, not log2 B",
       blocks, {256, 1}, launch_v3, nullptr},
      {"v4_multi_elem", "few blocks, grid-stride float4 loads (4 in flight), then a 1-block pass",
       blocks, {256, 1}, launch_v4, nullptr},
      {"cub", "cub::DeviceReduce::Sum: the ceiling", {{1, 1}}, {1, 1}, launch_cub, nullptr},
      {"thrust", "thrust::reduce: CUB plus a copy of the sum to the host and back",
       {{1, 1}}, {1, 1}, launch_thrust, nullptr},
  };
  // clang-format on
  op.variants[0].expect =
      "By far the slowest: one address takes all n atomics, processed one after another in the "
      "L2 (roughly one per L2 clock), so the time grows with n at a rate far below bandwidth. "
      "The result's rounding also changes from run to run.";
  op.variants[1].expect =
      "Orders of magnitude faster than v1: B times fewer atomics. Up to 256 threads the n / B "
      "atomics still set the time (it halves as B doubles); at 512 and 1024 the log2(B) "
      "barriers and one load in flight per thread cap it, well below the copy bandwidth.";
  op.variants[2].expect =
      "The same as v2 up to 256 threads, where the n / B atomics set the time (it halves as B "
      "doubles); faster than v2 at 512 and 1024, where v2's log2(B) barriers were the limit. "
      "Still one load in flight per thread: well below the copy bandwidth.";
  op.variants[3].expect =
      "Near the copy bandwidth, within ~10% of CUB at 2^28: 16 bytes per load, 4 loads in flight "
      "per thread, a few hundred partials instead of n / B atomics, and a deterministic result. "
      "At small n the second launch's few microseconds show.";
  op.variants[4].expect =
      "The ceiling: two passes of float4 grid-stride loads, tuned per architecture.";
  op.variants[5].expect =
      "CUB's time plus a device-to-host copy, a stream synchronisation and a host-to-device "
      "copy: tens of microseconds that dominate at small n.";
  op.variants[4].ceiling = true;
  return op;
}

}  // namespace lab::ops::LAB_MATH_NS
