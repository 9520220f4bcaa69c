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
#include <cmath>
#include <future>
#include <thread>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <vector>

#include "app/io/npy.h"
#include "app_state.h"
#include "presets.h"
#include "stats.h"

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
    if (epoxy_has_egl_extension(EGL_NO_DISPLAY, "EGL_EXT_platform_device") &&
        epoxy_has_egl_extension(EGL_NO_DISPLAY, "EGL_EXT_device_enumeration")) {
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

// ---- one frame of the engine -------------------------------------------------------------

// Starts the next engine job when none is running; takes a finished job's result.
void engine_frame(GuiApp& app, bool wait) {
  if (app.job.valid() &&
      (wait || app.job.wait_for(std::chrono::seconds(0)) == std::future_status::ready)) {
    FrameResult r = app.job.get();
    if (!r.error.empty()) app.ui.message = r.error;
    app.gpu_lost = app.gpu_lost || r.gpu_lost;
    if (r.compared) app.ui.diff = std::move(r.diff);
    if (r.ran || r.compared) ++app.result_gen;
    if (r.ran) {
      // A new input shape can change the kernels (letterbox's channel count): old histories
      // would mix with new ones.
      if (!app.view.slots.empty() && !r.slots.empty() && r.slots[0].desc != app.view.slots[0].desc)
        app.ui.launch_us.clear();
      double total = 0;
      for (const LaunchRecord& l : r.launches)
        if (std::isfinite(l.ms))  // NaN inside a graph: timed as a whole
          push_history(app.ui.launch_us[r.stage_names[l.stage] + "/" + l.kernel], 1e3f * l.ms);
      for (double ms : r.stage_ms) total += std::isfinite(ms) ? ms : 0.0;
      push_history(app.ui.pipeline_ms, float(r.graph ? r.frame_ms : total));
      if (r.lab)  // the playground's step table
        push_history(app.ui.lab_ms[r.lab_variant][r.lab_config],
                     float(r.graph ? r.frame_ms : total));
      ++app.frames;
      display_result(app, r);
      live_frame_ran(app, r);
      if (r.uploaded) push_history(app.ui.upload_ms, float(r.upload_ms));  // frames that sent one
      push_history(app.ui.job_ms, float(r.job_ms));
      if (r.sweep_stage >= 0) app.ui.sweep_stage = r.sweep_stage, app.ui.sweep = r.sweep;
      app.view = std::move(r);  // a job that failed leaves the last good frame on screen
    }
  }
  if (app.job.valid() || app.gpu_lost) return;
  JobInput in;
  const Op* lab = playground_of(app.ui.pipeline);
  io::Frame f;
  // A playground computes on its generated inputs: camera frames are left in the mailbox.
  if (!lab && app.capture->take_latest(f)) in.frame = std::move(f.image);
  app.frame_has_input = in.frame.has_value();
  if (lab && (app.ui.lab_dirty || app.ui.pipeline_dirty)) {
    // New inputs only for a new playground or a new size or seed; a variant, block or math
    // change reconfigures on the inputs already on the device.
    if (app.ui.lab_dirty || app.ui.lab_loaded != lab->def.name) {
      in.lab = LabRequest{app.ui.lab_size, uint64_t(app.ui.lab_seed)};
      app.ui.lab_loaded = lab->def.name;
    }
    in.pipeline = app.ui.pipeline;
    app.ui.lab_dirty = app.ui.pipeline_dirty = false;
    app.ui.launch_us.clear();
    app.ui.diff.clear();
  }
  if (!lab) app.ui.lab_loaded.clear();
  // An image pipeline can only be configured for an input: it waits for the first frame (and,
  // after a playground, for a camera frame: the runner's input is then the playground's).
  const bool was_lab = !app.view.slots.empty() && app.view.lab;
  if (!lab && app.ui.pipeline_dirty && (in.frame || (!app.view.slots.empty() && !was_lab))) {
    in.pipeline = app.ui.pipeline;
    app.ui.pipeline_dirty = false;
    app.ui.launch_us.clear();
    app.ui.diff.clear();
  }
  if (!app.view.slots.empty())
    in.shown_name =
        app.view.slots[size_t(std::min(app.ui.slot, int(app.view.slots.size()) - 1))].name;
  if (app.ui.graph_dirty) {
    in.graph = app.ui.graph;
    app.ui.graph_dirty = false;
  }
  if (app.interop.available()) in.staging = &app.staging;
  in.sweep_stage = app.ui.sweep_requested;
  app.ui.sweep_requested = -1;
  in.probe_x = app.ui.probe_x, in.probe_y = app.ui.probe_y;
  const bool every = app.ui.compare_every > 0 && app.frames > 0 &&
                     app.frames % uint64_t(app.ui.compare_every) == 0;
  in.compare = app.opt.backend == Backend::Cuda && (app.ui.compare_requested || every);
  app.ui.compare_requested = false;
  app.job = std::async(std::launch::async, run_job, std::ref(*app.runner), std::move(in));
  if (wait) app.job.wait();
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
  // The editor opens collapsed on the right of the viewport's title bar, where it hides nothing:
  // the first view stays the image.
  ImGui::SetNextWindowPos(
      ImVec2(vp->WorkPos.x + side + (vp->WorkSize.x - side) * 0.45f, vp->WorkPos.y),
      ImGuiCond_FirstUseEver);
  ImGui::SetNextWindowSize(ImVec2((vp->WorkSize.x - side) * 0.55f, vp->WorkSize.y * 0.65f),
                           ImGuiCond_FirstUseEver);
  ImGui::SetNextWindowCollapsed(app.opt.kernel_file.empty(), ImGuiCond_FirstUseEver);
  draw_live_panel(app);
}

std::string& ini_path() {
  static std::string path;  // ImGui keeps the pointer
  return path;
}

void init_imgui(float scale, bool persist_layout) {
  IMGUI_CHECKVERSION();
  ImGui::CreateContext();
  ImGuiIO& io = ImGui::GetIO();
  ini_path() = state_dir() + "/imgui.ini";
  // Headless renders use the default layout, so screenshots do not depend on past sessions.
  io.IniFilename = persist_layout ? ini_path().c_str() : nullptr;
  ImGui::StyleColorsDark();
  if (scale > 1.0f) {  // high-DPI: every size scaled, and a font rasterised at the scaled size
    ImGui::GetStyle().ScaleAllSizes(scale);
    const char* ttf = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";  // fonts-dejavu-core
    if (!(std::ifstream(ttf) && io.Fonts->AddFontFromFileTTF(ttf, 14.0f * scale)))
      io.FontGlobalScale = scale;  // no TTF: the built-in bitmap font, magnified
  }
}

}  // namespace

FrameResult run_job(Runner& r, JobInput in) {
  FrameResult out;
  const auto job_start = std::chrono::steady_clock::now();
  try {
    const auto slots = r.slots();
    const PipelineConfig* want = in.pipeline ? &*in.pipeline : nullptr;
    if (in.lab && want) {
      // A playground: its inputs generated here, on the worker, from the size and seed.
      const Op* op = playground_of(*want);
      if (!op) throw Error(ErrorKind::Internal, "a playground request for an image pipeline");
      r.configure_lab(*want, make_lab_inputs(*op, in.lab->size, in.lab->seed));
    } else if ((want && (in.frame || !slots.empty())) ||
               (in.frame && (slots.empty() || in.frame->desc() != slots[0].desc))) {
      // A new pipeline, a first frame, or a frame of another size: (re)configure.
      const ImageDesc input = in.frame ? in.frame->desc() : slots.at(0).desc;
      r.configure(want ? *want : r.pipeline(), input);
    }
    if (in.graph) r.set_graph(*in.graph);
    if (r.slots().empty()) return out;  // no frame yet
    if (in.frame) r.set_input(*in.frame);
    r.run();
    if (in.frame) out.upload_ms = r.upload_ms() + r.staging_ms(), out.uploaded = true;
    out.ran = true;
    out.lab = playground_of(r.pipeline()) != nullptr;
    if (out.lab) {
      const ResolvedStage& st = r.stages()[0];
      out.lab_variant = st.variant_def().name;
      out.lab_config = st.block.str() + " " + math_name(st.math);
    }
    out.frame_ms = r.frame_ms();
    out.graph = r.graph();
    out.slots = r.slots();
    for (size_t i = 0; i < r.stages().size(); ++i) {
      out.stage_names.push_back(r.stages()[i].op->def.name);
      out.stage_bytes.push_back(r.stage_bytes(i));
    }
    out.stage_ms = r.stage_ms();
    out.launches = r.launches();
    // First shown: letterbox in the image pipeline, the result in a playground.
    out.shown_name = !in.shown_name.empty() ? in.shown_name
                     : out.lab              ? out.slots.back().name
                               : out.slots.at(std::min<size_t>(1, out.slots.size() - 1)).name;
    bool known = false;
    for (const SlotInfo& s : out.slots) {
      known = known || s.name == out.shown_name;
      if (s.name == "nms") out.keypoint_space = s.desc;
      if (s.name == "keypoints") out.keypoints_k = s.desc.width;
    }
    if (!known) out.shown_name = out.lab ? out.slots.back().name : out.slots[0].name;
    const ImageRef src = display_view(r.slot_ref(out.shown_name));
    out.shown_desc = src.desc;
    const bool plane = src.desc.type != PixelType::U8 && src.desc.channels == 1;  // f32, u32
    const bool device = in.staging && r.backend() == Backend::Cuda;
    if (device && plane) {
      // Device to device into the staging copy; 8 bytes of range and 4 of probe come back.
      Staging& st = *in.staging;
      const ImageDesc shown{src.desc.width, src.desc.height, 1, PixelType::F32};
      if (st.shown.desc() != shown) st.shown = DeviceImage(shown);
      if (!st.range.data()) st.range = DeviceBuffer(4 * sizeof(unsigned));
      if (src.desc.type == PixelType::U32)  // widened on the device for the float texture
        device_u32_to_f32(src, st.shown.ref(), r.stream());
      else
        LAB_CUDA_CHECK(cudaMemcpy2DAsync(st.shown.data(), st.shown.pitch(), src.data, src.pitch,
                                         src.desc.row_bytes(), size_t(src.desc.height),
                                         cudaMemcpyDeviceToDevice, r.stream()));
      out.shown_range =
          device_min_max(st.shown.ref(), 0, r.stream(), static_cast<unsigned*>(st.range.data()));
      out.shown_on_device = true;
      if (in.probe_x >= 0 && in.probe_y >= 0 && in.probe_x < src.desc.width &&
          in.probe_y < src.desc.height) {
        LAB_CUDA_CHECK(cudaMemcpy(&out.probe_value,
                                  static_cast<const char*>(st.shown.data()) +
                                      size_t(in.probe_y) * st.shown.pitch() +
                                      size_t(in.probe_x) * sizeof(float),
                                  sizeof(float), cudaMemcpyDeviceToHost));
        out.probe_x = in.probe_x, out.probe_y = in.probe_y;
      }
    } else {
      out.shown = r.read_slot(out.shown_name);
      const Range rg = auto_range(display_view(out.shown.ref()));
      out.shown_range = {rg.lo, rg.hi};
    }
    if (out.keypoints_k > 0) {
      const ImageRef kp = r.slot_ref("keypoints");
      if (out.shown_on_device) {  // written together with the texture (one map / unmap)
        Staging& st = *in.staging;
        if (st.keypoints.desc() != kp.desc) st.keypoints = DeviceImage(kp.desc);
        LAB_CUDA_CHECK(cudaMemcpyAsync(st.keypoints.data(), kp.data, kp.desc.row_bytes(),
                                       cudaMemcpyDeviceToDevice, r.stream()));
        out.keypoint_max = device_min_max(st.keypoints.ref(), 2, r.stream(),
                                          static_cast<unsigned*>(st.range.data()) + 2)
                               .hi;
        out.keypoints_on_device = true;
      } else {
        out.keypoints = r.read_slot("keypoints");
        const auto v = out.keypoints.view<float>();
        for (int i = 0; i < v.width; ++i)
          out.keypoint_max = std::max(out.keypoint_max, v.at(i, 0, 2));
      }
    }
    if (in.sweep_stage >= 0 && size_t(in.sweep_stage) < r.stages().size() &&
        r.backend() == Backend::Cuda && !r.skipped(size_t(in.sweep_stage))) {
      const size_t i = size_t(in.sweep_stage);
      const ResolvedStage base = r.stages()[i];
      for (const Block& b : base.variant_def().blocks) {
        if (!block_refusal(base.variant_def(), b, &device_info()).empty()) continue;
        ResolvedStage cfg = base;
        cfg.block = b;
        try {
          for (int w = 0; w < 3; ++w) r.run_stage(i, &cfg);
          std::vector<double> us;
          for (int k = 0; k < 15; ++k) {
            r.run_queued(200, i, &cfg);  // behind a GPU-side delay: kernel time, not latency
            us.push_back(1e3 * r.stage_ms()[i]);
          }
          SweepPoint pt{b, median(us), 0};
          if (!r.launches().empty() && r.launches()[0].func)
            pt.occupancy = r.launches()[0].est.occupancy;
          out.sweep.push_back(pt);
        } catch (const Error& e) {
          if (e.kind() != ErrorKind::Usage) throw;  // refused at launch: not a point
        }
      }
      out.sweep_stage = in.sweep_stage;
      r.run_stage(i);  // the configured block's output again
    }
    if (in.compare) {
      for (size_t i = 0; i < r.stages().size(); ++i) {
        if (r.skipped(i)) continue;  // fused away or disabled: nothing of its own to diff
        if (!r.stages()[i].reference()) continue;  // a live kernel added as a stage
        StageDiff d;
        d.stage = r.stages()[i].op->def.name;
        d.reference = r.reference(i);
        d.stats = r.compare(i, d.reference, r.stages()[i].math);
        for (const auto& name : r.stages()[i].op->def.outputs)
          d.output.push_back(r.read_slot(name));
        out.diff.push_back(std::move(d));
      }
      out.compared = true;
    }
    out.job_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - job_start)
            .count();
  } catch (const CudaError& e) {
    out.error = e.what();
    out.gpu_lost = e.sticky();
  } catch (const Error& e) {
    out.error = e.what();  // the previous configuration stays in the runner
  } catch (const std::exception& e) {
    out.error = std::string("internal error: ") + e.what();  // shown, and the UI goes on
  }
  return out;
}

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
  app.ui.overlay = !opt.hide_keypoints;
  app.ui.graph = app.ui.graph_dirty = opt.graph && opt.backend == Backend::Cuda;
  app.ui.pipeline_dirty = true;  // the first job configures it
  std::snprintf(app.ui.lab_size, sizeof app.ui.lab_size, "%s", opt.lab_size.c_str());
  app.ui.lab_seed = int(opt.lab_seed);
  if (playground_of(opt.pipeline)) app.ui.slot = 99;  // the last slot: the result
  app.runner = std::make_unique<Runner>(opt.backend);
  if (opt.backend == Backend::Cuda) app.runner->set_upload_mode(opt.upload);
  set_frame_memory_pinned(opt.backend == Backend::Cuda && opt.upload == UploadMode::Pinned);
  if (opt.backend == Backend::Cuda) app.copy_gbs = measure_copy_bandwidth();
  open_input(app, opt.input);
  std::snprintf(app.ui.input_edit, sizeof app.ui.input_edit, "%s", opt.input.c_str());
  app.ui.preset_path = config_dir() + "/default.json";
  if (!opt.kernel_file.empty()) {  // the editor opens on the file and compiles it
    app.live.stage = opt.replace;
    try {
      const std::string src = read_live_file(opt.kernel_file);
      app.live.opts = read_live_options(src, app.live.opts);
      app.live.text.assign(64 * 1024, '\0');
      set_live_source(app, src);
      start_live_compile(app);
    } catch (const Error& e) {
      app.ui.message = app.live.status = e.what();  // the GUI keeps running and says why
    }
  }

  std::unique_ptr<HeadlessGl> headless;
  GLFWwindow* window = nullptr;
  int fb_w = opt.width, fb_h = opt.height;
  if (opt.headless) {
    headless = std::make_unique<HeadlessGl>(opt.width, opt.height);
    init_imgui(opt.ui_scale > 0 ? opt.ui_scale : 1.0f, false);
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
    init_imgui(opt.ui_scale > 0 ? opt.ui_scale : std::max(sx, sy), true);
    ImGui_ImplGlfw_InitForOpenGL(window, true);
  }
  ImGui_ImplOpenGL3_Init("#version 330");
  app.interop.init(opt.backend == Backend::Cuda);
  app.upload_note =
      app.interop.available()
          ? "CUDA-GL interop: the shown float slot and the keypoints are copied device to device "
            "into a registered texture and buffer (map, copy, unmap); no host round trip"
          : "host upload (" + app.interop.why() +
                "): the slot is sent with glTexSubImage2D (float planes as R32F, colormapped by "
                "a GLSL shader), the keypoints with glBufferSubData";

  uint64_t ui_frames = 0, input_frames = 0;
  const auto run_start = std::chrono::steady_clock::now();
  try {
    for (int frame = 0; opt.frames == 0 || frame < opt.frames; ++frame, ++ui_frames) {
      const auto t0 = std::chrono::steady_clock::now();
      if (window) {
        glfwPollEvents();
        if (glfwWindowShouldClose(window)) break;
        glfwGetFramebufferSize(window, &fb_w, &fb_h);
        ImGui_ImplGlfw_NewFrame();
      }
      // Scripted runs (--frames, headless or not) are reproducible: each frame waits for its
      // engine job, and the first waits (a bounded time) for the source's first frame.
      // Interactive runs never wait: the UI draws the last result while the next one runs.
      const bool scripted = (opt.headless || opt.frames > 0) && !opt.free_run;
      if (scripted && frame == 0) {
        for (int i = 0; i < 250 && app.capture->stats().captured == 0; ++i)
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      if (scripted && app.live.job.valid()) app.live.job.wait();  // reproducible, like jobs
      poll_live(app);
      engine_frame(app, scripted);
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
      if (window)
        glfwSwapBuffers(window);
      else
        glFinish();  // headless: the frame really drawn, as a swap would (and no queue build-up)
      const float frame_ms =
          std::chrono::duration<float, std::milli>(std::chrono::steady_clock::now() - t0).count();
      push_history(app.ui.frame_ms, frame_ms);
      if (app.frame_has_input) push_history(app.ui.frame_input_ms, frame_ms), ++input_frames;
    }
  } catch (...) {
    ImGui_ImplOpenGL3_Shutdown();
    if (window) ImGui_ImplGlfw_Shutdown(), glfwDestroyWindow(window), glfwTerminate();
    ImGui::DestroyContext();
    throw;
  }
  if (opt.frames > 0) {  // a scripted run reports its timings (medians over the last 240)
    auto med = [](const std::vector<float>& h) {
      return median(std::vector<double>(h.begin(), h.end()));
    };
    const double wall_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - run_start).count();
    std::printf(
        "gui: %llu frames, %llu results in %.2f s (%.0f results/s); frame %.3f ms (%.0f fps); "
        "engine job %.3f ms (pipeline %.3f ms%s, upload %.3f ms); display %.3f ms (%s)\n",
        (unsigned long long)ui_frames, (unsigned long long)app.frames, wall_s,
        wall_s > 0 ? double(app.frames) / wall_s : 0.0, med(app.ui.frame_ms),
        med(app.ui.frame_ms) > 0 ? 1000.0 / med(app.ui.frame_ms) : 0.0, med(app.ui.job_ms),
        med(app.ui.pipeline_ms), app.view.graph ? " GPU, CUDA graph" : "", med(app.ui.upload_ms),
        med(app.ui.display_ms), app.interop.available() ? "CUDA-GL interop" : "host upload");
    std::printf(
        "gui: input upload %s; %llu of %llu frames sent a new input frame, median %.3f ms (the "
        "last %zu of them)\n",
        opt.backend == Backend::Cuda ? upload_mode_name(app.runner->upload_mode())
                                     : "none (CPU references)",
        (unsigned long long)input_frames, (unsigned long long)ui_frames, med(app.ui.frame_input_ms),
        app.ui.frame_input_ms.size());
  }
  if (opt.frames > 0 && !opt.kernel_file.empty()) {
    const LiveBuild& b = app.live.last;
    std::printf("gui: live kernel %s: %s; compile %.0f ms, compile to running %.0f ms%s\n",
                opt.kernel_file.c_str(), app.live.status.c_str(), b.compile_ms,
                app.live.to_running_ms, app.live.running ? "" : " (not running)");
  }
  if (!opt.dump_texture.empty()) {
    if (!app.texture || !app.tex_float)
      throw Error(ErrorKind::Data, "--dump-texture: the viewport shows no float plane");
    HostImage t(ImageDesc{app.tex_w, app.tex_h, 1, PixelType::F32});
    glBindTexture(GL_TEXTURE_2D, app.texture);
    glPixelStorei(GL_PACK_ALIGNMENT, 4);
    glGetTexImage(GL_TEXTURE_2D, 0, GL_RED, GL_FLOAT, t.bytes());
    io::write_npy(opt.dump_texture, t);
  }
  app.interop.reset();  // unregistered before the GL objects go
  for (unsigned t : {app.texture, app.ref_texture})
    if (t) glDeleteTextures(1, &t);
  if (app.kp_vbo) glDeleteBuffers(1, &app.kp_vbo);
  if (app.kp_vao) glDeleteVertexArrays(1, &app.kp_vao);
  if (app.colormap_gl.program) glDeleteProgram(app.colormap_gl.program);
  if (app.overlay_gl.program) glDeleteProgram(app.overlay_gl.program);
  ImGui_ImplOpenGL3_Shutdown();
  if (window) {
    ImGui_ImplGlfw_Shutdown();
    glfwDestroyWindow(window);
    glfwTerminate();
  }
  ImGui::DestroyContext();
  return 0;
}

}  // namespace lab::ui
