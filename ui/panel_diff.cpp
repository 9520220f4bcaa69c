// Diff: every stage's output against its CPU reference, on request or every N frames.
#include <cmath>

#include "app_state.h"
#include "widgets.h"

namespace lab::ui {

void compare_now(GuiApp& app) {
  app.ui.compare_requested = true;
}

void draw_diff_panel(GuiApp& app) {
  if (!ImGui::Begin("Diff")) {
    ImGui::End();
    return;
  }
  if (!app.stale.empty()) {
    ImGui::PushStyleColor(ImGuiCol_Text, ImVec4(1.0f, 0.6f, 0.2f, 1.0f));
    ImGui::TextWrapped("STALE: %s", app.stale.c_str());
    ImGui::PopStyleColor();
    tip("the differences below are from an earlier frame; the engine is still waiting for this "
        "one");
  }
  if (app.opt.backend != Backend::Cuda) {
    ImGui::TextWrapped("CPU mode: the outputs are the CPU references; there is nothing to diff.");
    ImGui::End();
    return;
  }
  if (ImGui::Button("compare now")) compare_now(app);
  tip("runs every stage's CPU reference on the same input slots as the GPU and diffs the "
      "outputs, on the engine thread: the UI keeps drawing meanwhile");
  ImGui::SameLine();
  ImGui::SetNextItemWidth(100);
  ImGui::SliderInt("every N frames", &app.ui.compare_every, 0, 300);
  tip("0: only on request");
  // Scrolls sideways in a narrow panel (1280x720) rather than squeeze columns to a letter.
  const float table_h = ImGui::GetTextLineHeightWithSpacing() * float(app.ui.diff.size() + 2) + 12;
  if (ImGui::BeginTable("diff", 7,
                        ImGuiTableFlags_RowBg | ImGuiTableFlags_Borders |
                            ImGuiTableFlags_SizingFixedFit | ImGuiTableFlags_ScrollX,
                        ImVec2(0, table_h))) {
    for (const char* c :
         {"stage", "max abs", "mean abs", "PSNR dB", "over tol", "first bad", "sets / vectors"})
      ImGui::TableSetupColumn(c);
    ImGui::TableHeadersRow();
    for (const StageDiff& d : app.ui.diff) {
      const DiffStats& s = d.stats;
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      ImGui::TextColored(s.pass() ? ImVec4(0.5f, 0.9f, 0.5f, 1) : ImVec4(1, 0.4f, 0.4f, 1), "%s",
                         d.stage.c_str());
      tip("green: every value within the op's tolerance (kernel-lab list shows it); red: not");
      ImGui::TableNextColumn();
      ImGui::Text("%.3g", s.max_abs);
      tip("largest |GPU - CPU| over every value of the stage's outputs");
      ImGui::TableNextColumn();
      ImGui::Text("%.3g", s.mean_abs);
      tip("mean |GPU - CPU|");
      ImGui::TableNextColumn();
      if (std::isinf(s.psnr))
        ImGui::TextUnformatted("inf");
      else
        ImGui::Text("%.1f", s.psnr);
      tip("10 log10(peak^2 / MSE), peak = max |reference|; inf when identical");
      ImGui::TableNextColumn();
      ImGui::Text("%zu", s.over);
      tip("values over the tolerance, NaN (unwritten) included");
      ImGui::TableNextColumn();
      if (s.bad_x >= 0) {
        const std::string label =
            s.bad_slot + " (" + std::to_string(s.bad_x) + ", " + std::to_string(s.bad_y) + ")";
        if (ImGui::SmallButton(label.c_str())) {  // show that slot, zoomed on the pixel
          const auto& slots = app.view.slots;
          for (size_t k = 0; k < slots.size(); ++k)
            if (slots[k].name == s.bad_slot) app.ui.slot = int(k);
          app.ui.view = 2;
          app.ui.zoom = 8;
          app.ui.focus_x = s.bad_x, app.ui.focus_y = s.bad_y;
        }
        tip("the first value over the tolerance in raster order: click to show its slot");
      } else {
        ImGui::TextUnformatted("-");
      }
      ImGui::TableNextColumn();
      const std::string detail = s.detail();
      ImGui::TextUnformatted(detail.empty() ? "-" : detail.c_str());
      tip("keypoints (topk): P = precision, R = recall of the GPU's keypoints against the CPU "
          "reference's, matched at exact positions, and the largest score error; the histogram "
          "variant's recall is its approximation. Descriptors (l2norm): the smallest and mean "
          "cosine similarity of each descriptor to the reference's (must be >= 0.9999)");
    }
    ImGui::EndTable();
  }
  ImGui::End();
}

}  // namespace lab::ui
