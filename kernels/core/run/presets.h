// Presets: a pipeline (every stage's variant, block, math and parameters) as JSON, with a schema
// version. A corrupt, wrong-typed, too deeply nested, newer or invalid preset gives a warning and
// the defaults, never an error. The GUI saves and loads them; `--preset FILE` reads one for
// check, bench, run and gui.
#pragma once

#include <string>

#include "pipeline.h"

namespace lab {

constexpr int kPresetSchema = 1;

struct PresetLoad {
  PipelineConfig pipeline;
  // Empty when the preset was used as it is; else what was changed (a retired or unknown variant
  // replaced: the rest kept) or why the defaults came instead.
  std::string warning;
};

// Deeper nesting than any preset has is refused before JSON parsing sees it.
constexpr int kPresetMaxDepth = 64;

std::string preset_to_json(const PipelineConfig& p);
// `fallback`: the pipeline a preset that cannot be used gives way to.
PresetLoad preset_from_json(const std::string& text,
                            const PipelineConfig& fallback = default_pipeline());

// Files; save throws Error(CantCreate / Io), load never throws (a missing file warns).
void save_preset(const std::string& path, const PipelineConfig& p);
PresetLoad load_preset(const std::string& path,
                       const PipelineConfig& fallback = default_pipeline());

// $XDG_CONFIG_HOME/kernel-lab (presets) and $XDG_STATE_HOME/kernel-lab (imgui.ini), with the
// XDG defaults under $HOME; created on demand.
std::string config_dir();
std::string state_dir();

}  // namespace lab
