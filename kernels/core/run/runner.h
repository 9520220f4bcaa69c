// The runner: executes a pipeline over named slots, on a CUDA stream or on the CPU references.
//
// Slots are allocated once per shape and reused across frames. Every kernel launch is bracketed
// by an event pair and recorded with its real grid, block, shared memory, attributes and
// occupancy. The GUI, the CLI and the tests all run frames through this class, so their numbers
// agree.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <map>
#include <optional>
#include <memory>
#include <string>
#include <vector>

#include "counters.h"
#include "delay.h"
#include "device.h"
#include "diff.h"
#include "launch_recorder.h"
#include "pipeline.h"
#include "uploader.h"

namespace lab {

enum class Backend { Cpu, Cuda };
const char* backend_name(Backend b);

// A launch that ran outside this process, as it was measured there.
struct RemoteLaunch {
  dim3 grid, block;
  float ms = 0;
  KernelAttrs attrs;
  int blocks_per_sm = 0;
};

// Where live kernels run when not in this process: the kernel host (kernel_host.h). The runner
// calls it with the stage's slots and its stream, where the stages before are enqueued; it
// orders the launch after them (host synchronisation or an interprocess event), and the runner
// records the launch it reports. It throws for a launch that failed, and the runner's later
// stages do not run.
class RemoteLaunches {
 public:
  virtual ~RemoteLaunches() = default;
  virtual RemoteLaunch launch(const std::string& stage, const StageArgs& a,
                              const std::vector<ParamSpec>& specs, cudaStream_t stream) = 0;
  // The launch's hardware counters, collected where it runs (by the lab's counter code there)
  // on a launch of its own with the L2 flushed before it; values NaN and `why` set when they
  // cannot be had.
  virtual CounterValues counters(const std::string& stage, const StageArgs& a,
                                 const std::vector<ParamSpec>& specs, cudaStream_t stream,
                                 std::string* why) = 0;
};

struct SlotInfo {
  std::string name;
  ImageDesc desc;
};

class Runner {
 public:
  explicit Runner(Backend backend);
  ~Runner();
  Runner(const Runner&) = delete;
  Runner& operator=(const Runner&) = delete;

  Backend backend() const { return m_backend; }
  cudaStream_t stream() const { return m_stream; }

  // Validates the pipeline for this input shape and (re)allocates slots whose shape changed.
  // Throws Error(Usage) for a bad stage/variant/block/parameter, Error(Data) for an input the
  // first stage cannot take.
  void configure(const PipelineConfig& pipeline, const ImageDesc& input);
  // A playground (pipeline with one lab op): its generated slots become "input" and extra slots,
  // the pipeline is configured for them and they are sent to the device.
  void configure_lab(const PipelineConfig& pipeline, const LabInputs& in);
  const std::vector<ResolvedStage>& stages() const { return m_stages; }
  // The configuration last applied by configure().
  const PipelineConfig& pipeline() const { return m_pipeline; }
  // Every slot in pipeline order, "input" first.
  std::vector<SlotInfo> slots() const;
  // A slot no stage writes, kept across configure() (an optional input such as a second score
  // map for nms); fill it with write_slot(). An empty desc removes it.
  void set_extra_slot(const std::string& name, const ImageDesc& desc);
  // Stages whose work a later fused variant does, or that are disabled: run() skips them.
  bool skipped(size_t i) const { return m_skip.at(i); }
  bool disabled(size_t i) const { return !m_stages.at(i).enabled; }
  // Which stage's variant absorbs stage i ("" when none).
  std::string fused_into(size_t i) const;

  // CUDA graph mode: run() and run_queued() replay the whole pipeline as one graph, captured on
  // first use after configure() (after an eager run, so that every scratch buffer and table
  // exists before capture). Per-launch times are then unknown (NaN); frame_ms() is the graph's
  // time between one event pair. The records keep grid, block and occupancy.
  void set_graph(bool on);
  bool graph() const { return m_use_graph; }
  // Off: whole-pipeline runs record no event pair per launch, only one around the frame (what a
  // deployed pipeline pays; per-launch times are then NaN, as in graph mode). On by default.
  void set_per_launch_timing(bool on) { m_per_launch = on; }
  bool per_launch_timing() const { return m_per_launch; }
  // A sink that sees a named range opened around every launch the runner records (the
  // counter collector's CUPTI ranges); null: none. NVTX ranges are always opened: the stage,
  // variant, block and math nested (ncu --nvtx-include "blur/v6_rows16_shfl/32x8/precise/"), the
  // kernel's name inside.
  void set_ranges(RangeSink* sink) { m_rec.set_ranges(sink); }
  // Flush the L2 before every recorded launch, outside its event pair and range (cold
  // counters, measure.h); off by default.
  void set_flush_before_launch(bool on) { m_flush_each = on; }

  // Live kernels run through `r` (the kernel host), not in this process; null: here. With a
  // graph, the pipeline runs as graphs split at each such stage (the stages before, the hosted
  // launch, the stages after).
  void set_remote(RemoteLaunches* r);
  // Stage i's hosted launch's counters, collected in the kernel host (see RemoteLaunches).
  CounterValues remote_counters(size_t i, std::string* why);
  // Whether the last graph frame was split at a hosted stage (the Timings panel says so).
  bool graph_split() const { return !m_split.empty(); }

  // Sends a frame to the input slot in the upload mode (CPU backend: a host copy).
  void set_input(const HostImage& img);
  void set_upload_mode(UploadMode m);
  UploadMode upload_mode() const { return m_up ? m_up->mode() : UploadMode::Pageable; }
  // The last upload: GPU time of the copy (pageable, pinned: an event pair around it), or host
  // wall time of the write into mapped memory; and the host time spent staging it (the copy
  // of the frame into page-locked memory; 0 for pageable).
  double upload_ms() const { return m_up ? m_up->upload_ms() : 0; }
  double staging_ms() const { return m_up ? m_up->staging_ms() : 0; }
  // Runs the pipeline on the current input and, meanwhile, sends `next` for the following run
  // (pinned mode without a graph: into the spare input buffer on the copy stream; otherwise
  // after the run). Waits for the run, like run().
  void run_overlapped(const HostImage& next);

  // Runs every stage, waits, and fills launches() with timed records.
  void run();
  // Runs one stage, with `cfg` in place of its configuration when given (sweeps), and waits.
  void run_stage(size_t i, const ResolvedStage* cfg = nullptr);
  // Enqueue without waiting; collect() waits for the stream and reads the event times.
  // With queue_ahead, the stream is first held on the GPU for that many microseconds, so the
  // launches queue behind it and their event pairs time the kernels, not the host's launch
  // latency (what bench does). With flush_l2, the L2 is then emptied (enqueue_l2_flush), so the
  // work starts DRAM-cold. Measurement (measure.h) is the one caller.
  void run_queued(double queue_ahead_us, size_t stage = SIZE_MAX,
                  const ResolvedStage* cfg = nullptr, bool flush_l2 = false);
  // Enqueues the L2 flush on the stream: a read over twice the L2's size (every dirty line
  // written back), then those lines discarded, so the L2 is left empty (delay.h).
  void enqueue_l2_flush();
  void enqueue_stage(size_t i, const ResolvedStage* cfg = nullptr);
  void collect();

  // Records of the launches since the last clear (run() clears first).
  const std::vector<LaunchRecord>& launches() const { return m_rec.launches(); }
  void clear_launches() { m_rec.clear(); }
  // Thread-safe: the launch a hung frame waits on ("" when none is known), for the UI's report.
  std::string first_unfinished_launch() const { return m_rec.first_unfinished(); }
  // GPU time (sum of its launches) or CPU wall time of each stage in the last run.
  const std::vector<double>& stage_ms() const { return m_stage_ms; }
  // GPU time from the first launch's start to the last launch's end (gaps included).
  double frame_ms() const { return m_frame_ms; }
  // Host time run_queued() took to enqueue its work (what an unqueued first launch would wait
  // for on an idle GPU), in ms.
  double enqueue_ms() const { return m_enqueue_ms; }

  HostImage read_slot(const std::string& name) const;
  // Where a slot lives (device memory with the cuda backend); valid until the next configure().
  ImageRef slot_ref(const std::string& name) const;
  void write_slot(const std::string& name, const HostImage& img);
  // Fills a stage's outputs (those of `cfg`'s variant when given) with 0xFF bytes (NaN floats):
  // unwritten pixels then fail the diff.
  void poison_outputs(size_t stage, const ResolvedStage* cfg = nullptr);

  // The CPU reference of stage i (with `cfg`'s variant when given) on the current contents of
  // its input slots.
  std::vector<HostImage> reference(size_t i, const ResolvedStage* cfg = nullptr) const;
  // Stage i's outputs against `ref` with the tolerance of `math` (the op's own comparison when
  // it has one, e.g. keypoint sets).
  DiffStats compare(size_t i, const std::vector<HostImage>& ref, MathMode math,
                    const ResolvedStage* cfg = nullptr) const;

  // Bytes a stage must move at the least: each input read once, each output written once (a
  // fused variant: its own inputs and outputs, so what fusion saves shows in the model).
  double stage_bytes(size_t i, const ResolvedStage* cfg = nullptr) const;

 private:
  class Context;
  struct Slot {
    ImageDesc desc;
    DeviceImage dev;
    HostImage host;
    ImageRef mapped;  // the input in mapped page-locked memory (zero-copy), when in use
    ImageRef ref() const { return mapped.data ? mapped : dev.data() ? dev.ref() : host.ref(); }
  };
  struct StageState {
    std::vector<DeviceBuffer> scratch;
    DeviceBuffer persistent;
    uint64_t persistent_key = 0;
    bool persistent_valid = false;
  };

  StageArgs args_for(const ResolvedStage& cfg) const;
  // `s`'s parameters, and those of the stages its variant fuses as "stage.name" (fused_params).
  ParamMap params_for(const ResolvedStage& s) const;
  std::vector<HostImage> read_inputs(const ResolvedStage& cfg) const;
  void enqueue_all();
  void enqueue_split();
  void eager_frame();
  bool hosted(size_t i) const;
  void run_hosted(size_t i, const ResolvedStage& s, const StageArgs& args);
  void bypass(size_t i);
  void reset_graph();

  Backend m_backend;
  cudaStream_t m_stream = nullptr;
  PipelineConfig m_pipeline;
  std::vector<ResolvedStage> m_stages;
  std::map<std::string, Slot> m_slots;
  std::vector<std::string> m_slot_order;
  std::vector<StageState> m_state;
  std::vector<bool> m_skip;
  std::unique_ptr<Uploader> m_up;  // cuda backend only
  DeviceImage m_input_spare;       // run_overlapped's second input buffer
  std::map<std::string, ImageDesc> m_extra;
  std::vector<std::string> m_lab_extra;  // the extra slots a playground's inputs added
  bool m_use_graph = false, m_frame_pair = false, m_per_launch = true;
  cudaGraph_t m_graph = nullptr;
  cudaGraphExec_t m_graph_exec = nullptr;
  std::vector<LaunchRecord> m_graph_launches;
  cudaEvent_t m_graph_ev[2] = {nullptr, nullptr};
  RemoteLaunches* m_remote = nullptr;
  struct Piece {  // of a split graph: a run of in-process stages, or one hosted stage
    size_t first = 0, end = 0;
    cudaGraphExec_t exec = nullptr;  // null: the hosted stage `first`
    std::vector<LaunchRecord> launches;
  };
  std::vector<Piece> m_split;
  LaunchRecorder m_rec;
  std::vector<double> m_stage_ms;
  double m_frame_ms = 0, m_enqueue_ms = 0;
  L2Flush m_flush;  // read, then discarded, to empty the L2 (cold runs, counters)
  bool m_flush_each = false;
};

}  // namespace lab
