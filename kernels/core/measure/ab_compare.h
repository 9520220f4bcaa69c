// A/B compare: two configurations of one stage (any change: variant, block, math, parameters)
// on the same input, each measured as bench measures a step (measure_step), each checked against
// its CPU reference, and their outputs compared with each other: what the change did to the time,
// the resources and the values.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "ladder.h"

namespace lab {

struct AbSide {
  LadderStep step;
  std::vector<HostImage> outputs;  // the stage's outputs, in the op's order
  DiffStats vs_reference;          // against its own CPU reference, its own tolerance
};

struct AbCompare {
  size_t stage = 0;
  std::vector<std::string> output_names;
  AbSide a, b;
  // B's outputs against A's, every value: the limit is the looser of A's and B's tolerances
  // against the reference, so "over" counts the values where the two differ by more than their
  // references allow either of them.
  DiffStats a_vs_b;
  // |B - A| per output where both are float planes of one channel (else empty): the heat map.
  std::vector<HostImage> difference;
};

// Runs stage i with `a`, then with `b` (each: outputs poisoned, measured, read back, checked
// against its reference), then restores the stage's configured output. The stage's inputs are
// what the last run left in its slots. Throws Error(Refused) when the device refuses either.
// `tick` runs after each of the four parts (A measured, A checked, B measured, B checked): a
// caller's sign of life (the GUI's hang report waits on it).
AbCompare compare_ab(Runner& r, size_t i, const ResolvedStage& a, const ResolvedStage& b,
                     const MeasureOptions& m, CounterCollector* counters = nullptr,
                     const std::function<void()>& tick = {});

// |b - a| of two float planes of one channel and the same size; an empty image otherwise.
HostImage abs_difference(const HostImage& a, const HostImage& b);

}  // namespace lab
