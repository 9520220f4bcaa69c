// Test helpers: the GPU test-case decorator and the test data folder.
#pragma once

#include <doctest/doctest.h>

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
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

// The kernel-lab executable under test: $LAB_CLI (a bundle run on another machine) or the build's.
inline std::string lab_exe() {
  const char* env = std::getenv("LAB_CLI");
  return env && *env ? env : LAB_CLI_PATH;
}

// A command's exit code (128 + the signal when a signal ended it) and its output.
struct Result {
  int code;
  std::string out;
};

// Runs `cmd` with sh and reads everything it prints on stdout (add 2>&1 for stderr).
inline Result shell(const std::string& cmd) {
  Result r{-1, ""};
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

// The kernel-lab executable run with `args`, its stdout and stderr together. With `limit_s`,
// the command is stopped after that many seconds (exit 124): a test of input that once hung
// the lab fails instead of hanging the suite.
inline Result lab_cli(const std::string& args, int limit_s = 0) {
  return shell((limit_s > 0 ? "timeout " + std::to_string(limit_s) + " " : "") + lab_exe() + " " +
               args + " 2>&1");
}

inline bool has(const Result& r, const std::string& s) {
  return r.out.find(s) != std::string::npos;
}

// A file's whole contents (empty when it cannot be read).
inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}
