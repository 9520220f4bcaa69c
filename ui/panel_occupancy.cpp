// Occupancy: per launch registers, shared memory, spills, blocks per SM, occupancy and its
// limiter, here and on Jetson Orin (sm_87).
#include <algorithm>
#include <cmath>

#include "app_state.h"
#include "probe.h"
#include "widgets.h"

namespace lab::ui {

void draw_occupancy_panel(GuiApp& app) {
  // A horizontal scrollbar rather than squeezed columns or curves under 300 px.
  if (!ImGui::Begin("Occupancy", nullptr, ImGuiWindowFlags_HorizontalScrollbar)) {
    ImGui::End();
    return;
  }
  if (app.opt.backend != Backend::Cuda || app.view.launches.empty()) {
    ImGui::TextWrapped("No kernel launches to describe (CPU mode, or no frame yet).");
    ImGui::End();
    return;
  }
  // The table takes what the curves below leave.
  const float table_h = std::max(80.0f, ImGui::GetContentRegionAvail().y - 220);
  // Achieved occupancy, where "measure counters" collected it for this frame's launches.
  const CounterRun& cr = app.ui.counters;
  auto achieved = [&](size_t n) -> double {
    if (!cr.report.ok || n >= cr.report.ranges.size() || n >= cr.launches.size() ||
        cr.launches[n].kernel != app.view.launches[n].kernel)
      return std::nan("");
    return cr.report.ranges[n].achieved_occupancy_pct;
  };
  if (!cr.report.why.empty()) ImGui::TextWrapped("achieved: %s", cr.report.why.c_str());
  if (ImGui::BeginTable("occ", 9,
                        ImGuiTableFlags_RowBg | ImGuiTableFlags_Borders |
                            ImGuiTableFlags_SizingFixedFit | ImGuiTableFlags_ScrollY |
                            ImGuiTableFlags_ScrollX,
                        ImVec2(0, table_h))) {
    const char* cols[] = {"kernel", "block",     "regs",     "smem",        "local",
                          "blk/SM", "occupancy", "achieved", "Orin (sm_87)"};
    ImGui::TableSetupScrollFreeze(1, 1);
    for (const char* c : cols) ImGui::TableSetupColumn(c);
    ImGui::TableHeadersRow();
    for (size_t n = 0; n < app.view.launches.size(); ++n) {
      const LaunchRecord& r = app.view.launches[n];
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(r.kernel.c_str());
      if (r.remote)
        tip("a live kernel, run in the kernel host (the lab's child process): its attributes and "
            "resident blocks were read there, the occupancy figures computed here from them");
      if (!r.func && !r.remote) {  // a library call: CUB's kernels and shapes, not ours to describe
        ImGui::TableNextColumn();
        ImGui::TextDisabled("library");
        tip("a CUB call, timed as one launch; it launches kernels of its own, whose shapes and "
            "occupancy CUB chooses");
        continue;
      }
      ImGui::TableNextColumn();
      ImGui::Text("%ux%u", r.block.x, r.block.y);
      tip("the block shape of the launch that ran (recorded by the launch helper)");
      ImGui::TableNextColumn();
      ImGui::Text("%d", r.attrs.regs);
      tip("registers per thread (cudaFuncGetAttributes)");
      ImGui::TableNextColumn();
      ImGui::Text("%zu", r.attrs.static_smem + r.dyn_smem);
      tip("shared memory per block in bytes, static + dynamic");
      ImGui::TableNextColumn();
      ImGui::Text("%zu", r.attrs.local_bytes);
      tip("local memory per thread in bytes: non-zero means register spills or local arrays");
      ImGui::TableNextColumn();
      ImGui::Text("%d", r.blocks_per_sm);
      tip("resident blocks per SM (cudaOccupancyMaxActiveBlocksPerMultiprocessor)");
      ImGui::TableNextColumn();
      ImGui::Text("%.0f%% %s", 100 * r.est.occupancy, limiter_name(r.est.limiter));
      tip("theoretical occupancy: active warps over the SM's maximum, from our calculator on "
          "this GPU's limits, and the resource that limits it");
      ImGui::TableNextColumn();
      const double ach = achieved(n);
      if (std::isfinite(ach))
        ImGui::Text("%.0f%%", ach);
      else
        ImGui::TextDisabled("-");
      tip("achieved occupancy, measured: active warps over the SM's maximum averaged over the "
          "launch (CUPTI, sm__warps_active.avg.pct_of_peak_sustained_active). Below the "
          "theoretical figure: too few blocks to fill every SM, a tail, or warps that finish "
          "unevenly. '-': press \"measure counters\" in Timings");
      ImGui::TableNextColumn();
      ImGui::Text("%.0f%% %s", 100 * r.orin.occupancy, limiter_name(r.orin.limiter));
      tip(r.orin_from_sm87_build
              ? "the same calculator on sm_87 limits (48 warps, 16 blocks, 164 KiB per SM) with "
                "the sm_87 build's registers and shared memory (ptxas, at build time)"
              : "the same calculator on sm_87 limits (48 warps, 16 blocks, 164 KiB per SM) with "
                "this GPU's register count (the sm_87 table had no entry)");
    }
    ImGui::EndTable();
  }
  // Occupancy against block size for one launch: how its registers and shared memory cap it
  // here and on Orin.
  const auto& launches = app.view.launches;
  app.ui.occupancy_launch = std::min(app.ui.occupancy_launch, int(launches.size()) - 1);
  const LaunchRecord& sel = launches[size_t(app.ui.occupancy_launch)];
  ImGui::SetNextItemWidth(260);
  if (ImGui::BeginCombo("curve of", sel.kernel.c_str())) {
    for (size_t i = 0; i < launches.size(); ++i)
      if (ImGui::Selectable(launches[i].kernel.c_str(), int(i) == app.ui.occupancy_launch))
        app.ui.occupancy_launch = int(i);
    ImGui::EndCombo();
  }
  tip("occupancy against threads per block (32 to 1024) with this kernel's registers and shared "
      "memory, from our calculator");
  if (!sel.func && !sel.remote) {
    ImGui::TextDisabled("a library call: its kernels are CUB's, no curve");
    ImGui::End();
    return;
  }
  ImGui::SameLine();
  if (ImGui::Button("sweep blocks")) app.ui.sweep_requested = int(sel.stage);
  tip("time this launch's stage with every block shape its variant allows (median of 15 runs "
      "each, queued behind a GPU-side delay so the events time the kernels); the times are "
      "drawn over the curves as orange points, higher = slower");
  const bool swept = app.ui.sweep_stage == int(sel.stage) && !app.ui.sweep.empty();
  const size_t smem = sel.attrs.static_smem + sel.dyn_smem;
  const DeviceInfo& d = device_info();
  for (const ArchLimits* arch : {arch_limits(d.major, d.minor), arch_limits(8, 7)}) {
    if (!arch) continue;
    const std::vector<float> curve = occupancy_curve(*arch, sel.attrs.regs, smem);
    const std::string label =
        std::string(arch->name) + " (now " + std::to_string(sel.threads()) + " threads)";
    ImGui::PlotLines(label.c_str(), curve.data(), int(curve.size()), 0, nullptr, 0.0f, 1.0f,
                     ImVec2(std::max(300.0f, ImGui::GetContentRegionAvail().x - 180), 64));
    if (swept && arch == arch_limits(d.major, d.minor)) {
      // The measured times over this GPU's curve: x by threads per block as the curve, y from
      // the fastest (bottom) to the slowest (top) shape.
      const ImVec2 lo = ImGui::GetItemRectMin(), hi = ImGui::GetItemRectMax();
      const float plot_w = hi.x - lo.x;
      double tmin = 1e30, tmax = 0;
      for (const SweepPoint& p : app.ui.sweep)
        tmin = std::min(tmin, p.us), tmax = std::max(tmax, p.us);
      ImDrawList* dl = ImGui::GetWindowDrawList();
      for (const SweepPoint& p : app.ui.sweep) {
        const float fx = float(p.block.threads() / 32 - 1) / 31.0f;
        const float fy = tmax > tmin ? float((p.us - tmin) / (tmax - tmin)) : 0.5f;
        dl->AddCircleFilled(ImVec2(lo.x + 4 + fx * (plot_w - 8), hi.y - 4 - fy * (hi.y - lo.y - 8)),
                            3.5f, IM_COL32(255, 150, 30, 255));
      }
    }
    tip("x: 32, 64, ... 1024 threads per block; y: theoretical occupancy 0..100%; 0 where the "
        "block cannot launch");
  }
  if (swept &&
      ImGui::BeginTable("sweep", 3, ImGuiTableFlags_Borders | ImGuiTableFlags_SizingFixedFit)) {
    ImGui::TableSetupColumn("block");
    ImGui::TableSetupColumn("stage us");
    ImGui::TableSetupColumn("occupancy");
    ImGui::TableHeadersRow();
    for (const SweepPoint& p : app.ui.sweep) {
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(p.block.str().c_str());
      ImGui::TableNextColumn();
      ImGui::Text("%.2f", p.us);
      tip("the stage's GPU time with this block: median of 15 runs, each between CUDA events, "
          "queued behind a GPU-side delay");
      ImGui::TableNextColumn();
      ImGui::Text("%.0f%%", 100 * p.occupancy);
      tip("theoretical occupancy of the stage's first launch with this block (our calculator)");
    }
    ImGui::EndTable();
  }
  ImGui::End();
}

}  // namespace lab::ui
