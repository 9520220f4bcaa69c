// Small helpers shared by the op files (host-safe).
#pragma once

#include <string>
#include <vector>

#include "op.h"

namespace lab::ops {

// Border replicate on the CPU: clamp an index into [0, n).
inline int clamp_idx(int v, int n) { return v < 0 ? 0 : (v >= n ? n - 1 : v); }

// Shape rule of a plane -> plane filter: one float plane in, the same out.
inline ImageDesc require_f32_plane(const char* op, const ImageDesc& in) {
  if (in.type != PixelType::F32 || in.channels != 1)
    throw Error(ErrorKind::Data, std::string(op) + ": input must be a float plane, got " + in.str());
  if (in.empty()) throw Error(ErrorKind::Data, std::string(op) + ": input is empty");
  return in;
}

}  // namespace lab::ops
