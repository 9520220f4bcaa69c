// @lab block=32x8 px=1 rows=1 fast_math=0 maxrregcount=0 lineinfo=1
// fault_later.cu's sibling: a copy of its input (for blur) that passes its trial and, on its
// fifth launch, executes __trap() (an assertion a kernel might make). The kernel host's child
// dies with it; the lab loses that frame and goes on with blur's built-in variant.
//   kernel-lab run --pipeline harris --kernel-file examples/kernels/trap_later.cu --replace blur

__device__ unsigned launches;

__global__ void user_kernel(Inputs in, Outputs out, Params p) {
  const int x = lab_x(), y = lab_y();
  if (x == 0 && y == 0 && atomicAdd(&launches, 1u) >= 4) __trap();
  if (!inside(out[0], x, y)) return;
  out[0].at(x, y) = in[0].at(x, y);
}
