// Order statistics for timings: medians and tails, never means (one preempted run would
// dominate a mean).
#pragma once

#include <vector>

namespace lab {

// The p-th percentile (0..100) by nearest rank; 0 for an empty sample.
double percentile(std::vector<double> v, double p);

inline double median(const std::vector<double>& v) {
  return percentile(v, 50);
}

}  // namespace lab
