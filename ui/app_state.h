// The GUI's state: one plain struct the panels read and edit, and the engine objects the shell
// owns. No globals; the shell passes a GuiApp& to every panel.
#pragma once

#include <imgui.h>

#include <atomic>
#include <chrono>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ab_compare.h"
#include "capture.h"
#include "colormap.h"
#include "diff.h"
#include "exercise_file.h"
#include "explain.h"
#include "frame_budget.h"
#include "gui.h"
#include "interop.h"
#include "ladder.h"
#include "live.h"
#include "measure.h"
#include "minmax.h"
#include "panel_code.h"
#include "roofline.h"
#include "runner.h"
#include "subprocess.h"
#include "text.h"
#include "kernel_host.h"

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

// A long job's progress (a ladder's steps, an A/B compare's parts), written by the engine job and
// read by the UI thread (the progress bar, and the hang report, which waits on the last step
// rather than the job's start).
struct JobProgress {
  std::atomic<size_t> done{0}, total{0};
  std::atomic<int64_t> last_step_ns{0};  // steady_clock, since its epoch
  std::atomic<bool> stop{false};         // the user pressed "stop": ends after the step
};

// The ladder a job runs: every step of one stage (run_ladder), then, on a GPU, the roofline's
// compute ceiling (an SGEMM) in the same run.
struct LadderRequest {
  size_t stage = 0;
  LadderSpec spec;
  CounterCollector* counters = nullptr;
  std::shared_ptr<JobProgress> progress;
};

// A/B compare (panel_ab.cpp): stage i with the pinned configuration A against its current one.
struct AbRequest {
  size_t stage = 0;
  ResolvedStage a;
  CounterCollector* counters = nullptr;
  std::shared_ptr<JobProgress> progress;  // its parts, as they end
};

// What one engine job hands the UI: everything the panels show of a frame. Jobs run on a worker
// thread, so the UI keeps drawing while the kernels (or, without a GPU, the CPU references)
// run; panels read only this copy, never the runner.
struct FrameResult {
  bool ran = false;
  bool lab = false;                     // a playground ran (its inputs are generated, not frames)
  std::string lab_variant, lab_config;  // its variant, and "block math"
  std::vector<SlotInfo> slots;
  std::vector<std::string> stage_names;
  std::vector<double> stage_bytes;
  std::vector<double> stage_ms;
  std::vector<LaunchRecord> launches;
  double frame_ms = 0;       // GPU time of the frame (first launch to last, or the graph)
  bool graph = false;        // the frame ran as a CUDA graph
  bool graph_split = false;  // ... as graphs split at a stage in the kernel host
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
  double upload_dma_ms = 0, staging_ms = 0;  // its copy (GPU) and host staging copy
  double enqueue_ms = 0;  // host time to enqueue the frame's launches (hidden by the delay)
  bool cold_l2 = false;   // timed with the L2 flushed first
  bool counted = false;   // hardware counters were collected (counters)
  CounterRun counters;    // per launch of this frame, or the reason they are unavailable
  double job_ms = 0;      // the whole engine job on the worker thread (host wall clock)
  // The device's state beside the timed run (StateSampler's cached snapshot, a few per second).
  DeviceState state_start, state_end;
  int sweep_stage = -1;
  std::vector<SweepPoint> sweep;
  bool compared = false;
  std::vector<StageDiff> diff;
  std::optional<ResolvedStage> pinned;        // the configuration "pin A" asked for
  std::shared_ptr<const AbCompare> ab;        // an A/B compare's result ...
  std::shared_ptr<const Explanation> ab_why;  // ... why B is faster or slower ...
  std::string ab_error;                       // ... or why there is none
  bool ladder_ran = false;  // a ladder was asked for: its result, or why there is none
  std::shared_ptr<const Ladder> ladder;
  std::shared_ptr<const std::vector<Explanation>> ladder_why;  // step k against step k - 1
  RoofCeilings ceilings;  // measured after it (GPU); empty on the CPU
  std::string ladder_error;
  std::string error;
  bool gpu_lost = false;
  // A live kernel failed in the kernel host (faulted, trapped, crashed, overran the deadline):
  // "frame N: stage blur, variant user, ..."; the frame is lost, the lab's own context is fine.
  std::string host_fault;
};

// A playground's inputs, generated by the engine job (large arrays take a moment).
struct LabRequest {
  std::string size;
  uint64_t seed = 1;
};

struct JobInput {
  std::optional<HostImage> frame;
  std::shared_ptr<const HostImage> shared_frame;  // or this one (the GUI keeps it for trials)
  std::optional<LabRequest> lab;  // with a playground pipeline: (re)generate its inputs
  std::optional<PipelineConfig> pipeline;
  std::string shown_name;
  bool compare = false;
  std::optional<bool> graph;   // switch CUDA-graph mode
  Staging* staging = nullptr;  // device copies for interop; null: host copies
  int probe_x = -1, probe_y = -1;
  int sweep_stage = -1;                  // time this stage with every allowed block of its variant
  std::optional<LadderRequest> ladder;   // run a ladder after the frame
  int pin_stage = -1;                    // hand back this stage's configuration (A/B's "pin A")
  std::optional<AbRequest> ab;           // run an A/B compare after the frame
  MeasureOptions measure;                // how the frame is timed: as bench times it
  CounterCollector* counters = nullptr;  // collect hardware counters after the timed run
  StateSampler* sampler = nullptr;       // the device's state beside the timed run
  bool simulate_fault = false;  // tests: throw a sticky CUDA error, as a faulting kernel would
  // LAB_TRACE_RECOVERY: the first frame after a GPU fault says when each of its steps ended
  // (milliseconds since the fault), to find what the driver holds back.
  std::optional<std::chrono::steady_clock::time_point> trace_since;
  bool simulate_hang = false;        // tests: never return, as a frame with an endless kernel
  bool simulate_host_fault = false;  // tests: a live kernel's fault in the kernel host
  // The kernel host (live kernels run there): the kernel to install before this frame, or an
  // uninstall when the pipeline no longer has one.
  KernelHost* host = nullptr;
  std::shared_ptr<const LiveKernel> install;
  std::string install_stage;
  bool uninstall = false;
};

// The Ladder panel (panel_ladder.cpp): what to run, the run in flight, its result and exports.
struct LadderUi {
  int stage = 0;  // index into the pipeline's stages
  LadderSpec spec;
  bool counters = false;   // collect hardware counters for each step (GPU, slower)
  bool requested = false;  // the next job runs it
  bool running = false;
  std::shared_ptr<JobProgress> progress = std::make_shared<JobProgress>();
  std::shared_ptr<const Ladder> result;
  std::shared_ptr<const std::vector<Explanation>> why;  // step k + 1 against step k
  int why_step = 0;                                     // which of them the "why" tab shows
  RoofCeilings ceilings;
  std::string error;
  int bars = 0;                // the bar chart shows 0: median time, 1: percent of the ceiling
  int select_view = -1;        // a tab to bring to front once (0 chart, 1 roofline, 2 table, 3 why)
  bool orin_roof = true;       // the roofline also shows Orin's (estimated) roofs
  char export_base[256] = {};  // where the exports go: <base>.csv, .json, .png
  std::string note;            // the last export's result
  // The chart's rectangle on screen, for the PNG export after the frame is rendered.
  ImVec2 chart_min{0, 0}, chart_max{0, 0};
  std::string png_path;  // set: write the chart after this frame's render
};

// The A/B panel (panel_ab.cpp) and the viewport's wipe and flicker.
struct AbUi {
  int stage = 0;
  bool counters = false;
  bool pin_requested = false, compare_requested = false, running = false;
  std::shared_ptr<JobProgress> progress = std::make_shared<JobProgress>();
  std::optional<ResolvedStage> a;  // pinned
  std::shared_ptr<const AbCompare> result;
  std::shared_ptr<const Explanation> why;  // explain(A, B) of the result
  std::string error;
  int output = 0;             // which output the heat map shows
  unsigned heat_texture = 0;  // |B - A| through the colormap (RGBA8)
  int heat_w = 0, heat_h = 0;
  const AbCompare* heat_of = nullptr;  // the result the texture was made from
  // The viewport: 0 no comparison, 1 wipe, 2 flicker; against 0 the CPU reference, 1 pinned A.
  int mode = 0, against = 0;
  float wipe = 0.5f;  // the split, a fraction of the image's width
  bool dragging_wipe = false;
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
  // Costs that are real but not a kernel's, each on its own row: the upload's copy (GPU) and
  // staging copy (host), the host's enqueue, interop map and unmap, the GL sync ending a frame.
  std::vector<float> upload_dma_ms, staging_ms, enqueue_ms, map_ms, unmap_ms, gl_sync_ms;
  std::vector<float> read_ms;  // the source's read of each frame taken (capture thread)
  // The device's state when the current timing histories began and at the newest frame.
  DeviceState timings_start, timings_end;
  bool cold_l2 = false;  // time with the L2 flushed before each frame
  // A still image's frame is sent once (the source hands out the same frame); on: every UI
  // frame sends it again, to time the upload.
  bool resend_input = false;
  bool counters_requested = false;          // "measure counters": the next job collects them
  CounterRun counters;                      // the last collection (by launch), or why none
  std::vector<std::string> counter_stages;  // its stage names (counters.launches[n].stage)
  bool overlay = true;                      // draw the keypoints
  bool tiles = true;                        // a playground's block tiles over its output
  int probe_x = -1, probe_y = -1;           // the pixel under the cursor
  std::string message;                      // the banner: errors, warnings
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
  // Playgrounds: the size and seed fields, a request to regenerate, and each variant's last
  // measured times (GPU time of each frame it ran, ms), by variant, then "block math".
  char lab_size[64] = {};
  int lab_seed = 1;
  bool lab_dirty = false;
  std::string lab_loaded;  // the playground whose inputs the runner holds
  std::map<std::string, std::map<std::string, std::vector<float>>> lab_ms;
  LadderUi ladder;
  AbUi ab;
  std::map<std::string, bool> panels;  // shown or hidden (the View menu), by window name
};

// A compile, its trial (a child process) and, when it passed, the load, on the live worker.
struct LiveResult {
  LiveBuild build;
  bool tried = false;
  TrialReport trial;
  std::shared_ptr<const LiveKernel> kernel;
  std::string error;
  double ms = 0;  // compile start to loaded (or refused)
};

// The live-kernel editor's state.
struct LiveUi {
  std::string stage;  // the stage the kernel replaces ...
  bool add = false;   // ... or, when set, a new stage "user" reading add_slot
  std::string add_slot;
  std::vector<char> text;  // the editor's buffer
  LiveOptions opts;
  std::future<LiveResult> job;
  LiveBuild last;  // the last build: its diagnostics and PTX
  std::shared_ptr<const LiveKernel> running;
  std::string status;
  char file[256] = "my_kernel.cu";
  std::chrono::steady_clock::time_point started;  // of the compile in flight or last
  bool waiting_first_run = false;
  double to_running_ms = 0;  // compile start to the first frame that ran it
  int cursor_line = 1;       // in the editor
  // The trial: a warm child process (used by the live worker only: one compile at a time).
  std::unique_ptr<KernelHost> trial;
  float trial_timeout_s = 2.0f;
  bool memcheck = false;
  std::string memcheck_why;         // empty when compute-sanitizer was found
  bool compile_when_input = false;  // --kernel-file: compile once the first frame is there
  bool has_trial = false;
  TrialReport last_trial;
  double to_installed_ms = 0;        // compile start to installed (compile, trial, load)
  std::vector<double> installed_ms;  // every install's to_installed_ms (scripted summaries)
  // What the installed kernel replaced, to go back to after a fault.
  std::string replaced_variant;
  std::optional<Block> replaced_block;
  // An exercise (--exercise): the file, its lesson and target, and a submission in flight or done
  // (`kernel-lab exercise submit` in a child: the same checks and timing as the command line).
  std::optional<Exercise> exercise;
  std::string exercise_path;
  std::string exercise_kernel;        // where the editor's text is saved to submit it
  bool exercise_slot_shown = false;   // the Viewport turned to the exercise's stage once
  std::unique_ptr<Child> submission;  // killed with its group if the lab quits first
  std::chrono::steady_clock::time_point submitted_at;
  std::string submitted;        // the submission's report, as it arrives
  std::string exercise_sha256;  // of the exercise file: a result of another one is not shown
  // Where the last submission failed: the planes are set to that size (the letterbox's size
  // before, to go back to: nullopt where it was the default) and the Viewport shows the error.
  std::optional<ExerciseFailure> failure;
  bool failure_shown = false;
  std::optional<double> width_before, height_before;
  bool compare_when_run = false;  // compare once the kernel being installed has run
  // Autosave: the text last written, and when.
  std::string saved_text;
  std::chrono::steady_clock::time_point saved_at;
};

struct GuiApp {
  GuiOptions opt;
  UiState ui;
  LiveUi live;
  CodeViewState code;              // the Code panel (PTX / SASS side by side)
  std::unique_ptr<Runner> runner;  // used by the engine job only
  // Live kernels run in the kernel host, a child process (kernel_host.h), never in this one; its
  // child is started at launch and kept warm. Used by the engine job only, like the runner.
  std::unique_ptr<KernelHost> host;
  std::unique_ptr<HostedLaunches> hosted;
  std::shared_ptr<const LiveKernel> host_kernel;  // the one installed there (or asked for)
  std::unique_ptr<io::Capture> capture;
  std::future<FrameResult> job;  // the engine job in flight (destroyed, so joined, first)
  FrameResult view;              // the last finished job's result
  bool gpu_lost = false;         // a sticky CUDA error: GPU work stopped until restart
  GlInterop interop;
  int gl_renewals = 0;     // OpenGL contexts made again after the driver reset one (gui.cpp)
  double gl_renew_ms = 0;  // the last one's time
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
  // The device's state, read a few times a second (not every frame) for the Device panel's
  // plots and beside each engine job's timed run.
  std::unique_ptr<StateSampler> sampler = std::make_unique<StateSampler>();
  std::unique_ptr<CounterCollector> counters;  // CUPTI, made on the first "measure counters"
  // The last frame sent to the engine (a live kernel's trial runs on it), and one to send again
  // after a GPU reset (a still image is captured once).
  std::shared_ptr<const HostImage> last_input;
  std::optional<HostImage> resend;
  // The engine job in flight: when it started and which frame it is; a report once it has run
  // longer than opt.hang_report_s (the Timings and Diff panels then say they are stale).
  std::chrono::steady_clock::time_point job_started;
  uint64_t job_number = 0;
  std::string stale;
  std::string stale_launch;  // the launch it waits on, found when the hang was first seen
  bool stale_drawn = false;  // a frame with the report was drawn: no more GL until it ends
  // Recovery from a sticky fault (recovery.cpp).
  struct {
    int count = 0;
    std::chrono::steady_clock::time_point fault_at;
    double rebuild_ms = 0;   // fault seen to CUDA state rebuilt
    double live_ms = 0;      // fault seen to the next frame that ran
    bool waiting = false;    // for that frame
    bool restart = false;    // the device could not be had back here: start the lab again
    bool restarted = false;  // this process is that new start
    std::string restart_message;
    bool hosted = false;  // the last fault was in the kernel host's child, not in this process
  } recovery;
  int exit_code = 0;  // 70 when the GPU could not be brought back
  bool quit = false;
};

// The panels, one file each (panel_<name>.cpp).
void draw_pipeline_panel(GuiApp& app);
void draw_viewport_panel(GuiApp& app);
// The Viewport's view in words: 0 "output", 1 "CPU reference", 2 "|output - reference|".
const char* viewport_view_name(int view);
void draw_timings_panel(GuiApp& app);
// One frame's budget from the panels' histories (medians): what the Timings panel shows.
FrameBudget gui_frame_budget(const GuiApp& app);
void draw_occupancy_panel(GuiApp& app);
void draw_diff_panel(GuiApp& app);
void draw_device_panel(GuiApp& app);
void draw_ladder_panel(GuiApp& app);
// Writes the ladder's table as <base>.csv and .json, and asks for its chart as <base>.png (written
// after the frame renders); the result in ui.note.
void export_ladder(LadderUi& ui, const std::string& base, bool csv, bool json, bool png);
// After the frame renders: the chart export_ladder asked for, read from the framebuffer as drawn.
void write_asked_chart(GuiApp& app, int fb_w, int fb_h);
void draw_ab_panel(GuiApp& app);
void draw_live_panel(GuiApp& app);
void draw_code_panel(GuiApp& app);
// The live kernel: compile the editor's source on a worker; take a finished compile (installs
// the kernel as its stage's "user" variant); note the first frame that ran it.
void start_live_compile(GuiApp& app);
// Puts `source` in the editor (growing its buffer when needed).
void set_live_source(GuiApp& app, const std::string& source);
void poll_live(GuiApp& app);
void live_frame_ran(GuiApp& app, const FrameResult& r);
// The editor's autosave: written when the text changed and `force` (a compile) or a few seconds
// have passed; restore_live_draft() puts the last one back in the editor at start-up.
void autosave_live(GuiApp& app, bool force);
void restore_live_draft(GuiApp& app);
// At start: the trial's limits and memcheck, and the editor: the file given (compiled on the
// first frame) or the last autosave.
void init_live(GuiApp& app);
// Once per UI frame: a compile asked for at start runs once there is input, a finished compile is
// installed, the editor autosaved; `wait`: a scripted run waits for a compile in flight.
void update_live(GuiApp& app, bool wait);
// The pipeline with every live kernel taken out (the replaced stages at their default variant,
// added stages removed): what a trial child can rebuild, and what a fault goes back to.
PipelineConfig without_live(const PipelineConfig& p);

// After a sticky CUDA error (recovery.cpp): the faulting live kernel uninstalled (its text kept),
// every CUDA object of the old context dropped, the device reset, the runner, interop and input
// rebuilt, and the last frame sent again; one banner says so. When the device cannot be brought
// back, the editor and the pipeline are saved and the lab quits with code 70.
void recover_gpu(GuiApp& app, const std::string& error);
// The kernel host for the runner: a child started and kept warm, the runner's live stages sent
// to it (at start, and with each new runner after a GPU reset).
void attach_kernel_host(GuiApp& app);
// After a live kernel failed in the kernel host (FrameResult::host_fault): the kernel
// uninstalled (its text kept in the editor), the stage back on the variant it had, a banner; the
// host has already started a fresh child, and the next frame runs. Nothing in this process is
// rebuilt: its CUDA context never saw the fault.
void recover_host_fault(GuiApp& app, const std::string& fault);
// Every live kernel taken out of the pipeline the UI edits (the replaced stage back on the
// variant it had, an added stage removed); what was done, in words ("blur back on v4_rows").
std::string uninstall_live(GuiApp& app);
// LAB_TRACE_RECOVERY=1: a recovery's steps on stderr, with the time since the fault (diagnosing
// a driver that is slow to give the device back).
void recovery_trace(const GuiApp& app, const char* step);

// Starting again after a fault. The H200's driver gives no new context to a process that
// faulted, even after cudaDeviceReset: only a new process gets one. The lab then replaces its
// own image (execv of /proc/self/exe, same command line, same PID, so a shell or a test waiting
// on it still does) and hands the new one, through the environment, the last configuration that
// worked, the banner, and when the fault happened (steady_clock is CLOCK_MONOTONIC, one clock for
// both images).
struct RestartState {
  int count = 0;             // faults recovered from so far, this one included
  int64_t fault_ns = 0;      // steady_clock at the fault
  uint64_t frames_done = 0;  // UI frames the image before ran (a scripted run's count goes on)
  bool graph = false;
  int slot = 0;
  std::string message;
  PipelineConfig pipeline;
};
// The state a restart left (and clears it from the environment, so children do not see it);
// nothing when this is not a restart.
std::optional<RestartState> take_restart_state();
// The options the new image runs with: the pipeline that worked (the faulting kernel out, its
// text back in the editor from the autosave, not compiled again), the rest of a scripted run.
void apply_restart_state(GuiOptions& opt, const RestartState& s);
// Replaces this process with a new start of the lab; returns only when it could not, saying why.
std::string restart_lab(const GuiApp& app, uint64_t frames_done);
// The new start's first state: the recovery's count and times, the slot shown, the banner.
void resume_after_restart(GuiApp& app, const RestartState& restart);
// The loop ended for a restart (recover_gpu): saves the layout, says so, and starts again; when
// that fails, saves the user's work and sets exit code 70.
void restart_after_fault(GuiApp& app, uint64_t ui_frames);
// A last frame that never ends (a kernel in an endless loop) cannot be waited for: the lab says
// so, saves what the user made, and exits 70 without touching the GPU again. On the CPU
// references a frame that has not ended is slow, not hung: it is waited for.
void exit_if_frame_hung(GuiApp& app, uint64_t ui_frames);
// While a hung frame's report is on screen, no more GL: the loop only watches for the job to end
// (true: nothing to draw this frame). A frame that never ends starves OpenGL on the same GPU (on
// the H200 a UI frame then took ~4 s), so drawing stops once the report has been drawn.
bool wait_out_hung_frame(GuiApp& app);

// Saves the editor (autosave) and the pipeline (state_dir()/last_session.json) before an exit
// that cannot wait for the GPU; returns what was saved where, for the message.
std::string save_before_exit(GuiApp& app);

// Asks the next engine job to run every stage's CPU reference on the same input slots and diff.
void compare_now(GuiApp& app);
// One engine job: apply a new pipeline or input, run, and copy out what the panels show.
FrameResult run_job(Runner& runner, JobInput in);
// Once per UI frame: takes a finished job's result into the panels' state and starts the next
// job from the UI's requests (with `wait`, waits for it: scripted, reproducible runs).
void engine_frame(GuiApp& app, bool wait);
// On the UI thread, when a job's result arrives: the output texture and keypoint buffer are
// written (interop, or host upload), timed into the display history.
void display_result(GuiApp& app, const FrameResult& r);
// Replaces the frame source; it opens on the capture thread, so a slow or absent camera never
// blocks the UI (its problem shows in the pipeline panel).
void open_input(GuiApp& app, const std::string& spec);

}  // namespace lab::ui
