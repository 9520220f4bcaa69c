// cuBLAS, the ceiling and the large-size reference of the matmul playground.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "image.h"

namespace lab {

// Row-major C (M x N) = A (M x K) B (K x N) in FP32 with TF32 off (CUBLAS_DEFAULT_MATH: FP32
// arithmetic), on `stream`. Pitches are in elements. One process-wide handle, created on
// first use; calls are serialised (the handle's stream is set per call). Throws Error.
void sgemm_rowmajor(cudaStream_t stream, int M, int N, int K, const float* A, size_t lda,
                    const float* B, size_t ldb, float* C, size_t ldc);

// The same for host images, through the GPU (a reference too large for the CPU loops): uploads,
// multiplies, downloads. Needs a CUDA device.
void sgemm_host(const ImageRef& A, const ImageRef& B, const ImageRef& C);

}  // namespace lab
