// The exact top-K both keypoint ladders share (topk.cu from the NMS map, detect.cu from the
// fused front's list): the stage's parameters, shape, CPU reference and comparison on the host;
// on the device, the survivor list's level-0 histogram, the selection of the K-th key's bin
// (refined while the candidates overflow a block), and the select kernels' shared-memory opt-in.
//
// A key is the score's bits above the inverted linear index (keypoints.h): sorting keys sorts by
// score, then index; keys are distinct, so counting the greater keys gives a row.
#pragma once

#include <cub/block/block_scan.cuh>

#include <algorithm>
#include <array>
#include <limits>
#include <mutex>
#include <set>
#include <utility>
#include <vector>

#include "device.h"
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

}  // namespace lab::ops

namespace lab::ops::LAB_MATH_NS {

// Level 0 of the select: the top 13 bits of the ordered score (for positive scores the sign bit
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

// The survivor list's counters (compaction, or the front's sink), zeroed before the list.
struct TopkListScratch {
  uint32_t hist[kBins];  // level-0 histogram of the survivors
  uint32_t count;        // survivors appended to the list
};

// The bin where a descending walk of `h` (PER x kSelectThreads bins) reaches `need`, with the count
// above it and in it, into out[0..2] for the whole block. The caller guarantees the total
// reaches `need`.
template <int PER, bool GLOBAL>
__device__ void topk_find_bin(const uint32_t* h, uint32_t need, uint32_t* out) {
  using Scan = cub::BlockScan<uint32_t, kSelectThreads>;
  __shared__ typename Scan::TempStorage tmp;
  const int hi = PER * (kSelectThreads - int(threadIdx.x));  // this thread's bins [hi - PER, hi)
  uint32_t bins[PER], mine = 0;
#pragma unroll
  for (int j = 0; j < PER;
       ++j)  // the global histogram through the L2 (topk v5 and v6 wrote it this launch)
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

// The selection topk v4 to v6 and detect make: the keys whose top (64 - shift) bits are >= prefix.
// `above` keys lie strictly above the prefix's bin, all kept, and `in_bin` keys in it, of which K -
// above are kept. While the candidates would overflow the shared buffer (a plateau of equal
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
__device__ inline TopkSelection topk_select(const TopkListScratch* sc, const uint64_t* list,
                                            uint32_t k, uint32_t* sub) {
  __shared__ uint32_t sel[3];
  TopkSelection t;
  t.total = t.in_bin = __ldcg(&sc->count);
  t.all = t.total <= k;  // then total <= kTopkCap
  if (t.all) return t;
  topk_find_bin<kBins / kSelectThreads, true>(sc->hist, k, sel);
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
    topk_find_bin<kSubBins / kSelectThreads, false>(sub, k - t.above, sel);
    t.prefix = (t.prefix << bits) | sel[0], t.above += sel[1], t.in_bin = sel[2], t.shift = next;
    __syncthreads();  // sel and sub are rewritten by the next level
  }
  return t;
}

// start[b] (kBins, shared): the candidates in the level-0 bins above b, bins descending. A bin
// above the boundary bin keeps all its survivors, the boundary bin its selected part, the bins
// below none.
__device__ inline void topk_bin_starts(const TopkListScratch* sc, const TopkSelection& t,
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

// The select kernels ask for kSelectSmem bytes of dynamic shared memory, over the default 48 KB,
// once per CUDA context (a device reset forgets function attributes, so a hook asks again after
// one). `fits`: the device gives a block that much (with 16 KB of static shared memory beside);
// grid[i]: kernels[i]'s cooperative grid, the blocks the device holds at once (one per SM here),
// 0 without cooperative launch. TAG keeps each file's kernels apart. Asked at every launch: no
// allocation, a copy of a few words under the lock.
template <size_t N>
struct SelectOptIn {
  bool fits = false;
  std::array<int, N> grid{};
};
template <class TAG, size_t N>
SelectOptIn<N> select_opt_in(const void* const (&kernels)[N]) {
  static std::mutex mu;
  static bool valid = false;
  static SelectOptIn<N> cached;
  static const bool hooked = (on_device_reset([] {
                                std::lock_guard<std::mutex> lock(mu);
                                valid = false;
                              }),
                              true);
  (void)hooked;
  std::lock_guard<std::mutex> lock(mu);
  if (valid) return cached;
  const DeviceInfo& d = device_info();
  SelectOptIn<N> o;
  if (d.smem_per_block_optin >= kSelectSmem + 16 * 1024) {
    o.fits = true;
    int coop = 0;
    LAB_CUDA_CHECK(cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, d.index));
    for (size_t i = 0; i < N; ++i) {
      LAB_CUDA_CHECK(cudaFuncSetAttribute(kernels[i], cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          int(kSelectSmem)));
      int per_sm = 0;
      if (coop)
        LAB_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernels[i],
                                                                     kSelectThreads, kSelectSmem));
      o.grid[i] = per_sm * d.sms;
    }
  }
  cached = o, valid = true;
  return o;
}

}  // namespace lab::ops::LAB_MATH_NS
