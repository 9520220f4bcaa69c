#include "pipeline.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "printable.h"

namespace lab {

namespace {

StageConfig& stage_named(PipelineConfig& p, const std::string& name) {
  return stage_of(p, name);
}

// ops.def's position of `op`; SIZE_MAX for a name the registry does not have ("user").
size_t registry_index(const std::string& op) {
  const auto& ops = registry();
  for (size_t i = 0; i < ops.size(); ++i)
    if (ops[i].def.name == op) return i;
  return SIZE_MAX;
}

// Splits "KEY=VALUE"; throws with the accepted `form` when there is no '='.
std::pair<std::string, std::string> split_eq(const std::string& spec, const char* form) {
  const auto eq = spec.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size())
    throw Error(ErrorKind::Usage, "malformed '" + spec + "': expected " + form);
  return {spec.substr(0, eq), spec.substr(eq + 1)};
}

std::optional<MathMode> parse_math(const std::string& s) {
  if (s == "precise") return MathMode::Precise;
  if (s == "fast") return MathMode::Fast;
  return std::nullopt;
}

}  // namespace

const char* math_name(MathMode m) {
  return m == MathMode::Fast ? "fast" : "precise";
}

std::string ResolvedStage::label() const {
  return op->def.name + "/" + variant_def().name + " " + block.str() + " " + math_name(math);
}

namespace {
StageConfig stage_config(const std::string& op) {
  StageConfig s;
  s.op = op;
  return s;
}
}  // namespace

std::vector<std::string> pipeline_names() {
  std::vector<std::string> names{"keypoints", "harris"};
  for (const Op& op : registry())
    if (op.def.lab_inputs) names.push_back(op.def.name);
  return names;
}

PipelineConfig default_pipeline(const std::string& name) {
  PipelineConfig p;
  if (name == "keypoints" || name == "harris") {
    const unsigned want = name == "keypoints" ? LAB_KEYPOINTS : LAB_HARRIS;
    for (const Op& op : registry())
      if ((op.pipelines & want) && !(op.pipelines & LAB_ON_DEMAND))
        p.stages.push_back(stage_config(op.def.name));
    return p;
  }
  for (const Op& op : registry())
    if (op.def.lab_inputs && op.def.name == name) {
      p.stages.push_back(stage_config(op.def.name));
      return p;
    }
  std::string known;
  for (const auto& n : pipeline_names()) known += (known.empty() ? "" : ", ") + n;
  throw Error(ErrorKind::Usage, "unknown pipeline '" + name + "' (known: " + known + ")");
}

const Op* playground_of(const PipelineConfig& p) {
  if (p.stages.empty()) return nullptr;
  const Op* op = find_playground(p.stages[0].op);
  // A playground is its one stage, plus any live kernel added after it (stage "user").
  for (size_t k = 1; op && k < p.stages.size(); ++k)
    if (p.stages[k].op != "user") return nullptr;
  return op;
}

const Op* find_playground(const std::string& name) {
  for (const Op& op : registry())
    if (op.def.lab_inputs && op.def.name == name) return &op;
  return nullptr;
}

LabInputs make_lab_inputs(const Op& op, const std::string& size, uint64_t seed) {
  if (!op.def.lab_inputs) throw Error(ErrorKind::Usage, op.def.name + " is not a playground");
  const std::string spec = size.empty() ? op.def.lab_default_size : size;
  LabInputs in;
  in.size = spec;
  in.seed = seed;
  const LabSlots slots = op.def.lab_inputs(spec);
  std::vector<HostImage> imgs;
  for (const auto& [name, desc] : slots) {
    // A generated input lives in host memory as well as on the GPU: refuse what cannot fit.
    if (desc.bytes() > (size_t(4) << 30))
      throw Error(ErrorKind::Usage, op.def.name + " size " + spec + ": slot " + name + " (" +
                                        desc.str() + ") is over 4 GiB");
    imgs.emplace_back(desc);
  }
  op.def.lab_fill(seed, imgs);
  for (size_t k = 0; k < slots.size(); ++k)
    in.slots.emplace_back(slots[k].first, std::move(imgs[k]));
  return in;
}

std::string block_refusal(const VariantDef& v, Block b, const DeviceInfo* dev) {
  if (b.x < 1 || b.y < 1) return "a block needs at least one thread in x and y";
  const long long max_threads = dev && dev->present ? dev->max_threads_per_block : 1024;
  if (b.threads() > max_threads)
    return std::to_string(b.threads()) + " threads is over the " + std::to_string(max_threads) +
           "-thread limit of a CUDA block";
  bool allowed = false;
  std::string list;
  for (const Block& a : v.blocks) {
    allowed = allowed || a == b;
    list += (list.empty() ? "" : " ") + a.str();
  }
  if (!allowed)
    return "not a shape " + v.name + " is written or instantiated for (allowed: " + list + ")";
  if (v.smem && dev && dev->present && v.smem(b) > dev->smem_per_block)
    return "needs " + std::to_string(v.smem(b)) + " bytes of shared memory; the device gives " +
           std::to_string(dev->smem_per_block) + " per block";
  return "";
}

std::vector<ResolvedStage> resolve(const PipelineConfig& p, const DeviceInfo* dev) {
  std::vector<ResolvedStage> out;
  for (const StageConfig& s : p.stages) {
    const Op& op = s.custom ? *s.custom : find_op(s.op);
    ResolvedStage r;
    r.op = &op;
    r.custom = s.custom;
    r.math = s.math;
    r.enabled = s.enabled;
    if (s.variant.empty()) {
      r.variant = op.default_variant();
    } else {
      const int v = op.find_variant(s.variant);
      if (v < 0) {
        const std::string next = successor_of(op.def.name, s.variant);
        if (!next.empty())
          throw Error(ErrorKind::Usage, "variant '" + s.variant + "' of stage " + s.op +
                                            " was retired: its successor is " + next);
        std::string known;
        for (const auto& vd : op.def.variants) known += (known.empty() ? "" : ", ") + vd.name;
        throw Error(ErrorKind::Usage, "unknown variant '" + s.variant + "' of stage " + s.op +
                                          " (known: " + known + ")");
      }
      r.variant = size_t(v);
    }
    r.block = s.block.value_or(r.variant_def().default_block);
    const std::string why = block_refusal(r.variant_def(), r.block, dev);
    if (!why.empty())
      throw Error(ErrorKind::Usage, "block " + r.block.str() + " refused for " + s.op + "/" +
                                        r.variant_def().name + ": " + why);
    validate_params(s.op, op.def.params, s.params);
    r.params = s.params;
    out.push_back(std::move(r));
  }
  return out;
}

const std::vector<RetiredVariant>& retired_variants() {
  static const std::vector<RetiredVariant> table = {
      {"topk", "v13_letterboxed_front", "v3_selected_once", "1464c56", "detect"},
      {"topk", "v5_one_launch", "v5_in_flight", "4e25ac9"},
      {"topk", "v6_in_flight", "v5_in_flight", "4e25ac9"},
      {"topk", "v7_binned_rank", "v6_shared_select", "4e25ac9"},
      {"topk", "v8_shared_select", "v6_shared_select", "4e25ac9"},
      {"topk", "v9_listed_front", "v1_listed", "4e25ac9", "detect"},
      {"topk", "v10_counted_rank", "v2_counted_rank", "4e25ac9", "detect"},
      {"topk", "v11_pair_front", "v2_counted_rank", "4e25ac9", "detect"},
      {"topk", "v12_bucketed_count", "v3_selected_once", "4e25ac9", "detect"},
      {"topk", "v14_selected_once", "v3_selected_once", "4e25ac9", "detect"},
      {"topk", "v15_split_front", "v4_split_overlapped", "4e25ac9", "detect"},
      {"topk", "v16_overlapped", "v4_split_overlapped", "4e25ac9", "detect"},
      {"letterbox", "v8_staged", "v6_reuse_by_scale", "b158de2"},
  };
  return table;
}

namespace {
// The last entry of the chain from (op, name), or null if it was never retired.
const RetiredVariant* retired_entry(const std::string& op, const std::string& name) {
  const RetiredVariant* last = nullptr;
  std::string o = op, n = name;
  for (bool moved = true; moved;) {  // the table may chain: a successor retired in turn
    moved = false;
    for (const RetiredVariant& r : retired_variants())
      if (o == r.op && n == r.name) {
        last = &r, moved = true;
        o = r.successor_op ? r.successor_op : r.op, n = r.successor;
        break;
      }
  }
  return last;
}
}  // namespace

std::string successor_of(const std::string& op, const std::string& name) {
  const RetiredVariant* r = retired_entry(op, name);
  if (!r) return "";
  return r->successor_op && op != r->successor_op
             ? std::string(r->successor_op) + "/" + r->successor
             : std::string(r->successor);
}

std::vector<std::string> migrate_variants(PipelineConfig& p) {
  std::vector<std::string> notes;
  for (size_t i = 0; i < p.stages.size(); ++i) {
    StageConfig& s = p.stages[i];
    const Op* op = s.custom.get();
    if (!op)
      for (const Op& o : registry())
        if (o.def.name == s.op) op = &o;
    if (!op || s.variant.empty() || op->find_variant(s.variant) >= 0) continue;
    const RetiredVariant* r = retired_entry(op->def.name, s.variant);
    const std::string was = s.variant, stage = s.op;
    StageConfig* to = &s;
    const bool moved = r && r->successor_op && stage != r->successor_op;
    if (moved) {  // moved: its op's stage joins
      const MathMode math = s.math;
      const std::optional<Block> block = s.block;
      s.variant.clear(), s.block.reset();
      to = &stage_of(p, r->successor_op);  // may insert: `s` is not used past here
      to->variant = r->successor, to->math = math, to->block = block;
      notes.push_back(stage + ": " + was + " moved to stage " + r->successor_op + " as " +
                      r->successor + " (" + stage + " runs its default)");
    } else {
      to->variant = r && op->find_variant(r->successor) >= 0
                        ? r->successor
                        : op->def.variants[op->default_variant()].name;
      notes.push_back(stage + ": " + printable(was, 60) +
                      (r ? " was retired" : " is not a variant") + ", " + to->variant +
                      " runs instead");
    }
    const Op& to_op = moved ? find_op(to->op) : *op;
    if (to->block && !block_refusal(to_op.def.variants[size_t(to_op.find_variant(to->variant))],
                                    *to->block, nullptr)
                          .empty()) {
      notes.back() += " (at its default block; " + to->block->str() + " does not fit it)";
      to->block.reset();
    }
  }
  return notes;
}

bool can_add_stage(const PipelineConfig& p, const std::string& name) {
  const size_t at = registry_index(name);
  if (at == SIZE_MAX || playground_of(p)) return false;
  const Op& op = registry()[at];
  if (!(op.pipelines & LAB_ON_DEMAND)) return false;
  for (const auto& s : p.stages)
    if (s.op == name) return false;
  // An image pipeline that holds every default stage of the op's named pipelines.
  for (const Op& o : registry())
    if ((o.pipelines & op.pipelines & (LAB_KEYPOINTS | LAB_HARRIS)) &&
        !(o.pipelines & LAB_ON_DEMAND) &&
        std::none_of(p.stages.begin(), p.stages.end(),
                     [&](const StageConfig& s) { return s.op == o.def.name; }))
      return false;
  return true;
}

StageConfig& stage_of(PipelineConfig& p, const std::string& name) {
  for (auto& s : p.stages)
    if (s.op == name) return s;
  find_op(name);  // throws "unknown stage" listing the known ones
  if (!can_add_stage(p, name))
    throw Error(ErrorKind::Usage, "stage '" + name + "' is not in this pipeline");
  const size_t at = registry_index(name);
  size_t pos = 0;  // after the last stage that comes before it in ops.def
  for (size_t i = 0; i < p.stages.size(); ++i)
    if (registry_index(p.stages[i].op) < at) pos = i + 1;
  return *p.stages.insert(p.stages.begin() + std::ptrdiff_t(pos), stage_config(name));
}

bool remove_stage(PipelineConfig& p, const std::string& name) {
  for (auto it = p.stages.begin(); it != p.stages.end(); ++it)
    if (it->op == name && (find_op(name).pipelines & LAB_ON_DEMAND)) {
      p.stages.erase(it);
      return true;
    }
  return false;
}

std::optional<Block> parse_wxh(const std::string& s) {
  const auto x = s.find('x');
  if (x == std::string::npos || x == 0 || x + 1 == s.size()) return std::nullopt;
  if (!std::isdigit((unsigned char)s[0]) || !std::isdigit((unsigned char)s[x + 1]))
    return std::nullopt;  // strtol would accept blanks and signs
  char* end = nullptr;
  const long w = std::strtol(s.c_str(), &end, 10);
  if (end != s.c_str() + x) return std::nullopt;
  const long h = std::strtol(s.c_str() + x + 1, &end, 10);
  if (*end != '\0' || w < 1 || h < 1 || w > 1 << 20 || h > 1 << 20) return std::nullopt;
  return Block{int(w), int(h)};
}

void apply_variant(PipelineConfig& p, const std::string& spec) {
  const auto [stage, name] = split_eq(spec, "STAGE=VARIANT, e.g. blur=v2_separable");
  stage_named(p, stage).variant = name;
}

void apply_block(PipelineConfig& p, const std::string& spec) {
  const auto [stage, wxh] = split_eq(spec, "STAGE=WxH, e.g. blur=32x8");
  const auto b = parse_wxh(wxh);
  if (!b) throw Error(ErrorKind::Usage, "malformed block '" + wxh + "': expected WxH, e.g. 32x8");
  stage_named(p, stage).block = *b;
}

void apply_math(PipelineConfig& p, const std::string& spec) {
  if (auto m = parse_math(spec)) {
    for (auto& s : p.stages) s.math = *m;
    return;
  }
  if (spec.find('=') == std::string::npos)
    throw Error(ErrorKind::Usage,
                "unknown math mode '" + spec + "' (precise or fast, or STAGE=MODE)");
  const auto [stage, mode] = split_eq(spec, "precise, fast, or STAGE=precise|fast");
  const auto m = parse_math(mode);
  if (!m) throw Error(ErrorKind::Usage, "unknown math mode '" + mode + "' (precise or fast)");
  stage_named(p, stage).math = *m;
}

void apply_param(PipelineConfig& p, const std::string& spec) {
  const auto [key, value] = split_eq(spec, "STAGE.NAME=VALUE, e.g. harris.k=0.05");
  const auto dot = key.find('.');
  if (dot == std::string::npos)
    throw Error(ErrorKind::Usage, "malformed '" + spec + "': expected STAGE.NAME=VALUE");
  char* end = nullptr;
  const double v = std::strtod(value.c_str(), &end);
  if (*end != '\0')
    throw Error(ErrorKind::Usage, "parameter value '" + value + "' is not a number");
  StageConfig& s = stage_named(p, key.substr(0, dot));
  const std::string name = key.substr(dot + 1);
  ParamMap one{{name, v}};
  validate_params(s.op, find_op(s.op).def.params, one);
  s.params[name] = v;
}

void apply_size(PipelineConfig& p, const std::string& wxh) {
  const auto b = parse_wxh(wxh);
  if (!b)
    throw Error(ErrorKind::Usage, "malformed size '" + wxh + "': expected WxH, e.g. 1280x736");
  apply_param(p, "letterbox.width=" + std::to_string(b->x));
  apply_param(p, "letterbox.height=" + std::to_string(b->y));
}

const std::vector<std::string>& fastest_variants() {
  static const std::vector<std::string> v = {"letterbox=v7_identity", "nms=v5_fused_front",
                                             "detect=v4_split_overlapped", "l2norm=v5_overlapped"};
  return v;
}

void apply_fastest(PipelineConfig& p) {
  for (const std::string& v : fastest_variants()) apply_variant(p, v);
}

}  // namespace lab
