// A/B: pin a stage's configuration as A, change anything, compare B (the stage as configured
// now) with it: time, resources and counters side by side, each against its CPU reference, and
// B's outputs against A's (statistics and a heat map). The viewport wipes or flickers between
// them (panel_viewport.cpp).
#include <epoxy/gl.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "app_state.h"
#include "colormap.h"
#include "widgets.h"

namespace lab::ui {

namespace {

// One row: what, A's value, B's, and B against A (a ratio, or a difference).
void row(const char* what, const char* why, double a, double b, const char* format,
         bool ratio = true) {
  ImGui::TableNextRow();
  ImGui::TableNextColumn();
  ImGui::TextUnformatted(what);
  tip(why);
  ImGui::TableNextColumn();
  ImGui::TextUnformatted(format_or_dash(format, a).c_str());
  ImGui::TableNextColumn();
  ImGui::TextUnformatted(format_or_dash(format, b).c_str());
  ImGui::TableNextColumn();
  if (std::isfinite(a) && std::isfinite(b) && (ratio ? a > 0 : true)) {
    ImGui::Text(ratio ? "%.2fx" : "%+.3g", ratio ? b / a : b - a);
    tip(ratio ? "B over A" : "B minus A");
  } else {
    ImGui::TextDisabled("-");
  }
}

void reference_row(const char* what, const DiffStats& a, const DiffStats& b) {
  ImGui::TableNextRow();
  ImGui::TableNextColumn();
  ImGui::TextUnformatted(what);
  tip("each side's outputs against its own CPU reference, with its own tolerance (the op's, for "
      "its math mode): the largest |GPU - CPU|, and whether every value is within");
  for (const DiffStats* d : {&a, &b}) {
    ImGui::TableNextColumn();
    ImGui::TextColored(d->pass() ? ImVec4(0.5f, 0.9f, 0.5f, 1) : ImVec4(1, 0.4f, 0.4f, 1),
                       "%.3g %s", d->max_abs, d->pass() ? "ok" : "over");
  }
  ImGui::TableNextColumn();
}

// The |B - A| heat map of output k as an RGBA8 texture (viridis over 0..max).
void update_heat(AbUi& ab) {
  const AbCompare& c = *ab.result;
  const size_t k = size_t(std::clamp(ab.output, 0, int(c.difference.size()) - 1));
  const HostImage& d = c.difference[k];
  if (d.desc().width == 0) return;
  const ImageRef v = display_view(d.ref());
  const Range r = auto_range(v);
  const std::vector<uint32_t> rgba = to_rgba(v, {0, std::max(r.hi, 1e-30f)}, Colormap::Viridis);
  if (!ab.heat_texture) glGenTextures(1, &ab.heat_texture);
  glBindTexture(GL_TEXTURE_2D, ab.heat_texture);
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MIN_FILTER, GL_NEAREST);
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MAG_FILTER, GL_NEAREST);
  glPixelStorei(GL_UNPACK_ALIGNMENT, 4);
  glPixelStorei(GL_UNPACK_ROW_LENGTH, 0);
  glTexImage2D(GL_TEXTURE_2D, 0, GL_RGBA8, v.desc.width, v.desc.height, 0, GL_RGBA,
               GL_UNSIGNED_BYTE, rgba.data());
  glBindTexture(GL_TEXTURE_2D, 0);
  ab.heat_w = v.desc.width, ab.heat_h = v.desc.height;
}

}  // namespace

void draw_ab_panel(GuiApp& app) {
  AbUi& ab = app.ui.ab;
  const int was = ab.stage;
  if (!stage_window_begin(app, "A/B", ab.stage, "the stage (or playground) to compare")) return;
  if (ab.stage != was) ab.a.reset(), ab.result.reset();  // A belongs to its stage
  ImGui::SameLine();
  if (ImGui::Button("pin A")) ab.pin_requested = true;
  tip("keep the stage's configuration as it runs now (variant, block, math, parameters) as A; "
      "then change anything in the Pipeline panel: that is B");
  ImGui::SameLine();
  ImGui::BeginDisabled(!ab.a || ab.running);
  if (ImGui::Button(ab.running ? "comparing..." : "compare A with B")) ab.compare_requested = true;
  ImGui::EndDisabled();
  tip("run A, then B, on the same input, each timed as bench times a step and checked against "
      "its CPU reference, and diff B's outputs against A's");
  ImGui::SameLine();
  ImGui::BeginDisabled(app.opt.backend != Backend::Cuda);
  ImGui::Checkbox("counters", &ab.counters);
  ImGui::EndDisabled();
  tip("also collect hardware counters for A and B (achieved occupancy, DRAM bytes); GPU only");
  if (ab.a) {
    ImGui::Text("A: %s", step_text(*ab.a).c_str());
    tip("the pinned configuration");
  } else {
    ImGui::TextDisabled("no A yet: press \"pin A\"");
  }
  if (!ab.error.empty()) ImGui::TextColored(ImVec4(1, 0.55f, 0.35f, 1), "%s", ab.error.c_str());
  if (!ab.result) {
    ImGui::End();
    return;
  }
  const AbCompare& c = *ab.result;
  const LadderStep &A = c.a.step, &B = c.b.step;
  ImGui::Text("B: %s", step_text(B.cfg).c_str());
  tip("the stage as it was configured when compared");
  const ImGuiTableFlags flags = ImGuiTableFlags_Borders | ImGuiTableFlags_RowBg |
                                ImGuiTableFlags_SizingFixedFit | ImGuiTableFlags_ScrollX;
  const float table_h = ImGui::GetTextLineHeightWithSpacing() * 11 + 12;  // 10 rows and a header
  if (ImGui::BeginTable("ab", 4, flags, ImVec2(0, table_h))) {
    for (const char* h : {"", "A", "B", "B vs A"}) ImGui::TableSetupColumn(h);
    ImGui::TableHeadersRow();
    row("median us", "median of the timed runs, bench's measurement (measure_step)", A.median_us(),
        B.median_us(), "%.2f");
    row("p95 us", "95th percentile of the same runs", A.meas.total.p95_us, B.meas.total.p95_us,
        "%.2f");
    row("registers", "registers per thread, the most of the stage's kernels",
        A.regs() ? A.regs() : NAN, B.regs() ? B.regs() : NAN, "%.0f", false);
    row("shared B", "shared memory per block, static + dynamic", double(A.smem()), double(B.smem()),
        "%.0f", false);
    row("local B", "local memory per thread: register spills and local arrays",
        double(A.local_bytes()), double(B.local_bytes()), "%.0f", false);
    row("occupancy", "theoretical occupancy on this GPU", 100 * A.theoretical_occupancy(),
        100 * B.theoretical_occupancy(), "%.0f%%", false);
    row("achieved occ", "achieved occupancy (counters; '-' without)", 100 * A.achieved_occupancy(),
        100 * B.achieved_occupancy(), "%.0f%%", false);
    row("DRAM MB", "DRAM bytes read + written (counters, DRAM-cold)", A.dram_bytes() / 1e6,
        B.dram_bytes() / 1e6, "%.2f");
    row("GB/s", "the bytes model over the median", A.gbs(), B.gbs(), "%.1f");
    reference_row("vs reference", c.a.vs_reference, c.b.vs_reference);
    ImGui::EndTable();
  }
  if (ab.why && ImGui::CollapsingHeader("why", ImGuiTreeNodeFlags_DefaultOpen)) {
    ImGui::TextWrapped("%s", explanation_text(*ab.why).c_str());
    tip("explain(A, B): the time ratio, then the measured changes that account for it, ranked "
        "(kernel-lab explain prints the same)");
  }
  const DiffStats& d = c.a_vs_b;
  ImGui::TextWrapped(
      "B against A: max |B - A| %.3g, mean %.3g, %zu of %zu values over the looser "
      "tolerance%s",
      d.max_abs, d.mean_abs, d.over, d.count, d.nans ? " (NaN present)" : "");
  tip("every value of B's outputs against A's; the limit is the larger of A's and B's tolerances "
      "against the reference, so a value over it differs by more than either may from the "
      "reference");
  if (!d.fail.empty()) ImGui::TextWrapped("%s", d.fail.c_str());
  if (!c.difference.empty()) {
    if (c.difference.size() > 1) {
      ImGui::SetNextItemWidth(140);
      std::string items;
      for (const std::string& n : c.output_names) items += n + '\0';
      if (ImGui::Combo("output", &ab.output, items.c_str())) ab.heat_of = nullptr;
    }
    if (ab.heat_of != &c) update_heat(ab), ab.heat_of = &c;
    if (ab.heat_texture && ab.heat_w > 0) {
      const float w = std::max(300.0f, ImGui::GetContentRegionAvail().x);
      const float h = w * float(ab.heat_h) / float(ab.heat_w);
      ImGui::Image(reinterpret_cast<ImTextureID>(static_cast<intptr_t>(ab.heat_texture)),
                   ImVec2(w, std::min(h, std::max(120.0f, ImGui::GetContentRegionAvail().y))));
      tip("|B - A| per value, viridis from 0 (dark) to the largest difference (yellow); "
          "identical outputs are uniformly dark");
    } else {
      ImGui::TextDisabled("no heat map: the output is not a float plane");
    }
  }
  ImGui::TextDisabled("viewport: \"compare\" wipes or flickers between B and A");
  ImGui::End();
}

}  // namespace lab::ui
