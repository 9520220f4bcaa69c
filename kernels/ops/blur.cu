// blur: 5x5 Gaussian, sigma 1.0, border replicate, float32 plane -> float32 plane.
//
// The weights are OpenCV's getGaussianKernel(5, 1.0) rounded to float; the filter is separable
// (rows, then columns), as OpenCV's GaussianBlur computes it.
//
// Variants:
//   v1_naive_2d    one thread per pixel reads its whole 5x5 window from global memory: 25 loads
//                  per pixel, reuse left to the L1 cache.
//   v2_separable   a row pass into a scratch plane, then a column pass: 10 loads per pixel but an
//                  extra float plane written and read back (two launches, +8 bytes/pixel).
//   v3_smem_tile   the block stages its tile plus a 2-pixel apron in shared memory once, filters
//                  rows then columns there: one global read and one write per pixel, one launch.
//   v4_rows        each thread filters a column strip of 8 rows: 12 row passes kept in registers
//                  feed 8 outputs. 60 independent loads per thread are in flight at once: on a
//                  GPU with HBM, one load per thread cannot cover the memory latency (Little's
//                  law), many can. No shared memory, no barriers.
//   v5_rows_shfl   v4 with the horizontal taps exchanged by warp shuffles: 2 loads per row
//                  instead of 5, which relieves the L1 (v4 issues 7.5 loads per output).
//   v6_rows16_shfl v5 with 16 rows per thread: the 4 halo rows are re-read from L2 for 16
//                  outputs instead of 8 (ncu on v5 at 4K: L1 77%, L2 73%, DRAM 41%). Fewer, longer
//                  threads: at small sizes there may be too few to fill the GPU.
//   v7_float4      four pixels per thread: one 16-byte load per row, the 2-pixel halo from the
//                  neighbour lanes' vectors (4 shuffles per 4 outputs instead of 8 per output),
//                  16-byte stores. Warps whose 128 pixels touch the image border take a scalar,
//                  clamped path. Column sums accumulate as rows arrive, so 5 outputs are live,
//                  not the whole strip (holding the strip took 80 registers: 38% occupancy, slower
//                  than v6).
//   v8_float4_rows16 v7 with 16 rows per thread.
//
// Bench: kernel-lab bench --stage blur --sweep-variants --sweep-blocks --size 3840x2160
#include <vector>

#include "common.h"
#include "launch.cuh"
#include "warp_row.cuh"

namespace lab::ops {

struct BlurParams {
  template <class V>
  void visit(V&) {}  // fixed by the spec: 5x5, sigma 1
};

constexpr int BLUR_R = 2;

// getGaussianKernel(5, 1.0): exp(-(i-2)^2 / 2) normalised, in double, rounded to float.
LAB_HD constexpr float gauss5(int i) {
  return i == 2               ? 0.40261995792388916f
         : (i == 1 || i == 3) ? 0.24420134723186493f
                              : 0.054488684982061386f;
}

inline std::vector<ImageDesc> blur_shape(const std::vector<ImageDesc>& in, const ParamMap&) {
  return {require_f32_plane("blur", in[0])};
}

inline void blur_reference(const StageArgs& a) {
  const auto src = a.in[0].view<const float>();
  const auto dst = a.out[0].view<float>();
  const int w = src.width, h = src.height;
  std::vector<float> rows(size_t(w) * h);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      float s = 0;
      for (int i = -BLUR_R; i <= BLUR_R; ++i)
        s += gauss5(i + BLUR_R) * src.at(clamp_idx(x + i, w), y);
      rows[size_t(y) * w + x] = s;
    }
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      float s = 0;
      for (int j = -BLUR_R; j <= BLUR_R; ++j)
        s += gauss5(j + BLUR_R) * rows[size_t(clamp_idx(y + j, h)) * w + x];
      dst.at(x, y) = s;
    }
}

}  // namespace lab::ops

namespace lab::ops::LAB_MATH_NS {

// ---- kernels ---------------------------------------------------------------------------------

__global__ void blur_v1_naive_2d_kernel(ImageView<const float> src, ImageView<float> dst) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x;
  const int y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= dst.width || y >= dst.height) return;
  float s = 0.0f;
#pragma unroll
  for (int j = -BLUR_R; j <= BLUR_R; ++j) {
    const float* r = src.row(clampi(y + j, 0, src.height - 1));
    float h = 0.0f;
#pragma unroll
    for (int i = -BLUR_R; i <= BLUR_R; ++i)
      h += gauss5(i + BLUR_R) * r[clampi(x + i, 0, src.width - 1)];
    s += gauss5(j + BLUR_R) * h;
  }
  dst.at(x, y) = s;
}

__global__ void blur_v2_rows_kernel(ImageView<const float> src, ImageView<float> tmp) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x;
  const int y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= src.width || y >= src.height) return;
  const float* r = src.row(y);
  float s = 0.0f;
#pragma unroll
  for (int i = -BLUR_R; i <= BLUR_R; ++i)
    s += gauss5(i + BLUR_R) * r[clampi(x + i, 0, src.width - 1)];
  tmp.at(x, y) = s;
}

__global__ void blur_v2_cols_kernel(ImageView<const float> tmp, ImageView<float> dst) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x;
  const int y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= dst.width || y >= dst.height) return;
  float s = 0.0f;
#pragma unroll
  for (int j = -BLUR_R; j <= BLUR_R; ++j)
    s += gauss5(j + BLUR_R) * tmp.at(x, clampi(y + j, 0, dst.height - 1));
  dst.at(x, y) = s;
}

// Tile of (BY + 4) x (BX + 4) inputs; the row pass leaves (BY + 4) x BX in `rows`.
template <int BX, int BY>
__global__ void __launch_bounds__(BX* BY)
    blur_v3_smem_tile_kernel(ImageView<const float> src, ImageView<float> dst) {
  constexpr int TW = BX + 2 * BLUR_R, TH = BY + 2 * BLUR_R;
  __shared__ float tile[TH][TW + 1];  // +1: column reads of the next pass avoid bank conflicts
  __shared__ float rows[TH][BX];
  const int x0 = blockIdx.x * BX - BLUR_R, y0 = blockIdx.y * BY - BLUR_R;
  const int tid = threadIdx.y * BX + threadIdx.x;
  // Cooperative load with clamped coordinates (border replicate); no early return before the
  // barriers: every thread must reach __syncthreads().
  for (int i = tid; i < TW * TH; i += BX * BY) {
    const int ty = i / TW, tx = i - ty * TW;
    tile[ty][tx] =
        __ldg(&src.at(clampi(x0 + tx, 0, src.width - 1), clampi(y0 + ty, 0, src.height - 1)));
  }
  __syncthreads();
  for (int i = tid; i < TH * BX; i += BX * BY) {
    const int ty = i / BX, tx = i - ty * BX;
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k <= 2 * BLUR_R; ++k) s += gauss5(k) * tile[ty][tx + k];
    rows[ty][tx] = s;
  }
  __syncthreads();
  const int x = blockIdx.x * BX + threadIdx.x, y = blockIdx.y * BY + threadIdx.y;
  if (x >= dst.width || y >= dst.height) return;
  float s = 0.0f;
#pragma unroll
  for (int k = 0; k <= 2 * BLUR_R; ++k) s += gauss5(k) * rows[threadIdx.y + k][threadIdx.x];
  dst.at(x, y) = s;
}

template <int BLUR_ROWS>
__global__ void blur_v4_rows_kernel(ImageView<const float> src, ImageView<float> dst) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x;
  const int y0 = (blockIdx.y * blockDim.y + threadIdx.y) * BLUR_ROWS;
  if (x >= dst.width || y0 >= dst.height) return;
  int xs[5];
#pragma unroll
  for (int i = 0; i < 5; ++i) xs[i] = clampi(x + i - BLUR_R, 0, src.width - 1);
  float h[BLUR_ROWS + 2 * BLUR_R];
#pragma unroll
  for (int r = 0; r < BLUR_ROWS + 2 * BLUR_R; ++r) {
    const float* row = src.row(clampi(y0 + r - BLUR_R, 0, src.height - 1));
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < 5; ++i) s += gauss5(i) * __ldg(row + xs[i]);
    h[r] = s;
  }
#pragma unroll
  for (int r = 0; r < BLUR_ROWS; ++r) {
    if (y0 + r >= dst.height) break;
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < 5; ++k) s += gauss5(k) * h[r + k];
    dst.at(x, y0 + r) = s;
  }
}

template <int BLUR_ROWS>
__global__ void blur_v5_rows_shfl_kernel(ImageView<const float> src, ImageView<float> dst) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x;
  const int y0 = (blockIdx.y * blockDim.y + threadIdx.y) * BLUR_ROWS;
  if (y0 >= dst.height) return;  // uniform across the warp (blockDim.x % 32 == 0)
  constexpr int N = BLUR_ROWS + 2 * BLUR_R;
  WarpRowLoad in[N];  // every load of the strip issued before the first is used
#pragma unroll
  for (int r = 0; r < N; ++r)
    in[r] =
        warp_row_load<BLUR_R>(src.row(clampi(y0 + r - BLUR_R, 0, src.height - 1)), x, src.width);
  float h[N];
#pragma unroll
  for (int r = 0; r < N; ++r) {
    float t[2 * BLUR_R + 1];
    warp_row_taps<BLUR_R>(in[r], t);
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < 5; ++i) s += gauss5(i) * t[i];
    h[r] = s;
  }
  if (x >= dst.width) return;
#pragma unroll
  for (int r = 0; r < BLUR_ROWS; ++r) {
    if (y0 + r >= dst.height) break;
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < 5; ++k) s += gauss5(k) * h[r + k];
    dst.at(x, y0 + r) = s;
  }
}

template <int ROWS>
__global__ void blur_v7_float4_kernel(ImageView<const float> src, ImageView<float> dst) {
  constexpr unsigned FULL = 0xffffffffu;
  const int lane = threadIdx.x & 31;
  const int x = 4 * (blockIdx.x * blockDim.x + threadIdx.x);
  const int y0 = (blockIdx.y * blockDim.y + threadIdx.y) * ROWS;
  if (y0 >= dst.height) return;  // uniform across the warp (blockDim.x % 32 == 0)
  const int w = src.width;
  const int warp_x = x - 4 * lane;  // the warp covers [warp_x, warp_x + 128)
  const bool interior = warp_x >= BLUR_R && warp_x + 128 + BLUR_R <= w;  // uniform
  constexpr int N = ROWS + 2 * BLUR_R;
  // Column sums accumulate as rows arrive: output o takes g(k) * row (o + k), so only the five
  // outputs a row touches are live (20 registers, not 4 * N).
  float4 acc[ROWS];
#pragma unroll
  for (int o = 0; o < ROWS; ++o) acc[o] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
  for (int r = 0; r < N; ++r) {
    const float* row = src.row(clampi(y0 + r - BLUR_R, 0, src.height - 1));
    float v[8];  // x-2 .. x+5
    if (interior) {
      const float4 c = __ldg(reinterpret_cast<const float4*>(row + x));
      float2 halo = make_float2(0.0f, 0.0f);  // lane 0: x-2, x-1; lane 31: x+4, x+5
      if (lane == 0) halo = __ldg(reinterpret_cast<const float2*>(row + x - 2));
      if (lane == 31) halo = __ldg(reinterpret_cast<const float2*>(row + x + 4));
      const float lz = __shfl_up_sync(FULL, c.z, 1), lw = __shfl_up_sync(FULL, c.w, 1);
      const float rx = __shfl_down_sync(FULL, c.x, 1), ry = __shfl_down_sync(FULL, c.y, 1);
      v[0] = lane == 0 ? halo.x : lz;
      v[1] = lane == 0 ? halo.y : lw;
      v[2] = c.x, v[3] = c.y, v[4] = c.z, v[5] = c.w;
      v[6] = lane == 31 ? halo.x : rx;
      v[7] = lane == 31 ? halo.y : ry;
    } else {
#pragma unroll
      for (int i = 0; i < 8; ++i) v[i] = __ldg(row + clampi(x - BLUR_R + i, 0, w - 1));
    }
    float hr[4];  // the row pass, 4 outputs wide
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      float s = 0.0f;
#pragma unroll
      for (int i = 0; i < 5; ++i) s += gauss5(i) * v[k + i];
      hr[k] = s;
    }
#pragma unroll
    for (int k = 0; k < 5; ++k) {  // row r is tap k of output r - k
      const int o = r - k;
      if (o < 0 || o >= ROWS) continue;
      const float g = gauss5(k);
      acc[o].x += g * hr[0], acc[o].y += g * hr[1], acc[o].z += g * hr[2], acc[o].w += g * hr[3];
    }
    const int done = r - 2 * BLUR_R;  // the output whose last tap was this row
    if (done >= 0 && x < w && y0 + done < dst.height) {
      float* out = dst.row(y0 + done) + x;
      const float4 s = acc[done];
      if (x + 3 < w) {
        *reinterpret_cast<float4*>(out) = s;
      } else {  // the last, partial vector of the row
        out[0] = s.x;
        if (x + 1 < w) out[1] = s.y;
        if (x + 2 < w) out[2] = s.z;
      }
    }
  }
}

// ---- launchers -------------------------------------------------------------------------------

static void launch_v1(LaunchContext& ctx, const StageArgs& a) {
  const auto src = a.in[0].view<const float>();
  const auto dst = a.out[0].view<float>();
  launch(ctx, "blur_v1_naive_2d", blur_v1_naive_2d_kernel, grid_2d(dst.width, dst.height, a.block),
         dim3(a.block.x, a.block.y), 0, src, dst);
}

static void launch_v2(LaunchContext& ctx, const StageArgs& a) {
  const auto src = a.in[0].view<const float>();
  const auto dst = a.out[0].view<float>();
  const size_t pitch = size_t(src.width) * sizeof(float);
  ImageView<float> tmp{static_cast<float*>(ctx.scratch(pitch * src.height)), src.width, src.height,
                       1, pitch};
  const dim3 grid = grid_2d(dst.width, dst.height, a.block), block(a.block.x, a.block.y);
  launch(ctx, "blur_v2_rows", blur_v2_rows_kernel, grid, block, 0, src, tmp);
  launch(ctx, "blur_v2_cols", blur_v2_cols_kernel, grid, block, 0,
         ImageView<const float>{tmp.data, tmp.width, tmp.height, 1, tmp.pitch}, dst);
}

template <int BX, int BY>
static void launch_v3_tile(LaunchContext& ctx, const StageArgs& a, const char* name) {
  const auto src = a.in[0].view<const float>();
  const auto dst = a.out[0].view<float>();
  launch(ctx, name, blur_v3_smem_tile_kernel<BX, BY>, grid_2d(dst.width, dst.height, {BX, BY}),
         dim3(BX, BY), 0, src, dst);
}

// The tile shape is a template parameter (static shared arrays, unrolled loops): only these
// instantiations exist.
static void launch_v3(LaunchContext& ctx, const StageArgs& a) {
  const Block b = a.block;
  if (b == Block{32, 8}) return launch_v3_tile<32, 8>(ctx, a, "blur_v3_smem_tile<32,8>");
  if (b == Block{32, 4}) return launch_v3_tile<32, 4>(ctx, a, "blur_v3_smem_tile<32,4>");
  if (b == Block{16, 16}) return launch_v3_tile<16, 16>(ctx, a, "blur_v3_smem_tile<16,16>");
  if (b == Block{64, 4}) return launch_v3_tile<64, 4>(ctx, a, "blur_v3_smem_tile<64,4>");
  if (b == Block{32, 16}) return launch_v3_tile<32, 16>(ctx, a, "blur_v3_smem_tile<32,16>");
  if (b == Block{32, 32}) return launch_v3_tile<32, 32>(ctx, a, "blur_v3_smem_tile<32,32>");
  throw Error(ErrorKind::Usage, "blur v3_smem_tile: no instantiation for block " + b.str());
}

// The row-strip kernels: `rows` outputs per thread, `pixels` per thread in x (4 for float4).
static void launch_strip(LaunchContext& ctx, const StageArgs& a, int pixels, int rows,
                         void (*kernel)(ImageView<const float>, ImageView<float>),
                         const char* name) {
  const auto dst = a.out[0].view<float>();
  launch(ctx, name, kernel,
         grid_2d((dst.width + pixels - 1) / pixels, (dst.height + rows - 1) / rows, a.block),
         dim3(a.block.x, a.block.y), 0, a.in[0].view<const float>(), dst);
}

static void launch_v4(LaunchContext& c, const StageArgs& a) {
  launch_strip(c, a, 1, 8, blur_v4_rows_kernel<8>, "blur_v4_rows");
}
static void launch_v5(LaunchContext& c, const StageArgs& a) {
  launch_strip(c, a, 1, 8, blur_v5_rows_shfl_kernel<8>, "blur_v5_rows_shfl");
}
static void launch_v6(LaunchContext& c, const StageArgs& a) {
  launch_strip(c, a, 1, 16, blur_v5_rows_shfl_kernel<16>, "blur_v6_rows16_shfl");
}
static void launch_v7(LaunchContext& c, const StageArgs& a) {
  launch_strip(c, a, 4, 8, blur_v7_float4_kernel<8>, "blur_v7_float4");
}
static void launch_v8(LaunchContext& c, const StageArgs& a) {
  launch_strip(c, a, 4, 16, blur_v7_float4_kernel<16>, "blur_v8_float4_rows16");
}

static size_t v3_smem(Block b) {
  return sizeof(float) * size_t(b.y + 2 * BLUR_R) * ((b.x + 2 * BLUR_R + 1) + b.x);
}

// ---- variant table ---------------------------------------------------------------------------

OpDef blur_op() {
  const std::vector<Block> any = {{32, 8},  {32, 4},  {16, 16}, {64, 4},
                                  {32, 16}, {128, 2}, {32, 32}};
  const std::vector<Block> tiles = {{32, 8}, {32, 4}, {16, 16}, {64, 4}, {32, 16}, {32, 32}};
  OpDef op;
  op.name = "blur";
  op.summary = "Gaussian 5x5, sigma 1, border replicate (OpenCV GaussianBlur)";
  op.inputs = {"letterbox"};
  op.outputs = {"blur"};
  op.params = param_specs<BlurParams>();
  op.shape = blur_shape;
  op.reference = blur_reference;
  // A convex combination of 25 inputs: the rounding error of a 5+5-term float sum is at most
  // ~10 ulp of max|input|, 25 terms in v1's order; 4e-6 relative to the input's range holds
  // with margin. Fast math only flushes denormals (< 1.2e-38) here.
  op.tol_precise = {1e-7, 4e-6};
  op.tol_fast = {1e-7, 4e-6};
  op.tol_why =
      "weights sum to 1: float summation error <= ~25 ulp of max|x|; fast math only flushes "
      "denormals";
  // clang-format off
  // Fastest at 1280x736 (ties v4, v5); within 1 % of v7/v8 at 4K, where those need 256x1.
  op.default_variant = "v6_rows16_shfl";
  op.variants = {
      {"v1_naive_2d", "each thread reads its 5x5 window from global memory (25 loads)",
       any, {32, 8}, launch_v1, nullptr},
      {"v2_separable", "row pass to scratch + column pass: 10 loads, extra plane round trip",
       any, {32, 8}, launch_v2, nullptr},
      {"v3_smem_tile", "tile + 2px apron staged in shared memory once; rows then columns there",
       tiles, {32, 8}, launch_v3, v3_smem},
      {"v4_rows", "8 rows per thread from registers: 60 loads in flight per thread",
       any, {32, 4}, launch_v4, nullptr},
      {"v5_rows_shfl", "v4 + warp shuffles for the row taps: 2 loads per row instead of 5",
       warp_rows_blocks(), {32, 4}, launch_v5, nullptr},
      {"v6_rows16_shfl", "v5 with 16 rows per thread: halo re-reads from L2 drop from 1.5x to 1.25x",
       warp_rows_blocks(), {32, 4}, launch_v6, nullptr},
      {"v7_float4", "4 pixels per thread: 16-byte loads and stores, 1 shuffle per output-row",
       warp_rows_blocks(), {32, 4}, launch_v7, nullptr},
      {"v8_float4_rows16", "v7 with 16 rows per thread: half the halo re-reads",
       warp_rows_blocks(), {32, 4}, launch_v8, nullptr},
  };
  // clang-format on
  return op;
}

}  // namespace lab::ops::LAB_MATH_NS
