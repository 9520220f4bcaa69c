// Scripted runs: the options that drive the GUI as a user would (--counters, --ladder,
// --ladder-export, --ab, --code, --live-recompile), the waits that make a run with --frames
// reproducible, the screenshot, and the summary such a run prints. The shell calls the hooks at
// fixed points of its loop and knows none of the options.
#pragma once

#include <chrono>
#include <cstdint>

namespace lab::ui {

struct GuiApp;
struct GuiOptions;

class GuiScript {
 public:
  explicit GuiScript(const GuiOptions& opt);
  // A scripted run (--frames, headless or not, without --free-run) waits for each engine job
  // and for what it asked for; an interactive one never waits.
  bool waits() const { return waits_; }
  // After the events, before the live kernel's update and the engine frame: the requests a user
  // would make once the first frame is in, the wait for the source's first frame, and
  // --live-recompile's press.
  void before_frame(GuiApp& app, int frame);
  // After the frame is rendered, before the swap: the screenshot of the last frame.
  void after_render(const GuiApp& app, int frame, int fb_w, int fb_h);
  // When the loop has ended: the screenshot of a run that stopped drawing on a hung frame.
  void after_loop(const GuiApp& app, int fb_w, int fb_h) const;
  // A scripted run's summary (medians over the last frames, the ladder, the A/B, the live
  // kernel, recoveries) on stdout, and --dump-texture.
  void report(GuiApp& app, uint64_t ui_frames, uint64_t input_frames) const;

 private:
  struct Ab {
    int step = 0;
    uint64_t mark = 0;  // the frame count when B's pipeline went to the engine
  };
  void step_ab(GuiApp& app);

  bool waits_ = false;
  bool shot_ = false;  // the screenshot was written
  bool counters_asked_ = false, ladder_asked_ = false, ladder_exported_ = false;
  bool code_asked_ = false;
  Ab ab_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

// While drawing the panels: a scripted run's panel is shown and brought to the front on its
// first frames (--ladder, --ab, --code).
void open_scripted_panels(GuiApp& app);
bool scripted_focus(const GuiApp& app, const char* panel);

}  // namespace lab::ui
