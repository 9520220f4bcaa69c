// The GUI shell, top to bottom as Dear ImGui's example_glfw_opengl3: context, loop, cleanup.
// Headless, an EGL context (headless_gl.h) renders the same UI into an offscreen framebuffer; the
// engine job that each frame hands to a worker is in engine_job.cpp.
#include "gui.h"

#include <epoxy/gl.h>
// GLFW after epoxy: epoxy provides the GL declarations.
#define GLFW_INCLUDE_NONE
#include <GLFW/glfw3.h>
#include <backends/imgui_impl_glfw.h>
#include <backends/imgui_impl_opengl3.h>
#include <imgui.h>
#include <imgui_internal.h>

#include <execinfo.h>

#include <algorithm>
#include <csignal>
#include <chrono>
#include <cmath>
#include <future>
#include <thread>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "npy.h"
#include "output_file.h"
#include "printable.h"
#include "app_state.h"
#include "headless_gl.h"
#include "measure.h"
#include "presets.h"
#include "stats.h"

namespace lab::ui {

void tip(const char* text) {
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", text);
}

bool stage_window_begin(GuiApp& app, const char* title, int& stage, const char* why) {
  ImGui::SetNextWindowBgAlpha(1.0f);  // it may open over the viewport: nothing shows through
  if (!ImGui::Begin(title, &app.ui.panels[title])) {
    ImGui::End();
    return false;
  }
  const auto& names = app.view.stage_names;
  if (names.empty()) {
    ImGui::TextWrapped("Waiting for the first frame.");
    ImGui::End();
    return false;
  }
  stage = std::clamp(stage, 0, int(names.size()) - 1);
  ImGui::SetNextItemWidth(160);
  if (ImGui::BeginCombo("stage", names[size_t(stage)].c_str())) {
    for (size_t i = 0; i < names.size(); ++i)
      if (ImGui::Selectable(names[i].c_str(), int(i) == stage)) stage = int(i);
    ImGui::EndCombo();
  }
  tip(why);
  return true;
}

void push_history(std::vector<float>& h, float v) {
  if (h.size() >= kHistory) h.erase(h.begin());
  h.push_back(v);
}

namespace {

// The panels, in the View menu's order; the teaching views start hidden (they open over the
// viewport when asked for), the rest shown.
struct PanelInfo {
  const char* name;
  bool teaching;
  const char* what;
};
constexpr PanelInfo kPanels[] = {
    {"Pipeline", false, "the input or playground, stages, variants, blocks, math, presets"},
    {"Viewport", false, "a slot through a colormap, the keypoints, the probe, wipe and flicker"},
    {"Timings", false, "each launch's GPU time as bench measures it, counters on demand"},
    {"Occupancy", false, "registers, shared memory, occupancy here and on Orin, block sweeps"},
    {"Diff", false, "every stage's output against its CPU reference"},
    {"Device", false, "the GPU, its limits and how images reach the screen"},
    {"Live kernel", false, "write a kernel, compile it with NVRTC, run it in place of a stage"},
    {"Ladder", true, "run every step of a stage: table, bar chart, roofline, exports"},
    {"A/B", true, "pin a configuration, change anything, compare the two"},
    {"Code", true, "PTX and SASS, precise and fast, side by side, with the instruction mix"},
};

bool& panel_shown(GuiApp& app, const char* name) {
  auto it = app.ui.panels.find(name);
  if (it == app.ui.panels.end()) {
    bool teaching = false;
    for (const PanelInfo& p : kPanels)
      if (std::string(p.name) == name) teaching = p.teaching;
    it = app.ui.panels.emplace(name, !teaching).first;
  }
  return it->second;
}

// The panels' visibility, kept in imgui.ini beside their positions ([KernelLab][Panels]).
void register_panel_settings(GuiApp& app) {
  ImGuiSettingsHandler h;
  h.TypeName = "KernelLab";
  h.TypeHash = ImHashStr("KernelLab");
  h.UserData = &app;
  h.ReadOpenFn = [](ImGuiContext*, ImGuiSettingsHandler*, const char* name) -> void* {
    return std::string(name) == "Panels" ? reinterpret_cast<void*>(1) : nullptr;
  };
  h.ReadLineFn = [](ImGuiContext*, ImGuiSettingsHandler* self, void*, const char* line) {
    GuiApp& a = *static_cast<GuiApp*>(self->UserData);
    const char* eq = std::strrchr(line, '=');
    if (!eq) return;
    const std::string name(line, eq);
    for (const PanelInfo& p : kPanels)
      if (name == p.name) panel_shown(a, p.name) = std::atoi(eq + 1) != 0;
  };
  h.WriteAllFn = [](ImGuiContext*, ImGuiSettingsHandler* self, ImGuiTextBuffer* out) {
    GuiApp& a = *static_cast<GuiApp*>(self->UserData);
    out->appendf("[KernelLab][Panels]\n");
    for (const PanelInfo& p : kPanels) out->appendf("%s=%d\n", p.name, panel_shown(a, p.name));
    out->append("\n");
  };
  ImGui::GetCurrentContext()->SettingsHandlers.push_back(h);
}

void draw_menu(GuiApp& app) {
  if (!ImGui::BeginMainMenuBar()) return;
  if (ImGui::BeginMenu("View")) {
    bool teaching = false;
    for (const PanelInfo& p : kPanels) {
      if (p.teaching && !teaching) ImGui::Separator(), teaching = true;
      bool& shown = panel_shown(app, p.name);
      if (ImGui::MenuItem(p.name, nullptr, &shown) && shown) ImGui::SetWindowFocus(p.name);
      tip(p.what);
    }
    ImGui::EndMenu();
  }
  tip("show or hide panels; which are shown, and where, is kept between sessions (imgui.ini)");
  ImGui::TextDisabled("%s", app.opt.backend == Backend::Cuda ? device_info().name.c_str()
                                                             : "CPU references (no GPU)");
  ImGui::EndMainMenuBar();
}

// LAB_TRACE_UI=1: each step of a UI frame (a panel, the engine's part, the GL finish) that
// takes longer than 20 ms, on stderr: where a slow frame's time goes.
void report_if_slow(const char* what, std::chrono::steady_clock::time_point t0) {
  static const bool on = std::getenv("LAB_TRACE_UI") != nullptr;
  if (!on) return;
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (ms > 20) std::fprintf(stderr, "kernel-lab: ui: %s took %.0f ms\n", what, ms);
}
template <class F>
void timed(const char* what, F&& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  report_if_slow(what, t0);
}

void draw_ui(GuiApp& app) {
  if (!app.opt.ladder_stage.empty() && app.frames < 2) panel_shown(app, "Ladder") = true;
  timed("menu", [&] { draw_menu(app); });
  const ImGuiViewport* vp = ImGui::GetMainViewport();
  // Below the menu bar (the work area shrinks only from the frame after the bar is first drawn,
  // too late for the first-run layout).
  const float menu_h = ImGui::GetFrameHeight();
  const ImVec2 at(vp->Pos.x, vp->Pos.y + menu_h), size(vp->Size.x, vp->Size.y - menu_h);
  const float side = std::min(460.0f, size.x * 0.35f);
  const float right = size.x - side, top_h = size.y * 0.7f, bottom_y = at.y + top_h;
  // A fixed first-run layout: controls on the left, the image on the right, the tables below
  // it (the occupancy table widest: its curves need 300 px at 1280x720 too). imgui.ini keeps
  // the user's changes.
  auto place = [](float x, float y, float w, float h) {
    ImGui::SetNextWindowPos(ImVec2(x, y), ImGuiCond_FirstUseEver);
    ImGui::SetNextWindowSize(ImVec2(w, h), ImGuiCond_FirstUseEver);
  };
  if (panel_shown(app, "Pipeline"))
    place(at.x, at.y, side, size.y * 0.55f),
        timed("pipeline panel", [&] { draw_pipeline_panel(app); });
  if (panel_shown(app, "Timings"))
    place(at.x, at.y + size.y * 0.55f, side, size.y * 0.45f),
        timed("timings panel", [&] { draw_timings_panel(app); });
  if (panel_shown(app, "Viewport"))
    place(at.x + side, at.y, right, top_h),
        timed("viewport panel", [&] { draw_viewport_panel(app); });
  const float occ_w = right * 0.45f, diff_w = right * 0.3f;
  if (panel_shown(app, "Occupancy"))
    place(at.x + side, bottom_y, occ_w, size.y - top_h),
        timed("occupancy panel", [&] { draw_occupancy_panel(app); });
  if (panel_shown(app, "Diff"))
    place(at.x + side + occ_w, bottom_y, diff_w, size.y - top_h),
        timed("diff panel", [&] { draw_diff_panel(app); });
  if (panel_shown(app, "Device"))
    place(at.x + side + occ_w + diff_w, bottom_y, right - occ_w - diff_w, size.y - top_h),
        timed("device panel", [&] { draw_device_panel(app); });
  // The editor opens collapsed on the right of the viewport's title bar, where it hides nothing:
  // the first view stays the image.
  if (panel_shown(app, "Live kernel")) {
    place(at.x + side + right * 0.45f, at.y, right * 0.55f, size.y * 0.65f);
    ImGui::SetNextWindowCollapsed(app.opt.kernel_file.empty(), ImGuiCond_FirstUseEver);
    timed("live panel", [&] { draw_live_panel(app); });
  }
  // The teaching views open over the viewport, the size of it (--ladder brings the ladder to
  // front at start).
  if (panel_shown(app, "Ladder")) {
    place(at.x + side, at.y, right, top_h);
    if (!app.opt.ladder_stage.empty() && app.frames < 2) ImGui::SetNextWindowFocus();
    timed("ladder panel", [&] { draw_ladder_panel(app); });
  }
  if (panel_shown(app, "A/B")) {
    // Beside the viewport's lower part, so that a scripted A/B shows both the table and the
    // wipe; the user moves it where they like.
    place(at.x + side + right * 0.5f, at.y + size.y * 0.05f, right * 0.5f, size.y * 0.9f);
    if (!app.opt.ab.empty() && app.frames < 2) ImGui::SetNextWindowFocus();
    timed("ab panel", [&] { draw_ab_panel(app); });
  }
  if (panel_shown(app, "Code")) {
    place(at.x + side, at.y, right, top_h);
    if (!app.opt.code.empty() && app.frames < 3) ImGui::SetNextWindowFocus();
    timed("code panel", [&] { draw_code_panel(app); });
  }
}

// --ab STAGE=B, one step per frame as a user would click: pin A, switch the stage to B, compare
// once B has run, then wipe between them in the viewport.
struct AbScript {
  int step = 0;
  uint64_t mark = 0;  // the frame count when B's pipeline went to the engine
};

void script_ab(GuiApp& app, AbScript& script) {
  int& step = script.step;
  AbUi& ab = app.ui.ab;
  const std::string& spec = app.opt.ab;
  const size_t eq = spec.find('=');
  const std::string stage = spec.substr(0, eq),
                    b = eq == std::string::npos ? "" : spec.substr(eq + 1);
  const auto& names = app.view.stage_names;
  const auto it = std::find(names.begin(), names.end(), stage);
  if (step == 0) {
    if (it == names.end() || b.empty()) {
      app.ui.message = "--ab " + spec +
                       ": expected STAGE=VARIANT (or STAGE=fast|precise) of a "
                       "stage in this pipeline";
      step = 5;
      return;
    }
    ab.stage = int(it - names.begin());
    // The viewport shows the stage's first output, so that the wipe has A's and B's to show.
    for (const Op& op : registry())
      if (op.def.name == stage && !op.def.outputs.empty())
        for (size_t k = 0; k < app.view.slots.size(); ++k)
          if (app.view.slots[k].name == op.def.outputs[0]) app.ui.slot = int(k);
    ab.pin_requested = true;
    panel_shown(app, "A/B") = true;
    step = 1;
  } else if (step == 1 && ab.a && !ab.pin_requested) {
    StageConfig& st = app.ui.pipeline.stages.at(size_t(ab.stage));
    if (b == "fast" || b == "precise") {
      st.math = b == "fast" ? MathMode::Fast : MathMode::Precise;
    } else {
      st.variant = b;
      st.block.reset();
    }
    app.ui.pipeline_dirty = true;
    step = 2;
  } else if (step == 2 && !app.ui.pipeline_dirty) {
    script.mark = app.frames;
    step = 3;
  } else if (step == 3 && app.frames > script.mark + 1) {  // a frame of B has come back
    ab.compare_requested = true;
    ab.mode = 1, ab.against = 1;  // the viewport wipes between B and the pinned A
    step = 4;
  }
}

// The panels' layout (imgui.ini in the state folder), persisted by the lab's writer rather than
// ImGui's own file code: one that fails or is killed part-way leaves the previous layout.
// Headless renders keep the default layout, so screenshots do not depend on past sessions.
std::string& ini_path() {
  static std::string path;  // empty: the layout is not persisted
  return path;
}

void save_layout(bool force) {
  ImGuiIO& io = ImGui::GetIO();
  if (ini_path().empty() || !(force || io.WantSaveIniSettings)) return;
  io.WantSaveIniSettings = false;
  size_t size = 0;
  const char* text = ImGui::SaveIniSettingsToMemory(&size);
  try {
    write_output_file(ini_path(), std::string(text, size));
  } catch (const Error& e) {
    std::fprintf(stderr, "kernel-lab: warning: the panels' layout was not saved: %s\n",
                 printable(e.what(), 300).c_str());
    ini_path().clear();  // said once
  }
}

void init_imgui(float scale, bool persist_layout) {
  IMGUI_CHECKVERSION();
  ImGui::CreateContext();
  ImGuiIO& io = ImGui::GetIO();
  io.IniFilename = nullptr;
  if (persist_layout) {
    ini_path() = state_dir() + "/imgui.ini";
    std::error_code ec;
    if (std::filesystem::is_regular_file(ini_path(), ec))
      ImGui::LoadIniSettingsFromDisk(ini_path().c_str());
  }
  ImGui::StyleColorsDark();
  if (scale > 1.0f) {  // high-DPI: every size scaled, and a font rasterised at the scaled size
    ImGui::GetStyle().ScaleAllSizes(scale);
    const char* ttf = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";  // fonts-dejavu-core
    if (!(std::ifstream(ttf) && io.Fonts->AddFontFromFileTTF(ttf, 14.0f * scale)))
      io.FontGlobalScale = scale;  // no TTF: the built-in bitmap font, magnified
  }
}

}  // namespace

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
}  // namespace

int run_gui(const GuiOptions& given) {
  // A start after a GPU fault (recovery.cpp) runs on the configuration that last worked.
  const std::optional<RestartState> restart = take_restart_state();
  GuiOptions opt = given;
  if (restart) apply_restart_state(opt, *restart);
  if (std::getenv("LAB_CRASH_TRACE")) signal(SIGSEGV, crash_trace), signal(SIGABRT, crash_trace);
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
  app.ui.cold_l2 = opt.measure.cold_l2;
  std::snprintf(app.ui.lab_size, sizeof app.ui.lab_size, "%s", opt.lab_size.c_str());
  app.ui.lab_seed = int(opt.lab_seed);
  if (playground_of(opt.pipeline)) app.ui.slot = 99;  // the last slot: the result
  if (restart) {
    using Clock = std::chrono::steady_clock;
    app.recovery.count = restart->count;
    app.recovery.fault_at = Clock::time_point(Clock::duration(restart->fault_ns));
    app.recovery.rebuild_ms =
        std::chrono::duration<double, std::milli>(Clock::now() - app.recovery.fault_at).count();
    app.recovery.waiting = true;  // live_ms comes with the first frame that runs
    app.recovery.restarted = true;
    app.ui.slot = restart->slot;
    char ms[32];
    std::snprintf(ms, sizeof ms, " in %.0f ms", app.recovery.rebuild_ms);
    app.ui.message = restart->message;
    const std::string again = "started itself again";  // recovery.cpp's words
    const size_t at = app.ui.message.find(again);
    if (at != std::string::npos) app.ui.message.insert(at + again.size(), ms);
    std::fprintf(stderr, "kernel-lab: %s\n", app.ui.message.c_str());
  }
  if (restart) recovery_trace(app, "the new start runs");
  app.runner = std::make_unique<Runner>(opt.backend);
  if (opt.backend == Backend::Cuda) app.runner->set_upload_mode(opt.upload);
  set_frame_memory_pinned(opt.backend == Backend::Cuda && opt.upload == UploadMode::Pinned);
  if (opt.backend == Backend::Cuda) app.copy_gbs = measure_copy_bandwidth();
  if (restart) recovery_trace(app, "CUDA context made, copy bandwidth measured");
  open_input(app, opt.input);
  std::snprintf(app.ui.input_edit, sizeof app.ui.input_edit, "%s", opt.input.c_str());
  app.ui.preset_path = config_dir() + "/default.json";
  app.live.trial_timeout_s = float(opt.trial_timeout_s);
  if (opt.backend != Backend::Cuda)
    app.live.memcheck_why = "CPU mode: live kernels do not run, so there is nothing to check";
  else
    find_compute_sanitizer(&app.live.memcheck_why);
  app.live.memcheck = opt.trial_memcheck && app.live.memcheck_why.empty();
  if (opt.trial_memcheck && !app.live.memcheck)
    app.ui.message = "--trial-memcheck: " + app.live.memcheck_why;
  // Tests: the recovery and hang paths without a faulting GPU (job N faults, or never ends), and
  // a shorter hang report.
  if (const char* f = std::getenv("LAB_SIMULATE_GPU_FAULT"))
    app.simulate_fault_at = std::strtoull(f, nullptr, 10);
  if (const char* f = std::getenv("LAB_SIMULATE_GPU_HANG"))
    app.simulate_hang_at = std::strtoull(f, nullptr, 10);
  if (const char* f = std::getenv("LAB_HANG_REPORT_S"))
    app.opt.hang_report_s = std::clamp(std::atof(f), 0.1, 3600.0);
  if (opt.kernel_file.empty()) restore_live_draft(app);  // nothing typed is lost
  if (!opt.kernel_file.empty()) {  // the editor opens on the file and compiles it
    app.live.stage = opt.replace;
    try {
      const std::string src = read_live_file(opt.kernel_file);
      app.live.opts = read_live_options(src, app.live.opts);
      app.live.text.assign(64 * 1024, '\0');
      set_live_source(app, src);
      app.live.compile_when_input = true;  // its trial runs on the first frame
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
    register_panel_settings(app);
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
    register_panel_settings(app);
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
  bool shot = false;  // the screenshot was written
  bool counters_asked = false;
  bool ladder_asked = false, ladder_exported = false;
  AbScript ab_script;
  bool code_asked = false;
  const auto run_start = std::chrono::steady_clock::now();
  try {
    for (int frame = 0; opt.frames == 0 || frame < opt.frames; ++frame, ++ui_frames) {
      const auto t0 = std::chrono::steady_clock::now();
      // A frame that never ends starves OpenGL on the same GPU (on the H200 a UI frame then took
      // ~4 s): once the report is on screen, the lab stops drawing and only watches for the job
      // to end and for the window to close, so that quitting answers at once.
      if (!app.stale.empty() && app.stale_drawn) {
        if (window) {
          glfwPollEvents();
          if (glfwWindowShouldClose(window)) break;
        }
        engine_frame(app, false);
        if (app.stale.empty()) app.stale_drawn = false;  // it ended: draw again
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        continue;
      }
      if (!app.stale.empty()) app.stale_drawn = true;  // this frame draws the report
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
        if (app.recovery.restarted) recovery_trace(app, "the first UI frame, the source open");
      }
      if (scripted && app.live.job.valid())  // reproducible, like jobs (its trial is bounded)
        app.live.job.wait_for(std::chrono::seconds(120));
      if (opt.live_recompile > 0 && frame > 0 && frame % opt.live_recompile == 0 &&
          !app.live.compile_when_input && !app.live.job.valid()) {
        start_live_compile(app);  // as a user pressing "compile and run" again
        if (scripted) app.live.job.wait_for(std::chrono::seconds(120));
      }
      if (app.live.compile_when_input &&
          (app.last_input || playground_of(app.ui.pipeline) || opt.backend != Backend::Cuda)) {
        app.live.compile_when_input = false;
        start_live_compile(app);
        if (scripted) app.live.job.wait_for(std::chrono::seconds(120));
      }
      poll_live(app);
      autosave_live(app, false);
      if (opt.counters && !counters_asked && app.frames > 0)
        app.ui.counters_requested = counters_asked = true;
      if (!opt.ladder_stage.empty() && !ladder_asked && app.frames > 0) {
        ladder_asked = true;
        const auto& names = app.view.stage_names;
        const auto it = std::find(names.begin(), names.end(), opt.ladder_stage);
        if (it == names.end()) {
          app.ui.message = "--ladder " + opt.ladder_stage + ": no such stage in this pipeline";
        } else {
          app.ui.ladder.stage = int(it - names.begin());
          app.ui.ladder.counters = opt.counters;
          app.ui.ladder.requested = true;
          app.ui.ladder.select_view = opt.ladder_view == "roofline" ? 1
                                      : opt.ladder_view == "table"  ? 2
                                                                    : 0;
        }
      }
      // --ladder-export: once the ladder is in and its chart has been drawn.
      if (!opt.ladder_export.empty() && !ladder_exported && app.ui.ladder.result &&
          app.ui.ladder.chart_max.x > app.ui.ladder.chart_min.x) {
        ladder_exported = true;
        export_ladder(app.ui.ladder, opt.ladder_export, true, true, true);
      }
      if (!opt.ab.empty() && app.frames > 0) script_ab(app, ab_script);
      if (scripted && !opt.code.empty())  // reproducible: the SASS the panel asked for is in
        for (auto& run : app.code.sass_runs) run.second.wait_for(std::chrono::seconds(60));
      if (!opt.code.empty() && !code_asked && app.frames > 0) {
        code_asked = true;
        const size_t colon = opt.code.find(':');
        const std::string stage = opt.code.substr(0, colon);
        const auto& names = app.view.stage_names;
        const auto it = std::find(names.begin(), names.end(), stage);
        if (it == names.end()) {
          app.ui.message = "--code " + opt.code + ": no such stage in this pipeline";
        } else {
          app.code.a_key = "S" + std::to_string(it - names.begin());
          app.code.sass = colon != std::string::npos && opt.code.substr(colon + 1) == "sass";
          panel_shown(app, "Code") = true;
        }
      }
      report_if_slow("the frame's start (events, live kernel, scripts)", t0);
      timed("engine frame", [&] { engine_frame(app, scripted); });
      if (app.recovery.restart) break;  // nothing of this process is drawn again (recovery.cpp)
      timed("ImGui new frame", [&] { ImGui_ImplOpenGL3_NewFrame(), ImGui::NewFrame(); });
      timed("the panels", [&] { draw_ui(app); });
      const auto render0 = std::chrono::steady_clock::now();
      ImGui::Render();
      glViewport(0, 0, fb_w, fb_h);
      glClearColor(0.08f, 0.08f, 0.09f, 1.0f);
      glClear(GL_COLOR_BUFFER_BIT);
      ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());
      if (!app.ui.ladder.png_path.empty()) {  // the Ladder panel's "PNG": its chart, as drawn
        LadderUi& L = app.ui.ladder;
        const ImVec2 sc = ImGui::GetIO().DisplayFramebufferScale;
        try {
          write_screenshot_region(L.png_path, fb_w, fb_h, int(L.chart_min.x * sc.x),
                                  int(L.chart_min.y * sc.y), int(L.chart_max.x * sc.x),
                                  int(L.chart_max.y * sc.y));
          L.note = "wrote " + L.png_path;
        } catch (const Error& e) {
          L.note = e.what();
        }
        L.png_path.clear();
      }
      const bool last = opt.frames > 0 && frame == opt.frames - 1;
      if (last && !opt.screenshot.empty())
        write_screenshot(opt.screenshot, fb_w, fb_h), shot = true;
      report_if_slow("rendering", render0);
      const auto sync0 = std::chrono::steady_clock::now();
      if (window)
        glfwSwapBuffers(window);
      else
        glFinish();  // headless: the frame really drawn, as a swap would (and no queue build-up)
      report_if_slow("the GL swap or finish", sync0);
      save_layout(false);
      push_history(app.ui.gl_sync_ms, std::chrono::duration<float, std::milli>(
                                          std::chrono::steady_clock::now() - sync0)
                                          .count());
      const float frame_ms =
          std::chrono::duration<float, std::milli>(std::chrono::steady_clock::now() - t0).count();
      push_history(app.ui.frame_ms, frame_ms);
      if (app.frame_has_input) push_history(app.ui.frame_input_ms, frame_ms), ++input_frames;
      if (app.quit) break;  // the GPU could not be brought back (recovery.cpp)
    }
  } catch (...) {
    ImGui_ImplOpenGL3_Shutdown();
    if (window) ImGui_ImplGlfw_Shutdown(), glfwDestroyWindow(window), glfwTerminate();
    ImGui::DestroyContext();
    throw;
  }
  autosave_live(app, true);
  if (app.recovery.restart) {  // recovery.cpp: a new start gets the device back
    save_layout(true);
    std::printf("gui: %llu frames, %llu results before the GPU fault; starting again\n",
                (unsigned long long)ui_frames, (unsigned long long)app.frames);
    const std::string why = restart_lab(app, ui_frames);  // returns only when it could not
    app.ui.message += " (" + why + ")";
    std::fprintf(stderr, "kernel-lab: error: could not start again: %s; saved %s\n", why.c_str(),
                 save_before_exit(app).c_str());
    app.exit_code = 70;
  }
  // The run ended while drawing had stopped for a hung frame: the report's frame is the shot.
  if (!opt.screenshot.empty() && !shot && app.stale_drawn)
    write_screenshot(opt.screenshot, fb_w, fb_h);
  // A frame that never ends (a kernel in an endless loop) cannot be waited for: the lab says
  // so, saves what the user made, and exits 70 without touching the GPU again.
  // On the CPU references a frame that has not ended is slow, not hung: it is waited for.
  if (opt.backend == Backend::Cpu && app.simulate_hang_at == 0 && app.job.valid() &&
      app.job.wait_for(std::chrono::seconds(2)) != std::future_status::ready) {
    std::printf("gui: waiting for the last frame (the CPU references are slow at this size)\n");
    std::fflush(stdout);
    app.job.wait();
  }
  if (app.job.valid() && app.job.wait_for(std::chrono::seconds(2)) != std::future_status::ready) {
    if (app.stale.empty()) engine_frame(app, false);  // names the launch it waits on
    const std::string saved = save_before_exit(app);
    std::printf("gui: %llu frames, %llu results; a frame did not finish\n",
                (unsigned long long)ui_frames, (unsigned long long)app.frames);
    std::fprintf(stderr,
                 "kernel-lab: error: %s; the GPU does not answer, so Kernel Lab exits without "
                 "waiting for it (saved %s)\n",
                 app.stale.empty() ? "a frame is still running" : app.stale.c_str(), saved.c_str());
    std::fflush(stdout);
    std::fflush(stderr);
    std::_Exit(70);
  }
  auto med = [](const std::vector<float>& h) {
    return median(std::vector<double>(h.begin(), h.end()));
  };
  if (opt.frames > 0) {  // a scripted run reports its timings (medians over the last 240)
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
        opt.backend != Backend::Cuda ? "none (CPU references)"
        : app.runner                 ? upload_mode_name(app.runner->upload_mode())
                                     : upload_mode_name(opt.upload),
        (unsigned long long)input_frames, (unsigned long long)ui_frames, med(app.ui.frame_input_ms),
        app.ui.frame_input_ms.size());
  }
  if (opt.frames > 0 && opt.backend == Backend::Cuda) {
    // Each launch's median over the history, as the Timings panel shows it (to compare with
    // bench), and the not-kernel costs on their own lines.
    for (const auto& [key, hist] : app.ui.launch_us)
      std::printf("gui: launch %s median %.2f us p95 %.2f us (%zu frames)\n", key.c_str(),
                  med(hist), percentile(std::vector<double>(hist.begin(), hist.end()), 95),
                  hist.size());
    std::printf(
        "gui: not kernel time (medians): upload copy %.3f ms, staging %.3f ms, enqueue %.3f ms, "
        "interop map %.3f ms, copy + unmap %.3f ms, GL sync %.3f ms%s\n",
        med(app.ui.upload_dma_ms), med(app.ui.staging_ms), med(app.ui.enqueue_ms),
        med(app.ui.map_ms), med(app.ui.unmap_ms), med(app.ui.gl_sync_ms),
        app.ui.cold_l2 ? "; cold L2" : "");
    if (opt.counters) {
      const CounterReport& c = app.ui.counters.report;
      if (c.ok)
        std::printf("gui: counters for %zu launches in %d passes, %.0f ms\n", c.ranges.size(),
                    c.passes, c.ms);
      else
        std::printf("gui: counters: %s\n", c.why.empty() ? "not collected" : c.why.c_str());
    }
  }
  if (opt.frames > 0 && !opt.ladder_stage.empty()) {  // the ladder's steps, as bench prints
    const LadderUi& L = app.ui.ladder;
    if (L.result) {
      std::printf("gui: ladder %s: %zu steps (%s)\n", L.result->op.c_str(), L.result->steps.size(),
                  L.result->measured.c_str());
      for (const LadderStep& st : L.result->steps)
        std::printf("gui: ladder step %s median %.2f us, %.1f %% of ceiling\n",
                    step_text(st.cfg).c_str(), st.median_us(), L.result->pct_of_ceiling(st));
      if (!opt.ladder_export.empty()) std::printf("gui: ladder export: %s\n", L.note.c_str());
      if (L.ceilings.gflops > 0)
        std::printf("gui: roofline ceilings: %s; %s\n", L.ceilings.gbs_what.c_str(),
                    L.ceilings.gflops_what.c_str());
    } else {
      std::printf("gui: ladder: %s\n", L.running         ? "still running at the last frame"
                                       : L.error.empty() ? "not run"
                                                         : L.error.c_str());
    }
  }
  if (opt.frames > 0 && !opt.ab.empty()) {  // the scripted A/B's figures
    const AbUi& ab = app.ui.ab;
    if (ab.result) {
      const AbCompare& c = *ab.result;
      std::printf(
          "gui: A/B %s: A %s median %.2f us, B %s median %.2f us (B/A %.2f); "
          "B against A max %.3g mean %.3g, %zu of %zu over the looser tolerance; A %s, "
          "B %s against their references\n",
          app.view.stage_names.at(c.stage).c_str(), step_text(c.a.step.cfg).c_str(),
          c.a.step.median_us(), step_text(c.b.step.cfg).c_str(), c.b.step.median_us(),
          c.b.step.median_us() / c.a.step.median_us(), c.a_vs_b.max_abs, c.a_vs_b.mean_abs,
          c.a_vs_b.over, c.a_vs_b.count, c.a.vs_reference.pass() ? "within" : "OVER",
          c.b.vs_reference.pass() ? "within" : "OVER");
    } else {
      std::printf("gui: A/B: %s\n", !ab.error.empty() ? ab.error.c_str()
                                    : ab.running      ? "still running at the last frame"
                                                      : "not compared");
    }
  }
  if (opt.frames > 0 && !opt.kernel_file.empty()) {
    const LiveBuild& b = app.live.last;
    std::printf(
        "gui: live kernel %s: %s; compile %.0f ms, trial %.0f ms, compile to installed %.0f ms, "
        "compile to running %.0f ms%s\n",
        opt.kernel_file.c_str(), app.live.status.c_str(), b.compile_ms,
        app.live.has_trial ? app.live.last_trial.trial_ms : 0.0, app.live.to_installed_ms,
        app.live.to_running_ms, app.live.running ? "" : " (not running)");
  }
  if (opt.frames > 0 && app.live.installed_ms.size() > 1)
    std::printf(
        "gui: live kernel: %zu installs, compile to installed median %.0f ms (first %.0f ms, "
        "its trial process cold)\n",
        app.live.installed_ms.size(),
        median(std::vector<double>(app.live.installed_ms.begin() + 1, app.live.installed_ms.end())),
        app.live.installed_ms[0]);
  if (opt.frames > 0 && opt.kernel_file.empty() && !app.live.status.empty())
    std::printf("gui: editor: %s\n", app.live.status.c_str());
  if (opt.frames > 0 && app.recovery.count > 0)
    std::printf(
        "gui: recovered from %d GPU fault(s): %s in %.0f ms, live frames again %.0f ms after the "
        "fault%s\n",
        app.recovery.count,
        app.recovery.restarted ? "Kernel Lab started again" : "CUDA state rebuilt",
        app.recovery.rebuild_ms, app.recovery.live_ms,
        app.recovery.waiting ? " (no frame ran since)" : "");
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
  for (unsigned t : {app.texture, app.ref_texture, app.ui.ab.heat_texture})
    if (t) glDeleteTextures(1, &t);
  if (app.kp_vbo) glDeleteBuffers(1, &app.kp_vbo);
  if (app.kp_vao) glDeleteVertexArrays(1, &app.kp_vao);
  if (app.colormap_gl.program) glDeleteProgram(app.colormap_gl.program);
  if (app.overlay_gl.program) glDeleteProgram(app.overlay_gl.program);
  save_layout(true);
  ImGui_ImplOpenGL3_Shutdown();
  if (window) {
    ImGui_ImplGlfw_Shutdown();
    glfwDestroyWindow(window);
    glfwTerminate();
  }
  ImGui::DestroyContext();
  return app.exit_code;
}

}  // namespace lab::ui
