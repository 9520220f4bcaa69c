#include "image.h"

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>
#include <utility>

#include "check.h"
#include "device.h"

namespace lab {

const char* pixel_type_name(PixelType t) {
  return t == PixelType::U8 ? "u8" : t == PixelType::F32 ? "f32" : "u32";
}

std::string ImageDesc::str() const {
  return std::to_string(width) + "x" + std::to_string(height) + "x" + std::to_string(channels) +
         " " + pixel_type_name(type);
}

namespace {

// Page-locked blocks by size, recycled: cudaHostAlloc costs milliseconds, a camera delivers a
// frame every few. Never destroyed, so frames freed during exit still find it.
void* cuda_pinned_alloc(size_t bytes) {
  void* p = nullptr;
  // Mapped too: with --upload mapped (an integrated GPU) the kernels read a frame in place.
  if (cudaHostAlloc(&p, bytes, cudaHostAllocPortable | cudaHostAllocMapped) == cudaSuccess)
    return p;
  cudaGetLastError();
  return nullptr;  // no GPU or no page-locked memory left: the caller uses pageable memory
}
void cuda_pinned_free(void* p) {
  cudaFreeHost(p);
}

struct PinnedPool {
  std::mutex mu;
  std::map<size_t, std::vector<void*>> free;
  uint64_t generation = 0;  // bumped by a device reset, which frees every block with its context
  PinnedAllocator allocator{cuda_pinned_alloc, cuda_pinned_free};
  uint64_t allocator_generation = 0;  // bumped when the allocator is replaced
};
PinnedPool& pinned_pool();

// A device reset frees page-locked memory with the context: the pool forgets its blocks, and
// blocks of the old context that come back later are neither pooled nor freed again.
void forget_pinned_blocks() {
  PinnedPool& pool = pinned_pool();
  std::lock_guard<std::mutex> lock(pool.mu);
  pool.free.clear();
  ++pool.generation;
}

PinnedPool& pinned_pool() {
  static PinnedPool* pool = [] {
    on_device_reset(forget_pinned_blocks);
    return new PinnedPool;
  }();
  return *pool;
}

std::shared_ptr<uint8_t> pinned_block(size_t bytes) {
  PinnedPool& pool = pinned_pool();
  void* p = nullptr;
  uint64_t generation = 0, allocator_generation = 0;
  PinnedAllocator allocator;
  {
    std::lock_guard<std::mutex> lock(pool.mu);
    auto& list = pool.free[bytes];
    if (!list.empty()) p = list.back(), list.pop_back();
    generation = pool.generation;
    allocator = pool.allocator, allocator_generation = pool.allocator_generation;
  }
  if (!p) p = allocator.alloc(bytes);
  if (!p) return nullptr;
  return std::shared_ptr<uint8_t>(
      static_cast<uint8_t*>(p), [bytes, generation, allocator, allocator_generation](uint8_t* q) {
        PinnedPool& pool = pinned_pool();
        std::lock_guard<std::mutex> lock(pool.mu);
        if (generation != pool.generation) return;  // freed with its context
        auto& list = pool.free[bytes];
        if (allocator_generation == pool.allocator_generation && list.size() < 8)
          list.push_back(q);
        else
          allocator.free(q);
      });
}

std::atomic<bool> g_frames_pinned{false};

}  // namespace

void set_pinned_allocator(const PinnedAllocator& a) {
  PinnedPool& pool = pinned_pool();
  std::lock_guard<std::mutex> lock(pool.mu);
  for (auto& [bytes, list] : pool.free)
    for (void* p : list) pool.allocator.free(p);
  pool.free.clear();
  pool.allocator = a.alloc ? a : PinnedAllocator{cuda_pinned_alloc, cuda_pinned_free};
  ++pool.allocator_generation;
}

void set_frame_memory_pinned(bool on) {
  g_frames_pinned = on;
}
bool frame_memory_pinned() {
  return g_frames_pinned;
}

HostImage HostImage::frame(const ImageDesc& desc) {
  if (g_frames_pinned && !desc.empty()) {
    HostImage img;
    // Padded rows: kernels reading a mapped frame in place load whole aligned words that may
    // reach past a row's last pixel (DeviceImage's rows allow the same).
    const size_t pitch = (desc.row_bytes() + 16 + 15) / 16 * 16;
    img.m_pinned = pinned_block(pitch * size_t(desc.height));
    if (img.m_pinned) {
      img.m_desc = desc, img.m_pitch = pitch;
      for (int y = 0; y < desc.height; ++y)  // the padding, defined (the pixels are written)
        std::memset(img.m_pinned.get() + size_t(y) * pitch + desc.row_bytes(), 0,
                    pitch - desc.row_bytes());
      return img;
    }
  }
  return HostImage(desc);
}

HostImage::HostImage(const HostImage& o) : m_desc(o.m_desc), m_storage(o.m_desc.bytes()) {
  const size_t row = m_desc.row_bytes();
  for (int y = 0; y < m_desc.height; ++y)
    std::memcpy(m_storage.data() + size_t(y) * row, o.bytes() + size_t(y) * o.pitch(), row);
}

HostImage& HostImage::operator=(const HostImage& o) {
  if (this != &o) {
    HostImage copy(o);
    *this = std::move(copy);
  }
  return *this;
}

DeviceImage::DeviceImage(const ImageDesc& desc) : m_desc(desc) {
  if (desc.empty()) return;
  // 16 spare bytes per row, zeroed once: kernels may load whole aligned words that reach past
  // the last pixel (letterbox v4_words) without leaving the allocation or reading garbage.
  LAB_CUDA_CHECK(cudaMallocPitch(&m_data, &m_pitch, desc.row_bytes() + 16, size_t(desc.height)));
  LAB_CUDA_CHECK(cudaMemset(m_data, 0, m_pitch * size_t(desc.height)));
}

DeviceImage::~DeviceImage() {
  if (m_data) cudaFree(m_data);
}

DeviceImage::DeviceImage(DeviceImage&& o) noexcept
    : m_desc(o.m_desc), m_data(std::exchange(o.m_data, nullptr)), m_pitch(o.m_pitch) {}

DeviceImage& DeviceImage::operator=(DeviceImage&& o) noexcept {
  if (this != &o) {
    if (m_data) cudaFree(m_data);
    m_desc = o.m_desc;
    m_data = std::exchange(o.m_data, nullptr);
    m_pitch = o.m_pitch;
  }
  return *this;
}

DeviceBuffer::DeviceBuffer(size_t bytes) : m_bytes(bytes) {
  if (bytes) LAB_CUDA_CHECK(cudaMalloc(&m_data, bytes));
}

DeviceBuffer::~DeviceBuffer() {
  if (m_data) cudaFree(m_data);
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept
    : m_data(std::exchange(o.m_data, nullptr)), m_bytes(std::exchange(o.m_bytes, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (m_data) cudaFree(m_data);
    m_data = std::exchange(o.m_data, nullptr);
    m_bytes = std::exchange(o.m_bytes, 0);
  }
  return *this;
}

void upload(const HostImage& src, const DeviceImage& dst, void* stream) {
  if (src.desc() != dst.desc())
    throw Error(ErrorKind::Internal, "upload: " + src.desc().str() + " into " + dst.desc().str());
  if (src.desc().empty()) return;
  auto s = static_cast<cudaStream_t>(stream);
  LAB_CUDA_CHECK(cudaMemcpy2DAsync(dst.data(), dst.pitch(), src.bytes(), src.pitch(),
                                   src.desc().row_bytes(), size_t(src.desc().height),
                                   cudaMemcpyHostToDevice, s));
  LAB_CUDA_CHECK(cudaStreamSynchronize(s));
}

HostImage download(const ImageRef& src, void* stream) {
  HostImage out(src.desc);
  if (src.desc.empty()) return out;
  auto s = static_cast<cudaStream_t>(stream);
  LAB_CUDA_CHECK(cudaMemcpy2DAsync(out.bytes(), out.pitch(), src.data, src.pitch,
                                   src.desc.row_bytes(), size_t(src.desc.height),
                                   cudaMemcpyDeviceToHost, s));
  LAB_CUDA_CHECK(cudaStreamSynchronize(s));
  return out;
}

void poison(const ImageRef& img, bool device, void* stream, int value) {
  if (img.desc.empty()) return;
  if (device) {
    LAB_CUDA_CHECK(cudaMemset2DAsync(img.data, img.pitch, value, img.desc.row_bytes(),
                                     size_t(img.desc.height), static_cast<cudaStream_t>(stream)));
    return;
  }
  for (int y = 0; y < img.desc.height; ++y)
    std::memset(static_cast<char*>(img.data) + size_t(y) * img.pitch, value, img.desc.row_bytes());
}

}  // namespace lab
