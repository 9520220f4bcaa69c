// Does an H2D DMA slow L2-resident memory-bound kernels? 20 launches of a 4 MB copy, alone and
// under a 6.2 MB pinned H2D copy.
#include <cuda_runtime.h>
#include <cstdio>
__global__ void copyk(const float4* a, float4* b, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    b[i] = a[i];
}
int main() {
  const size_t w = 5760, h = 1080, n = (4u << 20) / 16;
  void* host;
  cudaHostAlloc(&host, w * h, 0);
  void* dev;
  size_t pitch;
  cudaMallocPitch(&dev, &pitch, w + 16, h);
  float4 *a, *b;
  cudaMalloc(&a, n * 16);
  cudaMalloc(&b, n * 16);
  cudaStream_t s, c;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  cudaStreamCreateWithFlags(&c, cudaStreamNonBlocking);
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  for (int withdma = 0; withdma < 2; ++withdma) {
    float tot = 0;
    for (int k = 0; k < 60; ++k) {
      if (withdma) cudaMemcpy2DAsync(dev, pitch, host, w, w, h, cudaMemcpyHostToDevice, c);
      cudaEventRecord(e0, s);
      for (int j = 0; j < 20; ++j) copyk<<<264, 256, 0, s>>>(a, b, int(n));
      cudaEventRecord(e1, s);
      cudaStreamSynchronize(s);
      cudaStreamSynchronize(c);
      float ms;
      cudaEventElapsedTime(&ms, e0, e1);
      if (k >= 10) tot += ms;
    }
    std::printf("20 x 4 MB L2 copy kernels %s: %.1f us\n",
                withdma ? "under a 6.2 MB H2D DMA" : "alone", tot / 50 * 1000);
  }
}
