// Host cost of enqueueing a pitched H2D copy vs a 1D one, and overlap with a kernel.
#include <cuda_runtime.h>
#include <chrono>
#include <cstdio>
__global__ void spin(long long ns) {
  long long t0 = clock64();
  while (clock64() - t0 < ns) {
  }
}
int main() {
  const size_t w = 5760, h = 1080;
  void* host;
  cudaHostAlloc(&host, w * h, 0);
  void* dev;
  size_t pitch;
  cudaMallocPitch(&dev, &pitch, w + 16, h);
  void* flat;
  cudaMalloc(&flat, w * h);
  cudaStream_t s, c;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  cudaStreamCreateWithFlags(&c, cudaStreamNonBlocking);
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  for (int mode = 0; mode < 3; ++mode) {
    double enq = 0, wall = 0;
    float dma = 0;
    for (int k = 0; k < 50; ++k) {
      auto t0 = std::chrono::steady_clock::now();
      cudaEventRecord(a, c);
      if (mode == 0)
        cudaMemcpy2DAsync(dev, pitch, host, w, w, h, cudaMemcpyHostToDevice, c);
      else if (mode == 1)
        cudaMemcpyAsync(flat, host, w * h, cudaMemcpyHostToDevice, c);
      else {
        cudaMemcpyAsync(flat, host, w * h, cudaMemcpyHostToDevice, c);
        cudaMemcpy2DAsync(dev, pitch, flat, w, w, h, cudaMemcpyDeviceToDevice, c);
      }
      cudaEventRecord(b, c);
      auto t1 = std::chrono::steady_clock::now();
      spin<<<132, 32, 0, s>>>(150000);  // ~100 us at 1.5 GHz
      cudaStreamSynchronize(s);
      cudaStreamSynchronize(c);
      auto t2 = std::chrono::steady_clock::now();
      float ms;
      cudaEventElapsedTime(&ms, a, b);
      if (k >= 10) {
        enq += std::chrono::duration<double, std::micro>(t1 - t0).count();
        wall += std::chrono::duration<double, std::micro>(t2 - t0).count();
        dma += ms * 1000;
      }
    }
    std::printf("mode %d (%s): enqueue %.1f us, copy %.1f us, copy+spin wall %.1f us\n", mode,
                mode == 0   ? "2D H2D pitched"
                : mode == 1 ? "1D H2D"
                            : "1D H2D + 2D D2D",
                enq / 40, dma / 40, wall / 40);
  }
  float ms;
  cudaEventRecord(a, s);
  spin<<<132, 32, 0, s>>>(150000);
  cudaEventRecord(b, s);
  cudaEventSynchronize(b);
  cudaEventElapsedTime(&ms, a, b);
  std::printf("spin alone %.1f us; error: %s\n", ms * 1000, cudaGetErrorString(cudaGetLastError()));
}
