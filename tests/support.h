// Test helpers: the GPU test-case decorator and the test data folder.
#pragma once

#include <doctest/doctest.h>

#include <cstdlib>
#include <string>

#include "device.h"

// For every GPU test case: skipped (reported as such) when no CUDA device is present.
#define LAB_GPU_CASE(name) TEST_CASE(name* doctest::skip(!::lab::device_info().present))

// The test images: LAB_DATA_DIR from the environment (a bundle run on another machine), else the
// folder configured at build time.
inline std::string data_path(const std::string& file) {
  const char* env = std::getenv("LAB_DATA_DIR");
  return std::string(env && *env ? env : LAB_DATA_DIR) + "/" + file;
}
