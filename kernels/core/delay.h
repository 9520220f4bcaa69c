#pragma once

#include <cuda_runtime_api.h>

namespace lab {

// Occupies `stream` for about `microseconds` (one thread spinning on the GPU's global timer).
void enqueue_delay(cudaStream_t stream, double microseconds);

// Reads `bytes` of `buf` (a device buffer, written once) on `stream`: with twice the L2's size,
// it leaves the L2 holding only clean lines of `buf` (DRAM-cold runs).
void enqueue_read_flush(cudaStream_t stream, const void* buf, size_t bytes);

// The SM clock in MHz: clock64() cycles over %globaltimer nanoseconds, counted by one thread
// spinning for about 100 us on `stream` (synchronises it). Reports boost and throttling between
// two calls without NVML.
double measure_sm_clock_mhz(cudaStream_t stream);

}  // namespace lab
