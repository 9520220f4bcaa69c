#include "device.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

#include "check.h"
#include "image.h"

namespace lab {

namespace {
DeviceInfo query() {
  DeviceInfo d;
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    d.why_absent = e == cudaErrorInsufficientDriver
                       ? "no NVIDIA driver, or one older than this CUDA runtime"
                       : (e != cudaSuccess && e != cudaErrorNoDevice ? cudaGetErrorString(e)
                                                                     : "no CUDA device found");
    cudaGetLastError();  // clear it: the absence is not an error of a later call
    return d;
  }
  // cudaDeviceGetAttribute rather than cudaDeviceProp fields, some of which CUDA 13 removed.
  auto attr = [&](cudaDeviceAttr a) {
    int v = 0;
    cudaDeviceGetAttribute(&v, a, d.index);
    return v;
  };
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, d.index) != cudaSuccess) {
    d.why_absent = "cudaGetDeviceProperties failed";
    cudaGetLastError();
    return d;
  }
  d.present = true;
  d.name = prop.name;
  d.global_mem = prop.totalGlobalMem;
  d.major = attr(cudaDevAttrComputeCapabilityMajor);
  d.minor = attr(cudaDevAttrComputeCapabilityMinor);
  d.sms = attr(cudaDevAttrMultiProcessorCount);
  d.integrated = attr(cudaDevAttrIntegrated) != 0;
  d.max_threads_per_block = attr(cudaDevAttrMaxThreadsPerBlock);
  d.smem_per_block = size_t(attr(cudaDevAttrMaxSharedMemoryPerBlock));
  d.smem_per_block_optin = size_t(attr(cudaDevAttrMaxSharedMemoryPerBlockOptin));
  d.clock_khz = attr(cudaDevAttrClockRate);
  d.mem_clock_khz = attr(cudaDevAttrMemoryClockRate);
  d.mem_bus_bits = attr(cudaDevAttrGlobalMemoryBusWidth);
  char bus[32] = {};
  if (cudaDeviceGetPCIBusId(bus, sizeof bus, d.index) == cudaSuccess) d.pci_bus_id = bus;
  cudaDriverGetVersion(&d.driver_version);
  cudaRuntimeGetVersion(&d.runtime_version);
  cudaGetLastError();
  return d;
}
}  // namespace

const DeviceInfo& device_info() {
  static const DeviceInfo info = query();
  return info;
}

namespace {
std::mutex g_hooks_mutex;
std::vector<void (*)()>& hooks() {
  static std::vector<void (*)()> h;
  return h;
}
}  // namespace

void on_device_reset(void (*hook)()) {
  std::lock_guard<std::mutex> lock(g_hooks_mutex);
  if (std::find(hooks().begin(), hooks().end(), hook) == hooks().end()) hooks().push_back(hook);
}

std::string reset_device() {
  if (!device_info().present) return "no CUDA device";
  {
    std::lock_guard<std::mutex> lock(g_hooks_mutex);
    for (auto* h : hooks()) h();
  }
  cudaGetLastError();
  cudaError_t e = cudaDeviceReset();
  // The new context, made now. The driver may still be tearing the faulted one down and answer
  // "busy or unavailable" for a moment: it gets 0.5 s, or LAB_RESET_WAIT_S (up to 60). The H200
  // host refused for all of 30 s, so the GUI starts itself again instead (ui/recovery.cpp), and
  // a long wait here would only delay that.
  const char* wait_env = std::getenv("LAB_RESET_WAIT_S");
  const double wait_s = wait_env ? std::clamp(std::atof(wait_env), 0.1, 60.0) : 0.5;
  const auto start = std::chrono::steady_clock::now();
  const auto waited = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  while (e == cudaSuccess) {
    e = cudaFree(nullptr);
    if (e != cudaErrorDevicesUnavailable || waited() >= wait_s) break;
    cudaGetLastError();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    e = cudaSuccess;
  }
  if (e == cudaSuccess) e = cudaDeviceSynchronize();
  if (e != cudaSuccess) {
    cudaGetLastError();
    char after[32];
    std::snprintf(after, sizeof after, " (after %.1f s)", waited());
    return std::string("cudaDeviceReset did not give a working context: ") + cudaGetErrorString(e) +
           after;
  }
  return "";
}

double measure_copy_bandwidth(size_t bytes, int reps) {
  DeviceBuffer a(bytes), b(bytes);
  LAB_CUDA_CHECK(cudaMemset(a.data(), 1, bytes));
  cudaEvent_t start, stop;
  LAB_CUDA_CHECK(cudaEventCreate(&start));
  LAB_CUDA_CHECK(cudaEventCreate(&stop));
  std::vector<float> ms;
  for (int i = 0; i < reps + 3; ++i) {
    LAB_CUDA_CHECK(cudaEventRecord(start));
    LAB_CUDA_CHECK(cudaMemcpyAsync(b.data(), a.data(), bytes, cudaMemcpyDeviceToDevice));
    LAB_CUDA_CHECK(cudaEventRecord(stop));
    LAB_CUDA_CHECK(cudaEventSynchronize(stop));
    float t = 0;
    LAB_CUDA_CHECK(cudaEventElapsedTime(&t, start, stop));
    if (i >= 3) ms.push_back(t);  // the first copies warm up clocks and TLBs
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::nth_element(ms.begin(), ms.begin() + ms.size() / 2, ms.end());
  return 2.0 * double(bytes) / (ms[ms.size() / 2] * 1e-3) / 1e9;
}

}  // namespace lab
