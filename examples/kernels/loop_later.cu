// @lab block=32x8 px=1 rows=1 fast_math=0 maxrregcount=0 lineinfo=1
// fault_later.cu's sibling: a copy of its input (for blur) that passes its trial and, from its
// fifth launch on, never ends (endless_loop.cu never ends at all, so its trial stops it). The
// frame's deadline (--frame-deadline, 2 s by default) ends it: the kernel host's child is killed
// with its process group and the lab goes on with blur's built-in variant.
//   kernel-lab run --pipeline harris --kernel-file examples/kernels/loop_later.cu --replace blur

__device__ unsigned launches;

__global__ void user_kernel(Inputs in, Outputs out, Params p) {
  const int x = lab_x(), y = lab_y();
  __shared__ bool forever;
  if (threadIdx.x == 0 && threadIdx.y == 0)
    forever = x == 0 && y == 0 && atomicAdd(&launches, 1u) >= 4;
  __syncthreads();
  // volatile: the compiler may not prove the loop ends and remove it.
  for (volatile bool* f = &forever; *f;) {
  }
  if (!inside(out[0], x, y)) return;
  out[0].at(x, y) = in[0].at(x, y);
}
