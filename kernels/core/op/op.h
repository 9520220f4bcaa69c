// What an op (one kernel file in kernels/ops/) declares to the engine.
//
// Each op file is compiled twice, once precise and once with --use_fast_math, into namespaces
// lab::ops::precise and lab::ops::fast. Both passes return an OpDef from the same source; the
// registry keeps the precise pass's description and both passes' launchers.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "check.h"
#include "diff.h"
#include "image.h"
#include "params.h"

namespace lab {

class LiveKernel;

enum class MathMode : uint8_t { Precise = 0, Fast = 1 };
const char* math_name(MathMode m);

struct Block {
  int x = 32;
  int y = 8;
  long long threads() const { return (long long)x * y; }
  bool operator==(const Block& o) const { return x == o.x && y == o.y; }
  bool operator!=(const Block& o) const { return !(*this == o); }
  std::string str() const { return std::to_string(x) + "x" + std::to_string(y); }
};

// Allowed error of a kernel against its CPU reference: |gpu - ref| <= abs + rel * max|ref|.
// NaN (a poisoned, unwritten pixel) never passes.
struct Tolerance {
  double abs = 0;
  double rel = 0;
  double limit(double ref_max_abs) const { return abs + rel * ref_max_abs; }
};

// The images a stage reads and writes, in the order its op declares them, with its validated
// parameters and block. Device pointers for launchers, host pointers for references.
struct StageArgs {
  std::vector<ImageRef> in;
  std::vector<ImageRef> out;
  ParamMap params;
  Block block;
};

// The engine side of a launch; the runner implements it. Ops call lab::launch() (launch.cuh),
// which brackets every kernel launch with before_launch / after_launch so that timing,
// occupancy and error checks always describe the launch that really ran.
class LaunchContext {
 public:
  virtual ~LaunchContext() = default;
  virtual cudaStream_t stream() const = 0;
  // Device scratch owned by the stage, kept across frames, grown on demand. `slot` lets a
  // variant hold several scratch buffers.
  virtual void* scratch(size_t bytes, int slot = 0) = 0;
  // Device memory owned by the stage for data that depends only on `key` (say, sizes). `fill`
  // runs when the key changed; the memory counts as filled only once `fill` returns, so a fill
  // that throws is retried on the next launch.
  virtual void* persistent(size_t bytes, uint64_t key, const std::function<void(void*)>& fill) = 0;
  // Validates the shape against the kernel's attributes and the device, records the start.
  virtual void before_launch(const void* func, const char* name, dim3 grid, dim3 block,
                             size_t smem) = 0;
  // Records the end, checks cudaGetLastError().
  virtual void after_launch() = 0;
  // Said by a launcher that runs another step's code here (a feature this device lacks, a size or
  // parameter past what its own code takes): the launches that follow carry `variant` and
  // `where`, so that bench, check and the GUI show that step's name beside this one's.
  virtual void runs_step(const std::string& variant, const std::string& where) = 0;
};

using LaunchFn = void (*)(LaunchContext&, const StageArgs&);
using ReferenceFn = void (*)(const StageArgs&);
using ShapeFn = std::vector<ImageDesc> (*)(const std::vector<ImageDesc>& in, const ParamMap& p);
using SmemFn = size_t (*)(Block);

struct VariantDef;
// What an op's own comparison sees: the stage's inputs, the GPU's outputs and the reference's,
// all on the host.
struct CompareArgs {
  const std::vector<HostImage>* in = nullptr;
  const std::vector<HostImage>* got = nullptr;
  const std::vector<HostImage>* ref = nullptr;
  const std::vector<std::string>* out_names = nullptr;
  const VariantDef* variant = nullptr;
  Tolerance tol;
  MathMode math = MathMode::Precise;  // the build that ran
  const ParamMap* params = nullptr;   // the stage's parameters
};
using CompareFn = DiffStats (*)(const CompareArgs&);

struct VariantDef {
  std::string name;   // "v2_separable"
  std::string delta;  // one line (at most 100 characters): what changed from the previous step
  std::vector<Block> blocks;
  Block default_block;
  LaunchFn launch = nullptr;
  SmemFn smem = nullptr;  // dynamic + static shared memory a block uses; null: none
  // A fused variant does the work of earlier stages: `fuses` names them (the pipeline then
  // skips, for each name, the nearest earlier stage of that op), `inputs` replaces the op's
  // input slots and `reference` the op's reference (the skipped stages' parameters reach both
  // as "stage.name": fused_params()). A slot name ending in '?' is optional: absent, the
  // launcher sees a null image. A fused variant that must still write a skipped stage's slot
  // (one a later stage reads) also sets `outputs`, `shape` and `compare` below.
  std::vector<std::string> fuses;
  std::vector<std::string> inputs;
  ReferenceFn reference = nullptr;
  // Non-empty for a variant whose result may legitimately differ from the reference (the
  // histogram top-K): what differs and what the comparison then holds it to.
  std::string approx;
  // The teaching story's prediction for this step: what should move, and why (bench --lab and
  // the GUI print it beside the measurement).
  std::string expect;
  // A library implementation (cuBLAS, CUB, Thrust) that the other variants are measured against:
  // bench gives every row's percent of the first ceiling variant's time in the same run.
  bool ceiling = false;
  // "Edit a copy" (live kernels): the call user_kernel makes to this variant's kernel in its
  // op's <op>_kernels.cuh, e.g. "blur_v4_rows_kernel<8>(in[0], out[0])" (empty: no single-kernel
  // form); whether the kernel had __launch_bounds__ (user_kernel then gets them); its outputs
  // per thread in x and y (the grid).
  std::string live_call;
  bool live_bounds = false;
  int live_px = 1, live_rows = 1;
  // A live (NVRTC-compiled) variant: the runner launches it through launch_live().
  std::shared_ptr<const LiveKernel> live;
  // The viewport's tile overlay (the output tile each block computed) takes the launch's grid.x
  // across the output's width and grid.y down its height; set when grid.x runs down the rows.
  bool grid_x_over_rows = false;
  // A fused variant's own output slots, the op's own first (nms/v5_fused_front writes nms and
  // blur): the runner allocates, poisons, writes, compares and counts these instead of the op's.
  // With them, `shape` gives their descs from the variant's inputs, and `compare` (null: the
  // op's) holds them to their bounds. Empty/null: the op's.
  std::vector<std::string> outputs;
  ShapeFn shape = nullptr;
  CompareFn compare = nullptr;
  // Where this step runs another step's code (LaunchContext::runs_step), in a few words for
  // `list`: "below sm_90: v3_selected_once". Empty: its own code everywhere.
  std::string runs_when;
};

// Playgrounds (kernels/lab/): an op that is a pipeline of its own, over inputs made from a size
// and a seed instead of a camera. The first slot is named "input".
using LabSlots = std::vector<std::pair<std::string, ImageDesc>>;
// The input slots for a size spec ("4096x4096x4096", "268435456"); throws Error(Usage) for a
// spec it cannot take, saying the accepted form.
using LabInputsFn = LabSlots (*)(const std::string& size);
// Fills those images (allocated to the LabSlots descs), deterministically from the seed.
using LabFillFn = void (*)(uint64_t seed, std::vector<HostImage>& imgs);
// Floating-point operations of one run of the stage (GFLOP/s columns); null: bandwidth-bound.
using FlopsFn = double (*)(const std::vector<ImageDesc>& in, const ParamMap& p);

struct OpDef {
  std::string name;
  std::string summary;
  std::vector<std::string> inputs;   // slot names read
  std::vector<std::string> outputs;  // slot names written
  std::vector<ParamSpec> params;
  ShapeFn shape = nullptr;          // output descs from input descs; throws Error on bad input
  ReferenceFn reference = nullptr;  // plain CPU loops over host images
  Tolerance tol_precise;
  Tolerance tol_fast;
  std::string tol_why;          // the bound, explained
  CompareFn compare = nullptr;  // null: every output value against the tolerance
  std::vector<VariantDef> variants;
  std::string default_variant;  // the pipeline's choice; empty: the last (most refined) variant
  // The named variant, for what is set after the table; throws std::out_of_range.
  VariantDef& variant(const std::string& n) {
    for (VariantDef& v : variants)
      if (v.name == n) return v;
    throw std::out_of_range("no variant " + n + " of " + name);
  }
  const VariantDef& variant(const std::string& n) const {
    return const_cast<OpDef*>(this)->variant(n);
  }
  // Playground ops only (null/empty for the image pipeline's stages).
  LabInputsFn lab_inputs = nullptr;
  LabFillFn lab_fill = nullptr;
  std::string lab_size_help;  // the size spec's form and meaning: "MxNxK: C(MxN) = A(MxK) B(KxN)"
  std::string lab_default_size;  // what the GUI and the CLI start with
  std::string story;             // the playground's lesson, a short paragraph
  FlopsFn flops = nullptr;
};

// The ops registered before this one, in ops.def's order: the argument of every op file's
// `OpDef <name>_op(const OpLookup&)`. An op that borrows another's reference, parameters or
// launcher (nms's fused front checks against blur's, sobel's and harris's references) takes it
// here, once, when the registry is built: ops never look themselves up in the registry.
class OpLookup {
 public:
  virtual ~OpLookup() = default;
  // The precise pass's description (its launchers too); Error(Internal) if `name` is not
  // registered before the asking op.
  virtual const OpDef& op(const std::string& name) const = 0;
};

}  // namespace lab
