// @lab block=32x8 px=1 rows=1 fast_math=0 maxrregcount=0 lineinfo=1
// A kernel that never ends. Its trial (one run in a child process, before it may enter the lab)
// stops it after the time limit and says so; the kernel that was running keeps running.
//   kernel-lab check --pipeline harris --kernel-file examples/kernels/endless_loop.cu \
//       --replace blur --trial-timeout 1          (exit 70: "did not finish in 1 s")

__global__ void user_kernel(Inputs in, Outputs out, Params p) {
  const int x = lab_x(), y = lab_y();
  if (!inside(out[0], x, y)) return;
  // The clock is read on every turn, so the compiler cannot drop the loop (it dropped
  // `volatile int spin = 1; while (spin) {}`: a local, even volatile, is no memory anyone sees).
  while (clock64() >= 0) {
  }
  out[0].at(x, y) = in[0].at(x, y);
}
