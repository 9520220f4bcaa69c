// The GUI shell, top to bottom as Dear ImGui's example_glfw_opengl3: context, loop, cleanup.
// Headless, an EGL context (headless_gl.h) renders the same UI into an offscreen framebuffer.
// What runs beside Dear ImGui's steps lives in its own file: the engine's frame (engine_job.cpp),
// the panels and their layout (panels.cpp), scripted runs (script.cpp), the live kernel
// (panel_live.cpp), a GPU fault or a hung frame (recovery.cpp).
#include "gui.h"

#include <epoxy/gl.h>
// GLFW after epoxy: epoxy provides the GL declarations.
#define GLFW_INCLUDE_NONE
#include <GLFW/glfw3.h>
#include <backends/imgui_impl_glfw.h>
#include <backends/imgui_impl_opengl3.h>
#include <execinfo.h>
#include <imgui.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>

#include "app_state.h"
#include "headless_gl.h"
#include "presets.h"
#include "script.h"
#include "shell.h"
#include "text.h"
#include "widgets.h"

namespace lab::ui {

void attach_kernel_host(GuiApp& app) {
  app.host = std::make_unique<KernelHost>(trial_command());
  app.host->warm();  // its context is made while the lab starts, before any kernel is typed
  app.hosted = std::make_unique<HostedLaunches>(
      *app.host, host_transport_for(device_info().integrated), app.opt.frame_deadline_s);
  app.host_kernel.reset();
  app.runner->set_remote(app.hosted.get());
}

GuiHooks read_gui_hooks() {
  auto set = [](const char* var) { return std::getenv(var) != nullptr; };
  GuiHooks h;
  h.trace_ui = set("LAB_TRACE_UI");
  h.trace_recovery = set("LAB_TRACE_RECOVERY");
  h.crash_trace = set("LAB_CRASH_TRACE");
  if (const char* f = std::getenv("LAB_SIMULATE_GPU_FAULT"))
    h.simulate_fault_at = std::strtoull(f, nullptr, 10);
  if (const char* f = std::getenv("LAB_SIMULATE_GPU_HANG"))
    h.simulate_hang_at = std::strtoull(f, nullptr, 10);
  if (const char* f = std::getenv("LAB_SIMULATE_HOST_FAULT"))
    h.simulate_host_fault_at = std::strtoull(f, nullptr, 10);
  if (const char* f = std::getenv("LAB_SIMULATE_GL_RESET"))
    h.simulate_gl_reset_at = std::strtoull(f, nullptr, 10);
  h.simulate_reset_failure = set("LAB_SIMULATE_RESET_FAILURE");
  h.no_restart = set("LAB_NO_RESTART");
  const char* mode = std::getenv("LAB_RESTART_MODE");
  h.restart_spawn = mode && std::string(mode) == "spawn";
  if (const char* f = std::getenv("LAB_HANG_REPORT_S"))
    h.hang_report_s = std::clamp(std::atof(f), 0.1, 3600.0);
  h.no_interop = set("LAB_NO_INTEROP");
  return h;
}

void open_input(GuiApp& app, const std::string& spec) {
  io::SourceOptions so;
  so.max_pixels = app.opt.max_pixels;
  so.accept_truncated = app.opt.accept_truncated;
  app.capture.reset();  // stop the old source first: a camera can be opened by one reader only
  app.capture = std::make_unique<io::Capture>([spec, so] { return io::open_source(spec, so); });
  app.opt.input = spec;
}

namespace {

// LAB_CRASH_TRACE=1: a backtrace on SIGSEGV (offsets resolve with addr2line on the unstripped
// binary), then the default action.
void crash_trace(int sig) {
  void* frames[64];
  const int n = backtrace(frames, 64);
  backtrace_symbols_fd(frames, n, 2);
  signal(sig, SIG_DFL);
  raise(sig);
}

// The state the options ask for: the UI's first settings, the runner, the source, the editor.
void init_app(GuiApp& app, const std::optional<RestartState>& restart) {
  const GuiOptions& opt = app.opt;
  app.ui.pipeline = opt.pipeline;
  app.ui.overlay = !opt.hide_keypoints;
  app.ui.graph = app.ui.graph_dirty = opt.graph && opt.backend == Backend::Cuda;
  app.ui.pipeline_dirty = true;  // the first job configures it
  app.ui.cold_l2 = opt.measure.cold_l2;
  std::snprintf(app.ui.lab_size, sizeof app.ui.lab_size, "%s", opt.lab_size.c_str());
  app.ui.lab_seed = int(opt.lab_seed);
  if (playground_of(opt.pipeline)) app.ui.slot = 99;  // the last slot: the result
  if (restart) resume_after_restart(app, *restart);
  app.runner = std::make_unique<Runner>(opt.backend);
  if (opt.backend == Backend::Cuda) app.runner->set_upload_mode(opt.upload);
  if (opt.backend == Backend::Cuda) attach_kernel_host(app);
  set_frame_memory_pinned(opt.backend == Backend::Cuda && opt.upload != UploadMode::Pageable);
  if (opt.backend == Backend::Cuda) app.copy_gbs = measure_copy_bandwidth();
  if (restart) recovery_trace(app, "CUDA context made, copy bandwidth measured");
  open_input(app, opt.input);
  std::snprintf(app.ui.input_edit, sizeof app.ui.input_edit, "%s", opt.input.c_str());
  app.ui.preset_path = config_dir() + "/default.json";
  init_live(app);
}

struct Window {
  std::unique_ptr<HeadlessGl> headless;
  GLFWwindow* glfw = nullptr;
};

// A GLFW window with an OpenGL 3.3 core context, told when the driver resets it where GLFW can
// ask for that; nullptr when there is none.
GLFWwindow* create_glfw_window(int width, int height) {
  glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 3);
  glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 3);
  glfwWindowHint(GLFW_OPENGL_PROFILE, GLFW_OPENGL_CORE_PROFILE);
  glfwWindowHint(GLFW_CONTEXT_ROBUSTNESS, GLFW_LOSE_CONTEXT_ON_RESET);
  GLFWwindow* w = glfwCreateWindow(width, height, "Kernel Lab", nullptr, nullptr);
  if (!w) {
    glfwWindowHint(GLFW_CONTEXT_ROBUSTNESS, GLFW_NO_ROBUSTNESS);
    w = glfwCreateWindow(width, height, "Kernel Lab", nullptr, nullptr);
  }
  if (w) glfwMakeContextCurrent(w), glfwSwapInterval(1);
  return w;
}

// Headless: an EGL context rendering offscreen; else a GLFW window with an OpenGL 3.3 core
// context. Then Dear ImGui's context and backends, and the CUDA-GL interop probe.
Window open_window(GuiApp& app) {
  const GuiOptions& opt = app.opt;
  Window w;
  if (opt.headless) {
    w.headless = std::make_unique<HeadlessGl>(opt.width, opt.height);
    init_imgui(opt.ui_scale > 0 ? opt.ui_scale : 1.0f, false);
    register_panel_settings(app);
    ImGui::GetIO().DisplaySize = ImVec2(float(opt.width), float(opt.height));
  } else {
    if (!glfwInit())
      throw Error(ErrorKind::Unavailable,
                  "cannot open a window (GLFW found no usable display); "
                  "run with --headless");
    w.glfw = create_glfw_window(opt.width, opt.height);
    if (!w.glfw) {
      glfwTerminate();
      throw Error(ErrorKind::Unavailable,
                  "cannot create an OpenGL 3.3 window; run with --headless");
    }
    float sx = 1, sy = 1;
    glfwGetWindowContentScale(w.glfw, &sx, &sy);
    init_imgui(opt.ui_scale > 0 ? opt.ui_scale : std::max(sx, sy), true);
    register_panel_settings(app);
    ImGui_ImplGlfw_InitForOpenGL(w.glfw, true);
  }
  ImGui_ImplOpenGL3_Init("#version 330");
  app.interop.init(opt.backend == Backend::Cuda, opt.hooks.no_interop);
  app.upload_note =
      app.interop.available()
          ? "CUDA-GL interop: the shown float slot and the keypoints are copied device to device "
            "into a registered texture and buffer (map, copy, unmap); no host round trip"
          : "host upload (" + app.interop.why() +
                "): the slot is sent with glTexSubImage2D (float planes as R32F, colormapped by "
                "a GLSL shader), the keypoints with glBufferSubData";
  return w;
}

void close_window(Window& w) {
  ImGui_ImplOpenGL3_Shutdown();
  if (w.glfw) ImGui_ImplGlfw_Shutdown(), glfwDestroyWindow(w.glfw), glfwTerminate();
  ImGui::DestroyContext();
}

// The GL objects the panels made, after the interop has unregistered them.
void release_gl(GuiApp& app) {
  app.interop.reset();
  for (unsigned t : {app.texture, app.ref_texture, app.ui.ab.heat_texture})
    if (t) glDeleteTextures(1, &t);
  if (app.kp_vbo) glDeleteBuffers(1, &app.kp_vbo);
  if (app.kp_vao) glDeleteVertexArrays(1, &app.kp_vao);
  if (app.colormap_gl.program) glDeleteProgram(app.colormap_gl.program);
  if (app.overlay_gl.program) glDeleteProgram(app.overlay_gl.program);
}

// The driver reset the window's OpenGL context (on some hosts a fault in any process resets
// every context on the GPU, the kernel host's child included): every GL object is gone, so the
// lab makes a new context (a new window, where there is one, at the same place) and forgets the
// names it held; the panels make their textures, buffers and shaders again as they draw, and the
// interop registers them again. The CUDA side and the pipeline are untouched.
void renew_gl(GuiApp& app, Window& w, const std::string& why) {
  const auto t0 = std::chrono::steady_clock::now();
  app.interop.reset();
  app.texture = app.ref_texture = app.ui.ab.heat_texture = 0;
  app.tex_w = app.tex_h = app.ref_w = app.ref_h = 0;
  app.kp_vbo = app.kp_vao = 0;
  app.kp_bytes = 0;
  app.overlay_gl = {};
  app.colormap_gl = {};
  app.uploaded.clear();
  ImGui_ImplOpenGL3_Shutdown();
  if (w.headless) {
    w.headless.reset();  // its display is terminated before the new one is initialised
    w.headless = std::make_unique<HeadlessGl>(app.opt.width, app.opt.height);
  } else {
    int x = 0, y = 0, width = 0, height = 0;
    glfwGetWindowPos(w.glfw, &x, &y);
    glfwGetWindowSize(w.glfw, &width, &height);
    ImGui_ImplGlfw_Shutdown();
    glfwDestroyWindow(w.glfw);
    w.glfw = create_glfw_window(width, height);
    if (!w.glfw)
      throw Error(ErrorKind::Unavailable,
                  why + ", and no new window could be made: the lab cannot draw");
    glfwSetWindowPos(w.glfw, x, y);
    ImGui_ImplGlfw_InitForOpenGL(w.glfw, true);
  }
  ImGui_ImplOpenGL3_Init("#version 330");
  app.interop.init(app.opt.backend == Backend::Cuda, app.opt.hooks.no_interop);
  ++app.gl_renewals;
  app.gl_renew_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  app.ui.message = why + ": Kernel Lab made a new one in " + fmt("%.0f", app.gl_renew_ms) +
                   " ms and draws on (nothing of the pipeline was lost).";
  std::fprintf(stderr, "kernel-lab: %s\n", app.ui.message.c_str());
}

float ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<float, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int run_gui(const GuiOptions& given) {
  // A start after a GPU fault (recovery.cpp) runs on the configuration that last worked.
  const std::optional<RestartState> restart = take_restart_state();
  GuiApp app;
  app.opt = given;
  if (restart) apply_restart_state(app.opt, *restart);
  const GuiOptions& opt = app.opt;
  if (opt.hooks.crash_trace) signal(SIGSEGV, crash_trace), signal(SIGABRT, crash_trace);
  trace_ui(opt.hooks.trace_ui);
  const bool has_display = std::getenv("DISPLAY") || std::getenv("WAYLAND_DISPLAY");
  if (!opt.headless && !has_display)
    throw Error(ErrorKind::Unavailable,
                "no display (DISPLAY and WAYLAND_DISPLAY are unset). Run headless instead: "
                "kernel-lab gui --headless --frames 60 --screenshot out.png");
  init_app(app, restart);
  Window window = open_window(app);
  int fb_w = opt.width, fb_h = opt.height;

  uint64_t ui_frames = 0, input_frames = 0;
  GuiScript script(opt);
  try {
    for (int frame = 0; opt.frames == 0 || frame < opt.frames; ++frame, ++ui_frames) {
      const auto t0 = std::chrono::steady_clock::now();
      if (window.glfw) {
        glfwPollEvents();
        if (glfwWindowShouldClose(window.glfw)) break;
      }
      if (wait_out_hung_frame(app)) continue;
      if (window.glfw) glfwGetFramebufferSize(window.glfw, &fb_w, &fb_h), ImGui_ImplGlfw_NewFrame();
      script.before_frame(app, frame);
      update_live(app, script.waits());
      report_if_slow("the frame's start (events, live kernel, scripts)", t0);
      timed("engine frame", [&] { engine_frame(app, script.waits()); });
      if (app.recovery.restart) break;  // nothing of this process is drawn again (recovery.cpp)
      timed("ImGui new frame", [&] { ImGui_ImplOpenGL3_NewFrame(), ImGui::NewFrame(); });
      timed("the panels", [&] { draw_ui(app); });

      const auto render0 = std::chrono::steady_clock::now();
      ImGui::Render();
      glViewport(0, 0, fb_w, fb_h);
      glClearColor(0.08f, 0.08f, 0.09f, 1.0f);
      glClear(GL_COLOR_BUFFER_BIT);
      ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());
      write_asked_chart(app, fb_w, fb_h);
      script.after_render(app, frame, fb_w, fb_h);
      report_if_slow("rendering", render0);
      const auto sync0 = std::chrono::steady_clock::now();
      if (window.glfw)
        glfwSwapBuffers(window.glfw);
      else
        glFinish();  // headless: the frame really drawn, as a swap would (and no queue build-up)
      report_if_slow("the GL swap or finish", sync0);
      std::string reset = gl_reset_words();
      if (reset.empty() && opt.hooks.simulate_gl_reset_at > 0 &&
          uint64_t(frame) + 1 == opt.hooks.simulate_gl_reset_at)
        reset = "the driver reset this OpenGL context (simulated for a test)";
      if (!reset.empty()) renew_gl(app, window, reset);
      save_layout(false);
      push_history(app.ui.gl_sync_ms, ms_since(sync0));
      push_history(app.ui.frame_ms, ms_since(t0));
      if (app.frame_has_input)
        push_history(app.ui.frame_input_ms, app.ui.frame_ms.back()), ++input_frames;
      if (app.quit) break;  // the GPU could not be brought back (recovery.cpp)
    }
  } catch (...) {
    close_window(window);
    throw;
  }

  autosave_live(app, true);
  if (app.recovery.restart) restart_after_fault(app, ui_frames);  // returns if it could not
  script.after_loop(app, fb_w, fb_h);
  exit_if_frame_hung(app, ui_frames);
  script.report(app, ui_frames, input_frames);
  release_gl(app);
  save_layout(true);
  close_window(window);
  return app.exit_code;
}

}  // namespace lab::ui
