#include "check.h"

#include <cuda_runtime_api.h>

namespace lab {

int exit_code(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::Usage:
      return 64;
    case ErrorKind::Data:
      return 65;
    case ErrorKind::NoInput:
      return 66;
    case ErrorKind::Unavailable:
    case ErrorKind::Refused:
      return 69;
    case ErrorKind::Internal:
      return 70;
    case ErrorKind::CantCreate:
      return 73;
    case ErrorKind::Io:
      return 74;
  }
  return 70;
}

void throw_cuda_error(int code, const char* expr, const char* file, int line) {
  const auto e = static_cast<cudaError_t>(code);
  // Errors that leave the context unusable: every later call fails the same way.
  const bool sticky = e == cudaErrorIllegalAddress || e == cudaErrorLaunchFailure ||
                      e == cudaErrorMisalignedAddress || e == cudaErrorIllegalInstruction ||
                      e == cudaErrorHardwareStackError || e == cudaErrorAssert ||
                      e == cudaErrorInvalidPc || e == cudaErrorLaunchTimeout;
  if (!sticky) cudaGetLastError();  // clear a non-sticky error so the next call starts clean
  std::string msg = std::string("CUDA error ") + cudaGetErrorName(e) + " (" +
                    cudaGetErrorString(e) + ") in " + expr + " at " + file + ":" +
                    std::to_string(line);
  if (sticky) msg += "; the GPU context is lost (every later call in it fails)";
  throw CudaError(code, sticky, msg);
}

}  // namespace lab
