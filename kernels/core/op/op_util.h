// Small helpers of the op files, pipeline stages and playgrounds alike (host-safe).
#pragma once

#include <string>
#include <vector>

#include "op.h"

namespace lab::ops {

// Border replicate on the CPU: clamp an index into [0, n).
inline int clamp_idx(int v, int n) {
  return v < 0 ? 0 : (v >= n ? n - 1 : v);
}

// Shape rule of a plane -> plane filter: one float plane in, the same out.
inline ImageDesc require_f32_plane(const char* op, const ImageDesc& in) {
  if (in.type != PixelType::F32 || in.channels != 1)
    throw Error(ErrorKind::Data,
                std::string(op) + ": input must be a float plane, got " + in.str());
  if (in.empty()) throw Error(ErrorKind::Data, std::string(op) + ": input is empty");
  return in;
}

// Blocks whose warps span 32 consecutive x of one row (what warp-shuffle row kernels need).
inline std::vector<Block> warp_rows_blocks() {
  return {{32, 4}, {32, 8}, {64, 4}, {32, 16}, {64, 2}, {128, 2}, {128, 1}, {256, 1}};
}

// "Edit a copy" for a variant whose work is one kernel launch: the call user_kernel makes (see
// VariantDef::live_call), its outputs per thread in x and y, and whether it has launch bounds.
inline void set_live_copy(OpDef& op, const std::string& variant, const std::string& call,
                          int px = 1, int rows = 1, bool bounds = false) {
  for (VariantDef& v : op.variants)
    if (v.name == variant) {
      v.live_call = call, v.live_px = px, v.live_rows = rows, v.live_bounds = bounds;
      return;
    }
  throw Error(ErrorKind::Internal, op.name + ": no variant " + variant + " to copy");
}

}  // namespace lab::ops
