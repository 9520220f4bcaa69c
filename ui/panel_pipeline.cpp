// Pipeline panel: the pipeline or playground, its input; per stage the variant, block shape
// (invalid ones greyed, with the reason), math mode and parameters; presets. A playground shows
// its size and seed, its lesson and its steps with their measured times.
#include <algorithm>
#include <cstdio>
#include <string>

#include "app_state.h"
#include "presets.h"
#include "stats.h"
#include "widgets.h"

namespace lab::ui {

namespace {

// Shapes offered besides a variant's own, so that the refusal reasons can be seen.
const Block kProbeBlocks[] = {{8, 8}, {16, 8}, {64, 16}, {64, 32}, {1024, 2}};

// An on-demand stage (detect) in the pipeline gets "remove"; one it may hold gets "add".
void on_demand_stages(GuiApp& app) {
  PipelineConfig& p = app.ui.pipeline;
  for (const Op& op : registry()) {
    if (!(op.pipelines & LAB_ON_DEMAND)) continue;
    const bool present = std::any_of(p.stages.begin(), p.stages.end(),
                                     [&](const StageConfig& s) { return s.op == op.def.name; });
    if (!present && !can_add_stage(p, op.def.name)) continue;  // a playground, harris
    ImGui::PushID(op.def.name.c_str());
    if (ImGui::Button(((present ? "remove " : "add ") + op.def.name).c_str())) {
      if (present)
        remove_stage(p, op.def.name);
      else
        stage_of(p, op.def.name);
      app.ui.pipeline_dirty = true;
    }
    tip((op.def.summary + (present ? "; removed, the stages it skips run again"
                                   : "; added, the stages it does the work of are skipped"))
            .c_str());
    ImGui::PopID();
  }
}

void stage_controls(GuiApp& app, StageConfig& s, int index) {
  const Op& op = s.custom ? *s.custom : find_op(s.op);  // custom: a live kernel's op
  ImGui::PushID(index);
  if (ImGui::Checkbox("##on", &s.enabled)) app.ui.pipeline_dirty = true;
  tip("enabled: launched every frame. Off: not launched; its output passes its input through "
      "when their shapes match (blur off: sobel sees the unblurred image), else it is zeros");
  ImGui::SameLine();
  const bool open = ImGui::CollapsingHeader(s.op.c_str(), ImGuiTreeNodeFlags_DefaultOpen);
  tip(op.def.summary.c_str());
  if (!open) {
    ImGui::PopID();
    return;
  }
  const int current = s.variant.empty() ? int(op.default_variant()) : op.find_variant(s.variant);
  const VariantDef& vd = op.def.variants[size_t(current < 0 ? 0 : current)];
  if (ImGui::BeginCombo("variant", vd.name.c_str())) {
    for (size_t v = 0; v < op.def.variants.size(); ++v) {
      const VariantDef& o = op.def.variants[v];
      if (ImGui::Selectable(o.name.c_str(), int(v) == current)) {
        s.variant = o.name;
        s.block.reset();  // the new variant's default shape
        app.ui.pipeline_dirty = true;
      }
      tip(o.delta.c_str());
    }
    ImGui::EndCombo();
  }
  tip(vd.delta.c_str());

  const Block block = s.block.value_or(vd.default_block);
  const DeviceInfo* dev = app.opt.backend == Backend::Cuda ? &device_info() : nullptr;
  if (ImGui::BeginCombo("block", block.str().c_str())) {
    std::vector<Block> shapes = vd.blocks;
    for (const Block& b : kProbeBlocks)
      if (std::find(shapes.begin(), shapes.end(), b) == shapes.end()) shapes.push_back(b);
    for (const Block& b : shapes) {
      const std::string why = block_refusal(vd, b, dev);
      ImGui::BeginDisabled(!why.empty());
      if (ImGui::Selectable(b.str().c_str(), b == block)) {
        s.block = b;
        app.ui.pipeline_dirty = true;
      }
      ImGui::EndDisabled();
      if (!why.empty() && ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenDisabled))
        ImGui::SetTooltip("refused: %s", why.c_str());
    }
    ImGui::EndCombo();
  }
  tip("threads per block, x by y; shapes the variant cannot run are greyed, with the reason");

  int math = s.math == MathMode::Fast ? 1 : 0;
  if (ImGui::RadioButton("precise", &math, 0))
    s.math = MathMode::Precise, app.ui.pipeline_dirty = true;
  tip("compiled without --use_fast_math");
  ImGui::SameLine();
  if (ImGui::RadioButton("fast", &math, 1)) s.math = MathMode::Fast, app.ui.pipeline_dirty = true;
  tip("the same source compiled with --use_fast_math: flush-to-zero, approximate division, "
      "square root and intrinsics");

  for (const ParamSpec& p : op.def.params) {
    const auto it = s.params.find(p.name);
    double value = it == s.params.end() ? p.def : it->second;
    bool changed = false;
    if (p.integer) {
      int v = int(value);
      changed = ImGui::DragInt(p.name.c_str(), &v, 1.0f, int(p.min), int(p.max));
      value = v;
    } else {
      float v = float(value);
      changed = ImGui::DragFloat(p.name.c_str(), &v, float((p.max - p.min) / 500), float(p.min),
                                 float(p.max), "%.4g");
      value = v;
    }
    tip(p.help.c_str());
    if (changed) {
      s.params[p.name] = std::min(p.max, std::max(p.min, value));
      app.ui.pipeline_dirty = true;
    }
  }
  ImGui::PopID();
}

// Switches the pipeline (image or playground), keeping nothing of the old one's stages.
void choose_pipeline(GuiApp& app) {
  const Op* lab = playground_of(app.ui.pipeline);
  std::string current = lab                                 ? lab->def.name
                        : app.ui.pipeline.stages.size() < 8 ? "harris"
                                                            : "keypoints";
  if (ImGui::BeginCombo("pipeline", current.c_str())) {
    for (const std::string& name : pipeline_names()) {
      if (ImGui::Selectable(name.c_str(), name == current) && name != current) {
        app.ui.pipeline = default_pipeline(name);
        app.ui.pipeline_dirty = true;
        const Op* now = playground_of(app.ui.pipeline);
        if (now) {
          std::snprintf(app.ui.lab_size, sizeof app.ui.lab_size, "%s",
                        now->def.lab_default_size.c_str());
          app.ui.lab_dirty = true;
        }
        app.ui.slot = now ? 99 : 1;  // a playground's result; the image pipeline's letterbox
        app.ui.lab_ms.clear();
      }
      const Op* op = find_playground(name);
      tip(op                    ? op->def.story.c_str()
          : name == "keypoints" ? "the image keypoint pipeline, all eight stages"
                                : "the dense part: letterbox to the Harris response");
    }
    ImGui::EndCombo();
  }
  tip("the image keypoint pipeline on the input, or a teaching playground on generated data");
}

// A playground's inputs (size, seed), its lesson, and its steps: each variant's change, what
// it should do, and what it did here.
void lab_controls(GuiApp& app, const Op& op) {
  ImGui::SetNextItemWidth(160);
  const bool enter = ImGui::InputText("size", app.ui.lab_size, sizeof app.ui.lab_size,
                                      ImGuiInputTextFlags_EnterReturnsTrue);
  tip(op.def.lab_size_help.c_str());
  ImGui::SameLine();
  ImGui::SetNextItemWidth(100);
  const bool seed = ImGui::InputInt("seed", &app.ui.lab_seed);
  tip("the generated inputs are the same for the same size and seed, on every machine");
  ImGui::SameLine();
  if (ImGui::Button("generate") || enter || seed) {
    app.ui.lab_dirty = true;
    app.ui.lab_ms.clear();
  }
  tip("make the inputs for this size and seed (on the engine's thread) and run on them");
  ImGui::TextWrapped("%s", op.def.story.c_str());
  const StageConfig& st = app.ui.pipeline.stages[0];
  const size_t current =
      st.variant.empty() ? op.default_variant() : size_t(std::max(0, op.find_variant(st.variant)));
  std::string ceiling;
  double ceiling_ms = 0;
  for (const VariantDef& v : op.def.variants)
    if (v.ceiling && ceiling.empty()) ceiling = v.name;
  // The best (lowest median) configuration each variant ran with: from the last ladder of this
  // playground when there is one (every step timed as bench times it), else from the frames.
  const Ladder* ladder = app.ui.ladder.result && app.ui.ladder.result->op == op.def.name
                             ? app.ui.ladder.result.get()
                             : nullptr;
  auto best_ms = [&](const std::string& variant, std::string* config) {
    double best = 0;
    if (ladder) {
      for (const LadderStep& s : ladder->steps)
        if (s.cfg.variant_def().name == variant && (best == 0 || s.median_us() < 1e3 * best))
          best = s.median_us() / 1e3, *config = s.cfg.block.str() + " " + math_name(s.cfg.math);
      return best;
    }
    auto it = app.ui.lab_ms.find(variant);
    if (it == app.ui.lab_ms.end()) return best;
    for (const auto& [cfg, h] : it->second) {
      if (h.empty()) continue;
      std::vector<double> v(h.begin(), h.end());
      const double m = median(v);
      if (best == 0 || m < best) best = m, *config = cfg;
    }
    return best;
  };
  std::string unused;
  if (!ceiling.empty()) ceiling_ms = best_ms(ceiling, &unused);
  if (ImGui::BeginTable("steps", 3, ImGuiTableFlags_Borders | ImGuiTableFlags_RowBg)) {
    ImGui::TableSetupColumn("step");
    ImGui::TableSetupColumn("measured");
    ImGui::TableSetupColumn(ceiling.empty() ? "-" : ("% of " + ceiling).c_str());
    ImGui::TableHeadersRow();
    for (size_t v = 0; v < op.def.variants.size(); ++v) {
      const VariantDef& vd = op.def.variants[v];
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      if (ImGui::Selectable(vd.name.c_str(), v == current, ImGuiSelectableFlags_SpanAllColumns)) {
        app.ui.pipeline.stages[0].variant = vd.name;
        app.ui.pipeline.stages[0].block.reset();
        app.ui.pipeline_dirty = true;
      }
      tip(("what changed: " + vd.delta +
           "\nexpect: " + (vd.expect.empty() ? std::string("-") : vd.expect) + "\nclick to run it")
              .c_str());
      std::string config;
      const double ms = best_ms(vd.name, &config);
      ImGui::TableNextColumn();
      if (ms > 0) {
        ImGui::Text("%.3f ms", ms);
        tip(((ladder ? std::string("median time in the last ladder run (the Ladder panel: every "
                                   "step timed as bench times it)")
                     : std::string("median time over the frames it ran")) +
             " (GPU: between CUDA events around its launches; without a GPU: the CPU "
             "reference's wall time), best of the configurations tried: " +
             config)
                .c_str());
      } else {
        ImGui::TextUnformatted("-");
        tip("not run yet: click the step to run it");
      }
      ImGui::TableNextColumn();
      if (ms > 0 && ceiling_ms > 0) {
        ImGui::Text("%.1f %%", 100 * ceiling_ms / ms);
        tip("the ceiling's time over this step's: 100 % matches the library");
      } else {
        ImGui::TextUnformatted("-");
      }
    }
    ImGui::EndTable();
  }
  const VariantDef& cur = op.def.variants[current];
  ImGui::TextWrapped("%s: %s", cur.name.c_str(), cur.delta.c_str());
  if (!cur.expect.empty()) ImGui::TextWrapped("expect: %s", cur.expect.c_str());
}

}  // namespace

void draw_pipeline_panel(GuiApp& app) {
  if (!ImGui::Begin("Pipeline")) {
    ImGui::End();
    return;
  }
  if (!app.ui.message.empty()) {
    ImGui::PushStyleColor(ImGuiCol_Text, ImVec4(1.0f, 0.55f, 0.35f, 1.0f));
    ImGui::TextWrapped("%s", app.ui.message.c_str());
    ImGui::PopStyleColor();
    if (ImGui::SmallButton("dismiss")) app.ui.message.clear();
    ImGui::Separator();
  }
  if (!app.stale.empty()) {  // a frame that does not end: said at once, where the user looks
    ImGui::PushStyleColor(ImGuiCol_Text, ImVec4(1.0f, 0.6f, 0.2f, 1.0f));
    ImGui::TextWrapped(
        "%s. A kernel in an endless loop cannot be stopped from inside the "
        "process: quit (the lab exits with code 70; your editor and pipeline are "
        "saved).",
        app.stale.c_str());
    ImGui::PopStyleColor();
    ImGui::Separator();
  }
  choose_pipeline(app);
  const Op* lab = playground_of(app.ui.pipeline);
  if (lab) lab_controls(app, *lab);
  if (!lab) {
    ImGui::SetNextItemWidth(-60);
    const bool enter = ImGui::InputText("##input", app.ui.input_edit, sizeof app.ui.input_edit,
                                        ImGuiInputTextFlags_EnterReturnsTrue);
    tip("synthetic[:WxH[@FPS]], an image, a folder, a video, camera:N[:WxH[@FPS]] or gst:PIPELINE");
    ImGui::SameLine();
    if (ImGui::Button("open") || enter) open_input(app, app.ui.input_edit);
    tip("switch the input; it opens on the capture thread, and the pipeline keeps its settings");
    const io::CaptureStats cs = app.capture->stats();
    ImGui::Text("input: %s", cs.source.empty() ? app.opt.input.c_str() : cs.source.c_str());
    tip("the frame source; it runs on its own thread into a latest-frame mailbox");
    ImGui::Text("source: %s, %llu frames, %llu dropped, %llu skipped",
                io::capture_state_name(cs.state), (unsigned long long)cs.captured,
                (unsigned long long)cs.dropped, (unsigned long long)cs.skipped);
    tip("captured: frames read; dropped: replaced before the pipeline took them; skipped: corrupt "
        "frames; stalled: no frame for a second");
    if (!cs.problem.empty()) ImGui::TextWrapped("source problem: %s", cs.problem.c_str());
  }

  if (ImGui::Button("save preset")) {
    try {
      save_preset(app.ui.preset_path, app.ui.pipeline);
      app.ui.message = "saved " + app.ui.preset_path;
    } catch (const Error& e) {
      app.ui.message = e.what();
    }
  }
  tip("the pipeline (variants, blocks, math, parameters) as JSON in $XDG_CONFIG_HOME/kernel-lab");
  ImGui::SameLine();
  if (ImGui::Button("load preset")) {
    PresetLoad p = load_preset(app.ui.preset_path);
    app.ui.pipeline = std::move(p.pipeline);
    app.ui.pipeline_dirty = true;
    app.ui.message = p.warning.empty() ? "loaded " + app.ui.preset_path : p.warning;
  }
  tip("a corrupt or newer preset gives a warning and the defaults");
  ImGui::SameLine();
  if (ImGui::Button("defaults")) {
    app.ui.pipeline = default_pipeline(lab ? lab->def.name : "keypoints");
    app.ui.pipeline_dirty = true;
  }
  if (!lab) {
    ImGui::SameLine();
    if (ImGui::Button("fastest")) {
      try {  // on a copy: a pipeline without some of the stages is left as it was
        PipelineConfig p = app.ui.pipeline;
        apply_fastest(p);
        app.ui.pipeline = p;
        app.ui.pipeline_dirty = true;
      } catch (const Error& e) {  // a pipeline without those stages (harris)
        app.ui.message = e.what();
      }
    }
    std::string list;
    for (const std::string& v : fastest_variants()) list += "\n  " + v;
    tip(("the variants of the fastest frames measured on the H200 (BENCHMARKS.md, \"The whole "
         "frame\"); the rest of the pipeline as it is. The same as "
         "examples/presets/fastest.json:" +
         list)
            .c_str());
  }
  ImGui::BeginDisabled(app.opt.backend != Backend::Cuda);
  if (ImGui::Checkbox("CUDA graph", &app.ui.graph)) app.ui.graph_dirty = true;
  ImGui::EndDisabled();
  tip("capture the whole pipeline once as a CUDA graph and replay it each frame: one launch "
      "instead of one per kernel. Per-launch times are then unknown (the graph is timed as a "
      "whole); re-captured when the pipeline or the input size changes. GPU only");
  for (size_t i = 0; i < app.ui.pipeline.stages.size(); ++i)
    stage_controls(app, app.ui.pipeline.stages[i], int(i));
  on_demand_stages(app);
  ImGui::End();
}

}  // namespace lab::ui
