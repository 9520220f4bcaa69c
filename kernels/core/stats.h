// Order statistics for timings: medians and tails, never means (one preempted run would
// dominate a mean).
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

namespace lab {

// The p-th percentile (0..100) by nearest rank; 0 for an empty sample.
inline double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t rank = size_t(std::ceil(p / 100.0 * double(v.size())));
  return v[std::min(v.size() - 1, rank == 0 ? 0 : rank - 1)];
}

inline double median(const std::vector<double>& v) {
  return percentile(v, 50);
}

}  // namespace lab
