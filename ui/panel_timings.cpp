// Timings: per launch GPU time (median, p95, history) measured as `bench` measures it, GB/s
// against the device copy bandwidth, hardware counters on demand, and, on rows of their own,
// the costs that are real but no kernel's (upload, enqueue, interop, GL sync).
#include <cmath>
#include <cstdio>
#include <string>

#include "app_state.h"
#include "frame_budget.h"
#include "orin.h"
#include "stats.h"
#include "widgets.h"

namespace lab::ui {

namespace {
double median_of(const std::vector<float>& h) {
  return median(std::vector<double>(h.begin(), h.end()));
}
double p95_of(const std::vector<float>& h) {
  return percentile(std::vector<double>(h.begin(), h.end()), 95);
}

// The counters of the launch `key` ("stage/kernel") from the last collection, or null.
const CounterValues* counters_of(const GuiApp& app, const std::string& key) {
  const CounterRun& c = app.ui.counters;
  if (!c.report.ok) return nullptr;
  for (size_t n = 0; n < c.launches.size() && n < c.report.ranges.size(); ++n) {
    const LaunchRecord& l = c.launches[n];
    if (l.stage < app.ui.counter_stages.size() &&
        app.ui.counter_stages[l.stage] + "/" + l.kernel == key)
      return &c.report.ranges[n];
  }
  return nullptr;
}

void pct_cell(double v, const char* why) {
  ImGui::TableNextColumn();
  if (std::isfinite(v))
    ImGui::Text("%.0f%%", v);
  else
    ImGui::TextDisabled("-");
  tip(why);
}

// A row of the "not kernel time" table: a name, its median and p95, and what it is.
void cost_row(const char* name, const std::vector<float>& h, const char* what) {
  if (h.empty()) return;
  ImGui::TableNextRow();
  ImGui::TableNextColumn();
  ImGui::TextUnformatted(name);
  tip(what);
  ImGui::TableNextColumn();
  ImGui::Text("%.3f", median_of(h));
  tip(what);
  ImGui::TableNextColumn();
  ImGui::Text("%.3f", p95_of(h));
  tip("95th percentile of the same history");
}

// One frame end to end, each part's median and the frame rate it allows on its own; the lowest
// limits the lab (frame_budget.h; `run` prints the same).
void draw_frame_budget(const GuiApp& app) {
  const FrameBudget b = gui_frame_budget(app);
  ImGui::TextUnformatted("Frame budget (each part on its own)");
  tip("where one frame's time goes from the source to the screen. The parts run on different "
      "threads and engines (capture thread, copy engine, kernels, UI), so the lab runs no faster "
      "than the slowest part allows: that is the limit");
  if (!ImGui::BeginTable(
          "budget", 3,
          ImGuiTableFlags_RowBg | ImGuiTableFlags_Borders | ImGuiTableFlags_SizingFixedFit))
    return;
  ImGui::TableSetupColumn("part");
  ImGui::TableSetupColumn("median ms");
  ImGui::TableSetupColumn("allows fps");
  ImGui::TableHeadersRow();
  const std::string limit = b.limit();
  auto row = [&](const char* name, double ms, double fps, const char* what) {
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    if (limit == name)
      ImGui::TextColored(ImVec4(1.0f, 0.75f, 0.3f, 1.0f), "%s (limit)", name);
    else
      ImGui::TextUnformatted(name);
    tip(what);
    ImGui::TableNextColumn();
    if (ms >= 0)
      ImGui::Text("%.3f", ms);
    else
      ImGui::TextDisabled("-");
    tip(what);
    ImGui::TableNextColumn();
    if (fps > 1e5)
      ImGui::TextUnformatted("> 100000");
    else if (fps > 0)
      ImGui::Text("%.0f", fps);
    else
      ImGui::TextDisabled("-");
    tip("1000 / the median: the frames per second this part alone allows");
  };
  static const char* const what[] = {
      "the source's read of a frame on the capture thread (host wall clock): a decode, the "
      "synthetic scene's render, or a camera's wait for its next frame; a still image is decoded "
      "once, when it opens",
      "pinned upload: the host's copy of a frame into page-locked memory (0 when the source "
      "made it page-locked); mapped: the write into zero-copy memory",
      "the frame's copy to the device, GPU time between an event pair, over the frames that "
      "sent one (a still image is sent once unless \"send every frame\" is on)",
      "the pipeline's time: the GPU span of its launches (bench's frame) or the CPU references'",
      "the viewport's update when a result arrives: CUDA-GL interop copies or a texture upload, "
      "host wall clock"};
  for (size_t i = 0; i < b.parts.size(); ++i)
    if (b.parts[i].ms >= 0) row(b.parts[i].name, b.parts[i].ms, b.parts[i].fps(), what[i]);
  if (b.source_fps > 0)
    row("the source's own rate", -1, b.source_fps,
        "the rate the source delivers: a camera's, or the pace a file is offered at (a still "
        "image 30 fps, a folder 1 fps)");
  ImGui::EndTable();
}

// The ncu command line of stage i as the GUI has it configured (for the clipboard).
std::string ncu_line(const GuiApp& app, size_t i, int launches) {
  const PipelineConfig& p = app.ui.pipeline;
  std::string input;
  if (const Op* lab = playground_of(p)) {
    input = "--lab " + lab->def.name + " --seed " + std::to_string(app.ui.lab_seed);
    if (app.ui.lab_size[0]) input += " --size " + std::string(app.ui.lab_size);
  } else {
    input = "--input '" + app.opt.input + "'";
    if (p.stages.size() == default_pipeline("harris").stages.size()) input += " --pipeline harris";
  }
  try {
    return ncu_command(self_executable(), input, resolve(p, &device_info()), i, launches);
  } catch (const Error& e) {
    return std::string("# ") + e.what();
  }
}
}  // namespace

FrameBudget gui_frame_budget(const GuiApp& app) {
  const UiState& ui = app.ui;
  auto med = [](const std::vector<float>& h) { return h.empty() ? -1.0 : median_of(h); };
  const bool gpu = app.opt.backend == Backend::Cuda;
  // Mapped: the host's write is the whole upload (no copy engine): one part, not two.
  const bool dma = gpu && app.opt.upload != UploadMode::Mapped;
  return frame_budget(med(ui.read_ms), gpu ? med(ui.staging_ms) : -1,
                      dma ? med(ui.upload_dma_ms) : -1, med(ui.pipeline_ms), med(ui.display_ms),
                      app.capture ? app.capture->stats().fps : 0, gpu ? "GPU" : "CPU references");
}

void draw_timings_panel(GuiApp& app) {
  if (!ImGui::Begin("Timings")) {
    ImGui::End();
    return;
  }
  UiState& ui = app.ui;
  const bool gpu = app.opt.backend == Backend::Cuda;
  if (!app.stale.empty()) {
    ImGui::PushStyleColor(ImGuiCol_Text, ImVec4(1.0f, 0.6f, 0.2f, 1.0f));
    ImGui::TextWrapped("STALE: %s", app.stale.c_str());
    ImGui::PopStyleColor();
    tip("the figures below are from the last frame that finished; the engine is still waiting "
        "for this one (quit to leave: the lab exits with code 70 and saves your editor)");
  }
  const double frame = median_of(ui.frame_ms);
  ImGui::Text("frame %.2f ms (%.0f fps)", frame, frame > 0 ? 1000.0 / frame : 0.0);
  tip("wall-clock time of a whole UI frame (steady_clock): take the newest input, hand it to the "
      "engine, show the last result, draw the UI; median of the last 240 frames. FPS = 1000 / "
      "that median");
  ImGui::SameLine();
  ImGui::Text("| pipeline %.3f ms median, %.3f p95%s", median_of(ui.pipeline_ms),
              p95_of(ui.pipeline_ms),
              app.view.graph_split ? " (CUDA graphs, split at the kernel host's stage)"
              : app.view.graph     ? " (CUDA graph)"
                                   : "");
  tip(!gpu ? "CPU mode: the sum of the stages' reference times (steady_clock)"
      : app.view.graph_split
          ? "the pipeline as CUDA graphs split at the live kernel's stage, which runs in the "
            "kernel host (a child process): the graph before it, the hosted launch (the lab "
            "waits for its stream, the child launches and replies), the graph after. GPU time "
            "between one event pair around all of it, the wait for the child included. Median "
            "and 95th percentile of the last 240 frames"
      : app.view.graph
          ? "the CUDA graph's GPU time between one event pair around cudaGraphLaunch, queued "
            "behind the GPU-side delay: bench's frame_graph figure. Median and 95th percentile "
            "of the last 240 frames. Per-launch times are not measured inside a graph"
          : "GPU time from the first launch's start to the last launch's end, each launch "
            "between its own event pair, queued behind the GPU-side delay: bench's 'frame' "
            "figure for the same configuration and input. Median and 95th percentile of the "
            "last 240 frames");
  if (gpu) {
    if (ImGui::Checkbox("cold L2", &ui.cold_l2)) ui.launch_us.clear(), ui.pipeline_ms.clear();
    tip("empty the L2 (read twice its size, then discard those lines) before each frame's timed "
        "run (bench --cold): the frame starts DRAM-cold, later stages read what earlier ones "
        "left in the L2. Off: L2-warm as in bench: an untimed run of the same frame goes just "
        "before the timed one, so the UI's own drawing between frames does not evict the input. "
        "Switching starts new histories");
    ImGui::SameLine();
    ImGui::Checkbox("send every frame", &ui.resend_input);
    tip("a still image hands out one frame: once it is on the GPU it is not sent again (its "
        "upload rows stay empty). On: it is sent every frame, as a camera's would be, to time "
        "the upload");
    ImGui::SameLine();
    if (ImGui::Button("measure counters")) ui.counters_requested = true;
    tip("hardware counters for every launch of the next frame, through CUPTI's range profiler "
        "(bench --counters): the frame is replayed once per pass the metrics need, after its "
        "timed run, so no profiled run enters a timing");
    if (ui.counters.report.ok) {
      ImGui::SameLine();
      ImGui::Text("%d passes, %.0f ms", ui.counters.report.passes, ui.counters.report.ms);
      tip("replay passes CUPTI needed for the metrics, and the host time the whole collection "
          "took (set-up, passes, evaluation)");
    } else if (!ui.counters.report.why.empty()) {
      ImGui::TextWrapped("%s", ui.counters.report.why.c_str());
    }
  }
  if (!ui.pipeline_ms.empty())
    ImGui::PlotLines("##pipeline", ui.pipeline_ms.data(), int(ui.pipeline_ms.size()), 0, nullptr,
                     0.0f, FLT_MAX, ImVec2(ImGui::GetContentRegionAvail().x, 40));
  tip("pipeline time per frame, oldest on the left");
  if (!gpu) {
    ImGui::TextWrapped("CPU mode: no kernels run, so there are no launch timings.");
    ImGui::Spacing();
    draw_frame_budget(app);
    ImGui::End();
    return;
  }
  // The state these timings were taken in: at the start of the histories and at the newest frame.
  const OrinBandwidth orin = orin_bandwidth_for(ui.timings_end);
  const std::vector<std::string> warnings = state_warnings(ui.timings_start, ui.timings_end);
  if (ui.timings_end.source != DeviceState::Source::None || !ui.timings_end.source_why.empty()) {
    ImGui::TextWrapped("device: %s", ui.timings_end.summary().c_str());
    tip(("the device's state beside the newest frame's timed run (read a few times a second, not "
         "every frame: NVML on a discrete GPU, sysfs on a Jetson; the Device panel has the "
         "details). When these histories began: " +
         ui.timings_start.summary())
            .c_str());
    for (const std::string& w : warnings) {
      ImGui::PushStyleColor(ImGuiCol_Text, ImVec4(1.0f, 0.6f, 0.2f, 1.0f));
      ImGui::TextWrapped("! %s", w.c_str());
      ImGui::PopStyleColor();
      tip("between the start of these histories and the newest frame; the rows marked ! were "
          "timed in this state");
    }
  }
  const bool counted = ui.counters.report.ok;
  const int cols = counted ? 13 : 8;
  if (ImGui::BeginTable("launches", cols,
                        ImGuiTableFlags_RowBg | ImGuiTableFlags_Borders |
                            ImGuiTableFlags_SizingFixedFit | ImGuiTableFlags_ScrollX)) {
    ImGui::TableSetupColumn("stage / kernel");
    ImGui::TableSetupColumn("median us");
    ImGui::TableSetupColumn("p95 us");
    ImGui::TableSetupColumn("GB/s");
    ImGui::TableSetupColumn("%copy");
    ImGui::TableSetupColumn("Orin~ us");
    if (counted) {
      ImGui::TableSetupColumn("ach. occ");
      ImGui::TableSetupColumn("DRAM MB r/w");
      ImGui::TableSetupColumn("L2 hit");
      ImGui::TableSetupColumn("SM / mem");
      ImGui::TableSetupColumn("top stall");
    }
    ImGui::TableSetupColumn("history");
    ImGui::TableSetupColumn("ncu");
    ImGui::TableHeadersRow();
    for (size_t i = 0; i < app.view.stage_names.size(); ++i) {
      const std::string& stage = app.view.stage_names[i];
      double stage_us = 0;
      int launches = 0;
      for (const auto& [key, hist] : ui.launch_us) {
        if (key.rfind(stage + "/", 0) != 0) continue;
        ImGui::TableNextRow();
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(warnings.empty() ? key.c_str() : (key + " !").c_str());
        if (!warnings.empty())
          tip("timed while the device's state moved or was throttled: see the "
              "lines above the table");
        ImGui::TableNextColumn();
        const double med = median_of(hist);
        ImGui::Text("%.2f", med);
        tip("GPU time between this launch's CUDA event pair, queued behind a GPU-side delay "
            "(so the host's launch latency is not in it), median of the last 240 frames: the "
            "figure bench prints for the same configuration and input");
        ImGui::TableNextColumn();
        ImGui::Text("%.2f", p95_of(hist));
        tip("95th percentile of the same history");
        stage_us += med, ++launches;
        ImGui::TableNextColumn();  // GB/s, %copy and the Orin estimate: on the stage's row
        ImGui::TableNextColumn();
        ImGui::TableNextColumn();
        if (counted) {
          const CounterValues* c = counters_of(app, key);
          const double nan = std::nan("");
          pct_cell(c ? c->achieved_occupancy_pct : nan,
                   "achieved occupancy: active warps over the SM's maximum, averaged over the "
                   "launch (sm__warps_active.avg.pct_of_peak_sustained_active); the Occupancy "
                   "panel puts the theoretical one beside it");
          ImGui::TableNextColumn();
          if (c) ImGui::Text("%.2f / %.2f", c->dram_read_bytes / 1e6, c->dram_write_bytes / 1e6);
          tip("DRAM bytes read and written by this launch (dram__bytes_read.sum, "
              "dram__bytes_write.sum), in MB; the stage row shows the lab's bytes model beside "
              "their sum. Little DRAM traffic means the data stayed in the L2");
          pct_cell(c ? c->l2_hit_pct : nan, "L2 sector hit rate (lts__t_sector_hit_rate.pct)");
          ImGui::TableNextColumn();
          if (c) ImGui::Text("%.0f / %.0f%%", c->sm_throughput_pct, c->mem_throughput_pct);
          tip("speed of light: SM throughput and memory throughput as percent of their peaks "
              "(sm__throughput, gpu__compute_memory_throughput .avg.pct_of_peak_sustained_"
              "elapsed). The higher one says what bounds the kernel");
          ImGui::TableNextColumn();
          if (c && !c->top_stalls.empty()) {
            ImGui::TextUnformatted(c->top_stalls[0].words.c_str());
            if (ImGui::IsItemHovered()) {
              std::string t =
                  "the top warp stall reasons, in warps stalled per issued instruction "
                  "(smsp__average_warps_issue_stalled_<reason>_per_issue_active.ratio):";
              for (const StallReason& st : c->top_stalls)
                t += "\n  " + st.words + ": " + std::to_string(st.per_issue);
              ImGui::SetTooltip("%s", t.c_str());
            }
          }
        }
        ImGui::TableNextColumn();
        ImGui::PushID(key.c_str());
        ImGui::PlotLines("##h", hist.data(), int(hist.size()), 0, nullptr, 0.0f, FLT_MAX,
                         ImVec2(90, 16));
        ImGui::PopID();
        tip("this launch's GPU time over the last 240 frames, oldest on the left");
        ImGui::TableNextColumn();
      }
      if (launches == 0 || stage_us <= 0) continue;
      const double gbs = app.view.stage_bytes[i] / (stage_us * 1e-6) / 1e9;
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      std::string runs;  // another step's code ran for this one (LaunchRecord::runs)
      for (const LaunchRecord& l : app.view.launches)
        if (l.stage == i && !l.runs.empty()) runs = l.runs;
      if (runs.empty()) {
        ImGui::Text("%s (stage)", stage.c_str());
      } else {
        ImGui::Text("%s (stage) runs %s", stage.c_str(), runs.substr(0, runs.find(':')).c_str());
        tip(("this step's own code does not run here: " + runs +
             ". Its figures are that step's, as bench prints them")
                .c_str());
      }
      ImGui::TableNextColumn();
      ImGui::Text("%.2f", stage_us);
      tip("the sum of the stage's launch medians");
      ImGui::TableNextColumn();
      ImGui::TableNextColumn();
      ImGui::Text("%.0f", gbs);
      tip("the bytes the stage must move (the lab's model: each input read once, each output "
          "written once) over its median time");
      ImGui::TableNextColumn();
      if (app.copy_gbs > 0) {
        ImGui::Text("%.0f%%", 100 * gbs / app.copy_gbs);
        tip("GB/s as a share of the device copy bandwidth (cudaMemcpy D2D of 256 MiB, read + "
            "write, measured at start)");
      }
      ImGui::TableNextColumn();
      ImGui::Text("%.1f", orin_estimate_us(app.view.stage_bytes[i], orin.gbs));
      {
        char why[700];
        std::snprintf(why, sizeof why,
                      "an estimate, not a measurement: the stage's bytes model (%.2f MB, each "
                      "input read once and each output written once) over %.1f GB/s: %s. Orin "
                      "is bandwidth-bound, so fewer bytes (fusion) is what makes it faster there",
                      app.view.stage_bytes[i] / 1e6, orin.gbs, orin.how.c_str());
        tip(why);
      }
      if (counted) {
        const CounterRun& c = ui.counters;
        const CounterValues sum = sum_counters(c.report.ranges, [&](size_t n) {
          return n < c.launches.size() && c.launches[n].stage < ui.counter_stages.size() &&
                 ui.counter_stages[c.launches[n].stage] == stage;
        });
        ImGui::TableNextColumn();
        ImGui::TableNextColumn();
        ImGui::Text("%.2f (model %.2f)", (sum.dram_read_bytes + sum.dram_write_bytes) / 1e6,
                    app.view.stage_bytes[i] / 1e6);
        tip("the stage's measured DRAM traffic (read + written, MB) beside the lab's bytes "
            "model; below the model, the L2 served part of it");
        ImGui::TableNextColumn();
        ImGui::TableNextColumn();
        ImGui::TableNextColumn();
      }
      ImGui::TableNextColumn();
      ImGui::TableNextColumn();
      ImGui::PushID(int(i));
      if (ImGui::SmallButton("copy")) ImGui::SetClipboardText(ncu_line(app, i, launches).c_str());
      ImGui::PopID();
      tip("copy the ncu command line that profiles this stage's kernels as configured here, "
          "with the lab's metrics (kernel-lab run --frames 1 --cold: the L2 flushed before each "
          "launch as for the lab's counters; kernels picked by the NVTX range "
          "stage/variant/block/math)");
    }
    ImGui::EndTable();
  }
  ImGui::Spacing();
  draw_frame_budget(app);
  ImGui::Spacing();
  ImGui::TextUnformatted("Not kernel time (each measured on its own)");
  if (ImGui::BeginTable(
          "costs", 3,
          ImGuiTableFlags_RowBg | ImGuiTableFlags_Borders | ImGuiTableFlags_SizingFixedFit)) {
    ImGui::TableSetupColumn("cost");
    ImGui::TableSetupColumn("median ms");
    ImGui::TableSetupColumn("p95 ms");
    ImGui::TableHeadersRow();
    // Each a history of its own: a name, its samples, and what it is.
    struct Cost {
      const char* name;
      std::vector<float> UiState::*hist;
      const char* what;
    };
    static const Cost costs[] = {
        {"upload copy (GPU)", &UiState::upload_dma_ms,
         "the input frame's copy to the device, between an event pair on the copy engine "
         "(pageable: on the compute stream), over the frames that sent one; the timed "
         "launches start after it"},
        {"upload staging (host)", &UiState::staging_ms,
         "pinned upload: the host copy of the frame into page-locked memory (0 when the "
         "source captured it page-locked); mapped: the write into zero-copy memory"},
        {"enqueue (host)", &UiState::enqueue_ms,
         "host time to enqueue the frame's launches; the GPU-side delay hides it, so it is "
         "not in any launch's figure (on an idle GPU an unqueued first launch would absorb "
         "it)"},
        {"interop map", &UiState::map_ms,
         "cudaGraphicsMapResources of the viewport texture and keypoint buffer (host wall "
         "clock; it synchronises with OpenGL)"},
        {"interop copy + unmap", &UiState::unmap_ms,
         "the device copies into the mapped texture and buffer, cudaGraphicsUnmapResources "
         "and the wait for them (host wall clock)"},
        {"display", &UiState::display_ms,
         "the whole viewport update when a result arrives: interop (or glTexSubImage2D "
         "from the host) and the keypoint buffer, host wall clock"},
        {"GL sync", &UiState::gl_sync_ms,
         "the swap (window) or glFinish (headless) that ends each UI frame, host wall "
         "clock"},
        {"engine job", &UiState::job_ms,
         "the whole engine job on its worker thread (host wall clock): upload, the delay "
         "and the timed launches, the display copies, the colormap range read-back"},
    };
    for (const Cost& c : costs) cost_row(c.name, ui.*c.hist, c.what);
    ImGui::EndTable();
  }
  ImGui::End();
}

}  // namespace lab::ui
