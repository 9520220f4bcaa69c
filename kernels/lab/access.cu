// access: memory coalescing. out[i] = 2 * in[i] over a float array of n elements; every variant
// reads each element once and writes each output once, so the bytes moved are equal and only
// the order in which the threads touch them differs. Exact.
//
// Variants:
//   v1_coalesced  thread t reads in[t], writes out[t]: a warp's 32 loads fall in 128
//                 contiguous bytes, 4 sectors of 32 bytes.
//   v2_strided    the array viewed as R = ceil(n / stride) rows of `stride` elements, walked
//                 column by column: thread t takes element (t % R) * stride + t / R, so
//                 neighbouring threads are `stride` elements apart (data[threadIdx.x * stride]).
//                 t runs over [0, R * stride), a bijection onto [0, R * stride); elements >= n
//                 are skipped, so every i < n is read and written by exactly one thread.
//
// Bench: kernel-lab bench --lab access --sweep-variants --size 2^26 --param access.stride=8
#include <vector>

#include "lab_common.cuh"

namespace lab::ops {

struct AccessParams {
  int stride = 8;
  template <class V>
  void visit(V& v) {
    v("stride", stride, 1, 64, "elements between the addresses of neighbouring threads (v2)");
  }
};

constexpr long long ACCESS_MAX = 1LL << 28;

inline LabSlots access_inputs(const std::string& size) {
  return array_inputs(size, "access", ACCESS_MAX, PixelType::F32);
}

inline std::vector<ImageDesc> access_shape(const std::vector<ImageDesc>& in, const ParamMap&) {
  return {require_array("access", in[0], PixelType::F32, ACCESS_MAX)};
}

inline void access_reference(const StageArgs& a) {
  const float* in = a.in[0].view<const float>().row(0);
  float* out = a.out[0].view<float>().row(0);
  const long long n = array_len(a.in[0].desc);
  for (long long i = 0; i < n; ++i) out[i] = 2.0f * in[i];
}

}  // namespace lab::ops

namespace lab::ops::LAB_MATH_NS {

// ---- kernels ---------------------------------------------------------------------------------

__global__ void access_v1_coalesced_kernel(const float* __restrict__ in, float* __restrict__ out,
                                           int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = 2.0f * in[i];
}

// `rows` = ceil(n / stride); threads t in [0, rows * stride). Neighbouring t (same column
// t / rows) are one row, `stride` elements, apart.
__global__ void access_v2_strided_kernel(const float* __restrict__ in, float* __restrict__ out,
                                         unsigned n, unsigned stride, unsigned rows) {
  const unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= rows * stride) return;
  const unsigned i = (t % rows) * stride + t / rows;
  if (i < n) out[i] = 2.0f * in[i];  // i >= n: the padded tail of the last row
}

// ---- launchers -------------------------------------------------------------------------------

static void access_launch_v1(LaunchContext& ctx, const StageArgs& a) {
  const int n = int(array_len(a.in[0].desc));
  launch(ctx, "access_v1_coalesced", access_v1_coalesced_kernel,
         dim3(unsigned((n + a.block.x - 1) / a.block.x)), dim3(a.block.x), 0,
         a.in[0].view<const float>().row(0), a.out[0].view<float>().row(0), n);
}

static void access_launch_v2(LaunchContext& ctx, const StageArgs& a) {
  const auto p = decode_params<AccessParams>(a.params);
  const unsigned n = unsigned(array_len(a.in[0].desc));  // <= 2^28 (shape)
  const unsigned stride = unsigned(p.stride);
  const unsigned rows = (n + stride - 1) / stride;
  const unsigned threads = rows * stride;  // < n + 64: no overflow
  launch(ctx, "access_v2_strided", access_v2_strided_kernel,
         dim3((threads + a.block.x - 1) / a.block.x), dim3(a.block.x), 0,
         a.in[0].view<const float>().row(0), a.out[0].view<float>().row(0), n, stride, rows);
}

// ---- variant table ---------------------------------------------------------------------------

OpDef access_op(const OpLookup&) {
  const std::vector<Block> blocks = {{64, 1}, {128, 1}, {256, 1}, {512, 1}, {1024, 1}};
  OpDef op;
  op.name = "access";
  op.summary = "out[i] = 2 in[i], read in coalesced or strided order (memory coalescing)";
  op.inputs = {"input"};
  op.outputs = {"access"};
  op.params = param_specs<AccessParams>();
  op.shape = access_shape;
  op.reference = access_reference;
  op.tol_precise = {0, 0};
  op.tol_fast = {0, 0};
  op.tol_why = "2 * x is exact in float (no overflow for inputs in [-1, 1))";
  op.lab_inputs = access_inputs;
  op.lab_fill = fill_uniform_pm1;
  op.lab_size_help = "N or 2^k: float elements (1 to 2^28)";
  op.lab_default_size = "2^24";
  op.story =
      "Memory moves in 32-byte sectors. When the 32 threads of a warp load 32 neighbouring "
      "floats, the hardware fetches 4 sectors, 128 bytes, all of them used. When neighbouring "
      "threads are `stride` floats apart, the same warp load touches up to 32 sectors and uses "
      "4 bytes of each; by the time the rest of a sector is wanted, it has usually left the "
      "cache. Both variants read and write the same bytes, once each: only the pattern "
      "differs. Sweep access.stride (1, 2, 4, 8, 16, 32, 64) and watch v2's GB/s.";
  // clang-format off
  op.variants = {
      {"v1_coalesced", "thread t reads in[t]: each warp load is 4 full sectors",
       blocks, {256, 1}, access_launch_v1, nullptr},
      {"v2_strided", "neighbouring threads `stride` elements apart: up to 32 sectors per warp load",
       blocks, {256, 1}, access_launch_v2, nullptr},
  };
  // clang-format on
  // Measured on an H200, 2^28 elements (2^24 alike), 256 threads: v1 2.68 TB/s (copy 4.2);
  // v2 2.44 (stride 1), 1.47 (2), 0.74 (4), 0.37 (8), 0.26 (16), 0.17 (32), 0.11 (64).
  op.variants[0].expect =
      "~65% of the copy bandwidth on an H200: every sector is used, but one 4-byte load per "
      "thread keeps too few bytes in flight to cover the memory latency. The baseline for v2. "
      "64- and 128-thread blocks are ~3x and ~1.5x slower: with one element per thread, the GPU "
      "cannot start blocks fast enough (~1.6 blocks per ns measured).";
  op.variants[1].expect =
      "stride 1 is v1 (a little slower: the index division). Then the time grows in proportion "
      "to the stride up to 8 (1.6x, 3.3x, 6.6x at 2, 4, 8: a 32-byte sector holds 8 floats, so a "
      "warp load costs `stride` times the sectors), and more slowly beyond (9x, 14x, 23x at 16, "
      "32, 64: a sector per element is the worst sector count, but the accesses spread over "
      "more DRAM bursts and rows per useful byte).";
  op.default_variant = "v1_coalesced";
  return op;
}

}  // namespace lab::ops::LAB_MATH_NS
