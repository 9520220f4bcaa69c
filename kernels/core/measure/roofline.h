// The roofline: a kernel's arithmetic intensity (FLOPs per DRAM byte) against the two ceilings
// that bound it, the memory roof (bandwidth x intensity) and the compute roof (peak FLOP/s).
// The ceilings are measured in the same run on the running GPU (a device copy for bandwidth,
// cuBLAS SGEMM for FP32), or, for Jetson AGX Orin, taken from its published figures and marked
// as an estimate.
#pragma once

#include <cuda_runtime_api.h>

#include <string>
#include <vector>

#include "ladder.h"

namespace lab {

struct RoofCeilings {
  std::string device;
  double gbs = 0;     // memory roof, GB/s (read + write)
  double gflops = 0;  // compute roof, FP32 GFLOP/s
  std::string gbs_what, gflops_what;
  bool estimate = false;  // published figures, not measured here

  // The attainable GFLOP/s at `intensity` FLOPs per byte: min(compute, bandwidth x intensity).
  double roof(double intensity) const;
  // Where the two roofs meet (FLOPs per byte): below it a kernel is bandwidth-bound.
  double ridge() const;
};

// Jetson AGX Orin 64GB at MAXN: its measured copy bandwidth (orin.h) and its FP32 peak from its
// clocks (2048 CUDA cores x 2 FLOPs per FMA x 1.3 GHz = 5325 GFLOP/s).
RoofCeilings orin_ceilings();

// cuBLAS SGEMM (FP32 arithmetic, TF32 off) of n x n x n on the current device: the median
// GFLOP/s of `reps` calls after warm-up. The compute roof a hand-written FP32 kernel can reach.
double measure_sgemm_gflops(int n = 4096, int reps = 10);
// The running GPU's roofs, measured now: `copy_gbs` (measured by the caller in the same run) and
// an SGEMM. Needs a CUDA device.
RoofCeilings measured_ceilings(double copy_gbs);

// One point: a step's FLOPs and bytes, from the lab's model or from the counters.
struct RoofPoint {
  std::string label;
  double flops = 0, bytes = 0;
  double us = 0;          // its median time
  bool measured = false;  // counters (DRAM bytes, executed FLOPs) rather than the model
  size_t step = 0;        // its index in the ladder's steps

  double intensity() const { return bytes > 0 ? flops / bytes : 0; }
  double gflops() const { return us > 0 ? flops / (us * 1e3) : 0; }
  bool valid() const { return flops > 0 && bytes > 0 && us > 0; }
  // Percent of the roof at its intensity (how close it is to what the ceilings allow).
  double pct_of_roof(const RoofCeilings& c) const;
};

// The ladder's points in step order: the model point of each step with a FLOP model, and the
// measured point of each step with counters. Steps with neither are left out.
std::vector<RoofPoint> roof_points(const Ladder& l, bool measured);

}  // namespace lab
