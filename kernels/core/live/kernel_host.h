// The kernel host: live kernels run in a child process of the same binary (`kernel-lab
// __trial`), never in the lab's own, so that a kernel that faults, traps, hangs or crashes takes
// down the child and costs the lab one frame, not its session.
//
// The child does two things. A trial: a newly compiled kernel runs once before it may enter the
// lab (the child configures a runner exactly as the lab would, runs the stages before the
// kernel's, poisons its outputs, runs it once and reports whether it finished, what it wrote and
// how it compares with the stage's CPU reference). And frames: an installed kernel runs on every
// frame on the lab's own slots, shared with it (CUDA IPC on a discrete GPU; page-locked shared
// memory on an integrated one, where legacy IPC is not supported), ordered by host
// synchronisation around one short message each way, and timed in the child by the lab's
// launch recorder.
//
// KernelHost keeps one child warm: its CUDA context is made once, ahead of the first request,
// and replaced after a fault (a faulted context is unusable). A request carries the compiled
// kernel (its cubin: the child never runs NVRTC).
//
// The protocol is framed binary over a socket pair on the child's stdin and stdout (the child
// moves its own stdout to stderr at once, so a kernel's printf cannot corrupt it); every read is
// bounded, so a child that crashes, hangs, exits early, prints garbage or stops mid-message is
// an outcome with words, never a hang or a crash of the parent.
#pragma once

#include <array>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "image.h"
#include "launch_recorder.h"
#include "live.h"
#include "memcheck_report.h"
#include "runner.h"
#include "shared_region.h"

namespace lab {

struct TrialRequest {
  LiveBuild build;       // compiled (ok, cubin, lowered_name, arch, options, source)
  std::string stage;     // the stage the kernel replaces, or "" to add a stage "user" ...
  std::string add_slot;  // ... reading this slot
  std::string pipeline;  // preset_to_json of the pipeline (other live kernels left out)
  HostImage frame;       // the input; empty for a playground, which has ...
  std::string lab_size;  // ... its generated inputs' size and seed
  uint64_t lab_seed = 1;
};

// What became of a request to the child: a trial's, an install's or a frame's.
enum class TrialOutcome {
  Passed,     // finished (a trial: and wrote every output pixel: may be installed)
  Unwritten,  // finished but left output pixels unwritten (still poisoned)
  Faulted,    // a CUDA error (illegal address, trap, launch failure...)
  Timeout,    // did not finish within the limit
  Crashed,    // the child died (a signal, an exit before it reported)
  Protocol,   // the child sent something that is not a report (garbage, truncated)
  Error,      // could not run it: no GPU, a configuration the device refuses, a bad request
};
const char* trial_outcome_name(TrialOutcome o);

struct TrialReport {
  TrialOutcome outcome = TrialOutcome::Error;
  std::string message;    // one line, in words a student can act on
  double kernel_ms = 0;   // the kernel's one launch between an event pair (Passed, Unwritten)
  double trial_ms = 0;    // wall time of the trial, request to report (parent side)
  bool compared = false;  // against the stage's CPU reference
  double max_abs = 0;     // its largest difference
  bool within_tolerance = false;
  uint64_t unwritten = 0, total = 0;      // output pixels left poisoned, of all
  std::vector<MemcheckFinding> memcheck;  // with memcheck: what compute-sanitizer found
  bool memchecked = false;
  bool passed() const { return outcome == TrialOutcome::Passed; }
};

// How a frame's slots reach the child: CUDA IPC handles of the lab's own device allocations (a
// discrete GPU), or page-locked shared memory mapped in both processes (an integrated GPU such as
// Orin, where CUDA's legacy IPC is not supported, and wherever LAB_KERNEL_HOST_SHARED=1 asks).
enum class HostTransport : uint8_t { Ipc = 0, Shared = 1 };
const char* host_transport_name(HostTransport t);
// The transport for a device: Shared on an integrated GPU or with LAB_KERNEL_HOST_SHARED=1.
HostTransport host_transport_for(bool integrated);

// How a frame is ordered between the lab's stream and the child's: host synchronisation (the
// lab waits for its stream before it sends the frame; the child for its own before it replies),
// or interprocess events (the lab records an event and sends at once; the child's stream waits
// for it on the GPU). The shared-memory transport uses host synchronisation.
enum class HostOrdering : uint8_t { Sync = 0, Events = 1 };
const char* host_ordering_name(HostOrdering o);

// One slot of a frame, as the child finds it: an IPC handle of the allocation and the slot's
// offset in it, or a shared region (given with KernelHost::share) and an offset.
struct HostSlot {
  ImageDesc desc;
  uint64_t pitch = 0;
  std::array<char, 64> handle{};  // cudaIpcMemHandle_t (Ipc)
  uint64_t region = 0;            // SharedRegion::id() (Shared)
  uint64_t offset = 0;
};

struct HostLaunch {
  uint64_t frame = 0;
  HostTransport transport = HostTransport::Ipc;
  std::vector<HostSlot> in, out;
  std::vector<float> params;     // the stage's parameters in `kernel-lab list` order (at most 8)
  Block block{32, 8};            // must be the one the kernel was compiled for
  bool counters = false;         // collect its hardware counters (the child's CUPTI, L2 flushed)
  bool has_event = false;        // HostOrdering::Events: wait for this interprocess event first
  std::array<char, 64> event{};  // cudaIpcEventHandle_t
};

struct HostLaunchReport {
  TrialOutcome outcome = TrialOutcome::Error;
  std::string message;
  double kernel_ms = 0;      // between the child's own event pair (the launch recorder's)
  double round_trip_ms = 0;  // the lab's wall time from request to reply
  double child_ms = 0;       // the child's wall time from the request read to the reply sent
  double wait_ms = 0;        // of which waiting for its stream (the GPU's switch, the kernel)
  KernelAttrs attrs;         // the kernel's, in the child
  int blocks_per_sm = 0;
  dim3 grid, block;
  bool counted = false;  // counters were asked for: `values`, or why not
  CounterValues values;
  std::string counters_why;
  bool ran() const { return outcome == TrialOutcome::Passed; }
};

struct TrialLimits {
  double timeout_s = 2.0;  // from the request sent to the report read
  // The child's start (process, CUDA context) is not the kernel's time; it has its own limit.
  double start_timeout_s = 30.0;
  bool memcheck = false;  // under compute-sanitizer --tool memcheck (a one-shot child)
  // memcheck runs the kernel one to two orders of magnitude slower, and its start is slow:
  // its trials get this much more time.
  double memcheck_extra_s = 20.0;
};

// compute-sanitizer's path: on PATH, else beside nvcc (the CUDA toolkit's bin, its
// compute-sanitizer folder, $CUDA_HOME, /usr/local/cuda); "" when none, and `why` says so.
std::string find_compute_sanitizer(std::string* why = nullptr);

class KernelHost {
 public:
  // `command`: the child's argv (this executable and "__trial"; tests give fake children).
  explicit KernelHost(std::vector<std::string> command);
  ~KernelHost();  // kills the child
  KernelHost(const KernelHost&) = delete;
  KernelHost& operator=(const KernelHost&) = delete;

  // Starts the warm child now, without waiting for it: its CUDA context is then made while the
  // user types. Cheap when it already runs.
  void warm();
  // Runs one trial; blocks for at most the limits; never throws for what the child does.
  TrialReport run(const TrialRequest& req, const TrialLimits& limits);

  // Frames. install() loads a compiled kernel in the warm child (Passed, or why not); it stays
  // there until uninstall(), a failed launch or the child's end. launch() runs it once on slots
  // the lab shares (the caller has finished its own work on them: host synchronisation) and
  // blocks until the child reports or `deadline_s` passes. Anything but Passed leaves the host
  // with no kernel and a fresh child starting: the caller goes back to the built-in variant.
  TrialReport install(const LiveBuild& build, const TrialLimits& limits);
  HostLaunchReport launch(const HostLaunch& l, double deadline_s);
  void uninstall();
  bool installed() const { return m_installed; }
  // Gives the child a shared region (the Shared transport): mapped and page-locked there too.
  // Error(Unavailable) when it cannot.
  void share(const SharedRegion& r, double timeout_s = 5.0);

  // The lab's side of a frame (see HostTransport). ipc_slot: the slot's allocation as an IPC
  // handle and the slot's offset in it (Error(Unavailable) for memory that is not a device
  // allocation). shared_slot: the region kept for the frame's `index`-th slot (made, and given
  // to the child, on first use, when it must grow and for each new child), the slot's rows at
  // its start; `*staging` is its device address, where the caller copies an input before the
  // frame and from where it copies an output back after it.
  HostSlot ipc_slot(const ImageRef& r);
  HostSlot shared_slot(size_t index, const ImageRef& r, void** staging);

  // Children started so far (the warm one is replaced after a fault, a timeout or a crash).
  int spawned() const { return m_spawned; }
  // The warm child's process id; -1 when none runs.
  int child_pid() const;

 private:
  struct Process;  // a child and whether it said it is ready
  struct Reply;    // a frame read back, or the outcome that stopped it
  std::unique_ptr<Process> spawn(const std::vector<std::string>& argv, std::string* why);
  static Reply died(Process& c, const std::string& when);
  static Reply garbage(Process& c, const std::string& problem);
  Reply ready(Process& c, double start_s);
  Reply transact(Process& c, char type, const std::string& payload, char reply_type,
                 std::chrono::steady_clock::time_point deadline, const std::string& timeout_words);
  TrialReport exchange(Process& c, const TrialRequest& req, double timeout_s, double start_s);
  Process* warm_child(std::string* why);
  void retire_if_gone(TrialOutcome o);
  std::vector<std::string> m_command;
  std::unique_ptr<Process> m_warm;
  int m_spawned = 0;
  bool m_installed = false;
  struct Staging {
    SharedRegion region;
    int shared_with = -1;  // the child (m_spawned's count) that has it
  };
  std::vector<Staging> m_staging;
};

// A hosted live kernel that failed on a frame: the stage, the frame and the outcome, and the
// words "frame 12: stage blur, variant user, faulted: an illegal memory access ...". Exit 70.
struct KernelHostFault : Error {
  KernelHostFault(const std::string& stage, uint64_t frame, TrialOutcome outcome,
                  const std::string& message);
  std::string stage;
  uint64_t frame = 0;
  TrialOutcome outcome = TrialOutcome::Error;
};

// The runner's side of the kernel host: a live stage's launches go to `host` over the transport,
// each within `deadline_s` (a child that overruns it is killed with its process group). A launch
// that fails throws KernelHostFault; the host has then dropped the kernel and started a fresh
// child, and the caller goes back to the stage's built-in variant.
// The ordering: both are measured on the first 32 frames (alternating, the lab's wall time from
// its stream's last work to the child's reply) and the faster is kept; LAB_KERNEL_HOST_ORDER=
// sync|events forces one.
class HostedLaunches : public RemoteLaunches {
 public:
  HostedLaunches(KernelHost& host, HostTransport transport, double deadline_s = 2.0);
  ~HostedLaunches() override;
  RemoteLaunch launch(const std::string& stage, const StageArgs& a,
                      const std::vector<ParamSpec>& specs, cudaStream_t stream) override;
  CounterValues counters(const std::string& stage, const StageArgs& a,
                         const std::vector<ParamSpec>& specs, cudaStream_t stream,
                         std::string* why) override;
  // "kernel host: ... per frame, round trip median 41.2 µs (p95 52.0), of which the kernel
  // 12.3 µs: the host adds 28.9 µs" over the frames so far; "" before the first.
  std::string summary() const;

 private:
  KernelHost& m_host;
  HostTransport m_transport;
  double m_deadline_s;
  HostLaunchReport run(const std::string& stage, const StageArgs& a,
                       const std::vector<ParamSpec>& specs, cudaStream_t stream, bool counters);
  uint64_t m_frames = 0;
  // Per frame, in µs: the lab's request to the child's reply, and the kernel's time within it.
  std::vector<double> m_round_trip_us, m_kernel_us, m_child_us, m_wait_us;
  bool m_forced = false;  // LAB_KERNEL_HOST_ORDER
  HostOrdering m_ordering = HostOrdering::Sync;
  std::vector<double> m_order_us[2];  // per ordering: the trial frames' times
  cudaEvent_t m_event = nullptr;      // interprocess, made on first use
  std::array<char, 64> m_event_handle{};
};

// The argv of this executable's trial child (the kernel host).
std::vector<std::string> trial_command();

// The child: reads requests on `in_fd`, answers on `out_fd`, until EOF; exits after a fault.
// Returns the process exit code. (The hidden subcommand `kernel-lab __trial`.)
int trial_child_main(int in_fd, int out_fd);

// The protocol's messages, for tests: a request and a report as the payload of one frame. The
// decoders throw Error(Data) for a malformed message and never read past its end.
std::string encode_trial_request(const TrialRequest& r);
TrialRequest decode_trial_request(const std::string& frame_payload);
std::string encode_trial_report(const TrialReport& r);
TrialReport decode_trial_report(const std::string& frame_payload);
std::string encode_host_launch(const HostLaunch& l);
HostLaunch decode_host_launch(const std::string& frame_payload);
std::string encode_host_report(const HostLaunchReport& r);
HostLaunchReport decode_host_report(const std::string& frame_payload);

}  // namespace lab
