// Difference statistics between a kernel's output and its CPU reference.
#pragma once

#include <cstddef>
#include <string>

#include "image.h"
#include "op.h"

namespace lab {

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

  bool pass() const { return over == 0 && count > 0; }
};

// Compares two images of the same desc (float or 8-bit). Throws Error(Internal) on a mismatch
// of descs.
DiffStats diff_images(const HostImage& got, const HostImage& ref, const Tolerance& tol,
                      const std::string& slot = "");

// Folds the statistics of another output of the same stage into `into`.
void merge_diff(DiffStats& into, const DiffStats& other);

}  // namespace lab
