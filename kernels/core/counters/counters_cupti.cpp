// The CounterBackend over CUPTI's range profiler (CUDA 12.6+): libcupti opened with dlopen, the
// driver API reached through the runtime, so neither library is linked. One session a
// collection: user ranges, user replay (the collector runs the work once per pass).
#include "counters.h"
#include "counters_cupti.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <cstdint>
#include <map>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "check.h"
#include "device.h"
#include "driver_entry.h"

// The range profiler arrived with CUPTI API version 24 (CUDA 12.6); CUDA 13 counts from 130000.
// LAB_COUNTERS_NO_RANGE_PROFILER forces the fallback, to compile-check it on a new toolkit.
#if !defined(LAB_COUNTERS_NO_RANGE_PROFILER) && __has_include(<cupti_range_profiler.h>)
#include <cupti_version.h>
#if CUPTI_API_VERSION >= 24
#define LAB_RANGE_PROFILER 1
#endif
#endif

#ifdef LAB_RANGE_PROFILER
#include <cuda.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_range_profiler.h>
#include <cupti_result.h>
#include <cupti_target.h>
#endif

namespace lab {

namespace {

// CUptiResult values as plain numbers: the lines exist in builds without CUPTI's headers too.
constexpr int kInvalidDevice = 2;
constexpr int kOutOfMemory = 8;
constexpr int kNotCompatible = 14;
constexpr int kNotInitialized = 15;
constexpr int kDisabled = 23;
constexpr int kHardwareBusy = 26;
constexpr int kNotSupported = 27;
constexpr int kVirtualNotSupported = 33;
constexpr int kInsufficientPrivileges = 35;
constexpr int kOldProfilerApi = 36;
constexpr int kMultipleSubscribers = 39;
constexpr int kVirtualNoPrivileges = 40;
constexpr int kConfidentialComputing = 41;
constexpr int kCmpDevice = 42;
constexpr int kMigDevice = 43;
constexpr int kSliDevice = 44;
constexpr int kWslDevice = 45;
constexpr int kInvalidChipName = 46;

#ifdef LAB_RANGE_PROFILER
static_assert(kInsufficientPrivileges == CUPTI_ERROR_INSUFFICIENT_PRIVILEGES &&
                  kMultipleSubscribers == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED &&
                  kNotSupported == CUPTI_ERROR_NOT_SUPPORTED &&
                  kNotCompatible == CUPTI_ERROR_NOT_COMPATIBLE &&
                  kNotInitialized == CUPTI_ERROR_NOT_INITIALIZED,
              "CUptiResult values moved");
#endif

const char* code_name(int code) {
  static const std::pair<int, const char*> names[] = {
      {kInvalidDevice, "CUPTI_ERROR_INVALID_DEVICE"},
      {kOutOfMemory, "CUPTI_ERROR_OUT_OF_MEMORY"},
      {kNotCompatible, "CUPTI_ERROR_NOT_COMPATIBLE"},
      {kNotInitialized, "CUPTI_ERROR_NOT_INITIALIZED"},
      {kDisabled, "CUPTI_ERROR_DISABLED"},
      {kHardwareBusy, "CUPTI_ERROR_HARDWARE_BUSY"},
      {kNotSupported, "CUPTI_ERROR_NOT_SUPPORTED"},
      {kVirtualNotSupported, "CUPTI_ERROR_VIRTUALIZED_DEVICE_NOT_SUPPORTED"},
      {kInsufficientPrivileges, "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES"},
      {kOldProfilerApi, "CUPTI_ERROR_OLD_PROFILER_API_INITIALIZED"},
      {kMultipleSubscribers, "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED"},
      {kVirtualNoPrivileges, "CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES"},
      {kConfidentialComputing, "CUPTI_ERROR_CONFIDENTIAL_COMPUTING_NOT_SUPPORTED"},
      {kCmpDevice, "CUPTI_ERROR_CMP_DEVICE_NOT_SUPPORTED"},
      {kMigDevice, "CUPTI_ERROR_MIG_DEVICE_NOT_SUPPORTED"},
      {kSliDevice, "CUPTI_ERROR_SLI_DEVICE_NOT_SUPPORTED"},
      {kWslDevice, "CUPTI_ERROR_WSL_DEVICE_NOT_SUPPORTED"},
      {kInvalidChipName, "CUPTI_ERROR_INVALID_CHIP_NAME"},
  };
  for (const auto& n : names)
    if (n.first == code) return n.second;
  return nullptr;
}

}  // namespace

std::string cupti_error_line(int code, const std::string& call, const std::string& chip,
                             const std::string& name) {
  const char* known = code_name(code);
  std::string what = known ? known : name;
  if (what.empty()) what = "CUPTI error " + std::to_string(code);
  const std::string tag = " (" + what + " from " + call + ")";
  const std::string gpu = chip.empty() ? "this GPU" : "this GPU (" + chip + ")";
  const std::string no = "counters unavailable: ";
  switch (code) {
    case kInsufficientPrivileges:
      return no +
             "no permission to read GPU performance counters "
             "(CUPTI_ERROR_INSUFFICIENT_PRIVILEGES). Run as root, or, on a desktop GPU, allow "
             "all users: options nvidia NVreg_RestrictProfilingToAdminUsers=0 in "
             "/etc/modprobe.d, then reboot (a Jetson's driver has no such option: run the lab "
             "with sudo there)";
    case kVirtualNoPrivileges:
      return no + "the hypervisor does not let this virtual GPU read performance counters" + tag;
    case kMultipleSubscribers:
    case kHardwareBusy:
    case kDisabled:
    case kOldProfilerApi:
      return no + "another profiler (ncu, nsys, compute-sanitizer) is attached" + tag +
             "; run the lab without it to collect counters";
    case kNotSupported:
    case kNotCompatible:
    case kInvalidChipName:
      return no + gpu + " or its driver exposes no performance counters to this CUPTI" + tag;
    case kVirtualNotSupported:
      return no + "CUPTI cannot profile a virtual GPU (vGPU)" + tag;
    case kConfidentialComputing:
      return no + "profiling is off while confidential computing is on" + tag;
    case kCmpDevice:
      return no + "CUPTI cannot profile a CMP (mining) GPU" + tag;
    case kMigDevice:
      return no + "CUPTI cannot profile a MIG instance; use the whole GPU" + tag;
    case kSliDevice:
      return no + "CUPTI cannot profile GPUs in SLI" + tag;
    case kWslDevice:
      return no + "CUPTI cannot profile under WSL" + tag;
    case kNotInitialized:
      return no + "CUPTI could not attach to the CUDA driver" + tag +
             "; the driver may be older than this libcupti";
    case kInvalidDevice:
      return no + "no CUDA device that CUPTI can profile" + tag;
  }
  return "counters failed: " + call + " returned " + what;
}

#ifdef LAB_RANGE_PROFILER

namespace {

// Every CUPTI function the backend calls, resolved with dlsym into a table of the same names.
#define LAB_CUPTI_FUNCTIONS(X)                    \
  X(cuptiGetResultString)                         \
  X(cuptiProfilerInitialize)                      \
  X(cuptiProfilerDeInitialize)                    \
  X(cuptiProfilerDeviceSupported)                 \
  X(cuptiDeviceGetChipName)                       \
  X(cuptiProfilerGetCounterAvailability)          \
  X(cuptiProfilerHostInitialize)                  \
  X(cuptiProfilerHostDeinitialize)                \
  X(cuptiProfilerHostGetMetricProperties)         \
  X(cuptiProfilerHostConfigAddMetrics)            \
  X(cuptiProfilerHostGetConfigImageSize)          \
  X(cuptiProfilerHostGetConfigImage)              \
  X(cuptiProfilerHostGetNumOfPasses)              \
  X(cuptiProfilerHostGetRangeName)                \
  X(cuptiProfilerHostEvaluateToGpuValues)         \
  X(cuptiRangeProfilerEnable)                     \
  X(cuptiRangeProfilerDisable)                    \
  X(cuptiRangeProfilerGetCounterDataSize)         \
  X(cuptiRangeProfilerCounterDataImageInitialize) \
  X(cuptiRangeProfilerSetConfig)                  \
  X(cuptiRangeProfilerStart)                      \
  X(cuptiRangeProfilerStop)                       \
  X(cuptiRangeProfilerPushRange)                  \
  X(cuptiRangeProfilerPopRange)                   \
  X(cuptiRangeProfilerDecodeData)                 \
  X(cuptiRangeProfilerGetCounterDataInfo)

struct CuptiApi {
#define LAB_CUPTI_POINTER(fn) decltype(&::fn) fn = nullptr;
  LAB_CUPTI_FUNCTIONS(LAB_CUPTI_POINTER)
#undef LAB_CUPTI_POINTER
  decltype(&::cuCtxGetCurrent) cuCtxGetCurrent = nullptr;
  decltype(&::cuCtxGetDevice) cuCtxGetDevice = nullptr;
};

// A CUPTI params struct, zeroed, with its structSize (CUPTI reads only that many bytes).
#define LAB_PARAMS(T, v) \
  T v{};                 \
  v.structSize = T##_STRUCT_SIZE
// Returns the failure's line from the enclosing function.
#define LAB_CUPTI_TRY(fn, p) \
  if (std::string e_ = check(m_api.fn(&p), #fn); !e_.empty()) return e_

struct Library {
  void* handle = nullptr;
  std::string path;
};

// Opened once and never closed: CUPTI keeps hooks in the driver.
const Library& cupti_library() {
  static const Library lib = [] {
    std::vector<std::string> dirs = {"", "/usr/local/cuda/lib64/",
                                     "/usr/local/cuda/extras/CUPTI/lib64/"};
    for (const char* var : {"CUDA_HOME", "CUDA_PATH"}) {
      const char* v = std::getenv(var);
      if (v && *v) {
        dirs.push_back(std::string(v) + "/lib64/");
        dirs.push_back(std::string(v) + "/extras/CUPTI/lib64/");
      }
    }
    Library l;
    for (const std::string& dir : dirs)
      for (const char* name : {"libcupti.so", "libcupti.so.13", "libcupti.so.12"}) {
        l.path = dir + name;
        l.handle = dlopen(l.path.c_str(), RTLD_NOW | RTLD_LOCAL);
        if (l.handle) return l;
      }
    return Library{};
  }();
  return lib;
}

class CuptiBackend final : public CounterBackend {
 public:
  ~CuptiBackend() override { end(); }

  // Opens everything, then a session of no metrics up to enabling the range profiler on the
  // context: that is where a refused permission or another profiler shows.
  std::string load() override {
    std::string e = open();
    if (e.empty()) e = start();
    if (e.empty()) e = enable();
    end();
    return e;
  }

  std::string begin(const std::vector<std::string>& metrics, int max_ranges, int& passes) override {
    passes = 0;
    end();  // a session a caller left open
    if (std::string e = open(); !e.empty()) return e;
    if (std::string e = start(); !e.empty()) return e;
    m_max_ranges = max_ranges < 1 ? 1 : size_t(max_ranges);

    LAB_PARAMS(CUpti_Profiler_Host_Initialize_Params, host);
    host.profilerType = CUPTI_PROFILER_TYPE_RANGE_PROFILER;
    host.pChipName = m_chip.c_str();
    host.pCounterAvailabilityImage = m_availability.data();
    LAB_CUPTI_TRY(cuptiProfilerHostInitialize, host);
    m_host = host.pHostObject;

    // A metric the chip lacks (Orin has no dram__ counters) stays out and reads NaN: one unknown
    // name fails the whole configuration, while a failed property query harms nothing.
    m_metric_count = metrics.size();
    for (size_t i = 0; i < metrics.size(); ++i) {
      LAB_PARAMS(CUpti_Profiler_Host_GetMetricProperties_Params, prop);
      prop.pHostObject = m_host;
      prop.pMetricName = metrics[i].c_str();
      if (m_api.cuptiProfilerHostGetMetricProperties(&prop) != CUPTI_SUCCESS) continue;
      m_kept.push_back(i);
      m_names.push_back(metrics[i]);
    }
    if (m_kept.empty()) return "counters unavailable: " + m_chip + " has none of the lab's metrics";
    for (const std::string& n : m_names) m_name_ptrs.push_back(n.c_str());

    LAB_PARAMS(CUpti_Profiler_Host_ConfigAddMetrics_Params, add);
    add.pHostObject = m_host;
    add.ppMetricNames = m_name_ptrs.data();
    add.numMetrics = m_name_ptrs.size();
    LAB_CUPTI_TRY(cuptiProfilerHostConfigAddMetrics, add);
    LAB_PARAMS(CUpti_Profiler_Host_GetConfigImageSize_Params, size);
    size.pHostObject = m_host;
    LAB_CUPTI_TRY(cuptiProfilerHostGetConfigImageSize, size);
    m_config.assign(size.configImageSize, 0);
    LAB_PARAMS(CUpti_Profiler_Host_GetConfigImage_Params, image);
    image.pHostObject = m_host;
    image.configImageSize = m_config.size();
    image.pConfigImage = m_config.data();
    LAB_CUPTI_TRY(cuptiProfilerHostGetConfigImage, image);
    LAB_PARAMS(CUpti_Profiler_Host_GetNumOfPasses_Params, count);
    count.configImageSize = m_config.size();
    count.pConfigImage = m_config.data();
    LAB_CUPTI_TRY(cuptiProfilerHostGetNumOfPasses, count);
    passes = int(count.numOfPasses);

    if (std::string e = enable(); !e.empty()) return e;
    LAB_PARAMS(CUpti_RangeProfiler_GetCounterDataSize_Params, data_size);
    data_size.pRangeProfilerObject = m_profiler;
    data_size.pMetricNames = m_name_ptrs.data();
    data_size.numMetrics = m_name_ptrs.size();
    data_size.maxNumOfRanges = m_max_ranges;
    data_size.maxNumRangeTreeNodes = uint32_t(m_max_ranges);
    LAB_CUPTI_TRY(cuptiRangeProfilerGetCounterDataSize, data_size);
    m_data.assign(data_size.counterDataSize, 0);
    LAB_PARAMS(CUpti_RangeProfiler_CounterDataImage_Initialize_Params, data_init);
    data_init.pRangeProfilerObject = m_profiler;
    data_init.counterDataSize = m_data.size();
    data_init.pCounterData = m_data.data();
    LAB_CUPTI_TRY(cuptiRangeProfilerCounterDataImageInitialize, data_init);

    LAB_PARAMS(CUpti_RangeProfiler_SetConfig_Params, config);
    config.pRangeProfilerObject = m_profiler;
    config.configSize = m_config.size();
    config.pConfig = m_config.data();
    config.counterDataImageSize = m_data.size();
    config.pCounterDataImage = m_data.data();
    config.range = CUPTI_UserRange;
    config.replayMode = CUPTI_UserReplay;
    config.maxRangesPerPass = m_max_ranges;
    config.numNestingLevels = 1;  // the runner's ranges do not nest
    config.minNestingLevel = 1;
    config.passIndex = 0;
    config.targetNestingLevel = 1;
    LAB_CUPTI_TRY(cuptiRangeProfilerSetConfig, config);
    return "";
  }

  std::string begin_pass() override {
    if (!m_profiler) return "counters failed: a pass began outside a session";
    m_range_error.clear();
    m_depth = 0;
    m_ranges = 0;
    m_seen.clear();
    LAB_PARAMS(CUpti_RangeProfiler_Start_Params, p);
    p.pRangeProfilerObject = m_profiler;
    LAB_CUPTI_TRY(cuptiRangeProfilerStart, p);
    m_in_pass = true;
    return "";
  }

  // A failed push or pop is kept for end_pass: the sink has no way to report it.
  void push_range(const std::string& name) override {
    if (!m_in_pass || !m_range_error.empty()) return;
    // CUPTI drops the ranges past maxRangesPerPass without a word (DecodeData counts none).
    if (m_depth == 0 && m_ranges == m_max_ranges) {
      m_range_error = "counters failed: a pass opened more than " + std::to_string(m_max_ranges) +
                      " ranges (raise max_ranges)";
      return;
    }
    // CUPTI is handed a short id ("r7"), the same string object for the same name in every
    // pass: it keeps the pointer rather than a copy, and a long name (over ~60 characters) came
    // back cut and counted as a new range in each pass. evaluate() gives the names back.
    // CUPTI counts the ranges of one name as one: a kernel launched again in the pass (a scan's
    // levels, a sort's passes) gets an id of its own by how often its name came before.
    const size_t seen = m_seen[name]++;
    const std::string key = name + '\x1f' + std::to_string(seen);
    auto it = m_range_ids.find(key);
    if (it == m_range_ids.end()) {
      it = m_range_ids.emplace(key, "r" + std::to_string(m_range_ids.size())).first;
      m_range_names[it->second] = name;
    }
    LAB_PARAMS(CUpti_RangeProfiler_PushRange_Params, p);
    p.pRangeProfilerObject = m_profiler;
    p.pRangeName = it->second.c_str();
    m_range_error = check(m_api.cuptiRangeProfilerPushRange(&p), "cuptiRangeProfilerPushRange");
    if (!m_range_error.empty()) return;
    if (m_depth == 0) ++m_ranges;
    ++m_depth;
  }

  void pop_range() override {
    if (!m_in_pass || m_depth == 0) return;
    const std::string e = pop();
    if (m_range_error.empty()) m_range_error = e;
  }

  std::string end_pass(bool& done) override {
    done = false;
    if (!m_in_pass) return "counters failed: a pass ended that had not begun";
    const std::string e = stop(done);
    return m_range_error.empty() ? e : m_range_error;
  }

  std::string evaluate(std::vector<std::string>& names,
                       std::vector<std::vector<double>>& values) override {
    names.clear();
    values.clear();
    if (!m_profiler) return "counters failed: evaluated outside a session";
    LAB_PARAMS(CUpti_RangeProfiler_DecodeData_Params, decode);
    decode.pRangeProfilerObject = m_profiler;
    LAB_CUPTI_TRY(cuptiRangeProfilerDecodeData, decode);
    if (decode.numOfRangeDropped > 0)
      return "counters failed: " + std::to_string(decode.numOfRangeDropped) +
             " ranges were dropped (a pass opened more than " + std::to_string(m_max_ranges) + ")";
    LAB_PARAMS(CUpti_RangeProfiler_GetCounterDataInfo_Params, info);
    info.pCounterDataImage = m_data.data();
    info.counterDataImageSize = m_data.size();
    LAB_CUPTI_TRY(cuptiRangeProfilerGetCounterDataInfo, info);

    std::vector<double> kept(m_kept.size());
    for (size_t r = 0; r < info.numTotalRanges; ++r) {
      LAB_PARAMS(CUpti_Profiler_Host_GetRangeName_Params, name);
      name.pCounterDataImage = m_data.data();
      name.counterDataImageSize = m_data.size();
      name.rangeIndex = r;
      name.delimiter = "/";
      LAB_CUPTI_TRY(cuptiProfilerHostGetRangeName, name);
      const std::string id = name.pRangeName ? name.pRangeName : "";
      const auto full = m_range_names.find(id);
      names.push_back(full != m_range_names.end() ? full->second : id);
      std::free(const_cast<char*>(name.pRangeName));  // CUPTI's malloc'd copy, ours to free

      LAB_PARAMS(CUpti_Profiler_Host_EvaluateToGpuValues_Params, eval);
      eval.pHostObject = m_host;
      eval.pCounterDataImage = m_data.data();
      eval.counterDataImageSize = m_data.size();
      eval.rangeIndex = r;
      eval.ppMetricNames = m_name_ptrs.data();
      eval.numMetrics = m_name_ptrs.size();
      eval.pMetricValues = kept.data();
      LAB_CUPTI_TRY(cuptiProfilerHostEvaluateToGpuValues, eval);
      std::vector<double> row(m_metric_count, NAN);
      for (size_t k = 0; k < m_kept.size(); ++k) row[m_kept[k]] = kept[k];
      values.push_back(std::move(row));
    }
    return "";
  }

  // Undoes whatever was started, in reverse; results are ignored, there is no one to tell.
  void end() override {
    if (m_in_pass) {
      bool done = false;
      stop(done);
    }
    if (m_profiler) {
      LAB_PARAMS(CUpti_RangeProfiler_Disable_Params, p);
      p.pRangeProfilerObject = m_profiler;
      m_api.cuptiRangeProfilerDisable(&p);
      m_profiler = nullptr;  // the collector then settles (settle_after_profiling)
    }
    if (m_host) {
      LAB_PARAMS(CUpti_Profiler_Host_Deinitialize_Params, p);
      p.pHostObject = m_host;
      m_api.cuptiProfilerHostDeinitialize(&p);
      m_host = nullptr;
    }
    if (m_initialized) {
      LAB_PARAMS(CUpti_Profiler_DeInitialize_Params, p);
      m_api.cuptiProfilerDeInitialize(&p);
      m_initialized = false;
    }
    m_kept.clear();
    m_names.clear();
    m_name_ptrs.clear();
    m_range_names.clear();
    m_range_ids.clear();
    m_config.clear();
    m_data.clear();
  }

 private:
  std::string check(CUptiResult r, const char* call) const {
    if (r == CUPTI_SUCCESS) return "";
    const char* name = nullptr;
    if (m_api.cuptiGetResultString) m_api.cuptiGetResultString(r, &name);
    return cupti_error_line(int(r), call, m_chip, name ? name : "");
  }

  // The library, its functions, a device and the driver functions: once, the answer kept.
  std::string open() {
    if (!m_opened) {
      m_opened = true;
      m_open_error = first_open();
    }
    return m_open_error;
  }

  std::string first_open() {
    const Library& lib = cupti_library();
    if (!lib.handle)
      return "counters unavailable: libcupti not found (install the CUDA toolkit's CUPTI, or set "
             "LD_LIBRARY_PATH to its lib64)";
#define LAB_CUPTI_RESOLVE(fn)                                           \
  m_api.fn = reinterpret_cast<decltype(&::fn)>(dlsym(lib.handle, #fn)); \
  if (!m_api.fn)                                                        \
    return "counters unavailable: " + lib.path +                        \
           " has no " #fn                                               \
           " (a CUPTI older than CUDA 12.6; the range profiler needs 12.6 or newer)";
    LAB_CUPTI_FUNCTIONS(LAB_CUPTI_RESOLVE)
#undef LAB_CUPTI_RESOLVE
    if (!device_info().present) return "counters unavailable: no CUDA device";
    if (!driver_function("cuCtxGetCurrent", m_api.cuCtxGetCurrent) ||
        !driver_function("cuCtxGetDevice", m_api.cuCtxGetDevice))
      return "counters unavailable: the CUDA driver gave no cuCtxGetCurrent or cuCtxGetDevice";
    return "";
  }

  // cuptiProfilerInitialize, then the context, chip and counter availability a session needs.
  std::string start() {
    LAB_PARAMS(CUpti_Profiler_Initialize_Params, init);
    LAB_CUPTI_TRY(cuptiProfilerInitialize, init);
    m_initialized = true;
    if (cudaFree(nullptr) != cudaSuccess) {  // makes the runtime's primary context current
      cudaGetLastError();
      return "counters unavailable: no CUDA device";
    }
    m_ctx = nullptr;
    if (m_api.cuCtxGetCurrent(&m_ctx) != CUDA_SUCCESS || !m_ctx ||
        m_api.cuCtxGetDevice(&m_device) != CUDA_SUCCESS)
      return "counters failed: no current CUDA context";

    LAB_PARAMS(CUpti_Device_GetChipName_Params, chip);
    chip.deviceIndex = size_t(m_device);
    LAB_CUPTI_TRY(cuptiDeviceGetChipName, chip);
    m_chip = chip.pChipName ? chip.pChipName : "";

    // `api`, where the header has it, stays 0: CUPTI_PROFILER_RANGE_PROFILING.
    LAB_PARAMS(CUpti_Profiler_DeviceSupported_Params, sup);
    sup.cuDevice = m_device;
    LAB_CUPTI_TRY(cuptiProfilerDeviceSupported, sup);
    if (std::string e = unsupported(sup); !e.empty()) return e;

    // Before enabling: the query may fail while a session is active on the device.
    LAB_PARAMS(CUpti_Profiler_GetCounterAvailability_Params, avail);
    avail.ctx = m_ctx;
    LAB_CUPTI_TRY(cuptiProfilerGetCounterAvailability, avail);
    m_availability.assign(avail.counterAvailabilityImageSize, 0);
    avail.pCounterAvailabilityImage = m_availability.data();
    LAB_CUPTI_TRY(cuptiProfilerGetCounterAvailability, avail);
    return "";
  }

  // Why cuptiProfilerDeviceSupported says no, in the words of the matching CUPTI error.
  std::string unsupported(const CUpti_Profiler_DeviceSupported_Params& s) const {
    auto no = [](CUpti_Profiler_Support_Level l) {
      return l == CUPTI_PROFILER_CONFIGURATION_UNSUPPORTED ||
             l == CUPTI_PROFILER_CONFIGURATION_DISABLED;
    };
    if (!no(s.isSupported)) return "";  // UNKNOWN: let the session itself find out
    const char* call = "cuptiProfilerDeviceSupported";
    if (no(s.architecture))
      return "counters unavailable: " + m_chip +
             " has no range profiler (it needs compute capability 7.5 or newer)";
    if (no(s.vGpu))
      return cupti_error_line(s.vGpu == CUPTI_PROFILER_CONFIGURATION_DISABLED
                                  ? kVirtualNoPrivileges
                                  : kVirtualNotSupported,
                              call, m_chip);
    if (no(s.sli)) return cupti_error_line(kSliDevice, call, m_chip);
    if (no(s.confidentialCompute)) return cupti_error_line(kConfidentialComputing, call, m_chip);
    if (no(s.cmp)) return cupti_error_line(kCmpDevice, call, m_chip);
    if (no(s.wsl)) return cupti_error_line(kWslDevice, call, m_chip);
    return cupti_error_line(kNotSupported, call, m_chip);
  }

  std::string enable() {
    LAB_PARAMS(CUpti_RangeProfiler_Enable_Params, p);
    p.ctx = m_ctx;
    LAB_CUPTI_TRY(cuptiRangeProfilerEnable, p);
    m_profiler = p.pRangeProfilerObject;
    return "";
  }

  std::string pop() {
    --m_depth;
    LAB_PARAMS(CUpti_RangeProfiler_PopRange_Params, p);
    p.pRangeProfilerObject = m_profiler;
    LAB_CUPTI_TRY(cuptiRangeProfilerPopRange, p);
    return "";
  }

  // Closes ranges a throwing pass left open, then stops the pass.
  std::string stop(bool& done) {
    while (m_depth > 0) pop();
    m_in_pass = false;
    LAB_PARAMS(CUpti_RangeProfiler_Stop_Params, p);
    p.pRangeProfilerObject = m_profiler;
    LAB_CUPTI_TRY(cuptiRangeProfilerStop, p);
    done = p.isAllPassSubmitted != 0;
    return "";
  }

  CuptiApi m_api;
  bool m_opened = false;
  std::string m_open_error;
  CUcontext m_ctx = nullptr;
  CUdevice m_device = 0;
  std::string m_chip;
  std::vector<uint8_t> m_availability;

  // The session; end() resets every field below.
  bool m_initialized = false;
  CUpti_Profiler_Host_Object* m_host = nullptr;
  CUpti_RangeProfiler_Object* m_profiler = nullptr;
  size_t m_max_ranges = 1;
  size_t m_metric_count = 0;
  std::vector<size_t> m_kept;        // indices into the caller's metrics that this chip has
  std::vector<std::string> m_names;  // their names
  std::map<std::string, std::string> m_range_ids;    // a range's name and repeat -> its id
  std::map<std::string, size_t> m_seen;              // this pass's ranges of each name so far
  std::map<std::string, std::string> m_range_names;  // id -> name
  std::vector<const char*> m_name_ptrs;
  std::vector<uint8_t> m_config, m_data;
  bool m_in_pass = false;
  int m_depth = 0;            // ranges open in this pass
  size_t m_ranges = 0;        // outermost ranges opened in this pass
  std::string m_range_error;  // the first failed push or pop of this pass
};

#undef LAB_PARAMS
#undef LAB_CUPTI_TRY
#undef LAB_CUPTI_FUNCTIONS

}  // namespace

#else  // no range profiler in this toolkit: counters are unavailable, said once per call

namespace {

std::string old_toolkit() {
  return "counters unavailable: this build's CUDA toolkit (" +
         std::to_string(CUDART_VERSION / 1000) + "." + std::to_string(CUDART_VERSION % 1000 / 10) +
         ") has no range profiler; CUDA 12.6 or newer is needed";
}

class CuptiBackend final : public CounterBackend {
 public:
  std::string load() override { return old_toolkit(); }
  std::string begin(const std::vector<std::string>&, int, int& passes) override {
    passes = 0;
    return old_toolkit();
  }
  std::string begin_pass() override { return old_toolkit(); }
  void push_range(const std::string&) override {}
  void pop_range() override {}
  std::string end_pass(bool& done) override {
    done = true;
    return old_toolkit();
  }
  std::string evaluate(std::vector<std::string>& names,
                       std::vector<std::vector<double>>& values) override {
    names.clear();
    values.clear();
    return old_toolkit();
  }
  void end() override {}
};

}  // namespace

#endif

std::unique_ptr<CounterBackend> make_cupti_backend() {
  return std::make_unique<CuptiBackend>();
}

}  // namespace lab
