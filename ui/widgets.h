// Small widgets every panel uses, in one place (Tracy's widgets header is the model): a tooltip,
// a teaching panel's window with its stage combo, a bounded history for plots.
#pragma once

#include <vector>

namespace lab::ui {

struct GuiApp;

// Adds a tooltip to the last item.
void tip(const char* text);
// A teaching panel's window (closable from its title bar or the View menu) and its stage combo
// over the last frame's stages; false when there is nothing to draw (End() already called).
bool stage_window_begin(GuiApp& app, const char* title, int& stage, const char* why);
// Pushes a value into a bounded history (kHistory values).
void push_history(std::vector<float>& h, float v);

}  // namespace lab::ui
