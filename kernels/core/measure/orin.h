// Jetson AGX Orin's figures the lab estimates with, where it cannot measure (no Orin here).
#pragma once

#include <cmath>
#include <cstdio>
#include <string>

namespace lab {

// Device-to-device copy bandwidth of a Jetson AGX Orin 64GB at MAXN, measured by a public
// roofline study (read + write; the datasheet's DRAM peak is 204.8 GB/s). Orin is bandwidth-
// bound: the lab's estimate of a launch there is the bytes its design must move over this.
constexpr double kOrinCopyGBs = 183.0;

// The memory that figure ran at: EMC 3199 MHz (MAXN) on AGX Orin's 256-bit LPDDR5 bus.
constexpr double kOrinEmcMhz = 3199.0;
constexpr int kOrinBusBits = 256;

// The copy bandwidth an estimate divides by, and which figure it is.
struct OrinBandwidth {
  double gbs = kOrinCopyGBs;
  std::string how = "AGX Orin's measured copy at MAXN (183 GB/s): the EMC clock was not read";
};

// On an Orin whose EMC clock could be read (`emc_mhz` > 0; debugfs, root): the MAXN copy figure
// scaled by that clock and the bus width (`bus_bits` from CUDA; 0: AGX Orin's), since a copy is
// DRAM-bound; a published study saw 11-48 % longer medians on Orin Nano at EMC 2133 vs 3199 MHz.
inline OrinBandwidth orin_bandwidth(double emc_mhz, int bus_bits) {
  OrinBandwidth b;
  if (!(emc_mhz > 0)) return b;
  const int bus = bus_bits > 0 ? bus_bits : kOrinBusBits;
  b.gbs = kOrinCopyGBs * (emc_mhz / kOrinEmcMhz) * (double(bus) / kOrinBusBits);
  char buf[200];
  std::snprintf(buf, sizeof buf,
                "this Orin's EMC clock, %.0f MHz, on a %d-bit bus: %.1f GB/s (183 GB/s x %.0f / "
                "3199 MHz x %d / 256 bits)",
                emc_mhz, bus, b.gbs, emc_mhz, bus);
  b.how = buf;
  return b;
}

// The bandwidth-bound estimate on Orin of moving `model_bytes`, in microseconds; NaN without a
// model (0 bytes).
inline double orin_estimate_us(double model_bytes, double gbs = kOrinCopyGBs) {
  return model_bytes > 0 ? model_bytes / (gbs * 1e9) * 1e6 : NAN;
}

}  // namespace lab
