// The panels: their list (the View menu's order), the menu bar, the first-run layout, and the
// layout kept in imgui.ini; LAB_TRACE_UI's timing of a frame's steps.
#include <imgui.h>
#include <imgui_internal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "app_state.h"
#include "output_file.h"
#include "presets.h"
#include "printable.h"
#include "script.h"
#include "shell.h"
#include "widgets.h"

namespace lab::ui {

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

}  // namespace

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

namespace {

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

bool g_trace_ui = false;

}  // namespace

// LAB_TRACE_UI=1: each step of a UI frame (a panel, the engine's part, the GL finish) that
// takes longer than 20 ms, on stderr: where a slow frame's time goes.
void trace_ui(bool on) {
  g_trace_ui = on;
}
void report_if_slow(const char* what, std::chrono::steady_clock::time_point t0) {
  if (!g_trace_ui) return;
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (ms > 20) std::fprintf(stderr, "kernel-lab: ui: %s took %.0f ms\n", what, ms);
}

void draw_ui(GuiApp& app) {
  open_scripted_panels(app);
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
  // With the editor open from the start (a kernel file, an exercise), the image takes the part
  // of the row the editor does not cover, so that none of it is hidden behind the editor.
  const bool editor_open =
      panel_shown(app, "Live kernel") && !(app.opt.kernel_file.empty() && app.opt.exercise.empty());
  if (panel_shown(app, "Viewport"))
    place(at.x + side, at.y, editor_open ? right * 0.45f : right, top_h),
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
  // the first view stays the image; open (a kernel file, an exercise), beside the image.
  if (panel_shown(app, "Live kernel")) {
    place(at.x + side + right * 0.45f, at.y, right * 0.55f, size.y * 0.65f);
    ImGui::SetNextWindowCollapsed(app.opt.kernel_file.empty() && app.opt.exercise.empty(),
                                  ImGuiCond_FirstUseEver);
    timed("live panel", [&] { draw_live_panel(app); });
  }
  // The teaching views open over the viewport, the size of it (--ladder brings the ladder to
  // front at start).
  if (panel_shown(app, "Ladder")) {
    place(at.x + side, at.y, right, top_h);
    if (scripted_focus(app, "Ladder")) ImGui::SetNextWindowFocus();
    timed("ladder panel", [&] { draw_ladder_panel(app); });
  }
  if (panel_shown(app, "A/B")) {
    // Beside the viewport's lower part, so that a scripted A/B shows both the table and the
    // wipe; the user moves it where they like.
    place(at.x + side + right * 0.5f, at.y + size.y * 0.05f, right * 0.5f, size.y * 0.9f);
    if (scripted_focus(app, "A/B")) ImGui::SetNextWindowFocus();
    timed("ab panel", [&] { draw_ab_panel(app); });
  }
  if (panel_shown(app, "Code")) {
    place(at.x + side, at.y, right, top_h);
    if (scripted_focus(app, "Code")) ImGui::SetNextWindowFocus();
    timed("code panel", [&] { draw_code_panel(app); });
  }
}

// The panels' layout (imgui.ini in the state folder), persisted by the lab's writer rather than
// ImGui's own file code: one that fails or is killed part-way leaves the previous layout.
// Headless renders keep the default layout, so screenshots do not depend on past sessions.
namespace {
std::string& ini_path() {
  static std::string path;  // empty: the layout is not persisted
  return path;
}
}  // namespace

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

}  // namespace lab::ui
