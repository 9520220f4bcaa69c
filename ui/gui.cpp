// The GUI shell, top to bottom as Dear ImGui's example_glfw_opengl3: context, loop, cleanup.
// Headless, an EGL context renders the same UI into an offscreen framebuffer.
#include "gui.h"

#include <epoxy/egl.h>
#include <epoxy/gl.h>
// GLFW after epoxy: epoxy provides the GL declarations.
#define GLFW_INCLUDE_NONE
#include <GLFW/glfw3.h>
#include <backends/imgui_impl_glfw.h>
#include <backends/imgui_impl_opengl3.h>
#include <imgui.h>
#include <stb/stb_image_write.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "app_state.h"
#include "presets.h"

namespace lab::ui {

void tip(const char* text) {
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", text);
}

void push_history(std::vector<float>& h, float v) {
  if (h.size() >= kHistory) h.erase(h.begin());
  h.push_back(v);
}

namespace {

// ---- headless EGL -------------------------------------------------------------------------

// A GL 3.3 core context with no window: the NVIDIA driver's EGL device platform when there is
// one, else Mesa's surfaceless platform, else the default display.
struct HeadlessGl {
  EGLDisplay display = EGL_NO_DISPLAY;
  EGLContext context = EGL_NO_CONTEXT;
  GLuint fbo = 0, color = 0;
  int w = 0, h = 0;

  HeadlessGl(int width, int height) : w(width), h(height) {
    if (epoxy_has_egl_extension(EGL_NO_DISPLAY, "EGL_EXT_platform_device")) {
      EGLDeviceEXT devices[8];
      EGLint n = 0;
      if (eglQueryDevicesEXT(8, devices, &n) && n > 0)
        display = eglGetPlatformDisplayEXT(EGL_PLATFORM_DEVICE_EXT, devices[0], nullptr);
    }
    if (display == EGL_NO_DISPLAY &&
        epoxy_has_egl_extension(EGL_NO_DISPLAY, "EGL_MESA_platform_surfaceless"))
      display =
          eglGetPlatformDisplayEXT(EGL_PLATFORM_SURFACELESS_MESA, EGL_DEFAULT_DISPLAY, nullptr);
    if (display == EGL_NO_DISPLAY) display = eglGetDisplay(EGL_DEFAULT_DISPLAY);
    EGLint major = 0, minor = 0;
    if (display == EGL_NO_DISPLAY || !eglInitialize(display, &major, &minor))
      throw Error(ErrorKind::Unavailable,
                  "headless: no EGL display (install libegl-mesa0, or "
                  "the NVIDIA driver's EGL)");
    eglBindAPI(EGL_OPENGL_API);
    const EGLint ctx_attr[] = {EGL_CONTEXT_MAJOR_VERSION,
                               3,
                               EGL_CONTEXT_MINOR_VERSION,
                               3,
                               EGL_CONTEXT_OPENGL_PROFILE_MASK,
                               EGL_CONTEXT_OPENGL_CORE_PROFILE_BIT,
                               EGL_NONE};
    context = eglCreateContext(display, EGL_NO_CONFIG_KHR, EGL_NO_CONTEXT, ctx_attr);
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
  ~HeadlessGl() {
    if (fbo) glDeleteFramebuffers(1, &fbo);
    if (color) glDeleteTextures(1, &color);
    if (context != EGL_NO_CONTEXT) eglDestroyContext(display, context);
    if (display != EGL_NO_DISPLAY) eglTerminate(display);
  }
};

// Reads the bound framebuffer (bottom-up in GL) and writes it top-down as PNG.
void write_screenshot(const std::string& path, int w, int h) {
  std::vector<uint8_t> px(size_t(w) * h * 4);
  glPixelStorei(GL_PACK_ALIGNMENT, 1);
  glReadPixels(0, 0, w, h, GL_RGBA, GL_UNSIGNED_BYTE, px.data());
  std::vector<uint8_t> flipped(px.size());
  for (int y = 0; y < h; ++y)
    std::copy(px.begin() + size_t(h - 1 - y) * w * 4, px.begin() + size_t(h - y) * w * 4,
              flipped.begin() + size_t(y) * w * 4);
  if (!stbi_write_png(path.c_str(), w, h, 4, flipped.data(), w * 4))
    throw Error(ErrorKind::CantCreate, "cannot write the screenshot " + path);
}

// ---- one frame of the engine --------------------------------------------------------------

void apply_pipeline(GuiApp& app, const ImageDesc& input) {
  try {
    app.runner->configure(app.ui.pipeline, input);
    app.ui.launch_us.clear();
    app.ui.diff.clear();
  } catch (const Error& e) {
    app.ui.message = e.what();  // the previous configuration keeps running
  }
}

void engine_frame(GuiApp& app) {
  io::Frame f;
  const bool fresh = app.capture->take_latest(f);
  const auto slots = app.runner->slots();
  const bool configured = !slots.empty();
  if (fresh) {
    if (!configured || f.image.desc() != slots[0].desc || app.ui.pipeline_dirty) {
      apply_pipeline(app, f.image.desc());
      app.ui.pipeline_dirty = false;
    }
    if (app.runner->slots().empty()) return;
    app.runner->set_input(f.image);
  } else if (app.ui.pipeline_dirty && configured) {
    apply_pipeline(app, slots[0].desc);
    app.ui.pipeline_dirty = false;
  }
  if (app.runner->slots().empty() || app.gpu_lost) return;
  try {
    app.runner->run();
  } catch (const CudaError& e) {
    app.ui.message = e.what();
    app.gpu_lost = e.sticky();
    return;
  } catch (const Error& e) {
    app.ui.message = e.what();
    return;
  }
  double total = 0;
  for (const LaunchRecord& r : app.runner->launches()) {
    push_history(app.ui.launch_us[app.runner->stages()[r.stage].op->def.name + "/" + r.kernel],
                 1e3f * r.ms);
  }
  for (double ms : app.runner->stage_ms()) total += ms;
  push_history(app.ui.pipeline_ms, float(total));
  ++app.frames;
  if (app.ui.compare_every > 0 && app.runner->backend() == Backend::Cuda &&
      app.frames % uint64_t(app.ui.compare_every) == 0)
    compare_now(app);
}

void draw_ui(GuiApp& app) {
  const ImGuiViewport* vp = ImGui::GetMainViewport();
  const float side = std::min(460.0f, vp->WorkSize.x * 0.35f);
  // A fixed first-run layout: controls on the left, the image on the right. imgui.ini keeps the
  // user's changes.
  ImGui::SetNextWindowPos(vp->WorkPos, ImGuiCond_FirstUseEver);
  ImGui::SetNextWindowSize(ImVec2(side, vp->WorkSize.y * 0.55f), ImGuiCond_FirstUseEver);
  draw_pipeline_panel(app);
  ImGui::SetNextWindowPos(ImVec2(vp->WorkPos.x, vp->WorkPos.y + vp->WorkSize.y * 0.55f),
                          ImGuiCond_FirstUseEver);
  ImGui::SetNextWindowSize(ImVec2(side, vp->WorkSize.y * 0.45f), ImGuiCond_FirstUseEver);
  draw_timings_panel(app);
  ImGui::SetNextWindowPos(ImVec2(vp->WorkPos.x + side, vp->WorkPos.y), ImGuiCond_FirstUseEver);
  ImGui::SetNextWindowSize(ImVec2(vp->WorkSize.x - side, vp->WorkSize.y * 0.7f),
                           ImGuiCond_FirstUseEver);
  draw_viewport_panel(app);
  const float bottom_y = vp->WorkPos.y + vp->WorkSize.y * 0.7f;
  const float third = (vp->WorkSize.x - side) / 3;
  ImGui::SetNextWindowPos(ImVec2(vp->WorkPos.x + side, bottom_y), ImGuiCond_FirstUseEver);
  ImGui::SetNextWindowSize(ImVec2(third, vp->WorkSize.y * 0.3f), ImGuiCond_FirstUseEver);
  draw_occupancy_panel(app);
  ImGui::SetNextWindowPos(ImVec2(vp->WorkPos.x + side + third, bottom_y), ImGuiCond_FirstUseEver);
  ImGui::SetNextWindowSize(ImVec2(third, vp->WorkSize.y * 0.3f), ImGuiCond_FirstUseEver);
  draw_diff_panel(app);
  ImGui::SetNextWindowPos(ImVec2(vp->WorkPos.x + side + 2 * third, bottom_y),
                          ImGuiCond_FirstUseEver);
  ImGui::SetNextWindowSize(ImVec2(third, vp->WorkSize.y * 0.3f), ImGuiCond_FirstUseEver);
  draw_device_panel(app);
}

std::string& ini_path() {
  static std::string path;  // ImGui keeps the pointer
  return path;
}

void init_imgui(float scale) {
  IMGUI_CHECKVERSION();
  ImGui::CreateContext();
  ImGuiIO& io = ImGui::GetIO();
  ini_path() = state_dir() + "/imgui.ini";
  io.IniFilename = ini_path().c_str();
  ImGui::StyleColorsDark();
  if (scale > 1.0f) {  // high-DPI: scale the default font and every size
    ImGui::GetStyle().ScaleAllSizes(scale);
    io.FontGlobalScale = scale;
  }
}

}  // namespace

void open_input(GuiApp& app, const std::string& spec) {
  io::SourceOptions so;
  so.max_pixels = app.opt.max_pixels;
  app.capture.reset();  // stop the old source first: a camera can be opened by one reader only
  app.capture = std::make_unique<io::Capture>([spec, so] { return io::open_source(spec, so); });
  app.opt.input = spec;
}

int run_gui(const GuiOptions& opt) {
  const bool has_display = std::getenv("DISPLAY") || std::getenv("WAYLAND_DISPLAY");
  if (!opt.headless && !has_display)
    throw Error(ErrorKind::Unavailable,
                "no display (DISPLAY and WAYLAND_DISPLAY are unset). Run headless instead: "
                "kernel-lab gui --headless --frames 60 --screenshot out.png");

  GuiApp app;
  app.opt = opt;
  app.ui.pipeline = opt.pipeline;
  app.runner = std::make_unique<Runner>(opt.backend);
  open_input(app, opt.input);
  std::snprintf(app.ui.input_edit, sizeof app.ui.input_edit, "%s", opt.input.c_str());
  app.ui.preset_path = config_dir() + "/default.json";
  app.upload_note =
      opt.backend == Backend::Cuda
          ? "host upload: the slot is downloaded, sent with glTexSubImage2D (float planes as "
            "R32F, colormapped by a GLSL shader); CUDA-GL interop comes next"
          : "CPU mode: the references' images are sent with glTexSubImage2D (float planes as "
            "R32F, colormapped by a GLSL shader)";

  std::unique_ptr<HeadlessGl> headless;
  GLFWwindow* window = nullptr;
  int fb_w = opt.width, fb_h = opt.height;
  if (opt.headless) {
    headless = std::make_unique<HeadlessGl>(opt.width, opt.height);
    init_imgui(1.0f);
    ImGui::GetIO().DisplaySize = ImVec2(float(opt.width), float(opt.height));
  } else {
    if (!glfwInit())
      throw Error(ErrorKind::Unavailable,
                  "cannot open a window (GLFW found no usable display); "
                  "run with --headless");
    glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 3);
    glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 3);
    glfwWindowHint(GLFW_OPENGL_PROFILE, GLFW_OPENGL_CORE_PROFILE);
    window = glfwCreateWindow(opt.width, opt.height, "Kernel Lab", nullptr, nullptr);
    if (!window) {
      glfwTerminate();
      throw Error(ErrorKind::Unavailable,
                  "cannot create an OpenGL 3.3 window; run with --headless");
    }
    glfwMakeContextCurrent(window);
    glfwSwapInterval(1);
    float sx = 1, sy = 1;
    glfwGetWindowContentScale(window, &sx, &sy);
    init_imgui(std::max(sx, sy));
    ImGui_ImplGlfw_InitForOpenGL(window, true);
  }
  ImGui_ImplOpenGL3_Init("#version 330");

  int exit_code = 0;
  try {
    for (int frame = 0; opt.frames == 0 || frame < opt.frames; ++frame) {
      const auto t0 = std::chrono::steady_clock::now();
      if (window) {
        glfwPollEvents();
        if (glfwWindowShouldClose(window)) break;
        glfwGetFramebufferSize(window, &fb_w, &fb_h);
        ImGui_ImplGlfw_NewFrame();
      }
      // Headless runs render what a user would see after the first frames of the camera: give
      // the capture thread a moment to deliver the first frame.
      if (opt.headless && frame == 0) {
        io::Frame first;
        if (app.capture->wait_latest(first, std::chrono::seconds(5))) {
          app.runner->configure(app.ui.pipeline, first.image.desc());
          app.runner->set_input(first.image);
        }
      }
      engine_frame(app);
      ImGui_ImplOpenGL3_NewFrame();
      ImGui::NewFrame();
      draw_ui(app);
      ImGui::Render();
      glViewport(0, 0, fb_w, fb_h);
      glClearColor(0.08f, 0.08f, 0.09f, 1.0f);
      glClear(GL_COLOR_BUFFER_BIT);
      ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());
      const bool last = opt.frames > 0 && frame == opt.frames - 1;
      if (last && !opt.screenshot.empty()) write_screenshot(opt.screenshot, fb_w, fb_h);
      if (window) glfwSwapBuffers(window);
      push_history(
          app.ui.frame_ms,
          std::chrono::duration<float, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
  } catch (...) {
    exit_code = -1;
    ImGui_ImplOpenGL3_Shutdown();
    if (window) ImGui_ImplGlfw_Shutdown(), glfwDestroyWindow(window), glfwTerminate();
    ImGui::DestroyContext();
    throw;
  }
  if (app.texture) glDeleteTextures(1, &app.texture);
  ImGui_ImplOpenGL3_Shutdown();
  if (window) {
    ImGui_ImplGlfw_Shutdown();
    glfwDestroyWindow(window);
    glfwTerminate();
  }
  ImGui::DestroyContext();
  return exit_code;
}

}  // namespace lab::ui
