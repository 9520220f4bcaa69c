// A pipeline: an ordered list of stages, each an op with its variant, block, math mode and
// parameters. The same configuration drives the CLI, the GUI, presets and tests.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "device.h"
#include "op.h"
#include "registry.h"

namespace lab {

struct StageConfig {
  std::string op;
  std::string variant;         // empty: the op's default variant
  std::optional<Block> block;  // empty: the variant's default block
  MathMode math = MathMode::Precise;
  ParamMap params;
  // Off: the stage is not launched. Its output passes its input through when their shapes match
  // (blur off: sobel sees the unblurred image), else it is zero-filled.
  bool enabled = true;
  // A live kernel's op (make_live_op): the registry's op plus the "user" variant. Null: the
  // registry's op named `op`.
  std::shared_ptr<const Op> custom;
};

struct PipelineConfig {
  std::vector<StageConfig> stages;
};

// The slots variant `v` of `op` writes: its own list when it has one, else the op's.
inline const std::vector<std::string>& variant_outputs(const Op& op, size_t v) {
  const VariantDef& vd = op.def.variants.at(v);
  return vd.outputs.empty() ? op.def.outputs : vd.outputs;
}

// A stage checked against the registry and the device.
struct ResolvedStage {
  const Op* op = nullptr;
  std::shared_ptr<const Op> custom;  // keeps a live kernel's op alive (op points into it)
  size_t variant = 0;
  Block block;
  MathMode math = MathMode::Precise;
  ParamMap params;
  bool enabled = true;

  const VariantDef& variant_def() const { return op->def.variants[variant]; }
  // The slots the chosen variant reads (a fused variant reads other slots than its op); a name
  // may end in '?' (optional).
  const std::vector<std::string>& inputs() const {
    return variant_def().inputs.empty() ? op->def.inputs : variant_def().inputs;
  }
  // The slots it writes (a fused variant may write a slot of a stage it skips: nms/
  // v5_fused_front writes blur too), the op's own first.
  const std::vector<std::string>& outputs() const { return variant_outputs(*op, variant); }
  ReferenceFn reference() const {
    return variant_def().reference ? variant_def().reference : op->def.reference;
  }
  ShapeFn shape() const { return variant_def().shape ? variant_def().shape : op->def.shape; }
  CompareFn compare() const {
    return variant_def().compare ? variant_def().compare : op->def.compare;
  }
  std::string label() const;  // "blur/v3_smem_tile 32x8 precise"
};

// "name?" -> "name" (an optional input slot).
inline std::string slot_name(const std::string& s) {
  return !s.empty() && s.back() == '?' ? s.substr(0, s.size() - 1) : s;
}
inline bool optional_slot(const std::string& s) {
  return !s.empty() && s.back() == '?';
}

// The named pipelines: "keypoints" (letterbox -> blur -> sobel -> harris -> nms -> topk ->
// sample -> l2norm; detect, which does blur to topk in one stage, joins when named), "harris"
// (the dense part, up to the Harris response), then one per playground ("matmul", "reduce", ...:
// a single stage over inputs made from a size and a seed).
std::vector<std::string> pipeline_names();
// Every stage of the named pipeline at its default; throws Error(Usage) listing the names.
PipelineConfig default_pipeline(const std::string& name = "keypoints");

// Why `block` cannot run `variant` (empty when it can): over 1024 threads, not one of the
// shapes the variant was written or instantiated for, or more shared memory than the device
// gives a block. `dev` may be null (no GPU: the device limits are not checked).
std::string block_refusal(const VariantDef& variant, Block block, const DeviceInfo* dev);

// The playground op a pipeline runs (its one stage, and any live stage added after it), or null
// for an image pipeline.
const Op* playground_of(const PipelineConfig& p);
// The playground of that name, or null.
const Op* find_playground(const std::string& name);

// A playground's generated inputs: its slots in order, the first named "input".
struct LabInputs {
  std::string size;  // the spec they were made for
  uint64_t seed = 0;
  std::vector<std::pair<std::string, HostImage>> slots;
  std::string describe() const { return "generated " + size + ", seed " + std::to_string(seed); }
};
// Makes them; an empty size takes the playground's default. Throws Error(Usage) for a bad size.
LabInputs make_lab_inputs(const Op& op, const std::string& size, uint64_t seed);

// Validates every stage; throws Error(Usage) naming the stage and the problem (for a retired
// variant, its successor).
std::vector<ResolvedStage> resolve(const PipelineConfig& p, const DeviceInfo* dev);

// A variant that left the lab or moved to another op, the one that took its place, and the
// last commit that had it (CHANGELOG.md says why). The one table saved presets and the GUI's
// autosave migrate through.
struct RetiredVariant {
  const char* op;
  const char* name;
  const char* successor;  // a variant of successor_op
  const char* last_commit;
  const char* successor_op = nullptr;  // null: the same op; else the step moved to that op
};
const std::vector<RetiredVariant>& retired_variants();
// "op/variant" where a retired variant's successor lives, following the table; "variant" alone
// for the same op; empty if `name` was never retired.
std::string successor_of(const std::string& op, const std::string& name);
// A saved pipeline made usable stage by stage: a retired variant becomes its successor (a moved
// one: the op's default, and the successor's op added as a stage with it), an unknown one the
// op's default, a block the (new) variant refuses its default. One line per change; the rest of
// the pipeline is kept. Unknown ops and parameters are left to resolve().
std::vector<std::string> migrate_variants(PipelineConfig& p);
// The stage of `op` in `p`, added in ops.def order when `op` is LAB_ON_DEMAND for this pipeline
// (an image pipeline that holds every other stage of the op's named pipeline). Throws
// Error(Usage) for an unknown op or one this pipeline cannot hold.
StageConfig& stage_of(PipelineConfig& p, const std::string& op);
// Whether stage_of() would add `op` to `p` (an on-demand op `p` lacks and can hold).
bool can_add_stage(const PipelineConfig& p, const std::string& op);
// Removes an on-demand stage (the Pipeline panel's "remove"); false if there was none.
bool remove_stage(PipelineConfig& p, const std::string& op);

// "WxH" -> Block / size; nullopt when malformed.
std::optional<Block> parse_wxh(const std::string& s);

// Command-line and preset overrides. Each throws Error(Usage) with the accepted form.
void apply_variant(PipelineConfig& p, const std::string& spec);  // STAGE=NAME
void apply_block(PipelineConfig& p, const std::string& spec);    // STAGE=WxH
void apply_math(PipelineConfig& p, const std::string& spec);     // precise|fast|STAGE=precise|fast
void apply_param(PipelineConfig& p, const std::string& spec);    // STAGE.NAME=VALUE
void apply_size(PipelineConfig& p, const std::string& wxh);      // letterbox output size

// The keypoint pipeline's variants of the fastest frames measured on the H200 (BENCHMARKS.md,
// "The whole frame"): letterbox v7 (v6, and a plain gray conversion at scale 1), detect v4 (blur
// to topk in one stage: the front in column pairs on large frames, its survivors listed and
// ranked, each launch started before the one before it ends; nms/v5_fused_front stays for when
// detect is removed) and the fused descriptor head l2norm v5, as STAGE=NAME. Every stage that
// runs is named, so that a variant added later does not join it by being the last (an op's
// default when none is named). examples/presets/fastest.json holds the same (a test checks it).
const std::vector<std::string>& fastest_variants();
// Applies them to `p` (the GUI's "fastest" button, `list --fastest-preset`).
void apply_fastest(PipelineConfig& p);

}  // namespace lab
