// Timings: per launch GPU time (rolling plot, median, p95), GB/s against the device copy
// bandwidth, and the frame time.
#include <string>

#include "app_state.h"
#include "stats.h"

namespace lab::ui {

namespace {
double median_of(const std::vector<float>& h) {
  return median(std::vector<double>(h.begin(), h.end()));
}
double p95_of(const std::vector<float>& h) {
  return percentile(std::vector<double>(h.begin(), h.end()), 95);
}
}  // namespace

void draw_timings_panel(GuiApp& app) {
  if (!ImGui::Begin("Timings")) {
    ImGui::End();
    return;
  }
  const UiState& ui = app.ui;
  const bool gpu = app.opt.backend == Backend::Cuda;
  const double frame = median_of(ui.frame_ms);
  ImGui::Text("frame %.2f ms (%.0f fps)", frame, frame > 0 ? 1000.0 / frame : 0.0);
  tip("wall-clock time of a whole UI frame (steady_clock): take the newest input, hand it to the "
      "engine, show the last result, draw the UI; median of the last 240 frames. FPS = 1000 / "
      "that median");
  ImGui::Text("pipeline %.3f ms median, %.3f ms p95%s", median_of(ui.pipeline_ms),
              p95_of(ui.pipeline_ms), app.view.graph ? " (CUDA graph)" : "");
  tip(!gpu ? "CPU mode: the sum of the stages' reference times (steady_clock)"
      : app.view.graph
          ? "the CUDA graph's GPU time between one event pair around cudaGraphLaunch; "
            "median and 95th percentile of the last 240 frames. Per-launch times are not "
            "measured inside a graph"
          : "sum of every launch's GPU time (an event pair around each), median and 95th "
            "percentile of the last 240 frames");
  ImGui::Text("engine job %.3f ms", median_of(ui.job_ms));
  tip("the whole engine job on its worker thread (host wall clock): take the input, launch the "
      "pipeline and wait for it, copy the shown slot and keypoints for display, read back the "
      "colormap range; median of the last 240 frames");
  ImGui::Text("upload %.3f ms, display %.3f ms", median_of(ui.upload_ms), median_of(ui.display_ms));
  tip(gpu ? "upload (over the frames that sent a new input frame): the input frame to the device "
            "in the upload mode (--upload; the Device "
            "panel says which): pageable and pinned, the copy's GPU time between an event pair "
            "plus, pinned, the host copy into page-locked memory; mapped, the host write into "
            "memory the kernels read in place. display: writing the shown slot and the keypoints "
            "into their "
            "GL texture and buffer when a result arrives (CUDA-GL interop: map, device copy, "
            "unmap, synchronised; or glTexSubImage2D from the host), host wall clock. Medians "
            "of the last 240 frames"
          : "upload: the input into the reference's slot (a host copy). display: glTexSubImage2D "
            "of the shown slot and the keypoints, host wall clock. Medians of the last 240 "
            "frames");
  if (!ui.pipeline_ms.empty())
    ImGui::PlotLines("##pipeline", ui.pipeline_ms.data(), int(ui.pipeline_ms.size()), 0, nullptr,
                     0.0f, FLT_MAX, ImVec2(ImGui::GetContentRegionAvail().x, 50));
  tip("pipeline time per frame, oldest on the left");
  if (gpu && app.copy_gbs > 0) {
    ImGui::Text("device copy bandwidth %.0f GB/s", app.copy_gbs);
    tip("cudaMemcpy device to device of 256 MiB (read + write), measured at start: the ceiling "
        "the %copy column divides by");
  }
  if (!gpu) {
    ImGui::TextWrapped("CPU mode: no kernels run, so there are no launch timings.");
    ImGui::End();
    return;
  }
  if (ImGui::BeginTable(
          "launches", 6,
          ImGuiTableFlags_RowBg | ImGuiTableFlags_Borders | ImGuiTableFlags_SizingFixedFit)) {
    ImGui::TableSetupColumn("stage / kernel");
    ImGui::TableSetupColumn("median us");
    ImGui::TableSetupColumn("p95 us");
    ImGui::TableSetupColumn("GB/s");
    ImGui::TableSetupColumn("%copy");
    ImGui::TableSetupColumn("history");
    ImGui::TableHeadersRow();
    for (size_t i = 0; i < app.view.stage_names.size(); ++i) {
      const std::string& stage = app.view.stage_names[i];
      double stage_us = 0;
      int launches = 0;
      for (const auto& [key, hist] : ui.launch_us) {
        if (key.rfind(stage + "/", 0) != 0) continue;
        ImGui::TableNextRow();
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(key.c_str());
        ImGui::TableNextColumn();
        const double med = median_of(hist);
        ImGui::Text("%.2f", med);
        tip("GPU time between this launch's CUDA event pair, median of the last 240 frames");
        ImGui::TableNextColumn();
        ImGui::Text("%.2f", p95_of(hist));
        tip("95th percentile of the same history");
        stage_us += med, ++launches;
        ImGui::TableNextColumn();
        ImGui::TableNextColumn();
        ImGui::TableNextColumn();
        ImGui::PushID(key.c_str());
        ImGui::PlotLines("##h", hist.data(), int(hist.size()), 0, nullptr, 0.0f, FLT_MAX,
                         ImVec2(90, 16));
        ImGui::PopID();
        tip("this launch's GPU time over the last 240 frames, oldest on the left");
      }
      if (launches == 0 || stage_us <= 0) continue;
      const double gbs = app.view.stage_bytes[i] / (stage_us * 1e-6) / 1e9;
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      ImGui::Text("%s (stage)", stage.c_str());
      ImGui::TableNextColumn();
      ImGui::Text("%.2f", stage_us);
      tip("the sum of the stage's launch medians");
      ImGui::TableNextColumn();
      ImGui::TableNextColumn();
      ImGui::Text("%.0f", gbs);
      tip("the bytes the stage must move (each input read once, each output written once) over "
          "its median time");
      ImGui::TableNextColumn();
      if (app.copy_gbs > 0) {
        ImGui::Text("%.0f%%", 100 * gbs / app.copy_gbs);
        tip("GB/s as a share of the device copy bandwidth");
      }
    }
    ImGui::EndTable();
  }
  ImGui::End();
}

}  // namespace lab::ui
