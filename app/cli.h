// The `kernel-lab` command line: parses, dispatches, maps errors to sysexits codes.
#pragma once

namespace lab::app {

int run_cli(int argc, char** argv);

}  // namespace lab::app
