#pragma once

#include <cuda_runtime_api.h>

namespace lab {

// Occupies `stream` for about `microseconds` (one thread spinning on the GPU's global timer).
void enqueue_delay(cudaStream_t stream, double microseconds);

// The SM clock in MHz: clock64() cycles over %globaltimer nanoseconds, counted by one thread
// spinning for about 100 us on `stream` (synchronises it). Reports boost and throttling between
// two calls without NVML.
double measure_sm_clock_mhz(cudaStream_t stream);

}  // namespace lab
