// compute-sanitizer's memcheck report, read back into findings at the user's source lines:
// "line 6: out-of-bounds write of 4 bytes at 0x8, thread (3,0,0) block (0,0,0)". Pure text work
// (the trial runs the sanitizer; this only reads its log), so the build machine tests it.
#pragma once

#include <string>
#include <vector>

namespace lab {

struct MemcheckFinding {
  int line = 0;      // in the user's source; 0 when the report names no line of it
  std::string text;  // what happened, where and by whom, in one line
  std::string str() const { return line > 0 ? "line " + std::to_string(line) + ": " + text : text; }
};

// The findings of a `compute-sanitizer --tool memcheck` log (its "=========" lines), at most
// `limit`; frames are tied to a line only in `file` (the live kernel's, user_kernel.cu). API
// errors the fault causes afterwards ("Program hit cudaErrorLaunchFailure...") are left out
// when a device finding explains them. Never throws; lines it does not know are skipped.
std::vector<MemcheckFinding> parse_memcheck_log(const std::string& log,
                                                const std::string& file = "user_kernel.cu",
                                                size_t limit = 10);

}  // namespace lab
