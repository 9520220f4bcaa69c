// Registers, shared memory and local bytes of every kernel as compiled for sm_87 (Jetson Orin),
// read from ptxas at build time (cmake/sm87_resources.cmake). The Orin occupancy estimate uses
// these, so it is right even while the lab runs on another GPU.
#pragma once

#include <cstddef>

namespace lab {

struct Sm87Resource {
  const char* kernel;  // mangled name
  int regs;
  int smem;   // static shared memory, bytes
  int local;  // stack frame (local memory) per thread, bytes
};

extern const Sm87Resource kSm87Resources[];
extern const size_t kSm87ResourceCount;

// The entry for a mangled kernel name, or null.
const Sm87Resource* find_sm87_resources(const char* mangled);

}  // namespace lab
