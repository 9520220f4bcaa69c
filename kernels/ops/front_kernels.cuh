// The fused dense front's device code (nms/v5_fused_front, topk/v9_listed_front): blur, sobel,
// harris and nms in one kernel, from the letterbox plane. Its own header, apart from
// nms_kernels.cuh, so that nms.cu and topk.cu both compile the kernel (the non-template kernels
// of nms_kernels.cuh may be defined once). nvcc and NVRTC both compile it.
#pragma once

#include "device_util.cuh"
#include "front.cuh"  // the expressions of the four default kernels
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
// harris v3; max5 and nms_keep as nms v3), from the same operands in the same order, so the blur
// plane and the NMS map are those of the unfused pipeline bit for bit. Border replicate as they do
// it: a lane takes its neighbour from the lane holding the clamped column (source lanes computed
// once), and a row outside the image takes the edge row's value: rows below the image copy the row
// above them, and the rows above row 0 are filled with row 0's when it is made (only the top strip
// has them).
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
  int xs[5];  // blur's taps x-2..x+2, clamped
#pragma unroll
  for (int i = 0; i < 5; ++i) xs[i] = EDGE ? clampi(x + i - BLUR_R, 0, w - 1) : x + i - BLUR_R;
  // Row r of a stage's array is image row y0 + r - offset: bh (blur's row pass) starts 6 rows
  // above the strip, d and s (sobel's row filters) 4, ha, hb, hc (Harris's row sums) 3, rm (the
  // response's row maxima) and centre (the response) 2.
  float bh[N], d[ROWS + 8], s[ROWS + 8], ha[ROWS + 6], hb[ROWS + 6], hc[ROWS + 6];
  float rm[ROWS + 4], centre[ROWS + 4];
  // Where this lane's outputs go, a row further after each store: a predicated store per row,
  // no address arithmetic (nor branch) of its own between the steps.
  char* blur_out = reinterpret_cast<char*>(blur.row(y0) + x);
  char* dst_out = reinterpret_cast<char*>(dst.row(y0) + x);
  uint32_t kept = 0;  // bit y: this lane wrote a non-zero NMS value in row y0 + y (for the sink)
#pragma unroll
  for (int t = 0; t < N; ++t) {
    const int yr = y0 - FRONT_HALO + t;
    const float* row = src.row(EDGE ? clampi(yr, 0, h - 1) : yr);
    bh[t] = gauss5_dot(__ldg(row + xs[0]), __ldg(row + xs[1]), __ldg(row + xs[2]),
                       __ldg(row + xs[3]), __ldg(row + xs[4]));
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
      rm[i] = max5(__shfl_sync(FULL, r, l2), __shfl_sync(FULL, r, l1), r, __shfl_sync(FULL, r, r1),
                   __shfl_sync(FULL, r, r2));
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
  sink(dst, x, y0, kept);  // by the whole warp
}

// What the front does with the strip it wrote besides writing it: nothing (nms v5), or list the
// survivors (topk v9). Called once per strip by every lane of the warp, after the strip is
// written, with the rows where this lane wrote a survivor (`kept`). Row by row, a sink's ballot
// and branch would sit between one row's loads and the next and keep the compiler from issuing
// them early (at 3840x2160 listing that way cost 17 µs over the front's 58).
struct FrontNoSink {
  __device__ void operator()(const ImageView<float>&, int, int, uint32_t) const {}
};

// Blocks are 32 n x 1: n warps side by side, each on its own 24 columns, all on the same rows, so
// that whether a block touches the border depends on blockIdx alone. The compiler then knows the
// branch below is taken by whole warps; a branch on threadIdx.y (warps stacked in y) would make
// it guard every shuffle for a divergent warp (WARPSYNC + a collective loop per SHFL).
template <int ROWS, class Sink>
__global__ void __launch_bounds__(256)
    nms_v5_fused_front_kernel(ImageView<const float> src, ImageView<float> blur,
                              ImageView<float> dst, float k, float thr, Sink sink) {
  static_assert(ROWS >= FRONT_HALO, "only the top strip may start above the image");
  static_assert(ROWS <= 32, "a strip's survivors are marked in one 32-bit word");
  const int w = src.width, h = src.height;
  const int lane = threadIdx.x & 31;
  const int warps = blockDim.x >> 5;
  // Lane 0's column, of the block's first warp and of this one.
  const int block_x = blockIdx.x * warps * FRONT_COLS - FRONT_APRON;
  const int base = block_x + (threadIdx.x >> 5) * FRONT_COLS;
  const int x = base + lane;
  const int y0 = blockIdx.y * ROWS;  // < h: the grid's rows are ceil(h / ROWS)
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

}  // namespace lab::ops::LAB_MATH_NS
