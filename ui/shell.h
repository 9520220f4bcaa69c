// What the GUI shell (gui.cpp) calls beside Dear ImGui's own steps: the panels' list, menu and
// first-run layout, the layout's persistence, and LAB_TRACE_UI's timing of a frame's steps
// (panels.cpp).
#pragma once

#include <chrono>

namespace lab::ui {

struct GuiApp;

// Makes the Dear ImGui context: dark style, fonts and sizes at `scale`, and, with
// `persist_layout`, the panels' layout read from the state folder's imgui.ini.
void init_imgui(float scale, bool persist_layout);
// The panels' visibility, kept in imgui.ini beside their positions ([KernelLab][Panels]).
void register_panel_settings(GuiApp& app);
// Writes the layout when ImGui asks (or `force`), through the lab's writer; a failure is said once.
void save_layout(bool force);
// The menu bar and every shown panel, each placed on first use.
void draw_ui(GuiApp& app);
// Whether a panel is shown (teaching panels start hidden); the reference can switch it.
bool& panel_shown(GuiApp& app, const char* name);

// LAB_TRACE_UI: a step of the UI frame that took longer than 20 ms, on stderr.
void trace_ui(bool on);
void report_if_slow(const char* what, std::chrono::steady_clock::time_point t0);
template <class F>
void timed(const char* what, F&& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  report_if_slow(what, t0);
}

}  // namespace lab::ui
