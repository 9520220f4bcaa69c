// Ladder: every step of a stage or playground run in one click (run_ladder, the function bench
// uses), as a table, a bar chart and a roofline, with exports (CSV, JSON, the chart as PNG).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "app_state.h"
#include "headless_gl.h"
#include "orin.h"
#include "output_file.h"
#include "widgets.h"

namespace lab::ui {

namespace {

// A cell of text with its tooltip.
void cell(const std::string& text, const char* why) {
  ImGui::TableNextColumn();
  if (text == "-")
    ImGui::TextDisabled("-");
  else
    ImGui::TextUnformatted(text.c_str());
  tip(why);
}

// A header row whose every column has a tooltip (ImGui's TableHeadersRow has none).
void headers(const std::vector<std::pair<const char*, const char*>>& cols) {
  ImGui::TableNextRow(ImGuiTableRowFlags_Headers);
  for (size_t c = 0; c < cols.size(); ++c) {
    ImGui::TableSetColumnIndex(int(c));
    ImGui::TableHeader(cols[c].first);
    tip(cols[c].second);
  }
}

void steps_table(const Ladder& l) {
  const std::vector<std::pair<const char*, const char*>> cols = {
      {"step", "the variant (what changed, and what it should do: hover a row)"},
      {"block", "threads per block, x by y"},
      {"math", "precise, or compiled with --use_fast_math"},
      {"median us",
       "median time of the stage (its launches together) over the timed runs, each between "
       "CUDA events, queued behind a GPU-side delay: bench's figure (without a GPU: the CPU "
       "reference's wall time)"},
      {"% ceil", "percent of the ceiling measured in this run: see the line above the table"},
      {"GB/s",
       "the bytes the stage must move (the lab's model: inputs read once, outputs "
       "written once) over the median"},
      {"GFLOP/s", "the op's FLOP model over the median (ops with a model: matmul, ...)"},
      {"regs", "registers per thread (cudaFuncGetAttributes), the most of the step's kernels"},
      {"smem", "shared memory per block, static + dynamic, bytes"},
      {"local", "local memory per thread (spills, local arrays), bytes: 0 is what you want"},
      {"occ",
       "theoretical occupancy on this GPU (the lab's calculator, agreeing with "
       "cudaOccupancyMaxActiveBlocksPerMultiprocessor)"},
      {"ach occ",
       "achieved occupancy (counters: sm__warps_active, mean over the launches "
       "weighted by duration); '-' without counters"},
      {"DRAM MB",
       "DRAM bytes read + written (counters, DRAM-cold: L2 flushed before each "
       "launch, as ncu does); '-' without counters"},
      {"Orin~ us",
       "the bytes model over Orin's measured copy bandwidth (183 GB/s): a "
       "bandwidth-bound estimate, not a measurement"},
  };
  const ImGuiTableFlags flags = ImGuiTableFlags_Borders | ImGuiTableFlags_RowBg |
                                ImGuiTableFlags_ScrollX | ImGuiTableFlags_ScrollY |
                                ImGuiTableFlags_SizingFixedFit | ImGuiTableFlags_Resizable;
  const float h = std::min(ImGui::GetTextLineHeightWithSpacing() * float(l.steps.size() + 2) + 8,
                           ImGui::GetContentRegionAvail().y);
  if (!ImGui::BeginTable("ladder steps", int(cols.size()), flags, ImVec2(0, h))) return;
  ImGui::TableSetupScrollFreeze(1, 1);
  for (const auto& c : cols) ImGui::TableSetupColumn(c.first);
  headers(cols);
  for (const LadderStep& s : l.steps) {
    const VariantDef& v = s.cfg.variant_def();
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    const std::string runs = s.runs();
    ImGui::TextUnformatted(
        runs.empty() ? v.name.c_str() : (v.name + " = " + runs.substr(0, runs.find(':'))).c_str());
    tip(("what changed: " + v.delta + "\nexpect: " + (v.expect.empty() ? "-" : v.expect) +
         (runs.empty() ? "" : "\nruns " + runs + ": this step's own code does not run here"))
            .c_str());
    cell(s.cfg.block.str(), "threads per block");
    cell(math_name(s.cfg.math), "math mode");
    cell(format_or_dash("%.2f", s.median_us()), "median over the timed runs (microseconds)");
    cell(format_or_dash("%.1f", l.pct_of_ceiling(s)), l.ceiling_name().c_str());
    cell(format_or_dash("%.1f", s.gbs()), "model bytes over the median");
    cell(format_or_dash("%.0f", s.gflops()), "FLOP model over the median");
    cell(s.regs() ? std::to_string(s.regs()) : "-", "registers per thread");
    cell(s.regs() ? std::to_string(s.smem()) : "-", "shared memory per block, bytes");
    cell(s.regs() ? std::to_string(s.local_bytes()) : "-", "local memory per thread, bytes");
    cell(format_or_dash("%.0f%%", 100 * s.theoretical_occupancy()),
         "theoretical occupancy, this GPU");
    cell(format_or_dash("%.0f%%", 100 * s.achieved_occupancy()), "achieved occupancy (counters)");
    cell(format_or_dash("%.2f", s.dram_bytes() / 1e6),
         "DRAM MB read + written (counters, DRAM-cold)");
    cell(format_or_dash("%.1f", orin_estimate_us(s.model_bytes)),
         "bandwidth-bound estimate on Orin");
  }
  ImGui::EndTable();
}

// Why each step is faster (or not) than the one before: explain()'s words, as `explain --ladder`
// prints them.
void why_view(LadderUi& ui) {
  if (!ui.why || ui.why->empty()) {
    ImGui::TextWrapped(ui.why ? "One step: nothing to compare."
                              : "Explanations compare GPU kernels: run the ladder on a GPU.");
    return;
  }
  const std::vector<Explanation>& why = *ui.why;
  ui.why_step = std::clamp(ui.why_step, 0, int(why.size()) - 1);
  std::string items;
  for (const Explanation& e : why)
    items += e.a.name + "  ->  " + e.b.name + " (" + verdict_name(e.verdict) + ")" + '\0';
  ImGui::SetNextItemWidth(-1);
  ImGui::Combo("##why step", &ui.why_step, items.c_str());
  tip("a step against the one before it: the time ratio, then the measured changes that account "
      "for it, ranked (counters when the ladder collected them; else time, bytes and the static "
      "facts: registers, shared memory, spills, the SASS instruction mix)");
  ImGui::BeginChild("why text", ImVec2(0, 0), true);
  ImGui::TextWrapped("%s", explanation_text(why[size_t(ui.why_step)]).c_str());
  ImGui::EndChild();
}

ImU32 step_colour(const Ladder& l, const LadderStep& s) {
  if (s.cfg.variant_def().name == l.ceiling_variant) return IM_COL32(150, 150, 160, 255);
  return s.cfg.math == MathMode::Fast ? IM_COL32(230, 150, 60, 255) : IM_COL32(80, 160, 230, 255);
}

// One horizontal bar per step: its median time or its percent of the ceiling. Records the
// chart's rectangle for the PNG export.
void bar_chart(LadderUi& ui, const Ladder& l) {
  const float w = std::max(300.0f, ImGui::GetContentRegionAvail().x);
  const float row = ImGui::GetTextLineHeight() + 6;
  const float h = row * float(l.steps.size()) + 2 * row;
  const ImVec2 p0 = ImGui::GetCursorScreenPos();
  ImGui::InvisibleButton("bars", ImVec2(w, h));
  ImDrawList* dl = ImGui::GetWindowDrawList();
  dl->AddRectFilled(p0, ImVec2(p0.x + w, p0.y + h), IM_COL32(24, 24, 28, 255));
  const bool pct = ui.bars == 1;
  double top = 0;
  for (const LadderStep& s : l.steps) {
    const double v = pct ? l.pct_of_ceiling(s) : s.median_us();
    if (std::isfinite(v)) top = std::max(top, v);
  }
  if (pct) top = std::max(top, 100.0);
  const float label_w = std::min(w * 0.45f, 260.0f);
  const float x0 = p0.x + label_w, x1 = p0.x + w - 70;
  dl->AddText(
      ImVec2(p0.x + 4, p0.y + 2), IM_COL32(220, 220, 220, 255),
      (l.op + (pct ? ": % of the ceiling (longer is better)" : ": median us (shorter is better)"))
          .c_str());
  const ImVec2 mouse = ImGui::GetIO().MousePos;
  for (size_t k = 0; k < l.steps.size(); ++k) {
    const LadderStep& s = l.steps[k];
    const float y = p0.y + row * float(k + 1) + 4;
    const double v = pct ? l.pct_of_ceiling(s) : s.median_us();
    // A step that runs another step's code here is marked with that step's name.
    const std::string runs = s.runs();
    const std::string label =
        step_text(s.cfg) + (runs.empty() ? "" : " = " + runs.substr(0, runs.find(':')));
    dl->PushClipRect(ImVec2(p0.x, y), ImVec2(x0 - 4, y + row), true);
    dl->AddText(ImVec2(p0.x + 4, y), IM_COL32(200, 200, 200, 255), label.c_str());
    dl->PopClipRect();
    if (!std::isfinite(v) || top <= 0) continue;
    const float end = x0 + float(v / top) * (x1 - x0);
    dl->AddRectFilled(ImVec2(x0, y + 1), ImVec2(std::max(end, x0 + 1), y + row - 3),
                      step_colour(l, s));
    dl->AddText(ImVec2(end + 4, y), IM_COL32(220, 220, 220, 255),
                format_or_dash(pct ? "%.1f%%" : "%.2f", v).c_str());
    if (ImGui::IsItemHovered() && mouse.y >= y && mouse.y < y + row) {
      const VariantDef& vd = s.cfg.variant_def();
      ImGui::SetTooltip(
          "%s\nmedian %.2f us (p95 %.2f, %d runs)\n%% of ceiling %s\nwhat "
          "changed: %s\nexpect: %s",
          label.c_str(), s.median_us(), s.meas.total.p95_us, s.meas.total.n,
          format_or_dash("%.1f", l.pct_of_ceiling(s)).c_str(), vd.delta.c_str(),
          vd.expect.empty() ? "-" : vd.expect.c_str());
    }
  }
  dl->AddText(ImVec2(p0.x + 4, p0.y + h - row + 2), IM_COL32(150, 150, 150, 255),
              "blue: precise  orange: fast math  grey: the library ceiling");
  ui.chart_min = p0, ui.chart_max = ImVec2(p0.x + w, p0.y + h);
}

// The roofline on log-log axes: the roofs (this GPU's measured, Orin's estimated), each step a
// point (model: circle, counters: square), the ladder a path through them.
// `selected`: the step the stage runs as configured now (the selected launch); SIZE_MAX: none.
void roofline(LadderUi& ui, const Ladder& l, size_t selected) {
  std::vector<RoofCeilings> roofs;
  if (ui.ceilings.gbs > 0 && ui.ceilings.gflops > 0) roofs.push_back(ui.ceilings);
  if (ui.orin_roof) roofs.push_back(orin_ceilings());
  const std::vector<RoofPoint> model = roof_points(l, false), counted = roof_points(l, true);
  if (model.empty() && counted.empty()) {
    ImGui::TextWrapped(
        "No point to place: %s has no FLOP model, and no counters were collected. Tick "
        "\"hardware counters\" and run the ladder again: the counters measure FLOPs executed "
        "and DRAM bytes.",
        l.op.c_str());
    return;
  }
  if (roofs.empty()) {
    ImGui::TextWrapped(
        "No roofs: tick \"Orin roofs\", or run the ladder on a GPU (the measured "
        "roofs need one).");
    return;
  }
  double xlo = 1e30, xhi = 0, ylo = 1e30, yhi = 0;
  for (const auto* pts : {&model, &counted})
    for (const RoofPoint& p : *pts)
      xlo = std::min(xlo, p.intensity()), xhi = std::max(xhi, p.intensity()),
      ylo = std::min(ylo, p.gflops()), yhi = std::max(yhi, p.gflops());
  for (const RoofCeilings& c : roofs)
    xlo = std::min(xlo, c.ridge() / 16), xhi = std::max(xhi, c.ridge() * 4),
    yhi = std::max(yhi, c.gflops);
  xlo = std::pow(10, std::floor(std::log10(xlo))), xhi = std::pow(10, std::ceil(std::log10(xhi)));
  for (const RoofCeilings& c : roofs) ylo = std::min(ylo, c.roof(xlo));
  ylo = std::pow(10, std::floor(std::log10(std::max(ylo, 1e-3))));
  yhi = std::pow(10, std::ceil(std::log10(yhi * 1.5)));

  const float w = std::max(300.0f, ImGui::GetContentRegionAvail().x);
  const float h = std::max(240.0f, std::min(w * 0.6f, ImGui::GetContentRegionAvail().y - 30));
  const ImVec2 p0 = ImGui::GetCursorScreenPos();
  ImGui::InvisibleButton("roofline", ImVec2(w, h));
  ImDrawList* dl = ImGui::GetWindowDrawList();
  dl->AddRectFilled(p0, ImVec2(p0.x + w, p0.y + h), IM_COL32(24, 24, 28, 255));
  const float left = 56, bottom = 36, pad = 10;
  const ImVec2 a(p0.x + left, p0.y + pad), b(p0.x + w - pad, p0.y + h - bottom);
  auto X = [&](double x) {
    return a.x + float((std::log10(x) - std::log10(xlo)) / (std::log10(xhi) - std::log10(xlo))) *
                     (b.x - a.x);
  };
  auto Y = [&](double y) {
    return b.y - float((std::log10(y) - std::log10(ylo)) / (std::log10(yhi) - std::log10(ylo))) *
                     (b.y - a.y);
  };
  const ImU32 grid = IM_COL32(60, 60, 66, 255), text = IM_COL32(190, 190, 190, 255);
  for (double x = xlo; x <= xhi * 1.001; x *= 10) {
    dl->AddLine(ImVec2(X(x), a.y), ImVec2(X(x), b.y), grid);
    dl->AddText(ImVec2(X(x) - 10, b.y + 2), text, format_or_dash("%g", x).c_str());
  }
  for (double y = ylo; y <= yhi * 1.001; y *= 10) {
    dl->AddLine(ImVec2(a.x, Y(y)), ImVec2(b.x, Y(y)), grid);
    dl->AddText(ImVec2(p0.x + 2, Y(y) - 7), text, format_or_dash("%g", y).c_str());
  }
  dl->AddText(ImVec2(a.x, b.y + 18), text, "FLOPs per DRAM byte (log)");
  dl->AddText(ImVec2(a.x + 4, a.y + 2), text, "GFLOP/s (log)");
  dl->PushClipRect(a, b, true);
  const ImU32 roof_col[] = {IM_COL32(240, 240, 240, 255), IM_COL32(120, 200, 120, 255)};
  for (size_t k = 0; k < roofs.size(); ++k) {
    const RoofCeilings& c = roofs[k];
    const ImU32 col = roof_col[std::min<size_t>(k, 1)];
    const double r = c.ridge();
    dl->AddLine(ImVec2(X(xlo), Y(c.roof(xlo))), ImVec2(X(r), Y(c.gflops)), col, 2);
    dl->AddLine(ImVec2(X(r), Y(c.gflops)), ImVec2(X(xhi), Y(c.gflops)), col, 2);
    const std::string name = c.estimate ? "Orin (estimate)" : c.device;
    dl->AddText(ImVec2(X(r) + 4, Y(c.gflops) + 2), col, name.c_str());
  }
  const ImVec2 mouse = ImGui::GetIO().MousePos;
  const RoofPoint* hovered = nullptr;
  for (const auto* pts : {&model, &counted}) {
    const bool sq = pts == &counted;
    for (size_t k = 0; k < pts->size(); ++k) {
      const RoofPoint& p = (*pts)[k];
      const ImVec2 c(X(p.intensity()), Y(p.gflops()));
      if (k > 0) {
        const RoofPoint& q = (*pts)[k - 1];
        dl->AddLine(ImVec2(X(q.intensity()), Y(q.gflops())), c, IM_COL32(230, 190, 80, 160), 1.5f);
      }
      const ImU32 col = sq ? IM_COL32(230, 120, 200, 255) : IM_COL32(250, 200, 80, 255);
      if (sq)
        dl->AddRectFilled(ImVec2(c.x - 4, c.y - 4), ImVec2(c.x + 4, c.y + 4), col);
      else
        dl->AddCircleFilled(c, 4.5f, col);
      if (p.step == selected) {  // the launch as configured now: ringed
        dl->AddCircle(c, 9.0f, IM_COL32(255, 255, 255, 255), 0, 2.0f);
        dl->AddText(ImVec2(c.x + 11, c.y - 7), IM_COL32(255, 255, 255, 255), "now");
      }
      if (std::fabs(mouse.x - c.x) < 6 && std::fabs(mouse.y - c.y) < 6) hovered = &p;
    }
  }
  dl->PopClipRect();
  if (hovered && ImGui::IsItemHovered()) {
    std::string roofs_text;
    for (const RoofCeilings& c : roofs)
      roofs_text += "\n" + std::string(c.estimate ? "Orin (estimate)" : c.device) + ": " +
                    format_or_dash("%.0f", hovered->pct_of_roof(c)) +
                    " % of its roof at this intensity";
    ImGui::SetTooltip("%s (%s)\n%.3g FLOPs / %.3g bytes = %.3g FLOPs per byte\n%.1f GFLOP/s%s",
                      hovered->label.c_str(),
                      hovered->measured ? "counters: executed FLOPs, DRAM bytes"
                                        : "the lab's FLOP and bytes model",
                      hovered->flops, hovered->bytes, hovered->intensity(), hovered->gflops(),
                      roofs_text.c_str());
  }
  ui.chart_min = p0, ui.chart_max = ImVec2(p0.x + w, p0.y + h);
  for (const RoofCeilings& c : roofs) {
    ImGui::TextWrapped("%s%s: %s; %s", c.estimate ? "Orin (estimate)" : c.device.c_str(),
                       c.estimate ? "" : " (measured)", c.gbs_what.c_str(), c.gflops_what.c_str());
  }
  ImGui::TextDisabled(
      "circles: the lab's model; squares: counters; the line joins the steps; "
      "ringed: the stage as configured now");
}

void write_file(const std::string& path, const std::string& text, std::string& note) {
  try {
    write_output_file(path, text);
    note = "wrote " + path;
  } catch (const Error& e) {
    note = e.what();
  }
}

// The ladder's step that matches stage i as the Pipeline panel has it configured now (SIZE_MAX
// when the ladder has no such step).
size_t configured_step(const GuiApp& app, int stage, const Ladder& l) {
  if (stage < 0 || size_t(stage) >= app.ui.pipeline.stages.size()) return SIZE_MAX;
  const StageConfig& sc = app.ui.pipeline.stages[size_t(stage)];
  for (size_t k = 0; k < l.steps.size(); ++k) {
    const ResolvedStage& c = l.steps[k].cfg;
    const VariantDef& v = c.variant_def();
    const bool variant =
        sc.variant.empty() ? c.variant == c.op->default_variant() : v.name == sc.variant;
    const Block block = sc.block ? *sc.block : v.default_block;
    if (variant && c.block == block && c.math == sc.math) return k;
  }
  return SIZE_MAX;
}

}  // namespace

void export_ladder(LadderUi& ui, const std::string& base, bool csv, bool json, bool png) {
  if (!ui.result) return;
  std::string notes;
  if (csv) write_file(base + ".csv", ladder_csv(*ui.result), ui.note), notes += ui.note;
  if (json) {
    write_file(base + ".json", ladder_json(*ui.result), ui.note);
    notes += (notes.empty() ? "" : "; ") + ui.note;
  }
  if (!notes.empty()) ui.note = notes;
  if (png) ui.png_path = base + ".png";  // after this frame's render (gui.cpp)
}

void draw_ladder_panel(GuiApp& app) {
  LadderUi& ui = app.ui.ladder;
  if (!stage_window_begin(app, "Ladder", ui.stage,
                          "the stage (or playground) whose steps the ladder runs"))
    return;
  ImGui::SameLine();
  ImGui::Checkbox("every block", &ui.spec.every_block);
  tip("each variant with every block it allows (else its default block; the configured variant "
      "keeps the configured block)");
  ImGui::SameLine();
  ImGui::Checkbox("both math", &ui.spec.both_math);
  tip("each step precise and with --use_fast_math (else the configured math mode)");
  ImGui::SameLine();
  ImGui::BeginDisabled(app.opt.backend != Backend::Cuda);
  ImGui::Checkbox("hardware counters", &ui.counters);
  ImGui::EndDisabled();
  tip("collect CUPTI counters for each step after its timed runs (achieved occupancy, DRAM "
      "bytes, FLOPs executed): the measured roofline points. Slower; GPU only");
  if (ui.running) {
    const size_t done = ui.progress->done, total = ui.progress->total;
    char buf[64];
    std::snprintf(buf, sizeof buf, "step %zu of %zu", done, total);
    ImGui::ProgressBar(total ? float(done) / float(total) : 0.0f, ImVec2(-70, 0), buf);
    ImGui::SameLine();
    if (ImGui::Button("stop")) ui.progress->stop = true;
    tip("end the ladder after the step running now; the steps done are kept");
  } else if (ImGui::Button("run the ladder")) {
    ui.requested = true;
  }
  if (!ui.running)
    tip("time every step of this stage as bench does (bench --lab NAME, or bench --stage S "
        "--sweep-variants), one after the other, on the current input");
  if (!ui.error.empty()) ImGui::TextColored(ImVec4(1, 0.55f, 0.35f, 1), "%s", ui.error.c_str());
  if (!ui.result) {
    ImGui::TextWrapped("Run the ladder to fill the table, the bar chart and the roofline.");
    ImGui::End();
    return;
  }
  const Ladder& l = *ui.result;
  ImGui::TextWrapped("%s on %s: %s", l.op.c_str(), l.device.c_str(), l.measured.c_str());
  tip("how every step was timed: the same measure_stage as bench");
  if (l.copy_gbs > 0 || !l.ceiling_variant.empty())
    ImGui::TextWrapped("%% ceil: %s", l.ceiling_name().c_str());
  else
    ImGui::TextWrapped("%% ceil: no ceiling without a GPU (the CPU references have none)");
  if (l.copy_gbs > 0) {
    ImGui::SameLine();
    ImGui::TextDisabled("(device copy %.0f GB/s)", l.copy_gbs);
    tip("cudaMemcpy device to device of 256 MiB, read + write, measured in this run");
  }
  for (const std::string& n : l.notes) ImGui::TextDisabled("%s", n.c_str());

  if (ui.export_base[0] == 0)
    std::snprintf(ui.export_base, sizeof ui.export_base, "ladder-%s", l.op.c_str());
  ImGui::SetNextItemWidth(220);
  ImGui::InputText("##export", ui.export_base, sizeof ui.export_base);
  tip("the exports' path without extension (relative: to the folder the lab started in)");
  ImGui::SameLine();
  if (ImGui::Button("CSV")) export_ladder(ui, ui.export_base, true, false, false);
  tip("the table as CSV: one line per step, every column, unknown values empty");
  ImGui::SameLine();
  if (ImGui::Button("JSON")) export_ladder(ui, ui.export_base, false, true, false);
  tip("the table as JSON, with the run's facts (device, how it was measured, the ceiling)");
  ImGui::SameLine();
  if (ImGui::Button("PNG")) export_ladder(ui, ui.export_base, false, false, true);
  tip("the chart shown below (bars or roofline) as a PNG image");
  if (!ui.note.empty()) ImGui::TextDisabled("%s", ui.note.c_str());

  auto flags = [&ui](int k) {
    return ui.select_view == k ? ImGuiTabItemFlags_SetSelected : ImGuiTabItemFlags_None;
  };
  if (ImGui::BeginTabBar("ladder views")) {
    if (ImGui::BeginTabItem("chart", nullptr, flags(0))) {
      ImGui::RadioButton("time", &ui.bars, 0);
      tip("each step's median time");
      ImGui::SameLine();
      ImGui::RadioButton("% of ceiling", &ui.bars, 1);
      tip(l.ceiling_name().c_str());
      bar_chart(ui, l);
      ImGui::EndTabItem();
    }
    if (ImGui::BeginTabItem("roofline", nullptr, flags(1))) {
      ImGui::Checkbox("Orin roofs", &ui.orin_roof);
      tip("also Jetson AGX Orin's roofs: 183 GB/s measured copy and 5.3 TFLOP/s FP32 from its "
          "clocks: published figures, an estimate");
      roofline(ui, l, configured_step(app, ui.stage, l));
      ImGui::EndTabItem();
    }
    if (ImGui::BeginTabItem("table", nullptr, flags(2))) {
      steps_table(l);
      ImGui::EndTabItem();
    }
    if (ImGui::BeginTabItem("why", nullptr, flags(3))) {
      why_view(ui);
      ImGui::EndTabItem();
    }
    ImGui::EndTabBar();
    ui.select_view = -1;
  }
  ImGui::End();
}

void write_asked_chart(GuiApp& app, int fb_w, int fb_h) {
  LadderUi& L = app.ui.ladder;
  if (L.png_path.empty()) return;
  const ImVec2 sc = ImGui::GetIO().DisplayFramebufferScale;
  try {
    write_screenshot_region(L.png_path, fb_w, fb_h, int(L.chart_min.x * sc.x),
                            int(L.chart_min.y * sc.y), int(L.chart_max.x * sc.x),
                            int(L.chart_max.y * sc.y));
    L.note = "wrote " + L.png_path;
  } catch (const Error& e) {
    L.note = e.what();
  }
  L.png_path.clear();
}

}  // namespace lab::ui
