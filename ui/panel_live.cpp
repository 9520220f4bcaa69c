// Live kernel: an editor for a user kernel, compiled with NVRTC on a worker thread and run as a
// stage's "user" variant, so the stage's diff, timings and occupancy apply to it. The running
// kernel keeps running until a new one has compiled and loaded.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>
#include <string>

#include "app_state.h"
#include "presets.h"
#include "widgets.h"

namespace lab::ui {

namespace {

std::string editor_text(const GuiApp& app) {
  return std::string(app.live.text.data());
}

// The stages of the current pipeline a live kernel can replace.
std::vector<std::string> live_stages(const GuiApp& app) {
  std::vector<std::string> out;
  for (const StageConfig& s : app.ui.pipeline.stages)
    if (s.op != "user" && live_refusal(find_op(s.op)).empty()) out.push_back(s.op);
  return out;
}

// The float planes of the last frame a new stage could read.
std::vector<std::string> plane_slots(const GuiApp& app) {
  std::vector<std::string> out;
  for (const SlotInfo& s : app.view.slots)
    if (s.name != "user" && s.desc.type == PixelType::F32 && s.desc.channels == 1)
      out.push_back(s.name);
  return out;
}

// Installs a loaded kernel as its stage's "user" variant, or as the stage "user" added at the
// end of the pipeline; the next engine job reconfigures.
void install(GuiApp& app, std::shared_ptr<const LiveKernel> k) {
  auto& stages = app.ui.pipeline.stages;
  app.live.waiting_first_run = true;
  if (app.live.add) {
    auto it = std::find_if(stages.begin(), stages.end(),
                           [](const StageConfig& s) { return s.op == "user"; });
    if (it == stages.end()) it = stages.insert(stages.end(), StageConfig{});
    it->op = "user";
    it->custom = make_live_stage(app.live.add_slot, std::move(k));
    it->variant = "user";
    it->block.reset();
    app.ui.pipeline_dirty = true;
    return;
  }
  for (StageConfig& s : stages)
    if (s.op == app.live.stage) {
      if (!s.custom) {  // what a fault goes back to
        app.live.replaced_variant = s.variant;
        app.live.replaced_block = s.block;
      }
      s.custom = make_live_op(find_op(s.op), std::move(k));
      s.variant = "user";
      s.block.reset();
      app.ui.pipeline_dirty = true;
      return;
    }
  app.live.status = "stage " + app.live.stage + " is not in the pipeline any more";
}

}  // namespace

void set_live_source(GuiApp& app, const std::string& s) {
  if (s.size() + 1 > app.live.text.size()) app.live.text.resize(s.size() + 4096);
  std::memcpy(app.live.text.data(), s.c_str(), s.size() + 1);
}

void start_live_compile(GuiApp& app) {
  if (app.live.job.valid()) return;  // one compile at a time; the button is disabled meanwhile
  LiveUi& L = app.live;
  const std::string src = with_live_options(editor_text(app), L.opts);
  set_live_source(app, src);
  autosave_live(app, true);
  const bool gpu = app.opt.backend == Backend::Cuda && !app.gpu_lost;
  LiveOptions opts = L.opts;
  if (L.memcheck) opts.line_info = true;  // memcheck names source lines only with -lineinfo
  // The trial runs on what the lab runs now: this pipeline (other live kernels left out) and
  // the last frame, or the playground's inputs.
  TrialRequest base;
  base.stage = L.add ? "" : L.stage;
  base.add_slot = L.add_slot;
  base.pipeline = preset_to_json(without_live(app.ui.pipeline));
  base.lab_size = app.ui.lab_size;
  base.lab_seed = uint64_t(app.ui.lab_seed);
  std::shared_ptr<const HostImage> frame = app.last_input;
  TrialLimits limits;
  limits.timeout_s = L.trial_timeout_s;
  limits.memcheck = L.memcheck && L.memcheck_why.empty();
  if (gpu && !L.trial) L.trial = std::make_unique<KernelHost>(trial_command());
  KernelHost* trial = gpu ? L.trial.get() : nullptr;
  L.started = std::chrono::steady_clock::now();
  L.status = gpu ? "compiling, then a trial run..." : "compiling...";
  const auto started = L.started;
  // Showing where a submission failed: a kernel that finishes but leaves pixels unwritten is
  // installed all the same, so that the Viewport shows them (NaN, magenta, in the comparison).
  const bool unwritten_ok = L.failure_shown;
  L.job = std::async(
      std::launch::async, [src, opts, trial, base, frame, limits, started, unwritten_ok] {
        LiveResult r;
        try {
          r.build = live_compile(src, opts);
          if (r.build.ok && trial) {
            TrialRequest req = base;
            req.build = r.build;
            if (frame) req.frame = *frame;
            r.trial = trial->run(req, limits);
            r.tried = true;
            if (r.trial.passed() || (unwritten_ok && r.trial.outcome == TrialOutcome::Unwritten))
              r.kernel = std::make_shared<LiveKernel>(r.build);
            trial->warm();  // a replaced child makes its context while the user reads the result
          }
        } catch (const std::exception& e) {
          r.error = e.what();
        }
        r.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started)
                   .count();
        return r;
      });
}

void autosave_live(GuiApp& app, bool force) {
  LiveUi& L = app.live;
  if (L.text.empty() || L.text[0] == '\0') return;  // nothing typed: nothing to keep
  const auto now = std::chrono::steady_clock::now();
  if (!force && now - L.saved_at < std::chrono::seconds(3)) return;
  std::string text = editor_text(app);
  if (text == L.saved_text) return;
  LiveDraft d;
  d.source = with_live_options(text, L.opts);
  d.stage = L.stage, d.add = L.add, d.add_slot = L.add_slot, d.file = L.file;
  L.saved_at = now;
  try {
    write_live_draft(live_draft_path(), d);
    L.saved_text = std::move(text);
  } catch (const Error& e) {
    app.ui.message = std::string("autosave: ") + e.what();
  }
}

void restore_live_draft(GuiApp& app) {
  std::string warning;
  const std::optional<LiveDraft> d = read_live_draft(live_draft_path(), &warning);
  if (!warning.empty()) app.ui.message = warning;
  if (!d) return;
  LiveUi& L = app.live;
  try {
    L.opts = read_live_options(d->source, L.opts);
  } catch (const Error& e) {
    app.ui.message = "the editor's autosave: " + std::string(e.what()) + " (default options)";
  }
  if (L.text.empty()) L.text.assign(64 * 1024, '\0');
  set_live_source(app, d->source);
  L.saved_text = d->source;
  L.stage = d->stage, L.add = d->add, L.add_slot = d->add_slot;
  if (!d->file.empty()) std::snprintf(L.file, sizeof L.file, "%s", d->file.c_str());
  L.status = "restored your last edit (" + live_draft_path() +
             "); not compiled: press \"compile and run\"";
}

void poll_live(GuiApp& app) {
  if (!app.live.job.valid() ||
      app.live.job.wait_for(std::chrono::seconds(0)) != std::future_status::ready)
    return;
  LiveResult r = app.live.job.get();
  app.live.last = r.build;
  app.live.has_trial = r.tried;
  if (r.tried) app.live.last_trial = r.trial;
  char buf[256];
  if (!r.error.empty()) {
    app.live.status = "failed: " + r.error + " (the previous kernel keeps running)";
  } else if (r.tried && !r.kernel) {
    // The outcome in the panel and on stderr; the editor keeps the text, the lab what ran.
    const TrialReport& t = r.trial;
    app.live.status = std::string("trial ") + trial_outcome_name(t.outcome) + ": " + t.message +
                      ". Not installed: the previous kernel keeps running.";
    std::fprintf(stderr, "kernel-lab: live kernel: %s\n", app.live.status.c_str());
    for (const MemcheckFinding& f : t.memcheck)
      std::fprintf(stderr, "kernel-lab: live kernel: memcheck: %s\n", f.str().c_str());
  } else if (!r.build.ok) {
    std::snprintf(buf, sizeof buf,
                  "did not compile (%.0f ms): %zu message(s); the previous kernel "
                  "keeps running",
                  r.build.compile_ms, r.build.diagnostics.size());
    app.live.status = buf;
  } else if (!r.kernel) {
    std::snprintf(buf, sizeof buf, "compiled in %.0f ms for sm_%d (%s); no GPU: it cannot run here",
                  r.build.compile_ms, r.build.arch, r.build.resources.str().c_str());
    app.live.status = buf;
  } else {
    std::snprintf(buf, sizeof buf,
                  "compiled in %.0f ms, trial passed in %.0f ms%s (%s), loaded in %.1f ms; "
                  "installed %.0f ms after \"compile\"",
                  r.build.compile_ms, r.trial.trial_ms, r.trial.memchecked ? " under memcheck" : "",
                  r.trial.message.c_str(), r.kernel->load_ms(), r.ms);
    app.live.status = buf;
    if (r.trial.outcome == TrialOutcome::Unwritten)  // installed to show where it failed
      app.live.status = "trial: " + r.trial.message +
                        ". Installed all the same, to show where the submission failed: the "
                        "unwritten pixels are NaN (magenta) in the comparison";
    app.live.to_installed_ms = r.ms;
    app.live.installed_ms.push_back(r.ms);
    std::fprintf(stderr, "kernel-lab: live kernel: %s\n", app.live.status.c_str());
    app.live.running = r.kernel;
    install(app, r.kernel);
  }
}

void live_frame_ran(GuiApp& app, const FrameResult& r) {
  if (!app.live.waiting_first_run) return;
  for (const LaunchRecord& l : r.launches)
    if (l.kernel == "user_kernel") {
      app.live.waiting_first_run = false;
      if (app.live.compare_when_run)
        app.live.compare_when_run = false, app.ui.compare_requested = true;
      app.live.to_running_ms = std::chrono::duration<double, std::milli>(
                                   std::chrono::steady_clock::now() - app.live.started)
                                   .count();
      return;
    }
}

namespace {

// The planes' size: the letterbox's output (nullopt: its default).
void set_plane_size(GuiApp& app, std::optional<double> w, std::optional<double> h) {
  for (StageConfig& s : app.ui.pipeline.stages)
    if (s.op == "letterbox") {
      if (w)
        s.params["width"] = *w;
      else
        s.params.erase("width");
      if (h)
        s.params["height"] = *h;
      else
        s.params.erase("height");
      app.ui.pipeline_dirty = true;
    }
}

std::optional<double> param_of(const GuiApp& app, const char* name) {
  for (const StageConfig& s : app.ui.pipeline.stages)
    if (s.op == "letterbox" && s.params.count(name)) return s.params.at(name);
  return std::nullopt;
}

// A failed submission shown where it failed: the planes at the size that failed (the current
// input letterboxed to it; the submission's own input was drawn at submit time and is not kept)
// and the Viewport on |output - the CPU reference| of the exercise's stage once the editor's
// kernel has run there.
void show_failure(GuiApp& app) {
  LiveUi& L = app.live;
  if (!L.failure) return;
  if (!L.failure_shown)
    L.width_before = param_of(app, "width"), L.height_before = param_of(app, "height");
  L.failure_shown = true;
  set_plane_size(app, double(L.failure->width), double(L.failure->height));
  app.ui.view = 2;
  L.compare_when_run = true;
  L.exercise_slot_shown = false;  // the Viewport turns to the stage again in the new frame
}

void hide_failure(GuiApp& app) {
  LiveUi& L = app.live;
  if (!L.failure_shown) return;
  set_plane_size(app, L.width_before, L.height_before);
  L.failure_shown = false;
  app.ui.view = 0;
}

// The failure in the result file the submission wrote, if it is this exercise's and the
// kernel file's as it is now (not an earlier submission's).
std::optional<ExerciseFailure> read_failure(const LiveUi& L) {
  try {
    return first_failure(read_small_file(L.exercise_kernel + ".result.json", "result"), *L.exercise,
                         L.exercise_sha256, sha256_hex(read_live_file(L.exercise_kernel)));
  } catch (const Error&) {
    return std::nullopt;  // none written (the submission ended before it) or unreadable
  }
}

// An exercise's lesson and target above the editor, and its submission: the editor's text
// saved, then `kernel-lab exercise submit` in a child process (the command line's checks and
// timing, in a process of their own), its report shown here.
void exercise_section(GuiApp& app) {
  LiveUi& L = app.live;
  const Exercise& e = *L.exercise;
  if (!ImGui::CollapsingHeader(("exercise: " + e.title).c_str(), ImGuiTreeNodeFlags_DefaultOpen))
    return;
  ImGui::TextWrapped("%s", e.lesson.c_str());
  ImGui::Text("target: %s, measured in the same run; stage %s", e.target_text().c_str(),
              e.stage.c_str());
  tip("submit checks your kernel at every size class (1x1, a tile less and more one pixel, odd, "
      "prime, 4K) with values drawn at submit time, times it as bench does beside the built-in "
      "steps, and explains it against the nearest one");
  ImGui::BeginDisabled(L.submission != nullptr || app.opt.backend != Backend::Cuda);
  if (ImGui::Button(L.submission ? "submitting..." : "submit")) {
    try {
      write_live_file(L.exercise_kernel, with_live_options(editor_text(app), L.opts));
      const std::vector<std::string> argv = {self_executable(),
                                             "exercise",
                                             "submit",
                                             L.exercise_path,
                                             L.exercise_kernel,
                                             "-o",
                                             L.exercise_kernel + ".result.json"};
      std::string why;
      L.submission = Child::spawn(argv, {ChildIo::Pipes, true, ""}, &why);
      L.submitted = L.submission ? "submitting " + L.exercise_kernel + " ...\n" : why;
      L.submitted_at = std::chrono::steady_clock::now();
    } catch (const Error& x) {
      L.submitted = x.what();
    }
  }
  ImGui::EndDisabled();
  if (ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenDisabled))
    ImGui::SetTooltip("%s", app.opt.backend == Backend::Cuda
                                ? "save the editor's text and run `kernel-lab exercise submit` "
                                  "on it in a child process; the lab's own frames pause "
                                  "meanwhile, so that its timings have the GPU to themselves"
                                : "submitting runs the kernel on a GPU: none in use");
  if (!L.submitted.empty()) {
    ImGui::BeginChild("submission", ImVec2(0, ImGui::GetTextLineHeightWithSpacing() * 8), true,
                      ImGuiWindowFlags_HorizontalScrollbar);
    ImGui::TextUnformatted(L.submitted.c_str());
    ImGui::EndChild();
    tip("the submission's report: each size class (a failure names its first mismatches), the "
        "time, its place among the built-in steps, the target, and why");
  }
  if (L.failure && L.failure_shown) {
    ImGui::TextWrapped(
        "The Viewport shows |your output - the CPU reference| at %s, where the "
        "submission failed (the current input letterboxed to that size).",
        L.failure->where.c_str());
    if (ImGui::Button("back to the input's size")) hide_failure(app);
    tip("the planes go back to the size they had before the failure was shown");
  } else if (L.failure) {
    if (ImGui::Button(("show the failure at " + L.failure->where).c_str()))
      show_failure(app), start_live_compile(app);
    tip("run the editor's kernel at the size that failed and show its error in the Viewport");
  }
}

// The submission's output as it arrives (never blocking a frame, unless a scripted run waits),
// and its end: the exit status, or killed past 900 s.
void poll_submission(GuiApp& app, bool wait) {
  LiveUi& L = app.live;
  if (!L.submission) return;
  Child& c = *L.submission;
  for (bool more = true; more;) {
    pollfd fds[2] = {{c.out_fd, POLLIN, 0}, {c.err_fd, POLLIN, 0}};
    more = false;
    if (poll(fds, 2, wait ? 100 : 0) <= 0) break;
    for (const pollfd& f : fds) {
      if (f.fd < 0 || !(f.revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buf[65536];
      const ssize_t got = read(f.fd, buf, sizeof buf);
      if (got > 0 && L.submitted.size() < (size_t(1) << 20)) L.submitted.append(buf, size_t(got));
      more = more || got > 0;
    }
  }
  const double s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - L.submitted_at).count();
  if (s > 900) c.kill(), L.submitted += "the submission did not finish in 900 s: stopped\n";
  if (!c.exited() && !c.reap(wait ? -1 : 0)) return;
  const int st = c.status();
  L.submitted += WIFEXITED(st) ? "exit status " + std::to_string(WEXITSTATUS(st)) +
                                     (WEXITSTATUS(st) == 0 ? " (correct)\n" : "\n")
                               : status_words(st) + "\n";
  L.submission.reset();
  L.failure.reset();
  if (WIFEXITED(st) && WEXITSTATUS(st) == 1 && L.exercise)  // not correct: show where
    L.failure = read_failure(L);
  if (L.failure) {
    show_failure(app);
    start_live_compile(app);  // the text just submitted, run at that size
    L.submitted += "The Viewport now shows |your output - the CPU reference| at " +
                   L.failure->where + ", the size that failed.\n";
  } else {
    hide_failure(app);
  }
}

}  // namespace

void draw_live_panel(GuiApp& app) {
  if (!ImGui::Begin("Live kernel")) {
    ImGui::End();
    return;
  }
  LiveUi& L = app.live;
  if (L.text.empty()) L.text.resize(64 * 1024, '\0');
  // The panel is open: the trial process starts now, so that its CUDA context is made while the
  // user types, not when "compile and run" is pressed.
  if (app.opt.backend == Backend::Cuda && !L.trial && !L.job.valid()) {
    L.trial = std::make_unique<KernelHost>(trial_command());
    L.trial->warm();
  }
  const std::vector<std::string> stages = live_stages(app);
  if (stages.empty()) {
    ImGui::TextWrapped(
        "No stage of this pipeline takes a live kernel (float planes in and out: "
        "blur, sobel, harris, nms, transpose, access, branch).");
    ImGui::End();
    return;
  }
  if (std::find(stages.begin(), stages.end(), L.stage) == stages.end()) L.stage = stages[0];
  if (L.exercise) exercise_section(app);
  int mode = L.add ? 1 : 0;
  if (ImGui::RadioButton("replace", &mode, 0)) L.add = false;
  tip("your kernel runs as a stage's variant 'user', next to the built-in ones, with the stage's "
      "CPU reference and diff");
  ImGui::SameLine();
  if (ImGui::RadioButton("add", &mode, 1)) L.add = true;
  tip("your kernel runs as a new stage 'user' at the end of the pipeline, reading a float slot "
      "and writing one of the same size (timed; no CPU reference to diff against)");
  ImGui::SameLine();
  ImGui::SetNextItemWidth(120);
  if (!L.add) {
    if (ImGui::BeginCombo("stage", L.stage.c_str())) {
      for (const std::string& s : stages)
        if (ImGui::Selectable(s.c_str(), s == L.stage)) L.stage = s;
      ImGui::EndCombo();
    }
    tip("the stage your kernel replaces: in[i] and out[i] are its input and output slots");
  } else {
    const std::vector<std::string> slots = plane_slots(app);
    if (L.add_slot.empty() && !slots.empty()) L.add_slot = slots.back();
    if (ImGui::BeginCombo("reads", L.add_slot.c_str())) {
      for (const std::string& s : slots)
        if (ImGui::Selectable(s.c_str(), s == L.add_slot)) L.add_slot = s;
      ImGui::EndCombo();
    }
    tip("the slot the new stage reads as in[0]; it writes out[0], the slot 'user'");
    ImGui::SameLine();
    if (ImGui::SmallButton("remove")) {
      auto& st = app.ui.pipeline.stages;
      const auto n = st.size();
      st.erase(
          std::remove_if(st.begin(), st.end(), [](const StageConfig& s) { return s.op == "user"; }),
          st.end());
      app.ui.pipeline_dirty = app.ui.pipeline_dirty || st.size() != n;
    }
    tip("take the added stage out of the pipeline");
  }
  const Op& op = find_op(L.stage);
  ImGui::SameLine();
  if (ImGui::BeginCombo("##copy", "edit a copy of...")) {
    for (size_t v = 0; v < op.def.variants.size(); ++v) {
      const VariantDef& vd = op.def.variants[v];
      if (vd.live_call.empty()) continue;
      if (ImGui::Selectable(vd.name.c_str())) {
        set_live_source(app, live_copy_source(op, v, vd.default_block, MathMode::Precise, &L.opts));
        L.last = LiveBuild{};
      }
      tip(vd.delta.c_str());
    }
    ImGui::EndCombo();
  }
  tip("load a built-in variant's source (kernels/ops/<stage>_kernels.cuh, exactly as it ships) "
      "with its block and geometry: every lesson can start from working code");
  ImGui::SameLine();
  if (ImGui::Button("template")) set_live_source(app, live_template(op));
  tip("a small working kernel (a 3x3 box filter) with the fixed signature");

  // Options: each is an NVRTC flag or a compile-time constant.
  bool changed = ImGui::Checkbox("fast math", &L.opts.fast_math);
  tip("--use_fast_math: flush-to-zero, approximate division, square root and intrinsics");
  ImGui::SameLine();
  changed |= ImGui::Checkbox("lineinfo", &L.opts.line_info);
  tip("-lineinfo: source lines in profiles and compute-sanitizer reports (no run-time cost)");
  ImGui::SameLine();
  ImGui::SetNextItemWidth(80);
  changed |= ImGui::InputInt("maxrregcount", &L.opts.max_regs);
  tip("-maxrregcount: the most registers per thread (0: the compiler's choice); fewer registers "
      "can raise occupancy and cause spills (the local bytes below)");
  int block[2] = {L.opts.block.x, L.opts.block.y};
  ImGui::SetNextItemWidth(120);
  changed |= ImGui::InputInt2("block", block);
  tip("LAB_BLOCK_X x LAB_BLOCK_Y, a compile-time constant: the kernel runs with this block only");
  int geo[2] = {L.opts.px, L.opts.rows};
  ImGui::SameLine();
  ImGui::SetNextItemWidth(120);
  changed |= ImGui::InputInt2("px, rows", geo);
  tip("outputs per thread in x (LAB_PX) and y (LAB_ROWS): the grid covers out[0] with block x "
      "(px, rows) outputs per block");
  if (changed) {
    L.opts.max_regs = std::clamp(L.opts.max_regs, 0, 255);
    L.opts.block = {std::clamp(block[0], 1, 1024), std::clamp(block[1], 1, 1024)};
    L.opts.px = std::clamp(geo[0], 1, 64), L.opts.rows = std::clamp(geo[1], 1, 64);
  }
  // The trial: where a kernel that faults or never ends is caught before it enters the lab.
  ImGui::SetNextItemWidth(80);
  if (ImGui::InputFloat("trial limit (s)", &L.trial_timeout_s, 0, 0, "%.1f"))
    L.trial_timeout_s = std::clamp(L.trial_timeout_s, 0.1f, 600.0f);
  tip("every new kernel first runs once in a separate process (its trial) on the current input "
      "and pipeline; one that faults, crashes, leaves outputs unwritten or runs longer than this "
      "is not installed, and cannot take the lab down");
  ImGui::SameLine();
  ImGui::BeginDisabled(!L.memcheck_why.empty());
  ImGui::Checkbox("check memory", &L.memcheck);
  ImGui::EndDisabled();
  if (ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenDisabled))
    ImGui::SetTooltip("%s", L.memcheck_why.empty()
                                ? "the trial runs under compute-sanitizer --tool memcheck: "
                                  "out-of-bounds and misaligned accesses are reported at your "
                                  "source lines (a trial then takes a few seconds)"
                                : L.memcheck_why.c_str());

  ImGui::BeginDisabled(L.job.valid());
  if (ImGui::Button(L.job.valid() ? "compiling..." : "compile and run")) start_live_compile(app);
  ImGui::EndDisabled();
  tip("NVRTC on a worker thread for this GPU's architecture, then loaded (cudaLibraryLoadData); "
      "the previous kernel keeps running until the new one has loaded");
  ImGui::SameLine();
  ImGui::TextWrapped("%s", L.status.c_str());

  // The editor, then the compiler's messages at their lines.
  const float h = ImGui::GetContentRegionAvail().y * 0.6f;
  // The cursor's line, so a diagnostic's line number can be found in the editor.
  auto cursor_line = [](ImGuiInputTextCallbackData* d) {
    int line = 1;
    for (int i = 0; i < d->CursorPos && i < d->BufTextLen; ++i) line += d->Buf[i] == '\n';
    *static_cast<int*>(d->UserData) = line;
    return 0;
  };
  ImGui::InputTextMultiline("##source", L.text.data(), L.text.size(), ImVec2(-1, h),
                            ImGuiInputTextFlags_AllowTabInput | ImGuiInputTextFlags_CallbackAlways,
                            cursor_line, &L.cursor_line);
  ImGui::Text("line %d", L.cursor_line);
  tip("the cursor's line: the messages below name the lines they are about");
  tip("__global__ void user_kernel(Inputs in, Outputs out, Params p): in[i], out[i] are the "
      "stage's slots (float planes), p.v[i] its parameters; helpers in lab_live.cuh");
  for (const LiveDiagnostic& d : L.last.diagnostics) {
    const ImVec4 c = d.error ? ImVec4(1.0f, 0.45f, 0.4f, 1.0f) : ImVec4(1.0f, 0.8f, 0.3f, 1.0f);
    if (d.line > 0)
      ImGui::TextColored(c, "line %d: %s: %s", d.line, d.error ? "error" : "warning",
                         d.message.c_str());
    else
      ImGui::TextColored(c, "%s: %s", d.error ? "error" : "warning", d.message.c_str());
  }
  if (L.has_trial)
    for (const MemcheckFinding& f : L.last_trial.memcheck)
      ImGui::TextColored(ImVec4(1.0f, 0.45f, 0.4f, 1.0f), "memcheck: %s", f.str().c_str());
  if (!L.running && L.last.ok) {
    ImGui::Text("compiled for sm_%d: %s", L.last.arch, L.last.resources.str().c_str());
    tip("what ptxas reported for your kernel while NVRTC compiled it (no GPU needed): registers "
        "per thread, static shared memory per block, stack and spills per thread");
  }
  if (L.running) {
    const LiveKernel& k = *L.running;
    ImGui::Text("running: %d registers, %zu B shared, %zu B local per thread", k.regs,
                k.static_smem, k.local_bytes);
    tip("from cudaFuncGetAttributes on the loaded kernel; local bytes are register spills (or "
        "local arrays). Occupancy and its limiter: the Occupancy panel (launch user_kernel)");
    if (L.has_trial && L.last_trial.passed()) {
      ImGui::Text("trial %.0f ms, kernel %.3f ms", L.last_trial.trial_ms, L.last_trial.kernel_ms);
      tip("the trial: wall time of the one run in the trial process (request to report), and the "
          "kernel's launch there between an event pair (a cold, single run: the Timings panel's "
          "median is the figure to compare)");
    }
    if (L.to_running_ms > 0) {
      ImGui::SameLine();
      ImGui::Text("compile to running %.0f ms", L.to_running_ms);
      tip("wall time from 'compile' to the end of the first engine frame that ran the new kernel "
          "(NVRTC, the trial run, load, pipeline reconfiguration)");
    }
  }
  if (!L.last.ptx.empty() && ImGui::CollapsingHeader("PTX")) {
    ImGui::InputTextMultiline("##ptx", L.last.ptx.data(), L.last.ptx.size() + 1, ImVec2(-1, 200),
                              ImGuiInputTextFlags_ReadOnly);
    tip("what NVRTC generated (read-only)");
  }

  ImGui::SetNextItemWidth(200);
  ImGui::InputText("file", L.file, sizeof L.file);
  tip("a name under $XDG_DATA_HOME/kernel-lab/kernels (or a full path)");
  const std::string path = L.file[0] == '/' ? std::string(L.file)
                                            : (std::filesystem::path(live_dir()) / L.file).string();
  ImGui::SameLine();
  if (ImGui::Button("save")) {
    try {
      write_live_file(path, with_live_options(editor_text(app), L.opts));
      L.status = "saved " + path;
    } catch (const Error& e) {
      L.status = e.what();
    }
  }
  ImGui::SameLine();
  if (ImGui::Button("load")) {
    try {
      const std::string src = read_live_file(path);
      L.opts = read_live_options(src, L.opts);
      set_live_source(app, src);
      L.status = "loaded " + path;
    } catch (const Error& e) {
      L.status = e.what();
    }
  }
  tip("kernel files carry their options in a '// @lab' line; `kernel-lab check --kernel-file "
      "FILE --replace STAGE` checks one headless");
  ImGui::End();
}

void init_live(GuiApp& app) {
  const GuiOptions& opt = app.opt;
  app.live.trial_timeout_s = float(opt.trial_timeout_s);
  if (opt.backend != Backend::Cuda)
    app.live.memcheck_why = "CPU mode: live kernels do not run, so there is nothing to check";
  else
    find_compute_sanitizer(&app.live.memcheck_why);
  app.live.memcheck = opt.trial_memcheck && app.live.memcheck_why.empty();
  if (opt.trial_memcheck && !app.live.memcheck)
    app.ui.message = "--trial-memcheck: " + app.live.memcheck_why;
  if (!opt.exercise.empty()) {  // the starter in the editor, compiled once the input is there
    try {
      std::string bytes;
      const Exercise e = read_exercise(opt.exercise, &bytes);
      app.live.exercise = e;
      app.live.exercise_sha256 = sha256_hex(bytes);
      app.live.exercise_path = opt.exercise;
      app.live.stage = e.stage;
      // The learner's kernel for this exercise: named after its file, reopened where it was left.
      const std::string stem = std::filesystem::path(opt.exercise).stem().string();
      app.live.exercise_kernel =
          (std::filesystem::path(live_dir()) / ("exercise-" + stem + ".cu")).string();
      std::error_code ec;
      const bool mine = std::filesystem::is_regular_file(app.live.exercise_kernel, ec);
      const std::string src = mine ? read_live_file(app.live.exercise_kernel) : e.starter;
      app.live.opts = read_live_options(src, app.live.opts);
      app.live.text.assign(64 * 1024, '\0');
      set_live_source(app, src);
      app.live.status = mine ? "your last submitted kernel, " + app.live.exercise_kernel
                             : "the exercise's starter";
      app.live.compile_when_input = true;
      if (mine && (app.live.failure = read_failure(app.live)))  // where it failed last time
        show_failure(app);
    } catch (const Error& e) {
      app.ui.message = app.live.status = e.what();
    }
    return;
  }
  if (opt.kernel_file.empty()) {
    restore_live_draft(app);  // nothing typed is lost
    return;
  }
  app.live.stage = opt.replace;  // the editor opens on the file and compiles it
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

void update_live(GuiApp& app, bool wait) {
  if (wait && app.live.job.valid())  // reproducible, like jobs (its trial is bounded)
    app.live.job.wait_for(std::chrono::seconds(120));
  if (app.live.compile_when_input &&
      (app.last_input || playground_of(app.ui.pipeline) || app.opt.backend != Backend::Cuda)) {
    app.live.compile_when_input = false;
    start_live_compile(app);
    if (wait) app.live.job.wait_for(std::chrono::seconds(120));
  }
  poll_live(app);
  autosave_live(app, false);
  poll_submission(app, wait);
  // An exercise opens on its stage's output in the Viewport, once the frame's slots are known.
  if (app.live.exercise && !app.live.exercise_slot_shown && !app.view.slots.empty()) {
    app.live.exercise_slot_shown = true;
    for (size_t k = 0; k < app.view.slots.size(); ++k)
      if (app.view.slots[k].name == app.live.exercise->stage) app.ui.slot = int(k);
  }
}

}  // namespace lab::ui
