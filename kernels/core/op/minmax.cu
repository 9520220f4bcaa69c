#include "minmax.h"

#include <cfloat>
#include <cmath>
#include <cstring>

#include "check.h"

namespace lab {

namespace {

// Float bits made monotonic as unsigned integers, so that atomicMin/atomicMax order floats.
__device__ unsigned ordered(float f) {
  const unsigned b = __float_as_uint(f);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}
float from_ordered(unsigned o) {
  const unsigned b = (o & 0x80000000u) ? (o & 0x7FFFFFFFu) : ~o;
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

__global__ void min_max_kernel(ImageView<const float> img, int c, unsigned* lohi) {
  unsigned lo = 0xFFFFFFFFu, hi = 0;
  const long long n = (long long)img.width * img.height;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    const float v = img.at(int(i % img.width), int(i / img.width), c);
    if (isfinite(v)) lo = min(lo, ordered(v)), hi = max(hi, ordered(v));
  }
  for (int o = 16; o > 0; o >>= 1) {
    lo = min(lo, __shfl_xor_sync(0xffffffffu, lo, o));
    hi = max(hi, __shfl_xor_sync(0xffffffffu, hi, o));
  }
  if ((threadIdx.x & 31) == 0) atomicMin(&lohi[0], lo), atomicMax(&lohi[1], hi);
}

__global__ void u32_to_f32_kernel(ImageView<const uint32_t> src, ImageView<float> dst) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y;
  if (x < src.width) dst.at(x, y) = float(src.at(x, y));
}

}  // namespace

void device_u32_to_f32(const ImageRef& src, const ImageRef& dst, cudaStream_t stream) {
  if (src.desc.type != PixelType::U32 || dst.desc.type != PixelType::F32 ||
      src.desc.channels != 1 || dst.desc.width != src.desc.width ||
      dst.desc.height != src.desc.height)
    throw Error(ErrorKind::Internal, "u32_to_f32: " + src.desc.str() + " to " + dst.desc.str());
  if (src.desc.empty()) return;
  if (src.desc.height > 65535)
    throw Error(ErrorKind::Usage, "u32_to_f32: more than 65535 rows to display");
  u32_to_f32_kernel<<<dim3(unsigned((src.desc.width + 255) / 256), unsigned(src.desc.height)), 256,
                      0, stream>>>(src.view<const uint32_t>(), dst.view<float>());
  LAB_CUDA_CHECK(cudaGetLastError());
}

ValueRange device_min_max(const ImageRef& img, int c, cudaStream_t stream, unsigned* scratch) {
  unsigned* d = scratch;
  if (!d)
    LAB_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&d), 2 * sizeof(unsigned), stream));
  unsigned h[2] = {0, 0};
  LAB_CUDA_CHECK(cudaMemsetAsync(d, 0xFF, sizeof(unsigned), stream));   // lo: the largest
  LAB_CUDA_CHECK(cudaMemsetAsync(d + 1, 0, sizeof(unsigned), stream));  // hi: the smallest
  min_max_kernel<<<64, 256, 0, stream>>>(img.view<const float>(), c, d);
  LAB_CUDA_CHECK(cudaGetLastError());
  LAB_CUDA_CHECK(cudaMemcpyAsync(h, d, sizeof h, cudaMemcpyDeviceToHost, stream));
  if (!scratch) LAB_CUDA_CHECK(cudaFreeAsync(d, stream));
  LAB_CUDA_CHECK(cudaStreamSynchronize(stream));
  if (h[0] > h[1]) return {0, 1};
  const float lo = from_ordered(h[0]), hi = from_ordered(h[1]);
  return lo == hi ? ValueRange{lo, lo + 1} : ValueRange{lo, hi};
}

}  // namespace lab
