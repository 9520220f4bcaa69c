// Pipeline panel: per stage the variant, block shape (invalid ones greyed, with the reason),
// math mode and parameters; presets.
#include <string>

#include "app_state.h"
#include "presets.h"

namespace lab::ui {

namespace {

// Shapes offered besides a variant's own, so that the refusal reasons can be seen.
const Block kProbeBlocks[] = {{8, 8}, {16, 8}, {64, 16}, {64, 32}, {1024, 2}};

void stage_controls(GuiApp& app, StageConfig& s, int index) {
  const Op& op = find_op(s.op);
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
    app.ui.pipeline = default_pipeline();
    app.ui.pipeline_dirty = true;
  }
  ImGui::BeginDisabled(app.opt.backend != Backend::Cuda);
  if (ImGui::Checkbox("CUDA graph", &app.ui.graph)) app.ui.graph_dirty = true;
  ImGui::EndDisabled();
  tip("capture the whole pipeline once as a CUDA graph and replay it each frame: one launch "
      "instead of one per kernel. Per-launch times are then unknown (the graph is timed as a "
      "whole); re-captured when the pipeline or the input size changes. GPU only");
  for (size_t i = 0; i < app.ui.pipeline.stages.size(); ++i)
    stage_controls(app, app.ui.pipeline.stages[i], int(i));
  ImGui::End();
}

}  // namespace lab::ui
