// The fused dense front's device code (nms/v5_fused_front, detect): blur, sobel,
// harris and nms in one kernel, from the letterbox plane. Its own header, apart from
// nms_kernels.cuh, so that nms.cu and detect.cu both compile the kernel (the non-template kernels
// of nms_kernels.cuh may be defined once). nvcc and NVRTC both compile it.
#pragma once

#include "device_util.cuh"
#include "front.cuh"  // the expressions of the four default kernels
#include "front_order.h"
#include "image_view.h"

namespace lab::ops::LAB_MATH_NS {

// ---- v5_fused_front: blur -> sobel -> harris -> nms in one pass --------------------------------
//
// A warp owns a column strip and walks it down one input row per step: lane l holds column
// x = 24 w - 4 + l of warp column w, and the strip's FRONT_ROWS output rows need 6 rows more
// above and below (blur 2 + sobel 1 + harris 1 + nms 2). Each stage's vertical window is kept in
// registers (the arrays are indexed by compile-time row numbers of a fully unrolled loop, so
// they are registers, and only a few rows of each are live at once); its horizontal neighbours
// come from other lanes by shuffles. Every stage after blur reaches one (sobel, harris) or two
// (nms) columns further to each side, so lanes 0-3 and 28-31 compute only that apron and 24 of
// the 32 lanes write outputs (blur's own 2 columns come from each lane's loads).
//
// Every value is computed by the default kernels' own expressions (front.cuh: gauss5_dot as
// blur v6; sobel_row_* and sobel_col_* as sobel v4; harris_add_tap and harris_from_rows as
// harris v3; max5 and nms_keep as nms v3), from the same operands in the same order (but for the
// row maximum inside the image, which pairs its five operands otherwise to take three shuffles:
// a maximum is exact in any order), so the blur plane and the NMS map are those of the unfused
// pipeline bit for bit. Border replicate as they do it: a lane takes its neighbour from the lane
// holding the clamped column (source lanes computed once), and a row outside the image takes the
// edge row's value: rows below the image copy the row above them, and the rows above row 0 are
// filled with row 0's when it is made (only the top strip has them).
constexpr int FRONT_APRON = 4;                    // apron lanes on each side of a warp
constexpr int FRONT_COLS = 32 - 2 * FRONT_APRON;  // output columns per warp
constexpr int FRONT_HALO = 6;                     // rows above and below a strip
constexpr int FRONT_ROWS = 16;                    // output rows per warp

// One warp's strip: the output rows y0 .. y0 + ROWS - 1 of the columns its lanes hold. EDGE:
// the strip or the warp's columns reach the image border, so every row and column index is
// clamped and rows outside the image take the edge row's values; otherwise (most warps) no
// index needs a clamp and no row a fix-up.
template <int ROWS, bool EDGE, class Sink>
__device__ __forceinline__ void front_strip(const ImageView<const float>& src,
                                            const ImageView<float>& blur,
                                            const ImageView<float>& dst, float k, float thr, int x,
                                            int y0, int l2, int l1, int r1, int r2, bool writes,
                                            const Sink& sink) {
  constexpr unsigned FULL = 0xffffffffu;
  constexpr int N = ROWS + 2 * FRONT_HALO;  // input rows walked
  const int w = src.width, h = src.height;
  const bool top = EDGE && y0 == 0;
  int xs[5];  // blur's taps x-2..x+2, clamped (EDGE)
#pragma unroll
  for (int i = 0; i < 5; ++i) xs[i] = clampi(x + i - BLUR_R, 0, w - 1);
  // Row r of a stage's array is image row y0 + r - offset: bh (blur's row pass) starts 6 rows
  // above the strip, d and s (sobel's row filters) 4, ha, hb, hc (Harris's row sums) 3, rm (the
  // response's row maxima) and centre (the response) 2.
  float bh[N], d[ROWS + 8], s[ROWS + 8], ha[ROWS + 6], hb[ROWS + 6], hc[ROWS + 6];
  float rm[ROWS + 4], centre[ROWS + 4];
  // Where this lane's outputs go, a row further after each store: a predicated store per row,
  // no address arithmetic (nor branch) of its own between the steps.
  char* blur_out = reinterpret_cast<char*>(blur.row(y0) + x);
  char* dst_out = reinterpret_cast<char*>(dst.row(y0) + x);
  // !EDGE: the taps of input row t, x-2..x+2, at fixed offsets from one pointer stepped a row at
  // a time. From each row's index (a 64-bit multiply a row) a warp issued 1,634 instructions, 272
  // of them integer; stepped, 1,511 and 159 (3840x2160: 56.3 -> 55.0 us).
  const char* in_row =
      EDGE ? nullptr : reinterpret_cast<const char*>(src.row(y0 - FRONT_HALO) + x - BLUR_R);
  uint32_t kept = 0;  // bit y: this lane wrote a non-zero NMS value in row y0 + y (for the sink)
#pragma unroll
  for (int t = 0; t < N; ++t) {
    if (EDGE) {
      const float* row = src.row(clampi(y0 - FRONT_HALO + t, 0, h - 1));
      bh[t] = gauss5_dot(__ldg(row + xs[0]), __ldg(row + xs[1]), __ldg(row + xs[2]),
                         __ldg(row + xs[3]), __ldg(row + xs[4]));
    } else {
      const float* tap = reinterpret_cast<const float*>(in_row);
      bh[t] =
          gauss5_dot(__ldg(tap), __ldg(tap + 1), __ldg(tap + 2), __ldg(tap + 3), __ldg(tap + 4));
      in_row += src.pitch;
    }
    if (t >= 4) {  // blur of row y0 + t - 8, then sobel's row filters of it
      const int y = t - 8, i = t - 4;
      const float b = gauss5_dot(bh[t - 4], bh[t - 3], bh[t - 2], bh[t - 1], bh[t]);
      if (y >= 0 && y < ROWS) {
        if (writes && (!EDGE || y0 + y < h)) *reinterpret_cast<float*>(blur_out) = b;
        blur_out += blur.pitch;
      }
      const float a = __shfl_sync(FULL, b, l1), c = __shfl_sync(FULL, b, r1);
      d[i] = sobel_row_d(a, c);
      s[i] = sobel_row_s(a, b, c);
      if (EDGE && i > 0 && y0 + y >= h) d[i] = d[i - 1], s[i] = s[i - 1];
      if (EDGE && y == 0 && top) d[i - 1] = d[i], s[i - 1] = s[i];
    }
    if (t >= 6) {  // the gradients of row y0 + t - 9, then Harris's sums along the row
      const int y = t - 9, i = y + 4, j = y + 3;
      const float gx = sobel_col_gx(d[i - 1], d[i], d[i + 1]);
      const float gy = sobel_col_gy(s[i - 1], s[i + 1]);
      float a = 0.0f, b = 0.0f, c = 0.0f;
      harris_add_tap(__shfl_sync(FULL, gx, l1), __shfl_sync(FULL, gy, l1), a, b, c);
      harris_add_tap(gx, gy, a, b, c);
      harris_add_tap(__shfl_sync(FULL, gx, r1), __shfl_sync(FULL, gy, r1), a, b, c);
      ha[j] = a, hb[j] = b, hc[j] = c;
      if (EDGE && j > 0 && y0 + y >= h) ha[j] = ha[j - 1], hb[j] = hb[j - 1], hc[j] = hc[j - 1];
      if (EDGE && y == 0 && top) ha[j - 1] = ha[j], hb[j - 1] = hb[j], hc[j - 1] = hc[j];
    }
    if (t >= 8) {  // the response of row y0 + t - 10, then its maximum over x-2..x+2
      const int y = t - 10, j = y + 3, i = y + 2;
      const float r = harris_from_rows(ha[j - 1], ha[j], ha[j + 1], hb[j - 1], hb[j], hb[j + 1],
                                       hc[j - 1], hc[j], hc[j + 1], k);
      centre[i] = r;
      if (!EDGE) {  // max(r[x-2], r[x-1]), max(r[x], r[x+1]), r[x+2]: three shuffles, not four
        const float p = fmaxf(r, __shfl_down_sync(FULL, r, 1));
        rm[i] = fmaxf(fmaxf(__shfl_up_sync(FULL, p, 2), p), __shfl_down_sync(FULL, r, 2));
      } else {
        rm[i] = max5(__shfl_sync(FULL, r, l2), __shfl_sync(FULL, r, l1), r,
                     __shfl_sync(FULL, r, r1), __shfl_sync(FULL, r, r2));
      }
      if (EDGE && i > 0 && y0 + y >= h) rm[i] = rm[i - 1];
      if (EDGE && y == 0 && top) rm[i - 1] = rm[i], rm[i - 2] = rm[i];
    }
    if (t >= 12) {  // NMS of row y0 + t - 12: the maximum over rows y-2..y+2
      const int y = t - 12, i = y + 2;
      const float m = max5(rm[i - 2], rm[i - 1], rm[i], rm[i + 1], rm[i + 2]);
      const float v = nms_keep(centre[i], m, thr);
      const bool mine = writes && (!EDGE || y0 + y < h);
      if (mine) *reinterpret_cast<float*>(dst_out) = v;
      dst_out += dst.pitch;
      if (mine && v != 0.0f) kept |= 1u << y;
    }
  }
  sink(dst, x, y0, kept, 0u);  // by the whole warp
}

// What the front does with the strip it wrote besides writing it: nothing (nms v5, v6), or list
// the survivors (detect). Called once per strip by every lane of the warp, after the
// strip is written, with the rows where this lane wrote a survivor in column x (`kept`) and in
// column x + 1 (`kept_next`: v6's second column; 0 for v5). Row by row, a sink's ballot and
// branch would sit between one row's loads and the next and keep the compiler from issuing them
// early (at 3840x2160 listing that way cost 17 µs over the front's 58).
struct FrontNoSink {
  __device__ void operator()(const ImageView<float>&, int, int, uint32_t, uint32_t) const {}
};

// Blocks are 32 n x 1: n warps side by side, each on its own 24 columns, all on the same rows, so
// that whether a block touches the border depends on the block alone. The compiler then knows the
// branch below is taken by whole warps; a branch on threadIdx.y (warps stacked in y) would make
// it guard every shuffle for a divergent warp (WARPSYNC + a collective loop per SHFL).
//
// The blocks run border first (`order`: v5_order, front_block_ring_first). A border warp issues
// 31 % more instructions than an inside one (2,143 against 1,634: clamped taps and rows, the
// fix-ups), and where the whole grid is resident at once (1280x736: 19 warps an SM) the launch
// ends when its last border warp does. In launch order the bottom row's started last, and an SM
// was active for 69 % of the launch on average (ncu: 16.4 of 23.6 k cycles). Launched first, the
// border blocks spread over the SMs and their warps are the oldest, first in the issue order:
// 78 % active, 1280x736 11.6-11.9 -> 10.6-10.9 us, 3840x2160 56.3 -> 55.3 on the H200
// (BENCHMARKS.md, "What the code relies on").
//
// MIN_BLOCKS: __launch_bounds__'s blocks an SM, 0 for none (nms v5), 3 for detect's listed front
// (detect.cu). 0 is not the same as 1: with (256, 1) ptxas gave nms v5 216 registers, with
// (256) 76.
template <int ROWS, class Sink, int MIN_BLOCKS = 0>
__global__ void __launch_bounds__(256, MIN_BLOCKS)
    nms_v5_fused_front_kernel(ImageView<const float> src, ImageView<float> blur,
                              ImageView<float> dst, float k, float thr, Sink sink,
                              FrontOrder order) {
  static_assert(ROWS >= FRONT_HALO, "only the top strip may start above the image");
  static_assert(ROWS <= 32, "a strip's survivors are marked in one 32-bit word");
  const int w = src.width, h = src.height;
  const int lane = threadIdx.x & 31;
  const int warps = blockDim.x >> 5;
  int bx = int(blockIdx.x), by = int(blockIdx.y);
  front_block_ring_first(order, by * order.gx + bx, bx, by);
  // Lane 0's column, of the block's first warp and of this one.
  const int block_x = bx * warps * FRONT_COLS - FRONT_APRON;
  const int base = block_x + (threadIdx.x >> 5) * FRONT_COLS;
  const int x = base + lane;
  const int y0 = by * ROWS;  // < h: the grid's rows are ceil(h / ROWS)
  const bool writes = lane >= FRONT_APRON && lane < 32 - FRONT_APRON && x < w;
  // The lane that holds column clamp(x + d): neighbours across the border are the edge column.
  const int l2 = clampi(clampi(x - 2, 0, w - 1) - base, 0, 31);
  const int l1 = clampi(clampi(x - 1, 0, w - 1) - base, 0, 31);
  const int r1 = clampi(clampi(x + 1, 0, w - 1) - base, 0, 31);
  const int r2 = clampi(clampi(x + 2, 0, w - 1) - base, 0, 31);
  // Does anything of the block's strips (blur's taps included) cross a border?
  const bool edge = y0 == 0 || y0 + ROWS + FRONT_HALO > h || block_x - BLUR_R < 0 ||
                    block_x + warps * FRONT_COLS + 2 * FRONT_APRON - 1 + BLUR_R > w - 1;
  if (edge)
    front_strip<ROWS, true>(src, blur, dst, k, thr, x, y0, l2, l1, r1, r2, writes, sink);
  else
    front_strip<ROWS, false>(src, blur, dst, k, thr, x, y0, l2, l1, r1, r2, writes, sink);
}

// ---- v6_front_pairs: v5 with two adjacent columns per lane -------------------------------------
//
// v5 is bound by its instructions (at 3840x2160 it issues in 65 % of its slots, DRAM 29 % busy),
// and a third of them are spent twice: 8 of a warp's 32 lanes compute only the apron, and every
// lane loads 5 taps and shuffles 10 values per row for one output. Here lane l holds the columns
// x = base + 2 l and x + 1: the apron is 2 lanes on each side (4 columns, as before), so 56 of a
// warp's 64 columns are outputs; the 6 taps of a pair are three 8-byte loads; the neighbours of
// a pair are 2 (blur), 4 (gradients) and 4 (response) shuffles, half of v5's per column; the
// stores are 8 bytes. Each column's values are computed by v5's expressions from the same
// operands in the same order (only the maxima take their operands in another order, which is
// exact), so both planes are v5's, and the four default kernels', bit for bit. The cost: a lane
// keeps two columns' windows (114 registers, v5 80: 16 warps per SM, not 24), 2.3x fewer warps
// in all, and twice the code: at 3840x2160 ncu counted 30 % fewer instructions than v5's but
// issue slots 54-59 % busy (v5 70 %), the top stall an instruction-cache miss, until the blocks
// ran interior first (front_order.h).
constexpr int PAIR_APRON = 2;                         // apron lanes on each side of a warp
constexpr int PAIR_COLS = 2 * (32 - 2 * PAIR_APRON);  // output columns per warp (the plane's)

// Where a lane finds the columns around its pair x, x + 1: x - 2, x - 1, x + 1, x + 2, x + 3,
// each clamped to the image. Inside the image they are fixed: the left lane's two columns, the
// lane's own second, the right lane's two. At a border, each is the half of the lane that holds
// the clamped column (a valid column's clamped neighbours stay inside its warp's 64 columns).
template <bool EDGE>
struct PairNeighbours {
  static constexpr unsigned FULL = 0xffffffffu;
  __device__ PairNeighbours(int, int, int) {}
  __device__ float m2(float v0, float) const { return __shfl_up_sync(FULL, v0, 1); }
  __device__ float m1(float, float v1) const { return __shfl_up_sync(FULL, v1, 1); }
  __device__ float p1(float, float v1) const { return v1; }
  __device__ float p2(float v0, float) const { return __shfl_down_sync(FULL, v0, 1); }
  __device__ float p3(float, float v1) const { return __shfl_down_sync(FULL, v1, 1); }
};
template <>
struct PairNeighbours<true> {
  static constexpr unsigned FULL = 0xffffffffu;
  int at[5];  // x-2, x-1, x+1, x+2, x+3 clamped, less the warp's first column: lane at/2, half at&1
  __device__ PairNeighbours(int x, int base, int w) {
    const int d[5] = {-2, -1, 1, 2, 3};
#pragma unroll
    for (int i = 0; i < 5; ++i) at[i] = clampi(clampi(x + d[i], 0, w - 1) - base, 0, 63);
  }
  __device__ static float pick(float v0, float v1, int at) {
    const float a = __shfl_sync(FULL, v0, at >> 1), b = __shfl_sync(FULL, v1, at >> 1);
    return at & 1 ? b : a;
  }
  __device__ float m2(float v0, float v1) const {
    return pick(v0, v1, at[0]);
  }
  __device__ float m1(float v0, float v1) const {
    return pick(v0, v1, at[1]);
  }
  __device__ float p1(float v0, float v1) const {
    return pick(v0, v1, at[2]);
  }
  __device__ float p2(float v0, float v1) const {
    return pick(v0, v1, at[3]);
  }
  __device__ float p3(float v0, float v1) const {
    return pick(v0, v1, at[4]);
  }
};

// Where a pair front's input rows come from. A source has `kApron`, the apron lanes on each side
// of a warp; the plane's width() and height() (the output planes' too: taken from the source, the
// compiler knows the clamps below use the same bounds; from dst, v12's front took 159 registers,
// not 128); `plain_rows(lo, hi)`, whether plane rows lo .. hi - 1 need no fix-up of their own
// (only then may a block inside the plane skip the edge path); and, per lane, a Rows<EDGE>, made
// with the lane's column x and the first row it will read, whose taps(yr, tap) gives the plane's
// values at columns x - 2 .. x + 3 of plane row yr (EDGE: row and columns clamped to the plane,
// border replicate), called for the rows in turn. Every lane of the warp calls taps() (a source
// may shuffle). PlaneSource reads the letterbox plane, each lane loading its own six taps (nms
// v6, detect v4).
struct PlaneSource {
  static constexpr int kApron = PAIR_APRON;
  ImageView<const float> plane;
  __device__ int width() const { return plane.width; }
  __device__ int height() const { return plane.height; }
  __device__ bool plain_rows(int, int) const { return true; }
  template <bool EDGE>
  struct Rows {
    ImageView<const float> src;
    int xs[6];  // the taps x-2..x+3, clamped (EDGE)
    // !EDGE: tap x-2 of the next row taps() reads, a row further after each call (not a 64-bit
    // product from each row's index: 123 fewer instructions a warp in nms v5). Made on the
    // interior path only: an edge strip's first row may lie above it.
    const char* next;
    __device__ Rows(const PlaneSource& s, int x, int y_first)
        : src(s.plane),
          next(EDGE ? nullptr : reinterpret_cast<const char*>(s.plane.row(y_first) + x - BLUR_R)) {
#pragma unroll
      for (int i = 0; i < 6; ++i) xs[i] = clampi(x + i - BLUR_R, 0, src.width - 1);
    }
    // Rows y_first, y_first + 1, ... in turn (`yr`, for EDGE's clamp).
    __device__ void taps(int yr, float (&tap)[6]) {
      if (EDGE) {
        const float* row = src.row(clampi(yr, 0, src.height - 1));
#pragma unroll
        for (int i = 0; i < 6; ++i) tap[i] = __ldg(row + xs[i]);
      } else {
        const float2* p = reinterpret_cast<const float2*>(next);
        const float2 a = __ldg(p), b = __ldg(p + 1), c = __ldg(p + 2);
        tap[0] = a.x, tap[1] = a.y, tap[2] = b.x, tap[3] = b.y, tap[4] = c.x, tap[5] = c.y;
        next += src.pitch;
      }
    }
  };
};

// One warp's strip of column pairs: front_strip's walk, each step for both columns. Arrays and
// row offsets as front_strip's; a trailing 0 or 1 names the column (x or x + 1). `w0`, `w1`:
// this lane writes column x, x + 1 (x + 1 < w; both, for every writing lane, when !EDGE).
template <int ROWS, bool EDGE, class Sink, class Src>
__device__ __forceinline__ void front_strip_pairs(const Src& src, const ImageView<float>& blur,
                                                  const ImageView<float>& dst, float k, float thr,
                                                  int x, int base, int y0, bool w0, bool w1,
                                                  const Sink& sink) {
  constexpr int N = ROWS + 2 * FRONT_HALO;  // input rows walked
  const int w = src.width(), h = src.height();
  const bool top = EDGE && y0 == 0;
  const PairNeighbours<EDGE> nb(x, base, w);
  typename Src::template Rows<EDGE> rows(src, x, y0 - FRONT_HALO);  // read row by row, in order
  float bh0[N], d0[ROWS + 8], s0[ROWS + 8], ha0[ROWS + 6], hb0[ROWS + 6], hc0[ROWS + 6];
  float bh1[N], d1[ROWS + 8], s1[ROWS + 8], ha1[ROWS + 6], hb1[ROWS + 6], hc1[ROWS + 6];
  float rm0[ROWS + 4], centre0[ROWS + 4], rm1[ROWS + 4], centre1[ROWS + 4];
  char* blur_out = reinterpret_cast<char*>(blur.row(y0) + x);
  char* dst_out = reinterpret_cast<char*>(dst.row(y0) + x);
  uint32_t kept0 = 0, kept1 = 0;  // bit y: a non-zero NMS value written in row y0 + y
#pragma unroll
  for (int t = 0; t < N; ++t) {
    float tap[6];
    rows.taps(y0 - FRONT_HALO + t, tap);
    bh0[t] = gauss5_dot(tap[0], tap[1], tap[2], tap[3], tap[4]);
    bh1[t] = gauss5_dot(tap[1], tap[2], tap[3], tap[4], tap[5]);
    if (t >= 4) {  // blur of row y0 + t - 8, then sobel's row filters of it
      const int y = t - 8, i = t - 4;
      const float b0 = gauss5_dot(bh0[t - 4], bh0[t - 3], bh0[t - 2], bh0[t - 1], bh0[t]);
      const float b1 = gauss5_dot(bh1[t - 4], bh1[t - 3], bh1[t - 2], bh1[t - 1], bh1[t]);
      if (y >= 0 && y < ROWS) {
        if (EDGE) {
          if (w0 && y0 + y < h) reinterpret_cast<float*>(blur_out)[0] = b0;
          if (w1 && y0 + y < h) reinterpret_cast<float*>(blur_out)[1] = b1;
        } else if (w0) {
          *reinterpret_cast<float2*>(blur_out) = make_float2(b0, b1);
        }
        blur_out += blur.pitch;
      }
      const float a0 = nb.m1(b0, b1), c0 = nb.p1(b0, b1);  // column x's neighbours
      const float c1 = nb.p2(b0, b1);                      // x + 1's: x and x + 2
      d0[i] = sobel_row_d(a0, c0), s0[i] = sobel_row_s(a0, b0, c0);
      d1[i] = sobel_row_d(b0, c1), s1[i] = sobel_row_s(b0, b1, c1);
      if (EDGE && i > 0 && y0 + y >= h) d0[i] = d0[i - 1], s0[i] = s0[i - 1];
      if (EDGE && i > 0 && y0 + y >= h) d1[i] = d1[i - 1], s1[i] = s1[i - 1];
      if (EDGE && y == 0 && top) d0[i - 1] = d0[i], s0[i - 1] = s0[i];
      if (EDGE && y == 0 && top) d1[i - 1] = d1[i], s1[i - 1] = s1[i];
    }
    if (t >= 6) {  // the gradients of row y0 + t - 9, then Harris's sums along the row
      const int y = t - 9, i = y + 4, j = y + 3;
      const float gx0 = sobel_col_gx(d0[i - 1], d0[i], d0[i + 1]);
      const float gy0 = sobel_col_gy(s0[i - 1], s0[i + 1]);
      const float gx1 = sobel_col_gx(d1[i - 1], d1[i], d1[i + 1]);
      const float gy1 = sobel_col_gy(s1[i - 1], s1[i + 1]);
      float a0 = 0.0f, bb0 = 0.0f, cc0 = 0.0f, a1 = 0.0f, bb1 = 0.0f, cc1 = 0.0f;
      harris_add_tap(nb.m1(gx0, gx1), nb.m1(gy0, gy1), a0, bb0, cc0);
      harris_add_tap(gx0, gy0, a0, bb0, cc0);
      harris_add_tap(nb.p1(gx0, gx1), nb.p1(gy0, gy1), a0, bb0, cc0);
      harris_add_tap(gx0, gy0, a1, bb1, cc1);
      harris_add_tap(gx1, gy1, a1, bb1, cc1);
      harris_add_tap(nb.p2(gx0, gx1), nb.p2(gy0, gy1), a1, bb1, cc1);
      ha0[j] = a0, hb0[j] = bb0, hc0[j] = cc0;
      ha1[j] = a1, hb1[j] = bb1, hc1[j] = cc1;
      if (EDGE && j > 0 && y0 + y >= h) {
        ha0[j] = ha0[j - 1], hb0[j] = hb0[j - 1], hc0[j] = hc0[j - 1];
        ha1[j] = ha1[j - 1], hb1[j] = hb1[j - 1], hc1[j] = hc1[j - 1];
      }
      if (EDGE && y == 0 && top) {
        ha0[j - 1] = ha0[j], hb0[j - 1] = hb0[j], hc0[j - 1] = hc0[j];
        ha1[j - 1] = ha1[j], hb1[j - 1] = hb1[j], hc1[j - 1] = hc1[j];
      }
    }
    if (t >= 8) {  // the response of row y0 + t - 10, then its maximum over x-2..x+2
      const int y = t - 10, j = y + 3, i = y + 2;
      const float r0 = harris_from_rows(ha0[j - 1], ha0[j], ha0[j + 1], hb0[j - 1], hb0[j],
                                        hb0[j + 1], hc0[j - 1], hc0[j], hc0[j + 1], k);
      const float r1 = harris_from_rows(ha1[j - 1], ha1[j], ha1[j + 1], hb1[j - 1], hb1[j],
                                        hb1[j + 1], hc1[j - 1], hc1[j], hc1[j + 1], k);
      centre0[i] = r0, centre1[i] = r1;
      const float m1 = nb.m1(r0, r1), p2 = nb.p2(r0, r1);
      rm0[i] = max5(nb.m2(r0, r1), m1, r0, nb.p1(r0, r1), p2);
      rm1[i] = max5(m1, r0, r1, p2, nb.p3(r0, r1));
      if (EDGE && i > 0 && y0 + y >= h) rm0[i] = rm0[i - 1], rm1[i] = rm1[i - 1];
      if (EDGE && y == 0 && top) {
        rm0[i - 1] = rm0[i], rm0[i - 2] = rm0[i];
        rm1[i - 1] = rm1[i], rm1[i - 2] = rm1[i];
      }
    }
    if (t >= 12) {  // NMS of row y0 + t - 12: the maximum over rows y-2..y+2
      const int y = t - 12, i = y + 2;
      const float v0 =
          nms_keep(centre0[i], max5(rm0[i - 2], rm0[i - 1], rm0[i], rm0[i + 1], rm0[i + 2]), thr);
      const float v1 =
          nms_keep(centre1[i], max5(rm1[i - 2], rm1[i - 1], rm1[i], rm1[i + 1], rm1[i + 2]), thr);
      const bool row_in = !EDGE || y0 + y < h;
      if (EDGE) {
        if (w0 && row_in) reinterpret_cast<float*>(dst_out)[0] = v0;
        if (w1 && row_in) reinterpret_cast<float*>(dst_out)[1] = v1;
      } else if (w0) {
        *reinterpret_cast<float2*>(dst_out) = make_float2(v0, v1);
      }
      dst_out += dst.pitch;
      if (w0 && row_in && v0 != 0.0f) kept0 |= 1u << y;
      if (w1 && row_in && v1 != 0.0f) kept1 |= 1u << y;
    }
  }
  sink(dst, x, y0, kept0, kept1);  // by the whole warp
}

// v5's order for its grid (rotated by the kernel to start at the ring: front_block_ring_first).
inline FrontOrder v5_order(int w, int h, int warps, dim3 grid) {
  return front_order(w, h, warps, FRONT_COLS, FRONT_ROWS, FRONT_APRON, FRONT_HALO, BLUR_R, grid.x,
                     grid.y);
}

// The pair front's order for its grid, of blocks of `warps` warps (front_order.h).
inline FrontOrder pair_order(int w, int h, int warps, dim3 grid) {
  return front_order(w, h, warps, PAIR_COLS, FRONT_ROWS, 2 * PAIR_APRON, FRONT_HALO, BLUR_R, grid.x,
                     grid.y);
}

// The output columns of a warp of pairs whose source has `apron` apron lanes a side.
__host__ __device__ constexpr int pair_cols(int apron) {
  return 2 * (32 - 2 * apron);
}

// Block (bx, by) of the pair front: blocks of 32 n x 1, n warps side by side on
// pair_cols(Src::kApron) columns each (56 from the plane), ROWS rows. PATHS: 0, the block takes
// the edge path where it crosses a border (or reads rows the source must fix up), else the
// interior path; 1, the interior path (the caller knows the block is inside: pair_split); 2, the
// edge path.
template <int ROWS, int PATHS, class Sink, class Src>
__device__ __forceinline__ void front_pairs_block(const Src& src, const ImageView<float>& blur,
                                                  const ImageView<float>& dst, float k, float thr,
                                                  const Sink& sink, int bx, int by) {
  static_assert(ROWS >= FRONT_HALO, "only the top strip may start above the image");
  static_assert(ROWS <= 32, "a strip's survivors are marked in one 32-bit word");
  constexpr int APRON = Src::kApron, COLS = pair_cols(APRON);
  const int w = src.width(), h = src.height();
  const int lane = threadIdx.x & 31;
  const int warps = blockDim.x >> 5;
  const int block_x = bx * warps * COLS - 2 * APRON;  // even
  const int base = block_x + (threadIdx.x >> 5) * COLS;
  const int x = base + 2 * lane;
  const int y0 = by * ROWS;
  const bool inner = lane >= APRON && lane < 32 - APRON;  // then x >= 0
  const bool w0 = inner && x < w, w1 = inner && x + 1 < w;
  // Does anything of the block's strips (blur's taps included) cross a border, or read rows the
  // source must fix up? The same test as pair_col_edge and pair_row_edge below, written out: with
  // those calls here, the listed pair front measured 71.5 us at 4K against 62.1, the same registers
  // (H200; BENCHMARKS.md, "What the code relies on"); a change to one must be made to the
  // other.
  const bool edge =
      PATHS == 2 || (PATHS == 0 && (y0 == 0 || y0 + ROWS + FRONT_HALO > h || block_x - BLUR_R < 0 ||
                                    block_x + warps * COLS + 4 * APRON - 1 + BLUR_R > w - 1 ||
                                    !src.plain_rows(y0 - FRONT_HALO, y0 + ROWS + FRONT_HALO)));
  if (edge)
    front_strip_pairs<ROWS, true>(src, blur, dst, k, thr, x, base, y0, w0, w1, sink);
  else
    front_strip_pairs<ROWS, false>(src, blur, dst, k, thr, x, base, y0, w0, w1, sink);
}

// v5's kernel with a lane on two columns (front_pairs_block), in the order `order` gives
// (ORDERED), else in launch order. The plane source's 8-byte loads and the 8-byte stores need
// 8-byte aligned rows in all three planes; the launch checks (front_pairs_aligned) and falls
// back to v5's kernel.
template <int ROWS, class Sink, bool ORDERED, class Src = PlaneSource>
__global__ void __launch_bounds__(256)
    nms_v6_front_pairs_kernel(Src src, ImageView<float> blur, ImageView<float> dst, float k,
                              float thr, Sink sink, FrontOrder order) {
  int bx = int(blockIdx.x), by = int(blockIdx.y);
  if (ORDERED) front_block(order, by * order.gx + bx, bx, by);
  front_pairs_block<ROWS, 0>(src, blur, dst, k, thr, sink, bx, by);
}

// ---- the pair front in two launches: the interior blocks, then the ring around them --------
//
// Whether block column bx (row by) of a pair front's grid, of blocks of `warps` warps, crosses a
// border (blur's taps included): front_pairs_block's test (written out there), by columns and by
// rows, for a source whose rows need no fix-up (PlaneSource). detect v4's GPU case holds the split
// to v3's bytes at odd sizes, so the two cannot drift apart unseen.
__host__ __device__ inline bool pair_col_edge(int bx, int warps, int apron, int w) {
  const int cols = pair_cols(apron), block_x = bx * warps * cols - 2 * apron;
  return block_x - BLUR_R < 0 || block_x + warps * cols + 4 * apron - 1 + BLUR_R > w - 1;
}
__host__ __device__ inline bool pair_row_edge(int by, int rows, int h) {
  const int y0 = by * rows;
  return y0 == 0 || y0 + rows + FRONT_HALO > h;
}

// A pair front's grid (gx x gy blocks) split into the interior blocks, bx0 <= bx < bx1 and
// by0 <= by < by1 (none crosses a border), and the ring of the others around them.
struct PairSplit {
  int gx, gy, bx0, bx1, by0, by1;
  __host__ __device__ int interior() const { return (bx1 - bx0) * (by1 - by0); }
  __host__ __device__ int ring() const { return gx * gy - interior(); }
  // Ring block t (0 <= t < ring()): the rows above the interior and those below it, then the
  // columns left and right of it, row by row.
  __device__ void ring_block(int t, int& bx, int& by) const {
    const int above = by0 * gx, below = (gy - by1) * gx;
    if (t < above + below) {
      const int row = t / gx;
      bx = t - row * gx, by = row < by0 ? row : by1 + row - by0;
      return;
    }
    t -= above + below;
    const int per_row = gx - (bx1 - bx0), row = t / per_row, c = t - row * per_row;
    by = by0 + row, bx = c < bx0 ? c : bx1 + c - bx0;
  }
};

// The split of a pair front's grid of blocks of `warps` warps over a w x h plane. The border
// blocks lie at both ends of the columns and of the rows (the tests are monotone in bx and in
// by); with no interior, the ring is the whole grid.
inline PairSplit pair_split(int w, int h, int warps, int apron, int rows, dim3 grid) {
  PairSplit s{int(grid.x), int(grid.y), 0, 0, 0, 0};
  while (s.bx0 < s.gx && pair_col_edge(s.bx0, warps, apron, w)) ++s.bx0;
  for (s.bx1 = s.bx0; s.bx1 < s.gx && !pair_col_edge(s.bx1, warps, apron, w);) ++s.bx1;
  while (s.by0 < s.gy && pair_row_edge(s.by0, rows, h)) ++s.by0;
  for (s.by1 = s.by0; s.by1 < s.gy && !pair_row_edge(s.by1, rows, h);) ++s.by1;
  if (s.bx1 == s.bx0 || s.by1 == s.by0) s.bx1 = s.bx0, s.by1 = s.by0;
  return s;
}

// The planes' rows are 8-byte aligned: v6's vector loads and stores may be used.
inline __host__ __device__ bool front_pairs_aligned(const void* a, const void* b, const void* c,
                                                    size_t pa, size_t pb, size_t pc) {
  return ((reinterpret_cast<size_t>(a) | reinterpret_cast<size_t>(b) | reinterpret_cast<size_t>(c) |
           pa | pb | pc) &
          7u) == 0;
}

}  // namespace lab::ops::LAB_MATH_NS
