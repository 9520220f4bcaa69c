#pragma once

#include <cuda_runtime_api.h>

#include "image.h"

namespace lab {

// Occupies `stream` for about `microseconds` (one thread spinning on the GPU's global timer).
void enqueue_delay(cudaStream_t stream, double microseconds);

// Reads `bytes` of `buf` (a device buffer, 128-byte aligned, written once) on `stream`, then
// discards its lines: with twice the L2's size, every dirty line is written back and the L2 is
// left empty (on sm_80+; before, it holds clean lines of `buf`). DRAM-cold runs.
void enqueue_read_flush(cudaStream_t stream, const void* buf, size_t bytes);

// The buffer for that: twice this GPU's L2, made and zeroed on first use. enqueue() empties the
// L2 on `stream` (the runner's cold runs and counters, the kernel host's counters).
class L2Flush {
 public:
  void enqueue(cudaStream_t stream);

 private:
  DeviceBuffer m_buf;
};

// The SM clock in MHz: clock64() cycles over %globaltimer nanoseconds, counted by one thread
// spinning for about 100 us on `stream` (synchronises it). Reports boost and throttling between
// two calls without NVML.
double measure_sm_clock_mhz(cudaStream_t stream);

}  // namespace lab
