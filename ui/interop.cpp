#include "interop.h"

#include <chrono>
#include <cstdlib>

// epoxy first: it provides the GL declarations cuda_gl_interop.h expects.
#include <epoxy/gl.h>
// clang-format off
#include <cuda_gl_interop.h>
// clang-format on

namespace lab::ui {

GlInterop::~GlInterop() {
  reset();
}

void GlInterop::reset() {
  if (m_tex_res) cudaGraphicsUnregisterResource(m_tex_res);
  if (m_buf_res) cudaGraphicsUnregisterResource(m_buf_res);
  if (m_stream) cudaStreamDestroy(m_stream);
  m_tex_res = m_buf_res = nullptr;
  m_stream = nullptr;
  m_available = false;
}

void GlInterop::init(bool cuda_backend, bool switched_off) {
  if (!cuda_backend) {
    m_why = "CPU mode: no CUDA device";
    return;
  }
  if (switched_off) {  // frames reach OpenGL through the host instead
    m_why = "switched off (LAB_NO_INTEROP)";
    return;
  }
  unsigned count = 0;
  int devices[4];
  const cudaError_t e = cudaGLGetDevices(&count, devices, 4, cudaGLDeviceListAll);
  if (e != cudaSuccess || count == 0) {
    cudaGetLastError();
    const char* vendor = reinterpret_cast<const char*>(glGetString(GL_VENDOR));
    m_why = std::string("the OpenGL context (") + (vendor ? vendor : "?") +
            ") is not on the CUDA device";
    return;
  }
  if (cudaStreamCreateWithFlags(&m_stream, cudaStreamNonBlocking) != cudaSuccess) {
    cudaGetLastError();
    m_why = "no CUDA stream";
    return;
  }
  m_available = true;
  m_why.clear();
}

bool GlInterop::fail(const std::string& what, int code) {
  cudaGetLastError();
  m_available = false;
  m_why = what + ": " + cudaGetErrorString(cudaError_t(code));
  return false;
}

bool GlInterop::register_texture(unsigned tex, const ImageDesc& d) {
  if (m_tex_res && tex == m_tex && d.width == m_tex_w && d.height == m_tex_h) return true;
  if (m_tex_res) cudaGraphicsUnregisterResource(m_tex_res), m_tex_res = nullptr;
  const cudaError_t e = cudaGraphicsGLRegisterImage(&m_tex_res, tex, GL_TEXTURE_2D,
                                                    cudaGraphicsRegisterFlagsWriteDiscard);
  if (e != cudaSuccess) return fail("registering the viewport texture", e);
  m_tex = tex, m_tex_w = d.width, m_tex_h = d.height;
  return true;
}

bool GlInterop::register_buffer(unsigned vbo, size_t bytes) {
  if (m_buf_res && vbo == m_buf && bytes <= m_buf_bytes) return true;
  if (m_buf_res) cudaGraphicsUnregisterResource(m_buf_res), m_buf_res = nullptr;
  const cudaError_t e =
      cudaGraphicsGLRegisterBuffer(&m_buf_res, vbo, cudaGraphicsRegisterFlagsWriteDiscard);
  if (e != cudaSuccess) return fail("registering the keypoint buffer", e);
  m_buf = vbo, m_buf_bytes = bytes;
  return true;
}

bool GlInterop::write(unsigned tex, const ImageRef& src, unsigned vbo, const void* buf_src,
                      size_t bytes) {
  if (!m_available) return false;
  if (!register_texture(tex, src.desc)) return false;
  if (vbo && !register_buffer(vbo, bytes)) return false;
  cudaGraphicsResource* res[2] = {m_tex_res, m_buf_res};
  const int n = vbo ? 2 : 1;
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  cudaError_t e = cudaGraphicsMapResources(n, res, m_stream);
  m_map_ms = std::chrono::duration<double, std::milli>(clock::now() - t0).count();
  if (e != cudaSuccess) return fail("mapping the viewport texture and keypoint buffer", e);
  cudaArray_t array = nullptr;
  e = cudaGraphicsSubResourceGetMappedArray(&array, m_tex_res, 0, 0);
  if (e == cudaSuccess)
    e = cudaMemcpy2DToArrayAsync(array, 0, 0, src.data, src.pitch, src.desc.row_bytes(),
                                 size_t(src.desc.height), cudaMemcpyDeviceToDevice, m_stream);
  if (e == cudaSuccess && vbo) {
    void* dst = nullptr;
    size_t size = 0;
    e = cudaGraphicsResourceGetMappedPointer(&dst, &size, m_buf_res);
    if (e == cudaSuccess && size < bytes) e = cudaErrorInvalidValue;
    if (e == cudaSuccess)
      e = cudaMemcpyAsync(dst, buf_src, bytes, cudaMemcpyDeviceToDevice, m_stream);
  }
  const auto t1 = clock::now();
  const cudaError_t u = cudaGraphicsUnmapResources(n, res, m_stream);
  if (e != cudaSuccess) return fail("copying into the viewport texture or keypoint buffer", e);
  if (u != cudaSuccess) return fail("unmapping", u);
  if ((e = cudaStreamSynchronize(m_stream)) != cudaSuccess) return fail("interop copy", e);
  m_unmap_ms = std::chrono::duration<double, std::milli>(clock::now() - t1).count();
  return true;
}

}  // namespace lab::ui
