// One libFuzzer executable per target (LAB_FUZZ_TARGET names it; tests/CMakeLists.txt builds
// fuzz_<name> for each). A FuzzFailure or any other escaping exception aborts, which libFuzzer
// reports as a crash and saves as a reproducer.
#include <cstdio>
#include <cstdlib>
#include <exception>

#include "targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    lab::fuzz::LAB_FUZZ_TARGET(data, size);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz target %s: %s\n", LAB_FUZZ_TARGET_NAME, e.what());
    std::abort();
  }
  return 0;
}
