// Test helpers: the GPU decorator and the test data folder.
#pragma once

#include <doctest/doctest.h>

#include <string>

#include "device.h"

// For every GPU test case: skipped (reported as such) when no CUDA device is present.
#define LAB_GPU_CASE(name) TEST_CASE(name* doctest::skip(!::lab::device_info().present))

inline std::string data_path(const std::string& file) { return std::string(LAB_DATA_DIR) + "/" + file; }
