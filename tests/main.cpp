// doctest main. GPU test cases live in TEST_SUITE("gpu") and are skipped, never passed, without
// a CUDA device: a run restricted to that suite exits 77, which ctest reports as "Skipped".
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstring>
#include <iostream>
#include <string>

#include "device.h"

int main(int argc, char** argv) {
  bool gpu_only = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--test-suite=gpu" || a == "-ts=gpu") gpu_only = true;
  }
  if (gpu_only && !lab::device_info().present) {
    std::cout << "gpu suite skipped: no CUDA device (" << lab::device_info().why_absent << ")\n";
    return 77;
  }
  doctest::Context ctx(argc, argv);
  return ctx.run();
}
