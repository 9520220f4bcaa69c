#include "colormap.h"

#include <algorithm>
#include <cmath>

namespace lab::ui {

namespace {

uint32_t rgba(float r, float g, float b) {
  auto c = [](float v) { return uint32_t(std::lround(std::clamp(v, 0.0f, 1.0f) * 255.0f)); };
  return c(r) | (c(g) << 8) | (c(b) << 16) | 0xFF000000u;  // little-endian RGBA in memory
}

// Viridis, sampled at 9 points (matplotlib's table), linearly interpolated.
const float kViridis[9][3] = {
    {0.267f, 0.005f, 0.329f}, {0.279f, 0.175f, 0.483f}, {0.230f, 0.322f, 0.546f},
    {0.173f, 0.449f, 0.558f}, {0.128f, 0.567f, 0.551f}, {0.154f, 0.680f, 0.504f},
    {0.365f, 0.789f, 0.383f}, {0.678f, 0.864f, 0.190f}, {0.993f, 0.906f, 0.144f}};

}  // namespace

const char* colormap_name(Colormap c) {
  switch (c) {
    case Colormap::Gray:
      return "gray";
    case Colormap::Viridis:
      return "viridis";
    case Colormap::Diverging:
      return "diverging";
  }
  return "?";
}

Range auto_range(const ImageRef& img) {
  float lo = INFINITY, hi = -INFINITY;
  for (int y = 0; y < img.desc.height; ++y)
    for (int x = 0; x < img.desc.width; ++x)
      for (int c = 0; c < img.desc.channels; ++c) {
        const float v = float(pixel_value(img, x, y, c));
        if (std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
      }
  if (!(lo <= hi)) return {0, 1};
  if (lo == hi) return {lo, lo + 1};
  return {lo, hi};
}

ImageRef display_view(const ImageRef& img) {
  const ImageDesc& d = img.desc;
  if (d.height != 1 || d.width <= 4096) return img;
  // Near square: sqrt(n) rounded up to 64, so 2^24 elements show as 4096 x 4096.
  int w = (int(std::ceil(std::sqrt(double(d.width)))) + 63) / 64 * 64;
  w = std::max(w, (d.width / 16384 + 63) / 64 * 64);  // at most 16384 rows
  ImageRef v = img;
  v.desc.width = w;
  v.desc.height = d.width / w;
  v.pitch = size_t(w) * d.channels * pixel_type_bytes(d.type);
  return v;
}

Range symmetric_range(const ImageRef& img) {
  const Range r = auto_range(img);
  const float m = std::max(std::abs(r.lo), std::abs(r.hi));
  return m > 0 ? Range{-m, m} : Range{-1, 1};
}

uint32_t map_value(float v, Range r, Colormap c) {
  if (std::isnan(v)) return rgba(1, 0, 1);
  const float span = r.hi - r.lo;
  const float t = span > 0 ? std::clamp((v - r.lo) / span, 0.0f, 1.0f) : (v >= r.hi ? 1.0f : 0.0f);
  switch (c) {
    case Colormap::Gray:
      return rgba(t, t, t);
    case Colormap::Viridis: {
      const float p = t * 8.0f;
      const int i = std::min(int(p), 7);
      const float f = p - float(i);
      const float* a = kViridis[i];
      const float* b = kViridis[i + 1];
      return rgba(a[0] + f * (b[0] - a[0]), a[1] + f * (b[1] - a[1]), a[2] + f * (b[2] - a[2]));
    }
    case Colormap::Diverging: {  // blue - white - red around the middle of the range
      const float s = 2.0f * t - 1.0f;
      return s < 0 ? rgba(1 + s, 1 + s, 1) : rgba(1, 1 - s, 1 - s);
    }
  }
  return 0;
}

std::vector<uint32_t> to_rgba(const ImageRef& img, Range r, Colormap c) {
  const ImageDesc& d = img.desc;
  std::vector<uint32_t> out(size_t(d.width) * d.height);
  for (int y = 0; y < d.height; ++y)
    for (int x = 0; x < d.width; ++x) {
      uint32_t& px = out[size_t(y) * d.width + x];
      if (d.type == PixelType::U8) {
        const auto v = img.view<const uint8_t>();
        if (d.channels >= 3) {
          const float k = 1.0f / 255.0f;
          px = rgba(v.at(x, y, 2) * k, v.at(x, y, 1) * k, v.at(x, y, 0) * k);  // BGR -> RGB
        } else {
          const float g = v.at(x, y) / 255.0f;
          px = rgba(g, g, g);
        }
      } else {
        px = map_value(float(pixel_value(img, x, y)), r, c);
      }
    }
  return out;
}

}  // namespace lab::ui
