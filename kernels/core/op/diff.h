// Difference statistics between a kernel's output and its CPU reference.
#pragma once

#include <cmath>
#include <cstddef>
#include <string>

#include "image.h"

namespace lab {

struct Tolerance;

struct DiffStats {
  size_t count = 0;  // values compared
  size_t over = 0;   // values over the tolerance (NaN included)
  size_t nans = 0;   // NaN or inf in the output: unwritten (poisoned) or broken pixels
  double max_abs = 0;
  double mean_abs = 0;
  double psnr = 0;         // dB, peak = max|ref| (1 when the reference is all zero); inf if equal
  double ref_max_abs = 0;  // max|ref|, the scale of a relative tolerance
  double limit = 0;        // the absolute limit the tolerance gave
  // The first value over the limit in raster order (slot, x, y, channel), -1 when none.
  std::string bad_slot;
  int bad_x = -1, bad_y = -1, bad_c = -1;
  double bad_got = 0, bad_ref = 0;
  // Keypoint sets (topk): matched by exact position; precision = matched / got, recall =
  // matched / ref; the largest score error over matched points.
  bool has_set = false;
  size_t set_got = 0, set_ref = 0, set_matched = 0;
  double max_score_err = 0;
  // Descriptors: cosine similarity of each row with its reference row.
  bool has_cosine = false;
  double cos_min = 1, cos_mean = 1;
  // The largest error in float ulps of the reference value (ops that report it: the math
  // playground); NaN when not reported.
  double max_ulp = NAN;
  std::string fail;  // why an op's own comparison failed (empty: see `over`)
  // What an op's own comparison accepted that an exact one would not, in a few words ("2
  // near-tie NMS flips accepted"); empty: nothing.
  std::string note;

  double precision() const { return set_got ? double(set_matched) / double(set_got) : 1.0; }
  double recall() const { return set_ref ? double(set_matched) / double(set_ref) : 1.0; }
  bool pass() const { return over == 0 && count > 0 && fail.empty(); }
  // "P 1.000 R 1.000 4096/4096 kp" and/or "cos min 0.99999 mean 1.00000", then the note; empty
  // when there is none of these.
  std::string detail() const;
};

// Builds DiffStats value by value, each with its own limit (ops whose bound depends on the data:
// matmul's sum of |a||b| per element, reduce's sum of |x|). NaN and inf fail.
class DiffAccumulator {
 public:
  void add(double got, double ref, double limit, const std::string& slot, int x, int y, int c = 0);
  // The means and the PSNR (peak: max|ref|).
  DiffStats finish();

 private:
  DiffStats m_s;
  double m_sum_abs = 0, m_sum_sq = 0;
};

// Compares two images of the same desc (float or 8-bit). Throws Error(Internal) on a mismatch
// of descs.
DiffStats diff_images(const HostImage& got, const HostImage& ref, const Tolerance& tol,
                      const std::string& slot = "");

// Cosine similarity of each of the first `rows` rows of `got` with the same row of `ref` (float,
// one channel), into s.cos_min / s.cos_mean.
void add_cosine(DiffStats& s, const HostImage& got, const HostImage& ref, size_t rows);

// The distance from `ref` (rounded to float) to `got` in float ulps at |ref|: the spacing of
// floats there on got's side (FLT_TRUE_MIN below the normal range), so that a neighbouring float
// is 1 ulp off. How many floats off a result is.
double ulps_off(double got, double ref);

// Folds the statistics of another output of the same stage into `into`.
void merge_diff(DiffStats& into, const DiffStats& other);

}  // namespace lab
