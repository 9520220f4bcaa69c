// The CUDA toolkit's executables (cuobjdump, nvdisasm, compute-sanitizer), found in one order:
//   1. each folder on PATH;
//   2. each toolkit root: the one nvcc on PATH sits in, $CUDA_HOME, $CUDA_PATH, /usr/local/cuda,
//      then the toolkit this build was made with; in each, bin/ and then the tool's own folder
//      (compute-sanitizer keeps its binary in <root>/compute-sanitizer/).
// `kernel-lab asm --help` and `run --help`'s --memcheck state the same order.
#pragma once

#include <string>
#include <vector>

namespace lab {

struct ToolLookup {
  std::string path;                 // empty when not found
  std::vector<std::string> looked;  // where it looked, in words ("PATH", "/usr/local/cuda/bin")
  // "not on PATH, $CUDA_HOME/bin, ...": the lookup in one phrase, for a message.
  std::string where() const;
};
ToolLookup find_cuda_tool(const std::string& name);

}  // namespace lab
