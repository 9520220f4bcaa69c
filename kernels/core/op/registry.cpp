#include "registry.h"
#include "printable.h"

// The op list; a test build names another that includes this one and adds an op
// (tests/toy/toy_ops.def).
#ifndef LAB_OPS_DEF
#define LAB_OPS_DEF "ops.def"
#endif

namespace lab {
// Each op file defines <name>_op() in both math passes (kernels/core/op/ops.def lists them).
#define LAB_OP(name, ...) OpDef name##_op(const OpLookup& earlier);
#define LAB_PLAYGROUND(name, ...) OpDef name##_op(const OpLookup& earlier);
namespace ops::precise {
#include LAB_OPS_DEF
}  // namespace ops::precise
namespace ops::fast {
#include LAB_OPS_DEF
}  // namespace ops::fast
#undef LAB_OP
#undef LAB_PLAYGROUND

namespace {

Op merge(OpDef precise, const OpDef& fast) {
  if (precise.variants.size() != fast.variants.size())
    throw Error(ErrorKind::Internal, "op " + precise.name + ": math passes disagree");
  Op op;
  op.def = std::move(precise);
  for (size_t i = 0; i < fast.variants.size(); ++i) {
    if (fast.variants[i].name != op.def.variants[i].name)
      throw Error(ErrorKind::Internal, "op " + op.def.name + ": math passes disagree");
    op.fast_launch.push_back(fast.variants[i].launch);
  }
  return op;
}

}  // namespace

namespace {
std::vector<std::string> split_sizes(const char* sizes) {
  std::vector<std::string> out;
  std::string cur;
  for (const char* c = sizes; *c; ++c) {
    if (*c == ' ') {
      if (!cur.empty()) out.push_back(cur), cur.clear();
    } else {
      cur += *c;
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

Op entry(OpDef precise, const OpDef& fast, unsigned pipelines, bool live, const char* test_sizes) {
  Op op = merge(std::move(precise), fast);
  op.pipelines = pipelines;
  op.live = live;
  op.test_sizes = split_sizes(test_sizes);
  return op;
}

// What an op file's <name>_op() is handed: the ops registered so far.
class Earlier final : public OpLookup {
 public:
  explicit Earlier(const std::vector<Op>& ops) : ops_(ops) {}
  const OpDef& op(const std::string& name) const override {
    for (const Op& o : ops_)
      if (o.def.name == name) return o.def;
    throw Error(ErrorKind::Internal,
                "an op borrows from '" + name + "', which ops.def does not register before it");
  }

 private:
  const std::vector<Op>& ops_;
};
}  // namespace

// ops.def's order: the pipeline's stages, then the playgrounds.
const std::vector<Op>& registry() {
  static const std::vector<Op> ops = [] {
    std::vector<Op> v;
    const Earlier earlier(v);
#define LAB_OP(name, pipelines, live)                                                           \
  v.push_back(entry(ops::precise::name##_op(earlier), ops::fast::name##_op(earlier), pipelines, \
                    live, ""));
#define LAB_PLAYGROUND(name, live, sizes) \
  v.push_back(                            \
      entry(ops::precise::name##_op(earlier), ops::fast::name##_op(earlier), 0, live, sizes));
#include LAB_OPS_DEF
#undef LAB_OP
#undef LAB_PLAYGROUND
    return v;
  }();
  return ops;
}

int Op::find_variant(const std::string& name) const {
  for (size_t i = 0; i < def.variants.size(); ++i)
    if (def.variants[i].name == name) return int(i);
  return -1;
}

const Op& find_op(const std::string& name) {
  std::string known;
  for (const Op& op : registry()) {
    if (op.def.name == name) return op;
    known += (known.empty() ? "" : ", ") + op.def.name;
  }
  throw Error(ErrorKind::Usage, "unknown stage '" + printable(name) + "' (known: " + known + ")");
}

}  // namespace lab
