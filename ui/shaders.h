// GLSL sources from shaders/, embedded at build time.
#pragma once

namespace lab::ui {
extern const char* const kColormapVert;
extern const char* const kColormapFrag;
}  // namespace lab::ui
