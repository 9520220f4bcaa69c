#pragma once

#include <cuda_runtime_api.h>

#include "image.h"

namespace lab {

// The range of the finite values of channel `c` of a float image in device memory, computed on
// the device (8 bytes come back, not the image): what the GUI's auto range needs without a
// host copy of the frame. {0, 1} when there is no finite value. Waits for `stream`.
struct ValueRange {
  float lo = 0, hi = 1;
};
ValueRange device_min_max(const ImageRef& img, int c, cudaStream_t stream);

}  // namespace lab
