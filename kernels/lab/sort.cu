// sort: a uint32 array sorted ascending. Exact.
//
// Variants:
//   v1_bitonic_global  bitonic sort of the array padded to a power of two P with 0xFFFFFFFF
//                      (in scratch): for k = 2, 4, ..., P and j = k/2, ..., 1, one launch that
//                      compare-exchanges every pair (i, i + j). log2(P)(log2(P) + 1) / 2
//                      launches (210 at 2^20), each a full read and write of the array:
//                      O(n log^2 n) traffic.
//   v2_bitonic_smem    the same network, but every step with j below the chunk of 8192
//                      elements a block holds in shared memory runs in one launch per k
//                      (the first: all k up to 8192 at once): 36 launches at 2^20 instead of
//                      210, and most steps never touch DRAM.
//   v3_radix_lsd       LSD radix sort, 4 passes of 8 bits, each a stable counting sort: per-block
//                      digit histograms, a scan of the counts per digit across blocks, then a
//                      scatter where each key's position is the count of smaller digits, of its
//                      digit in earlier blocks, and of its digit earlier in its own block. That
//                      rank comes from __match_any_sync (the lanes of a warp holding the same
//                      digit) and per-warp counters, in element order, so the pass is stable.
//                      O(n) work: 3 array passes per digit.
//   cub                cub::DeviceRadixSort::SortKeys: onesweep radix sort (the ceiling).
//   thrust             copy to the output, then thrust::sort in place (CUB's radix sort
//                      underneath).
//
// Bench: kernel-lab bench --lab sort --sweep-variants --sweep-blocks --size 2^24
#include <cub/device/device_radix_sort.cuh>
#include <thrust/execution_policy.h>
#include <thrust/sort.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "device.h"
#include "lab_common.cuh"

namespace lab::ops {

constexpr long long SORT_MAX = 1LL << 28;

inline LabSlots sort_inputs(const std::string& size) {
  return array_inputs(size, "sort", SORT_MAX, PixelType::U32);
}

// Full-range random keys (the high half of the counter hash: independent of scan's inputs).
inline void sort_fill(uint64_t seed, std::vector<HostImage>& imgs) {
  uint32_t* x = imgs[0].view<uint32_t>().row(0);
  const long long n = array_len(imgs[0].desc());
  for (long long i = 0; i < n; ++i) x[i] = uint32_t(mix64(seed, uint64_t(i)) >> 32);
}

inline std::vector<ImageDesc> sort_shape(const std::vector<ImageDesc>& in, const ParamMap&) {
  return {require_array("sort", in[0], PixelType::U32, SORT_MAX)};
}

inline void sort_reference(const StageArgs& a) {
  const uint32_t* x = a.in[0].view<const uint32_t>().row(0);
  uint32_t* out = a.out[0].view<uint32_t>().row(0);
  const long long n = array_len(a.in[0].desc);
  std::copy(x, x + n, out);
  std::sort(out, out + n);
}

}  // namespace lab::ops

namespace lab::ops::LAB_MATH_NS {

// ---- kernels ---------------------------------------------------------------------------------

constexpr uint32_t SORT_PAD = 0xFFFFFFFFu;  // the largest key: padding sorts to the end
constexpr unsigned SORT_CHUNK = 8192;       // v2: elements a block sorts in shared memory

// The input into the power-of-two work array, padded.
__global__ void sort_pad_copy_kernel(const uint32_t* __restrict__ in, uint32_t* __restrict__ d,
                                     unsigned n, unsigned p) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < p) d[i] = i < n ? in[i] : SORT_PAD;
}

// The first n keys of the sorted work array (the padding is all at the end: no key exceeds it,
// and a key equal to it is the same value).
__global__ void sort_copy_out_kernel(const uint32_t* __restrict__ d, uint32_t* __restrict__ out,
                                     unsigned n) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = d[i];
}

// Pair q of a (k, j) step: the element i with bit j clear and its partner i + j. The pair
// sorts ascending where bit k of i is clear, descending where it is set, so each 2k run is two
// bitonic halves merged into one direction.
__device__ __forceinline__ void bitonic_pair(unsigned q, unsigned j, unsigned& i, unsigned& l) {
  i = ((q & ~(j - 1)) << 1) | (q & (j - 1));
  l = i + j;
}

// v1: one (k, j) step over the whole array, one thread per pair.
__global__ void sort_bitonic_step_kernel(uint32_t* d, unsigned pairs, unsigned j, unsigned k) {
  const unsigned q = blockIdx.x * blockDim.x + threadIdx.x;
  if (q >= pairs) return;
  unsigned i, l;
  bitonic_pair(q, j, i, l);
  const uint32_t a = d[i], b = d[l];
  if ((a > b) == ((i & k) == 0)) d[i] = b, d[l] = a;
}

// v2: the steps (k, j) for k = k_first, 2 k_first, ..., k_last and j from min(k, chunk) / 2 down
// to 1, on one chunk held in shared memory: a pair with j < chunk never leaves its chunk.
// Directions use the global index, so chunks of one 2k run agree.
__global__ void sort_bitonic_smem_kernel(uint32_t* d, unsigned chunk, unsigned k_first,
                                         unsigned k_last) {
  __shared__ uint32_t s[SORT_CHUNK];
  const unsigned base = blockIdx.x * chunk;
  for (unsigned e = threadIdx.x; e < chunk; e += blockDim.x) s[e] = d[base + e];
  for (unsigned k = k_first; k <= k_last; k <<= 1) {
    for (unsigned j = min(k, chunk) >> 1; j > 0; j >>= 1) {
      __syncthreads();
      for (unsigned q = threadIdx.x; q < chunk / 2; q += blockDim.x) {
        unsigned i, l;
        bitonic_pair(q, j, i, l);
        const uint32_t a = s[i], b = s[l];
        if ((a > b) == (((base + i) & k) == 0)) s[i] = b, s[l] = a;
      }
    }
  }
  __syncthreads();
  for (unsigned e = threadIdx.x; e < chunk; e += blockDim.x) d[base + e] = s[e];
}

constexpr unsigned RADIX = 256;  // 8-bit digits
constexpr int RADIX_ITEMS = 8;   // v3: keys per thread per sub-tile
constexpr unsigned SORT_FULL = 0xffffffffu;

__device__ __forceinline__ unsigned digit_of(uint32_t key, unsigned shift) {
  return (key >> shift) & (RADIX - 1);
}

__device__ __forceinline__ uint32_t warp_inclusive_sum(uint32_t v, unsigned lane) {
#pragma unroll
  for (unsigned o = 1; o < 32; o <<= 1) {
    const uint32_t up = __shfl_up_sync(SORT_FULL, v, o);
    if (lane >= o) v += up;
  }
  return v;
}

// Exclusive scan over the block (blockDim.x a multiple of 32); `total` gets the block's sum.
// Ends with a barrier, so it may be called in a loop.
__device__ uint32_t block_exclusive_sum(uint32_t v, uint32_t& total) {
  __shared__ uint32_t warp_total[32];
  const unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  const uint32_t incl = warp_inclusive_sum(v, lane);
  if (lane == 31) warp_total[warp] = incl;
  __syncthreads();
  if (warp == 0) {
    const uint32_t w = lane < warps ? warp_total[lane] : 0u;
    warp_total[lane] = warp_inclusive_sum(w, lane);
  }
  __syncthreads();
  const uint32_t before = warp ? warp_total[warp - 1] : 0u;
  total = warp_total[warps - 1];
  __syncthreads();
  return before + incl - v;
}

// v3, step 1: block b's segment [b seg, min(n, (b + 1) seg)) counted per digit, stored
// digit-major: counts[digit * blocks + b].
__global__ void sort_radix_hist_kernel(const uint32_t* __restrict__ in, unsigned n, unsigned seg,
                                       unsigned shift, uint32_t* __restrict__ counts) {
  __shared__ uint32_t h[RADIX];
  for (unsigned r = threadIdx.x; r < RADIX; r += blockDim.x) h[r] = 0;
  __syncthreads();
  const unsigned lo = blockIdx.x * seg, hi = min(n, lo + seg);
  for (unsigned i = lo + threadIdx.x; i < hi; i += blockDim.x)
    atomicAdd(&h[digit_of(in[i], shift)], 1u);
  __syncthreads();
  for (unsigned r = threadIdx.x; r < RADIX; r += blockDim.x)
    counts[r * gridDim.x + blockIdx.x] = h[r];
}

// v3, step 2: block r (one per digit) turns its row of counts into exclusive offsets across
// blocks, in place, and writes the digit's total.
__global__ void sort_radix_scan_kernel(uint32_t* counts, unsigned blocks,
                                       uint32_t* __restrict__ digit_total) {
  uint32_t* row = counts + blockIdx.x * blocks;
  uint32_t carry = 0;
  for (unsigned c = 0; c < blocks; c += blockDim.x) {
    const unsigned i = c + threadIdx.x;
    const uint32_t v = i < blocks ? row[i] : 0u;
    uint32_t total;
    const uint32_t before = block_exclusive_sum(v, total);
    if (i < blocks) row[i] = carry + before;
    carry += total;
  }
  if (threadIdx.x == 0) digit_total[blockIdx.x] = carry;
}

// v3, step 3: the stable scatter of block b's segment, in sub-tiles of RADIX_ITEMS * blockDim.x
// keys. Warp w takes 32 * RADIX_ITEMS consecutive keys of the sub-tile, 32 per round, so
// element order is (warp, round, lane). A key's destination is
//   next[d]          where the block's next key of digit d goes: the keys of smaller digits
//                    (all blocks), of digit d in earlier blocks and earlier sub-tiles;
//   + the keys of digit d in earlier warps of this sub-tile (exclusive sum over warps);
//   + the keys of digit d earlier in this warp's part: earlier rounds (the warp's counter) and
//     lower lanes of this round (__match_any_sync: the lanes holding the same digit).
// Dynamic shared memory: next[256], then cnt[warps][256].
__global__ void sort_radix_scatter_kernel(const uint32_t* __restrict__ in,
                                          uint32_t* __restrict__ out, unsigned n, unsigned seg,
                                          unsigned shift, const uint32_t* __restrict__ offsets,
                                          const uint32_t* __restrict__ digit_total) {
  extern __shared__ uint32_t sm[];
  uint32_t* next = sm;
  uint32_t* cnt = sm + RADIX;
  const unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  // next[d] = (keys of digits < d) + (keys of digit d in blocks < b).
  uint32_t carry = 0;
  for (unsigned c = 0; c < RADIX; c += blockDim.x) {
    const unsigned r = c + threadIdx.x;
    uint32_t total;
    const uint32_t below = block_exclusive_sum(r < RADIX ? digit_total[r] : 0u, total);
    if (r < RADIX) next[r] = carry + below + offsets[r * gridDim.x + blockIdx.x];
    carry += total;
  }
  const unsigned lo = blockIdx.x * seg, hi = min(n, lo + seg);
  const unsigned lanes_below = (1u << lane) - 1;
  uint32_t* my_cnt = cnt + warp * RADIX;
  for (unsigned sub = lo; sub < hi; sub += RADIX_ITEMS * blockDim.x) {
    for (unsigned e = threadIdx.x; e < warps * RADIX; e += blockDim.x) cnt[e] = 0;
    __syncthreads();
    uint32_t key[RADIX_ITEMS], rank[RADIX_ITEMS];
    const unsigned first = sub + warp * 32 * RADIX_ITEMS + lane;
#pragma unroll
    for (int r = 0; r < RADIX_ITEMS; ++r) {
      const unsigned i = first + 32 * r;
      const bool valid = i < hi;
      key[r] = valid ? in[i] : 0u;
      const unsigned dg = digit_of(key[r], shift);
      // Every lane takes part; lanes past the end form a group of their own (no digit is ~0).
      const unsigned peers = __match_any_sync(SORT_FULL, valid ? dg : ~0u);
      const uint32_t earlier = valid ? my_cnt[dg] : 0u;
      __syncwarp();  // all lanes have read the counter before its update
      if (valid && lane == unsigned(__ffs(peers) - 1)) my_cnt[dg] = earlier + __popc(peers);
      __syncwarp();
      rank[r] = earlier + __popc(peers & lanes_below);
    }
    __syncthreads();
    // Per digit: each warp's count becomes its start position, and next[d] moves past the
    // sub-tile's keys of digit d.
    for (unsigned dg = threadIdx.x; dg < RADIX; dg += blockDim.x) {
      uint32_t pos = next[dg];
      for (unsigned w = 0; w < warps; ++w) {
        const uint32_t c = cnt[w * RADIX + dg];
        cnt[w * RADIX + dg] = pos;
        pos += c;
      }
      next[dg] = pos;
    }
    __syncthreads();
#pragma unroll
    for (int r = 0; r < RADIX_ITEMS; ++r)
      if (first + 32 * r < hi) out[my_cnt[digit_of(key[r], shift)] + rank[r]] = key[r];
    __syncthreads();  // cnt is cleared for the next sub-tile
  }
}

// ---- launchers -------------------------------------------------------------------------------

struct SortIo {
  const uint32_t* in;
  uint32_t* out;
  unsigned n;
};

static SortIo sort_io(const StageArgs& a) {
  return {a.in[0].view<const uint32_t>().row(0), a.out[0].view<uint32_t>().row(0),
          unsigned(array_len(a.in[0].desc))};
}

static unsigned pow2_at_least(unsigned n) {
  unsigned p = 1;
  while (p < n) p <<= 1;
  return p;
}

static unsigned blocks_for(unsigned items, unsigned threads) {
  return (items + threads - 1) / threads;
}

// The work array of P keys in scratch, the input copied and padded into it.
static uint32_t* bitonic_work(LaunchContext& ctx, const SortIo& io, unsigned p, unsigned threads) {
  auto* d = static_cast<uint32_t*>(ctx.scratch(sizeof(uint32_t) * p, 0));
  launch(ctx, "sort_pad_copy", sort_pad_copy_kernel, dim3(blocks_for(p, threads)), dim3(threads), 0,
         io.in, d, io.n, p);
  return d;
}

static void bitonic_copy_out(LaunchContext& ctx, const SortIo& io, const uint32_t* d,
                             unsigned threads) {
  launch(ctx, "sort_copy_out", sort_copy_out_kernel, dim3(blocks_for(io.n, threads)), dim3(threads),
         0, d, io.out, io.n);
}

static void bitonic_step(LaunchContext& ctx, uint32_t* d, unsigned p, unsigned j, unsigned k,
                         unsigned threads) {
  launch(ctx, "sort_bitonic_step", sort_bitonic_step_kernel, dim3(blocks_for(p / 2, threads)),
         dim3(threads), 0, d, p / 2, j, k);
}

static void launch_v1(LaunchContext& ctx, const StageArgs& a) {
  const SortIo io = sort_io(a);
  const unsigned threads = unsigned(a.block.x), p = pow2_at_least(io.n);
  uint32_t* d = bitonic_work(ctx, io, p, threads);
  for (unsigned k = 2; k <= p; k <<= 1)
    for (unsigned j = k >> 1; j > 0; j >>= 1) bitonic_step(ctx, d, p, j, k, threads);
  bitonic_copy_out(ctx, io, d, threads);
}

static void launch_v2(LaunchContext& ctx, const StageArgs& a) {
  const SortIo io = sort_io(a);
  const unsigned threads = unsigned(a.block.x), p = pow2_at_least(io.n);
  const unsigned chunk = std::min(p, SORT_CHUNK);
  uint32_t* d = bitonic_work(ctx, io, p, threads);
  const dim3 chunks(p / chunk);
  if (chunk > 1)  // every k up to the chunk: each chunk sorted, alternately up and down
    launch(ctx, "sort_bitonic_smem(sort chunks)", sort_bitonic_smem_kernel, chunks, dim3(threads),
           0, d, chunk, 2u, chunk);
  for (unsigned k = 2 * chunk; k <= p; k <<= 1) {
    for (unsigned j = k >> 1; j >= chunk; j >>= 1) bitonic_step(ctx, d, p, j, k, threads);
    launch(ctx, "sort_bitonic_smem(merge)", sort_bitonic_smem_kernel, chunks, dim3(threads), 0, d,
           chunk, k, k);
  }
  bitonic_copy_out(ctx, io, d, threads);
}

static size_t radix_smem(unsigned threads) {
  return sizeof(uint32_t) * RADIX * (1 + threads / 32);
}

// Four 8-bit passes, ping-ponging between the output and one scratch array so that the last
// pass lands in the output: in -> tmp -> out -> tmp -> out. Per pass: histogram, per-digit scan
// of the counts, scatter. The grid: a few blocks per SM (the scatter's occupancy), each block a
// contiguous segment of whole sub-tiles, processed in order.
static void launch_v3(LaunchContext& ctx, const StageArgs& a) {
  const SortIo io = sort_io(a);
  const unsigned threads = unsigned(a.block.x), sub = RADIX_ITEMS * threads;
  const size_t smem = radix_smem(threads);
  int per_sm = 0;  // host-side occupancy calculation, no device round trip
  LAB_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, sort_radix_scatter_kernel,
                                                               int(threads), smem));
  const unsigned cap = unsigned(std::max(1, per_sm) * std::max(1, device_info().sms));
  const unsigned want = std::min(blocks_for(io.n, sub), cap);
  const unsigned seg = blocks_for(blocks_for(io.n, want), sub) * sub;  // whole sub-tiles
  const unsigned blocks = blocks_for(io.n, seg);
  auto* tmp = static_cast<uint32_t*>(ctx.scratch(sizeof(uint32_t) * io.n, 0));
  auto* counts = static_cast<uint32_t*>(ctx.scratch(sizeof(uint32_t) * RADIX * blocks, 1));
  auto* totals = static_cast<uint32_t*>(ctx.scratch(sizeof(uint32_t) * RADIX, 2));
  const uint32_t* src = io.in;
  for (unsigned pass = 0; pass < 4; ++pass) {
    uint32_t* dst = pass % 2 == 0 ? tmp : io.out;
    const unsigned shift = 8 * pass;
    launch(ctx, "sort_radix_hist", sort_radix_hist_kernel, dim3(blocks), dim3(threads), 0, src,
           io.n, seg, shift, counts);
    launch(ctx, "sort_radix_scan", sort_radix_scan_kernel, dim3(RADIX), dim3(256), 0, counts,
           blocks, totals);
    launch(ctx, "sort_radix_scatter", sort_radix_scatter_kernel, dim3(blocks), dim3(threads), smem,
           src, dst, io.n, seg, shift, static_cast<const uint32_t*>(counts),
           static_cast<const uint32_t*>(totals));
    src = dst;
  }
}

static void launch_cub(LaunchContext& ctx, const StageArgs& a) {
  const SortIo io = sort_io(a);
  size_t temp_bytes = 0;  // the size query runs on the host only
  LAB_CUDA_CHECK(cub::DeviceRadixSort::SortKeys(nullptr, temp_bytes, io.in, io.out, int(io.n), 0,
                                                32, ctx.stream()));
  void* temp = ctx.scratch(temp_bytes, 0);
  library_call(ctx, "cub::DeviceRadixSort::SortKeys", [&] {
    return cub::DeviceRadixSort::SortKeys(temp, temp_bytes, io.in, io.out, int(io.n), 0, 32,
                                          ctx.stream());
  });
}

static void launch_thrust(LaunchContext& ctx, const StageArgs& a) {
  const SortIo io = sort_io(a);
  library_call(ctx, "copy input to output", [&] {
    return cudaMemcpyAsync(io.out, io.in, sizeof(uint32_t) * io.n, cudaMemcpyDeviceToDevice,
                           ctx.stream());
  });
  ThrustScratch alloc{&ctx};
  library_call(ctx, "thrust::sort", [&] {
    thrust::sort(thrust::cuda::par_nosync(alloc).on(ctx.stream()), io.out, io.out + io.n);
    return cudaGetLastError();  // Thrust throws on its own errors
  });
}

// ---- variant table ---------------------------------------------------------------------------

OpDef sort_op(const OpLookup&) {
  const std::vector<Block> blocks = {{64, 1}, {128, 1}, {256, 1}, {512, 1}, {1024, 1}};
  OpDef op;
  op.name = "sort";
  op.summary = "u32 keys ascending: bitonic networks, an LSD radix sort, CUB";
  op.inputs = {"input"};
  op.outputs = {"sort"};
  op.shape = sort_shape;
  op.reference = sort_reference;
  op.tol_precise = {0, 0};
  op.tol_fast = {0, 0};
  op.tol_why = "integer keys moved, never computed: exact";
  op.lab_inputs = sort_inputs;
  op.lab_fill = sort_fill;
  op.lab_size_help = "N or 2^k: u32 keys (1 to 2^28), full-range random";
  op.lab_default_size = "2^20";
  op.story =
      "Comparison sorts that suit a GPU are sorting networks: a fixed pattern of compare-"
      "exchanges, the same for any data, so every thread knows its partner without looking. "
      "Bitonic sort needs log2(n)(log2(n) + 1) / 2 rounds of n / 2 exchanges: run one launch "
      "per round from global memory (v1) and it is bound by launches and DRAM passes; run the "
      "rounds whose pairs stay within a block in shared memory (v2) and most passes disappear, "
      "but the work stays O(n log^2 n). Radix sort does O(n) work: 4 stable counting passes "
      "over 8-bit digits (v3), each a histogram, a scan and a scatter. CUB's onesweep radix "
      "sort is the ceiling: one histogram pass for all digits, then one read and one write per "
      "digit, with keys ranked and reordered in shared memory so the writes are coalesced.";
  // clang-format off
  // H200, best block, 2^20 / 2^24 keys: v1 1.05 / 10.9 ms, v2 0.30 / 4.29 ms, v3 0.157 / 1.62
  // ms, CUB 0.079 / 0.462 ms, Thrust 0.091 / 0.456 ms.
  op.default_variant = "v3_radix_lsd";
  op.variants = {
      {"v1_bitonic_global", "bitonic network, one launch per (k, j) step from global memory",
       blocks, {256, 1}, launch_v1, nullptr},
      {"v2_bitonic_smem", "steps with j < 8192 in shared memory, one launch per k: far fewer "
       "launches and DRAM passes", blocks, {512, 1}, launch_v2, nullptr},
      {"v3_radix_lsd", "LSD radix, 4 x 8 bits: histogram, per-digit scan, stable scatter "
       "(__match_any_sync ranks)", blocks, {512, 1}, launch_v3, nullptr},
      {"cub", "cub::DeviceRadixSort::SortKeys: onesweep radix sort (the ceiling)",
       {{1, 1}}, {1, 1}, launch_cub, nullptr},
      {"thrust", "copy to the output, thrust::sort in place (CUB radix sort underneath)",
       {{1, 1}}, {1, 1}, launch_thrust, nullptr},
  };
  // clang-format on
  op.variants[0].expect =
      "Slowest at large n: log2(P)(log2(P)+1)/2 launches (210 at 2^20, 406 at 2^28), each "
      "reading and writing the whole array; at small n the launch overhead alone dominates.";
  op.variants[1].expect =
      "Several times faster than v1: 36 launches instead of 210 at 2^20, most rounds in shared "
      "memory. Still O(n log^2 n) compare-exchanges, so it falls further behind radix as n grows.";
  op.variants[2].expect =
      "Faster than the bitonic sorts from about 2^20 up: 12 launches, 3 array passes per digit. "
      "A few times CUB's time: the scatter writes each key on its own (up to 32 sectors per "
      "warp instruction) and each pass has its own histogram read.";
  op.variants[3].expect =
      "The ceiling: about 5 array passes in all (one histogram pass, 4 read+write passes).";
  op.variants[4].expect = "CUB's time plus a device-to-device copy of the input.";
  op.variants[3].ceiling = true;
  return op;
}

}  // namespace lab::ops::LAB_MATH_NS
