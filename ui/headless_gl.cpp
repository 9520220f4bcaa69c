#include "headless_gl.h"

#include <stb/stb_image_write.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "check.h"
#include "output_file.h"

namespace lab::ui {

HeadlessGl::HeadlessGl(int width, int height) : w(width), h(height) {
  if (epoxy_has_egl_extension(EGL_NO_DISPLAY, "EGL_EXT_platform_device") &&
      epoxy_has_egl_extension(EGL_NO_DISPLAY, "EGL_EXT_device_enumeration")) {
    EGLDeviceEXT devices[8];
    EGLint n = 0;
    if (eglQueryDevicesEXT(8, devices, &n) && n > 0)
      display = eglGetPlatformDisplayEXT(EGL_PLATFORM_DEVICE_EXT, devices[0], nullptr);
  }
  if (display == EGL_NO_DISPLAY &&
      epoxy_has_egl_extension(EGL_NO_DISPLAY, "EGL_MESA_platform_surfaceless"))
    display = eglGetPlatformDisplayEXT(EGL_PLATFORM_SURFACELESS_MESA, EGL_DEFAULT_DISPLAY, nullptr);
  if (display == EGL_NO_DISPLAY) display = eglGetDisplay(EGL_DEFAULT_DISPLAY);
  EGLint major = 0, minor = 0;
  if (display == EGL_NO_DISPLAY || !eglInitialize(display, &major, &minor))
    throw Error(ErrorKind::Unavailable,
                "headless: no EGL display (install libegl-mesa0, or "
                "the NVIDIA driver's EGL)");
  eglBindAPI(EGL_OPENGL_API);
  // A context that is told when the driver resets it (gl_reset_words), where EGL offers that;
  // else an ordinary one.
  EGLint ctx_attr[] = {EGL_CONTEXT_MAJOR_VERSION,
                       3,
                       EGL_CONTEXT_MINOR_VERSION,
                       3,
                       EGL_CONTEXT_OPENGL_PROFILE_MASK,
                       EGL_CONTEXT_OPENGL_CORE_PROFILE_BIT,
                       EGL_CONTEXT_OPENGL_RESET_NOTIFICATION_STRATEGY_EXT,
                       EGL_LOSE_CONTEXT_ON_RESET_EXT,
                       EGL_NONE};
  if (epoxy_has_egl_extension(display, "EGL_EXT_create_context_robustness"))
    context = eglCreateContext(display, EGL_NO_CONFIG_KHR, EGL_NO_CONTEXT, ctx_attr);
  if (context == EGL_NO_CONTEXT) {
    ctx_attr[6] = EGL_NONE;
    context = eglCreateContext(display, EGL_NO_CONFIG_KHR, EGL_NO_CONTEXT, ctx_attr);
  }
  if (context == EGL_NO_CONTEXT ||
      !eglMakeCurrent(display, EGL_NO_SURFACE, EGL_NO_SURFACE, context))
    throw Error(ErrorKind::Unavailable, "headless: cannot create an OpenGL 3.3 context on EGL");
  glGenFramebuffers(1, &fbo);
  glBindFramebuffer(GL_FRAMEBUFFER, fbo);
  glGenTextures(1, &color);
  glBindTexture(GL_TEXTURE_2D, color);
  glTexImage2D(GL_TEXTURE_2D, 0, GL_RGBA8, w, h, 0, GL_RGBA, GL_UNSIGNED_BYTE, nullptr);
  glFramebufferTexture2D(GL_FRAMEBUFFER, GL_COLOR_ATTACHMENT0, GL_TEXTURE_2D, color, 0);
  if (glCheckFramebufferStatus(GL_FRAMEBUFFER) != GL_FRAMEBUFFER_COMPLETE)
    throw Error(ErrorKind::Unavailable, "headless: the offscreen framebuffer is incomplete");
}

HeadlessGl::~HeadlessGl() {
  if (fbo) glDeleteFramebuffers(1, &fbo);
  if (color) glDeleteTextures(1, &color);
  if (context != EGL_NO_CONTEXT) eglDestroyContext(display, context);
  if (display != EGL_NO_DISPLAY) eglTerminate(display);
}

void write_screenshot_region(const std::string& path, int w, int h, int x0, int y0, int x1,
                             int y1) {
  x0 = std::clamp(x0, 0, w), x1 = std::clamp(x1, x0, w);
  y0 = std::clamp(y0, 0, h), y1 = std::clamp(y1, y0, h);
  const int rw = x1 - x0, rh = y1 - y0;
  if (rw == 0 || rh == 0) throw Error(ErrorKind::Data, "nothing to write to " + path);
  std::vector<uint8_t> px(size_t(rw) * rh * 4);
  glPixelStorei(GL_PACK_ALIGNMENT, 1);
  while (glGetError() != GL_NO_ERROR) {
  }
  glReadPixels(x0, h - y1, rw, rh, GL_RGBA, GL_UNSIGNED_BYTE, px.data());  // GL is bottom-up
  if (const GLenum e = glGetError(); e != GL_NO_ERROR) {  // never an empty picture in silence
    char code[16];
    std::snprintf(code, sizeof code, "0x%04x", unsigned(e));
    const std::string reset = gl_reset_words();
    throw Error(ErrorKind::Internal, "cannot read the frame for " + path + ": OpenGL error " +
                                         code + (reset.empty() ? "" : " (" + reset + ")"));
  }
  std::vector<uint8_t> flipped(px.size());
  for (int y = 0; y < rh; ++y)
    std::copy(px.begin() + size_t(rh - 1 - y) * rw * 4, px.begin() + size_t(rh - y) * rw * 4,
              flipped.begin() + size_t(y) * rw * 4);
  // Encoded in memory and written by the lab's writer: stb's own file writer ignores its fwrite
  // and fclose errors and reports success on a full disk.
  std::string png;
  auto append = [](void* ctx, void* data, int size) {
    static_cast<std::string*>(ctx)->append(static_cast<const char*>(data), size_t(size));
  };
  if (!stbi_write_png_to_func(append, &png, rw, rh, 4, flipped.data(), rw * 4))
    throw Error(ErrorKind::Internal, "cannot encode the image for " + path);
  write_output_file(path, png);
}

std::string gl_reset_words() {
  if (epoxy_gl_version() < 45 && !epoxy_has_gl_extension("GL_KHR_robustness") &&
      !epoxy_has_gl_extension("GL_ARB_robustness"))
    return "";
  switch (glGetGraphicsResetStatus()) {
    case GL_NO_ERROR:
      return "";
    case GL_GUILTY_CONTEXT_RESET:
      return "the driver reset this OpenGL context (its own fault)";
    case GL_INNOCENT_CONTEXT_RESET:
      return "the driver reset this OpenGL context (a fault elsewhere on the GPU)";
    default:
      return "the driver reset this OpenGL context (the cause unknown)";
  }
}

void write_screenshot(const std::string& path, int w, int h) {
  write_screenshot_region(path, w, h, 0, 0, w, h);
}

}  // namespace lab::ui
