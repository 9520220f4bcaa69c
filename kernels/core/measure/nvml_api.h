// The few NVML entry points, types and constants the lab calls, declared from NVML's documented C
// API (docs.nvidia.com/deploy/nvml-api): the build machines have no nvml.h. libnvidia-ml.so.1
// ships with the driver and is opened at run time (load_nvml), so the lab starts without it; tests
// fill an NvmlApi with fakes instead.
#pragma once

#include <string>

namespace lab {

using nvmlReturn_t = int;  // an enum in nvml.h; NVML_SUCCESS is 0
using nvmlDevice_t = struct nvmlDevice_st*;
constexpr nvmlReturn_t NVML_SUCCESS = 0;
constexpr nvmlReturn_t NVML_ERROR_NOT_SUPPORTED = 3;

// nvmlClockType_t
constexpr int NVML_CLOCK_SM = 1;
constexpr int NVML_CLOCK_MEM = 2;
// nvmlTemperatureSensors_t
constexpr int NVML_TEMPERATURE_GPU = 0;
// nvmlPstates_t: 0 (P0, the fastest) .. 15; 32 unknown
constexpr int NVML_PSTATE_UNKNOWN = 32;

// nvmlClocksEventReason* (formerly nvmlClocksThrottleReason*): bits of the reasons mask.
constexpr unsigned long long NVML_REASON_GPU_IDLE = 0x1ULL;
constexpr unsigned long long NVML_REASON_APPLICATIONS_CLOCKS_SETTING = 0x2ULL;
constexpr unsigned long long NVML_REASON_SW_POWER_CAP = 0x4ULL;
constexpr unsigned long long NVML_REASON_HW_SLOWDOWN = 0x8ULL;
constexpr unsigned long long NVML_REASON_SYNC_BOOST = 0x10ULL;
constexpr unsigned long long NVML_REASON_SW_THERMAL_SLOWDOWN = 0x20ULL;
constexpr unsigned long long NVML_REASON_HW_THERMAL_SLOWDOWN = 0x40ULL;
constexpr unsigned long long NVML_REASON_HW_POWER_BRAKE_SLOWDOWN = 0x80ULL;
constexpr unsigned long long NVML_REASON_DISPLAY_CLOCK_SETTING = 0x100ULL;

// The function table. Every pointer is set when `why` is empty.
struct NvmlApi {
  std::string why;  // "" when loaded; else why not ("no NVML: libnvidia-ml.so.1 not found ...")
  nvmlReturn_t (*init)() = nullptr;                     // nvmlInit_v2
  nvmlReturn_t (*shutdown)() = nullptr;                 // nvmlShutdown
  const char* (*error_string)(nvmlReturn_t) = nullptr;  // nvmlErrorString
  // nvmlDeviceGetHandleByPciBusId_v2 ("0000:8a:00.0", as cudaDeviceGetPCIBusId writes it)
  nvmlReturn_t (*handle_by_pci)(const char*, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*handle_by_index)(unsigned, nvmlDevice_t*) = nullptr;   // ..ByIndex_v2
  nvmlReturn_t (*clock)(nvmlDevice_t, int, unsigned*) = nullptr;        // ..GetClockInfo (MHz)
  nvmlReturn_t (*max_clock)(nvmlDevice_t, int, unsigned*) = nullptr;    // ..GetMaxClockInfo
  nvmlReturn_t (*power)(nvmlDevice_t, unsigned*) = nullptr;             // ..GetPowerUsage (mW)
  nvmlReturn_t (*power_limit)(nvmlDevice_t, unsigned*) = nullptr;       // ..GetEnforcedPowerLimit
  nvmlReturn_t (*temperature)(nvmlDevice_t, int, unsigned*) = nullptr;  // ..GetTemperature (C)
  nvmlReturn_t (*pstate)(nvmlDevice_t, int*) = nullptr;                 // ..GetPerformanceState
  // nvmlDeviceGetCurrentClocksEventReasons, or on drivers before it, the same call under its
  // older name nvmlDeviceGetCurrentClocksThrottleReasons
  nvmlReturn_t (*reasons)(nvmlDevice_t, unsigned long long*) = nullptr;
};

// Opens `library` with dlopen and looks up the table; never throws. The handle stays open.
NvmlApi load_nvml(const char* library = "libnvidia-ml.so.1");

}  // namespace lab
