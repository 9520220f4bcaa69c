// Image types shared by host and device code.
//
// ImageView is a non-owning, pitched view usable in kernels and in CPU references alike, so a
// reference and a kernel index pixels the same way. HostImage owns packed host rows;
// DeviceImage owns a pitched device allocation (cudaMallocPitch aligns every row, so a warp
// reading 32 neighbours of any row is one coalesced transaction).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "image_view.h"

namespace lab {

enum class PixelType : uint8_t { U8, F32, U32 };  // U32: integer playgrounds (scan, sort)

inline size_t pixel_type_bytes(PixelType t) {
  return t == PixelType::U8 ? 1 : 4;
}
const char* pixel_type_name(PixelType t);

struct ImageDesc {
  int width = 0;
  int height = 0;
  int channels = 1;
  PixelType type = PixelType::F32;

  size_t row_bytes() const { return size_t(width) * channels * pixel_type_bytes(type); }
  size_t bytes() const { return row_bytes() * size_t(height); }
  size_t pixels() const { return size_t(width) * size_t(height); }
  bool empty() const { return width <= 0 || height <= 0; }
  bool operator==(const ImageDesc& o) const {
    return width == o.width && height == o.height && channels == o.channels && type == o.type;
  }
  bool operator!=(const ImageDesc& o) const { return !(*this == o); }
  std::string str() const;  // "1280x736x1 f32"
};

// A type-erased reference to an image in host or device memory.
struct ImageRef {
  ImageDesc desc;
  void* data = nullptr;
  size_t pitch = 0;

  template <typename T>
  ImageView<T> view() const {
    return {static_cast<T*>(data), desc.width, desc.height, desc.channels, pitch};
  }
};

// One channel value of a host image as a double, whatever its pixel type.
inline double pixel_value(const ImageRef& img, int x, int y, int c = 0) {
  switch (img.desc.type) {
    case PixelType::U8:
      return img.view<const uint8_t>().at(x, y, c);
    case PixelType::U32:
      return img.view<const uint32_t>().at(x, y, c);
    case PixelType::F32:
      break;
  }
  return img.view<const float>().at(x, y, c);
}

class HostImage {
 public:
  HostImage() = default;
  explicit HostImage(const ImageDesc& desc) : m_desc(desc), m_storage(desc.bytes()) {}
  // An input frame: in page-locked memory from a recycled pool when frame_memory_pinned() (a
  // DMA can then read it directly, with no staging copy; mapped, the kernels read it in place),
  // else as HostImage(desc). A page-locked frame's rows are padded as DeviceImage's are (16
  // spare bytes, 16-byte aligned): read its rows through pitch().
  static HostImage frame(const ImageDesc& desc);
  // Copies are plain (pageable) memory, rows back to back; moves keep the storage.
  HostImage(const HostImage& o);
  HostImage& operator=(const HostImage& o);
  HostImage(HostImage&&) noexcept = default;
  HostImage& operator=(HostImage&&) noexcept = default;

  const ImageDesc& desc() const { return m_desc; }
  size_t pitch() const { return m_pitch ? m_pitch : m_desc.row_bytes(); }
  uint8_t* bytes() { return m_pinned ? m_pinned.get() : m_storage.data(); }
  const uint8_t* bytes() const { return m_pinned ? m_pinned.get() : m_storage.data(); }
  bool pinned() const { return bool(m_pinned); }
  // Keeps page-locked storage alive while an asynchronous copy reads it.
  std::shared_ptr<const uint8_t> storage_handle() const { return m_pinned; }
  ImageRef ref() { return {m_desc, bytes(), pitch()}; }
  ImageRef ref() const { return {m_desc, const_cast<uint8_t*>(bytes()), pitch()}; }
  template <typename T>
  ImageView<T> view() {
    return ref().view<T>();
  }
  template <typename T>
  ImageView<const T> view() const {
    return ref().view<const T>();
  }

 private:
  ImageDesc m_desc;
  std::vector<uint8_t> m_storage;
  std::shared_ptr<uint8_t> m_pinned;  // page-locked storage from the pool, when a pinned frame
  size_t m_pitch = 0;                 // its padded rows; 0: row_bytes()
};

// Whether HostImage::frame() allocates page-locked memory: set when frames go to the GPU by
// pinned upload (a process-wide memory policy, like an allocator's). Off without a GPU.
void set_frame_memory_pinned(bool on);
bool frame_memory_pinned();

// Where page-locked frames come from: cudaHostAlloc and cudaFreeHost. Tests replace it (the CPU
// machines have no GPU to pin memory with) to see which frames are page-locked and how many
// blocks are made. `alloc` returns null when it cannot.
struct PinnedAllocator {
  void* (*alloc)(size_t bytes) = nullptr;
  void (*free)(void* p) = nullptr;
};
// Replaces the allocator ({} restores CUDA's); the pool's free blocks go back to the old one.
void set_pinned_allocator(const PinnedAllocator& a);

// Owns a pitched device allocation. Move-only; frees on destruction.
class DeviceImage {
 public:
  DeviceImage() = default;
  explicit DeviceImage(const ImageDesc& desc);
  ~DeviceImage();
  DeviceImage(DeviceImage&& o) noexcept;
  DeviceImage& operator=(DeviceImage&& o) noexcept;
  DeviceImage(const DeviceImage&) = delete;
  DeviceImage& operator=(const DeviceImage&) = delete;

  const ImageDesc& desc() const { return m_desc; }
  size_t pitch() const { return m_pitch; }
  void* data() const { return m_data; }
  ImageRef ref() const { return {m_desc, m_data, m_pitch}; }

 private:
  ImageDesc m_desc;
  void* m_data = nullptr;
  size_t m_pitch = 0;
};

// Owns a linear device allocation. Move-only.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  size_t size() const { return m_bytes; }
  void* data() const { return m_data; }

 private:
  void* m_data = nullptr;
  size_t m_bytes = 0;
};

// Synchronous copies between a host image and a device image of the same desc.
void upload(const HostImage& src, const DeviceImage& dst, void* stream = nullptr);
HostImage download(const ImageRef& src, void* stream = nullptr);
// Fill every byte (row padding excluded) with `value`: 0xFF makes every float a NaN, so a
// pixel that a kernel forgets to write fails the diff.
void poison(const ImageRef& img, bool device, void* stream = nullptr, int value = 0xFF);

}  // namespace lab
