// The Code panel's state: PTX or SASS of a kernel, precise and fast (or A and B) side by side.
// Separate from app_state.h so that GuiApp holds it as one member.
#pragma once

#include <future>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "listing.h"

namespace lab::ui {

// One side of the view, resolved: a function's listing in one build, or why there is none.
struct CodeSide {
  std::string title;  // demangled name
  std::string build;  // "PTX compute_87 precise", "SASS sm_90 fast"
  std::vector<std::string> lines;
  std::string message;   // non-empty: no listing, and why
  bool pending = false;  // SASS still being disassembled
};

struct CodeViewState {
  std::string a_key, b_key;  // the selected items (see panel_code.cpp's item keys)
  bool sass = false;
  bool ab = false;  // A against B; else A's precise and fast builds
  int a_math = 0, b_math = 0;
  bool only_diff = false;
  // What was last shown: recomputed only when the selection or its listings change.
  std::string shown;
  CodeSide a, b;
  std::vector<DiffRow> rows;
  std::vector<int> diff_rows;  // indices into rows of the differing ones
  InstructionMix mix_a, mix_b;
  // Split embedded modules, by "op/math"; SASS runs in flight or done, by mangled name.
  std::map<std::string, std::vector<AsmFunction>> modules;
  std::map<std::string, std::shared_future<SassResult>> sass_runs;
  std::map<const void*, std::string> mangled;  // a launch's function -> its mangled name
};

}  // namespace lab::ui
