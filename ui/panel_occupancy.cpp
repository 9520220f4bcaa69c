// Occupancy: per launch registers, shared memory, spills, blocks per SM, occupancy and its
// limiter, here and on Jetson Orin (sm_87).
#include "app_state.h"

namespace lab::ui {

void draw_occupancy_panel(GuiApp& app) {
  if (!ImGui::Begin("Occupancy")) {
    ImGui::End();
    return;
  }
  if (app.opt.backend != Backend::Cuda || app.view.launches.empty()) {
    ImGui::TextWrapped("No kernel launches to describe (CPU mode, or no frame yet).");
    ImGui::End();
    return;
  }
  if (ImGui::BeginTable("occ", 8,
                        ImGuiTableFlags_RowBg | ImGuiTableFlags_Borders |
                            ImGuiTableFlags_SizingFixedFit | ImGuiTableFlags_ScrollY)) {
    const char* cols[] = {"kernel", "block",  "regs",      "smem",
                          "local",  "blk/SM", "occupancy", "Orin (sm_87)"};
    for (const char* c : cols) ImGui::TableSetupColumn(c);
    ImGui::TableHeadersRow();
    for (const LaunchRecord& r : app.view.launches) {
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(r.kernel.c_str());
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
      ImGui::Text("%.0f%% %s", 100 * r.orin.occupancy, limiter_name(r.orin.limiter));
      tip("the same calculator on sm_87 limits (48 warps, 16 blocks, 164 KiB per SM), with this "
          "build's register count");
    }
    ImGui::EndTable();
  }
  ImGui::End();
}

}  // namespace lab::ui
