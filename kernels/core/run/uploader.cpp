#include "uploader.h"

#include <chrono>
#include <cstring>

#include "check.h"
#include "device.h"

namespace lab {

namespace {
constexpr const char* kModeNames[] = {"pageable", "pinned", "mapped"};  // UploadMode's order
}

const char* upload_mode_name(UploadMode m) {
  return kModeNames[int(m)];
}

std::optional<UploadMode> parse_upload_mode(const std::string& s) {
  for (int m = 0; m < 3; ++m)
    if (s == kModeNames[m]) return UploadMode(m);
  return std::nullopt;
}

UploadMode default_upload_mode() {
  const DeviceInfo& d = device_info();
  if (!d.present) return UploadMode::Pageable;
  return d.integrated ? UploadMode::Mapped : UploadMode::Pinned;
}

namespace {
double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

Uploader::Uploader(cudaStream_t compute) : m_compute(compute), m_mode(default_upload_mode()) {
  LAB_CUDA_CHECK(cudaStreamCreateWithFlags(&m_copy, cudaStreamNonBlocking));
  for (Copy& c : m_copies)
    for (cudaEvent_t& e : c.ev) LAB_CUDA_CHECK(cudaEventCreate(&e));
}

Uploader::~Uploader() {
  if (m_copy) cudaStreamSynchronize(m_copy);
  free_staging();
  for (Copy& c : m_copies)
    for (cudaEvent_t e : c.ev)
      if (e) cudaEventDestroy(e);
  if (m_copy) cudaStreamDestroy(m_copy);
}

void Uploader::set_mode(UploadMode m) {
  if (m == m_mode) return;
  finish_all();
  free_staging();
  m_in_place.reset();  // no kernel reads it any more
  m_mode = m;
}

void Uploader::finish(Copy& c) {
  LAB_CUDA_CHECK(cudaEventSynchronize(c.ev[1]));
  float ms = 0;
  LAB_CUDA_CHECK(cudaEventElapsedTime(&ms, c.ev[0], c.ev[1]));
  m_upload_ms = ms;
  c.frame.reset();
  c.pending = false;
}

void Uploader::finish_all() {
  LAB_CUDA_CHECK(cudaStreamSynchronize(m_compute));
  wait_copies();
}

void Uploader::release() {
  wait_copies();
  free_staging();
}

void Uploader::wait_copies() {
  LAB_CUDA_CHECK(cudaStreamSynchronize(m_copy));
  for (int i : {m_next, m_next ^ 1})  // the older first
    if (m_copies[i].pending) finish(m_copies[i]);
}

void Uploader::free_staging() {
  if (m_pinned.host) cudaFreeHost(m_pinned.host);
  m_pinned = PinnedBuffer{};
}

// The frame into page-locked memory: contiguous rows for a copy, rows padded (16 zeroed spare
// bytes, as DeviceImage's) when the kernels read it in place.
void Uploader::stage(const HostImage& img, bool mapped) {
  const ImageDesc& d = img.desc();
  const size_t pitch = mapped ? (d.row_bytes() + 16 + 255) / 256 * 256 : d.row_bytes();
  const size_t bytes = pitch * size_t(d.height);
  if (m_pinned.host && (m_pinned.mapped != mapped || m_pinned.bytes != bytes)) {
    finish_all();
    free_staging();
  }
  if (!m_pinned.host) {
    LAB_CUDA_CHECK(
        cudaHostAlloc(&m_pinned.host, bytes, mapped ? cudaHostAllocMapped : cudaHostAllocDefault));
    std::memset(m_pinned.host, 0, bytes);
    if (mapped) LAB_CUDA_CHECK(cudaHostGetDevicePointer(&m_pinned.dev, m_pinned.host, 0));
    m_pinned.pitch = pitch, m_pinned.bytes = bytes, m_pinned.mapped = mapped;
  }
  const auto t0 = std::chrono::steady_clock::now();
  for (int y = 0; y < d.height; ++y)
    std::memcpy(static_cast<char*>(m_pinned.host) + size_t(y) * pitch,
                img.bytes() + size_t(y) * img.pitch(), d.row_bytes());
  m_staging_ms = ms_since(t0);
}

void Uploader::send(const HostImage& img, DeviceImage& dst, bool order) {
  const ImageDesc& d = img.desc();
  Copy& c = m_copies[m_next];
  if (m_mode == UploadMode::Pageable) {
    LAB_CUDA_CHECK(cudaEventRecord(c.ev[0], m_compute));
    LAB_CUDA_CHECK(cudaMemcpy2DAsync(dst.data(), dst.pitch(), img.bytes(), img.pitch(),
                                     d.row_bytes(), size_t(d.height), cudaMemcpyHostToDevice,
                                     m_compute));
    LAB_CUDA_CHECK(cudaEventRecord(c.ev[1], m_compute));
    finish(c);
    m_staging_ms = 0;
    return;
  }
  // Two sends ago: done in a steady run (the compute stream waited for it and was synchronised
  // since); its events are reused.
  if (c.pending) finish(c);
  const void* src = img.bytes();
  size_t src_pitch = img.pitch();
  if (img.pinned()) {  // captured into page-locked memory: the DMA reads it where it is
    c.frame = img.storage_handle();
    m_staging_ms = 0;
  } else {
    // One staging buffer: the copies out of it must be done before it is rewritten.
    LAB_CUDA_CHECK(cudaStreamSynchronize(m_copy));
    stage(img, false);
    src = m_pinned.host, src_pitch = m_pinned.pitch;
  }
  LAB_CUDA_CHECK(cudaEventRecord(c.ev[0], m_copy));
  LAB_CUDA_CHECK(cudaMemcpy2DAsync(dst.data(), dst.pitch(), src, src_pitch, d.row_bytes(),
                                   size_t(d.height), cudaMemcpyHostToDevice, m_copy));
  LAB_CUDA_CHECK(cudaEventRecord(c.ev[1], m_copy));
  c.pending = true, c.ordered = false;
  m_next ^= 1;
  if (order) order_compute();
}

void Uploader::order_compute() {
  for (Copy& c : m_copies)
    if (c.pending && !c.ordered) {
      LAB_CUDA_CHECK(cudaStreamWaitEvent(m_compute, c.ev[1], 0));
      c.ordered = true;
    }
}

ImageRef Uploader::map(const HostImage& img, bool in_place) {
  if (in_place && img.pinned() && img.pitch() >= img.desc().row_bytes() + 16 &&
      img.pitch() % 16 == 0) {
    void* dev = nullptr;
    if (cudaHostGetDevicePointer(&dev, const_cast<uint8_t*>(img.bytes()), 0) == cudaSuccess) {
      m_in_place = img.storage_handle();  // alive until the next frame takes its place
      m_upload_ms = 0, m_staging_ms = 0;
      return ImageRef{img.desc(), dev, img.pitch()};
    }
    cudaGetLastError();  // not mapped (another allocator's block): copied below
  }
  m_in_place.reset();
  const auto t0 = std::chrono::steady_clock::now();
  stage(img, true);
  m_upload_ms = ms_since(t0);
  return ImageRef{img.desc(), m_pinned.dev, m_pinned.pitch};
}

void Uploader::collect() {
  for (int i : {m_next, m_next ^ 1})  // the older first: upload_ms ends on the newer
    if (m_copies[i].pending && m_copies[i].ordered) finish(m_copies[i]);
}

}  // namespace lab
