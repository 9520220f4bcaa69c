// Live kernels: a CUDA kernel typed in the lab (or read from a file), compiled at run time with
// NVRTC, loaded with the CUDA library API and run as a variant of a pipeline stage, so that the
// stage's CPU reference, diff, timing and occupancy apply to it unchanged.
//
// The kernel's signature and helpers are in lab_live.cuh (NVRTC includes it before the source).
// Compiling needs only NVRTC (no GPU: the build machines test it); loading and running need a
// GPU. A new build never replaces a running kernel until it has compiled and loaded.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "op.h"
#include "registry.h"

namespace lab {

class WireWriter;
class WireReader;

// What NVRTC is asked for.
struct LiveOptions {
  bool fast_math = false;  // --use_fast_math
  int max_regs = 0;        // -maxrregcount (0: the compiler's choice)
  bool line_info = true;   // -lineinfo (source lines in profiles and sanitizer reports)
  Block block{32, 8};      // LAB_BLOCK_X x LAB_BLOCK_Y: the only block the kernel runs with
  int px = 1, rows = 1;    // outputs per thread in x and y (LAB_PX, LAB_ROWS): the grid
  int arch = 0;            // SM version, 90 for sm_90; 0: this GPU's (87, Orin, without one)
};

// A kernel file carries its options in a comment line of its own:
//   // @lab block=32x4 px=1 rows=16 fast_math=0 maxrregcount=0 lineinfo=1
// read_live_options() applies such a line to `o` (Error(Data) for a malformed one);
// with_live_options() writes (or replaces) it at the top of the source.
LiveOptions read_live_options(const std::string& source, LiveOptions o);
std::string with_live_options(const std::string& source, const LiveOptions& o);

// The options on the wire (the compiler child, the kernel host), in one fixed order.
void put_live_options(WireWriter& w, const LiveOptions& o);
LiveOptions get_live_options(WireReader& in);

// The NVRTC command line for these options (also shown in the editor).
std::vector<std::string> live_nvrtc_options(const LiveOptions& o);
// The architecture `o` compiles for: o.arch, else the current GPU's, else 87.
int live_arch(const LiveOptions& o);

// One message of the compiler, at a line of the user's source (0: not tied to a line).
struct LiveDiagnostic {
  int line = 0;
  bool error = true;  // else a warning
  std::string message;
};
// Parses NVRTC's log ("user_kernel.cu(12): error: ...", "... warning #177-D: ...").
std::vector<LiveDiagnostic> parse_nvrtc_log(const std::string& log);

// What ptxas reported of the compiled kernel (NVRTC with --ptxas-options=-v): no GPU needed.
struct LiveResources {
  int regs = -1;  // -1: not reported
  int barriers = 0;
  long smem_bytes = 0, stack_bytes = 0, spill_stores = 0, spill_loads = 0;
  std::string str() const;  // "32 registers, 3312 B shared, 0 B stack, no spills"
};
// Splits ptxas's "info" lines out of NVRTC's log (they are not messages about the source) and
// reads the kernel's resources from them; `log` keeps the other lines.
LiveResources take_ptxas_resources(std::string& log);

struct LiveBuild {
  bool ok = false;
  std::string source;
  LiveOptions options;
  int arch = 0;
  std::string log;  // NVRTC's whole log
  std::vector<LiveDiagnostic> diagnostics;
  std::string ptx;
  std::vector<char> cubin;
  std::string lowered_name;  // user_kernel's mangled name
  double compile_ms = 0;
  LiveResources resources;  // as ptxas reported them
};
// How long, and in how much memory, one compile may run: a few kilobytes of macros or templates
// can expand for minutes into gigabytes. From the environment: LAB_COMPILE_TIMEOUT_S (seconds,
// default 30) and LAB_COMPILE_MEMORY_MIB (default 2048); Error(Usage) for a malformed value.
struct CompileLimits {
  double timeout_s = 30;
  uint64_t memory_bytes = uint64_t(2) << 30;  // address space beyond what the binary maps
};
CompileLimits compile_limits();

// Compiles `source` (NVRTC only: works without a GPU) in a child process of this executable
// (`__compile`) under `limits`: a compile that runs past them is killed, and Error(Data) says
// which ("NAME: compiling took longer than 30 s ..."; `name` is the file, or empty). Never throws
// for a bad source: the result says what is wrong, an #include of anything but the lab's headers
// included; throws Error(Usage) for an architecture this NVRTC cannot target (o.arch set, else
// Unavailable), Error(Unavailable) when NVRTC itself or the child fails.
LiveBuild live_compile(const std::string& source, const LiveOptions& o,
                       const std::string& name = "");
LiveBuild live_compile(const std::string& source, const LiveOptions& o, const std::string& name,
                       const CompileLimits& limits);
// The same compile in this process, with no limit: the child's work (tests compare the two).
// Resolves o.arch with live_arch() first.
LiveBuild live_compile_in_process(const std::string& source, const LiveOptions& o);
// The child: one request on `in_fd`, its result on `out_fd`; the process's exit code.
int live_compile_child_main(int in_fd, int out_fd);

// The SM versions this NVRTC can target (nvrtcGetSupportedArchs), and "" when it can target
// `arch`, else why not, in words ("NVRTC of this toolkit cannot target sm_50 (it supports
// sm_75..sm_121)").
std::vector<int> nvrtc_archs();
std::string nvrtc_arch_refusal(int arch);

// The headers a live kernel may #include: the lab's own (NVRTC is given them by name and has no
// include directory, so nothing else can be read from the file system). A refused #include (or
// __has_include, which opens what it names) is a diagnostic at its line.
std::vector<std::string> live_includable();
std::vector<LiveDiagnostic> live_include_refusals(const std::string& source);

// A compiled kernel loaded on the current GPU.
class LiveKernel {
 public:
  // Throws Error(Usage) for a failed build, Error(Unavailable)/(Cuda) when loading fails.
  explicit LiveKernel(LiveBuild build);
  const LiveBuild& build() const { return m_build; }
  const void* func() const { return m_func; }  // a cudaKernel_t, usable as a function symbol
  double load_ms() const { return m_load_ms; }
  int regs = 0;
  size_t static_smem = 0, local_bytes = 0;

 private:
  LiveBuild m_build;
  const void* m_func = nullptr;
  double m_load_ms = 0;
};

// Runs the kernel as stage `a`'s launch (float planes only: Error(Usage) otherwise); p.v holds
// the stage's parameters in the order of `specs`.
void launch_live(LaunchContext& ctx, const StageArgs& a, const LiveKernel& k,
                 const std::vector<ParamSpec>& specs);

// `base` with the user kernel added as a last variant named "user" (its block: the one the
// kernel was compiled for); the stage's reference, tolerance and comparison stay.
std::shared_ptr<const Op> make_live_op(const Op& base, std::shared_ptr<const LiveKernel> k);

// The user kernel as a new stage named "user" that reads `input_slot` (a float plane) and writes
// a slot "user" of the same shape. It has no CPU reference: it is timed, not compared.
std::shared_ptr<const Op> make_live_stage(const std::string& input_slot,
                                          std::shared_ptr<const LiveKernel> k);

// Whether a stage can take a live kernel: every input and output a float plane, at most 4 of
// each (blur, sobel, harris, nms, the float playgrounds). Empty when it can, else why not.
std::string live_refusal(const Op& op);

// "Edit a copy": the source of a built-in variant as it ships (its op's device code, with its
// kernels turned into device functions) and a user_kernel that calls it; empty when the variant
// has no single-kernel form (two launches, CUB). `options` gets its block and geometry.
std::string live_copy_source(const Op& op, size_t variant, Block block, MathMode math,
                             LiveOptions* options);
// A short, working starting point for a stage (a copy of the input, or a 3x3 box filter).
std::string live_template(const Op& op);

// Saved kernels: $XDG_DATA_HOME/kernel-lab/kernels (~/.local/share/kernel-lab/kernels).
std::string live_dir();
// Throws Error(NoInput) (66) for a missing or unreadable file, Error(Data) (65) for a folder, a
// FIFO or a file over 1 MiB, Error(Io) for a read that fails part-way.
std::string read_live_file(const std::string& path);
void write_live_file(const std::string& path, const std::string& source);

// The editor's autosave: its text and what it was for, so that a crash, a kill or an exit after
// a fault loses nothing the user typed. Under $XDG_STATE_HOME/kernel-lab (live_draft.json).
struct LiveDraft {
  std::string source;  // with its @lab line (the options)
  std::string stage;   // the stage it replaces ...
  bool add = false;    // ... or, when set, a new stage reading add_slot
  std::string add_slot;
  std::string file;  // the save/load field's name
};
std::string live_draft_path();
// Written whole or not at all (a temporary file, then renamed); throws Error(CantCreate / Io).
void write_live_draft(const std::string& path, const LiveDraft& d);
// nullopt when there is none; a corrupt or foreign file gives nullopt and says why in `warning`.
std::optional<LiveDraft> read_live_draft(const std::string& path, std::string* warning = nullptr);

}  // namespace lab
