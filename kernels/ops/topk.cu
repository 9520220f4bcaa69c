// topk: the K largest non-zero scores of the NMS map as keypoints (x, y, score).
//
// Order: score descending, ties by the lower linear index y * W + x. Fewer than K survivors give
// fewer keypoints; the remaining rows are the pad row (-1, -1, 0) (keypoints.h). Every step
// stays on the device from the map to the list, with no host round trip (CUB gets preallocated
// storage), so the pipeline can be captured in a CUDA graph.
//
// The ladder (each step's delta says what it changes):
//   sort       v1 sorts every pixel's key (CUB radix sort), the baseline; v2 selects the K-th
//              score's bin in two histogram passes and sorts only from it up.
//   cutoff     v3 keeps one histogram pass and no sort: approximate in its boundary bin,
//              unsorted (check reports recall).
//   compact    v4 reads the map once, compacting its survivors to a list with a 13-bit histogram;
//              every block selects the candidates into shared memory and ranks its share by
//              counting greater keys: no sort at all. v5 does both phases in one cooperative
//              launch with its loads in flight; v6 shares the selection out over the grid and
//              ranks a candidate within its score bin.
// The detect op (detect.cu) continues from v6: it lists the survivors while the fused front
// writes the map, so the map is never read again.
//
// Where a step runs another step's code (the launch says so: LaunchContext::runs_step):
//   K over 8,192 (kTopkCap)   v4 to v6 run v2;
//   no cooperative launch     v5 and v6 run v4.
//
// Bench: kernel-lab bench --stage topk --sweep-variants --input tests/data/box_in_scene.png
#include <cooperative_groups.h>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_segmented_sort.cuh>

#include "topk_select.cuh"

namespace lab::ops {

// Device-side state of one frame's selection, zeroed before the histogram.
struct TopkState {
  int begin;         // 0: the segment's start for the segmented sort
  int count;         // keys gathered (v2)
  uint32_t bin;      // the boundary bin (top 12 bits)
  uint32_t above;    // survivors in bins above it
  uint32_t total;    // survivors (non-zero scores)
  uint32_t cut;      // v2: the boundary's top 24 bits; keys with (order >> 8) >= cut are kept
  uint32_t n_above;  // v3: appended from above the boundary bin
  uint32_t n_bound;  // v3: appended from the boundary bin
};

}  // namespace lab::ops

namespace lab::ops::LAB_MATH_NS {

// ---- kernels ---------------------------------------------------------------------------------

// Linear index i -> the pixel of a pitched plane (W divides i; one division per element).
__device__ __forceinline__ float score_at(ImageView<const float> s, uint32_t i) {
  const uint32_t y = i / uint32_t(s.width);
  return __ldg(&s.at(int(i - y * uint32_t(s.width)), int(y)));
}

__global__ void topk_keys_kernel(ImageView<const float> s, uint64_t* keys, uint32_t n) {
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    const float v = score_at(s, i);
    keys[i] = v != 0.0f ? topk_key(v, i) : 0ull;
  }
}

// The boundary search, run by the last histogram block to finish (no extra launch): scans the
// histogram from the top bin down to the bin where the count reaches the number still needed.
// Level 0 (K needed): the boundary bin, the count above it and the total; with K or fewer
// survivors every bin is taken (bin 0), and the keypoint rows no survivor will fill are padded
// (the histogram variant writes keypoints directly). Level 1 (K minus the count above the
// level-0 bin needed): the 24-bit cut. `hist` is read through L2, where the atomics landed.
template <int LEVEL, int BLOCK>
__device__ void topk_find(const uint32_t* hist, TopkState* st, uint32_t k,
                          ImageView<float> pad_kp) {
  constexpr int kPer = kTopkBins / BLOCK;
  using Scan = cub::BlockScan<uint32_t, BLOCK>;
  __shared__ typename Scan::TempStorage tmp;
  __shared__ uint32_t total;
  if (LEVEL == 1 && __ldcg(&st->total) <= k) {  // everything is taken
    if (threadIdx.x == 0) st->cut = 0;
    return;
  }
  const uint32_t need = LEVEL == 0 ? k : k - __ldcg(&st->above);
  // Thread t owns the kPer bins below 4096 - kPer t, walked from the top.
  const int hi = kTopkBins - kPer * int(threadIdx.x);
  uint32_t bins[kPer], mine = 0;
#pragma unroll
  for (int j = 0; j < kPer; ++j) mine += (bins[j] = __ldcg(&hist[hi - 1 - j]));
  uint32_t before = 0, all = 0;
  Scan(tmp).ExclusiveSum(mine, before, all);
  if (LEVEL == 0 && threadIdx.x == 0) {
    total = all;
    st->total = all;
    if (all <= k) st->bin = 0, st->above = all - __ldcg(&hist[0]);
  }
  if (all >= need && before < need && before + mine >= need && (LEVEL == 1 || all > k)) {
    uint32_t cum = before;  // exactly one thread gets here
    for (int j = 0; j < kPer; ++j) {
      if (cum + bins[j] >= need) {
        const uint32_t b = uint32_t(hi - 1 - j);
        if (LEVEL == 0)
          st->bin = b, st->above = cum;
        else
          st->cut = (__ldcg(&st->bin) << 12) | b;
        break;
      }
      cum += bins[j];
    }
  }
  if (LEVEL == 1) return;
  __syncthreads();
  if (pad_kp.data)
    for (uint32_t i = min(total, k) + threadIdx.x; i < k; i += BLOCK)
      write_keypoint(pad_kp, int(i), kPadCoord, kPadCoord, 0.0f);
}

// Histogram of the survivors' score bits: per-block counts in shared memory, then one global
// atomic per non-empty bin and block; the last block to finish finds the boundary. Level 0: the
// top 12 bits; level 1: the next 12, of the scores in the level-0 boundary bin.
template <int LEVEL, int BLOCK>
__global__ void __launch_bounds__(BLOCK)
    topk_hist_kernel(ImageView<const float> s, uint32_t n, uint32_t* hist, TopkState* st,
                     uint32_t* done, uint32_t k, ImageView<float> pad_kp) {
  __shared__ uint32_t h[kTopkBins];
  __shared__ bool last;
  for (int b = threadIdx.x; b < kTopkBins; b += BLOCK) h[b] = 0;
  __syncthreads();
  const uint32_t bin0 = LEVEL ? __ldcg(&st->bin) : 0;
  for (uint32_t i = blockIdx.x * BLOCK + threadIdx.x; i < n; i += gridDim.x * BLOCK) {
    const float v = score_at(s, i);
    if (v == 0.0f) continue;
    const uint32_t o = score_order(v);
    if (LEVEL == 0)
      atomicAdd(&h[o >> 20], 1u);
    else if ((o >> 20) == bin0)
      atomicAdd(&h[(o >> 8) & (kTopkBins - 1)], 1u);
  }
  __syncthreads();
  for (int b = threadIdx.x; b < kTopkBins; b += BLOCK)
    if (h[b]) atomicAdd(&hist[b], h[b]);
  // Classic last-block pattern: make this block's counts visible, then take a ticket.
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(done, 1u) == gridDim.x - 1;
  __syncthreads();
  if (last) topk_find<LEVEL, BLOCK>(hist, st, k, pad_kp);
}

// v2: every key in the 24-bit boundary bin or above, appended (the order does not matter: they
// are sorted next).
__global__ void topk_gather_keys_kernel(ImageView<const float> s, uint32_t n, TopkState* st,
                                        uint64_t* cand) {
  const uint32_t cut = st->cut;
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    const float v = score_at(s, i);
    if (v != 0.0f && (score_order(v) >> 8) >= cut) cand[atomicAdd(&st->count, 1)] = topk_key(v, i);
  }
}

// v3: above the boundary bin into [0, above), the boundary bin into [above, K) until full.
__global__ void topk_gather_points_kernel(ImageView<const float> s, uint32_t n, TopkState* st,
                                          uint32_t k, ImageView<float> kp) {
  const uint32_t bin = st->bin, above = st->above;
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    const float v = score_at(s, i);
    if (v == 0.0f) continue;
    const uint32_t b = topk_bin(v);
    uint32_t slot;
    if (b > bin) {
      slot = atomicAdd(&st->n_above, 1u);
    } else if (b == bin) {
      slot = above + atomicAdd(&st->n_bound, 1u);
      if (slot >= k) continue;
    } else {
      continue;
    }
    const uint32_t y = i / uint32_t(s.width);
    write_keypoint(kp, int(slot), float(i - y * uint32_t(s.width)), float(y), v);
  }
}

// The first min(K, count) sorted keys as keypoints, the rest padded. count == nullptr: n keys.
__global__ void topk_write_kernel(const uint64_t* sorted, const int* count, uint32_t n,
                                  uint32_t width, ImageView<float> kp) {
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= uint32_t(kp.width)) return;
  const uint32_t avail = count ? min(uint32_t(*count), n) : n;
  const uint64_t key = i < avail ? sorted[i] : 0ull;
  if (key == 0ull) {
    write_keypoint(kp, int(i), kPadCoord, kPadCoord, 0.0f);
    return;
  }
  const uint32_t idx = topk_key_index(key);
  write_keypoint(kp, int(i), float(idx % width), float(idx / width), topk_key_score(key));
}

// ---- v4 to v6: survivors compacted once, the same selection in every block, ranks by counting --

// A pixel's key (0 for a zero score), counted in the level-0 histogram `h` when non-zero.
__device__ __forceinline__ uint32_t topk_count_key(float v, uint32_t i, uint64_t& key,
                                                   uint32_t* h) {
  key = v != 0.0f ? topk_key(v, i) : 0ull;
  if (!key) return 0;
  atomicAdd(&h[uint32_t(key >> kBinShift)], 1u);
  return 1;
}

// One pass over the NMS map: every survivor's key appended to `list` (a block scan per tile of
// BLOCK x ITEMS pixels, then one global atomic per tile rather than one per survivor on a single
// counter) and counted in the level-0 histogram `h` (BLOCK's own, in shared memory, flushed to
// the global one once per non-empty bin).
// LOADS_FIRST (v5 on): a thread issues all its ITEMS loads before it counts any of them. In v4
// each load is followed by a branch and a shared-memory atomic, and the PTX keeps every later
// load behind them: the ITEMS loads wait for each other.
template <int BLOCK, int ITEMS, bool LOADS_FIRST = false>
__device__ void topk_compact_tiles(ImageView<const float> s, uint32_t n, TopkListScratch* sc,
                                   uint64_t* list, uint32_t* h) {
  constexpr uint32_t kTile = uint32_t(BLOCK) * ITEMS;
  using Scan = cub::BlockScan<uint32_t, BLOCK>;
  __shared__ typename Scan::TempStorage tmp;
  __shared__ uint32_t base;
  for (int b = threadIdx.x; b < kBins; b += BLOCK) h[b] = 0;
  __syncthreads();
  for (uint32_t t0 = blockIdx.x * kTile; t0 < n; t0 += gridDim.x * kTile) {
    uint64_t key[ITEMS];
    float v[ITEMS];
    uint32_t c = 0;
#pragma unroll
    for (int j = 0; j < ITEMS; ++j) {  // consecutive threads, consecutive pixels
      const uint32_t i = t0 + uint32_t(j * BLOCK) + threadIdx.x;
      v[j] = i < n ? score_at(s, i) : 0.0f;
      if (!LOADS_FIRST) c += topk_count_key(v[j], i, key[j], h);
    }
    if (LOADS_FIRST) {
#pragma unroll
      for (int j = 0; j < ITEMS; ++j)
        c += topk_count_key(v[j], t0 + uint32_t(j * BLOCK) + threadIdx.x, key[j], h);
    }
    uint32_t off, tile_total;
    Scan(tmp).ExclusiveSum(c, off, tile_total);
    if (threadIdx.x == 0 && tile_total) base = atomicAdd(&sc->count, tile_total);
    __syncthreads();
#pragma unroll
    for (int j = 0; j < ITEMS; ++j)
      if (key[j]) list[base + off++] = key[j];
    __syncthreads();  // base and the scan's storage are reused by the next tile
  }
  for (int b = threadIdx.x; b < kBins; b += BLOCK)
    if (h[b]) atomicAdd(&sc->hist[b], h[b]);
}

template <int BLOCK>
__global__ void __launch_bounds__(BLOCK)
    topk_compact_kernel(ImageView<const float> s, uint32_t n, TopkListScratch* sc, uint64_t* list) {
  __shared__ uint32_t h[kBins];
  topk_compact_tiles<BLOCK, 4>(s, n, sc, list, h);
}

// Called by the lanes of a warp that append to `counter` (whichever are active): one atomic for
// them all, each lane's slot returned.
__device__ __forceinline__ uint32_t warp_append(uint32_t* counter) {
  const uint32_t active = __activemask();
  const int lane = int(threadIdx.x) & 31, leader = __ffs(active) - 1;
  uint32_t base = 0;
  if (lane == leader) base = atomicAdd(counter, uint32_t(__popc(active)));
  base = __shfl_sync(active, base, leader);
  return base + uint32_t(__popc(active & ((1u << lane) - 1u)));
}

// Select and rank, with no grid-wide barrier: every block makes the same selection from the
// histogram and the list (the list is a few hundred KB, read from the L2 by each SM), so each
// has every candidate in shared memory; a block then ranks the candidates it owns (list
// position modulo the grid), one warp per candidate, counting the candidates with a greater
// key (keys are distinct, so ranks are a permutation), and writes row `rank` when rank < K.
// `smem`: kSelectSmem bytes of dynamic shared memory.
// AGGREGATED (v5 on): the candidates are appended to shared memory with one atomic per warp,
// not one per key: lanes adding to one shared address take turns, and a block appends thousands
// of keys; when every survivor is kept, a key's slot is its list position and needs none.
template <bool AGGREGATED = false>
__device__ void topk_select_rank(const TopkListScratch* sc, const uint64_t* list, uint32_t k,
                                 uint32_t width, ImageView<float> kp, uint64_t* smem) {
  uint64_t* keys = smem;                                         // kTopkCap candidates
  uint32_t* sub = reinterpret_cast<uint32_t*>(keys + kTopkCap);  // kSubBins counts
  uint32_t* owned = sub + kSubBins;                              // kTopkCap slots of keys[]
  __shared__ uint32_t n_sel, n_owned;
  const TopkSelection t = topk_select(sc, list, k, sub);
  const uint32_t total = t.total;
  const bool all = t.all;
  if (threadIdx.x == 0) n_sel = 0, n_owned = 0;
  __syncthreads();
  for_each_listed(list, total, [&](uint64_t key, uint32_t pos) {
    if (t.take(key)) {
      const uint32_t slot = !AGGREGATED ? atomicAdd(&n_sel, 1u) : all ? pos : warp_append(&n_sel);
      keys[slot] = key;
      if (pos % gridDim.x == blockIdx.x)
        owned[AGGREGATED ? warp_append(&n_owned) : atomicAdd(&n_owned, 1u)] = slot;
    }
  });
  __syncthreads();
  const uint32_t n = AGGREGATED && all ? total : n_sel;  // above + in_bin (or total), <= kTopkCap
  const int lane = int(threadIdx.x) & 31, warp = int(threadIdx.x) >> 5;
  for (uint32_t o = uint32_t(warp); o < n_owned; o += kSelectThreads / 32) {
    const uint64_t mine = keys[owned[o]];
    uint32_t greater = 0;
    for (uint32_t j = uint32_t(lane); j < n; j += 32) greater += keys[j] > mine;
#pragma unroll
    for (int d = 16; d > 0; d >>= 1) greater += __shfl_xor_sync(0xFFFFFFFFu, greater, d);
    if (lane == 0 && greater < k) {
      const uint32_t idx = topk_key_index(mine);
      write_keypoint(kp, int(greater), float(idx % width), float(idx / width),
                     topk_key_score(mine));
    }
  }
  // Rows no survivor fills (fewer survivors than K), shared out like the candidates.
  for (uint32_t i = min(n, k) + blockIdx.x * kSelectThreads + threadIdx.x; i < k;
       i += gridDim.x * kSelectThreads)
    write_keypoint(kp, int(i), kPadCoord, kPadCoord, 0.0f);
}

__global__ void __launch_bounds__(kSelectThreads)
    topk_select_rank_kernel(const TopkListScratch* sc, const uint64_t* list, uint32_t k,
                            uint32_t width, ImageView<float> kp) {
  extern __shared__ uint64_t smem[];
  topk_select_rank(sc, list, k, width, kp, smem);
}

// v5: v4's two phases in one cooperative launch (a block per SM, all resident), a grid-wide
// barrier between them instead of a second launch; the phase-1 histogram is counted where the
// candidates go later. Its loads are in flight together and its shared appends one per warp.
__global__ void __launch_bounds__(kSelectThreads)
    topk_in_flight_kernel(ImageView<const float> s, uint32_t n, TopkListScratch* sc, uint64_t* list,
                          uint32_t k, ImageView<float> kp) {
  extern __shared__ uint64_t smem[];
  topk_compact_tiles<kSelectThreads, 8, true>(s, n, sc, list, reinterpret_cast<uint32_t*>(smem));
  cooperative_groups::this_grid().sync();
  topk_select_rank<true>(sc, list, k, uint32_t(s.width), kp, smem);
}

// ---- v6: the selection shared out across the grid -------------------------------------------

// v5 has every block read the whole survivor list, once more for each refinement level: cheap
// for the few thousand survivors of the test images, but it grows with the survivors (a low
// threshold, a textured 4K frame: tens of thousands, MBs of L2 reads per block). v6 gives each
// block a slice of the list and meets the others at a grid-wide barrier after each step: the
// refinement histograms are summed in global memory, and the candidates are placed in global memory
// grouped by their level-0 bin (bins descending), so that a candidate's rank is the count of the
// bins above its own plus the greater keys in its own bin: the ranking compares within a bin, not
// across all candidates.
constexpr int kRefineLevels = 5;  // refinements at most: the shift goes 51, 39, 27, 15, 3, 0

struct TopkSharedSelectScratch {
  TopkListScratch list;                   // zeroed by a memset before the launch
  uint32_t fill[kBins];                   // candidates placed so far, per level-0 bin
  uint32_t sub[kRefineLevels][kSubBins];  // the refinement levels' histograms
};

// `smem`: kSelectSmem bytes of dynamic shared memory: the candidates (kTopkCap keys), then each
// level-0 bin's first candidate position (kBins, phase 1's histogram before that), then a
// refinement level's counts (kSubBins).
__global__ void __launch_bounds__(kSelectThreads)
    topk_shared_select_kernel(ImageView<const float> s, uint32_t n, TopkSharedSelectScratch* sc,
                              uint64_t* list, uint64_t* cand, uint32_t k, ImageView<float> kp) {
  extern __shared__ uint64_t smem[];
  uint64_t* keys = smem;
  uint32_t* start = reinterpret_cast<uint32_t*>(keys + kTopkCap);
  uint32_t* sub = start + kBins;
  __shared__ uint32_t sel[3];
  const cooperative_groups::grid_group grid = cooperative_groups::this_grid();
  // fill and sub are zeroed here, by the grid, before their first use past the barrier.
  for (uint32_t i = blockIdx.x * kSelectThreads + threadIdx.x; i < kBins;
       i += gridDim.x * kSelectThreads)
    sc->fill[i] = 0;
  for (uint32_t i = blockIdx.x * kSelectThreads + threadIdx.x; i < kRefineLevels * kSubBins;
       i += gridDim.x * kSelectThreads)
    sc->sub[i / kSubBins][i % kSubBins] = 0;
  topk_compact_tiles<kSelectThreads, 8, true>(s, n, &sc->list, list, start);
  grid.sync();  // every survivor listed and counted; fill and sub zeroed

  // v5's selection, made by every block alike from sums in global memory: each refinement
  // level's histogram counted from the slices and summed over the grid.
  TopkSelection t;
  t.total = t.in_bin = __ldcg(&sc->list.count);
  t.all = t.total <= k;
  if (!t.all) {
    topk_find_bin<kBins / kSelectThreads, true>(sc->list.hist, k, sel);
    t.prefix = t.bin0 = sel[0], t.above = t.above0 = sel[1], t.in_bin = sel[2];
  }
  for (int level = 0; !t.all && t.above + t.in_bin > kTopkCap && level < kRefineLevels; ++level) {
    const int bits = min(12, t.shift), next = t.shift - bits;
    for (int b = threadIdx.x; b < kSubBins; b += kSelectThreads) sub[b] = 0;
    __syncthreads();
    for_each_in_slice(list, t.total, [&](uint64_t key) {
      if ((key >> t.shift) == t.prefix)
        atomicAdd(&sub[uint32_t(key >> next) & ((1u << bits) - 1u)], 1u);
    });
    __syncthreads();
    for (int b = threadIdx.x; b < kSubBins; b += kSelectThreads)
      if (sub[b]) atomicAdd(&sc->sub[level][b], sub[b]);
    grid.sync();  // the level's histogram summed over the grid
    topk_find_bin<kSubBins / kSelectThreads, true>(sc->sub[level], k - t.above, sel);
    t.prefix = (t.prefix << bits) | sel[0], t.above += sel[1], t.in_bin = sel[2], t.shift = next;
    __syncthreads();  // sel and sub are rewritten by the next level
  }
  const uint32_t n_cand = t.count();
  topk_bin_starts(&sc->list, t, start);
  for_each_in_slice(list, t.total, [&](uint64_t key) {
    if (t.take(key)) {
      const uint32_t b = uint32_t(key >> kBinShift);
      cand[start[b] + atomicAdd(&sc->fill[b], 1u)] = key;
    }
  });
  grid.sync();  // every candidate placed in its bin's range

  // Rank: a warp per candidate, counting the greater keys of its own bin (keys are distinct).
  for (uint32_t i = threadIdx.x; i < n_cand; i += kSelectThreads) keys[i] = __ldcg(&cand[i]);
  __syncthreads();
  const int lane = int(threadIdx.x) & 31;
  const uint32_t warps = gridDim.x * (kSelectThreads / 32);
  for (uint32_t p = blockIdx.x * (kSelectThreads / 32) + (threadIdx.x >> 5); p < n_cand;
       p += warps) {
    const uint64_t mine = keys[p];
    const uint32_t b = uint32_t(mine >> kBinShift);
    const uint32_t lo = start[b], hi = b ? start[b - 1] : n_cand;
    uint32_t greater = 0;
    for (uint32_t j = lo + uint32_t(lane); j < hi; j += 32) greater += keys[j] > mine;
#pragma unroll
    for (int d = 16; d > 0; d >>= 1) greater += __shfl_xor_sync(0xFFFFFFFFu, greater, d);
    if (lane == 0 && lo + greater < k) {
      const uint32_t idx = topk_key_index(mine);
      write_keypoint(kp, int(lo + greater), float(idx % uint32_t(s.width)),
                     float(idx / uint32_t(s.width)), topk_key_score(mine));
    }
  }
  for (uint32_t i = min(n_cand, k) + blockIdx.x * kSelectThreads + threadIdx.x; i < k;
       i += gridDim.x * kSelectThreads)
    write_keypoint(kp, int(i), kPadCoord, kPadCoord, 0.0f);
}

// ---- launchers -------------------------------------------------------------------------------

struct TopkIo {
  ImageView<const float> s;
  ImageView<float> kp;
  uint32_t n, k;
  int threads;
};

static TopkIo io_of(const StageArgs& a) {
  TopkIo io{a.in[0].view<const float>(), a.out[0].view<float>(), 0, 0, int(a.block.threads())};
  io.n = uint32_t(io.s.width) * uint32_t(io.s.height);
  io.k = uint32_t(io.kp.width);
  return io;
}

// A grid-stride kernel's grid: enough blocks to fill the GPU a few times over, no more (each
// histogram block flushes its bins once).
static dim3 stride_grid(uint32_t n, int threads, int per_sm) {
  const uint32_t need = (n + uint32_t(threads) - 1) / uint32_t(threads);
  const uint32_t cap = uint32_t(std::max(1, device_info().sms) * per_sm);
  return dim3(std::max(1u, std::min(need, cap)));
}

static void launch_write(LaunchContext& ctx, const TopkIo& io, const uint64_t* sorted,
                         const int* count, uint32_t n) {
  launch(ctx, "topk_write", topk_write_kernel, dim3((io.k + io.threads - 1) / io.threads),
         dim3(io.threads), 0, sorted, count, n, uint32_t(io.s.width), io.kp);
}

static void launch_v1(LaunchContext& ctx, const StageArgs& a) {
  const TopkIo io = io_of(a);
  auto* keys = static_cast<uint64_t*>(ctx.scratch(sizeof(uint64_t) * io.n, 0));
  auto* sorted = static_cast<uint64_t*>(ctx.scratch(sizeof(uint64_t) * io.n, 1));
  size_t temp_bytes = 0;
  LAB_CUDA_CHECK(cub::DeviceRadixSort::SortKeysDescending(nullptr, temp_bytes, keys, sorted,
                                                          int(io.n), 0, 64, ctx.stream()));
  void* temp = ctx.scratch(temp_bytes, 2);
  launch(ctx, "topk_keys", topk_keys_kernel, stride_grid(io.n, io.threads, 16), dim3(io.threads), 0,
         io.s, keys, io.n);
  library_call(ctx, "cub::DeviceRadixSort", [&] {
    return cub::DeviceRadixSort::SortKeysDescending(temp, temp_bytes, keys, sorted, int(io.n), 0,
                                                    64, ctx.stream());
  });
  launch_write(ctx, io, sorted, nullptr, std::min(io.n, io.k));
}

// Device memory of one frame's selection: the two histograms, two tickets and the state,
// zeroed by one memset before the first pass.
struct TopkScratch {
  uint32_t hist[2][kTopkBins];
  uint32_t done[2];
  TopkState st;
};

template <int LEVEL, int BLOCK>
static void launch_hist(LaunchContext& ctx, const TopkIo& io, TopkScratch* sc, const char* name,
                        ImageView<float> pad) {
  launch(ctx, name, topk_hist_kernel<LEVEL, BLOCK>, stride_grid(io.n, BLOCK, 2), dim3(BLOCK), 0,
         io.s, io.n, sc->hist[LEVEL], &sc->st, &sc->done[LEVEL], io.k, pad);
}

template <int LEVEL>
static void hist_level(LaunchContext& ctx, const TopkIo& io, TopkScratch* sc,
                       ImageView<float> pad) {
  const char* name = LEVEL ? "topk_hist<1>+find" : "topk_hist<0>+find";
  switch (io.threads) {
    case 128:
      return launch_hist<LEVEL, 128>(ctx, io, sc, name, pad);
    case 256:
      return launch_hist<LEVEL, 256>(ctx, io, sc, name, pad);
    case 512:
      return launch_hist<LEVEL, 512>(ctx, io, sc, name, pad);
    case 1024:
      return launch_hist<LEVEL, 1024>(ctx, io, sc, name, pad);
  }
  throw Error(ErrorKind::Usage,
              "topk: no histogram instantiation for " + std::to_string(io.threads) + " threads");
}

// The level-0 histogram and boundary bin (v3), then the level-1 refinement (v2).
static TopkState* select_bin(LaunchContext& ctx, const TopkIo& io, int levels) {
  auto* sc = static_cast<TopkScratch*>(ctx.scratch(sizeof(TopkScratch), 0));
  LAB_CUDA_CHECK(cudaMemsetAsync(sc, 0, sizeof(TopkScratch), ctx.stream()));
  hist_level<0>(ctx, io, sc, levels == 1 ? io.kp : ImageView<float>{});
  if (levels == 2) hist_level<1>(ctx, io, sc, ImageView<float>{});
  return &sc->st;
}

static void launch_v2(LaunchContext& ctx, const StageArgs& a) {
  const TopkIo io = io_of(a);
  auto* cand = static_cast<uint64_t*>(ctx.scratch(sizeof(uint64_t) * io.n, 1));
  auto* sorted = static_cast<uint64_t*>(ctx.scratch(sizeof(uint64_t) * io.n, 2));
  TopkState* st = select_bin(ctx, io, 2);
  size_t temp_bytes = 0;
  LAB_CUDA_CHECK(cub::DeviceSegmentedSort::SortKeysDescending(
      nullptr, temp_bytes, cand, sorted, int(io.n), 1, &st->begin, &st->count, ctx.stream()));
  void* temp = ctx.scratch(temp_bytes, 3);
  launch(ctx, "topk_gather_keys", topk_gather_keys_kernel, stride_grid(io.n, io.threads, 16),
         dim3(io.threads), 0, io.s, io.n, st, cand);
  library_call(ctx, "cub::DeviceSegmentedSort", [&] {
    return cub::DeviceSegmentedSort::SortKeysDescending(temp, temp_bytes, cand, sorted, int(io.n),
                                                        1, &st->begin, &st->count, ctx.stream());
  });
  launch_write(ctx, io, sorted, &st->count, io.k);
}

static void launch_v3(LaunchContext& ctx, const StageArgs& a) {
  const TopkIo io = io_of(a);
  TopkState* st = select_bin(ctx, io, 1);
  launch(ctx, "topk_gather_points", topk_gather_points_kernel, stride_grid(io.n, io.threads, 16),
         dim3(io.threads), 0, io.s, io.n, st, io.k, io.kp);
}

// v4 to v6's select kernels, in this order (select_opt_in: the shared memory, the grids).
struct TopkKernels {};
static SelectOptIn<3> topk_opt_in() {
  return select_opt_in<TopkKernels>({reinterpret_cast<const void*>(topk_select_rank_kernel),
                                     reinterpret_cast<const void*>(topk_in_flight_kernel),
                                     reinterpret_cast<const void*>(topk_shared_select_kernel)});
}

// The block applies to the compaction; the select blocks are always kSelectThreads.
using CompactBlocks = BlockInstances<B<256, 1>, B<512, 1>, B<1024, 1>>;

template <int BLOCK>
static void launch_compact(LaunchContext& ctx, const TopkIo& io, TopkListScratch* sc,
                           uint64_t* list) {
  const uint32_t tiles = (io.n + BLOCK * 4 - 1) / (BLOCK * 4);
  const uint32_t cap = uint32_t(std::max(1, device_info().sms) * (2048 / BLOCK));
  launch(ctx, "topk_compact", topk_compact_kernel<BLOCK>, dim3(std::max(1u, std::min(tiles, cap))),
         dim3(BLOCK), 0, io.s, io.n, sc, list);
}

static void launch_v4(LaunchContext& ctx, const StageArgs& a) {
  const TopkIo io = io_of(a);
  // K past what one block sorts, or a device without the shared memory: v2's path, exact too.
  if (io.k > kTopkCap || !topk_opt_in().fits) {
    ctx.runs_step("v2_select_sort", io.k > kTopkCap ? "K over 8,192" : "too little shared memory");
    return launch_v2(ctx, a);
  }
  auto* sc = static_cast<TopkListScratch*>(ctx.scratch(sizeof(TopkListScratch), 0));
  auto* list = static_cast<uint64_t*>(ctx.scratch(sizeof(uint64_t) * io.n, 1));
  LAB_CUDA_CHECK(cudaMemsetAsync(sc, 0, sizeof(TopkListScratch), ctx.stream()));
  CompactBlocks::dispatch(a.block, "topk v4_compact_select",
                          [&](auto x, auto) { launch_compact<x.value>(ctx, io, sc, list); });
  launch(ctx, "topk_select_rank", topk_select_rank_kernel, dim3(std::max(1, device_info().sms)),
         dim3(kSelectThreads), kSelectSmem, sc, list, io.k, uint32_t(io.s.width), io.kp);
}

// v5 and v6 launch cooperatively, on the grid the opt-in found (0: none, or K past the cap).
static int cooperative_grid(LaunchContext& ctx, const TopkIo& io, int kernel) {
  const int grid = io.k <= kTopkCap ? topk_opt_in().grid.at(size_t(kernel)) : 0;
  if (grid == 0)  // launch_v4 falls back to v2 past the cap, and says so
    ctx.runs_step("v4_compact_select", "no cooperative launch here");
  return grid;
}

static void launch_v5(LaunchContext& ctx, const StageArgs& a) {
  const TopkIo io = io_of(a);
  const int grid = cooperative_grid(ctx, io, 1);
  if (grid == 0) return launch_v4(ctx, a);
  auto* sc = static_cast<TopkListScratch*>(ctx.scratch(sizeof(TopkListScratch), 0));
  auto* list = static_cast<uint64_t*>(ctx.scratch(sizeof(uint64_t) * io.n, 1));
  LAB_CUDA_CHECK(cudaMemsetAsync(sc, 0, sizeof(TopkListScratch), ctx.stream()));
  launch_cooperative(ctx, "topk_in_flight", topk_in_flight_kernel, dim3(grid), dim3(kSelectThreads),
                     kSelectSmem, io.s, io.n, sc, list, io.k, io.kp);
}

static void launch_v6(LaunchContext& ctx, const StageArgs& a) {
  const TopkIo io = io_of(a);
  const int grid = cooperative_grid(ctx, io, 2);
  if (grid == 0) return launch_v4(ctx, a);
  auto* sc = static_cast<TopkSharedSelectScratch*>(ctx.scratch(sizeof(TopkSharedSelectScratch), 0));
  auto* list = static_cast<uint64_t*>(ctx.scratch(sizeof(uint64_t) * io.n, 1));
  auto* cand = static_cast<uint64_t*>(ctx.scratch(sizeof(uint64_t) * kTopkCap, 2));
  LAB_CUDA_CHECK(cudaMemsetAsync(&sc->list, 0, sizeof(TopkListScratch), ctx.stream()));
  launch_cooperative(ctx, "topk_shared_select", topk_shared_select_kernel, dim3(grid),
                     dim3(kSelectThreads), kSelectSmem, io.s, io.n, sc, list, cand, io.k, io.kp);
}

// ---- variant table ---------------------------------------------------------------------------

OpDef topk_op(const OpLookup&) {
  const std::vector<Block> lines = {{128, 1}, {256, 1}, {512, 1}, {1024, 1}};
  OpDef op;
  op.name = "topk";
  op.summary = "the K highest non-zero NMS scores as keypoints (x, y, score), on the device";
  op.inputs = {slots::kNms};
  op.outputs = {slots::kKeypoints};
  op.params = param_specs<TopkParams>();
  op.shape = topk_shape;
  op.reference = topk_reference;
  op.compare = topk_compare;
  op.tol_precise = {0, 0};
  op.tol_fast = {0, 0};
  op.tol_why =
      "integer selection: exact variants match the reference row for row; the histogram variant "
      "returns the right count, exact scores, everything above the boundary bin";
  // v5: the fastest step at 1280x736 (BENCHMARKS.md, "topk"); v6 wins at 4K, loses at camera sizes.
  op.default_variant = "v5_in_flight";
  // clang-format off
  op.variants = {
      {"v1_sort_all", "exact: CUB radix sort of one 64-bit key per pixel, first K decoded",
       lines, {256, 1}, launch_v1, nullptr},
      {"v2_select_sort", "exact: 2-level radix select of the K-th score's bin; sort from it up",
       lines, {256, 1}, launch_v2, nullptr},
      {"v3_histogram", "approximate: append above the boundary bin, fill from it; no sort",
       lines, {256, 1}, launch_v3, nullptr, {}, {}, nullptr,
       "unsorted; which boundary-bin scores fill the last places is a race (recall reported)"},
      {"v4_compact_select",
       "survivors compacted once; every block selects the same candidates, ranks its share by counting",
       CompactBlocks::blocks(), {512, 1}, launch_v4, nullptr},
      {"v5_in_flight",
       "v4 in one cooperative launch (a grid barrier, not 2 launches), its loads issued together",
       {{1024, 1}}, {1024, 1}, launch_v5, nullptr, {}, {}, nullptr, {},
       "the second launch's cost goes, and a thread's 8 map loads wait on one latency, not 8"},
      {"v6_shared_select",
       "v5 with the list shared out over the grid and each candidate ranked within its score bin",
       {{1024, 1}}, {1024, 1}, launch_v6, nullptr, {}, {}, nullptr, {},
       "with tens of thousands of survivors (a textured 4K photo) each block reads a slice, not "
       "the list, and compares within a bin; with a few thousand the extra barriers cost a little"},
  };
  // clang-format on
  const std::string past_cap = "K over 8,192: v2_select_sort";
  op.variant("v4_compact_select").runs_when = past_cap;
  for (const char* v : {"v5_in_flight", "v6_shared_select"})
    op.variant(v).runs_when = "no cooperative launch: v4_compact_select; " + past_cap;
  return op;
}

}  // namespace lab::ops::LAB_MATH_NS
