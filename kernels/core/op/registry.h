// The kernel registry: one explicit, ordered list of ops (kernels/core/op/ops.def, expanded in
// registry.cpp). Tests, CLI and GUI enumerate it, so a new op needs its own file and one line.
#pragma once

#include <string>
#include <vector>

#include "op.h"

namespace lab {

// The named image pipelines an op is a stage of (ops.def). LAB_ON_DEMAND: the op is not in the
// pipeline's default stages; naming it (a variant, block, math mode or parameter, a preset, the
// Pipeline panel) adds its stage in ops.def order.
constexpr unsigned LAB_KEYPOINTS = 1, LAB_HARRIS = 2, LAB_ON_DEMAND = 4;

struct Op {
  OpDef def;                            // description and precise launchers
  std::vector<LaunchFn> fast_launch;    // the same variants compiled with --use_fast_math
  unsigned pipelines = 0;               // LAB_KEYPOINTS | LAB_HARRIS | LAB_ON_DEMAND (ops.def)
  bool live = false;                    // a live kernel may replace it (float planes only)
  std::vector<std::string> test_sizes;  // a playground's odd sizes for the GPU sweep

  LaunchFn launcher(size_t variant, MathMode m) const {
    return m == MathMode::Fast ? fast_launch[variant] : def.variants[variant].launch;
  }
  const Tolerance& tolerance(MathMode m) const {
    return m == MathMode::Fast ? def.tol_fast : def.tol_precise;
  }
  // Index of the named variant, or -1.
  int find_variant(const std::string& name) const;
  // The variant a pipeline uses unless told otherwise: the op's choice, else the last one.
  size_t default_variant() const {
    const int v = def.default_variant.empty() ? -1 : find_variant(def.default_variant);
    return v >= 0 ? size_t(v) : def.variants.size() - 1;
  }
};

const std::vector<Op>& registry();
// Throws Error(Usage) listing the known ops.
const Op& find_op(const std::string& name);

}  // namespace lab
