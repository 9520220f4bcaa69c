// The GUI's state: one plain struct the panels read and edit, and the engine objects the shell
// owns. No globals; the shell passes a GuiApp& to every panel.
#pragma once

#include <imgui.h>

#include <future>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "app/io/capture.h"
#include "colormap.h"
#include "diff.h"
#include "gui.h"
#include "interop.h"
#include "minmax.h"
#include "runner.h"

namespace lab::ui {

constexpr size_t kHistory = 240;  // frames of timing history kept for plots and percentiles

struct StageDiff {
  std::string stage;
  DiffStats stats;
  std::vector<HostImage> reference;  // the CPU reference outputs, for the viewport
  std::vector<HostImage> output;     // the GPU outputs they were compared with
};

// Device copies of what the viewport shows, written by the engine job and read by the UI thread
// (CUDA-GL interop) when the job's result arrives, before the next job starts: one set suffices.
struct Staging {
  DeviceImage shown;
  DeviceImage keypoints;
  DeviceBuffer range;  // the two min/max reductions' results (4 unsigned)
};

// One block shape of the occupancy sweep: the stage timed with it.
struct SweepPoint {
  Block block;
  double us = 0;         // median GPU time of the stage, queued behind a GPU-side delay
  double occupancy = 0;  // theoretical, this GPU (first launch of the stage)
};

// What one engine job hands the UI: everything the panels show of a frame. Jobs run on a worker
// thread, so the UI keeps drawing while the kernels (or, without a GPU, the CPU references)
// run; panels read only this copy, never the runner.
struct FrameResult {
  bool ran = false;
  std::vector<SlotInfo> slots;
  std::vector<std::string> stage_names;
  std::vector<double> stage_bytes;
  std::vector<double> stage_ms;
  std::vector<LaunchRecord> launches;
  double frame_ms = 0;  // GPU time of the frame (first launch to last, or the graph)
  bool graph = false;   // the frame ran as a CUDA graph
  std::string shown_name;
  ImageDesc shown_desc;
  HostImage shown;               // the shown slot on the host (CPU mode, 8-bit input, no interop)
  bool shown_on_device = false;  // in Staging::shown instead (interop)
  ValueRange shown_range;        // its finite min..max
  HostImage keypoints;           // K x 1 x 3 on the host (no interop), or empty
  bool keypoints_on_device = false;  // in Staging::keypoints instead
  int keypoints_k = 0;
  ImageDesc keypoint_space;  // the NMS map's size: keypoints are in its pixels
  float keypoint_max = 0;    // the highest score
  int probe_x = -1, probe_y = -1;
  float probe_value = 0;  // the shown slot's value at the probe (GPU: read back, 4 bytes)
  bool uploaded = false;  // the job sent a new input frame
  double upload_ms = 0;   // that upload's time (Runner::upload_ms + staging_ms)
  double job_ms = 0;      // the whole engine job on the worker thread (host wall clock)
  int sweep_stage = -1;
  std::vector<SweepPoint> sweep;
  bool compared = false;
  std::vector<StageDiff> diff;
  std::string error;
  bool gpu_lost = false;
};

struct JobInput {
  std::optional<HostImage> frame;
  std::optional<PipelineConfig> pipeline;
  std::string shown_name;
  bool compare = false;
  std::optional<bool> graph;   // switch CUDA-graph mode
  Staging* staging = nullptr;  // device copies for interop; null: host copies
  int probe_x = -1, probe_y = -1;
  int sweep_stage = -1;  // time this stage with every allowed block of its variant
};

struct UiState {
  PipelineConfig pipeline;  // what the pipeline panel edits
  bool pipeline_dirty = false;
  bool graph = false;  // replay the pipeline as a CUDA graph
  bool graph_dirty = false;
  int slot = 1;  // index into Runner::slots(): letterbox
  int view = 0;  // 0: output, 1: CPU reference, 2: |output - reference|
  Colormap cmap = Colormap::Viridis;
  bool auto_range = true;
  float lo = 0, hi = 1;
  float zoom = 1;
  ImVec2 pan{0, 0};
  std::map<std::string, std::vector<float>> launch_us;  // by "stage/kernel"
  std::vector<float> frame_ms;                          // whole frame, wall clock
  std::vector<float> frame_input_ms;                    // the frames that sent a new input
  std::vector<float> pipeline_ms;                       // GPU (or CPU reference) time
  std::vector<float> upload_ms, display_ms, job_ms;     // input upload (frames that sent one);
                                                        // viewport update; engine job
  bool overlay = true;                                  // draw the keypoints
  int probe_x = -1, probe_y = -1;                       // the pixel under the cursor
  std::string message;                                  // the banner: errors, warnings
  std::string preset_path;
  std::vector<StageDiff> diff;  // the last "compare now"
  int compare_every = 0;        // 0: only on request
  bool compare_requested = false;
  int occupancy_launch = 0;  // the launch whose occupancy curve is drawn
  int sweep_requested = -1;  // a stage to sweep in the next job
  int sweep_stage = -1;      // the stage the last sweep timed
  std::vector<SweepPoint> sweep;
  int focus_x = -1, focus_y = -1;  // a pixel to centre in the viewport (diff panel's jump)
  char input_edit[512] = {};       // the source field of the pipeline panel
};

struct GuiApp {
  GuiOptions opt;
  UiState ui;
  std::unique_ptr<Runner> runner;  // used by the engine job only
  std::unique_ptr<io::Capture> capture;
  std::future<FrameResult> job;  // the engine job in flight (destroyed, so joined, first)
  FrameResult view;              // the last finished job's result
  bool gpu_lost = false;         // a sticky CUDA error: GPU work stopped until restart
  GlInterop interop;
  Staging staging;
  unsigned texture = 0;  // the output's GL texture (interop target)
  int tex_w = 0, tex_h = 0;
  bool tex_float = false;    // R32F through the colormap shader, or RGBA8 as it is
  unsigned ref_texture = 0;  // the reference or difference view (host uploads)
  int ref_w = 0, ref_h = 0;
  bool ref_float = false;
  unsigned kp_vbo = 0, kp_vao = 0;  // the keypoints (x, y, score), written by CUDA
  size_t kp_bytes = 0;
  struct {
    unsigned program = 0;
    int proj = -1, origin = -1, scale = -1, hi = -1;
    bool failed = false;
  } overlay_gl;
  struct {
    unsigned program = 0;
    int proj = -1, lo = -1, hi = -1, map = -1, value = -1;
    bool failed = false;  // the shader did not build: colormap on the CPU instead
  } colormap_gl;
  uint64_t frames = 0;
  bool frame_has_input = false;  // this UI frame's engine job got a new input frame
  std::string upload_note;       // how images reach the screen
  uint64_t result_gen = 0;  // counts the job results applied: the viewport re-uploads on change
  std::string uploaded;     // what the viewport texture holds (result, view, colormap, range)
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

// Asks the next engine job to run every stage's CPU reference on the same input slots and diff.
void compare_now(GuiApp& app);
// One engine job: apply a new pipeline or input, run, and copy out what the panels show.
FrameResult run_job(Runner& runner, JobInput in);
// On the UI thread, when a job's result arrives: the output texture and keypoint buffer are
// written (interop, or host upload), timed into the display history.
void display_result(GuiApp& app, const FrameResult& r);
// Replaces the frame source; it opens on the capture thread, so a slow or absent camera never
// blocks the UI (its problem shows in the pipeline panel).
void open_input(GuiApp& app, const std::string& spec);

}  // namespace lab::ui
