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
// `scratch`: 2 unsigned of device memory to use (null: allocated and freed on the stream).
ValueRange device_min_max(const ImageRef& img, int c, cudaStream_t stream,
                          unsigned* scratch = nullptr);

// A one-channel u32 image widened to float in `dst` (same size), on `stream`: integer slots
// (the scan and sort playgrounds) reach the viewport's float texture without a host copy.
// Display only: values above 2^24 round to the nearest float.
void device_u32_to_f32(const ImageRef& src, const ImageRef& dst, cudaStream_t stream);

}  // namespace lab
