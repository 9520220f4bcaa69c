// The viewport's pixel probe and the occupancy curve: plain functions the panels draw, tested
// on the CPU.
#pragma once

#include <string>
#include <vector>

#include "image.h"
#include "occupancy.h"

namespace lab::ui {

// What the probe says at (x, y): the output value and, when a reference of the same shape is
// given, the reference value and the difference. Empty outside the image.
std::string probe_text(const HostImage& out, const HostImage* ref, int x, int y);
// The same for a float output value read back from the device.
std::string probe_value_text(float value, const HostImage* ref, int x, int y);

// Theoretical occupancy (0..1) for block sizes 32, 64, ..., 1024 threads of a kernel with the
// given registers and shared memory per block; 0 where the size cannot launch.
std::vector<float> occupancy_curve(const ArchLimits& arch, int regs, size_t smem_per_block);

}  // namespace lab::ui
