// The device's state beside every timing: clocks, power mode or power limit, temperature, load,
// pinned or floating clocks, throttle reasons. A kernel's time means little without the clocks it
// ran at: on a Jetson the GPU, CPU and EMC clocks follow the load unless `jetson_clocks` pins
// them, and on a discrete GPU power caps and thermal slowdown move the SM clock.
//
// Two readers, one snapshot type:
//  - Jetson (integrated GPU): sysfs under a root folder (LAB_SYSFS_ROOT, default "/"), as a normal
//    user; only the EMC clock needs root (debugfs).
//  - Discrete GPUs: NVML, opened at run time (nvml_api.h).
// Every field is a Reading: a value, or the reason it is missing. The measuring module reads the
// state at the start and end of every measurement; the GUI samples it a few times a second.
#pragma once

#include <cmath>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "nvml_api.h"
#include "orin.h"

namespace lab {

template <typename T>
struct Reading {
  std::optional<T> value;
  std::string why;   // why there is no value ("" when there is one)
  std::string from;  // where it was read (a file, or an NVML call)

  bool ok() const { return value.has_value(); }
  const T& operator*() const { return *value; }
  const T* operator->() const { return &*value; }
  static Reading missing(std::string reason) { return {std::nullopt, std::move(reason), ""}; }
  static Reading of(T v, std::string where) { return {std::move(v), "", std::move(where)}; }
};

struct CpuClock {
  int cpu = 0;
  Reading<double> mhz;
};
struct ThermalZone {
  std::string type;         // "gpu-thermal", "cpu-thermal", "tj-thermal", ...
  Reading<double> celsius;  // missing "offline" for the -256 the driver writes for a gated zone
};
// An INA3221 channel: one rail, shown on its own (the rails overlap: never summed).
struct PowerRail {
  std::string label;  // VDD_GPU_SOC, VDD_CPU_CV, VIN_SYS_5V0, VDD_IN, ...
  Reading<double> mv, ma;
  std::string from;  // its hwmon folder
  double mw() const { return mv.ok() && ma.ok() ? *mv * *ma / 1e3 : NAN; }
};

struct DeviceState {
  enum class Source { None, Jetson, Nvml };
  Source source = Source::None;
  std::string source_why;  // None: why neither reader applies ("CPU only: no CUDA device")
  double t_s = 0;          // steady_clock seconds when it was read

  // Both readers. Jetson: the GPU's devfreq node (Hz read, MHz kept); NVML: the SM clock.
  Reading<double> gpu_mhz, gpu_min_mhz, gpu_max_mhz;
  Reading<double> mem_mhz, mem_max_mhz;  // Jetson: the EMC clock (debugfs, root); NVML: memory
  Reading<double> gpu_celsius;           // Jetson: the gpu-thermal zone; NVML: the GPU sensor
  Reading<double> load_pct;              // Jetson: the GPU's load (0-1000 in sysfs); NVML: not read

  // Jetson.
  Reading<std::string> governor;    // the GPU devfreq governor (nvhost_podgov, userspace, ...)
  Reading<bool> pinned;             // min == max of the GPU's devfreq (as jetson_clocks leaves it)
  Reading<int> power_mode_id;       // /var/lib/nvpmodel/status (pmode:NNNN)
  Reading<std::string> power_mode;  // its NAME from /etc/nvpmodel.conf (MAXN, 15W, ...)
  std::vector<CpuClock> cpus;
  std::string cpus_why;  // why there are none
  std::vector<ThermalZone> zones;
  std::string zones_why;
  std::vector<PowerRail> rails;
  std::string rails_why;

  // NVML.
  Reading<double> power_w, power_limit_w;
  Reading<int> pstate;        // 0 (P0) .. 15
  Reading<uint64_t> reasons;  // the clock-event (throttle) reasons mask

  bool jetson() const { return source == Source::Jetson; }
  bool nvml() const { return source == Source::Nvml; }
  // Reasons that slow the clocks: every bit but GPU idle (the mask's "none" is 0).
  bool throttled() const;
  // The named bits ("SwPowerCap, HwSlowdown"), "none", or why the mask is missing.
  std::string reasons_text() const;
  // One line: "GPU 1300 of 1300 MHz (pinned), EMC 3199 MHz, mode MAXN (0), GPU 41.5 C" or
  // "SM 1980 of 1980 MHz, memory 3201 MHz, 45 C, 120 of 700 W, P0, reasons: none".
  std::string summary() const;
};

// The names of the set bits of an NVML reasons mask ("GpuIdle, SwPowerCap"); "none" for 0.
std::string nvml_reason_names(uint64_t mask);

// A snapshot where no reader applies: every field missing, each saying `why`.
DeviceState unavailable_state(const std::string& why);

// Jetson: the state from sysfs under `root` ("/" on the device; a fake tree in the tests).
DeviceState read_jetson_state(const std::string& root);

// NVML, with a loaded (or fake) function table: init once, read, shut down with the object.
class NvmlReader {
 public:
  // `pci_bus_id` picks the CUDA device's NVML handle; "" picks index 0.
  NvmlReader(NvmlApi api, const std::string& pci_bus_id);
  ~NvmlReader();
  NvmlReader(const NvmlReader&) = delete;
  NvmlReader& operator=(const NvmlReader&) = delete;
  const std::string& why() const { return m_why; }  // "" when a device handle was found
  DeviceState read() const;

 private:
  std::string error(const char* call, nvmlReturn_t e) const;
  NvmlApi m_api;
  nvmlDevice_t m_dev = nullptr;
  bool m_inited = false;
  std::string m_why;
};

// LAB_SYSFS_ROOT, or "/".
std::string sysfs_root();

// The state of the device the lab runs on, read now: Jetson sysfs for an integrated GPU, NVML
// for a discrete one, else every field says why (CPU only). Thread-safe; never throws.
DeviceState read_device_state();

// The Orin estimate's bandwidth (orin.h) for the device the lab runs on: scaled by the EMC clock
// of `state` when the lab runs on an Orin (integrated sm_87) and the clock was read; else AGX
// Orin's MAXN figure, saying why.
OrinBandwidth orin_bandwidth_for(const DeviceState& state);

// Did something move or slow the clocks between `start` and `end`? The words to show, with
// what to do; empty when the state is steady (or unknown: a missing reading is no warning).
std::vector<std::string> state_warnings(const DeviceState& start, const DeviceState& end);

// The state recorded beside a timing, as columns (bench CSV and JSON, ladder exports): names
// and values in one place so every export writes the same ones. A value is a number (NaN:
// missing) or a text ("" missing).
struct StateColumn {
  std::string name;
  double num = NAN;
  std::string text;
  bool is_text = false;
};
std::vector<StateColumn> state_columns(const DeviceState& start, const DeviceState& end);
std::vector<std::string> state_column_names();

// A few readings a second for the GUI: read_device_state() at most every `period`, the last
// snapshot cached, and short histories for plots. Thread-safe (the engine job reads the cached
// snapshot beside each frame).
class StateSampler {
 public:
  explicit StateSampler(double period_s = 0.25, size_t history = 240);
  // The cached snapshot, refreshed first when older than the period.
  DeviceState current();
  // The histories, by name ("GPU MHz", "GPU C", "VDD_GPU_SOC mW", ...), oldest first.
  struct Series {
    std::string name;
    std::vector<float> values;
  };
  std::vector<Series> history();

 private:
  void push(const std::string& name, double v);
  std::mutex m_mutex;
  double m_period;
  size_t m_max;
  std::optional<DeviceState> m_last;
  std::vector<Series> m_series;
};

}  // namespace lab
