// The GUI's state: one plain struct the panels read and edit, and the engine objects the shell
// owns. No globals; the shell passes a GuiApp& to every panel.
#pragma once

#include <imgui.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "app/io/capture.h"
#include "colormap.h"
#include "diff.h"
#include "gui.h"
#include "runner.h"

namespace lab::ui {

constexpr size_t kHistory = 240;  // frames of timing history kept for plots and percentiles

struct StageDiff {
  std::string stage;
  DiffStats stats;
  std::vector<HostImage> reference;  // the CPU reference outputs, for the viewport
};

struct UiState {
  PipelineConfig pipeline;  // what the pipeline panel edits
  bool pipeline_dirty = false;
  int slot = 1;  // index into Runner::slots(): letterbox
  int view = 0;  // 0: output, 1: CPU reference, 2: |output - reference|
  Colormap cmap = Colormap::Viridis;
  bool auto_range = true;
  float lo = 0, hi = 1;
  float zoom = 1;
  ImVec2 pan{0, 0};
  std::map<std::string, std::vector<float>> launch_us;  // by "stage/kernel"
  std::vector<float> frame_ms;                          // whole frame, wall clock
  std::vector<float> pipeline_ms;                       // GPU (or CPU reference) time
  std::string message;                                  // the banner: errors, warnings
  std::string preset_path;
  std::vector<StageDiff> diff;  // the last "compare now"
  int compare_every = 0;        // 0: only on request
  char input_edit[512] = {};    // the source field of the pipeline panel
};

struct GuiApp {
  GuiOptions opt;
  UiState ui;
  std::unique_ptr<Runner> runner;
  std::unique_ptr<io::Capture> capture;
  bool gpu_lost = false;  // a sticky CUDA error: GPU work stopped until restart
  unsigned texture = 0;   // the viewport's GL texture
  int tex_w = 0, tex_h = 0;
  bool tex_float = false;  // R32F through the colormap shader, or RGBA8 as it is
  struct {
    unsigned program = 0;
    int proj = -1, lo = -1, hi = -1, map = -1, value = -1;
    bool failed = false;  // the shader did not build: colormap on the CPU instead
  } colormap_gl;
  uint64_t frames = 0;
  std::string upload_note;  // how images reach the screen
  HostImage shown;          // what the viewport shows, on the host (for the pixel probe)
  HostImage shown_ref;      // the CPU reference of the same slot, when compared
  double copy_gbs = 0;      // device copy bandwidth, measured at start (GPU)
};

// Adds a tooltip to the last item.
void tip(const char* text);
// Pushes a value into a bounded history.
void push_history(std::vector<float>& h, float v);

// The panels, one file each (panel_<name>.cpp).
void draw_pipeline_panel(GuiApp& app);
void draw_viewport_panel(GuiApp& app);
void draw_timings_panel(GuiApp& app);
void draw_occupancy_panel(GuiApp& app);
void draw_diff_panel(GuiApp& app);
void draw_device_panel(GuiApp& app);

// Runs the CPU reference of every stage on the current slots and diffs them (GPU backend).
void compare_now(GuiApp& app);
// Replaces the frame source; it opens on the capture thread, so a slow or absent camera never
// blocks the UI (its problem shows in the pipeline panel).
void open_input(GuiApp& app, const std::string& spec);

}  // namespace lab::ui
