#include "frame_budget.h"

#include "text.h"

namespace lab {

FrameBudget frame_budget(double read_ms, double host_copy_ms, double upload_ms, double gpu_ms,
                         double display_ms, double source_fps, const char* compute) {
  FrameBudget b;
  b.parts = {{"decode or capture", read_ms},
             {"host copy", host_copy_ms},
             {"upload", upload_ms},
             {compute, gpu_ms},
             {"display", display_ms}};
  b.source_fps = source_fps;
  return b;
}

std::string FrameBudget::limit() const {
  const BudgetPart* slowest = nullptr;
  for (const BudgetPart& p : parts)
    if (p.ms > 0 && (!slowest || p.ms > slowest->ms)) slowest = &p;
  if (source_fps > 0 && (!slowest || source_fps < slowest->fps())) return "the source's own rate";
  return slowest ? slowest->name : "";
}

std::string FrameBudget::line() const {
  std::string out;
  for (const BudgetPart& p : parts) {
    if (p.ms < 0) continue;
    if (!out.empty()) out += ", ";
    out += std::string(p.name) + " " +
           (p.ms <= 0       ? std::string("0 ms")
            : p.fps() > 1e5 ? fmt("%.3f ms (over 100000 fps)", p.ms)
                            : fmt("%.3f ms", p.ms) + fmt(" (%.0f fps)", p.fps()));
  }
  if (source_fps > 0) out += fmt("; the source delivers %.0f fps", source_fps);
  const std::string l = limit();
  if (!l.empty()) out += "; the limit: " + l;
  return out;
}

}  // namespace lab
