// Small device helpers shared by the kernels; free of the standard library, so NVRTC compiles
// them too (live kernels include them as the built-in kernels do).
#pragma once

namespace lab {

__device__ __forceinline__ int clampi(int v, int lo, int hi) {
  return min(max(v, lo), hi);
}

}  // namespace lab
