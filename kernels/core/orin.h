// Jetson AGX Orin's figures the lab estimates with, where it cannot measure (no Orin here).
#pragma once

#include <cmath>

namespace lab {

// Device-to-device copy bandwidth of a Jetson AGX Orin 64GB at MAXN, measured by a public
// roofline study (read + write; the datasheet's DRAM peak is 204.8 GB/s). Orin is bandwidth-
// bound: the lab's estimate of a launch there is the bytes its design must move over this.
constexpr double kOrinCopyGBs = 183.0;

// The bandwidth-bound estimate on Orin of moving `model_bytes`, in microseconds; NaN without a
// model (0 bytes).
inline double orin_estimate_us(double model_bytes) {
  return model_bytes > 0 ? model_bytes / (kOrinCopyGBs * 1e9) * 1e6 : NAN;
}

}  // namespace lab
