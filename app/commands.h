// The headless subcommands. Each returns a process exit code and throws lab::Error for
// failures that map to a sysexits code.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "image_source.h"
#include "kernel_host.h"
#include "measure.h"
#include "pipeline.h"
#include "runner.h"

namespace lab::app {

// Options every engine subcommand takes.
struct CommonOptions {
  std::string input = "synthetic";
  std::string device = "auto";         // auto | cpu | cuda
  std::string size;                    // letterbox output WxH, or a playground's problem size
  std::string pipeline = "keypoints";  // a named pipeline (pipeline_names()), or a playground
  std::string preset;                  // a preset file: the pipeline the other options edit
  uint64_t seed = 1;                   // a playground's generated inputs
  std::string kernel_file;             // a live kernel (NVRTC) ...
  std::string replace;                 // ... replacing this stage's kernel (variant "user")
  double trial_timeout_s = 2.0;        // its trial run's time limit ...
  bool trial_memcheck = false;         // ... and whether it runs under compute-sanitizer
  double frame_deadline_s = 2.0;       // each of its frames in the kernel host
  bool graph = false;                  // replay the pipeline as a CUDA graph (run, bench, gui)
  std::string upload = "auto";         // auto | pageable | pinned | mapped
  std::vector<std::string> variants, blocks, maths, params;
  // On-demand stages (detect) to add: bench and check add those their --stage names.
  std::vector<std::string> add_stages;
  size_t max_pixels = io::kDefaultMaxPixels;
  bool accept_truncated = false;  // decode truncated PNG/JPEG files, with a warning
};

// bench's input when none is given: a real test image (tests/data/box_in_scene.png, found
// beside the executable), or the synthetic scene, with a note on stderr, where there is none.
std::string default_bench_input();

struct ListOptions {
  bool json = false;
  bool fastest_preset = false;  // print the fastest configuration as a preset file instead
};

struct CheckOptions {
  std::vector<std::string> stages;  // empty: all
  bool quick = false;               // default block only, instead of every allowed block
};

struct BenchOptions {
  std::vector<std::string> stages;  // empty: all
  MeasureOptions measure;           // warm-up, runs, noise target, cold L2, queue-ahead delay
  bool counters = false;            // hardware counters per launch (CUPTI)
  bool print_ncu = false;           // print the ncu command lines instead of measuring
  bool sweep_blocks = false;
  bool sweep_variants = false;
  bool sweep_math = false;
  bool csv = false;
  bool json = false;
  std::string out;  // write the table/CSV/JSON here instead of stdout
};

// explain: why one configuration of a stage is faster than another (explain.h).
struct ExplainOptions {
  std::vector<std::string> specs;  // two: STAGE=VARIANT[/WxH][/precise|fast]
  std::vector<std::string>
      ladder;  // or stages whose consecutive steps to explain ("all": every one)
  MeasureOptions measure;
  bool counters = true;  // where CUPTI can: else a note, and time, bytes and static facts only
  bool sass = true;      // the static instruction mix (cuobjdump)
  bool json = false;
  std::string out;
};

struct CopyOptions {
  std::string spec;   // STAGE=VARIANT
  std::string block;  // WxH; empty: the variant's default
  std::string math = "precise";
  std::string out;  // file; empty: stdout
};

// asm: a kernel's PTX or SASS, its instruction mix, builds side by side (asm_command.cpp).
struct AsmOptions {
  std::string spec;  // STAGE[=VARIANT]
  std::string math = "precise";
  std::string kernel;       // one function: mangled, launch name or part of the demangled name
  std::string block;        // WxH: the template instance of a block-templated kernel
  std::string against;      // STAGE=VARIANT: A (spec) against B, in --math
  std::string kernel_file;  // a live kernel instead (NVRTC's PTX, nvdisasm's SASS)
  bool sass = false, diff = false, list = false, mix_only = false;
  int arch = 0;    // SASS architecture (90); 0: this GPU's, else the first in the binary
  int width = 60;  // one side's columns in --diff / --against
};

struct RunOptions {
  std::string dump;  // folder for <slot>.npy
  int frames = 1;
  bool cold = false;  // the L2 flushed before every launch (what --print-ncu's command profiles)
};

// The common options applied to the default pipeline; throws Error(Usage).
PipelineConfig build_pipeline(const CommonOptions& o);
// cpu or cuda from --device; throws Error(Unavailable) for cuda without a device.
Backend pick_backend(const std::string& device);
// --upload: auto (mapped on an integrated GPU, else pinned) or a mode; throws Error(Usage).
UploadMode pick_upload(const std::string& spec);

// Every slot as <folder>/<slot>.npy. keypoints.npy is N x 3 (x, y, score) and patches.npy,
// descriptors.npy N x 64, the pad rows dropped, in the exact top-K order whichever variant ran;
// slots of a stage that a fused variant replaced are not written.
void dump_slots(const Runner& r, const std::string& folder);

int cmd_list(const ListOptions& o);
int cmd_check(const CommonOptions& c, const CheckOptions& o);
int cmd_bench(const CommonOptions& c, const BenchOptions& o);
int cmd_run(const CommonOptions& c, const RunOptions& o);
int cmd_copy(const CopyOptions& o);
int cmd_explain(const CommonOptions& c, const ExplainOptions& o);
// The index of the stage named `name` in the runner's pipeline; Error(Usage) when it has none.
size_t stage_index(const Runner& r, const std::string& name);
int cmd_asm(const AsmOptions& o);

// --kernel-file / --replace: compiles the file (NVRTC) and, with a GPU, runs it once in a trial
// child process (kernel_host.h) on `frame` (null: a playground's generated inputs) under
// --trial-timeout (and --trial-memcheck); only a kernel that passed becomes the replaced stage's
// variant "user". Throws Error(Data) for a missing file, one that does not compile (its
// diagnostics go to stderr) or a kernel that leaves outputs unwritten, Error(Usage) for a stage
// that cannot take it, Error(Internal) for a trial that faulted, did not finish or crashed.
// What it did (compiled, trial passed, loaded) goes to `log`.
// The kernel then runs in the kernel host (kernel_host.h): the trial's child, kept warm, with
// the kernel installed; attach `launches` to the runner (Runner::set_remote). Both null when
// there is no kernel file or no GPU.
struct LiveHosting {
  std::unique_ptr<KernelHost> host;
  std::unique_ptr<HostedLaunches> launches;
};
LiveHosting install_live_kernel(PipelineConfig& p, const CommonOptions& c, Backend b,
                                const HostImage* frame, std::ostream& log = std::cout);

}  // namespace lab::app
