// A kernel that holds the stream for a given time, so that the launches queued behind it wait
// on the GPU, not on the host: event pairs then time kernels, not launch latency (the
// technique nvbench uses for the same reason).
#include "delay.h"

#include "check.h"

namespace lab {

namespace {
__global__ void delay_kernel(unsigned long long ns) {
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < ns);
}
}  // namespace

void enqueue_delay(cudaStream_t stream, double microseconds) {
  delay_kernel<<<1, 1, 0, stream>>>((unsigned long long)(microseconds * 1e3));
  LAB_CUDA_CHECK(cudaGetLastError());
}

}  // namespace lab
