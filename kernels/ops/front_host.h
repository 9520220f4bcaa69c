// The host side of the fused dense front (nms/v5_fused_front, detect): the
// parameters it takes from the stages it does the work of, its grid, and the references it
// borrows from them.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "common.h"

namespace lab::ops {

// What the front borrows from the stages it does the work of: their CPU references (exactly
// what checks each stage on its own) and parameter specs. nms_op and detect_op take them from
// the ops registered before them (OpLookup), once, when the registry is built.
struct FrontStages {
  ReferenceFn blur = nullptr, sobel = nullptr, harris = nullptr;
  std::vector<ParamSpec> harris_params, nms_params;
};
inline FrontStages& front_stages() {
  static FrontStages s;
  return s;
}
inline void borrow_front_stages(const OpLookup& earlier) {
  FrontStages& s = front_stages();
  s.blur = earlier.op("blur").reference;
  s.sobel = earlier.op("sobel").reference;
  s.harris = earlier.op("harris").reference;
  s.harris_params = earlier.op("harris").params;
}

// A borrowed CPU reference on these images.
inline void run_reference(ReferenceFn reference, std::vector<ImageRef> in,
                          std::vector<ImageRef> out, const ParamMap& params) {
  StageArgs a;
  a.in = std::move(in), a.out = std::move(out), a.params = params;
  reference(a);
}

// Parameter `name` of the fused stage `stage` (harris or nms): its "stage.name" value in
// `params`, else the default in that op's parameter spec (converted as decode_params does).
inline float fused_param(const ParamMap& params, const char* stage, const char* name) {
  const ParamMap p = fused_params(params, stage);
  const auto it = p.find(name);
  if (it != p.end()) return static_cast<float>(it->second);
  const std::string st = stage;
  const FrontStages& f = front_stages();
  const std::vector<ParamSpec>* specs = st == "harris" ? &f.harris_params
                                        : st == "nms"  ? &f.nms_params
                                                       : nullptr;
  if (specs)  // by reference: this runs at every launch
    for (const ParamSpec& s : *specs)
      if (s.name == name) return static_cast<float>(s.def);
  throw Error(ErrorKind::Internal, st + " has no borrowed parameter " + name);
}

// harris's k for the front's kernel: the harris stage's ("harris.k"), else harris's default.
inline float front_k(const ParamMap& params) {
  return fused_param(params, "harris", "k");
}

// The front's grid: block.x / 32 warps side by side, each on `cols` (24) output columns of
// `rows` (16) rows.
inline dim3 front_grid(int width, int height, Block block, int cols, int rows) {
  const int c = cols * int(block.x / 32);
  return dim3(unsigned((width + c - 1) / c), unsigned((height + rows - 1) / rows));
}

}  // namespace lab::ops
