#include "blas.h"

#include <cublas_v2.h>

#include <cstring>
#include <mutex>
#include <string>

#include "check.h"
#include "device.h"

namespace lab {

namespace {

void check_blas(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw Error(ErrorKind::Unavailable,
                std::string("cuBLAS ") + what + " failed: status " + std::to_string(int(s)));
}

std::mutex g_mutex;
cublasHandle_t g_handle = nullptr;  // lives as long as the CUDA context

// A reset destroys the context and the handle's memory with it: forget the handle (destroying
// it in a faulted context could touch that memory).
void forget_handle() {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_handle = nullptr;
}

}  // namespace

void sgemm_rowmajor(cudaStream_t stream, int M, int N, int K, const float* A, size_t lda,
                    const float* B, size_t ldb, float* C, size_t ldc) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (!g_handle) {
    check_blas(cublasCreate(&g_handle), "cublasCreate");
    on_device_reset(forget_handle);
    // FP32 SGEMM without TF32: the default math mode (TF32 only with CUBLAS_TF32_TENSOR_OP_MATH;
    // pedantic mode would also forbid the fast FP32 kernels, which a ceiling must use).
    check_blas(cublasSetMathMode(g_handle, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
  }
  check_blas(cublasSetStream(g_handle, stream), "cublasSetStream");
  // cuBLAS is column-major: a row-major X is X^T in column-major, so C^T = B^T A^T is one
  // column-major GEMM with the operands swapped.
  const float one = 1.0f, zero = 0.0f;
  check_blas(cublasSgemm(g_handle, CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &one, B, int(ldb), A,
                         int(lda), &zero, C, int(ldc)),
             "cublasSgemm");
}

void sgemm_host(const ImageRef& A, const ImageRef& B, const ImageRef& C) {
  HostImage ha(A.desc), hb(B.desc);
  for (int y = 0; y < A.desc.height; ++y)
    std::memcpy(ha.bytes() + size_t(y) * ha.pitch(), static_cast<const char*>(A.data) + y * A.pitch,
                A.desc.row_bytes());
  for (int y = 0; y < B.desc.height; ++y)
    std::memcpy(hb.bytes() + size_t(y) * hb.pitch(), static_cast<const char*>(B.data) + y * B.pitch,
                B.desc.row_bytes());
  DeviceImage da(A.desc), db(B.desc), dc(C.desc);
  upload(ha, da);
  upload(hb, db);
  sgemm_rowmajor(nullptr, A.desc.height, B.desc.width, A.desc.width,
                 static_cast<const float*>(da.data()), da.pitch() / 4,
                 static_cast<const float*>(db.data()), db.pitch() / 4,
                 static_cast<float*>(dc.data()), dc.pitch() / 4);
  LAB_CUDA_CHECK(cudaGetLastError());
  const HostImage hc = download(dc.ref());
  for (int y = 0; y < C.desc.height; ++y)
    std::memcpy(static_cast<char*>(C.data) + y * C.pitch, hc.bytes() + size_t(y) * hc.pitch(),
                C.desc.row_bytes());
}

}  // namespace lab
