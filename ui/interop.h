// CUDA-GL interop for the viewport: the float texture and the keypoint buffer are registered
// with CUDA once (again when they are re-created), and each frame is map -> device-to-device
// copy -> unmap, with no host round trip. Unavailable when the GL context is not on the CUDA
// device (Mesa, a remote display) or there is no GPU: the viewport then uploads from the host.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "image.h"

struct cudaGraphicsResource;

namespace lab::ui {

class GlInterop {
 public:
  GlInterop() = default;
  ~GlInterop();
  GlInterop(const GlInterop&) = delete;
  GlInterop& operator=(const GlInterop&) = delete;

  // Unregisters everything (before the GL objects are deleted).
  void reset();
  // Probes once, with the GL context current: is it on the CUDA device?
  void init(bool cuda_backend, bool switched_off);
  bool available() const { return m_available; }
  const std::string& why() const { return m_why; }

  // Copies a device float plane into the R32F texture `tex` of the same size and, when `vbo` is
  // non-zero, `bytes` of device memory into that GL buffer: both resources mapped and unmapped
  // together (each map/unmap pair synchronises with GL, so one pair, not two). Returns false
  // (and turns interop off, with the reason) if CUDA refuses them.
  bool write(unsigned tex, const ImageRef& src, unsigned vbo, const void* buf_src, size_t bytes);
  // Host wall time of the last write's map call, and of its unmap with the wait for the copies
  // (each synchronises with GL): costs of showing a frame, not of any kernel.
  double map_ms() const { return m_map_ms; }
  double unmap_ms() const { return m_unmap_ms; }

 private:
  bool fail(const std::string& what, int code);
  bool register_texture(unsigned tex, const ImageDesc& d);
  bool register_buffer(unsigned vbo, size_t bytes);

  bool m_available = false;
  std::string m_why = "not initialised";
  cudaStream_t m_stream = nullptr;
  cudaGraphicsResource* m_tex_res = nullptr;
  unsigned m_tex = 0;
  int m_tex_w = 0, m_tex_h = 0;
  cudaGraphicsResource* m_buf_res = nullptr;
  unsigned m_buf = 0;
  size_t m_buf_bytes = 0;
  double m_map_ms = 0, m_unmap_ms = 0;
};

}  // namespace lab::ui
