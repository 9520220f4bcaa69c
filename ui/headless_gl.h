// A headless OpenGL 3.3 core context (EGL, no window) rendering into an offscreen framebuffer:
// how the GUI runs, and is tested, without a display, on Mesa and on the NVIDIA driver alike.
#pragma once

#include <epoxy/egl.h>
#include <epoxy/gl.h>

#include <string>

namespace lab::ui {

// A GL 3.3 core context with no window: the NVIDIA driver's EGL device platform when there is
// one, else Mesa's surfaceless platform, else the default display. Throws Error(Unavailable).
struct HeadlessGl {
  EGLDisplay display = EGL_NO_DISPLAY;
  EGLContext context = EGL_NO_CONTEXT;
  GLuint fbo = 0, color = 0;
  int w = 0, h = 0;

  HeadlessGl(int width, int height);
  ~HeadlessGl();
  HeadlessGl(const HeadlessGl&) = delete;
  HeadlessGl& operator=(const HeadlessGl&) = delete;
};

// Words for a reset of the current OpenGL context by the driver ("the driver reset this OpenGL
// context (a fault elsewhere on the GPU)"), or "" when it was not reset or cannot say (a context
// made without reset notification never reports one).
std::string gl_reset_words();

// Reads the bound framebuffer (bottom-up in GL) and writes it top-down as PNG; throws
// Error(CantCreate).
void write_screenshot(const std::string& path, int w, int h);
// The same for the rectangle [x0, x1) x [y0, y1) of a w x h framebuffer, in top-down pixel
// coordinates (ImGui's), clamped to the framebuffer.
void write_screenshot_region(const std::string& path, int w, int h, int x0, int y0, int x1, int y1);

}  // namespace lab::ui
