// Colormaps: float planes to RGBA8 for display. Pure functions, tested on the CPU.
#pragma once

#include <cstdint>
#include <vector>

#include "image.h"

namespace lab::ui {

enum class Colormap { Gray, Viridis, Diverging };
const char* colormap_name(Colormap c);

struct Range {
  float lo = 0, hi = 1;
};

// The range of the finite values of a float image (all channels); {0, 1} when there are none.
Range auto_range(const ImageRef& img);

// A long one-row array (a playground's reduce, scan or sort data) folded into rows so that it
// fits a texture: about square (sqrt(n) rounded up to 64 wide, at most 16384 rows); the last
// partial row is not shown. Other images (and arrays of up to 4096) are returned as they are.
// The data must be contiguous (one row is).
ImageRef display_view(const ImageRef& img);
// Symmetric range [-m, m], m = max |value|, for signed maps (gradients, Harris, differences).
Range symmetric_range(const ImageRef& img);

// One value to RGBA8. Values outside the range clamp; NaN shows magenta, so an unwritten
// (poisoned) pixel is visible.
uint32_t map_value(float v, Range r, Colormap c);

// A whole image to RGBA8, width x height, rows packed. 8-bit images show as they are (gray or
// BGR -> RGB); float planes through the colormap.
std::vector<uint32_t> to_rgba(const ImageRef& img, Range r, Colormap c);

}  // namespace lab::ui
