// Device: what the lab runs on; a clear banner in CPU-only mode.
#include "app_state.h"

namespace lab::ui {

void draw_device_panel(GuiApp& app) {
  if (!ImGui::Begin("Device")) {
    ImGui::End();
    return;
  }
  const DeviceInfo& d = device_info();
  if (app.opt.backend == Backend::Cpu) {
    ImGui::PushStyleColor(ImGuiCol_Text, ImVec4(1.0f, 0.8f, 0.3f, 1.0f));
    ImGui::TextWrapped("CPU-ONLY MODE: %s. Every stage runs its plain CPU reference.",
                       d.present ? "--device cpu" : d.why_absent.c_str());
    ImGui::PopStyleColor();
  } else {
    ImGui::Text("%s", d.name.c_str());
    ImGui::Text("compute capability %d.%d (%s), %d SMs", d.major, d.minor, d.arch().c_str(), d.sms);
    tip("from cudaDeviceGetAttribute");
    ImGui::Text("%.1f GiB, %s", double(d.global_mem) / (1 << 30),
                d.integrated ? "integrated (shares DRAM with the CPU)" : "discrete");
    tip("integrated GPUs (Jetson) share memory with the CPU: zero-copy beats copies there");
    ImGui::Text("SM clock %.0f MHz, memory clock %.0f MHz, %d-bit bus", d.clock_khz / 1e3,
                d.mem_clock_khz / 1e3, d.mem_bus_bits);
    tip("the maximum clocks the driver reports (cudaDevAttrClockRate, MemoryClockRate)");
    ImGui::Text("input upload: %s", upload_mode_name(app.opt.upload));
    tip("how input frames reach the GPU (--upload): pinned, page-locked memory and an async copy "
        "on a copy stream (discrete GPUs); mapped, zero-copy memory the kernels read in place "
        "(integrated GPUs such as Orin); pageable, a plain cudaMemcpy");
    ImGui::Text("driver %d, runtime %d", d.driver_version, d.runtime_version);
    tip("CUDA versions as 1000 x major + 10 x minor (cudaDriverGetVersion, cudaRuntimeGetVersion)");
    if (app.gpu_lost)
      ImGui::TextColored(ImVec4(1, 0.4f, 0.4f, 1), "GPU context lost and not rebuilt: exiting");
    if (app.recovery.count > 0) {
      ImGui::Text("recovered from %d GPU fault(s): %s in %.0f ms, live again after %.0f ms",
                  app.recovery.count, app.recovery.restarted ? "started again" : "rebuilt",
                  app.recovery.rebuild_ms, app.recovery.live_ms);
      tip(app.recovery.restarted
              ? "a sticky CUDA error, after which the driver gave the process no new context: "
                "Kernel Lab started itself again (same command line and PID) on the last "
                "configuration that worked (host wall time, CLOCK_MONOTONIC, from the fault's "
                "report to this process's start, and to the first frame that ran)"
              : "a sticky CUDA error in this process: the device was reset and every CUDA object "
                "made again (host wall time from the fault's report to the rebuilt state, and to "
                "the next frame that ran)");
    }
  }
  ImGui::Separator();
  ImGui::TextWrapped("display: %s", app.upload_note.c_str());
  tip("how images reach the screen");
  ImGui::End();
}

}  // namespace lab::ui
