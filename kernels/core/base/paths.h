// Where the lab keeps files: the XDG base directories, with the usual fallbacks under $HOME.
#pragma once

#include <string>

namespace lab {

// $VAR/kernel-lab[/sub], or $HOME/<fallback>/kernel-lab[/sub] when VAR is unset or empty
// ("XDG_CONFIG_HOME", ".config"); created if missing (a failure shows when a file is written).
std::string xdg_dir(const char* var, const char* fallback, const std::string& sub = "");

// The live-kernel examples, found from this executable's place, so that an installed lab and
// one run from its build folder both find theirs with no path into the source tree:
// <bin>/../share/kernel-lab/examples (installed), else <build>/../examples/kernels (the source
// tree beside a build folder); "" when neither exists.
std::string examples_dir();

// The test images (tests/data, with their licences), found the same way:
// <bin>/../share/kernel-lab/data (installed), else <build>/../tests/data; "" when neither exists.
std::string test_data_dir();

}  // namespace lab
