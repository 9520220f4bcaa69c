// detect: the keypoint detector in one stage, from the letterbox plane to the keypoints. It
// does the work of blur, sobel, harris, nms (the fused front, front_kernels.cuh) and topk, which
// the pipeline then skips; it is off until asked for (a variant, a preset, the Pipeline panel).
//
// Every step lists each survivor's key as the front writes a strip of the map, so the map is
// never read again; the exact top-K comes from the list (topk_select.cuh). The map and the blur
// plane are still written: check holds the map to the CPU chain, and sample reads blur.
//
// The ladder (each step's delta says what it changes):
//   v1  topk v4's select on the list, each candidate ranked within its score bin;
//   v2  ranked by counting, for each key of a block's share, the listed keys above it;
//   v3  ranked within buckets of the score, and a long list selected once over the grid;
//   v4  the front in column pairs (nms v6's), as an interior launch and a border-ring launch,
//       each launch started before the one before it ends.
//
// Where a step runs another step's code (LaunchContext::runs_step):
//   K over 8,192 (kTopkCap)     every step ranks with topk v2 on the map it wrote;
//   no cooperative launch       v3 and v4 rank as v2;
//   below sm_90                 v4 runs v3 (no programmatic launch);
//   too few pair blocks         v4 runs v3 (they fill an H200 twice from 3200x1800 up: at
//                               1280x736 v4 is v3).
//
// Bench: kernel-lab bench --stage detect --sweep-variants --input tests/data/box_in_scene.png
#include <cooperative_groups.h>

#include <atomic>

#include "front_host.h"
#include "front_kernels.cuh"
#include "topk_select.cuh"

namespace lab::ops {

// ---- reference, slots, comparison ------------------------------------------------------------

// What detect borrows from the stages it does the work of, taken in detect_op from the ops
// registered before it: nms/v5_fused_front's definition (its reference and comparison for the
// map and the blur plane) and topk/v2_select_sort's launcher (its precise build: integer
// selection, the same bits), for K past the rank kernels' cap.
struct DetectBorrowed {
  VariantDef nms_front;
  LaunchFn topk_v2 = nullptr;
};
inline DetectBorrowed& detect_borrowed() {
  static DetectBorrowed b;
  return b;
}
inline const VariantDef& nms_front_variant() {
  return detect_borrowed().nms_front;
}

// The skipped stages' parameters as nms v5 takes them: nms's own, and harris's as "harris.name".
inline ParamMap front_params_of(const ParamMap& p) {
  ParamMap q = fused_params(p, "nms");
  for (const auto& [name, value] : p)
    if (name.compare(0, 7, "harris.") == 0) q[name] = value;
  return q;
}

// Reads the letterbox plane; writes the keypoints, the NMS map and the blur plane.
inline std::vector<ImageDesc> detect_shape(const std::vector<ImageDesc>& in, const ParamMap& p) {
  const ImageDesc d = require_f32_plane("detect", in[0]);
  return {topk_shape({d}, fused_params(p, "topk"))[0], d, d};
}

// The CPU chain blur -> sobel -> harris -> nms (nms v5's reference), then topk's on its map.
inline void detect_reference(const StageArgs& a) {
  nms_front_variant().reference(
      StageArgs{{a.in[0]}, {a.out[1], a.out[2]}, front_params_of(a.params), a.block});
  topk_reference(StageArgs{{a.out[1]}, {a.out[0]}, fused_params(a.params, "topk"), a.block});
}

// The map and the blur plane by nms v5's rule against the CPU chain; the keypoints exact for
// the map the GPU wrote (where that map keeps or drops a near tie unlike the CPU's, the
// keypoints follow it, so they are not compared with the CPU chain's list).
inline DiffStats detect_compare(const CompareArgs& a) {
  const VariantDef& front = nms_front_variant();
  const std::vector<HostImage> got{(*a.got)[1], (*a.got)[2]}, ref{(*a.ref)[1], (*a.ref)[2]};
  const std::vector<std::string> names{(*a.out_names)[1], (*a.out_names)[2]};
  const ParamMap fp = front_params_of(*a.params);
  CompareArgs f = a;
  f.got = &got, f.ref = &ref, f.out_names = &names, f.variant = &front, f.params = &fp;
  DiffStats d = front.compare(f);
  const std::vector<HostImage> map{(*a.got)[1]}, kp{(*a.got)[0]};
  std::vector<HostImage> kp_ref{HostImage(kp[0].desc())};
  topk_reference(StageArgs{{map[0].ref()}, {kp_ref[0].ref()}, fused_params(*a.params, "topk"), {}});
  static const VariantDef exact;  // no `approx`: topk_compare holds the rows bit for bit
  const std::vector<std::string> kp_name{(*a.out_names)[0]};
  CompareArgs t = a;
  t.in = &map, t.got = &kp, t.ref = &kp_ref, t.out_names = &kp_name, t.variant = &exact;
  merge_diff(d, topk_compare(t));
  return d;
}

}  // namespace lab::ops

namespace lab::ops::LAB_MATH_NS {

// ---- v1: the survivors listed by the front, selected and ranked within bins ---------------

// topk v4's selection (every block alike, from the histogram and the list); the candidates placed
// in shared memory grouped by their level-0 bin (bins descending), each then ranked against its
// own bin only, not every candidate (n^2: 19.5 M comparisons for the 4,416 candidates of
// coffee.png; on a real image the candidates spread over tens of bins). The order inside a bin is
// the order of the atomics, so it differs between blocks: a candidate belongs to the block its
// pixel index names (index modulo the grid), not to a position.
__device__ void topk_select_rank_binned(const TopkListScratch* sc, const uint64_t* list, uint32_t k,
                                        uint32_t width, ImageView<float> kp, uint64_t* smem) {
  uint64_t* keys = smem;                                         // kTopkCap candidates, grouped
  uint32_t* end = reinterpret_cast<uint32_t*>(keys + kTopkCap);  // kBins
  uint32_t* sub = end + kBins;                                   // kSubBins
  const TopkSelection t = topk_select(sc, list, k, sub);
  const uint32_t n = t.count();
  // end[b] starts as the bin's first position and, advanced by each key placed, ends as its end
  // (so bin b then spans [end[b + 1], end[b])).
  topk_bin_starts(sc, t, end);
  for_each_listed(list, t.total, [&](uint64_t key, uint32_t) {
    if (t.take(key)) keys[atomicAdd(&end[uint32_t(key >> kBinShift)], 1u)] = key;
  });
  __syncthreads();
  const int lane = int(threadIdx.x) & 31, warp = int(threadIdx.x) >> 5;
  for (uint32_t base = uint32_t(warp) * 32; base < n; base += kSelectThreads) {
    const uint32_t p = base + uint32_t(lane);
    const bool own = p < n && topk_key_index(keys[p]) % gridDim.x == blockIdx.x;
    for (uint32_t m = __ballot_sync(0xFFFFFFFFu, own); m; m &= m - 1) {
      const uint64_t mine = keys[base + uint32_t(__ffs(m) - 1)];
      const uint32_t b = uint32_t(mine >> kBinShift);
      const uint32_t lo = b + 1 < kBins ? end[b + 1] : 0u;
      uint32_t greater = 0;
      for (uint32_t j = lo + uint32_t(lane); j < end[b]; j += 32) greater += keys[j] > mine;
#pragma unroll
      for (int d = 16; d > 0; d >>= 1) greater += __shfl_xor_sync(0xFFFFFFFFu, greater, d);
      if (lane == 0 && lo + greater < k) {
        const uint32_t idx = topk_key_index(mine);
        write_keypoint(kp, int(lo + greater), float(idx % width), float(idx / width),
                       topk_key_score(mine));
      }
    }
  }
  for (uint32_t i = min(n, k) + blockIdx.x * kSelectThreads + threadIdx.x; i < k;
       i += gridDim.x * kSelectThreads)
    write_keypoint(kp, int(i), kPadCoord, kPadCoord, 0.0f);
}

// The front's sink (front_kernels.cuh): each NMS value the warp wrote that is non-zero is a
// survivor. Once a strip is written, the warp reserves room for all its survivors with one
// atomic (a scan of the lanes' counts), and each lane reads its survivors' values back from the
// map it wrote (its own writes, so it sees them; a few per strip, most strips none), lists their
// keys and counts them in the level-0 histogram. The read is __ldcg: from a plain load the
// compiler forwards the values the strip stored, and holds all of them in registers through the
// strip (the pair front took 157 registers that way, 128 with __ldcg).
struct TopkListSink {
  TopkListScratch* sc;
  uint64_t* list;
  uint32_t width;
  __device__ void operator()(const ImageView<float>& map, int x, int y0, uint32_t kept,
                             uint32_t kept_next) const {
    const int lane = int(threadIdx.x) & 31;
    const uint32_t mine = uint32_t(__popc(kept) + __popc(kept_next));
    uint32_t upto = mine;  // inclusive scan of the lanes' counts
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
      const uint32_t t = __shfl_up_sync(0xFFFFFFFFu, upto, d);
      if (lane >= d) upto += t;
    }
    const uint32_t total = __shfl_sync(0xFFFFFFFFu, upto, 31);
    if (total == 0) return;
    uint32_t base = 0;
    if (lane == 31) base = atomicAdd(&sc->count, total);
    base = __shfl_sync(0xFFFFFFFFu, base, 31) + upto - mine;
    list_column(map, x, y0, kept, base);
    list_column(map, x + 1, y0, kept_next, base);  // nothing for v5's front (kept_next = 0)
  }
  __device__ void list_column(const ImageView<float>& map, int x, int y0, uint32_t kept,
                              uint32_t& base) const {
    for (uint32_t r = kept; r; r &= r - 1) {
      const int y = y0 + __ffs(r) - 1;
      const uint64_t key = topk_key(__ldcg(map.row(y) + x), uint32_t(y) * width + uint32_t(x));
      list[base++] = key;
      atomicAdd(&sc->hist[uint32_t(key >> kBinShift)], 1u);
    }
  }
};

// v1's rank: a plain launch (the list is complete when it starts), a block per SM.
__global__ void __launch_bounds__(kSelectThreads)
    topk_listed_rank_kernel(const TopkListScratch* sc, const uint64_t* list, uint32_t k,
                            uint32_t width, ImageView<float> kp) {
  extern __shared__ uint64_t smem[];
  topk_select_rank_binned(sc, list, k, width, kp, smem);
}

// ---- v2: the listed survivors ranked by counting every pair ----------------------------------

// n <= kTopkCap keys of `list`, ranked: every block loads all of them into shared memory (`keys`,
// kSelectSmem bytes) and ranks a contiguous share, ceil(n / grid) keys, at most kSelectThreads at a
// time (more only on a GPU of a few SMs). The threads split into `per` candidates x `slices` slices
// of the keys; a thread counts the keys of its slice greater than its candidate (the lanes of a
// warp mostly share a slice, so a read is a broadcast), and the counts are summed per
// candidate. Keys are distinct, so the counts are a permutation: row `greater` when under K.
__device__ void topk_count_rank(const uint64_t* list, uint32_t n, uint32_t k, uint32_t width,
                                ImageView<float> kp, uint64_t* keys) {
  uint32_t* greater =
      reinterpret_cast<uint32_t*>(keys + kTopkCap);  // past the keys, in kSelectSmem
  const uint32_t share = (n + gridDim.x - 1) / gridDim.x;
  const uint32_t begin = min(n, blockIdx.x * share), end = min(n, begin + share);
  if (begin < end) {  // a block with no share (n under the grid) loads nothing
    for_each_listed(list, n, [&](uint64_t key, uint32_t pos) { keys[pos] = key; });
    if (threadIdx.x == 0 && (n & 1u)) keys[n] = 0;  // the last pair's second key: never greater
  }
  const ulonglong2* pairs = reinterpret_cast<const ulonglong2*>(keys);
  for (uint32_t first = begin; first < end; first += kSelectThreads) {  // the same trips block-wide
    const uint32_t per = min(end - first, uint32_t(kSelectThreads)), slices = kSelectThreads / per;
    if (threadIdx.x < per) greater[threadIdx.x] = 0;
    __syncthreads();  // the keys loaded; greater zeroed (and read by the last trip)
    const uint32_t c = threadIdx.x % per, s = threadIdx.x / per;
    if (s < slices) {
      const uint64_t mine = keys[first + c];
      uint32_t g = 0;
#pragma unroll 4
      for (uint32_t j = s; j < (n + 1) / 2; j += slices) {
        const ulonglong2 two = pairs[j];
        g += (two.x > mine) + (two.y > mine);
      }
      atomicAdd(&greater[c], g);
    }
    __syncthreads();
    if (threadIdx.x < per && greater[threadIdx.x] < k) {
      const uint64_t mine = keys[first + threadIdx.x];
      const uint32_t idx = topk_key_index(mine);
      write_keypoint(kp, int(greater[threadIdx.x]), float(idx % width), float(idx / width),
                     topk_key_score(mine));
    }
    __syncthreads();  // greater is zeroed again by the next trip
  }
  for (uint32_t i = min(n, k) + blockIdx.x * kSelectThreads + threadIdx.x; i < k;
       i += gridDim.x * kSelectThreads)
    write_keypoint(kp, int(i), kPadCoord, kPadCoord, 0.0f);
}

// v2's rank: every pair counted while the list fits a block's shared memory (the count is the
// same for every block, so they all take the same branch), else v1's.
__global__ void __launch_bounds__(kSelectThreads)
    topk_counted_rank_kernel(const TopkListScratch* sc, const uint64_t* list, uint32_t k,
                             uint32_t width, ImageView<float> kp) {
  extern __shared__ __align__(16) uint64_t smem[];  // read as pairs of keys
  const uint32_t n = __ldcg(&sc->count);
  if (n > kTopkCap) return topk_select_rank_binned(sc, list, k, width, kp, smem);
  topk_count_rank(list, n, k, width, kp, smem);
}

// ---- v3: ranked within buckets of their score; a long list selected once over the grid ------

// v2 compares every key with every other. A key's rank is the count of the keys above its
// bucket plus the greater keys in its own bucket, for any bucket function that is monotone in the
// key (a greater key never falls in a lower bucket; equal scores share one). v3's buckets are
// kBuckets equal slices of the block's own span of ordered score bits (score_order: bits that
// grow with the score, so slices of them are nearly slices of log2(score)): adaptive, where a
// fixed histogram (v1: 8,192 bins) spends its time on bins a frame never fills. Every block
// builds the same buckets from the whole list (keys in registers, a min/max, a histogram, a
// scan, the keys placed by bucket), then a warp counts, for each key of the block's share, the
// greater keys of its bucket only. Ties of score (chessboard.png's corners) share a bucket and
// are told apart by the index bits, as everywhere.
constexpr int kBuckets = kSubBins;  // 4096: the counts where v1's refinement histogram goes
constexpr int kKeysPerThread = int(kTopkCap) / kSelectThreads;
static_assert(kKeysPerThread * kSelectThreads == int(kTopkCap),
              "a thread holds its keys in registers");
static_assert(kSelectThreads == 32 * 32, "a warp's lanes read the 32 warps' spans, one each");

__device__ __forceinline__ uint32_t bucket_of(uint64_t key, uint32_t lo, int shift) {
  return min((uint32_t(key >> 32) - lo) >> shift, uint32_t(kBuckets - 1));
}

// n <= kTopkCap keys of `list`, ranked as v2 ranks them. `smem`: kSelectSmem bytes: the keys by
// bucket (kTopkCap), each bucket's count (kBuckets), each bucket's first position (kBuckets).
__device__ void topk_bucket_rank(const uint64_t* list, uint32_t n, uint32_t k, uint32_t width,
                                 ImageView<float> kp, uint64_t* smem) {
  uint64_t* keys = smem;
  uint32_t* count = reinterpret_cast<uint32_t*>(keys + kTopkCap);
  uint32_t* first = count + kBuckets;
  using Scan = cub::BlockScan<uint32_t, kSelectThreads>;
  __shared__ typename Scan::TempStorage scan;
  __shared__ uint32_t span[2][kSelectThreads / 32];
  const uint32_t share = (n + gridDim.x - 1) / gridDim.x;
  const uint32_t begin = min(n, blockIdx.x * share), end = min(n, begin + share);
  if (begin < end) {  // a block with no share writes only pad rows (the same branch block-wide)
    uint64_t mine[kKeysPerThread];
    uint32_t lo = 0xFFFFFFFFu, hi = 0;
#pragma unroll
    for (int j = 0; j < kKeysPerThread; ++j) {
      const uint32_t i = threadIdx.x + uint32_t(j * kSelectThreads);
      mine[j] = i < n ? __ldcg(&list[i]) : 0ull;
      if (i < n) lo = min(lo, uint32_t(mine[j] >> 32)), hi = max(hi, uint32_t(mine[j] >> 32));
    }
    for (int b = int(threadIdx.x); b < kBuckets; b += kSelectThreads) count[b] = 0;
    const int lane = int(threadIdx.x) & 31, warp = int(threadIdx.x) >> 5;
    lo = __reduce_min_sync(0xFFFFFFFFu, lo), hi = __reduce_max_sync(0xFFFFFFFFu, hi);
    if (lane == 0) span[0][warp] = lo, span[1][warp] = hi;
    __syncthreads();                         // span written, count zeroed
    lo = span[0][lane], hi = span[1][lane];  // every warp reduces the 32 warps' spans itself
    lo = __reduce_min_sync(0xFFFFFFFFu, lo), hi = __reduce_max_sync(0xFFFFFFFFu, hi);
    // The smallest shift that puts the span in kBuckets slices (12 bits).
    const int shift = max(0, 32 - __clz(int(hi - lo)) - 12);
    uint32_t slot[kKeysPerThread];  // a key's place within its bucket
#pragma unroll
    for (int j = 0; j < kKeysPerThread; ++j)
      if (mine[j]) slot[j] = atomicAdd(&count[bucket_of(mine[j], lo, shift)], 1u);
    __syncthreads();  // counted
    // first[b]: the keys in the buckets above b (buckets descending), 4 buckets a thread.
    constexpr int kPer = kBuckets / kSelectThreads;
    uint32_t c[kPer], sum = 0, above = 0;
#pragma unroll
    for (int q = 0; q < kPer; ++q)  // thread t holds buckets top - 4t .. top - 4t - 3
      c[q] = count[kBuckets - 1 - (int(threadIdx.x) * kPer + q)], sum += c[q];
    Scan(scan).ExclusiveSum(sum, above);
#pragma unroll
    for (int q = 0; q < kPer; ++q)
      first[kBuckets - 1 - (int(threadIdx.x) * kPer + q)] = above, above += c[q];
    __syncthreads();  // first written
#pragma unroll
    for (int j = 0; j < kKeysPerThread; ++j)
      if (mine[j]) keys[first[bucket_of(mine[j], lo, shift)] + slot[j]] = mine[j];
    __syncthreads();  // the keys placed
    // A warp per key of the share: the lanes stride its bucket; the greater keys summed.
    for (uint32_t i = begin + uint32_t(warp); i < end; i += kSelectThreads / 32) {
      const uint64_t key = __ldcg(&list[i]);
      const uint32_t b = bucket_of(key, lo, shift), from = first[b], size = count[b];
      uint32_t greater = 0;
      for (uint32_t p = from + uint32_t(lane); p < from + size; p += 32) greater += keys[p] > key;
      greater = from + __reduce_add_sync(0xFFFFFFFFu, greater);
      if (lane == 0 && greater < k) {
        const uint32_t idx = topk_key_index(key);
        write_keypoint(kp, int(greater), float(idx % width), float(idx / width),
                       topk_key_score(key));
      }
    }
  }
  for (uint32_t i = min(n, k) + blockIdx.x * kSelectThreads + threadIdx.x; i < k;
       i += gridDim.x * kSelectThreads)
    write_keypoint(kp, int(i), kPadCoord, kPadCoord, 0.0f);
}

// Fewer survivors than this: v2's count of every pair, which costs ~n^2 and the buckets' five
// barriers ~1 us. H200, rank alone (BENCHMARKS.md, "What the code relies on"): n = 5,339
// 12.2 -> 8.7 us, 4,416 9.7 -> 8.1, 3,257 7.8 -> 7.3; chessboard.png's few hundred tied corners
// 6.0 -> 6.9.
constexpr uint32_t kMinBucketedKeys = 3072;

// v1 and v2 rank more than kTopkCap survivors (a textured 4K frame: 32,140 on pier_4k.jpg) by v1's
// select in every block: each of the grid's blocks reads the whole list and ranks within the
// level-0 bins (20.7 us on pier_4k.jpg at 4K, against 5.9 for the synthetic frame's few thousand
// survivors). Past the cap v3 reads the list once over the grid, as topk v6 reads the map:
// every block scans the front's level-0 histogram (the same scan in every block) for each bin's
// first place (bins descending) and the bin of the K-th key; each block places its slice's keys
// from that bin up in their bins' ranges of a list of candidates in global memory (a counter per
// bin); after a grid-wide barrier a warp ranks a candidate by counting the greater keys of its
// own bin, read from the L2 (a bin is 1/16 of an octave of score: a few to a few hundred keys).
// Every key above a candidate is a candidate, so its rank among them is its rank. Where the
// candidates overflow kTopkCap (a plateau of equal scores in the K-th key's bin), v1's refining
// select. At or under the cap, the bucketed rank: the same branch in every block (n is the grid's),
// no barrier taken. A cooperative launch: the barrier needs every block resident (one per SM).
struct TopkGridSelectScratch {
  TopkListScratch list;  // the front's counters, zeroed with the fills by one memset
  uint32_t fill[kBins];  // candidates placed so far, per level-0 bin
};

// start[b] (kBins, shared): the survivors in the level-0 bins above b (bins descending);
// sel[0]: the bin of the K-th key, sel[1]: the survivors in it and above. The caller guarantees
// more than k survivors. The histogram is copied into `start` first, coalesced: the scan gives a
// thread 8 adjacent bins, and read from the L2 in that layout (as v1's select reads it)
// a warp's load touches 32 sectors for 4 bytes of each; ncu counted 81 % of the L2 sectors of
// the build that read it so excess, 8x the histogram's 32 KB per block.
__device__ void topk_grid_starts(const uint32_t* hist, uint32_t k, uint32_t* start, uint32_t* sel) {
  using Scan = cub::BlockScan<uint32_t, kSelectThreads>;
  __shared__ typename Scan::TempStorage tmp;
  constexpr int kPer = kBins / kSelectThreads;
  static_assert(kPer == 8, "a thread's bins are two 16-byte words");
  uint32_t h[kPer];
#pragma unroll
  for (int j = 0; j < kPer; ++j) h[j] = __ldcg(&hist[j * kSelectThreads + int(threadIdx.x)]);
#pragma unroll
  for (int j = 0; j < kPer; ++j) start[j * kSelectThreads + int(threadIdx.x)] = h[j];
  __syncthreads();
  const int lo = kPer * (kSelectThreads - 1 - int(threadIdx.x));  // this thread's bins [lo, lo + 8)
  uint4* mine = reinterpret_cast<uint4*>(start + lo);
  const uint4 q0 = mine[0], q1 = mine[1];
  const uint32_t c[kPer] = {q1.w, q1.z, q1.y, q1.x, q0.w, q0.z, q0.y, q0.x};  // bins descending
  uint32_t sum = 0;
#pragma unroll
  for (int j = 0; j < kPer; ++j) sum += c[j];
  uint32_t before = 0;
  Scan(tmp).ExclusiveSum(sum, before);  // a thread writes back only the bins it read
  uint32_t s[kPer];
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    s[j] = before;
    if (before < k && before + c[j] >= k)
      sel[0] = uint32_t(lo + kPer - 1 - j), sel[1] = before + c[j];
    before += c[j];
  }
  mine[0] = make_uint4(s[7], s[6], s[5], s[4]), mine[1] = make_uint4(s[3], s[2], s[1], s[0]);
  __syncthreads();
}

__global__ void __launch_bounds__(kSelectThreads)
    topk_selected_rank_kernel(TopkGridSelectScratch* sc, const uint64_t* list, uint64_t* cand,
                              uint32_t k, uint32_t width, ImageView<float> kp) {
  extern __shared__ __align__(16) uint64_t smem[];
  __shared__ uint32_t sel[2];
  griddep_wait();  // v4 launches it programmatically behind the ring (elsewhere a no-op)
  const uint32_t n = __ldcg(&sc->list.count);
  if (n <= kTopkCap) {  // the bucketed rank (k <= kTopkCap: the launcher's)
    if (n < kMinBucketedKeys) return topk_count_rank(list, n, k, width, kp, smem);
    return topk_bucket_rank(list, n, k, width, kp, smem);
  }
  uint32_t* start = reinterpret_cast<uint32_t*>(smem);  // kBins
  topk_grid_starts(sc->list.hist, k, start, sel);       // n > kTopkCap >= k
  const uint32_t bin0 = sel[0], m = sel[1];             // the candidates: bins >= bin0
  if (m > kTopkCap) {
    __syncthreads();  // start and sel read; smem is the select's now
    return topk_select_rank_binned(&sc->list, list, k, width, kp, smem);
  }
  for_each_in_slice(list, n, [&](uint64_t key) {
    const uint32_t b = uint32_t(key >> kBinShift);
    if (b >= bin0) cand[start[b] + atomicAdd(&sc->fill[b], 1u)] = key;
  });
  cooperative_groups::this_grid().sync();  // m >= k candidates placed: no pad rows
  // What follows (l2norm v5, launched programmatically) may take its places for the last phase
  // (it waits for the keypoints). Let in from the kernel's start, its blocks made the 1280x736
  // frame 0.7-1.0 us slower on the H200 (BENCHMARKS.md, "What the code relies on").
  griddep_launch_dependents();
  const int lane = int(threadIdx.x) & 31;
  const uint32_t warps = gridDim.x * (kSelectThreads / 32);
  for (uint32_t p = blockIdx.x * (kSelectThreads / 32) + (threadIdx.x >> 5); p < m; p += warps) {
    const uint64_t key = __ldcg(&cand[p]);
    const uint32_t b = uint32_t(key >> kBinShift);
    const uint32_t lo = start[b], hi = b ? start[b - 1] : m;  // the bin's range
    uint32_t greater = 0;
    for (uint32_t j = lo + uint32_t(lane); j < hi; j += 32) greater += __ldcg(&cand[j]) > key;
    greater = lo + __reduce_add_sync(0xFFFFFFFFu, greater);
    if (lane == 0 && greater < k) {
      const uint32_t idx = topk_key_index(key);
      write_keypoint(kp, int(greater), float(idx % width), float(idx / width), topk_key_score(key));
    }
  }
}

// ---- v4: the pair front as interior and ring launches, each started early -------------------

// nms v6's pair front, listing into the sink, on part of its grid (pair_split). PART 1: the
// interior blocks, in launch order, each on the interior path; PART 2: the ring of border blocks,
// each on the edge path, launched after PART 1 with the programmatic attribute so that its blocks
// start as soon as the interior's are all running and fill its last wave. A ring block of the grid
// is done as HALVES blocks of ROWS / HALVES rows: what the ring adds to the frame is the latency of
// a strip (its unrolled steps one after another, a few blocks an SM), not its work; in 16-row
// strips (28 steps) the ring took 21 us at 4K on the H200, in 8-row strips (20 steps, twice the
// blocks, 40 % more rows walked) 15 us and the frame 4.9 us less as a graph. The ring's last block
// to finish waits for the interior's grid (`done`: a zeroed count of the ring's finished blocks),
// so that the ring's completion implies the interior's: what the stream runs next (the rank) reads
// both. WAIT (PART 1): the interior was launched programmatically, behind the counters' zeroing
// (topk_zero_counters_kernel), so it waits for it before it reads the plane or counts; then it
// lets the ring start.
template <int ROWS, int PART, int HALVES = 1, bool WAIT = false>
__device__ __forceinline__ void pair_front_part(const PlaneSource& src,
                                                const ImageView<float>& blur,
                                                const ImageView<float>& map, float k, float thr,
                                                const TopkListSink& sink, const PairSplit& split,
                                                uint32_t* done) {
  int bx, by;
  if (PART == 1) {
    if (WAIT) griddep_wait();
    griddep_launch_dependents();
    bx = split.bx0 + int(blockIdx.x), by = split.by0 + int(blockIdx.y);
    front_pairs_block<ROWS, 1>(src, blur, map, k, thr, sink, bx, by);
  } else {
    split.ring_block(int(blockIdx.x) / HALVES, bx, by);
    by = by * HALVES + int(blockIdx.x) % HALVES;  // in strips of ROWS / HALVES rows
    if (by * (ROWS / HALVES) < src.height())
      front_pairs_block<ROWS / HALVES, 2>(src, blur, map, k, thr, sink, bx, by);
    if (threadIdx.x == 0 && atomicAdd(done, 1u) + 1 == gridDim.x) griddep_wait();
  }
}

// In one launch (nms v6's) both unrolled paths are in use on every SM at once (a border block in
// every row of blocks), the front's top stall is an instruction-cache miss (ncu on the H200;
// BENCHMARKS.md, "What the code relies on") and the kernel holds the edge path's 128
// registers: 8 blocks of 2 warps an SM. The interior path alone took 89 (ptxas, sm_90; 146 with
// nvcc 13.0); held to 80 (3 blocks of 256 threads, or 12 of 64, an SM) it spills nothing, and 12
// blocks fit, not 8. More warps do not pay: on the H100 caps of 72 and 64 made the 4K frame
// slower, and one of 96 was 1-2 us faster than this bound; (256, 2), 128 registers, is untimed
// (BENCHMARKS.md, "The front's registers, tried").
template <int ROWS, bool WAIT = false>
__global__ void __launch_bounds__(256, 3)
    topk_pair_front_interior_kernel(PlaneSource src, ImageView<float> blur, ImageView<float> map,
                                    float k, float thr, TopkListSink sink, PairSplit split,
                                    uint32_t* done) {
  pair_front_part<ROWS, 1, 1, WAIT>(src, blur, map, k, thr, sink, split, done);
}
template <int ROWS, int HALVES>
__global__ void __launch_bounds__(256)
    topk_pair_front_ring_kernel(PlaneSource src, ImageView<float> blur, ImageView<float> map,
                                float k, float thr, TopkListSink sink, PairSplit split,
                                uint32_t* done) {
  pair_front_part<ROWS, 2, HALVES>(src, blur, map, k, thr, sink, split, done);
}

// The front's counters zeroed by a kernel, not a memset, so that the front can be launched
// programmatically behind it (a memset node between two kernels keeps the second from starting
// early). Launched programmatically itself: it lets the interior start at once, and waits for
// the kernel before it (the letterbox; or, where detect runs alone, the last frame's rank, which
// reads these counters) before it zeroes, so its completion implies that kernel's too.
__global__ void topk_zero_counters_kernel(uint32_t* words, uint32_t n) {
  griddep_launch_dependents();
  griddep_wait();
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    words[i] = 0;
}

// ---- launchers -------------------------------------------------------------------------------

// Whether nms v6's pair front fills the GPU at least twice over, else v4 runs v3 (nms v5's
// front). A pair front has 2/3 of v5's warps per SM (128 registers) and 2.3x fewer warps in all,
// so a small frame leaves SMs short of warps. nms v6 against v5 on graf1.png (H200; BENCHMARKS.md,
// "What the code relies on"): 6 % faster at 3840x2160 (4.5 such waves), 4 % at 3200x1800 (3.1),
// level at 2560x1440 (1.96), 10 % slower at 1920x1080 (1.2) and 19 % at 1280x736 (0.5).
static bool pair_front_pays(int width, int height, Block block) {
  static std::atomic<int> resident[9] = {};  // blocks per SM, by warps per block (1..8)
  const int warps = int(block.x / 32);
  if (warps < 1 || warps > 8) return false;
  int per_sm = resident[warps].load(std::memory_order_relaxed);
  if (per_sm == 0) {
    LAB_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &per_sm, nms_v6_front_pairs_kernel<FRONT_ROWS, TopkListSink, false>, int(block.x), 0));
    resident[warps].store(per_sm = std::max(per_sm, 1), std::memory_order_relaxed);
  }
  const dim3 g = front_grid(width, height, block, PAIR_COLS, FRONT_ROWS);
  return double(g.x) * g.y >= 2.0 * per_sm * std::max(1, device_info().sms);
}

// The rank kernels, in this order (select_opt_in: the shared memory, v3's cooperative grid).
struct DetectKernels {};
static SelectOptIn<3> detect_opt_in() {
  return select_opt_in<DetectKernels>({reinterpret_cast<const void*>(topk_listed_rank_kernel),
                                       reinterpret_cast<const void*>(topk_counted_rank_kernel),
                                       reinterpret_cast<const void*>(topk_selected_rank_kernel)});
}

// The list: zeroed counters (scratch slot 4: `counters` bytes, TopkListScratch first; v3's fills
// after it) and room for a key per pixel (slot 5; topk v2's path below uses 0 to 3), and the
// sink the front lists into. `zero`: the counters zeroed by a memset (v4 zeroes them with a
// kernel of its own).
static TopkListSink listed_sink(LaunchContext& ctx, int width, int height,
                                size_t counters = sizeof(TopkListScratch), bool zero = true) {
  auto* sc = static_cast<TopkListScratch*>(ctx.scratch(counters, 4));
  auto* list = static_cast<uint64_t*>(ctx.scratch(sizeof(uint64_t) * size_t(width) * height, 5));
  if (zero) LAB_CUDA_CHECK(cudaMemsetAsync(sc, 0, counters, ctx.stream()));
  return TopkListSink{sc, list, uint32_t(width)};
}

// After the front: `rank` selects and ranks the listed survivors. Past the cap, or without the
// shared memory, topk v2 on the map the front wrote (the list goes unread).
using ListedRankKernel = void (*)(const TopkListScratch*, const uint64_t*, uint32_t, uint32_t,
                                  ImageView<float>);
static void rank_listed(LaunchContext& ctx, const StageArgs& a, const char* name,
                        ListedRankKernel rank, const TopkListSink& sink) {
  const auto kp = a.out[0].view<float>();
  const uint32_t k = uint32_t(kp.width);
  if (k > kTopkCap || !detect_opt_in().fits) {
    ctx.runs_step("topk/v2_select_sort", k > kTopkCap
                                             ? "K over 8,192, after the front"
                                             : "too little shared memory, after the front");
    const LaunchFn topk_v2 = detect_borrowed().topk_v2;
    StageArgs v2 = a;
    v2.in = {a.out[1]}, v2.out = {a.out[0]}, v2.block = {256, 1};
    v2.params = fused_params(a.params, "topk");
    return topk_v2(ctx, v2);
  }
  launch(ctx, name, rank, dim3(std::max(1, device_info().sms)), dim3(kSelectThreads), kSelectSmem,
         sink.sc, sink.list, k, sink.width, kp);
}

// in[0] the letterbox plane; out: keypoints, the NMS map, the blur plane. nms v5's front lists
// the survivors into the sink it returns.
static TopkListSink launch_listed_front(LaunchContext& ctx, const StageArgs& a,
                                        size_t counters = sizeof(TopkListScratch)) {
  const auto src = a.in[0].view<const float>();
  const auto map = a.out[1].view<float>(), blur = a.out[2].view<float>();
  const float hk = front_k(a.params), thr = fused_param(a.params, "nms", "threshold");
  const TopkListSink sink = listed_sink(ctx, src.width, src.height, counters);
  const dim3 grid = front_grid(src.width, src.height, a.block, FRONT_COLS, FRONT_ROWS);
  // At most 85 registers (three blocks of 256 an SM): it takes 80 and spills 60 bytes. Left to
  // itself ptxas gave this kernel 102 once the blocks ran border first (80 before), and it took
  // 13.5-14.0 us at 1280x736, against 11.7-11.9 capped (H200; BENCHMARKS.md, "What the code
  // relies on").
  const auto kernel = nms_v5_fused_front_kernel<FRONT_ROWS, TopkListSink, 3>;
  launch(ctx, "topk_front_listed", kernel, grid, dim3(a.block.x, a.block.y), 0, src, blur, map, hk,
         thr, sink, v5_order(src.width, src.height, int(a.block.x / 32), grid));
  return sink;
}

static void launch_v1(LaunchContext& ctx, const StageArgs& a) {
  rank_listed(ctx, a, "topk_listed_rank", topk_listed_rank_kernel, launch_listed_front(ctx, a));
}

static void launch_v2(LaunchContext& ctx, const StageArgs& a) {
  rank_listed(ctx, a, "topk_counted_rank", topk_counted_rank_kernel, launch_listed_front(ctx, a));
}

// v3's rank of the front's list: a cooperative launch (topk_selected_rank_kernel), its
// candidates past the cap in scratch slot 7. Where K is past the cap, or the device has no
// cooperative launch, v2's rank. `programmatic` (v4): launched to start before the kernel
// before it ends (it waits for that kernel first).
static void rank_selected(LaunchContext& ctx, const StageArgs& a, const TopkListSink& sink,
                          bool programmatic = false) {
  const auto kp = a.out[0].view<float>();
  const uint32_t k = uint32_t(kp.width);
  const int grid = detect_opt_in().grid.at(2);
  if (k > kTopkCap || grid == 0) {  // rank_listed says where K is past the cap
    if (grid == 0 && k <= kTopkCap) ctx.runs_step("v2_counted_rank", "no cooperative launch here");
    return rank_listed(ctx, a, "topk_counted_rank", topk_counted_rank_kernel, sink);
  }
  auto* cand = static_cast<uint64_t*>(ctx.scratch(sizeof(uint64_t) * kTopkCap, 7));
  auto* sc = reinterpret_cast<TopkGridSelectScratch*>(sink.sc);  // its first member
  if (programmatic)
    return launch_programmatic_as(true, ctx, "topk_selected_rank", topk_selected_rank_kernel,
                                  dim3(grid), dim3(kSelectThreads), kSelectSmem, sc, sink.list,
                                  cand, k, sink.width, kp);
  launch_cooperative(ctx, "topk_selected_rank", topk_selected_rank_kernel, dim3(grid),
                     dim3(kSelectThreads), kSelectSmem, sc, sink.list, cand, k, sink.width, kp);
}

static void launch_v3(LaunchContext& ctx, const StageArgs& a) {
  rank_selected(ctx, a, launch_listed_front(ctx, a, sizeof(TopkGridSelectScratch)));
}

// v4: the pair front in two launches, the interior blocks and then the ring around them
// (topk_pair_front_interior_kernel, topk_pair_front_ring_kernel), on a device with programmatic
// dependent launch (compute capability 9.0 and up: without it the ring would wait for the
// interior's last block) and where the pair front's blocks fill the GPU twice; elsewhere v3.
// Every launch is programmatic, each waiting for the one before: the counters zeroed by a kernel
// (no memset node between the letterbox and the front), the interior behind it, the rank behind
// the ring.
static void launch_v4(LaunchContext& ctx, const StageArgs& a) {
  const auto src = a.in[0].view<const float>();
  const auto map = a.out[1].view<float>(), blur = a.out[2].view<float>();
  const dim3 grid = front_grid(src.width, src.height, a.block, PAIR_COLS, FRONT_ROWS);
  const PairSplit split =
      pair_split(src.width, src.height, int(a.block.x / 32), PAIR_APRON, FRONT_ROWS, grid);
  const char* why =
      device_info().major < 9 ? "below sm_90 (no programmatic launch)"
      : split.interior() == 0 || !pair_front_pays(src.width, src.height, a.block)
          ? "too few pair blocks to fill this GPU twice"
      : !front_pairs_aligned(src.data, blur.data, map.data, src.pitch, blur.pitch, map.pitch)
          ? "planes not 8-byte aligned"
          : nullptr;
  if (why) {
    ctx.runs_step("v3_selected_once", why);
    return launch_v3(ctx, a);
  }
  const size_t done_at = sizeof(TopkGridSelectScratch);  // the ring's count of finished blocks
  const size_t counters = done_at + sizeof(uint32_t);
  const TopkListSink sink = listed_sink(ctx, src.width, src.height, counters, false);
  auto* done = reinterpret_cast<uint32_t*>(reinterpret_cast<char*>(sink.sc) + done_at);
  const float hk = front_k(a.params), thr = fused_param(a.params, "nms", "threshold");
  const dim3 block(a.block.x);
  const dim3 interior(unsigned(split.bx1 - split.bx0), unsigned(split.by1 - split.by0));
  static_assert(sizeof(TopkGridSelectScratch) % sizeof(uint32_t) == 0, "counters are words");
  const uint32_t words = uint32_t(counters / sizeof(uint32_t));
  launch_programmatic(ctx, "topk_zero_counters", topk_zero_counters_kernel,
                      dim3(unsigned(std::min<uint32_t>(64, (words + 255) / 256))), dim3(256), 0,
                      reinterpret_cast<uint32_t*>(sink.sc), words);
  launch_programmatic(ctx, "topk_pair_front_interior",
                      topk_pair_front_interior_kernel<FRONT_ROWS, true>, interior, block, 0,
                      PlaneSource{src}, blur, map, hk, thr, sink, split, done);
  launch_programmatic(ctx, "topk_pair_front_ring", topk_pair_front_ring_kernel<FRONT_ROWS, 2>,
                      dim3(unsigned(2 * split.ring())), block, 0, PlaneSource{src}, blur, map, hk,
                      thr, sink, split, done);
  rank_selected(ctx, a, sink, true);
}

// ---- variant table ---------------------------------------------------------------------------

OpDef detect_op(const OpLookup& earlier) {
  borrow_front_stages(earlier);
  front_stages().nms_params = earlier.op("nms").params;
  detect_borrowed().nms_front = earlier.op("nms").variant("v5_fused_front");
  detect_borrowed().topk_v2 = earlier.op("topk").variant("v2_select_sort").launch;
  const std::vector<Block> blocks = {{32, 1}, {64, 1}, {128, 1}, {256, 1}};
  const std::vector<std::string> fuses = {"blur", "sobel", "harris", "nms", "topk"};
  OpDef op;
  op.name = "detect";
  op.summary = "blur, sobel, harris, nms and topk in one stage: the letterbox plane to keypoints";
  op.inputs = {"letterbox"};
  op.outputs = {slots::kKeypoints, slots::kNms, "blur"};
  op.shape = detect_shape;
  op.reference = detect_reference;
  op.compare = detect_compare;
  op.tol_precise = {0, 0};
  op.tol_fast = {0, 0};
  op.tol_why =
      "the NMS map and the blur plane against the CPU chain as nms/v5_fused_front's (the map exact "
      "but at near ties of the CPU's Harris response); the keypoints exact, row for row, for the "
      "map the kernel wrote";
  op.default_variant = "v4_split_overlapped";
  // clang-format off
  op.variants = {
      {"v1_listed", "the front lists survivors as it writes the map; blocks select and rank within bins",
       blocks, {64, 1}, launch_v1, nullptr, fuses, {}, detect_reference, {},
       "topk v5's read of the map (3.8 MB at 1280x736) and its grid barrier go: what is left is "
       "the front, two launches, and the select and rank of the listed survivors"},
      {"v2_counted_rank",
       "v1 ranked by brute force: a block counts, for each key of its share, the listed keys above it",
       blocks, {64, 1}, launch_v2, nullptr, fuses, {}, detect_reference, {},
       "the select's bookkeeping of 8,192 bins goes: a few thousand keys counted in pairs, each "
       "read a broadcast, should rank in well under v1's time"},
      {"v3_selected_once",
       "v2 counted within buckets of score; over 8,192 keys the list is read once over the grid",
       blocks, {64, 1}, launch_v3, nullptr, fuses, {}, detect_reference, {},
       "with thousands of survivors the n^2 count shrinks to a bucket's; past 8,192 (a textured "
       "4K photo) the rank should halve: the list read once over the grid, not once per block"},
      {"v4_split_overlapped",
       "the front in column pairs: interior and border-ring launches, each started before the last ends",
       blocks, {64, 1}, launch_v4, nullptr, fuses, {}, detect_reference, {},
       "at 4K the front should gain: the interior holds one path's code and fewer registers (more "
       "warps an SM), the ring fills its last wave, and each launch's blocks take their places "
       "while the one before drains"},
  };
  // clang-format on
  const std::string past_cap = "K over 8,192: topk/v2_select_sort after the front";
  for (VariantDef& v : op.variants) v.runs_when = past_cap;
  op.variant("v3_selected_once").runs_when = "no cooperative launch: v2_counted_rank; " + past_cap;
  op.variant("v4_split_overlapped").runs_when =
      "below sm_90 (Orin), or too few pair blocks (under 3200x1800 on an H200): "
      "v3_selected_once; " +
      past_cap;
  return op;
}

}  // namespace lab::ops::LAB_MATH_NS
