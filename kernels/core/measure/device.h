// The CUDA device the lab runs on, queried once; absent devices are a normal state.
#pragma once

#include <cstddef>
#include <string>

namespace lab {

struct DeviceInfo {
  bool present = false;
  std::string why_absent;  // CUDA's message when no device can be used
  int index = 0;
  std::string name;
  int major = 0, minor = 0;
  int sms = 0;
  size_t global_mem = 0;
  bool integrated = false;  // shares DRAM with the CPU (Jetson): zero-copy beats copies
  int max_threads_per_block = 1024;
  size_t smem_per_block = 48 * 1024;        // without opt-in
  size_t smem_per_block_optin = 48 * 1024;  // with cudaFuncAttributeMaxDynamicSharedMemorySize
  int clock_khz = 0, mem_clock_khz = 0, mem_bus_bits = 0;
  int driver_version = 0, runtime_version = 0;
  std::string pci_bus_id;  // "0000:8a:00.0" (cudaDeviceGetPCIBusId): NVML's handle for it

  std::string arch() const { return "sm_" + std::to_string(major * 10 + minor); }
  // Theoretical DRAM bandwidth from the memory clock and bus (0 when unknown).
  double peak_bandwidth_gbs() const { return 2.0 * mem_clock_khz * 1e3 * (mem_bus_bits / 8) / 1e9; }
};

// Device 0, queried once and cached; never throws.
const DeviceInfo& device_info();

// State tied to the current CUDA context (the cuBLAS handle, the pinned-frame pool, loaded live
// kernels) registers a hook here when it is first made; reset_device() runs the hooks, which
// forget that state, before it destroys the context.
void on_device_reset(void (*hook)());
// After a sticky fault (the context is unusable): runs the hooks, cudaDeviceReset(), makes a new
// context and checks that it works. Returns "" on success, else why the device could not be
// brought back (the caller then has to exit). Every stream, buffer, event, graph and GL
// registration of the old context is invalid afterwards; their owners must be gone first.
std::string reset_device();

// Device-to-device cudaMemcpyAsync bandwidth in GB/s (bytes read + written), the median of
// `reps` copies of `bytes` after a warm-up. The ceiling bandwidth-bound kernels are held to.
double measure_copy_bandwidth(size_t bytes = size_t(256) << 20, int reps = 20);

}  // namespace lab
