// What the image pipeline's op files share beyond kernels/core/op/op_util.h (host-safe).
#pragma once

#include "op_util.h"

namespace lab::ops {

// Bounds shared by an op and a fused variant that does its work (nms/v5_fused_front holds its
// blur plane to blur's bound and its Harris responses to harris's): blur.cu and harris.cu give
// their reasons. Fast math changes neither.
inline constexpr Tolerance kBlurTolerance{1e-7, 4e-6};
inline constexpr Tolerance kHarrisTolerance{1e-12, 1e-5};

}  // namespace lab::ops
