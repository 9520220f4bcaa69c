// scan: the inclusive prefix sum of a uint32 array, out[i] = in[0] + ... + in[i] mod 2^32.
// Exact: unsigned adds wrap identically in every order.
//
// The hand-written variants share one multi-block structure, scan-then-propagate: (1) each
// block scans its tile and writes the tile's total to scratch; (2) the totals are scanned the
// same way, recursively, until they fit one tile; (3) each tile but the first adds the scanned
// total of the tiles before it. Phases 1 and 3 each read and write the array: 4 n words moved,
// against 2 n for CUB's single pass. Only the in-block scan changes from step to step:
//
// Variants:
//   v1_hillis_steele  one element per thread; Hillis-Steele in shared memory, double buffered:
//                     log2(B) steps, each adding the element `offset` back: O(B log B) adds and
//                     a barrier per step.
//   v2_blelloch       one element per thread; the work-efficient up-sweep (a reduction tree) and
//                     down-sweep (exclusive prefixes pushed back down): O(B) adds but 2 log2(B)
//                     barriers; shared indices padded by one word per 32 against bank conflicts.
//   v3_warp_shuffle   one element per thread; __shfl_up_sync scans inside each warp, a scan of
//                     the warp totals by warp 0, two barriers: no shared-memory scan at all.
//   v4_multi_elem     16 consecutive elements per thread, loaded as four 16-byte vectors and
//                     scanned serially in registers; v3's block scan over the thread totals
//                     only. 16x fewer tile totals (the levels above phase 1 nearly vanish) and
//                     16 elements in flight per thread.
//   cub               cub::DeviceScan::InclusiveSum: one pass with decoupled look-back, 2 n words
//                     (the ceiling).
//   thrust            thrust::inclusive_scan (CUB underneath).
//
// Bench: kernel-lab bench --lab scan --sweep-variants --sweep-blocks --size 2^28
#include <cub/device/device_scan.cuh>
#include <thrust/execution_policy.h>
#include <thrust/scan.h>

#include <cstdint>
#include <vector>

#include "lab_common.cuh"

namespace lab::ops {

constexpr long long SCAN_MAX = 1LL << 28;

inline LabSlots scan_inputs(const std::string& size) {
  return array_inputs(size, "scan", SCAN_MAX, PixelType::U32);
}

// Full-range 32-bit values: the running sum wraps around 2^32 many times (exact either way).
inline void scan_fill(uint64_t seed, std::vector<HostImage>& imgs) {
  uint32_t* x = imgs[0].view<uint32_t>().row(0);
  const long long n = array_len(imgs[0].desc());
  for (long long i = 0; i < n; ++i) x[i] = uint32_t(mix64(seed, uint64_t(i)));
}

inline std::vector<ImageDesc> scan_shape(const std::vector<ImageDesc>& in, const ParamMap&) {
  return {require_array("scan", in[0], PixelType::U32, SCAN_MAX)};
}

inline void scan_reference(const StageArgs& a) {
  const uint32_t* x = a.in[0].view<const uint32_t>().row(0);
  uint32_t* out = a.out[0].view<uint32_t>().row(0);
  const long long n = array_len(a.in[0].desc);
  uint32_t s = 0;
  for (long long i = 0; i < n; ++i) out[i] = s += x[i];
}

}  // namespace lab::ops

namespace lab::ops::LAB_MATH_NS {

// ---- kernels ---------------------------------------------------------------------------------
//
// Every tile kernel: scan(in, out, n, totals). Block b scans elements [b T, b T + T) of `in`
// (T = its tile) into `out`, and, when `totals` is not null, writes the tile's total (elements
// past n count as 0) to totals[b]. `in` may equal `out` (the totals are scanned in place): each
// thread reads its own elements before the block's first barrier and writes them after its
// last, and no other thread touches them, so no __restrict__ on these two.

constexpr unsigned SCAN_FULL = 0xffffffffu;
constexpr int SCAN_ITEMS = 16;  // v4: elements per thread

// v1: Hillis-Steele. After step s, element t holds the sum of the 2^s elements ending at t.
// Double buffered: each step reads one buffer and writes the other, so one barrier per step
// orders it (in place, a thread could overwrite a value its neighbour has not read yet).
__global__ void scan_v1_hillis_steele_kernel(const uint32_t* in, uint32_t* out, unsigned n,
                                             uint32_t* totals) {
  extern __shared__ uint32_t buf[];  // 2 * blockDim.x
  const unsigned t = threadIdx.x, nt = blockDim.x;
  const unsigned i = blockIdx.x * nt + t;
  uint32_t* src = buf;
  uint32_t* dst = buf + nt;
  src[t] = i < n ? in[i] : 0u;
  __syncthreads();
  for (unsigned off = 1; off < nt; off <<= 1) {
    dst[t] = t >= off ? src[t] + src[t - off] : src[t];
    __syncthreads();
    uint32_t* tmp = src;
    src = dst, dst = tmp;
  }
  const uint32_t v = src[t];
  if (i < n) out[i] = v;
  if (totals && t == nt - 1) totals[blockIdx.x] = v;
}

// Shared index of element i, one word of padding per 32: the tree's power-of-two strides then
// spread over the banks instead of landing on a few.
LAB_HD unsigned scan_pad(unsigned i) {
  return i + (i >> 5);
}

// v2: Blelloch. Up-sweep: node k = (t + 1) 2d - 1 adds its left child k - d, leaving subtree
// sums (the root holds the total). The root is cleared, then the down-sweep hands each left
// child its parent's prefix and each right child parent + left sum: exclusive prefixes. The
// inclusive value adds the thread's own element. blockDim.x: a power of two.
__global__ void scan_v2_blelloch_kernel(const uint32_t* in, uint32_t* out, unsigned n,
                                        uint32_t* totals) {
  extern __shared__ uint32_t s[];  // scan_pad(blockDim.x - 1) + 1 words
  const unsigned t = threadIdx.x, nt = blockDim.x;
  const unsigned i = blockIdx.x * nt + t;
  const uint32_t x = i < n ? in[i] : 0u;
  s[scan_pad(t)] = x;
  for (unsigned d = 1; d < nt; d <<= 1) {
    __syncthreads();
    const unsigned k = (t + 1) * 2 * d - 1;
    if (k < nt) s[scan_pad(k)] += s[scan_pad(k - d)];
  }
  if (t == 0) s[scan_pad(nt - 1)] = 0u;  // thread 0 made the last up-sweep write itself
  for (unsigned d = nt >> 1; d > 0; d >>= 1) {
    __syncthreads();
    const unsigned k = (t + 1) * 2 * d - 1;
    if (k < nt) {
      const uint32_t left = s[scan_pad(k - d)];
      s[scan_pad(k - d)] = s[scan_pad(k)];
      s[scan_pad(k)] += left;
    }
  }
  __syncthreads();
  const uint32_t v = s[scan_pad(t)] + x;
  if (i < n) out[i] = v;
  if (totals && t == nt - 1) totals[blockIdx.x] = v;
}

__device__ __forceinline__ uint32_t warp_inclusive_scan(uint32_t v, unsigned lane) {
#pragma unroll
  for (unsigned o = 1; o < 32; o <<= 1) {
    const uint32_t up = __shfl_up_sync(SCAN_FULL, v, o);
    if (lane >= o) v += up;
  }
  return v;
}

// Inclusive scan over the block (blockDim.x: a multiple of 32, at most 1024): shuffle scans
// per warp, warp 0 scans the warp totals, each warp adds the totals of the warps before it.
// Once per kernel (the shared array is not guarded for reuse).
__device__ __forceinline__ uint32_t block_inclusive_scan(uint32_t v) {
  __shared__ uint32_t warp_total[32];
  const unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_inclusive_scan(v, lane);
  if (lane == 31) warp_total[warp] = v;
  __syncthreads();
  if (warp == 0) {
    const uint32_t w = lane < (blockDim.x >> 5) ? warp_total[lane] : 0u;
    warp_total[lane] = warp_inclusive_scan(w, lane);  // all reads precede the shuffles' sync
  }
  __syncthreads();
  return warp ? v + warp_total[warp - 1] : v;
}

// v3: no shared-memory scan, only shuffles and one small array.
__global__ void scan_v3_warp_shuffle_kernel(const uint32_t* in, uint32_t* out, unsigned n,
                                            uint32_t* totals) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  const uint32_t v = block_inclusive_scan(i < n ? in[i] : 0u);
  if (i < n) out[i] = v;
  if (totals && threadIdx.x == blockDim.x - 1) totals[blockIdx.x] = v;
}

// v4: thread t owns elements [base, base + 16), base = b T + 16 t, T = 16 blockDim.x. Full,
// 16-byte-aligned runs move as four uint4s (base is a multiple of 16 elements, so in + base is
// aligned when `in` is); the run that crosses n goes element by element.
__global__ void scan_v4_multi_elem_kernel(const uint32_t* in, uint32_t* out, unsigned n,
                                          uint32_t* totals) {
  const unsigned base = (blockIdx.x * blockDim.x + threadIdx.x) * SCAN_ITEMS;
  const bool aligned =
      ((reinterpret_cast<uintptr_t>(in) | reinterpret_cast<uintptr_t>(out)) & 15) == 0;
  const bool vec = aligned && base + SCAN_ITEMS <= n;
  uint32_t v[SCAN_ITEMS];
  if (vec) {
#pragma unroll
    for (int q = 0; q < SCAN_ITEMS / 4; ++q) {
      const uint4 u = reinterpret_cast<const uint4*>(in + base)[q];
      v[4 * q] = u.x, v[4 * q + 1] = u.y, v[4 * q + 2] = u.z, v[4 * q + 3] = u.w;
    }
  } else {
#pragma unroll
    for (int k = 0; k < SCAN_ITEMS; ++k) v[k] = base + k < n ? in[base + k] : 0u;
  }
#pragma unroll
  for (int k = 1; k < SCAN_ITEMS; ++k) v[k] += v[k - 1];  // serial scan in registers
  const uint32_t mine = v[SCAN_ITEMS - 1];
  const uint32_t before = block_inclusive_scan(mine) - mine;  // the threads before this one
#pragma unroll
  for (int k = 0; k < SCAN_ITEMS; ++k) v[k] += before;
  if (vec) {
#pragma unroll
    for (int q = 0; q < SCAN_ITEMS / 4; ++q)
      reinterpret_cast<uint4*>(out + base)[q] =
          make_uint4(v[4 * q], v[4 * q + 1], v[4 * q + 2], v[4 * q + 3]);
  } else {
#pragma unroll
    for (int k = 0; k < SCAN_ITEMS; ++k)
      if (base + k < n) out[base + k] = v[k];
  }
  if (totals && threadIdx.x == blockDim.x - 1) totals[blockIdx.x] = v[SCAN_ITEMS - 1];
}

// Phase 3: element i of tile b >= 1 adds offs[b - 1], the scanned total of tiles 0..b-1. Four
// elements per thread from element `tile` on; the tile is a multiple of 4, so the four share a
// tile, and a full aligned group moves as one uint4.
__global__ void scan_add_offsets_kernel(uint32_t* out, unsigned n,
                                        const uint32_t* __restrict__ offs, unsigned tile) {
  const unsigned i = tile + 4 * (blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= n) return;
  const uint32_t o = offs[i / tile - 1];
  if (i + 4 <= n && (reinterpret_cast<uintptr_t>(out) & 15) == 0) {
    uint4 u = *reinterpret_cast<const uint4*>(out + i);
    u.x += o, u.y += o, u.z += o, u.w += o;
    *reinterpret_cast<uint4*>(out + i) = u;
  } else {
    for (unsigned k = i; k < i + 4 && k < n; ++k) out[k] += o;
  }
}

// ---- launchers -------------------------------------------------------------------------------

using ScanTileKernel = void (*)(const uint32_t*, uint32_t*, unsigned, uint32_t*);

struct ScanSteps {
  ScanTileKernel kernel;
  const char* tiles_name;            // phase 1 over the array
  const char* totals_name;           // the same kernel over a level of tile totals
  unsigned items;                    // elements per thread
  size_t (*smem)(unsigned threads);  // dynamic shared memory bytes; null: none
};

constexpr unsigned SCAN_ADD_THREADS = 256;

// Scans n elements of `in` into `out` (which may be `in`): phase 1, the totals scanned by the
// same recursion one level up (scratch slot `level`), phase 3. At most 5 levels for 2^28
// elements in tiles of 64.
static void scan_levels(LaunchContext& ctx, const ScanSteps& st, const uint32_t* in, uint32_t* out,
                        unsigned n, unsigned threads, int level) {
  const unsigned tile = threads * st.items;
  const unsigned tiles = (n + tile - 1) / tile;
  const size_t smem = st.smem ? st.smem(threads) : 0;
  const char* name = level == 0 ? st.tiles_name : st.totals_name;
  if (tiles == 1) {
    launch(ctx, name, st.kernel, dim3(1), dim3(threads), smem, in, out, n,
           static_cast<uint32_t*>(nullptr));
    return;
  }
  auto* totals = static_cast<uint32_t*>(ctx.scratch(sizeof(uint32_t) * tiles, level));
  launch(ctx, name, st.kernel, dim3(tiles), dim3(threads), smem, in, out, n, totals);
  scan_levels(ctx, st, totals, totals, tiles, threads, level + 1);
  const unsigned groups = (n - tile + 3) / 4;  // n > tile here
  launch(ctx, "scan_add_offsets", scan_add_offsets_kernel,
         dim3((groups + SCAN_ADD_THREADS - 1) / SCAN_ADD_THREADS), dim3(SCAN_ADD_THREADS), 0, out,
         n, static_cast<const uint32_t*>(totals), tile);
}

static void launch_steps(LaunchContext& ctx, const StageArgs& a, const ScanSteps& st) {
  scan_levels(ctx, st, a.in[0].view<const uint32_t>().row(0), a.out[0].view<uint32_t>().row(0),
              unsigned(array_len(a.in[0].desc)), unsigned(a.block.x), 0);
}

static size_t v1_smem(unsigned threads) {
  return sizeof(uint32_t) * 2 * threads;
}
static size_t v2_smem(unsigned threads) {
  return sizeof(uint32_t) * (scan_pad(threads - 1) + 1);
}

static void launch_v1(LaunchContext& ctx, const StageArgs& a) {
  launch_steps(ctx, a,
               {scan_v1_hillis_steele_kernel, "scan_v1_hillis_steele",
                "scan_v1_hillis_steele(totals)", 1, v1_smem});
}
static void launch_v2(LaunchContext& ctx, const StageArgs& a) {
  launch_steps(
      ctx, a,
      {scan_v2_blelloch_kernel, "scan_v2_blelloch", "scan_v2_blelloch(totals)", 1, v2_smem});
}
static void launch_v3(LaunchContext& ctx, const StageArgs& a) {
  launch_steps(ctx, a,
               {scan_v3_warp_shuffle_kernel, "scan_v3_warp_shuffle", "scan_v3_warp_shuffle(totals)",
                1, nullptr});
}
static void launch_v4(LaunchContext& ctx, const StageArgs& a) {
  launch_steps(ctx, a,
               {scan_v4_multi_elem_kernel, "scan_v4_multi_elem", "scan_v4_multi_elem(totals)",
                SCAN_ITEMS, nullptr});
}

static void launch_cub(LaunchContext& ctx, const StageArgs& a) {
  const uint32_t* in = a.in[0].view<const uint32_t>().row(0);
  uint32_t* out = a.out[0].view<uint32_t>().row(0);
  const int n = int(array_len(a.in[0].desc));
  size_t temp_bytes = 0;  // the size query runs on the host only
  LAB_CUDA_CHECK(cub::DeviceScan::InclusiveSum(nullptr, temp_bytes, in, out, n, ctx.stream()));
  void* temp = ctx.scratch(temp_bytes, 0);
  library_call(ctx, "cub::DeviceScan::InclusiveSum", [&] {
    return cub::DeviceScan::InclusiveSum(temp, temp_bytes, in, out, n, ctx.stream());
  });
}

static void launch_thrust(LaunchContext& ctx, const StageArgs& a) {
  const uint32_t* in = a.in[0].view<const uint32_t>().row(0);
  uint32_t* out = a.out[0].view<uint32_t>().row(0);
  const long long n = array_len(a.in[0].desc);
  ThrustScratch alloc{&ctx};
  library_call(ctx, "thrust::inclusive_scan", [&] {
    thrust::inclusive_scan(thrust::cuda::par_nosync(alloc).on(ctx.stream()), in, in + n, out);
    return cudaGetLastError();  // Thrust throws on its own errors
  });
}

// ---- variant table ---------------------------------------------------------------------------

OpDef scan_op(const OpLookup&) {
  const std::vector<Block> blocks = {{64, 1}, {128, 1}, {256, 1}, {512, 1}, {1024, 1}};
  OpDef op;
  op.name = "scan";
  op.summary = "inclusive prefix sum of a u32 array (mod 2^32): Hillis-Steele to CUB";
  op.inputs = {"input"};
  op.outputs = {"scan"};
  op.shape = scan_shape;
  op.reference = scan_reference;
  op.tol_precise = {0, 0};
  op.tol_fast = {0, 0};
  op.tol_why = "integer adds mod 2^32: exact in any order";
  op.lab_inputs = scan_inputs;
  op.lab_fill = scan_fill;
  op.lab_size_help = "N or 2^k: u32 elements (1 to 2^28), full-range random";
  op.lab_default_size = "2^22";
  op.story =
      "A scan looks sequential (each output needs all the inputs before it) but adds are "
      "associative, so a block can scan its tile in log2(B) parallel steps and the tiles can be "
      "stitched together by scanning their totals. The hand-written variants scan each tile, "
      "scan the tile totals, then add each tile's offset: the array is read and written twice, "
      "so they are bound to about twice CUB's time, which reads and writes it once (each block "
      "waits for its predecessors' totals: decoupled look-back). Within that frame the in-block "
      "scan goes from Hillis-Steele (n log n adds) to Blelloch (2n adds, twice the barriers) to "
      "warp shuffles (no shared-memory scan) to 16 elements per thread in registers, which "
      "turns a latency-bound kernel into a bandwidth-bound one.";
  // clang-format off
  // H200, 2^28 elements, best block: v1 1.93 ms, v2 2.67 ms, v3 1.62 ms, v4 1.25 ms, CUB and
  // Thrust 0.695 ms.
  op.default_variant = "v4_multi_elem";
  op.variants = {
      {"v1_hillis_steele", "Hillis-Steele in shared memory, double buffered: log2 B steps, "
       "B log B adds", blocks, {256, 1}, launch_v1, nullptr},
      {"v2_blelloch", "work-efficient up-sweep / down-sweep in padded shared memory: 2B adds, "
       "2 log2 B barriers", blocks, {256, 1}, launch_v2, nullptr},
      {"v3_warp_shuffle", "__shfl_up_sync scans per warp + a scan of the warp totals: 2 barriers",
       blocks, {256, 1}, launch_v3, nullptr},
      {"v4_multi_elem", "16 elements per thread scanned in registers (uint4 loads), shuffle scan "
       "of thread totals", blocks, {256, 1}, launch_v4, nullptr},
      {"cub", "cub::DeviceScan::InclusiveSum: single pass, decoupled look-back (the ceiling)",
       {{1, 1}}, {1, 1}, launch_cub, nullptr},
      {"thrust", "thrust::inclusive_scan (CUB underneath)", {{1, 1}}, {1, 1}, launch_thrust,
       nullptr},
  };
  // clang-format on
  op.variants[0].expect =
      "Slowest: each element waits through log2(B) shared-memory steps and barriers, with one "
      "load in flight per thread; phase 3 and the levels of totals add two more array passes.";
  op.variants[1].expect =
      "No faster than v1, likely slower: fewer adds, but twice the barriers, and most threads "
      "idle in the upper tree levels. The adds were never the bottleneck.";
  op.variants[2].expect =
      "Faster than v1 and v2: shuffles replace the shared-memory steps and all but two "
      "barriers; still one element per thread, so latency rather than bandwidth limits it.";
  op.variants[3].expect =
      "Much faster: 64 bytes in flight per thread and 16x fewer tile totals. Near 2x CUB's "
      "time: phases 1 and 3 move 4 n words to CUB's 2 n.";
  op.variants[4].expect =
      "The ceiling: one pass, each element read and written once, near the copy bandwidth.";
  op.variants[5].expect = "About CUB's time: the same algorithm behind Thrust's interface.";
  op.variants[4].ceiling = true;
  return op;
}

}  // namespace lab::ops::LAB_MATH_NS
