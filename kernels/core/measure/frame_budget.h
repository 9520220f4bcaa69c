// One frame's budget, end to end: where a frame's time goes between the source and the screen,
// and the frame rate each part allows on its own. The parts run on different threads and
// engines (the capture thread decodes, the copy engine uploads while the kernels run), so the
// lab's rate is at most the lowest of them: that part limits it. The GUI's Timings panel and
// `run`'s summary both show it.
#pragma once

#include <string>
#include <vector>

namespace lab {

struct BudgetPart {
  const char* name;  // "decode or capture", "host copy", "upload", "GPU", "display"
  double ms = -1;    // median; < 0: not measured or not part of this frame's path
  double fps() const { return ms > 0 ? 1e3 / ms : 0; }
};

struct FrameBudget {
  std::vector<BudgetPart> parts;
  double source_fps = 0;  // the rate a paced or live source delivers at; 0: as fast as read
  // The part that allows the fewest frames per second ("the source's own rate" when that is
  // lower), or "" when nothing is measured.
  std::string limit() const;
  // "decode or capture 3.10 ms (323 fps), host copy 0 ms, upload 0.46 ms (2198 fps), GPU
  // 0.08 ms (13158 fps); the limit: decode or capture".
  std::string line() const;
};

// Medians in ms (< 0: not measured); `display_ms` < 0 for a headless `run`; `compute` names the
// pipeline's part ("GPU", or "CPU references" without one).
FrameBudget frame_budget(double read_ms, double host_copy_ms, double upload_ms, double gpu_ms,
                         double display_ms, double source_fps, const char* compute = "GPU");

}  // namespace lab
