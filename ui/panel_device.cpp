// Device: what the lab runs on; a clear banner in CPU-only mode; the device's live state (power
// mode, clocks against their limits, load, temperatures, rails) beside the lab's own frame and
// kernel timings, as jtop or nvidia-smi would show it.
#include <algorithm>
#include <cfloat>
#include <cstdio>

#include "app_state.h"
#include "widgets.h"

namespace lab::ui {

namespace {

// "label: value unit", or "label: -" with the reason; the tooltip says what it is and where it
// was read.
void number(const char* label, const Reading<double>& r, const char* format, const char* what) {
  if (r.ok()) {
    char v[64];
    std::snprintf(v, sizeof v, format, *r);
    ImGui::Text("%s: %s", label, v);
    tip((std::string(what) + "; read from " + r.from).c_str());
  } else {
    ImGui::TextDisabled("%s: -", label);
    tip((std::string(what) + "; not available: " + r.why).c_str());
  }
}

// A clock against its limits: "GPU 918 MHz (306 .. 1300)".
void clock_line(const char* label, const DeviceState& s) {
  number(label, s.gpu_mhz, "%.0f MHz", "the GPU clock now");
  if (s.gpu_max_mhz.ok()) {
    ImGui::SameLine();
    if (s.gpu_min_mhz.ok())
      ImGui::Text("(%.0f .. %.0f MHz)", *s.gpu_min_mhz, *s.gpu_max_mhz);
    else
      ImGui::Text("(max %.0f MHz)", *s.gpu_max_mhz);
    tip(("the range the clock may take now (the power mode and jetson_clocks set it on a "
         "Jetson); read from " +
         s.gpu_max_mhz.from)
            .c_str());
  }
}

void draw_state(GuiApp& app) {
  const DeviceState s = app.sampler->current();  // cached: read at most 4 times a second
  if (s.source == DeviceState::Source::None) {
    ImGui::TextWrapped("device state: %s", s.source_why.c_str());
    tip("neither NVML (discrete GPUs) nor Jetson sysfs could be read; LAB_SYSFS_ROOT points the "
        "Jetson reader at another root folder");
    return;
  }
  const bool j = s.jetson();
  ImGui::Text("state: %s", j ? "Jetson sysfs" : "NVML");
  tip(j ? "read from sysfs under LAB_SYSFS_ROOT (default /) a few times a second; the EMC clock "
          "from debugfs needs root"
        : "read through NVML (libnvidia-ml.so.1, the driver's) a few times a second");
  if (j) {
    if (s.power_mode.ok() || s.power_mode_id.ok()) {
      ImGui::Text("power mode: %s (%d)", s.power_mode.ok() ? s.power_mode->c_str() : "?",
                  s.power_mode_id.ok() ? *s.power_mode_id : -1);
      tip(("nvpmodel's mode: its number from " + s.power_mode_id.from + ", its name from " +
           (s.power_mode.ok() ? s.power_mode.from : s.power_mode.why) +
           ". The mode sets the clocks' ceilings and may gate TPCs (the SM count above is "
           "read from CUDA at run time)")
              .c_str());
    } else {
      ImGui::TextDisabled("power mode: -");
      tip(s.power_mode_id.why.c_str());
    }
    if (s.pinned.ok()) {
      ImGui::SameLine();
      if (*s.pinned)
        ImGui::TextColored(ImVec4(0.5f, 1, 0.5f, 1), "clocks pinned");
      else
        ImGui::TextColored(ImVec4(1, 0.6f, 0.2f, 1), "clocks FLOATING");
      tip(*s.pinned ? "the GPU's devfreq min equals its max (as jetson_clocks leaves it): "
                      "timings are comparable"
                    : "clocks are floating: timings vary with load; `sudo jetson_clocks` pins "
                      "them (GPU devfreq min < max: DVFS follows the load)");
    }
    clock_line("GPU", s);
    number("EMC", s.mem_mhz, "%.0f MHz",
           "the memory (EMC) clock: Orin's kernels are mostly bandwidth-bound, so it sets their "
           "speed");
    number("GPU load", s.load_pct, "%.1f %%",
           "the GPU's busy share (devfreq device's load, 0-1000)");
    if (s.governor.ok()) {
      ImGui::Text("governor: %s", s.governor->c_str());
      tip(("the GPU's DVFS governor; read from " + s.governor.from).c_str());
    }
  } else {
    clock_line("SM", s);
    number("memory", s.mem_mhz, "%.0f MHz", "the memory clock (nvmlDeviceGetClockInfo MEM)");
    number("power", s.power_w, "%.1f W", "board power draw (nvmlDeviceGetPowerUsage, mW)");
    ImGui::SameLine();
    number("limit", s.power_limit_w, "%.0f W",
           "the enforced power limit (nvmlDeviceGetEnforcedPowerLimit)");
    if (s.pstate.ok()) {
      ImGui::Text("P%d", *s.pstate);
      tip("performance state (nvmlDeviceGetPerformanceState): P0 is the fastest");
      ImGui::SameLine();
    }
    ImGui::Text("reasons: %s", s.reasons_text().c_str());
    tip("the clock-event (throttle) reasons now (nvmlDeviceGetCurrentClocksEventReasons): "
        "GpuIdle is no throttling; SwPowerCap, HwSlowdown and the thermal ones hold the clocks "
        "below their maximum");
  }
  number("GPU temperature", s.gpu_celsius, "%.1f C",
         j ? "the gpu-thermal zone (millidegrees in sysfs)" : "the GPU sensor (NVML)");
  if (j && !s.cpus.empty()) {
    std::string cpus;
    for (const CpuClock& c : s.cpus)
      cpus += c.mhz.ok() ? std::to_string(int(*c.mhz)) + " " : std::string("- ");
    ImGui::TextWrapped("CPU MHz: %s", cpus.c_str());
    tip("each CPU's clock (cpuN/cpufreq/scaling_cur_freq, kHz); '-': offline or unreadable");
  } else if (j) {
    ImGui::TextDisabled("CPU clocks: -");
    tip(s.cpus_why.c_str());
  }
  if (j && s.rails.empty()) {
    ImGui::TextDisabled("power rails: -");
    tip(s.rails_why.c_str());
  }
  if (j && s.zones.empty()) {
    ImGui::TextDisabled("temperatures: -");
    tip(s.zones_why.c_str());
  }
  // The live plots: every series the sampler keeps (clocks, load, temperatures, each rail on its
  // own: the INA3221 rails overlap, so they are never summed).
  const float w = ImGui::GetContentRegionAvail().x;
  for (const StateSampler::Series& series : app.sampler->history()) {
    if (series.values.empty()) continue;
    char overlay[96];
    std::snprintf(overlay, sizeof overlay, "%s %.1f", series.name.c_str(),
                  double(series.values.back()));
    ImGui::PlotLines(("##" + series.name).c_str(), series.values.data(), int(series.values.size()),
                     0, overlay, FLT_MAX, FLT_MAX, ImVec2(w, 32));
    std::string what = series.name + ", oldest on the left, 4 readings a second";
    if (series.name.find(" mW") != std::string::npos)
      what +=
          ": an INA3221 rail (hwmon in*_input mV x curr*_input mA), shown on its own; the "
          "rails overlap and are never summed";
    else if (series.name.find(" C") != std::string::npos)
      what += ": a thermal zone (offline zones, -256 C, are left out)";
    tip(what.c_str());
  }
}

// The lab's own frame and kernel timings, beside the device's state.
void draw_lab_timings(GuiApp& app) {
  const UiState& ui = app.ui;
  if (ui.pipeline_ms.empty()) return;
  float lo = ui.pipeline_ms[0], sum = 0;
  for (float v : ui.pipeline_ms) lo = std::min(lo, v), sum += v;
  char overlay[96];
  std::snprintf(overlay, sizeof overlay, "pipeline %.3f ms (min %.3f)",
                double(ui.pipeline_ms.back()), double(lo));
  ImGui::PlotLines("##device_pipeline", ui.pipeline_ms.data(), int(ui.pipeline_ms.size()), 0,
                   overlay, 0.0f, FLT_MAX, ImVec2(ImGui::GetContentRegionAvail().x, 32));
  tip("the lab's pipeline time per frame (GPU time, as the Timings panel shows it), oldest on "
      "the left: set it against the clocks above");
  if (!ui.frame_ms.empty()) {
    ImGui::Text("UI frame %.2f ms", double(ui.frame_ms.back()));
    tip("wall-clock time of the last whole UI frame (steady_clock)");
  }
}

}  // namespace

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
                  app.recovery.count,
                  app.recovery.hosted      ? "kernel host's child replaced"
                  : app.recovery.restarted ? "started again"
                                           : "rebuilt",
                  app.recovery.rebuild_ms, app.recovery.live_ms);
      tip(app.recovery.hosted
              ? "a live kernel failed in the kernel host (the child process that runs live "
                "kernels): that frame was lost, the kernel uninstalled and a fresh child started; "
                "this process's CUDA context never saw the fault (host wall time from the fault's "
                "report to the next frame that ran)"
          : app.recovery.restarted
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
  draw_state(app);
  draw_lab_timings(app);
  ImGui::Separator();
  ImGui::TextWrapped("display: %s", app.upload_note.c_str());
  tip("how images reach the screen");
  ImGui::End();
}

}  // namespace lab::ui
