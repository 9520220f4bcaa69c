// topk: the K largest non-zero scores of the NMS map as keypoints (x, y, score).
//
// Order: score descending, ties by the lower linear index y * W + x. Fewer than K survivors give
// fewer keypoints; the remaining rows are the pad row (-1, -1, 0) (keypoints.h). Every variant
// stays on the device from the map to the list, with no host round trip (CUB gets preallocated
// storage), so the pipeline can be captured in a CUDA graph. A key is the score's bits above the
// inverted index: sorting keys sorts by score, then index.
//
// Two families, each a ladder (the variant table's deltas say what each step changes):
//   from the NMS map  v1 sorts every pixel's key (CUB radix sort), the baseline. v2 selects the
//                     K-th score's bin in two histogram passes and sorts only from it up. v3
//                     keeps one histogram pass and no sort: approximate in its boundary bin,
//                     unsorted (check reports recall). v4 to v8 read the map once, compacting
//                     its survivors to a list with a 13-bit histogram; every block then selects
//                     the candidates into shared memory (refining while they exceed 8,192) and
//                     ranks its share by counting greater keys: no sort at all.
//   the listed front  v9 to v16 do the dense front's work themselves (nms v5's kernel or v6's
//                     column pairs: blur, sobel, harris and nms from the letterbox plane, those
//                     stages skipped) and list each survivor's key as a strip of the map is
//                     written, so the map is never read again; the ranks come from the list.
//                     The map and the blur plane are still written (check holds the map to the
//                     CPU chain; sample reads blur).
//
// Where a step runs another step's code (the launch says so: LaunchContext::runs_step):
//   K over 8,192 (kTopkCap)           v4 to v16 run v2 on the map;
//   no cooperative launch             v5 to v8 run v4;
//   under 3200x1800 (H200; v11 only)  v11 runs v10's front (nms v5's: too few pair blocks);
//   below sm_90                       v15 and v16 run v14 (programmatic launch).
// v12's count within buckets gives way to v10's count of every pair under 3,072 survivors, and
// v14's grid-wide selection to v12's at or under 8,192: one algorithm choice inside a step.
//
// Bench: kernel-lab bench --stage topk --sweep-variants --input tests/data/box_in_scene.png
#include <cooperative_groups.h>
#include <cub/block/block_scan.cuh>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_segmented_sort.cuh>

#include <algorithm>
#include <atomic>
#include <limits>
#include <mutex>
#include <set>
#include <utility>
#include <vector>

#include "device.h"
#include "front_host.h"
#include "front_kernels.cuh"
#include "keypoints.h"
#include "launch.cuh"

namespace lab::ops {

struct TopkParams {
  int k = 4096;
  template <class V>
  void visit(V& v) {
    v("k", k, 1, 65536, "keep the K highest non-zero NMS scores as keypoints");
  }
};

inline std::vector<ImageDesc> topk_shape(const std::vector<ImageDesc>& in, const ParamMap& p) {
  const ImageDesc d = require_f32_plane("topk", in[0]);
  if (d.pixels() >= 0xFFFFFFFFull)
    throw Error(ErrorKind::Data, "topk: " + d.str() + " has more pixels than a 32-bit index");
  return {keypoints_desc(decode_params<TopkParams>(p).k)};
}

LAB_HD void write_keypoint(ImageView<float> kp, int i, float x, float y, float s) {
  kp.at(i, 0, 0) = x, kp.at(i, 0, 1) = y, kp.at(i, 0, 2) = s;
}

inline void topk_reference(const StageArgs& args) {
  const auto s = args.in[0].view<const float>();
  const auto kp = args.out[0].view<float>();
  std::vector<uint64_t> keys;
  for (int y = 0; y < s.height; ++y)
    for (int x = 0; x < s.width; ++x)
      if (s.at(x, y) != 0.0f) keys.push_back(topk_key(s.at(x, y), uint32_t(y) * s.width + x));
  const size_t n = std::min(keys.size(), size_t(kp.width));
  std::partial_sort(keys.begin(), keys.begin() + n, keys.end(), std::greater<uint64_t>());
  for (int i = 0; i < kp.width; ++i) {
    if (size_t(i) >= n) {
      write_keypoint(kp, i, kPadCoord, kPadCoord, 0.0f);
      continue;
    }
    const uint32_t idx = topk_key_index(keys[i]);
    write_keypoint(kp, i, float(idx % s.width), float(idx / s.width), topk_key_score(keys[i]));
  }
}

// The exact variants must reproduce the reference row for row. The histogram variant is held to
// what it guarantees: min(K, survivors) distinct keypoints, each a survivor with its exact
// score, none below the boundary bin, every survivor above the boundary bin present, the rest
// padded; its recall is reported.
inline DiffStats topk_compare(const CompareArgs& a) {
  const auto nms = (*a.in)[0].view<const float>();
  const auto got = (*a.got)[0].view<const float>();
  const auto ref = (*a.ref)[0].view<const float>();
  const int k = ref.width;
  DiffStats d;
  d.has_set = true;
  d.psnr = 0;
  auto bad = [&](int i, int c, double g, double r) {
    if (d.over++ == 0)
      d.bad_slot = slots::kKeypoints, d.bad_x = i, d.bad_y = 0, d.bad_c = c, d.bad_got = g,
      d.bad_ref = r;
  };
  std::set<std::pair<int, int>> ref_pos;
  std::vector<std::pair<std::pair<int, int>, float>> ref_pts;
  for (int i = 0; i < k && !is_pad(ref.at(i, 0, 0)); ++i) {
    ref_pos.insert({int(ref.at(i, 0, 0)), int(ref.at(i, 0, 1))});
    ref_pts.push_back({{int(ref.at(i, 0, 0)), int(ref.at(i, 0, 1))}, ref.at(i, 0, 2)});
  }
  const int n_ref = int(ref_pts.size());
  d.set_ref = size_t(n_ref);
  std::set<std::pair<int, int>> got_pos;
  for (int i = 0; i < k; ++i) {
    ++d.count;
    const float x = got.at(i, 0, 0), y = got.at(i, 0, 1), s = got.at(i, 0, 2);
    if (!std::isfinite(x) || !std::isfinite(y) || !std::isfinite(s)) ++d.nans;
    if (a.variant->approx.empty()) {  // exact: the same rows, bit for bit
      for (int c = 0; c < 3; ++c)
        if (!(got.at(i, 0, c) == ref.at(i, 0, c))) {
          bad(i, c, got.at(i, 0, c), ref.at(i, 0, c));
          break;
        }
    }
    if (i >= n_ref) {
      if (!(x == kPadCoord && y == kPadCoord && s == 0.0f) && !a.variant->approx.empty())
        bad(i, 0, x, kPadCoord);
      continue;
    }
    const int xi = int(x), yi = int(y);
    if (!(x >= 0 && y >= 0 && xi < nms.width && yi < nms.height && float(xi) == x &&
          float(yi) == y)) {
      if (!a.variant->approx.empty()) bad(i, 0, x, -1);
      continue;
    }
    if (!got_pos.insert({xi, yi}).second) {  // a duplicate
      if (!a.variant->approx.empty()) bad(i, 0, x, -1);
      continue;
    }
    if (ref_pos.count({xi, yi})) {
      ++d.set_matched;
      d.max_score_err = std::max(d.max_score_err, double(std::abs(s - nms.at(xi, yi))));
    }
    if (!a.variant->approx.empty() && !(s == nms.at(xi, yi) && s != 0.0f))
      bad(i, 2, s, nms.at(xi, yi));
  }
  d.set_got = got_pos.size();
  if (!a.variant->approx.empty() && n_ref > 0) {
    const uint32_t boundary = topk_bin(ref_pts.back().second);
    for (const auto& p : got_pos)
      if (topk_bin(nms.at(p.first, p.second)) < boundary) {
        d.fail = "a keypoint below the boundary bin";
        break;
      }
    for (const auto& p : ref_pts)
      if (topk_bin(p.second) > boundary && !got_pos.count(p.first)) {
        d.fail = "a keypoint above the boundary bin is missing";
        break;
      }
    if (d.set_got != size_t(n_ref) && d.fail.empty())
      d.fail =
          "found " + std::to_string(d.set_got) + " keypoints, expected " + std::to_string(n_ref);
  }
  if (a.variant->approx.empty() && d.over) d.fail = "differs from the exact reference";
  d.psnr = d.over || !d.fail.empty() ? 0 : std::numeric_limits<double>::infinity();
  return d;
}

// ---- v9_listed_front: reference, slots, comparison -------------------------------------------

// nms/v5_fused_front's definition: v9 borrows its reference and comparison for the map and blur.
inline const VariantDef& nms_front_variant() {
  const Op& nms = find_op("nms");
  return nms.def.variants.at(size_t(nms.find_variant("v5_fused_front")));
}

// v9's parameters as nms v5 takes them: nms's own, and harris's as "harris.name".
inline ParamMap front_params_of(const ParamMap& p) {
  ParamMap q = fused_params(p, "nms");
  for (const auto& [name, value] : p)
    if (name.compare(0, 7, "harris.") == 0) q[name] = value;
  return q;
}

// Reads the letterbox plane; writes the keypoints, the NMS map and the blur plane.
inline std::vector<ImageDesc> topk_front_shape(const std::vector<ImageDesc>& in,
                                               const ParamMap& p) {
  const ImageDesc d = require_f32_plane("topk", in[0]);
  return {topk_shape({d}, p)[0], d, d};
}

// The CPU chain blur -> sobel -> harris -> nms (nms v5's reference), then topk's on its map.
inline void topk_front_reference(const StageArgs& a) {
  nms_front_variant().reference(
      StageArgs{{a.in[0]}, {a.out[1], a.out[2]}, front_params_of(a.params), a.block});
  topk_reference(StageArgs{{a.out[1]}, {a.out[0]}, a.params, a.block});
}

// The map and the blur plane by nms v5's rule against the CPU chain; the keypoints exact for
// the map the GPU wrote (where that map keeps or drops a near tie unlike the CPU's, the
// keypoints follow it, so they are not compared with the CPU chain's list).
inline DiffStats topk_front_compare(const CompareArgs& a) {
  const VariantDef& front = nms_front_variant();
  const std::vector<HostImage> got{(*a.got)[1], (*a.got)[2]}, ref{(*a.ref)[1], (*a.ref)[2]};
  const std::vector<std::string> names{(*a.out_names)[1], (*a.out_names)[2]};
  const ParamMap fp = front_params_of(*a.params);
  CompareArgs f = a;
  f.got = &got, f.ref = &ref, f.out_names = &names, f.variant = &front, f.params = &fp;
  DiffStats d = front.compare(f);
  const std::vector<HostImage> map{(*a.got)[1]}, kp{(*a.got)[0]};
  std::vector<HostImage> kp_ref{HostImage(kp[0].desc())};
  topk_reference(StageArgs{{map[0].ref()}, {kp_ref[0].ref()}, *a.params, {}});
  static const VariantDef exact;  // no `approx`: topk_compare holds the rows bit for bit
  const std::vector<std::string> kp_name{(*a.out_names)[0]};
  CompareArgs t = a;
  t.in = &map, t.got = &kp, t.ref = &kp_ref, t.out_names = &kp_name, t.variant = &exact;
  merge_diff(d, topk_compare(t));
  return d;
}

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

// ---- v4, v5: survivors compacted once, the same selection in every block, ranks by counting --

// Level 0 of v4's select: the top 13 bits of the ordered score (for positive scores the sign bit
// is constant: 8 exponent and 4 mantissa bits, a bin spans a factor of 2^(1/16)).
constexpr int kBins = 8192;
constexpr int kBinShift = 64 - 13;  // a key's level-0 bin: key >> kBinShift
// Candidates a select block holds in shared memory (64 KB of keys; K above it runs v2).
constexpr uint32_t kTopkCap = 8192;
constexpr int kSelectThreads = 1024;
constexpr int kSubBins = 4096;  // a refinement level: the next 12 bits of the key
// The select kernel's dynamic shared memory: the candidates, a refinement histogram, and the
// slots of the candidates the block ranks (112 KB: one block per SM on sm_87 and sm_90).
constexpr size_t kSelectSmem =
    kTopkCap * sizeof(uint64_t) + kSubBins * sizeof(uint32_t) + kTopkCap * sizeof(uint32_t);

static_assert(kBins * sizeof(uint32_t) <= kTopkCap * sizeof(uint64_t),
              "v5 counts its histogram where the candidates go later");

// Device memory of v4, zeroed by one memset before the compaction.
struct TopkListScratch {
  uint32_t hist[kBins];  // level-0 histogram of the survivors
  uint32_t count;        // survivors appended to the list
};

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
// LOADS_FIRST (v6 on): a thread issues all its ITEMS loads before it counts any of them. In v4
// and v5 each load is followed by a branch and a shared-memory atomic, and the PTX keeps every
// later load behind them: the ITEMS loads wait for each other.
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

// The bin where a descending walk of `h` (PER x kSelectThreads bins) reaches `need`, with the count
// above it and in it, into out[0..2] for the whole block. The caller guarantees the total
// reaches `need`.
template <int PER, bool GLOBAL>
__device__ void topk_v4_find(const uint32_t* h, uint32_t need, uint32_t* out) {
  using Scan = cub::BlockScan<uint32_t, kSelectThreads>;
  __shared__ typename Scan::TempStorage tmp;
  const int hi = PER * (kSelectThreads - int(threadIdx.x));  // this thread's bins [hi - PER, hi)
  uint32_t bins[PER], mine = 0;
#pragma unroll
  for (int j = 0; j < PER; ++j)  // the global histogram through the L2 (v5 wrote it this launch)
    mine += (bins[j] = GLOBAL ? __ldcg(&h[hi - 1 - j]) : h[hi - 1 - j]);
  uint32_t before = 0, all = 0;
  Scan(tmp).ExclusiveSum(mine, before, all);
  if (before < need && before + mine >= need) {  // exactly one thread
    uint32_t cum = before;
    for (int j = 0; j < PER; ++j) {
      if (cum + bins[j] >= need) {
        out[0] = uint32_t(hi - 1 - j), out[1] = cum, out[2] = bins[j];
        break;
      }
      cum += bins[j];
    }
  }
  __syncthreads();
}

// The list's keys i = threadIdx.x + kSelectThreads * (j + kListUnroll * round): each thread loads
// kListUnroll keys before it uses any, so a round costs one L2 latency, not kListUnroll.
constexpr int kListUnroll = 4;
template <class F>
__device__ void for_each_listed(const uint64_t* list, uint32_t total, F&& f) {
  for (uint32_t r = 0; r < total; r += kSelectThreads * kListUnroll) {
    uint64_t key[kListUnroll];
#pragma unroll
    for (int j = 0; j < kListUnroll; ++j) {
      const uint32_t i = r + uint32_t(j * kSelectThreads) + threadIdx.x;
      key[j] = i < total ? __ldcg(&list[i]) : 0ull;
    }
#pragma unroll
    for (int j = 0; j < kListUnroll; ++j)
      if (key[j]) f(key[j], r + uint32_t(j * kSelectThreads) + threadIdx.x);
  }
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

// The selection v4 to v8 make: the keys whose top (64 - shift) bits are >= prefix. `above`
// keys lie strictly above the prefix's bin, all kept, and `in_bin` keys in it, of which
// K - above are kept. While the candidates would overflow the shared buffer (a plateau of equal
// scores), a level refines the bin by the next 12 bits of the key (score bits, then the index:
// the keys are distinct, so it ends by shift 0, one key a bin). bin0 and above0: the level-0
// boundary bin and the count above it. With K or fewer survivors (`all`) every one is kept.
struct TopkSelection {
  uint64_t prefix = 0;
  int shift = kBinShift;
  uint32_t total = 0, above = 0, in_bin = 0, bin0 = 0, above0 = 0;
  bool all = true;
  __device__ bool take(uint64_t key) const { return all || (key >> shift) >= prefix; }
  __device__ uint32_t count() const { return all ? total : above + in_bin; }  // <= kTopkCap
};

// Made alike by every thread of the block (and every block), from the global histogram and the
// whole list; `sub`: kSubBins counts of shared memory for the refinement levels.
__device__ TopkSelection topk_select(const TopkListScratch* sc, const uint64_t* list, uint32_t k,
                                     uint32_t* sub) {
  __shared__ uint32_t sel[3];
  TopkSelection t;
  t.total = t.in_bin = __ldcg(&sc->count);
  t.all = t.total <= k;  // then total <= kTopkCap
  if (t.all) return t;
  topk_v4_find<kBins / kSelectThreads, true>(sc->hist, k, sel);
  t.prefix = t.bin0 = sel[0], t.above = t.above0 = sel[1], t.in_bin = sel[2];
  while (t.above + t.in_bin > kTopkCap) {  // k <= kTopkCap
    const int bits = min(12, t.shift), next = t.shift - bits;
    for (int b = threadIdx.x; b < kSubBins; b += kSelectThreads) sub[b] = 0;
    __syncthreads();
    for_each_listed(list, t.total, [&](uint64_t key, uint32_t) {
      if ((key >> t.shift) == t.prefix)
        atomicAdd(&sub[uint32_t(key >> next) & ((1u << bits) - 1u)], 1u);
    });
    __syncthreads();
    topk_v4_find<kSubBins / kSelectThreads, false>(sub, k - t.above, sel);
    t.prefix = (t.prefix << bits) | sel[0], t.above += sel[1], t.in_bin = sel[2], t.shift = next;
    __syncthreads();  // sel and sub are rewritten by the next level
  }
  return t;
}

// start[b] (kBins, shared): the candidates in the level-0 bins above b, bins descending. A bin
// above the boundary bin keeps all its survivors, the boundary bin its selected part, the bins
// below none.
__device__ void topk_bin_starts(const TopkListScratch* sc, const TopkSelection& t,
                                uint32_t* start) {
  using Scan = cub::BlockScan<uint32_t, kSelectThreads>;
  __shared__ typename Scan::TempStorage tmp;
  constexpr int kPer = kBins / kSelectThreads;
  const int hi = kPer * (kSelectThreads - int(threadIdx.x));  // this thread's bins [hi - kPer, hi)
  uint32_t c[kPer], mine = 0;
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    const uint32_t b = uint32_t(hi - 1 - j), h = __ldcg(&sc->hist[b]);
    c[j] = t.all || b > t.bin0 ? h : b == t.bin0 ? t.count() - t.above0 : 0u;
    mine += c[j];
  }
  uint32_t before = 0, sum = 0;
  Scan(tmp).ExclusiveSum(mine, before, sum);
#pragma unroll
  for (int j = 0; j < kPer; ++j) start[hi - 1 - j] = before, before += c[j];
  __syncthreads();
}

// Select and rank, with no grid-wide barrier: every block makes the same selection from the
// histogram and the list (the list is a few hundred KB, read from the L2 by each SM), so each
// has every candidate in shared memory; a block then ranks the candidates it owns (list
// position modulo the grid), one warp per candidate, counting the candidates with a greater
// key (keys are distinct, so ranks are a permutation), and writes row `rank` when rank < K.
// `smem`: kSelectSmem bytes of dynamic shared memory.
// AGGREGATED (v6 on): the candidates are appended to shared memory with one atomic per warp,
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
// barrier between them instead of a second launch. Phase 1 counts its histogram in the space
// phase 2 later fills with candidates.
__global__ void __launch_bounds__(kSelectThreads)
    topk_one_launch_kernel(ImageView<const float> s, uint32_t n, TopkListScratch* sc,
                           uint64_t* list, uint32_t k, ImageView<float> kp) {
  extern __shared__ uint64_t smem[];
  topk_compact_tiles<kSelectThreads, 8>(s, n, sc, list, reinterpret_cast<uint32_t*>(smem));
  cooperative_groups::this_grid().sync();  // every survivor listed and counted
  topk_select_rank(sc, list, k, uint32_t(s.width), kp, smem);
}

// v6: v5 with its loads in flight together and its shared appends one per warp.
__global__ void __launch_bounds__(kSelectThreads)
    topk_in_flight_kernel(ImageView<const float> s, uint32_t n, TopkListScratch* sc, uint64_t* list,
                          uint32_t k, ImageView<float> kp) {
  extern __shared__ uint64_t smem[];
  topk_compact_tiles<kSelectThreads, 8, true>(s, n, sc, list, reinterpret_cast<uint32_t*>(smem));
  cooperative_groups::this_grid().sync();
  topk_select_rank<true>(sc, list, k, uint32_t(s.width), kp, smem);
}

// v7: v6's selection; the candidates placed in shared memory grouped by their level-0 bin (bins
// descending), each then ranked against its own bin only. v6 compares every candidate with
// every other, n^2 work (19.5 M comparisons for the 4,416 candidates of coffee.png); on a real
// image the candidates spread over tens of bins. The order inside a bin is the order
// of the atomics, so it differs between blocks: a candidate belongs to the block its pixel index
// names (index modulo the grid), not to a position.
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

__global__ void __launch_bounds__(kSelectThreads)
    topk_binned_rank_kernel(ImageView<const float> s, uint32_t n, TopkListScratch* sc,
                            uint64_t* list, uint32_t k, ImageView<float> kp) {
  extern __shared__ uint64_t smem[];
  topk_compact_tiles<kSelectThreads, 8, true>(s, n, sc, list, reinterpret_cast<uint32_t*>(smem));
  cooperative_groups::this_grid().sync();
  topk_select_rank_binned(sc, list, k, uint32_t(s.width), kp, smem);
}

// ---- v9: the survivors listed by the dense front as it finds them --------------------------

// The front's sink (front_kernels.cuh): each NMS value the warp wrote that is non-zero is a
// survivor. Once a strip is written, the warp reserves room for all its survivors with one
// atomic (a scan of the lanes' counts), and each lane reads its survivors' values back from the
// map it wrote (its own writes, so it sees them; a few per strip, most strips none), lists their
// keys and counts them in the level-0 histogram. The read is __ldcg: from a plain load the
// compiler forwards the values the strip stored, and holds all of them in registers through the
// strip (v11's front took 157 registers that way, 128 with __ldcg).
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

// ---- v15: the listed pair front in two launches ------------------------------------------------

// v14's listed pair front on part of its grid (pair_split). PART 1: the interior blocks, in
// launch order, each on the interior path; PART 2: the ring of border blocks, each on the edge
// path, launched after PART 1 with the programmatic attribute so that its blocks start as soon as
// the interior's are all running and fill its last wave. A ring block of the grid is done as
// HALVES blocks of ROWS / HALVES rows: what the ring adds to the frame is the latency of a strip
// (its unrolled steps one after another, a few blocks an SM), not its work; in 16-row strips (28
// steps) the ring took 21 us at 4K on the H200, in 8-row strips (20 steps, twice the blocks, 40 %
// more rows walked) 15 us and the frame 4.9 us less as a graph. The ring's last block to finish
// waits for the interior's grid (`done`: a zeroed count of the ring's finished blocks), so that
// the ring's completion implies the interior's: what the stream runs next (the rank) reads both.
// WAIT (v16, PART 1): the interior was launched programmatically, behind the counters' zeroing
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

// In one launch (v14) both unrolled paths are in use on every SM at once (a border block in every
// row of blocks), the front's top stall is an instruction-cache miss (ncu on the H200;
// BENCHMARKS.md, "What the code relies on") and the kernel holds the edge path's 128
// registers: 8 blocks of 2 warps an SM. The interior path alone took 89 (ptxas, sm_90); held to 80
// (3 blocks of 256 threads, or 12 of 64, an SM) it spills nothing, and 12 blocks fit, not 8.
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

// v16: the front's counters zeroed by a kernel, not a memset, so that the front can be launched
// programmatically behind it (a memset node between two kernels keeps the second from starting
// early). Launched programmatically itself: it lets the interior start at once, and waits for
// the kernel before it (the letterbox; or, where topk runs alone, the last frame's rank, which
// reads these counters) before it zeroes, so its completion implies that kernel's too.
__global__ void topk_zero_counters_kernel(uint32_t* words, uint32_t n) {
  griddep_launch_dependents();
  griddep_wait();
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    words[i] = 0;
}

// v9's selection: v7's, from the front's list; a plain launch (the list is complete when it
// starts), a block per SM.
__global__ void __launch_bounds__(kSelectThreads)
    topk_listed_rank_kernel(const TopkListScratch* sc, const uint64_t* list, uint32_t k,
                            uint32_t width, ImageView<float> kp) {
  extern __shared__ uint64_t smem[];
  topk_select_rank_binned(sc, list, k, width, kp, smem);
}

// ---- v10: the listed survivors ranked by counting every pair ---------------------------------

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

// v10's selection: every pair counted while the list fits a block's shared memory (the count
// is the same for every block, so they all take the same branch), else v9's.
__global__ void __launch_bounds__(kSelectThreads)
    topk_counted_rank_kernel(const TopkListScratch* sc, const uint64_t* list, uint32_t k,
                             uint32_t width, ImageView<float> kp) {
  extern __shared__ __align__(16) uint64_t smem[];  // read as pairs of keys
  const uint32_t n = __ldcg(&sc->count);
  if (n > kTopkCap) return topk_select_rank_binned(sc, list, k, width, kp, smem);
  topk_count_rank(list, n, k, width, kp, smem);
}

// ---- v12: the listed survivors ranked within buckets of their score -------------------------

// v10 compares every key with every other. A key's rank is the count of the keys above its
// bucket plus the greater keys in its own bucket, for any bucket function that is monotone in the
// key (a greater key never falls in a lower bucket; equal scores share one). v12's buckets are
// kBuckets equal slices of the block's own span of ordered score bits (score_order: bits that
// grow with the score, so slices of them are nearly slices of log2(score)): adaptive, where a
// fixed histogram (v7, v9: 8,192 bins) spends its time on bins a frame never fills. Every block
// builds the same buckets from the whole list (keys in registers, a min/max, a histogram, a
// scan, the keys placed by bucket), then a warp counts, for each key of the block's share, the
// greater keys of its bucket only. Ties of score (chessboard.png's corners) share a bucket and
// are told apart by the index bits, as everywhere.
constexpr int kBuckets = kSubBins;  // 4096: the counts where v7's refinement histogram goes
constexpr int kKeysPerThread = int(kTopkCap) / kSelectThreads;
static_assert(kKeysPerThread * kSelectThreads == int(kTopkCap),
              "a thread holds its keys in registers");
static_assert(kSelectThreads == 32 * 32, "a warp's lanes read the 32 warps' spans, one each");

__device__ __forceinline__ uint32_t v12_bucket(uint64_t key, uint32_t lo, int shift) {
  return min((uint32_t(key >> 32) - lo) >> shift, uint32_t(kBuckets - 1));
}

// n <= kTopkCap keys of `list`, ranked as v10 ranks them. `smem`: kSelectSmem bytes: the keys by
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
      if (mine[j]) slot[j] = atomicAdd(&count[v12_bucket(mine[j], lo, shift)], 1u);
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
      if (mine[j]) keys[first[v12_bucket(mine[j], lo, shift)] + slot[j]] = mine[j];
    __syncthreads();  // the keys placed
    // A warp per key of the share: the lanes stride its bucket; the greater keys summed.
    for (uint32_t i = begin + uint32_t(warp); i < end; i += kSelectThreads / 32) {
      const uint64_t key = __ldcg(&list[i]);
      const uint32_t b = v12_bucket(key, lo, shift), from = first[b], size = count[b];
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

// Fewer survivors than this: v10's count of every pair, which costs ~n^2 and the buckets' five
// barriers ~1 us. H200, rank alone (BENCHMARKS.md, "What the code relies on"): n = 5,339
// 12.2 -> 8.7 us, 4,416 9.7 -> 8.1, 3,257 7.8 -> 7.3; chessboard.png's few hundred tied corners
// 6.0 -> 6.9.
constexpr uint32_t kMinBucketedKeys = 3072;

// v12's selection: the bucketed count from kMinBucketedKeys keys while the list fits a block's
// shared memory; below, v10's; above, v9's (n is the same for every block: one branch).
__global__ void __launch_bounds__(kSelectThreads)
    topk_bucket_rank_kernel(const TopkListScratch* sc, const uint64_t* list, uint32_t k,
                            uint32_t width, ImageView<float> kp) {
  extern __shared__ __align__(16) uint64_t smem[];
  const uint32_t n = __ldcg(&sc->count);
  if (n > kTopkCap) return topk_select_rank_binned(sc, list, k, width, kp, smem);
  if (n < kMinBucketedKeys) return topk_count_rank(list, n, k, width, kp, smem);
  topk_bucket_rank(list, n, k, width, kp, smem);
}

// ---- v8: v7 with the selection shared out across the grid ----------------------------------

// v7 has every block read the whole survivor list, once more for each refinement level: cheap
// for the few thousand survivors of the test images, but it grows with the survivors (a low
// threshold, a textured 4K frame: tens of thousands, MBs of L2 reads per block). v8 gives each
// block a slice of the list and meets the others at a grid-wide barrier after each step: the
// refinement histograms are summed in global memory, and the candidates are placed in global memory
// grouped by their level-0 bin (bins descending), so that a candidate's rank is the count of the
// bins above its own plus the greater keys in its own bin: the ranking compares within a bin, not
// across all candidates.
constexpr int kRefineLevels = 5;  // refinements at most: the shift goes 51, 39, 27, 15, 3, 0

struct TopkSharedSelectScratch {
  TopkListScratch v4;                     // zeroed by a memset before the launch
  uint32_t fill[kBins];                   // candidates placed so far, per level-0 bin
  uint32_t sub[kRefineLevels][kSubBins];  // the refinement levels' histograms
};

// The list's keys i = threadIdx.x + kSelectThreads * (blockIdx.x + gridDim.x * (j + kListUnroll *
// round)): this block's slice, spread evenly over the grid whatever the list's length.
template <class F>
__device__ void for_each_in_slice(const uint64_t* list, uint32_t total, F&& f) {
  const uint32_t stride = gridDim.x * kSelectThreads;
  const uint32_t mine = blockIdx.x * kSelectThreads + threadIdx.x;
  for (uint32_t r = 0; r < total; r += stride * kListUnroll) {
    uint64_t key[kListUnroll];
#pragma unroll
    for (int j = 0; j < kListUnroll; ++j) {
      const uint32_t i = r + uint32_t(j) * stride + mine;
      key[j] = i < total ? __ldcg(&list[i]) : 0ull;
    }
#pragma unroll
    for (int j = 0; j < kListUnroll; ++j)
      if (key[j]) f(key[j]);
  }
}

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
  topk_compact_tiles<kSelectThreads, 8, true>(s, n, &sc->v4, list, start);
  grid.sync();  // every survivor listed and counted; fill and sub zeroed

  // v7's selection, made by every block alike from sums in global memory: each refinement
  // level's histogram counted from the slices and summed over the grid.
  TopkSelection t;
  t.total = t.in_bin = __ldcg(&sc->v4.count);
  t.all = t.total <= k;
  if (!t.all) {
    topk_v4_find<kBins / kSelectThreads, true>(sc->v4.hist, k, sel);
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
    topk_v4_find<kSubBins / kSelectThreads, true>(sc->sub[level], k - t.above, sel);
    t.prefix = (t.prefix << bits) | sel[0], t.above += sel[1], t.in_bin = sel[2], t.shift = next;
    __syncthreads();  // sel and sub are rewritten by the next level
  }
  const uint32_t n_cand = t.count();
  topk_bin_starts(&sc->v4, t, start);
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

// ---- v14: past the cap, the candidates selected once ----------------------------------------

// v9 to v12 rank more than kTopkCap survivors (a textured 4K frame: 32,140 on pier_4k.jpg) by v7's
// select in every block: each of the grid's blocks reads the whole list and ranks within the
// level-0 bins (20.7 us on pier_4k.jpg at 4K, against v12's 5.9 on the synthetic frame's few
// thousand survivors). Past the cap v14 reads the list once over the grid, as v8 reads the map:
// every block scans the front's level-0 histogram (the same scan in every block) for each bin's
// first place (bins descending) and the bin of the K-th key; each block places its slice's keys
// from that bin up in their bins' ranges of a list of candidates in global memory (a counter per
// bin); after a grid-wide barrier a warp ranks a candidate by counting the greater keys of its
// own bin, read from the L2 (a bin is 1/16 of an octave of score: a few to a few hundred keys).
// Every key above a candidate is a candidate, so its rank among them is its rank. Where the
// candidates overflow kTopkCap (a plateau of equal scores in the K-th key's bin), v9's refining
// select. At or under the cap, v12's rank: the same branch in every block (n is the grid's), no
// barrier taken. A cooperative launch: the barrier needs every block resident (one per SM).
struct TopkGridSelectScratch {
  TopkListScratch v4;    // the front's counters, zeroed with the fills by one memset
  uint32_t fill[kBins];  // candidates placed so far, per level-0 bin
};

// start[b] (kBins, shared): the survivors in the level-0 bins above b (bins descending);
// sel[0]: the bin of the K-th key, sel[1]: the survivors in it and above. The caller guarantees
// more than k survivors. The histogram is copied into `start` first, coalesced: the scan gives a
// thread 8 adjacent bins, and read from the L2 in that layout (as v7's and v9's selects read it)
// a warp's load touches 32 sectors for 4 bytes of each; ncu counted 81 % of the L2 sectors of
// v14's build that read it so excess, 8x the histogram's 32 KB per block.
__device__ void topk_v14_starts(const uint32_t* hist, uint32_t k, uint32_t* start, uint32_t* sel) {
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
  griddep_wait();  // v16 launches it programmatically behind the ring (elsewhere a no-op)
  const uint32_t n = __ldcg(&sc->v4.count);
  if (n <= kTopkCap) {  // v12's rank (k <= kTopkCap: the launcher's)
    if (n < kMinBucketedKeys) return topk_count_rank(list, n, k, width, kp, smem);
    return topk_bucket_rank(list, n, k, width, kp, smem);
  }
  uint32_t* start = reinterpret_cast<uint32_t*>(smem);  // kBins
  topk_v14_starts(sc->v4.hist, k, start, sel);          // n > kTopkCap >= k
  const uint32_t bin0 = sel[0], m = sel[1];             // the candidates: bins >= bin0
  if (m > kTopkCap) {
    __syncthreads();  // start and sel read; smem is the select's now
    return topk_select_rank_binned(&sc->v4, list, k, width, kp, smem);
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

// v4 and v5 ask for more than the default 48 KB of shared memory per block, and v5 for a
// cooperative launch: asked once per CUDA context (a device reset forgets function attributes,
// so a hook asks again after one). v4: whether it can run; v5: its grid, the blocks the device
// holds at once (one per SM here), 0 when it cannot run.
struct TopkOptIn {
  bool v4 = false;
  int v5_grid = 0, v6_grid = 0, v7_grid = 0, v8_grid = 0, v14_grid = 0;
};
static std::mutex g_optin_mu;
static bool g_optin_valid = false;
static TopkOptIn g_optin;
static void forget_optin() {
  std::lock_guard<std::mutex> lock(g_optin_mu);
  g_optin_valid = false;
}
static TopkOptIn topk_optin() {
  static const bool hooked = (on_device_reset(forget_optin), true);
  (void)hooked;
  std::lock_guard<std::mutex> lock(g_optin_mu);
  if (g_optin_valid) return g_optin;
  const DeviceInfo& d = device_info();
  TopkOptIn o;
  if (d.smem_per_block_optin >= kSelectSmem + 16 * 1024) {  // + the kernels' static shared memory
    for (const void* f : {reinterpret_cast<const void*>(topk_select_rank_kernel),
                          reinterpret_cast<const void*>(topk_one_launch_kernel),
                          reinterpret_cast<const void*>(topk_in_flight_kernel),
                          reinterpret_cast<const void*>(topk_binned_rank_kernel),
                          reinterpret_cast<const void*>(topk_shared_select_kernel),
                          reinterpret_cast<const void*>(topk_listed_rank_kernel),
                          reinterpret_cast<const void*>(topk_counted_rank_kernel),
                          reinterpret_cast<const void*>(topk_bucket_rank_kernel),
                          reinterpret_cast<const void*>(topk_selected_rank_kernel)})
      LAB_CUDA_CHECK(
          cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kSelectSmem)));
    o.v4 = true;
    int coop = 0;
    LAB_CUDA_CHECK(cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, d.index));
    // A cooperative grid: the blocks the device holds at once.
    auto grid_of = [&](const void* f) {
      int per_sm = 0;
      if (coop)
        LAB_CUDA_CHECK(
            cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, f, kSelectThreads, kSelectSmem));
      return per_sm * d.sms;
    };
    o.v5_grid = grid_of(reinterpret_cast<const void*>(topk_one_launch_kernel));
    o.v6_grid = grid_of(reinterpret_cast<const void*>(topk_in_flight_kernel));
    o.v7_grid = grid_of(reinterpret_cast<const void*>(topk_binned_rank_kernel));
    o.v8_grid = grid_of(reinterpret_cast<const void*>(topk_shared_select_kernel));
    o.v14_grid = grid_of(reinterpret_cast<const void*>(topk_selected_rank_kernel));
  }
  g_optin = o, g_optin_valid = true;
  return o;
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
  if (io.k > kTopkCap || !topk_optin().v4) {
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

// v5 to v7: one cooperative launch with v4's scratch, on the grid the opt-in found for it.
using OneLaunchKernel = void (*)(ImageView<const float>, uint32_t, TopkListScratch*, uint64_t*,
                                 uint32_t, ImageView<float>);
static void launch_one(LaunchContext& ctx, const StageArgs& a, int TopkOptIn::*grid_of,
                       const char* name, OneLaunchKernel kernel) {
  const TopkIo io = io_of(a);
  const int grid = io.k <= kTopkCap ? topk_optin().*grid_of : 0;
  if (grid == 0) {  // launch_v4 falls back to v2 past the cap, and says so
    ctx.runs_step("v4_compact_select", "no cooperative launch here");
    return launch_v4(ctx, a);
  }
  auto* sc = static_cast<TopkListScratch*>(ctx.scratch(sizeof(TopkListScratch), 0));
  auto* list = static_cast<uint64_t*>(ctx.scratch(sizeof(uint64_t) * io.n, 1));
  LAB_CUDA_CHECK(cudaMemsetAsync(sc, 0, sizeof(TopkListScratch), ctx.stream()));
  launch_cooperative(ctx, name, kernel, dim3(grid), dim3(kSelectThreads), kSelectSmem, io.s, io.n,
                     sc, list, io.k, io.kp);
}

static void launch_v5(LaunchContext& ctx, const StageArgs& a) {
  launch_one(ctx, a, &TopkOptIn::v5_grid, "topk_one_launch", topk_one_launch_kernel);
}

static void launch_v6(LaunchContext& ctx, const StageArgs& a) {
  launch_one(ctx, a, &TopkOptIn::v6_grid, "topk_in_flight", topk_in_flight_kernel);
}

static void launch_v7(LaunchContext& ctx, const StageArgs& a) {
  launch_one(ctx, a, &TopkOptIn::v7_grid, "topk_binned_rank", topk_binned_rank_kernel);
}

static void launch_v8(LaunchContext& ctx, const StageArgs& a) {
  const TopkIo io = io_of(a);
  const int grid = io.k <= kTopkCap ? topk_optin().v8_grid : 0;
  if (grid == 0) {  // launch_v4 falls back to v2 past the cap, and says so
    ctx.runs_step("v4_compact_select", "no cooperative launch here");
    return launch_v4(ctx, a);
  }
  auto* sc = static_cast<TopkSharedSelectScratch*>(ctx.scratch(sizeof(TopkSharedSelectScratch), 0));
  auto* list = static_cast<uint64_t*>(ctx.scratch(sizeof(uint64_t) * io.n, 1));
  auto* cand = static_cast<uint64_t*>(ctx.scratch(sizeof(uint64_t) * kTopkCap, 2));
  LAB_CUDA_CHECK(cudaMemsetAsync(&sc->v4, 0, sizeof(TopkListScratch), ctx.stream()));
  launch_cooperative(ctx, "topk_shared_select", topk_shared_select_kernel, dim3(grid),
                     dim3(kSelectThreads), kSelectSmem, io.s, io.n, sc, list, cand, io.k, io.kp);
}

// v11's choice of front: nms v6's pairs (in launch order, below) when their blocks fill the GPU
// at least twice over, else v5's. A pair front has 2/3 of v5's warps per SM (128 registers) and
// 2.3x fewer warps in all, so a small frame leaves SMs short of warps. v6's kernel in launch
// order against v5 on graf1.png (H200; BENCHMARKS.md, "What the code relies on"): 6 % faster at
// 3840x2160 (4.5 such waves), 4 % at 3200x1800 (3.1), level at 2560x1440 (1.96), 10 % slower at
// 1920x1080 (1.2) and 19 % at 1280x736 (0.5).
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

// v9 to v14's list: zeroed counters (scratch slot 4: `counters` bytes, TopkListScratch first;
// v14's fills after it) and room for a key per pixel (slot 5; v2's path below uses 0 to 3), and
// the sink the front lists into.
// `zero`: the counters zeroed by a memset (v16 zeroes them with a kernel of its own).
static TopkListSink listed_sink(LaunchContext& ctx, int width, int height,
                                size_t counters = sizeof(TopkListScratch), bool zero = true) {
  auto* sc = static_cast<TopkListScratch*>(ctx.scratch(counters, 4));
  auto* list = static_cast<uint64_t*>(ctx.scratch(sizeof(uint64_t) * size_t(width) * height, 5));
  if (zero) LAB_CUDA_CHECK(cudaMemsetAsync(sc, 0, counters, ctx.stream()));
  return TopkListSink{sc, list, uint32_t(width)};
}

// After the front: `rank` selects and ranks the listed survivors; past the cap, v2 on the map.
using ListedRankKernel = void (*)(const TopkListScratch*, const uint64_t*, uint32_t, uint32_t,
                                  ImageView<float>);
static void rank_listed(LaunchContext& ctx, const StageArgs& a, const char* name,
                        ListedRankKernel rank, const TopkListSink& sink) {
  const auto kp = a.out[0].view<float>();
  const uint32_t k = uint32_t(kp.width);
  if (k > kTopkCap || !topk_optin().v4) {  // v2's exact path on the map; the list goes unread
    ctx.runs_step("v2_select_sort", k > kTopkCap ? "K over 8,192, after the front"
                                                 : "too little shared memory, after the front");
    StageArgs v2 = a;
    v2.in = {a.out[1]}, v2.out = {a.out[0]}, v2.block = {256, 1};
    return launch_v2(ctx, v2);
  }
  launch(ctx, name, rank, dim3(std::max(1, device_info().sms)), dim3(kSelectThreads), kSelectSmem,
         sink.sc, sink.list, k, sink.width, kp);
}

// v9 to v12 and v14: in[0] the letterbox plane; out: keypoints, the NMS map, the blur plane. The
// front lists the survivors into the sink it returns. `pairs`: nms v6's front where it pays (v11,
// v12, v14), else v5's (v9, v10); v5's too where the planes' rows are not 8-byte aligned (never,
// for the lab's pitched planes).
static TopkListSink launch_listed_front(LaunchContext& ctx, const StageArgs& a, bool pairs,
                                        size_t counters = sizeof(TopkListScratch)) {
  const auto src = a.in[0].view<const float>();
  const auto map = a.out[1].view<float>(), blur = a.out[2].view<float>();
  const float hk = front_k(a.params), thr = fused_param(a.params, "nms", "threshold");
  const dim3 block(a.block.x, a.block.y);
  const TopkListSink sink = listed_sink(ctx, src.width, src.height, counters);
  if (pairs && pair_front_pays(src.width, src.height, a.block) &&
      front_pairs_aligned(src.data, blur.data, map.data, src.pitch, blur.pitch, map.pitch)) {
    const dim3 grid = front_grid(src.width, src.height, a.block, PAIR_COLS, FRONT_ROWS);
    // In launch order, without nms v6's remap to interior blocks first: with the remap this
    // kernel took 67-71 us at 3840x2160 on graf1.png (58.9 without), where nms v6 gained
    // 54 -> 50 us from it. The remap does cut the instruction-cache stalls here too, but with
    // the sink it takes the kernel to 158 registers (15 % of the warps resident against 22 %),
    // and capped at 128 it spills 6 MB: 67-70 us under ncu on pier_4k.jpg against 60.5 (H200;
    // BENCHMARKS.md, "What the code relies on"). Registers are not the whole cause: at 117
    // (survivor rows marked by a vote) the ordered front was slower still.
    launch(ctx, "topk_pair_front_listed",
           nms_v6_front_pairs_kernel<FRONT_ROWS, TopkListSink, false>, grid, block, 0,
           PlaneSource{src}, blur, map, hk, thr, sink, FrontOrder{});
  } else {
    const dim3 grid = front_grid(src.width, src.height, a.block, FRONT_COLS, FRONT_ROWS);
    // At most 85 registers (three blocks of 256 an SM): it takes 80 and spills 60 bytes. Left
    // to itself ptxas gave this kernel 102 once the blocks ran border first (80 before), and
    // it took 13.5-14.0 us at 1280x736, against 11.7-11.9 capped (H200; BENCHMARKS.md, "What
    // the code relies on").
    const auto kernel = nms_v5_fused_front_kernel<FRONT_ROWS, TopkListSink, 3>;
    launch(ctx, "topk_front_listed", kernel, grid, block, 0, src, blur, map, hk, thr, sink,
           v5_order(src.width, src.height, int(a.block.x / 32), grid));
  }
  return sink;
}

// v9 to v12: the front, then `rank` selects and ranks the survivors it listed.
static void launch_listed(LaunchContext& ctx, const StageArgs& a, const char* name,
                          ListedRankKernel rank, bool pairs = false) {
  rank_listed(ctx, a, name, rank, launch_listed_front(ctx, a, pairs));
}

static void launch_v9(LaunchContext& ctx, const StageArgs& a) {
  launch_listed(ctx, a, "topk_listed_rank", topk_listed_rank_kernel);
}

static void launch_v10(LaunchContext& ctx, const StageArgs& a) {
  launch_listed(ctx, a, "topk_counted_rank", topk_counted_rank_kernel);
}

static void launch_v11(LaunchContext& ctx, const StageArgs& a) {
  if (!pair_front_pays(a.in[0].desc.width, a.in[0].desc.height, a.block))
    ctx.runs_step("v10_counted_rank", "too few pair blocks to fill this GPU twice");
  launch_listed(ctx, a, "topk_counted_rank", topk_counted_rank_kernel, true);
}

static void launch_v12(LaunchContext& ctx, const StageArgs& a) {
  launch_listed(ctx, a, "topk_bucket_rank", topk_bucket_rank_kernel, true);
}

// v14's rank of the front's list: a cooperative launch (topk_selected_rank_kernel), its
// candidates past the cap in scratch slot 7. Where K is past the cap, or the device has no
// cooperative launch, v12's rank. `programmatic` (v16): launched to start before the kernel
// before it ends (it waits for that kernel first).
static void rank_v14(LaunchContext& ctx, const StageArgs& a, const TopkListSink& sink,
                     bool programmatic = false) {
  const auto kp = a.out[0].view<float>();
  const uint32_t k = uint32_t(kp.width);
  const int grid = topk_optin().v14_grid;
  if (k > kTopkCap || grid == 0) {  // rank_listed says where K is past the cap
    if (grid == 0) ctx.runs_step("v12_bucketed_count", "no cooperative launch here");
    return rank_listed(ctx, a, "topk_bucket_rank", topk_bucket_rank_kernel, sink);
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

// v14: v12's front and list, then v14's rank.
static void launch_v14(LaunchContext& ctx, const StageArgs& a) {
  rank_v14(ctx, a, launch_listed_front(ctx, a, true, sizeof(TopkGridSelectScratch)));
}

// v15: v14 with its pair front in two launches, the interior blocks and then the ring around
// them (topk_pair_front_interior_kernel, topk_pair_front_ring_kernel), where v14 runs the pair
// front, on a device with programmatic dependent launch (compute capability 9.0 and up: without
// it the ring would wait for the interior's last block); elsewhere v14. Then v14's rank.
// `overlapped` (v16): every launch of the stage programmatic, each waiting for the one before:
// the counters zeroed by a kernel (no memset node between the letterbox and the front), the
// interior behind it, the rank behind the ring.
static void launch_split_front(LaunchContext& ctx, const StageArgs& a, bool overlapped) {
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
    ctx.runs_step("v14_selected_once", why);
    return launch_v14(ctx, a);
  }
  const size_t done_at = sizeof(TopkGridSelectScratch);  // the ring's count of finished blocks
  const size_t counters = done_at + sizeof(uint32_t);
  const TopkListSink sink = listed_sink(ctx, src.width, src.height, counters, !overlapped);
  auto* done = reinterpret_cast<uint32_t*>(reinterpret_cast<char*>(sink.sc) + done_at);
  const float hk = front_k(a.params), thr = fused_param(a.params, "nms", "threshold");
  const dim3 block(a.block.x);
  const dim3 interior(unsigned(split.bx1 - split.bx0), unsigned(split.by1 - split.by0));
  if (overlapped) {
    static_assert(sizeof(TopkGridSelectScratch) % sizeof(uint32_t) == 0, "counters are words");
    const uint32_t words = uint32_t(counters / sizeof(uint32_t));
    launch_programmatic(ctx, "topk_zero_counters", topk_zero_counters_kernel,
                        dim3(unsigned(std::min<uint32_t>(64, (words + 255) / 256))), dim3(256), 0,
                        reinterpret_cast<uint32_t*>(sink.sc), words);
    launch_programmatic(ctx, "topk_pair_front_interior",
                        topk_pair_front_interior_kernel<FRONT_ROWS, true>, interior, block, 0,
                        PlaneSource{src}, blur, map, hk, thr, sink, split, done);
  } else {
    launch(ctx, "topk_pair_front_interior", topk_pair_front_interior_kernel<FRONT_ROWS>, interior,
           block, 0, PlaneSource{src}, blur, map, hk, thr, sink, split, done);
  }
  launch_programmatic(ctx, "topk_pair_front_ring", topk_pair_front_ring_kernel<FRONT_ROWS, 2>,
                      dim3(unsigned(2 * split.ring())), block, 0, PlaneSource{src}, blur, map, hk,
                      thr, sink, split, done);
  rank_v14(ctx, a, sink, overlapped);
}
static void launch_v15(LaunchContext& ctx, const StageArgs& a) {
  launch_split_front(ctx, a, false);
}
static void launch_v16(LaunchContext& ctx, const StageArgs& a) {
  launch_split_front(ctx, a, true);
}

// ---- variant table ---------------------------------------------------------------------------

OpDef topk_op() {
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
  // clang-format off
  op.default_variant = "v6_in_flight";
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
      {"v5_one_launch",
       "v4's two phases in one cooperative launch with a grid barrier: the second launch's cost goes",
       {{1024, 1}}, {1024, 1}, launch_v5, nullptr},
      {"v6_in_flight",
       "v5 with a thread's 8 loads issued before its atomics, and one shared append per warp",
       {{1024, 1}}, {1024, 1}, launch_v6, nullptr},
      {"v7_binned_rank",
       "v6 with each candidate ranked against its own score bin, not against every candidate",
       {{1024, 1}}, {1024, 1}, launch_v7, nullptr},
      {"v8_shared_select",
       "v7 with the survivor list shared out over the grid: a slice per block, bins in global memory",
       {{1024, 1}}, {1024, 1}, launch_v8, nullptr},
      {"v9_listed_front",
       "the fused front lists survivors as it writes the map; v7's select reads the list, not the map",
       {{32, 1}, {64, 1}, {128, 1}, {256, 1}}, {64, 1}, launch_v9, nullptr,
       {"blur", "sobel", "harris", "nms"}, {"letterbox"}, topk_front_reference,
       "the NMS map and the blur plane against the CPU chain as nms/v5_fused_front's (the map "
       "exact but at near ties of the CPU's Harris response); the keypoints exact, row for row, "
       "for the map the kernel wrote",
       "the compaction's read of the map (3.8 MB at 1280x736) and the grid-wide barrier go; "
       "what is left is the front, two launches, and v7's select and rank of the listed "
       "survivors"},
      {"v10_counted_rank",
       "v9 ranked by brute force: a block counts, for each key of its share, the listed keys above it",
       {{32, 1}, {64, 1}, {128, 1}, {256, 1}}, {64, 1}, launch_v10, nullptr,
       {"blur", "sobel", "harris", "nms"}, {"letterbox"}, topk_front_reference,
       "as v9_listed_front: the map and the blur plane against the CPU chain as "
       "nms/v5_fused_front's; the keypoints exact, row for row, for the map the kernel wrote",
       "the select's bookkeeping of 8,192 bins goes: a few thousand keys counted in pairs, each "
       "read a broadcast, should rank in well under v9's time"},
      {"v11_pair_front",
       "v10 with nms v6's pair front where its blocks fill the GPU twice (3200x1800 and up on H200)",
       {{32, 1}, {64, 1}, {128, 1}, {256, 1}}, {64, 1}, launch_v11, nullptr,
       {"blur", "sobel", "harris", "nms"}, {"letterbox"}, topk_front_reference,
       "as v10_counted_rank: the map and the blur plane against the CPU chain as "
       "nms/v5_fused_front's; the keypoints exact, row for row, for the map the kernel wrote",
       "the front, bound by its instructions, should drop by the apron and tap loads pairs save, "
       "but only where its 2.3x fewer warps still fill the GPU (4K)"},
      {"v12_bucketed_count",
       "v11 with each key counted against its own bucket of score bits, not every listed key",
       {{32, 1}, {64, 1}, {128, 1}, {256, 1}}, {64, 1}, launch_v12, nullptr,
       {"blur", "sobel", "harris", "nms"}, {"letterbox"}, topk_front_reference,
       "as v10_counted_rank: the map and the blur plane against the CPU chain as "
       "nms/v5_fused_front's; the keypoints exact, row for row, for the map the kernel wrote",
       "with thousands of survivors (a textured 4K photo) the rank's n^2 comparisons shrink to "
       "a bucket's; below 3,072 keys nothing should move"},
      {"v14_selected_once",
       "v12 with a long list (over 8,192 keys) read once over the grid and ranked within bins",
       {{32, 1}, {64, 1}, {128, 1}, {256, 1}}, {64, 1}, launch_v14, nullptr,
       {"blur", "sobel", "harris", "nms"}, {"letterbox"}, topk_front_reference,
       "as v12_bucketed_count: the map and the blur plane against the CPU chain as "
       "nms/v5_fused_front's; the keypoints exact, row for row, for the map the kernel wrote",
       "past 8,192 survivors the rank should halve: the list read once over the grid, not once "
       "per block; at or under it, v12's figure"},
      {"v15_split_front",
       "v14's pair front in two launches: interior blocks, then the border ring started early",
       {{32, 1}, {64, 1}, {128, 1}, {256, 1}}, {64, 1}, launch_v15, nullptr,
       {"blur", "sobel", "harris", "nms"}, {"letterbox"}, topk_front_reference,
       "as v14_selected_once: the map and the blur plane against the CPU chain as "
       "nms/v5_fused_front's; the keypoints exact, row for row, for the map the kernel wrote",
       "at 4K the front should gain: the interior holds one path's code and fewer registers "
       "(more warps an SM), the ring fills its last wave"},
      {"v16_overlapped",
       "v15 with each launch started before the previous ends; counters zeroed by a kernel",
       {{32, 1}, {64, 1}, {128, 1}, {256, 1}}, {64, 1}, launch_v16, nullptr,
       {"blur", "sobel", "harris", "nms"}, {"letterbox"}, topk_front_reference,
       "as v14_selected_once: the map and the blur plane against the CPU chain as "
       "nms/v5_fused_front's; the keypoints exact, row for row, for the map the kernel wrote",
       "each launch's blocks take their places while the previous one drains: a few us less "
       "per frame, most when timed as one stream"},
  };
  // clang-format on
  const std::string past_cap = "K over 8,192: v2_select_sort";
  const std::pair<const char*, std::string> runs[] = {
      {"v4_compact_select", past_cap},
      {"v5_one_launch", "no cooperative launch: v4_compact_select; " + past_cap},
      {"v6_in_flight", "no cooperative launch: v4_compact_select; " + past_cap},
      {"v7_binned_rank", "no cooperative launch: v4_compact_select; " + past_cap},
      {"v8_shared_select", "no cooperative launch: v4_compact_select; " + past_cap},
      {"v9_listed_front", past_cap + " after the front"},
      {"v10_counted_rank", past_cap + " after the front"},
      {"v11_pair_front", "too few pair blocks (under 3200x1800 on an H200): v10_counted_rank"},
      {"v12_bucketed_count", past_cap + " after the front"},
      {"v14_selected_once", "no cooperative launch: v12_bucketed_count; " + past_cap},
      {"v15_split_front", "below sm_90 (Orin), or too few pair blocks: v14_selected_once"},
      {"v16_overlapped", "below sm_90 (Orin), or too few pair blocks: v14_selected_once"}};
  for (const auto& [name, when] : runs) op.variant(name).runs_when = when;
  for (VariantDef& v : op.variants) {  // v9 to v16 write the front's slots too, from the
    if (v.launch != launch_v9 && v.launch != launch_v10 && v.launch != launch_v11 &&
        v.launch != launch_v12 && v.launch != launch_v14 && v.launch != launch_v15 &&
        v.launch != launch_v16)
      continue;  // letterbox plane
    v.outputs = {slots::kKeypoints, slots::kNms, "blur"};
    v.shape = topk_front_shape;
    v.compare = topk_front_compare;
  }
  return op;
}

}  // namespace lab::ops::LAB_MATH_NS
