// The device headers NVRTC needs for live kernels, embedded in the binary at build time
// (cmake/embed_sources.cmake), so that a live kernel compiles against exactly the code that was
// built, wherever the lab runs.
#pragma once

#include <cstddef>

namespace lab {

struct EmbeddedFile {
  const char* name;  // as #include names it: "image_view.h", "blur_kernels.cuh"
  const char* text;
};
extern const EmbeddedFile kLiveFiles[];
extern const size_t kLiveFileCount;

}  // namespace lab
