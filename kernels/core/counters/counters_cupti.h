// The CUPTI backend's failures in words, apart so the tests can reach them with plain codes.
#pragma once

#include <string>

namespace lab {

// The one line for CUPTI result `code` (a CUptiResult) that `call` returned on chip `chip` (""
// while not known). `name` is CUPTI's own name for the code (cuptiGetResultString), used for
// codes that have no line of their own here.
std::string cupti_error_line(int code, const std::string& call, const std::string& chip,
                             const std::string& name = "");

}  // namespace lab
