// Recovery from a sticky CUDA error in the lab's own process (a live kernel that passed its trial
// can still fault on a later frame): the context is unusable, so everything made in it goes, the
// device is reset, and the lab comes back on the last configuration that worked, with no restart.
// Where the driver gives this process no new context (the H200's), the lab starts itself again
// on that configuration instead.
#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <future>
#include <thread>

#include <fcntl.h>
#include <unistd.h>

#include "app_state.h"
#include "presets.h"
#include "shell.h"
#include "subprocess.h"

namespace lab::ui {

void recovery_trace(const GuiApp& app, const char* step) {
  if (!app.opt.hooks.trace_recovery) return;
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() -
                                                              app.recovery.fault_at)
                        .count();
  std::fprintf(stderr, "kernel-lab: recovery: %s (%.0f ms after the fault)\n", step, ms);
}

PipelineConfig without_live(const PipelineConfig& p) {
  PipelineConfig out;
  for (const StageConfig& s : p.stages) {
    if (s.op == "user") continue;  // an added live stage
    StageConfig c = s;
    if (c.custom) c.custom.reset(), c.variant.clear(), c.block.reset();
    out.stages.push_back(std::move(c));
  }
  return out;
}

std::string save_before_exit(GuiApp& app) {
  std::string saved;
  try {
    autosave_live(app, true);
    if (!app.live.saved_text.empty()) saved = "your kernel in " + live_draft_path();
  } catch (const Error& e) {
    saved = std::string("the editor could not be saved: ") + e.what();
  }
  const std::string preset = (std::filesystem::path(state_dir()) / "last_session.json").string();
  try {
    save_preset(preset, without_live(app.ui.pipeline));
    saved += (saved.empty() ? "" : ", ") + std::string("the pipeline in ") + preset +
             " (kernel-lab gui --preset " + preset + ")";
  } catch (const Error& e) {
    saved +=
        std::string(saved.empty() ? "" : ", ") + "the pipeline could not be saved: " + e.what();
  }
  return saved;
}

namespace {
constexpr const char* kRestartEnv = "LAB_RESTART";  // "count fault_ns frames_done graph slot"
constexpr const char* kRestartMessageEnv = "LAB_RESTART_MESSAGE";
constexpr const char* kRestartPipelineEnv = "LAB_RESTART_PIPELINE";  // a preset's JSON
}  // namespace

std::optional<RestartState> take_restart_state() {
  // LAB_RESTART_MODE=spawn: a child of the faulted process started this image; that process
  // exits normally (its CUDA context torn down in order), and this one waits for it to be gone.
  if (const char* parent = std::getenv("LAB_RESTART_PARENT")) {
    const pid_t p = pid_t(std::atoll(parent));
    for (int i = 0; i < 1000 && ::getppid() == p; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    unsetenv("LAB_RESTART_PARENT");
  }
  const char* nums = std::getenv(kRestartEnv);
  const char* msg = std::getenv(kRestartMessageEnv);
  const char* pipe = std::getenv(kRestartPipelineEnv);
  std::optional<RestartState> out;
  RestartState s;
  long long fault = 0;
  unsigned long long frames = 0;
  int graph = 0;
  if (nums && msg && pipe &&
      std::sscanf(nums, "%d %lld %llu %d %d", &s.count, &fault, &frames, &graph, &s.slot) == 5 &&
      s.count > 0) {
    // From the environment: held to ranges the lab itself can write.
    s.count = std::min(s.count, 1000);
    s.slot = std::clamp(s.slot, 0, 99);
    s.fault_ns = fault;
    s.frames_done = std::min<unsigned long long>(frames, 1u << 30);
    s.graph = graph != 0;
    s.message = msg;
    s.pipeline = preset_from_json(pipe).pipeline;  // a bad one gives the default pipeline
    out = std::move(s);
  }
  unsetenv(kRestartEnv);
  unsetenv(kRestartMessageEnv);
  unsetenv(kRestartPipelineEnv);
  return out;
}

void apply_restart_state(GuiOptions& opt, const RestartState& s) {
  opt.pipeline = s.pipeline;
  opt.graph = s.graph;
  // The kernel that faulted is not compiled again: the editor gets it back from the autosave.
  opt.kernel_file.clear();
  opt.replace.clear();
  opt.live_recompile = 0;
  // A scripted run goes on for the frames it had left (a few at least, to show live frames).
  if (opt.frames > 0)
    opt.frames = int(std::max<int64_t>(int64_t(opt.frames) - int64_t(s.frames_done), 10));
}

std::string restart_lab(const GuiApp& app, uint64_t frames_done) {
  char nums[128];
  std::snprintf(nums, sizeof nums, "%d %lld %llu %d %d", app.recovery.count + 1,
                (long long)app.recovery.fault_at.time_since_epoch().count(),
                (unsigned long long)frames_done, app.ui.graph ? 1 : 0, app.ui.slot);
  setenv(kRestartEnv, nums, 1);
  setenv(kRestartMessageEnv, app.recovery.restart_message.c_str(), 1);
  setenv(kRestartPipelineEnv, preset_to_json(app.ui.pipeline).c_str(), 1);
  // The test hooks fault once: the new start runs clean.
  unsetenv("LAB_SIMULATE_GPU_FAULT");
  unsetenv("LAB_SIMULATE_RESET_FAILURE");
  // Every descriptor but the standard three closes at exec: the driver's (so the faulted
  // context is torn down), the display's, the trial child's pipes.
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd", ec)) {
    const std::string name = e.path().filename().string();
    const int fd = std::atoi(name.c_str());
    if (fd > 2) ::fcntl(fd, F_SETFD, FD_CLOEXEC);
  }
  std::vector<std::string> args{"kernel-lab"};
  args.insert(args.end(), app.opt.command_line.begin(), app.opt.command_line.end());
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::fflush(stdout);
  std::fflush(stderr);
  if (app.opt.hooks.restart_spawn) {
    setenv("LAB_RESTART_PARENT", std::to_string(::getpid()).c_str(), 1);
    std::string why;
    if (std::unique_ptr<Child> c =
            Child::spawn(args, {ChildIo::Inherit, false, "/proc/self/exe"}, &why)) {
      c->release();  // it goes on; this process's exit tears CUDA down
      std::exit(0);
    }
  }
  ::execv("/proc/self/exe", argv.data());
  return std::string("execv /proc/self/exe: ") + std::strerror(errno);
}

std::string uninstall_live(GuiApp& app) {
  // Back to the last configuration that worked: every live kernel out, the replaced stage on
  // the variant it had before; the kernel's text stays in the editor.
  std::string back;
  PipelineConfig good;
  for (const StageConfig& s : app.ui.pipeline.stages) {
    if (s.op == "user") {
      back += (back.empty() ? "" : "; ") + std::string("the added stage 'user' removed");
      continue;
    }
    StageConfig c = s;
    if (c.custom) {
      c.custom.reset();
      const bool replaced = c.op == app.live.stage;
      c.variant = replaced ? app.live.replaced_variant : "";
      c.block = replaced ? app.live.replaced_block : std::nullopt;
      back += (back.empty() ? "" : "; ") + c.op + " back on " +
              (c.variant.empty() ? "its default variant" : c.variant);
    }
    good.stages.push_back(std::move(c));
  }
  app.ui.pipeline = good;
  app.live.running.reset();
  return back;
}

void recover_host_fault(GuiApp& app, const std::string& fault) {
  app.recovery.fault_at = std::chrono::steady_clock::now();
  const std::string back = uninstall_live(app);
  app.host_kernel.reset();
  app.ui.pipeline_dirty = true;
  app.ui.launch_us.clear();
  app.ui.pipeline_ms.clear();
  app.ui.diff.clear();
  ++app.recovery.count;
  app.recovery.hosted = true;
  app.recovery.rebuild_ms = 0;  // nothing here to rebuild
  app.recovery.waiting = true;  // live_ms: the fault to the next frame that runs
  app.ui.message = fault + ". Kernel Lab lost that frame and goes on" +
                   (back.empty() ? "" : ": " + back) +
                   "; your kernel is still in the editor (the kernel host started a fresh "
                   "process for the next one).";
  std::fprintf(stderr, "kernel-lab: %s\n", app.ui.message.c_str());
}

void recover_gpu(GuiApp& app, const std::string& error) {
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  app.recovery.fault_at = t0;
  // The live worker may be loading a kernel into the dead context: its result is dropped.
  if (app.live.job.valid()) {
    app.live.job.wait();
    app.live.job.get();
    app.live.status = "the compile in flight was dropped by the GPU reset: compile again";
  }
  const std::string back = uninstall_live(app);
  // Nothing of the old context may be touched after the reset: frames in page-locked memory
  // (the capture's and the last input) are copied to pageable memory or dropped first.
  std::optional<HostImage> frame;
  if (app.last_input) frame = HostImage(*app.last_input);
  app.last_input.reset();
  recovery_trace(app, "capture");
  app.capture.reset();
  recovery_trace(app, "runner");
  app.runner.reset();
  recovery_trace(app, "staging");
  app.staging = Staging{};
  recovery_trace(app, "interop");
  app.interop.reset();
  recovery_trace(app, "counters");
  app.counters.reset();
  app.hosted.reset();  // its child's context goes too (a new one starts with the new runner)
  app.host.reset();
  app.host_kernel.reset();
  // The warm trial child's context goes too: the device is then the lab's alone while it is
  // reset (a new child starts when the Live kernel panel is next drawn).
  app.live.trial.reset();
  app.view.launches.clear();  // their kernel handles belong to the old context
  const bool cuda = app.opt.backend == Backend::Cuda;
  recovery_trace(app, "reset");
  std::string why = cuda ? reset_device() : "";
  if (app.opt.hooks.simulate_reset_failure)  // tests: a driver that refuses, as the H200's did
    why = "CUDA-capable device(s) is/are busy or unavailable (simulated for a test)";
  recovery_trace(app, "reset done");
  if (!why.empty()) {
    const std::string saved = save_before_exit(app);
    // A new process gets the device back where this one cannot: start again, unless that
    // would loop (a fault before any frame ran since the last start) or is switched off.
    std::string no_restart;
    if (app.opt.hooks.no_restart)
      no_restart = "LAB_NO_RESTART is set";
    else if (app.recovery.waiting)
      no_restart = "it faulted again before a frame ran since the last recovery";
    else if (::access("/proc/self/exe", X_OK) != 0)
      no_restart = "/proc/self/exe cannot be run";
    if (no_restart.empty()) {
      app.recovery.restart = true;
      app.recovery.restart_message =
          "The GPU faulted (" + error + "). This process could not get the device back (" + why +
          "), so Kernel Lab started itself again" +
          (back.empty() ? "." : "; " + back + ". Your kernel is still in the editor.");
      std::fprintf(stderr, "kernel-lab: the GPU faulted (%s); starting again\n", error.c_str());
      app.quit = true;
      return;
    }
    app.ui.message = "The GPU faulted (" + error + ") and could not be brought back: " + why +
                     "; Kernel Lab cannot start again (" + no_restart +
                     "), so it has to exit; saved " + saved + ".";
    std::fprintf(stderr, "kernel-lab: error: %s\n", app.ui.message.c_str());
    app.gpu_lost = true;
    app.exit_code = 70;
    app.quit = true;
    set_frame_memory_pinned(false);  // the panels read the source until the lab exits
    open_input(app, app.opt.input);
    return;
  }
  app.runner = std::make_unique<Runner>(app.opt.backend);
  if (cuda) app.runner->set_upload_mode(app.opt.upload);
  recovery_trace(app, "new runner made");
  app.interop.init(
      cuda,
      app.opt.hooks.no_interop);  // the texture and buffer are registered again at their next write
  app.uploaded.clear();           // the viewport re-uploads
  recovery_trace(app, "interop");
  open_input(app, app.opt.input);
  recovery_trace(app, "input");
  app.resend = std::move(frame);
  app.ui.pipeline_dirty = true;
  app.ui.graph_dirty = app.ui.graph;
  app.ui.launch_us.clear();
  app.ui.pipeline_ms.clear();
  app.ui.diff.clear();
  app.ui.lab_dirty = playground_of(app.ui.pipeline) != nullptr;  // its inputs were on the device
  app.gpu_lost = false;
  app.recovery.hosted = false;
  if (cuda) attach_kernel_host(app);
  ++app.recovery.count;
  app.recovery.rebuild_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  app.recovery.waiting = true;
  char ms[32];
  std::snprintf(ms, sizeof ms, "%.0f ms", app.recovery.rebuild_ms);
  app.ui.message = "The GPU faulted (" + error + "). Kernel Lab reset the device and rebuilt its " +
                   "CUDA state in " + ms +
                   (back.empty() ? "." : "; " + back + ". Your kernel is still in the editor.");
  std::fprintf(stderr, "kernel-lab: %s\n", app.ui.message.c_str());
}

void resume_after_restart(GuiApp& app, const RestartState& restart) {
  using Clock = std::chrono::steady_clock;
  app.recovery.count = restart.count;
  app.recovery.fault_at = Clock::time_point(Clock::duration(restart.fault_ns));
  app.recovery.rebuild_ms =
      std::chrono::duration<double, std::milli>(Clock::now() - app.recovery.fault_at).count();
  app.recovery.waiting = true;  // live_ms comes with the first frame that runs
  app.recovery.restarted = true;
  app.ui.slot = restart.slot;
  char ms[32];
  std::snprintf(ms, sizeof ms, " in %.0f ms", app.recovery.rebuild_ms);
  app.ui.message = restart.message;
  const std::string again = "started itself again";  // recover_gpu's words
  const size_t at = app.ui.message.find(again);
  if (at != std::string::npos) app.ui.message.insert(at + again.size(), ms);
  std::fprintf(stderr, "kernel-lab: %s\n", app.ui.message.c_str());
  recovery_trace(app, "the new start runs");
}

void restart_after_fault(GuiApp& app, uint64_t ui_frames) {
  // Nothing of this process runs on: its source is closed (a camera has one reader, and the new
  // image opens it) and its last job is waited for, so that no thread is in flight at the exit.
  app.capture.reset();
  if (app.job.valid()) app.job.wait_for(std::chrono::seconds(2));
  save_layout(true);
  std::printf("gui: %llu frames, %llu results before the GPU fault; starting again\n",
              (unsigned long long)ui_frames, (unsigned long long)app.frames);
  const std::string why = restart_lab(app, ui_frames);  // returns only when it could not
  app.ui.message += " (" + why + ")";
  std::fprintf(stderr, "kernel-lab: error: could not start again: %s; saved %s\n", why.c_str(),
               save_before_exit(app).c_str());
  app.exit_code = 70;
}

void exit_if_frame_hung(GuiApp& app, uint64_t ui_frames) {
  // On the CPU references a frame that has not ended is slow, not hung: it is waited for.
  if (app.opt.backend == Backend::Cpu && app.opt.hooks.simulate_hang_at == 0 && app.job.valid() &&
      app.job.wait_for(std::chrono::seconds(2)) != std::future_status::ready) {
    std::printf("gui: waiting for the last frame (the CPU references are slow at this size)\n");
    std::fflush(stdout);
    app.job.wait();
  }
  if (!app.job.valid() || app.job.wait_for(std::chrono::seconds(2)) == std::future_status::ready)
    return;
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

}  // namespace lab::ui
