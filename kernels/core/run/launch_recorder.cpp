#include "launch_recorder.h"

#include <nvtx3/nvToolsExt.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "check.h"
#include "device.h"

namespace lab {

LaunchRecorder::~LaunchRecorder() {
  close_range();
  for (auto& [a, b] : m_events)
    if (a) cudaEventDestroy(a), cudaEventDestroy(b);
}

void LaunchRecorder::refuse_if_unlaunchable(const void* func, const char* name, dim3 grid,
                                            dim3 block, size_t smem) {
  if (!func) return;
  const FuncInfo& fi = func_info(func);
  const int threads = int(block.x * block.y * block.z);
  if (threads > fi.attrs.max_threads)
    throw Error(ErrorKind::Refused, std::string(name) + ": " + std::to_string(threads) +
                                        " threads per block; this kernel can launch at most " +
                                        std::to_string(fi.attrs.max_threads));
  if (grid.y > 65535 || grid.z > 65535 || grid.x == 0 || grid.y == 0 || grid.z == 0)
    throw Error(ErrorKind::Refused, std::string(name) + ": grid " + std::to_string(grid.x) + "x" +
                                        std::to_string(grid.y) + "x" + std::to_string(grid.z) +
                                        " is outside CUDA's limits (y and z at most 65535)");
  // The kernel's own limit: 48 KB in all unless its launcher opted in to more.
  if (smem > fi.attrs.max_dyn_smem)
    throw Error(ErrorKind::Refused,
                std::string(name) + ": needs " + std::to_string(fi.attrs.static_smem + smem) +
                    " bytes of shared memory per block; this kernel may use " +
                    std::to_string(fi.attrs.static_smem + fi.attrs.max_dyn_smem) +
                    " (more needs cudaFuncAttributeMaxDynamicSharedMemorySize, up to the "
                    "device's " +
                    std::to_string(device_info().smem_per_block_optin) + ")");
}

void LaunchRecorder::begin(cudaStream_t stream, size_t stage, const std::string& label,
                           const void* func, const char* name, dim3 grid, dim3 block, size_t smem) {
  LaunchRecord rec;
  rec.stage = stage;
  rec.kernel = name;
  rec.func = func;
  rec.grid = grid;
  rec.block = block;
  rec.dyn_smem = smem;
  const size_t n = m_launches.size();
  while (m_events.size() <= n) m_events.emplace_back(nullptr, nullptr);
  if (!m_events[n].first) {  // new, or left empty by a remote launch
    LAB_CUDA_CHECK(cudaEventCreate(&m_events[n].first));
    LAB_CUDA_CHECK(cudaEventCreate(&m_events[n].second));
  }
  m_launches.push_back(std::move(rec));
  {
    std::lock_guard<std::mutex> lock(m_progress_mu);
    m_progress.emplace_back(label + " " + name, nullptr);
  }
  if (!m_untimed) LAB_CUDA_CHECK(cudaEventRecord(m_events[n].first, stream));
  nvtxRangePushA(name);
  if (m_ranges) m_ranges->push(label + " " + name);
  m_open = true;
}

void LaunchRecorder::end(cudaStream_t stream) {
  close_range();
  if (!m_untimed) {
    cudaEvent_t e = m_events[m_launches.size() - 1].second;
    LAB_CUDA_CHECK(cudaEventRecord(e, stream));
    std::lock_guard<std::mutex> lock(m_progress_mu);
    if (!m_progress.empty()) m_progress.back().second = e;
  }
  LAB_CUDA_CHECK(cudaGetLastError());
}

void LaunchRecorder::add_remote(size_t stage, const std::string& kernel, dim3 grid, dim3 block,
                                float ms, const KernelAttrs& attrs, int blocks_per_sm) {
  LaunchRecord r;
  r.stage = stage;
  r.kernel = kernel;
  r.grid = grid, r.block = block;
  r.ms = ms;
  r.attrs = attrs;
  r.blocks_per_sm = blocks_per_sm;
  r.remote = true;
  fill_estimates(r, nullptr);
  m_launches.push_back(std::move(r));
  while (m_events.size() < m_launches.size()) m_events.emplace_back(nullptr, nullptr);
}

void LaunchRecorder::clear() {
  m_launches.clear();
  std::lock_guard<std::mutex> lock(m_progress_mu);
  m_progress.clear();
}

std::string LaunchRecorder::first_unfinished() const {
  std::lock_guard<std::mutex> lock(m_progress_mu);
  for (const auto& [name, e] : m_progress)
    if (e && cudaEventQuery(e) == cudaErrorNotReady) return name;
  return "";
}

void LaunchRecorder::close_range() {
  if (!m_open) return;
  m_open = false;
  if (m_ranges) m_ranges->pop();
  nvtxRangePop();
}

double LaunchRecorder::collect(bool timed) {
  // The span runs from the first local launch's start to the last one's end; a remote launch
  // (timed in the kernel host) adds its own time.
  size_t first = SIZE_MAX, last = 0;
  double remote_ms = 0;
  for (size_t n = 0; n < m_launches.size(); ++n) {
    LaunchRecord& r = m_launches[n];
    if (r.remote) {
      remote_ms += r.ms;
      continue;
    }
    if (timed)
      LAB_CUDA_CHECK(cudaEventElapsedTime(&r.ms, m_events[n].first, m_events[n].second));
    else
      r.ms = std::nanf("");
    if (r.func) fill_occupancy(r);
    first = std::min(first, n), last = n;
  }
  if (!timed) return 0;
  if (first == SIZE_MAX) return remote_ms;
  // A remote launch inside the span is already in it (the stream waited for the child).
  float ms = 0;
  LAB_CUDA_CHECK(cudaEventElapsedTime(&ms, m_events[first].first, m_events[last].second));
  for (size_t n = 0; n < m_launches.size(); ++n)
    if (m_launches[n].remote && (n < first || n > last)) ms += m_launches[n].ms;
  return ms;
}

LaunchRecorder::FuncInfo& LaunchRecorder::func_info(const void* func) {
  auto it = m_funcs.find(func);
  if (it != m_funcs.end()) return it->second;
  cudaFuncAttributes a{};
  LAB_CUDA_CHECK(cudaFuncGetAttributes(&a, func));
  FuncInfo fi;
  fi.attrs = {a.numRegs,        a.sharedSizeBytes,
              a.localSizeBytes, a.maxThreadsPerBlock,
              a.binaryVersion,  size_t(std::max(0, a.maxDynamicSharedSizeBytes))};
#if CUDART_VERSION >= 12030
  // The kernel's mangled name finds its sm_87 counts (looked up once per kernel).
  const char* name = nullptr;
  if (cudaFuncGetName(&name, func) == cudaSuccess)
    fi.sm87 = find_sm87_resources(name);
  else
    cudaGetLastError();  // not an error of ours: the Orin estimate uses this GPU's counts
#endif
  return m_funcs.emplace(func, fi).first->second;
}

void LaunchRecorder::fill_occupancy(LaunchRecord& r) {
  FuncInfo& fi = func_info(r.func);
  r.attrs = fi.attrs;
  const auto key = std::make_pair(r.threads(), r.dyn_smem);
  auto it = fi.blocks_per_sm.find(key);
  if (it == fi.blocks_per_sm.end()) {
    int n = 0;
    LAB_CUDA_CHECK(
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, r.func, r.threads(), r.dyn_smem));
    it = fi.blocks_per_sm.emplace(key, n).first;
  }
  r.blocks_per_sm = it->second;
  fill_estimates(r, fi.sm87);
}

void LaunchRecorder::fill_estimates(LaunchRecord& r, const Sm87Resource* sm87) {
  const KernelResources res{r.threads(), r.attrs.regs, r.attrs.static_smem, r.dyn_smem};
  const DeviceInfo& d = device_info();
  if (const ArchLimits* arch = arch_limits(d.major, d.minor))
    r.est = estimate_occupancy(*arch, res);
  // Orin: the sm_87 build's own registers and shared memory (read from ptxas at build time),
  // found by the kernel's mangled name; this GPU's counts when the name cannot be had.
  KernelResources orin_res = res;
  r.orin_from_sm87_build = sm87 != nullptr;
  if (sm87) {
    orin_res.regs_per_thread = sm87->regs;
    orin_res.static_smem = size_t(sm87->smem);
  }
  if (const ArchLimits* orin = arch_limits(8, 7)) r.orin = estimate_occupancy(*orin, orin_res);
}

}  // namespace lab
