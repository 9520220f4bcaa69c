// Small device helpers shared by the kernels; free of the standard library, so NVRTC compiles
// them too (live kernels include them as the built-in kernels do).
#pragma once

namespace lab {

__device__ __forceinline__ int clampi(int v, int lo, int hi) {
  return min(max(v, lo), hi);
}

// The TH x TW inputs whose top-left is (x0, y0), their coordinates clamped to the image (border
// replicate), staged into a shared tile by the block's THREADS threads together; `tid` is this
// thread's index in the block. Every thread must call it (the caller's __syncthreads() follows).
template <int TW, int THREADS, int TH, int PITCH, class View>
__device__ __forceinline__ void load_tile_clamped(float (&tile)[TH][PITCH], const View& src, int x0,
                                                  int y0, int tid) {
  for (int i = tid; i < TW * TH; i += THREADS) {
    const int ty = i / TW, tx = i - ty * TW;
    tile[ty][tx] =
        __ldg(&src.at(clampi(x0 + tx, 0, src.width - 1), clampi(y0 + ty, 0, src.height - 1)));
  }
}

// Programmatic dependent launch (sm_90 and up; elsewhere, and in a kernel not launched with the
// programmatic attribute, they do nothing). launch_dependents: once every block of this grid has
// issued it (or exited), the next kernel in the stream, if launched programmatically
// (launch_programmatic), may start. wait: until the grids this one was launched after have
// completed and their memory is visible. A kernel launched programmatically must wait before it
// reads what the kernel before it writes, or writes what that kernel reads.
__device__ __forceinline__ void griddep_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
__device__ __forceinline__ void griddep_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

}  // namespace lab
