// Trial runs: a newly compiled live kernel runs once in a disposable child process of the same
// binary (`kernel-lab __trial`) before it may enter the lab, so that a kernel that faults, never
// ends or crashes takes down the child, not the user's session.
//
// The parent (TrialRunner) keeps one child warm: its CUDA context is made once, ahead of the
// first trial, and replaced after a fault (a faulted context is unusable). A request carries the
// compiled kernel (its cubin: the child never runs NVRTC), the pipeline, and the input (a frame,
// or a playground's size and seed); the child configures a runner exactly as the lab would, runs
// the stages before the kernel's, poisons its outputs, runs it once and reports whether it
// finished, what it wrote and how it compares with the stage's CPU reference.
//
// The protocol is framed binary over a socket pair on the child's stdin and stdout (the child
// moves its own stdout to stderr at once, so a kernel's printf cannot corrupt it); every read is
// bounded, so a child that crashes, hangs, exits early, prints garbage or stops mid-message is
// an outcome with words, never a hang or a crash of the parent.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "image.h"
#include "live.h"
#include "memcheck_report.h"

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

enum class TrialOutcome {
  Passed,     // finished and wrote every output pixel: may be installed
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

class TrialRunner {
 public:
  // `command`: the child's argv (this executable and "__trial"; tests give fake children).
  explicit TrialRunner(std::vector<std::string> command);
  ~TrialRunner();  // kills the child
  TrialRunner(const TrialRunner&) = delete;
  TrialRunner& operator=(const TrialRunner&) = delete;

  // Starts the warm child now, without waiting for it: its CUDA context is then made while the
  // user types. Cheap when it already runs.
  void warm();
  // Runs one trial; blocks for at most the limits; never throws for what the child does.
  TrialReport run(const TrialRequest& req, const TrialLimits& limits);
  // Children started so far (the warm one is replaced after a fault, a timeout or a crash).
  int spawned() const { return m_spawned; }

 private:
  struct Process;  // a child and whether it said it is ready
  std::unique_ptr<Process> spawn(const std::vector<std::string>& argv, std::string* why);
  TrialReport exchange(Process& c, const TrialRequest& req, double timeout_s, double start_s);
  std::vector<std::string> m_command;
  std::unique_ptr<Process> m_warm;
  int m_spawned = 0;
};

// The argv of this executable's trial child.
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

}  // namespace lab
