// letterbox: an 8-bit gray, BGR or BGRA image of any size -> gray float32 in [0,1] at the
// target size (default 1280x736), aspect ratio kept, borders filled with 114/255.
//
//   gray = 0.299 R + 0.587 G + 0.114 B;  s = min(Wt/W, Ht/H);  rw = round(W s), rh = round(H s)
//   bilinear, align_corners=False: src = (dst + 0.5) * (W / rw) - 0.5, clamped to the image;
//   the resized image at ((Wt - rw) / 2, (Ht - rh) / 2).
// This is OpenCV's cvtColor on float input followed by resize(INTER_LINEAR) to (rw, rh). Like
// OpenCV, the per-axis taps (index, fraction) are computed once on the host in double and
// rounded to float: in-kernel float coordinates drift by one ulp at x ~ 4000 (2.4e-4 px), which
// is already 2.4e-4 of error on a hard black/white edge.
//
// Variants:
//   v1_two_pass  gray plane at source size in scratch, then resize: the unfused baseline.
//   v2_fused     one launch: each output pixel gathers its four 8-bit taps through __ldg and
//                converts and interpolates in registers (about 4x fewer bytes than v1 at 1080p).
//   v3_rows      4 rows of one column per thread: its taps loaded once, 4 rows of loads in flight.
//   v4_words     a row's two taps as three aligned 32-bit words (funnel-shifted), bytes to floats
//                by PRMT + FADD: 3 load instructions per BGR pixel pair instead of 6.
//   v5_row_reuse 8 rows, reusing a source row's horizontal lerp when the next output row starts
//                where the last ended: at 4K v4 is bound by instructions (ncu: SM 71%, DRAM 19%).
//   v6_reuse_by_scale the reuse that pays at the scale: enlarging, both rows' lerps (most output
//                rows repeat their pair); shrinking up to 1.6x, v5's; past that none (v4).
//   v7_identity  at scale 1 every tap is (x, x + 1, 0): a pixel is its source's gray, bit for bit
//                v6's. No taps, no lerps: 4 pixels a thread from C + 1 words, one 16-byte store.
//
// Bench: kernel-lab bench --stage letterbox --sweep-variants --input synthetic:1920x1080
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "launch.cuh"
#include "letterbox_gray.cuh"
#include "op.h"

namespace lab::ops {

struct LetterboxParams {
  int width = 1280;
  int height = 736;
  template <class V>
  void visit(V& v) {
    v("width", width, 1, 16384, "output width in pixels (the network's input width)");
    v("height", height, 1, 16384, "output height in pixels (the network's input height)");
  }
};

// One output column (or row) of a bilinear resize: two source indices and the weight of i1.
struct AxisTap {
  int i0, i1;
  float frac;
};

// OpenCV's resize tap computation for INTER_LINEAR: double coordinate rounded to float, the
// fraction taken in float, clamped to the edge pixel (fraction 0) outside the image.
inline std::vector<AxisTap> resize_taps(int src_n, int dst_n) {
  const double scale = 1.0 / (double(dst_n) / src_n);
  std::vector<AxisTap> taps(dst_n);
  for (int d = 0; d < dst_n; ++d) {
    const float f = float((d + 0.5) * scale - 0.5);
    int i0 = int(std::floor(f));
    float frac = f - float(i0);
    if (i0 < 0) i0 = 0, frac = 0.0f;
    if (i0 >= src_n - 1) i0 = src_n - 1, frac = 0.0f;
    taps[d] = {i0, std::min(i0 + 1, src_n - 1), frac};
  }
  return taps;
}

inline std::vector<ImageDesc> letterbox_shape(const std::vector<ImageDesc>& in,
                                              const ParamMap& pm) {
  const ImageDesc& s = in[0];
  if (s.type != PixelType::U8 || (s.channels != 1 && s.channels != 3 && s.channels != 4))
    throw Error(ErrorKind::Data,
                "letterbox: input must be 8-bit gray, BGR or BGRA, got " + s.str());
  if (s.empty()) throw Error(ErrorKind::Data, "letterbox: input image is empty");
  const auto p = decode_params<LetterboxParams>(pm);
  return {ImageDesc{p.width, p.height, 1, PixelType::F32}};
}

// Reference: gray plane in float, then OpenCV's order of interpolation (horizontal within each
// of the two source rows, then vertical).
inline void letterbox_reference(const StageArgs& a) {
  const auto src = a.in[0].view<const uint8_t>();
  const auto dst = a.out[0].view<float>();
  const auto g = letterbox_geometry(src.width, src.height, dst.width, dst.height);
  const auto xt = resize_taps(src.width, g.rw);
  const auto yt = resize_taps(src.height, g.rh);
  std::vector<float> gray(size_t(src.width) * src.height);
  for (int y = 0; y < src.height; ++y)
    for (int x = 0; x < src.width; ++x)
      gray[size_t(y) * src.width + x] = gray_of(&src.at(x, y), src.channels);
  for (int y = 0; y < dst.height; ++y) {
    for (int x = 0; x < dst.width; ++x) {
      const int tx = x - g.ox, ty = y - g.oy;
      float v = LETTERBOX_PAD;
      if (tx >= 0 && tx < g.rw && ty >= 0 && ty < g.rh) {
        const AxisTap cx = xt[tx], cy = yt[ty];
        const float* r0 = &gray[size_t(cy.i0) * src.width];
        const float* r1 = &gray[size_t(cy.i1) * src.width];
        const float h0 = r0[cx.i0] * (1.0f - cx.frac) + r0[cx.i1] * cx.frac;
        const float h1 = r1[cx.i0] * (1.0f - cx.frac) + r1[cx.i1] * cx.frac;
        v = h0 * (1.0f - cy.frac) + h1 * cy.frac;
      }
      dst.at(x, y) = v;
    }
  }
}

}  // namespace lab::ops

namespace lab::ops::LAB_MATH_NS {

// ---- kernels ---------------------------------------------------------------------------------

// v1, pass 1: gray plane at source resolution.
// The source may be taller than a grid can be in y (65535 blocks): rows stride by the grid.
template <int C>
__global__ void letterbox_v1_gray_kernel(ImageView<const uint8_t> src, ImageView<float> gray) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x;
  if (x >= src.width) return;
  for (int y = blockIdx.y * blockDim.y + threadIdx.y; y < src.height; y += gridDim.y * blockDim.y)
    gray.at(x, y) = gray_of(&src.at(x, y), C);
}

// v1, pass 2: bilinear resize of the gray plane into the letterbox.
__global__ void letterbox_v1_resize_kernel(ImageView<const float> gray, ImageView<float> dst,
                                           const AxisTap* __restrict__ xt,
                                           const AxisTap* __restrict__ yt, LetterboxGeometry g) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x;
  const int y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= dst.width || y >= dst.height) return;
  const int tx = x - g.ox, ty = y - g.oy;
  float v = LETTERBOX_PAD;
  if (tx >= 0 && tx < g.rw && ty >= 0 && ty < g.rh) {
    const AxisTap cx = xt[tx], cy = yt[ty];
    const float* r0 = gray.row(cy.i0);
    const float* r1 = gray.row(cy.i1);
    const float h0 = r0[cx.i0] * (1.0f - cx.frac) + r0[cx.i1] * cx.frac;
    const float h1 = r1[cx.i0] * (1.0f - cx.frac) + r1[cx.i1] * cx.frac;
    v = h0 * (1.0f - cy.frac) + h1 * cy.frac;
  }
  dst.at(x, y) = v;
}

// v2: gather, convert and interpolate in one pass.
template <int C>
__global__ void letterbox_v2_fused_kernel(ImageView<const uint8_t> src, ImageView<float> dst,
                                          const AxisTap* __restrict__ xt,
                                          const AxisTap* __restrict__ yt, LetterboxGeometry g) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x;
  const int y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= dst.width || y >= dst.height) return;
  const int tx = x - g.ox, ty = y - g.oy;
  float v = LETTERBOX_PAD;
  if (tx >= 0 && tx < g.rw && ty >= 0 && ty < g.rh) {
    const AxisTap cx = xt[tx], cy = yt[ty];
    const float h0 = ldg_gray<C>(src, cx.i0, cy.i0) * (1.0f - cx.frac) +
                     ldg_gray<C>(src, cx.i1, cy.i0) * cx.frac;
    const float h1 = ldg_gray<C>(src, cx.i0, cy.i1) * (1.0f - cx.frac) +
                     ldg_gray<C>(src, cx.i1, cy.i1) * cx.frac;
    v = h0 * (1.0f - cy.frac) + h1 * cy.frac;
  }
  dst.at(x, y) = v;
}

constexpr int LETTERBOX_ROWS = 4;

// The horizontal lerp between the pixel at byte o of a row and the next. When i1 == i0 (the
// right edge) the weight of the second pixel is exactly 0, so reading the next (padding) pixel
// is harmless.
template <int C>
__device__ __forceinline__ float row_lerp(const uint8_t* row, int o, float frac) {
  const uint2 b = load_8_bytes(row, o);
  return gray_at<C, 0>(b) * (1.0f - frac) + gray_at<C, C>(b) * frac;
}

constexpr int LETTERBOX_REUSE_ROWS = 8;

// The horizontal lerp of source row y: v3 gathers single bytes through __ldg, v4 and v5 load
// whole words.
template <int C, bool WORDS>
__device__ __forceinline__ float lerp_source_row(const ImageView<const uint8_t>& src, int y,
                                                 AxisTap cx) {
  if (WORDS) return row_lerp<C>(src.row(y), cx.i0 * C, cx.frac);
  return ldg_gray<C>(src, cx.i0, y) * (1.0f - cx.frac) + ldg_gray<C>(src, cx.i1, y) * cx.frac;
}

// How a thread's rows reuse the horizontal lerps of the rows before: not at all (v3, v4); the
// source row the last output row ended on (v5: consecutive rows when shrinking); or either of
// the two source rows the last output row read (v6: also the same pair again, as most rows are
// when enlarging: at 3.4x each pair serves about 3.4 output rows, and v5 lerps both anew).
enum class Reuse { None, LastRow, LastPair };

// v3 (bytes), v4 (words), v5 and v6 (words, reusing lerps): ROWS output rows of one column per
// thread, the column's taps loaded once.
template <int C, bool WORDS, Reuse REUSE, int ROWS>
__global__ void letterbox_rows_kernel(ImageView<const uint8_t> src, ImageView<float> dst,
                                      const AxisTap* __restrict__ xt,
                                      const AxisTap* __restrict__ yt, LetterboxGeometry g) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x;
  const int y0 = (blockIdx.y * blockDim.y + threadIdx.y) * ROWS;
  if (x >= dst.width || y0 >= dst.height) return;
  const int tx = x - g.ox;
  const bool col_inside = tx >= 0 && tx < g.rw;
  const AxisTap cx = col_inside ? xt[tx] : AxisTap{0, 0, 0.0f};
  int last_i0 = -1, last_i1 = -1;  // the source rows whose lerps last_h0, last_h1 hold
  float last_h0 = 0.0f, last_h1 = 0.0f;
#pragma unroll
  for (int r = 0; r < ROWS; ++r) {
    const int y = y0 + r, ty = y - g.oy;
    if (y >= dst.height) break;
    float v = LETTERBOX_PAD;
    if (col_inside && ty >= 0 && ty < g.rh) {
      const AxisTap cy = yt[ty];  // uniform across a warp: the reuse tests do not diverge
      float h0, h1;
      if (REUSE == Reuse::LastPair && cy.i0 == last_i0)
        h0 = last_h0;
      else if (REUSE != Reuse::None && cy.i0 == last_i1)
        h0 = last_h1;
      else
        h0 = lerp_source_row<C, WORDS>(src, cy.i0, cx);
      if (REUSE != Reuse::None && cy.i1 == cy.i0)
        h1 = h0;
      else if (REUSE == Reuse::LastPair && cy.i1 == last_i1)
        h1 = last_h1;
      else
        h1 = lerp_source_row<C, WORDS>(src, cy.i1, cx);
      last_i0 = cy.i0, last_h0 = h0, last_i1 = cy.i1, last_h1 = h1;
      v = h0 * (1.0f - cy.frac) + h1 * cy.frac;
    }
    dst.at(x, y) = v;
  }
}

// v7 at an identity resize: output pixels x0..x0+3 of row y are source pixels x0-ox.. of row
// y-oy, or the pad. Their 4C bytes come from C + 1 aligned words (the row's padding covers the
// last word, as for v4), shifted into place.
constexpr int LETTERBOX_PER_THREAD = 4;

template <int C>
__global__ void letterbox_identity_kernel(ImageView<const uint8_t> src, ImageView<float> dst,
                                          LetterboxGeometry g) {
  constexpr int N = LETTERBOX_PER_THREAD;
  const int x0 = N * int(blockIdx.x * blockDim.x + threadIdx.x);
  const int y = int(blockIdx.y * blockDim.y + threadIdx.y);
  if (x0 >= dst.width || y >= dst.height) return;
  const int sx = x0 - g.ox, sy = y - g.oy;
  float v[N];
#pragma unroll
  for (int i = 0; i < N; ++i) v[i] = LETTERBOX_PAD;
  if (sy >= 0 && sy < g.rh) {
    const uint8_t* row = src.row(sy);
    if (sx >= 0 && sx + N <= g.rw) {  // all four inside: words
      const int o = sx * C;
      const auto* w = reinterpret_cast<const uint32_t*>(row + (o & ~3));
      uint32_t raw[C + 1], b[C];
#pragma unroll
      for (int i = 0; i <= C; ++i) raw[i] = __ldg(w + i);
      const int shift = 8 * (o & 3);
#pragma unroll
      for (int i = 0; i < C; ++i) b[i] = __funnelshift_r(raw[i], raw[i + 1], shift);
      auto byte = [&](int k) {  // byte k of the 4C as an exact float (k is a constant)
        return __int_as_float(__byte_perm(b[k >> 2], 0x4B000000u, 0x7440 | (k & 3))) - 8388608.0f;
      };
#pragma unroll
      for (int i = 0; i < N; ++i)
        v[i] = C == 1 ? byte(i) * INV_255 : gray_bgr(byte(C * i), byte(C * i + 1), byte(C * i + 2));
    } else {  // at the pad's edge: pixel by pixel
#pragma unroll
      for (int i = 0; i < N; ++i)
        if (sx + i >= 0 && sx + i < g.rw) v[i] = ldg_gray<C>(src, sx + i, sy);
    }
  }
  float* out = dst.row(y) + x0;
  if (x0 + N <= dst.width && (reinterpret_cast<size_t>(out) & 15) == 0) {
    *reinterpret_cast<float4*>(out) = make_float4(v[0], v[1], v[2], v[3]);
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i)
      if (x0 + i < dst.width) out[i] = v[i];
  }
}

// ---- launchers -------------------------------------------------------------------------------

// The tap tables depend only on the sizes: uploaded once per size, kept by the stage.
static const AxisTap* device_taps(LaunchContext& ctx, int w, int h, const LetterboxGeometry& g) {
  const uint64_t key = (uint64_t(w) << 48) ^ (uint64_t(h) << 32) ^ (uint64_t(g.rw) << 16) ^
                       uint64_t(g.rh) ^ (uint64_t(g.ox) << 40) ^ (uint64_t(g.oy) << 24);
  return static_cast<const AxisTap*>(
      ctx.persistent(sizeof(AxisTap) * size_t(g.rw + g.rh), key, [&](void* taps) {
        std::vector<AxisTap> host = resize_taps(w, g.rw);
        const auto yt = resize_taps(h, g.rh);
        host.insert(host.end(), yt.begin(), yt.end());
        LAB_CUDA_CHECK(cudaMemcpyAsync(taps, host.data(), sizeof(AxisTap) * host.size(),
                                       cudaMemcpyHostToDevice, ctx.stream()));
        LAB_CUDA_CHECK(cudaStreamSynchronize(ctx.stream()));  // `host` dies here; once per size
      }));
}

static void launch_v1(LaunchContext& ctx, const StageArgs& a) {
  const auto src = a.in[0].view<const uint8_t>();
  const auto dst = a.out[0].view<float>();
  const auto g = letterbox_geometry(src.width, src.height, dst.width, dst.height);
  const AxisTap* taps = device_taps(ctx, src.width, src.height, g);
  const size_t gpitch = size_t(src.width) * sizeof(float);
  ImageView<float> gray{static_cast<float*>(ctx.scratch(gpitch * src.height)), src.width,
                        src.height, 1, gpitch};
  dim3 grid = grid_2d(src.width, src.height, a.block);
  grid.y = std::min(grid.y, 65535u);  // the kernel strides over the rows beyond
  const dim3 block(a.block.x, a.block.y);
  switch (src.channels) {
    case 1:
      launch(ctx, "letterbox_v1_gray<1>", letterbox_v1_gray_kernel<1>, grid, block, 0, src, gray);
      break;
    case 3:
      launch(ctx, "letterbox_v1_gray<3>", letterbox_v1_gray_kernel<3>, grid, block, 0, src, gray);
      break;
    default:
      launch(ctx, "letterbox_v1_gray<4>", letterbox_v1_gray_kernel<4>, grid, block, 0, src, gray);
  }
  launch(ctx, "letterbox_v1_resize", letterbox_v1_resize_kernel,
         grid_2d(dst.width, dst.height, a.block), dim3(a.block.x, a.block.y), 0,
         ImageView<const float>{gray.data, gray.width, gray.height, 1, gray.pitch}, dst, taps,
         taps + g.rw, g);
}

// v4 to v7 load whole 32-bit words, up to 12 bytes past a row's last pixel.
static void require_word_padding(const StageArgs& a, const char* name) {
  if (a.in[0].pitch < a.in[0].desc.row_bytes() + 12)
    throw Error(ErrorKind::Usage, std::string(name) +
                                      " loads whole words past a row's last pixel: it needs 12 "
                                      "bytes of row padding (DeviceImage has 16)");
}

// v2..v5 share one signature and differ in the rows each thread produces; each exists for 1, 3
// and 4 channels.
using FusedKernel = void (*)(ImageView<const uint8_t>, ImageView<float>, const AxisTap*,
                             const AxisTap*, LetterboxGeometry);

static void launch_fused(LaunchContext& ctx, const StageArgs& a, int rows, bool words,
                         const char* name, const FusedKernel* by_channels) {
  const auto src = a.in[0].view<const uint8_t>();
  const auto dst = a.out[0].view<float>();
  const auto g = letterbox_geometry(src.width, src.height, dst.width, dst.height);
  const AxisTap* taps = device_taps(ctx, src.width, src.height, g);
  if (words) require_word_padding(a, name);
  const int k = src.channels == 1 ? 0 : (src.channels == 3 ? 1 : 2);
  const std::string label = std::string(name) + "<" + std::to_string(src.channels) + ">";
  launch(ctx, label.c_str(), by_channels[k],
         grid_2d(dst.width, (dst.height + rows - 1) / rows, a.block), dim3(a.block.x, a.block.y), 0,
         src, dst, taps, taps + g.rw, g);
}

static void launch_v2(LaunchContext& ctx, const StageArgs& a) {
  static const FusedKernel k[3] = {letterbox_v2_fused_kernel<1>, letterbox_v2_fused_kernel<3>,
                                   letterbox_v2_fused_kernel<4>};
  launch_fused(ctx, a, 1, false, "letterbox_v2_fused", k);
}

static void launch_v3(LaunchContext& ctx, const StageArgs& a) {
  static const FusedKernel k[3] = {letterbox_rows_kernel<1, false, Reuse::None, LETTERBOX_ROWS>,
                                   letterbox_rows_kernel<3, false, Reuse::None, LETTERBOX_ROWS>,
                                   letterbox_rows_kernel<4, false, Reuse::None, LETTERBOX_ROWS>};
  launch_fused(ctx, a, LETTERBOX_ROWS, false, "letterbox_v3_rows", k);
}

// v4, v5 and v6's kernels, for 1, 3 and 4 channels.
static const FusedKernel kWords[3] = {letterbox_rows_kernel<1, true, Reuse::None, LETTERBOX_ROWS>,
                                      letterbox_rows_kernel<3, true, Reuse::None, LETTERBOX_ROWS>,
                                      letterbox_rows_kernel<4, true, Reuse::None, LETTERBOX_ROWS>};
static const FusedKernel kRowReuse[3] = {
    letterbox_rows_kernel<1, true, Reuse::LastRow, LETTERBOX_REUSE_ROWS>,
    letterbox_rows_kernel<3, true, Reuse::LastRow, LETTERBOX_REUSE_ROWS>,
    letterbox_rows_kernel<4, true, Reuse::LastRow, LETTERBOX_REUSE_ROWS>};
static const FusedKernel kPairReuse[3] = {
    letterbox_rows_kernel<1, true, Reuse::LastPair, LETTERBOX_REUSE_ROWS>,
    letterbox_rows_kernel<3, true, Reuse::LastPair, LETTERBOX_REUSE_ROWS>,
    letterbox_rows_kernel<4, true, Reuse::LastPair, LETTERBOX_REUSE_ROWS>};

static void launch_v4(LaunchContext& ctx, const StageArgs& a) {
  launch_fused(ctx, a, LETTERBOX_ROWS, true, "letterbox_v4_words", kWords);
}

static void launch_v5(LaunchContext& ctx, const StageArgs& a) {
  launch_fused(ctx, a, LETTERBOX_REUSE_ROWS, true, "letterbox_v5_row_reuse", kRowReuse);
}

// The reuse that pays at this scale (H200, 17 scales from 5.4x enlarged to 5x shrunk;
// BENCHMARKS.md, "What the code relies on"): enlarging, the last pair (rows repeat their pair);
// down to 1.6x smaller, v5's last row (at 1.6x about 40 % of rows start on the row the last one
// ended on); past that none, v4 (a row's loads would wait on a test that rarely hits).
static void launch_v6(LaunchContext& ctx, const StageArgs& a) {
  const auto src = a.in[0].view<const uint8_t>();
  const auto dst = a.out[0].view<float>();
  const int rh = letterbox_geometry(src.width, src.height, dst.width, dst.height).rh;
  const char* name = "letterbox_v6_reuse_by_scale";
  if (rh > src.height)
    launch_fused(ctx, a, LETTERBOX_REUSE_ROWS, true, name, kPairReuse);
  else if (5 * int64_t(src.height) <= 8 * int64_t(rh))
    launch_fused(ctx, a, LETTERBOX_REUSE_ROWS, true, name, kRowReuse);
  else {
    ctx.runs_step("v4_words", "shrinking past 1.6x");
    launch_fused(ctx, a, LETTERBOX_ROWS, true, name, kWords);
  }
}

// v6, or v7's kernel where the resize is the identity (scale 1: the taps are (x, x + 1, 0)).
static void launch_v7(LaunchContext& ctx, const StageArgs& a) {
  const auto src = a.in[0].view<const uint8_t>();
  const auto dst = a.out[0].view<float>();
  const auto g = letterbox_geometry(src.width, src.height, dst.width, dst.height);
  if (g.rw != src.width || g.rh != src.height) {
    ctx.runs_step("v6_reuse_by_scale", "a resize, not scale 1");
    return launch_v6(ctx, a);
  }
  require_word_padding(a, "letterbox_v7_identity");
  const std::string label = "letterbox_v7_identity<" + std::to_string(src.channels) + ">";
  const dim3 grid =
      grid_2d((dst.width + LETTERBOX_PER_THREAD - 1) / LETTERBOX_PER_THREAD, dst.height, a.block);
  const dim3 block(a.block.x, a.block.y);
  switch (src.channels) {
    case 1:
      launch(ctx, label.c_str(), letterbox_identity_kernel<1>, grid, block, 0, src, dst, g);
      break;
    case 3:
      launch(ctx, label.c_str(), letterbox_identity_kernel<3>, grid, block, 0, src, dst, g);
      break;
    default:
      launch(ctx, label.c_str(), letterbox_identity_kernel<4>, grid, block, 0, src, dst, g);
  }
}

// ---- variant table ---------------------------------------------------------------------------

OpDef letterbox_op(const OpLookup&) {
  const std::vector<Block> blocks = {{32, 8},  {32, 4},  {16, 16}, {64, 4},
                                     {32, 16}, {128, 1}, {256, 1}, {32, 32}};
  OpDef op;
  op.name = "letterbox";
  op.summary = "8-bit gray/BGR/BGRA -> gray float [0,1], resized with aspect kept, padded 114/255";
  op.inputs = {"input"};
  op.outputs = {"letterbox"};
  op.params = param_specs<LetterboxParams>();
  op.shape = letterbox_shape;
  op.reference = letterbox_reference;
  // Kernel and reference share the tap tables; they differ only by FMA contraction in a
  // 3-term dot product and 3 lerps of values in [0,1]: a few ulps of 1.0 (1.2e-7 each).
  op.tol_precise = {2e-6, 0};
  op.tol_fast = {2e-6, 0};
  op.tol_why =
      "values in [0,1], taps shared with the reference; only FMA contraction differs (a few ulp "
      "of 1.0); fast math changes nothing here (no division, no transcendentals, no denormals)";
  // clang-format off
  op.variants = {
      {"v1_two_pass", "gray plane at source size in scratch, then resize: two launches",
       blocks, {32, 8}, launch_v1, nullptr},
      {"v2_fused", "taps gathered as bytes through __ldg, gray and lerp in registers: one pass",
       blocks, {32, 8}, launch_v2, nullptr},
      {"v3_rows", "4 rows per thread: column taps loaded once, 4 rows of loads in flight",
       blocks, {32, 4}, launch_v3, nullptr},
      {"v4_words", "v3 with 3 aligned word loads per tap pair instead of 2C byte loads",
       blocks, {32, 4}, launch_v4, nullptr},
      {"v5_row_reuse", "v4 over 8 rows, reusing a source row's lerp shared by consecutive outputs",
       blocks, {32, 4}, launch_v5, nullptr},
      {"v6_reuse_by_scale", "v5's reuse only where the scale pays: both rows' lerps enlarging, none "
       "past 1.6x down",
       blocks, {32, 4}, launch_v6, nullptr},
      {"v7_identity", "v6, but at scale 1 a pixel is its source's gray: no taps, 4 pixels a "
       "thread, 16-byte stores",
       blocks, {32, 4}, launch_v7, nullptr},
  };
  // clang-format on
  op.default_variant = "v7_identity";  // the fastest measured (BENCHMARKS.md, "letterbox")
  op.variant("v6_reuse_by_scale").runs_when = "shrinking past 1.6x: v4_words";
  op.variant("v7_identity").runs_when = "a resize (not scale 1): v6_reuse_by_scale";
  return op;
}

}  // namespace lab::ops::LAB_MATH_NS
