// The order nms v6's (the pair front's) blocks run in: the grid's blocks (gx x gy), in launch
// order, are first the interior ones, columns [bx0, bx1) of rows [by0, by1) (no border within
// their reach: the kernel's non-EDGE path), then the others (its EDGE path), so that for most of
// the launch an SM runs one of the two unrolled paths, not both. The pair kernel's two paths are
// twice v5's code, and run side by side (a border block in every row of blocks) they missed in
// the instruction cache (ncu: the top stall at 3840x2160). nms v5 runs the same order rotated,
// the border blocks first (front_block_ring_first). Host and device code, no standard library (a
// CPU test checks that both orders are permutations of the grid, interior or border first).
#pragma once

#include "image_view.h"  // LAB_HD

namespace lab::ops {

// All zero but gx, gy: launch order.
struct FrontOrder {
  int gx = 0, gy = 0, bx0 = 0, bx1 = 0, by0 = 0, by1 = 0;
};

// The order for a grid of gx x gy blocks over a w x h image: blocks of `warps` warps, each warp
// on `cols` output columns of `rows` rows, its first lane `apron_cols` columns left of its first
// output; a strip reads `halo` rows above and below, blur `reach` columns either side. A block
// is interior when none of that crosses a border (the kernel's `edge` test, negated).
inline FrontOrder front_order(int w, int h, int warps, int cols, int rows, int apron_cols, int halo,
                              int reach, unsigned gx, unsigned gy) {
  FrontOrder o;
  o.gx = int(gx), o.gy = int(gy);
  auto edge_y = [&](int by) { return by == 0 || by * rows + rows + halo > h; };
  auto edge_x = [&](int bx) {
    const int block_x = bx * warps * cols - apron_cols;
    return block_x - reach < 0 || block_x + warps * cols + 2 * apron_cols - 1 + reach > w - 1;
  };
  int bx0 = 0, by0 = 0;
  while (bx0 < o.gx && edge_x(bx0)) ++bx0;
  while (by0 < o.gy && edge_y(by0)) ++by0;
  int bx1 = bx0, by1 = by0;
  while (bx1 < o.gx && !edge_x(bx1)) ++bx1;
  while (by1 < o.gy && !edge_y(by1)) ++by1;
  if (bx1 > bx0 && by1 > by0) o.bx0 = bx0, o.bx1 = bx1, o.by0 = by0, o.by1 = by1;
  return o;
}

// The block the i-th launched one (i = blockIdx.y gx + blockIdx.x) is in `o`'s order: the
// interior rectangle row by row, then the rows above it, the columns either side of it, and the
// rows below it.
LAB_HD void front_block(const FrontOrder& o, int i, int& bx, int& by) {
  const int iw = o.bx1 - o.bx0, ih = o.by1 - o.by0;
  if (i < iw * ih) {
    bx = o.bx0 + i % iw, by = o.by0 + i / iw;
    return;
  }
  i -= iw * ih;
  if (i < o.by0 * o.gx) {
    bx = i % o.gx, by = i / o.gx;
    return;
  }
  i -= o.by0 * o.gx;
  const int side = o.gx - iw;
  if (i < side * ih) {
    const int c = i % side;
    bx = c < o.bx0 ? c : o.bx1 + c - o.bx0, by = o.by0 + i / side;
    return;
  }
  i -= side * ih;
  bx = i % o.gx, by = o.by1 + i / o.gx;
}

// The same order rotated to start at the ring: the blocks outside the interior rectangle first
// (the rows above it, the columns either side of it, the rows below it), then the interior (nms
// v5, whose border blocks are the slower ones: front_kernels.cuh).
LAB_HD void front_block_ring_first(const FrontOrder& o, int i, int& bx, int& by) {
  const int n = o.gx * o.gy, interior = (o.bx1 - o.bx0) * (o.by1 - o.by0);
  i += interior;
  front_block(o, i < n ? i : i - n, bx, by);
}

}  // namespace lab::ops
