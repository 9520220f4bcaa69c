#include "probe.h"

#include <cstdio>

namespace lab::ui {

std::string probe_text(const HostImage& out, const HostImage* ref, int x, int y) {
  const ImageDesc& d = out.desc();
  if (x < 0 || y < 0 || x >= d.width || y >= d.height) return "";
  char buf[256];
  if (d.type == PixelType::U8) {
    const auto v = out.view<uint8_t>();
    if (d.channels >= 3)
      std::snprintf(buf, sizeof buf, "(%d, %d)\nB G R %d %d %d", x, y, v.at(x, y, 0), v.at(x, y, 1),
                    v.at(x, y, 2));
    else
      std::snprintf(buf, sizeof buf, "(%d, %d)\nvalue %d", x, y, v.at(x, y));
    return buf;
  }
  return probe_value_text(float(pixel_value(out.ref(), x, y)),
                          ref && ref->desc() == d ? ref : nullptr, x, y);
}

std::string probe_value_text(float g, const HostImage* ref, int x, int y) {
  char buf[256];
  if (ref && x < ref->desc().width && y < ref->desc().height) {
    const float r = float(pixel_value(ref->ref(), x, y));
    std::snprintf(buf, sizeof buf, "(%d, %d)\noutput     %.7g\nreference  %.7g\ndifference %.3g", x,
                  y, g, r, double(g) - double(r));
  } else {
    std::snprintf(buf, sizeof buf, "(%d, %d)\noutput %.7g\n(no reference yet: 'compare now')", x, y,
                  g);
  }
  return buf;
}

std::vector<float> occupancy_curve(const ArchLimits& arch, int regs, size_t smem_per_block) {
  std::vector<float> curve;
  for (int threads = 32; threads <= 1024; threads += 32) {
    const OccupancyEstimate e = estimate_occupancy(arch, {threads, regs, smem_per_block, 0});
    curve.push_back(e.refusal.empty() ? float(e.occupancy) : 0.0f);
  }
  return curve;
}

}  // namespace lab::ui
