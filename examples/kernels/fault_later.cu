// @lab block=32x8 px=1 rows=1 fast_math=0 maxrregcount=0 lineinfo=1
// A kernel that passes its trial and faults later: a copy of its input (for blur) that counts
// its launches and, on the fifth, writes through a bad pointer. The trial runs it once, so it is
// installed; a few frames later it faults in the kernel host (the lab's child process that runs
// live kernels), and the lab carries on: that frame is lost, blur goes back to its built-in
// variant, this text stays in the editor and a fresh child starts. Its siblings trap_later.cu
// and loop_later.cu do the same with __trap() and an endless loop.
//   kernel-lab gui --pipeline harris --kernel-file examples/kernels/fault_later.cu --replace blur

__device__ unsigned launches;

__global__ void user_kernel(Inputs in, Outputs out, Params p) {
  const int x = lab_x(), y = lab_y();
  if (x == 0 && y == 0 && atomicAdd(&launches, 1u) >= 4)
    reinterpret_cast<volatile float*>(8)[0] = 1.0f;  // an illegal address: a sticky fault
  if (!inside(out[0], x, y)) return;
  out[0].at(x, y) = in[0].at(x, y);
}
