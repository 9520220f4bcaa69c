#include "diff.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "check.h"
#include "op.h"

namespace lab {

DiffStats diff_images(const HostImage& got, const HostImage& ref, const Tolerance& tol,
                      const std::string& slot) {
  if (got.desc() != ref.desc())
    throw Error(ErrorKind::Internal,
                "diff: output " + got.desc().str() + " vs reference " + ref.desc().str());
  const ImageDesc& d = ref.desc();
  auto at = [](const HostImage& img, int x, int y, int c) {
    return pixel_value(img.ref(), x, y, c);
  };
  double ref_max_abs = 0;
  for (int y = 0; y < d.height; ++y)
    for (int x = 0; x < d.width; ++x)
      for (int c = 0; c < d.channels; ++c)
        ref_max_abs = std::max(ref_max_abs, std::abs(at(ref, x, y, c)));
  const double limit = tol.limit(ref_max_abs);
  DiffAccumulator acc;
  for (int y = 0; y < d.height; ++y)
    for (int x = 0; x < d.width; ++x)
      for (int c = 0; c < d.channels; ++c)
        acc.add(at(got, x, y, c), at(ref, x, y, c), limit, slot, x, y, c);
  DiffStats s = acc.finish();
  s.limit = limit;  // also when nothing was compared
  return s;
}

void DiffAccumulator::add(double g, double r, double limit, const std::string& slot, int x, int y,
                          int c) {
  DiffStats& s = m_s;
  const double e = std::abs(g - r);
  ++s.count;
  s.ref_max_abs = std::max(s.ref_max_abs, std::abs(r));
  s.limit = std::max(s.limit, limit);
  if (!std::isfinite(g)) ++s.nans;
  if (!(e <= limit)) {  // NaN fails too
    if (s.over++ == 0)
      s.bad_slot = slot, s.bad_x = x, s.bad_y = y, s.bad_c = c, s.bad_got = g, s.bad_ref = r;
  }
  if (std::isfinite(e)) {
    s.max_abs = std::max(s.max_abs, e);
    m_sum_abs += e;
    m_sum_sq += e * e;
  } else {
    s.max_abs = std::numeric_limits<double>::infinity();
  }
}

DiffStats DiffAccumulator::finish() {
  DiffStats s = m_s;
  s.mean_abs = s.count ? m_sum_abs / double(s.count) : 0;
  const double mse = s.count ? m_sum_sq / double(s.count) : 0;
  const double peak = s.ref_max_abs > 0 ? s.ref_max_abs : 1.0;
  s.psnr = s.nans ? 0
                  : (mse > 0 ? 10.0 * std::log10(peak * peak / mse)
                             : std::numeric_limits<double>::infinity());
  return s;
}

std::string DiffStats::detail() const {
  std::string s;
  char buf[160];
  if (has_set) {
    std::snprintf(buf, sizeof buf, "P %.3f R %.3f %zu/%zu kp, score err %.3g", precision(),
                  recall(), set_got, set_ref, max_score_err);
    s += buf;
  }
  if (has_cosine) {
    std::snprintf(buf, sizeof buf, "%scos min %.6f mean %.6f", s.empty() ? "" : ", ", cos_min,
                  cos_mean);
    s += buf;
  }
  if (std::isfinite(max_ulp)) {
    std::snprintf(buf, sizeof buf, "%smax %.3g ulp", s.empty() ? "" : ", ", max_ulp);
    s += buf;
  }
  if (!note.empty()) s += (s.empty() ? "" : ", ") + note;
  if (!fail.empty()) s += (s.empty() ? "" : ": ") + fail;
  return s;
}

double ulps_off(double got, double ref) {
  const float a = std::fabs(float(ref));
  if (!std::isfinite(a)) return NAN;
  // The spacing of floats on the side of |ref| where |got| lies (it halves below a power of two):
  // so that the float next to the reference is 1 ulp off on either side.
  const bool above = std::fabs(got) >= a || a == 0;
  const double ulp = above ? double(std::nextafter(a, INFINITY)) - double(a)
                           : double(a) - double(std::nextafter(a, 0.0f));
  return std::fabs(got - ref) / ulp;
}

void add_cosine(DiffStats& s, const HostImage& got, const HostImage& ref, size_t rows) {
  const auto g = got.view<float>(), r = ref.view<float>();
  double sum = 0;
  size_t n = 0;
  s.has_cosine = true;
  for (int y = 0; y < r.height && size_t(y) < rows; ++y) {
    double gg = 0, rr = 0, gr = 0;
    for (int x = 0; x < r.width; ++x) {
      const double a = g.at(x, y), b = r.at(x, y);
      gg += a * a, rr += b * b, gr += a * b;
    }
    // Two zero vectors (a constant patch) agree; one zero and one not do not.
    double c = gg == 0 && rr == 0 ? 1.0 : (gg == 0 || rr == 0 ? 0.0 : gr / std::sqrt(gg * rr));
    if (!std::isfinite(c)) c = -1;  // an unwritten (NaN) descriptor
    s.cos_min = n ? std::min(s.cos_min, c) : c;
    sum += c, ++n;
  }
  s.cos_mean = n ? sum / double(n) : 1.0;
}

void merge_diff(DiffStats& into, const DiffStats& o) {
  if (into.count == 0) {
    into = o;
    return;
  }
  if (o.has_set) {
    into.has_set = true;
    into.set_got = o.set_got, into.set_ref = o.set_ref, into.set_matched = o.set_matched;
    into.max_score_err = o.max_score_err;
  }
  if (o.has_cosine) {
    into.cos_min = into.has_cosine ? std::min(into.cos_min, o.cos_min) : o.cos_min;
    into.cos_mean = o.cos_mean;
    into.has_cosine = true;
  }
  if (into.fail.empty()) into.fail = o.fail;
  if (!o.note.empty()) into.note += (into.note.empty() ? "" : ", ") + o.note;
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
