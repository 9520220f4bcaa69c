#include "diff.h"

#include <cmath>
#include <limits>

#include "check.h"

namespace lab {

namespace {
template <typename T>
double value_at(const HostImage& img, int x, int y, int c) {
  return double(img.view<T>().at(x, y, c));
}
}  // namespace

DiffStats diff_images(const HostImage& got, const HostImage& ref, const Tolerance& tol,
                      const std::string& slot) {
  if (got.desc() != ref.desc())
    throw Error(ErrorKind::Internal,
                "diff: output " + got.desc().str() + " vs reference " + ref.desc().str());
  const ImageDesc& d = ref.desc();
  const bool f32 = d.type == PixelType::F32;
  auto at = [&](const HostImage& img, int x, int y, int c) {
    return f32 ? value_at<float>(img, x, y, c) : value_at<uint8_t>(img, x, y, c);
  };
  DiffStats s;
  for (int y = 0; y < d.height; ++y)
    for (int x = 0; x < d.width; ++x)
      for (int c = 0; c < d.channels; ++c)
        s.ref_max_abs = std::max(s.ref_max_abs, std::abs(at(ref, x, y, c)));
  s.limit = tol.limit(s.ref_max_abs);
  double sum_abs = 0, sum_sq = 0;
  for (int y = 0; y < d.height; ++y)
    for (int x = 0; x < d.width; ++x)
      for (int c = 0; c < d.channels; ++c) {
        const double g = at(got, x, y, c), r = at(ref, x, y, c);
        const double e = std::abs(g - r);
        ++s.count;
        if (!std::isfinite(g)) ++s.nans;
        if (!(e <= s.limit)) {  // NaN fails too
          if (s.over++ == 0)
            s.bad_slot = slot, s.bad_x = x, s.bad_y = y, s.bad_c = c, s.bad_got = g, s.bad_ref = r;
        }
        if (std::isfinite(e)) {
          s.max_abs = std::max(s.max_abs, e);
          sum_abs += e;
          sum_sq += e * e;
        } else {
          s.max_abs = std::numeric_limits<double>::infinity();
        }
      }
  s.mean_abs = s.count ? sum_abs / double(s.count) : 0;
  const double mse = s.count ? sum_sq / double(s.count) : 0;
  const double peak = s.ref_max_abs > 0 ? s.ref_max_abs : 1.0;
  s.psnr = s.nans ? 0
                  : (mse > 0 ? 10.0 * std::log10(peak * peak / mse)
                             : std::numeric_limits<double>::infinity());
  return s;
}

void merge_diff(DiffStats& into, const DiffStats& o) {
  if (into.count == 0) {
    into = o;
    return;
  }
  const size_t n = into.count + o.count;
  // PSNR: combine the mean squared errors over the same peak (the larger of the two).
  auto mse_of = [](const DiffStats& s) {
    const double peak = s.ref_max_abs > 0 ? s.ref_max_abs : 1.0;
    return std::isinf(s.psnr) ? 0.0 : peak * peak / std::pow(10.0, s.psnr / 10.0);
  };
  const double mse = (mse_of(into) * double(into.count) + mse_of(o) * double(o.count)) / double(n);
  into.mean_abs = (into.mean_abs * double(into.count) + o.mean_abs * double(o.count)) / double(n);
  into.max_abs = std::max(into.max_abs, o.max_abs);
  into.ref_max_abs = std::max(into.ref_max_abs, o.ref_max_abs);
  into.limit = std::max(into.limit, o.limit);
  if (into.over == 0 && o.over > 0) {
    into.bad_slot = o.bad_slot, into.bad_x = o.bad_x, into.bad_y = o.bad_y, into.bad_c = o.bad_c;
    into.bad_got = o.bad_got, into.bad_ref = o.bad_ref;
  }
  into.over += o.over;
  into.nans += o.nans;
  into.count = n;
  const double peak = into.ref_max_abs > 0 ? into.ref_max_abs : 1.0;
  into.psnr = into.nans ? 0
                        : (mse > 0 ? 10.0 * std::log10(peak * peak / mse)
                                   : std::numeric_limits<double>::infinity());
}

}  // namespace lab
