#include "registry.h"

namespace lab {
namespace ops::precise {
OpDef letterbox_op();
OpDef blur_op();
OpDef sobel_op();
OpDef harris_op();
OpDef nms_op();
OpDef topk_op();
OpDef sample_op();
OpDef l2norm_op();
OpDef matmul_op();
OpDef reduce_op();
OpDef scan_op();
OpDef sort_op();
OpDef transpose_op();
OpDef access_op();
OpDef branch_op();
}  // namespace ops::precise
namespace ops::fast {
OpDef letterbox_op();
OpDef blur_op();
OpDef sobel_op();
OpDef harris_op();
OpDef nms_op();
OpDef topk_op();
OpDef sample_op();
OpDef l2norm_op();
OpDef matmul_op();
OpDef reduce_op();
OpDef scan_op();
OpDef sort_op();
OpDef transpose_op();
OpDef access_op();
OpDef branch_op();
}  // namespace ops::fast

namespace {

Op merge(OpDef precise, const OpDef& fast) {
  if (precise.variants.size() != fast.variants.size())
    throw Error(ErrorKind::Internal, "op " + precise.name + ": math passes disagree");
  Op op{std::move(precise), {}};
  for (size_t i = 0; i < fast.variants.size(); ++i) {
    if (fast.variants[i].name != op.def.variants[i].name)
      throw Error(ErrorKind::Internal, "op " + op.def.name + ": math passes disagree");
    op.fast_launch.push_back(fast.variants[i].launch);
  }
  return op;
}

}  // namespace

// The pipeline order, then the playgrounds. To add an op: its file in kernels/ops/ (or
// kernels/lab/), CMake's LAB_OPS, one line here.
const std::vector<Op>& registry() {
  static const std::vector<Op> ops = {
      merge(ops::precise::letterbox_op(), ops::fast::letterbox_op()),
      merge(ops::precise::blur_op(), ops::fast::blur_op()),
      merge(ops::precise::sobel_op(), ops::fast::sobel_op()),
      merge(ops::precise::harris_op(), ops::fast::harris_op()),
      merge(ops::precise::nms_op(), ops::fast::nms_op()),
      merge(ops::precise::topk_op(), ops::fast::topk_op()),
      merge(ops::precise::sample_op(), ops::fast::sample_op()),
      merge(ops::precise::l2norm_op(), ops::fast::l2norm_op()),
      // The playgrounds (kernels/lab/), each a pipeline of its own.
      merge(ops::precise::matmul_op(), ops::fast::matmul_op()),
      merge(ops::precise::reduce_op(), ops::fast::reduce_op()),
      merge(ops::precise::scan_op(), ops::fast::scan_op()),
      merge(ops::precise::sort_op(), ops::fast::sort_op()),
      merge(ops::precise::transpose_op(), ops::fast::transpose_op()),
      merge(ops::precise::access_op(), ops::fast::access_op()),
      merge(ops::precise::branch_op(), ops::fast::branch_op()),
  };
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
  throw Error(ErrorKind::Usage, "unknown stage '" + name + "' (known: " + known + ")");
}

}  // namespace lab
