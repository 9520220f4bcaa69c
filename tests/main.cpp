// doctest main. GPU test cases live in TEST_SUITE("gpu") and are skipped, never passed, without
// a CUDA device: a run restricted to that suite exits 77, which ctest reports as "Skipped".
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>

#include "device.h"
#include "frame_source.h"
#include "live.h"

// The kernel host's fake child (test_kernel_host.cpp).
int fake_host_main(const std::string& mode);

int main(int argc, char** argv) {
  // live_compile runs NVRTC in a child of this executable: the tests' compiles land here.
  if (argc == 2 && std::strcmp(argv[1], "__compile") == 0)
    return lab::live_compile_child_main(0, 1);
  if (argc == 3 && std::strcmp(argv[1], "__fake_host") == 0) return fake_host_main(argv[2]);
  bool gpu_only = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--test-suite=gpu" || a == "-ts=gpu") gpu_only = true;
  }
  if (gpu_only && !lab::device_info().present) {
    std::cout << "gpu suite skipped: no CUDA device (" << lab::device_info().why_absent << ")\n";
    return 77;
  }
  // A private state folder for this run (the lab's autosave and imgui.ini), inherited by every
  // kernel-lab the tests start: no test reads or writes the user's.
  const std::string state =
      (std::filesystem::temp_directory_path() / ("lab_tests_state_" + std::to_string(getpid())))
          .string();
  std::filesystem::create_directories(state);
  setenv("XDG_STATE_HOME", state.c_str(), 1);
  doctest::Context ctx(argc, argv);
  const int rc = ctx.run();
  std::error_code ec;
  std::filesystem::remove_all(state, ec);
  // As kernel-lab's main: no static destructors under a source thread stuck in GStreamer (the
  // gst tests leave one on purpose).
  if (lab::io::stuck_source_threads() > 0) {
    std::cout.flush();
    std::fflush(nullptr);
    std::_Exit(rc);
  }
  return rc;
}
