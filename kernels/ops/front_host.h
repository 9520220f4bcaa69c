// The host side of the fused dense front (nms/v5_fused_front, detect): the
// parameters it takes from the stages it does the work of, its grid, and the references it
// borrows from the registry.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "common.h"
#include "registry.h"

namespace lab::ops {

// Op `name`'s CPU reference, the registry's (exactly what checks that stage on its own).
inline void run_reference(const char* name, std::vector<ImageRef> in, std::vector<ImageRef> out,
                          const ParamMap& params) {
  StageArgs a;
  a.in = std::move(in), a.out = std::move(out), a.params = params;
  find_op(name).def.reference(a);
}

// Parameter `name` of the fused stage `stage`: its "stage.name" value in `params`, else the
// default in that op's parameter spec (converted as decode_params does).
inline float fused_param(const ParamMap& params, const char* stage, const char* name) {
  const ParamMap p = fused_params(params, stage);
  const auto it = p.find(name);
  if (it != p.end()) return static_cast<float>(it->second);
  for (const ParamSpec& s : find_op(stage).def.params)
    if (s.name == name) return static_cast<float>(s.def);
  throw Error(ErrorKind::Internal, std::string(stage) + " has no parameter " + name);
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
