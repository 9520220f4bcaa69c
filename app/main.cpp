// kernel-lab: one executable; subcommands share the headless engine in kernels/.
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "cli.h"
#include "frame_source.h"

int main(int argc, char** argv) {
  const int rc = lab::app::run_cli(argc, argv);
  // A source thread still inside OpenCV (a GStreamer pipeline that never prerolled, a read
  // that never returned): static destructors, OpenCV's and GStreamer's among them, must not
  // run under it. The output is flushed and the process ends here instead.
  if (lab::io::stuck_source_threads() > 0) {
    std::cout.flush();
    std::cerr.flush();
    std::fflush(nullptr);
    std::_Exit(rc);
  }
  return rc;
}
