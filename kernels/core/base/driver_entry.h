// A driver API function through the runtime (cudaGetDriverEntryPoint), which holds libcuda open
// already: the lab links no libcuda, so that it starts and runs its CPU references where the
// driver is absent.
#pragma once

#include <cuda_runtime_api.h>

namespace lab {

// `fn` set to the driver function `name` (CUDA 12 ABI), or null; true when found.
template <class F>
inline bool driver_function(const char* name, F& fn) {
  void* p = nullptr;
#if CUDART_VERSION >= 12050
  cudaDriverEntryPointQueryResult found{};
  const bool ok =
      cudaGetDriverEntryPointByVersion(name, &p, 12000, cudaEnableDefault, &found) == cudaSuccess &&
      found == cudaDriverEntryPointSuccess;
#elif CUDART_VERSION >= 12000
  cudaDriverEntryPointQueryResult found{};
  const bool ok = cudaGetDriverEntryPoint(name, &p, cudaEnableDefault, &found) == cudaSuccess &&
                  found == cudaDriverEntryPointSuccess;
#else
  const bool ok = cudaGetDriverEntryPoint(name, &p, cudaEnableDefault) == cudaSuccess;
#endif
  cudaGetLastError();
  fn = ok ? reinterpret_cast<F>(p) : nullptr;
  return fn != nullptr;
}

}  // namespace lab
