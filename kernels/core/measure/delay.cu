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
__global__ void clock_kernel(unsigned long long ns, unsigned long long* out) {
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  const long long c0 = clock64();
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < ns);
  out[0] = (unsigned long long)(clock64() - c0);
  out[1] = now - start;
}
// Reads every 16-byte word of the buffer: the L2 then holds only clean lines of it, so the
// next kernel reads its inputs from DRAM and writes back nothing that is not its own (a memset
// would leave dirty lines whose write-back lands inside the next kernel's time and counters).
__global__ void read_flush_kernel(const uint4* buf, size_t n, unsigned* sink) {
  unsigned acc = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    const uint4 v = buf[i];
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x9e3779b9u) *sink = acc;  // keeps the loads; the contents never make it true
}
// Then the buffer's lines are discarded (sm_80+: invalidated without a write-back), so the L2
// is left empty, as ncu's cache control leaves it: the next kernel's own dirty lines then
// compete for the whole L2, and its DRAM writes count as ncu counts them.
__global__ void discard_kernel(char* buf, size_t lines) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < lines;
       i += size_t(gridDim.x) * blockDim.x) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("discard.global.L2 [%0], 128;" ::"l"(buf + i * 128) : "memory");
#endif
  }
}
}  // namespace

void enqueue_read_flush(cudaStream_t stream, const void* buf, size_t bytes) {
  // The buffer's first word doubles as the sink: its value never matters.
  read_flush_kernel<<<1024, 256, 0, stream>>>(static_cast<const uint4*>(buf), bytes / 16,
                                              static_cast<unsigned*>(const_cast<void*>(buf)));
  LAB_CUDA_CHECK(cudaGetLastError());
  discard_kernel<<<1024, 256, 0, stream>>>(static_cast<char*>(const_cast<void*>(buf)), bytes / 128);
  LAB_CUDA_CHECK(cudaGetLastError());
}

double measure_sm_clock_mhz(cudaStream_t stream) {
  unsigned long long* d = nullptr;
  LAB_CUDA_CHECK(
      cudaMallocAsync(reinterpret_cast<void**>(&d), 2 * sizeof(unsigned long long), stream));
  clock_kernel<<<1, 1, 0, stream>>>(100000, d);  // %globaltimer may tick in 1 us steps
  unsigned long long h[2] = {0, 0};
  const cudaError_t launched = cudaGetLastError();
  if (launched == cudaSuccess)
    LAB_CUDA_CHECK(cudaMemcpyAsync(h, d, sizeof h, cudaMemcpyDeviceToHost, stream));
  LAB_CUDA_CHECK(cudaFreeAsync(d, stream));
  LAB_CUDA_CHECK(cudaStreamSynchronize(stream));
  LAB_CUDA_CHECK(launched);
  return h[1] ? 1e3 * double(h[0]) / double(h[1]) : 0.0;
}

void enqueue_delay(cudaStream_t stream, double microseconds) {
  delay_kernel<<<1, 1, 0, stream>>>((unsigned long long)(microseconds * 1e3));
  LAB_CUDA_CHECK(cudaGetLastError());
}

void L2Flush::enqueue(cudaStream_t stream) {
  if (!m_buf.data()) {
    int l2 = 0, dev = 0;
    LAB_CUDA_CHECK(cudaGetDevice(&dev));
    LAB_CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
    m_buf = DeviceBuffer(2 * size_t(l2 > (1 << 20) ? l2 : (1 << 20)));
    LAB_CUDA_CHECK(cudaMemsetAsync(m_buf.data(), 0, m_buf.size(), stream));  // once
  }
  enqueue_read_flush(stream, m_buf.data(), m_buf.size());
}

}  // namespace lab
