// The GUI: Dear ImGui over GLFW + OpenGL 3.3, or, headless, over an EGL context rendering into
// an offscreen framebuffer (how it is tested without a display).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "measure.h"
#include "pipeline.h"
#include "runner.h"

namespace lab::ui {

// The environment's hooks into the GUI, read once (read_gui_hooks) into the options; README's
// table lists them. The test hooks make the fault, hang and restart paths run without a GPU
// that faults; the traces diagnose a slow frame or a slow recovery.
struct GuiHooks {
  bool trace_ui = false;           // LAB_TRACE_UI: a step of a UI frame over 20 ms, on stderr
  bool trace_recovery = false;     // LAB_TRACE_RECOVERY: a recovery's steps, timed from the fault
  bool crash_trace = false;        // LAB_CRASH_TRACE: a backtrace on SIGSEGV and SIGABRT
  uint64_t simulate_fault_at = 0;  // LAB_SIMULATE_GPU_FAULT=N (test): engine job N faults
  uint64_t simulate_hang_at = 0;   // LAB_SIMULATE_GPU_HANG=N (test): job N never ends
  // LAB_SIMULATE_HOST_FAULT=N (test): engine job N's live kernel faults in the kernel host.
  uint64_t simulate_host_fault_at = 0;
  uint64_t simulate_gl_reset_at = 0;    // tests: the driver resets the GL context after UI frame N
  bool simulate_reset_failure = false;  // LAB_SIMULATE_RESET_FAILURE (test): the reset refuses
  bool no_restart = false;     // LAB_NO_RESTART (test): a fault past recovery exits 70, no restart
  bool restart_spawn = false;  // LAB_RESTART_MODE=spawn (test): restart as a child, not execv
  double hang_report_s = 0;    // LAB_HANG_REPORT_S (test): GuiOptions::hang_report_s; 0: unset
  bool no_interop = false;     // LAB_NO_INTEROP: frames reach OpenGL through the host
};
GuiHooks read_gui_hooks();

struct GuiOptions {
  PipelineConfig pipeline;
  std::string input = "synthetic";
  Backend backend = Backend::Cpu;
  size_t max_pixels = 100'000'000;
  bool accept_truncated = false;  // decode truncated PNG/JPEG files, with a warning
  bool headless = false;
  int frames = 0;          // stop after this many frames; 0: run until the window closes
  std::string screenshot;  // write the last frame's pixels here as PNG
  int width = 1600, height = 900;
  bool graph = false;  // start with the pipeline replayed as a CUDA graph
  bool hide_keypoints = false;
  bool free_run = false;
  float ui_scale = 0;  // fonts and sizes; 0: the monitor's content scale (1 headless)
  UploadMode upload = UploadMode::Pageable;  // how input frames reach the GPU
  MeasureOptions measure;    // how each frame is timed (queue-ahead delay, cold L2), as in bench
  bool counters = false;     // press "measure counters" once the first frame has run
  std::string dump_texture;  // write the output texture's texels here as .npy (tests)
  std::string lab_size;      // a playground's problem size (empty: its default)
  uint64_t lab_seed = 1;     // and the seed of its generated inputs
  std::string kernel_file;   // a live kernel to open in the editor and compile at start ...
  std::string replace;       // ... for this stage
  // An exercise (exercise_file.h): its starter in the editor for its stage, compiled at start,
  // its lesson beside it, and a "submit" button (`kernel-lab exercise submit` in a child).
  std::string exercise;
  double trial_timeout_s = 2.0;   // a new live kernel's trial run: its time limit ...
  double frame_deadline_s = 2.0;  // each frame of an installed one in the kernel host
  bool trial_memcheck = false;    // ... and whether it runs under compute-sanitizer
  int live_recompile = 0;         // press "compile and run" again every N frames (the trial warm)
  // Run the ladder of this stage once the first frame has run (as the Ladder panel's button
  // does; with `counters`, collecting them), its panel in front on `ladder_view` (chart,
  // roofline, table, why); a scripted run waits for it and prints its steps.
  std::string ladder_stage;
  std::string ladder_view = "chart";
  std::string ladder_export;  // when the ladder is done: <base>.csv, .json and the chart .png
  // A scripted A/B: "STAGE=VARIANT" (or STAGE=fast, STAGE=precise) pins the stage as configured
  // as A, switches it to that variant (or math mode) as B, compares them, and opens the A/B
  // panel with the viewport wiping between the two.
  std::string ab;
  // Open the Code panel on this stage's kernel ("STAGE", or "STAGE:sass" for its SASS).
  std::string code;
  // A hung frame is reported after this long (the Timings and Diff panels then say so).
  double hang_report_s = 5.0;
  GuiHooks hooks;
  // The command line as given (argv[1..]): after a GPU fault that cannot be recovered from in
  // place, the lab starts itself again with it (recovery.cpp).
  std::vector<std::string> command_line;
};

// Returns a process exit code; throws Error for what the CLI maps to sysexits (no display,
// no GL context, a screenshot that cannot be written).
int run_gui(const GuiOptions& opt);

}  // namespace lab::ui
