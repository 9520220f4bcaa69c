// Scripted runs (script.h): what the options ask for, at the shell's hooks.
#include "script.h"

#include <epoxy/gl.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "app_state.h"
#include "headless_gl.h"
#include "npy.h"
#include "shell.h"
#include "stats.h"

namespace lab::ui {

GuiScript::GuiScript(const GuiOptions& opt)
    : waits_((opt.headless || opt.frames > 0) && !opt.free_run) {}

void open_scripted_panels(GuiApp& app) {
  if (!app.opt.ladder_stage.empty() && app.frames < 2) panel_shown(app, "Ladder") = true;
}

bool scripted_focus(const GuiApp& app, const char* panel) {
  const std::string p = panel;
  if (p == "Ladder") return !app.opt.ladder_stage.empty() && app.frames < 2;
  if (p == "A/B") return !app.opt.ab.empty() && app.frames < 2;
  if (p == "Code") return !app.opt.code.empty() && app.frames < 3;
  return false;
}

void GuiScript::before_frame(GuiApp& app, int frame) {
  const GuiOptions& opt = app.opt;
  if (opt.counters && !counters_asked_ && app.frames > 0)
    app.ui.counters_requested = counters_asked_ = true;
  if (!opt.ladder_stage.empty() && !ladder_asked_ && app.frames > 0) {
    ladder_asked_ = true;
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
                                  : opt.ladder_view == "why"    ? 3
                                                                : 0;
    }
  }
  // --ladder-export: once the ladder is in and its chart has been drawn.
  if (!opt.ladder_export.empty() && !ladder_exported_ && app.ui.ladder.result &&
      app.ui.ladder.chart_max.x > app.ui.ladder.chart_min.x) {
    ladder_exported_ = true;
    export_ladder(app.ui.ladder, opt.ladder_export, true, true, true);
  }
  if (!opt.ab.empty() && app.frames > 0) step_ab(app);
  if (waits_ && !opt.code.empty())  // reproducible: the SASS the panel asked for is in
    for (auto& run : app.code.sass_runs) run.second.wait_for(std::chrono::seconds(60));
  if (!opt.code.empty() && !code_asked_ && app.frames > 0) {
    code_asked_ = true;
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
  // The first frame waits (a bounded time) for the source's first frame.
  if (waits_ && frame == 0) {
    for (int i = 0; i < 250 && app.capture->stats().captured == 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (app.recovery.restarted) recovery_trace(app, "the first UI frame, the source open");
  }
  if (opt.live_recompile > 0 && frame > 0 && frame % opt.live_recompile == 0 &&
      !app.live.compile_when_input && !app.live.job.valid()) {
    start_live_compile(app);  // as a user pressing "compile and run" again
    if (waits_) app.live.job.wait_for(std::chrono::seconds(120));
  }
}

// --ab STAGE=B, one step per frame as a user would click: pin A, switch the stage to B, compare
// once B has run, then wipe between them in the viewport.
void GuiScript::step_ab(GuiApp& app) {
  int& step = ab_.step;
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
    ab_.mark = app.frames;
    step = 3;
  } else if (step == 3 && app.frames > ab_.mark + 1) {  // a frame of B has come back
    ab.compare_requested = true;
    ab.mode = 1, ab.against = 1;  // the viewport wipes between B and the pinned A
    step = 4;
  }
}

void GuiScript::after_render(const GuiApp& app, int frame, int fb_w, int fb_h) {
  const bool last = app.opt.frames > 0 && frame == app.opt.frames - 1;
  if (last && !app.opt.screenshot.empty())
    write_screenshot(app.opt.screenshot, fb_w, fb_h), shot_ = true;
}

void GuiScript::after_loop(const GuiApp& app, int fb_w, int fb_h) const {
  // The run ended while drawing had stopped for a hung frame: the report's frame is the shot.
  if (!app.opt.screenshot.empty() && !shot_ && app.stale_drawn)
    write_screenshot(app.opt.screenshot, fb_w, fb_h);
}

void GuiScript::report(GuiApp& app, uint64_t ui_frames, uint64_t input_frames) const {
  auto med = [](const std::vector<float>& h) {
    return median(std::vector<double>(h.begin(), h.end()));
  };
  if (app.opt.frames > 0) {  // a scripted run reports its timings (medians over the last 240)
    const double wall_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
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
        app.opt.backend != Backend::Cuda ? "none (CPU references)"
        : app.runner                     ? upload_mode_name(app.runner->upload_mode())
                                         : upload_mode_name(app.opt.upload),
        (unsigned long long)input_frames, (unsigned long long)ui_frames, med(app.ui.frame_input_ms),
        app.ui.frame_input_ms.size());
  }
  if (app.opt.frames > 0)
    std::printf("gui: budget (medians, each part on its own): %s\n",
                gui_frame_budget(app).line().c_str());
  if (app.opt.frames > 0 && app.opt.backend == Backend::Cuda) {
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
    if (app.opt.counters) {
      const CounterReport& c = app.ui.counters.report;
      if (c.ok)
        std::printf("gui: counters for %zu launches in %d passes, %.0f ms\n", c.ranges.size(),
                    c.passes, c.ms);
      else
        std::printf("gui: counters: %s\n", c.why.empty() ? "not collected" : c.why.c_str());
    }
  }
  if (app.opt.frames > 0 && !app.opt.ladder_stage.empty()) {  // the ladder's steps, as bench prints
    const LadderUi& L = app.ui.ladder;
    if (L.result) {
      std::printf("gui: ladder %s: %zu steps (%s)\n", L.result->op.c_str(), L.result->steps.size(),
                  L.result->measured.c_str());
      for (const LadderStep& st : L.result->steps)
        std::printf("gui: ladder step %s median %.2f us, %.1f %% of ceiling\n",
                    step_text(st.cfg).c_str(), st.median_us(), L.result->pct_of_ceiling(st));
      if (L.why)  // each step against the one before: its verdict and its top reason
        for (const Explanation& e : *L.why) {
          const ExplainChange* top = e.top();
          std::printf("gui: ladder why %s -> %s: %s; %s\n", e.a.name.c_str(), e.b.name.c_str(),
                      e.headline.c_str(), top ? top->sentence.c_str() : "no measured reason");
        }
      else
        std::printf("gui: ladder why: explanations compare GPU kernels (none on the CPU)\n");
      if (!app.opt.ladder_export.empty()) std::printf("gui: ladder export: %s\n", L.note.c_str());
      if (L.ceilings.gflops > 0)
        std::printf("gui: roofline ceilings: %s; %s\n", L.ceilings.gbs_what.c_str(),
                    L.ceilings.gflops_what.c_str());
    } else {
      std::printf("gui: ladder: %s\n", L.running         ? "still running at the last frame"
                                       : L.error.empty() ? "not run"
                                                         : L.error.c_str());
    }
  }
  if (app.opt.frames > 0 && !app.opt.ab.empty()) {  // the scripted A/B's figures
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
      if (ab.why) {
        const ExplainChange* top = ab.why->top();
        std::printf("gui: A/B why: %s; %s\n", ab.why->headline.c_str(),
                    top ? top->sentence.c_str() : "no measured reason");
      }
    } else {
      std::printf("gui: A/B: %s\n", !ab.error.empty() ? ab.error.c_str()
                                    : ab.running      ? "still running at the last frame"
                                                      : "not compared");
    }
  }
  if (app.opt.frames > 0 && !app.opt.kernel_file.empty()) {
    const LiveBuild& b = app.live.last;
    std::printf(
        "gui: live kernel %s: %s; compile %.0f ms, trial %.0f ms, compile to installed %.0f ms, "
        "compile to running %.0f ms%s\n",
        app.opt.kernel_file.c_str(), app.live.status.c_str(), b.compile_ms,
        app.live.has_trial ? app.live.last_trial.trial_ms : 0.0, app.live.to_installed_ms,
        app.live.to_running_ms, app.live.running ? "" : " (not running)");
  }
  if (app.opt.frames > 0 && app.live.installed_ms.size() > 1)
    std::printf(
        "gui: live kernel: %zu installs, compile to installed median %.0f ms (first %.0f ms, "
        "its trial process cold)\n",
        app.live.installed_ms.size(),
        median(std::vector<double>(app.live.installed_ms.begin() + 1, app.live.installed_ms.end())),
        app.live.installed_ms[0]);
  if (app.opt.frames > 0 && app.live.exercise) {  // the exercise opened, its starter's state
    std::string shown = "nothing yet";
    if (!app.view.slots.empty()) {
      const SlotInfo& s =
          app.view.slots[size_t(std::min(app.ui.slot, int(app.view.slots.size()) - 1))];
      shown = s.name + " " + std::to_string(s.desc.width) + "x" + std::to_string(s.desc.height) +
              ", " + viewport_view_name(app.ui.view);
      if (app.live.failure && app.live.failure_shown)
        shown += " (where the last submission failed: " + app.live.failure->where + ")";
    }
    std::printf("gui: exercise %s (%s, stage %s): %s; the Viewport shows %s\n",
                app.live.exercise->title.c_str(), app.live.exercise->target_text().c_str(),
                app.live.exercise->stage.c_str(), app.live.status.c_str(), shown.c_str());
    for (const StageDiff& d : app.ui.diff)  // the last comparison of the exercise's stage
      if (d.stage == app.live.exercise->stage && !d.output.empty())
        std::printf("gui: exercise compared at %dx%d: %zu of %zu values over the limit%s\n",
                    d.output[0].desc().width, d.output[0].desc().height, d.stats.over,
                    d.stats.count,
                    d.stats.bad_x < 0 ? ""
                                      : (", the first at (" + std::to_string(d.stats.bad_x) + ", " +
                                         std::to_string(d.stats.bad_y) + ")")
                                            .c_str());
  }
  if (app.opt.frames > 0 && app.opt.kernel_file.empty() && !app.live.status.empty())
    std::printf("gui: editor: %s\n", app.live.status.c_str());
  if (app.opt.frames > 0 && app.gl_renewals > 0)
    std::printf(
        "gui: OpenGL context made again %d time(s) after the driver reset it, the last in %.0f "
        "ms\n",
        app.gl_renewals, app.gl_renew_ms);
  if (app.opt.frames > 0 && app.recovery.count > 0)
    std::printf(
        "gui: recovered from %d GPU fault(s): %s in %.0f ms, live frames again %.0f ms after the "
        "fault%s\n",
        app.recovery.count,
        app.recovery.hosted      ? "the kernel host's child replaced"
        : app.recovery.restarted ? "Kernel Lab started again"
                                 : "CUDA state rebuilt",
        app.recovery.rebuild_ms, app.recovery.live_ms,
        app.recovery.waiting ? " (no frame ran since)" : "");
  if (!app.opt.dump_texture.empty()) {
    if (!app.texture || !app.tex_float)
      throw Error(ErrorKind::Data, "--dump-texture: the viewport shows no float plane");
    HostImage t(ImageDesc{app.tex_w, app.tex_h, 1, PixelType::F32});
    glBindTexture(GL_TEXTURE_2D, app.texture);
    glPixelStorei(GL_PACK_ALIGNMENT, 4);
    glGetTexImage(GL_TEXTURE_2D, 0, GL_RED, GL_FLOAT, t.bytes());
    io::write_npy(app.opt.dump_texture, t);
  }
}

}  // namespace lab::ui
