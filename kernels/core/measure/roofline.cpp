#include "roofline.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "blas.h"
#include "device.h"
#include "orin.h"
#include "stats.h"

namespace lab {

double RoofCeilings::roof(double intensity) const {
  return std::min(gflops, gbs * intensity);
}

double RoofCeilings::ridge() const {
  return gbs > 0 ? gflops / gbs : NAN;
}

double RoofPoint::pct_of_roof(const RoofCeilings& c) const {
  const double r = c.roof(intensity());
  return valid() && r > 0 ? 100 * gflops() / r : NAN;
}

RoofCeilings orin_ceilings() {
  RoofCeilings c;
  c.device = "Jetson AGX Orin 64GB (MAXN)";
  c.gbs = kOrinCopyGBs;
  c.gflops = 2048 * 2 * 1.3;
  c.gbs_what =
      "183 GB/s: a device copy measured on AGX Orin by a public roofline study (the "
      "datasheet's DRAM peak is 204.8 GB/s)";
  c.gflops_what = "5325 GFLOP/s: FP32 peak from its clocks, 2048 CUDA cores x 2 (FMA) x 1.3 GHz";
  c.estimate = true;
  return c;
}

double measure_sgemm_gflops(int n, int reps) {
  const size_t bytes = size_t(n) * n * sizeof(float);
  DeviceBuffer a(bytes), b(bytes), c(bytes);
  // Small non-zero values: an all-zero operand lets the FMA units idle and clock higher.
  LAB_CUDA_CHECK(cudaMemset(a.data(), 0x3c, bytes));
  LAB_CUDA_CHECK(cudaMemset(b.data(), 0x3c, bytes));
  cudaEvent_t start, stop;
  LAB_CUDA_CHECK(cudaEventCreate(&start));
  std::vector<double> ms;
  const cudaError_t made = cudaEventCreate(&stop);
  if (made != cudaSuccess) {
    cudaEventDestroy(start);
    LAB_CUDA_CHECK(made);
  }
  try {
    const float* A = static_cast<const float*>(a.data());
    const float* B = static_cast<const float*>(b.data());
    float* C = static_cast<float*>(c.data());
    for (int k = 0; k < reps + 3; ++k) {  // the first calls pick kernels and warm the clocks
      LAB_CUDA_CHECK(cudaEventRecord(start));
      sgemm_rowmajor(nullptr, n, n, n, A, size_t(n), B, size_t(n), C, size_t(n));
      LAB_CUDA_CHECK(cudaEventRecord(stop));
      LAB_CUDA_CHECK(cudaEventSynchronize(stop));
      float t = 0;
      LAB_CUDA_CHECK(cudaEventElapsedTime(&t, start, stop));
      if (k >= 3) ms.push_back(t);
    }
  } catch (...) {
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    throw;
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return 2.0 * double(n) * n * n / (median(ms) * 1e-3) / 1e9;
}

RoofCeilings measured_ceilings(double copy_gbs) {
  RoofCeilings c;
  c.device = device_info().name;
  c.gbs = copy_gbs;
  c.gflops = measure_sgemm_gflops();
  char buf[160];
  std::snprintf(buf, sizeof buf,
                "%.0f GB/s: cudaMemcpy device to device of 256 MiB (read + write), this run",
                copy_gbs);
  c.gbs_what = buf;
  std::snprintf(buf, sizeof buf,
                "%.0f GFLOP/s: cuBLAS SGEMM 4096^3 in FP32 (TF32 off), median of 10, this run",
                c.gflops);
  c.gflops_what = buf;
  return c;
}

std::vector<RoofPoint> roof_points(const Ladder& l, bool measured) {
  std::vector<RoofPoint> out;
  for (size_t k = 0; k < l.steps.size(); ++k) {
    const LadderStep& s = l.steps[k];
    RoofPoint p;
    p.label = step_text(s.cfg);
    p.step = k;
    p.us = s.median_us();
    p.measured = measured;
    if (measured) {
      p.flops = s.measured_flops();
      p.bytes = s.dram_bytes();
    } else {
      p.flops = s.flops;
      p.bytes = s.model_bytes;
    }
    if (std::isfinite(p.flops) && std::isfinite(p.bytes) && p.valid()) out.push_back(p);
  }
  return out;
}

}  // namespace lab
