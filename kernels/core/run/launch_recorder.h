// The launch recorder: every kernel launch of a run, as the runner's LaunchContext hands it over.
// Before a launch it refuses what the kernel cannot launch with (threads, grid and shared memory
// against the kernel's attributes and the device: ErrorKind::Refused), records it, opens its NVTX
// and counter ranges and records its start event; after it, the end event and the launch's
// error. Once the stream is done, collect() reads each launch's time and fills its occupancy.
#pragma once

#include <cuda_runtime_api.h>

#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "counters.h"
#include "occupancy.h"
#include "sm87_resources.h"

namespace lab {

// What cudaFuncGetAttributes says of a compiled kernel.
struct KernelAttrs {
  int regs = 0;
  size_t static_smem = 0;
  size_t local_bytes = 0;   // per thread; non-zero means register spills (or local arrays)
  int max_threads = 0;      // the most threads per block this kernel can launch with
  int binary_version = 0;   // the SASS architecture the driver picked (90 = sm_90)
  size_t max_dyn_smem = 0;  // dynamic shared memory it may launch with (48 KB - static, or
                            // what cudaFuncAttributeMaxDynamicSharedMemorySize opted in to)
};

struct LaunchRecord {
  size_t stage = 0;
  std::string kernel;
  const void* func = nullptr;
  dim3 grid, block;
  size_t dyn_smem = 0;
  float ms = 0;  // GPU time between the event pair, filled by collect()
  KernelAttrs attrs;
  int blocks_per_sm = 0;   // cudaOccupancyMaxActiveBlocksPerMultiprocessor
  OccupancyEstimate est;   // our calculator on this GPU's limits (agrees with the line above)
  OccupancyEstimate orin;  // our calculator on sm_87 (Jetson Orin) limits and registers
  bool orin_from_sm87_build = false;  // registers from the sm_87 build (else this GPU's)
  // Another step's code ran for this one ("v3_selected_once: below sm_90"); empty: its own.
  std::string runs;
  // It ran in the kernel host (a live kernel): its time, attributes and occupancy are the
  // child's, measured there by this same recorder.
  bool remote = false;
  int threads() const { return int(block.x * block.y * block.z); }
};

class LaunchRecorder {
 public:
  LaunchRecorder() = default;
  ~LaunchRecorder();  // closes an open range, destroys the events
  // One owner of the events.
  LaunchRecorder(const LaunchRecorder&) = delete;
  LaunchRecorder& operator=(const LaunchRecorder&) = delete;

  // Throws Error(Refused) when `func` cannot launch with this grid, block and shared memory.
  // A null func is a library call (CUB): its kernels are not ours to check.
  void refuse_if_unlaunchable(const void* func, const char* name, dim3 grid, dim3 block,
                              size_t smem);
  // Records the launch and opens its ranges (the sink's is named "<label> <name>"); records its
  // start event on `stream` unless untimed.
  void begin(cudaStream_t stream, size_t stage, const std::string& label, const void* func,
             const char* name, dim3 grid, dim3 block, size_t smem);
  // Closes the ranges, records the end event, checks the launch.
  void end(cudaStream_t stream);
  // Closes the ranges of a launch whose launcher threw (no end event, no check).
  void close_range();
  // A launch that ran in the kernel host, as the child measured it (remote; no events here).
  void add_remote(size_t stage, const std::string& kernel, dim3 grid, dim3 block, float ms,
                  const KernelAttrs& attrs, int blocks_per_sm);

  // Inside a graph capture, or when a frame is timed as a whole: no event pair per launch.
  void set_untimed(bool on) { m_untimed = on; }
  void set_ranges(RangeSink* sink) { m_ranges = sink; }

  std::vector<LaunchRecord>& launches() { return m_launches; }
  const std::vector<LaunchRecord>& launches() const { return m_launches; }
  void clear();
  // Thread-safe (the UI asks while the engine's worker waits on a frame): the first launch
  // recorded since clear() whose end event has not completed, as "<label> <kernel>"; "" when
  // every timed launch has finished or none was timed (a graph).
  std::string first_unfinished() const;

  // After the stream synchronised. Timed: each record's time from its event pair, and the
  // time from the first launch's start to the last's end (0 without launches). Untimed: NaN
  // per launch. Both fill the occupancy of every kernel launch.
  double collect(bool timed);

 private:
  struct FuncInfo {
    KernelAttrs attrs;
    std::map<std::pair<int, size_t>, int> blocks_per_sm;  // by (threads, dynamic smem)
    const Sm87Resource* sm87 = nullptr;                   // the sm_87 build's counts, when known
  };
  FuncInfo& func_info(const void* func);
  void fill_occupancy(LaunchRecord& r);
  // The occupancy estimates (this GPU's, Orin's) from a record's threads and attributes.
  static void fill_estimates(LaunchRecord& r, const Sm87Resource* sm87);

  std::vector<LaunchRecord> m_launches;
  std::vector<std::pair<cudaEvent_t, cudaEvent_t>> m_events;  // one pair per record, reused
  std::map<const void*, FuncInfo> m_funcs;
  RangeSink* m_ranges = nullptr;
  mutable std::mutex m_progress_mu;
  std::vector<std::pair<std::string, cudaEvent_t>> m_progress;  // name, end event (null: none)
  bool m_untimed = false, m_open = false;
};

}  // namespace lab
