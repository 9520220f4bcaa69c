// @lab block=32x8 px=1 rows=1 fast_math=0 maxrregcount=0 lineinfo=1
// A live kernel for blur, written from scratch: the 5x5 Gaussian (sigma 1, border replicate) as
// one shared-memory tile per block, rows then columns. It matches blur's CPU reference within
// its tolerance; run it with
//   kernel-lab check --pipeline harris --kernel-file examples/kernels/blur_smem.cu --replace blur
// or open it in the GUI's Live kernel panel (file: a full path) and press "compile and run".

// getGaussianKernel(5, 1.0) rounded to float, as the built-in blur uses.
__device__ __forceinline__ float g5(int i) {
  return i == 2               ? 0.40261995792388916f
         : (i == 1 || i == 3) ? 0.24420134723186493f
                              : 0.054488684982061386f;
}

constexpr int R = 2;
constexpr int TW = LAB_BLOCK_X + 2 * R, TH = LAB_BLOCK_Y + 2 * R;

__global__ void __launch_bounds__(LAB_BLOCK_X* LAB_BLOCK_Y)
    user_kernel(Inputs in, Outputs out, Params p) {
  __shared__ float tile[TH][TW + 1];  // +1: the column pass reads without bank conflicts
  __shared__ float rows[TH][LAB_BLOCK_X];
  const ImageIn src = in[0];
  const int x0 = blockIdx.x * LAB_BLOCK_X - R, y0 = blockIdx.y * LAB_BLOCK_Y - R;
  const int tid = threadIdx.y * LAB_BLOCK_X + threadIdx.x;
  // The tile and its apron, clamped at the borders; every thread reaches the barriers.
  for (int i = tid; i < TW * TH; i += LAB_BLOCK_X * LAB_BLOCK_Y) {
    const int ty = i / TW, tx = i - ty * TW;
    tile[ty][tx] = clamped(src, x0 + tx, y0 + ty);
  }
  __syncthreads();
  for (int i = tid; i < TH * LAB_BLOCK_X; i += LAB_BLOCK_X * LAB_BLOCK_Y) {
    const int ty = i / LAB_BLOCK_X, tx = i - ty * LAB_BLOCK_X;
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k <= 2 * R; ++k) s += g5(k) * tile[ty][tx + k];
    rows[ty][tx] = s;
  }
  __syncthreads();
  const int x = lab_x(), y = lab_y();
  if (!inside(out[0], x, y)) return;
  float s = 0.0f;
#pragma unroll
  for (int k = 0; k <= 2 * R; ++k) s += g5(k) * rows[threadIdx.y + k][threadIdx.x];
  out[0].at(x, y) = s;
}
