#pragma once

#include <cuda_runtime_api.h>

namespace lab {

// Occupies `stream` for about `microseconds` (one thread spinning on the GPU's global timer).
void enqueue_delay(cudaStream_t stream, double microseconds);

}  // namespace lab
