// ImageView: the pitched, non-owning image view that kernels and CPU references share. Kept free
// of the standard library so that NVRTC compiles it too (the lab's live kernels, issue 7, include
// it exactly as the built-in kernels do).
#pragma once

#if defined(__CUDACC_RTC__)
typedef decltype(sizeof(0)) size_t;
#else
#include <cstddef>
#endif

#if defined(__CUDACC__)
#define LAB_HD __host__ __device__ __forceinline__
#else
#define LAB_HD inline
#endif

namespace lab {

namespace detail {
template <typename T>
struct NonConst {
  using type = T;
};
template <typename T>
struct NonConst<const T> {
  using type = T;
};
}  // namespace detail

// Pitch is in bytes. Channels are interleaved (BGR BGR ...), x innermost.
template <typename T>
struct ImageView {
  T* data = nullptr;
  int width = 0;
  int height = 0;
  int channels = 1;
  size_t pitch = 0;

  LAB_HD T* row(int y) const {
    return reinterpret_cast<T*>(
        reinterpret_cast<char*>(const_cast<typename detail::NonConst<T>::type*>(data)) +
        size_t(y) * pitch);
  }
  LAB_HD T& at(int x, int y, int c = 0) const { return row(y)[size_t(x) * channels + c]; }
};

}  // namespace lab
