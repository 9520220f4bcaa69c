#include "presets.h"

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "paths.h"

namespace lab::ui {

namespace fs = std::filesystem;

std::string preset_to_json(const PipelineConfig& p) {
  nlohmann::json j;
  j["schema"] = kPresetSchema;
  j["pipeline"] = nlohmann::json::array();
  for (const StageConfig& s : p.stages) {
    nlohmann::json st{{"op", s.op}, {"math", math_name(s.math)}};
    if (!s.variant.empty()) st["variant"] = s.variant;
    if (s.block) st["block"] = s.block->str();
    if (!s.enabled) st["enabled"] = false;
    st["params"] = nlohmann::json::object();
    for (const auto& [k, v] : s.params) st["params"][k] = v;
    j["pipeline"].push_back(st);
  }
  return j.dump(2);
}

PresetLoad preset_from_json(const std::string& text) {
  PresetLoad out{default_pipeline(), ""};
  try {
    const nlohmann::json j = nlohmann::json::parse(text);
    const int schema = j.at("schema").get<int>();
    if (schema > kPresetSchema) {
      out.warning = "preset schema " + std::to_string(schema) + " is newer than this build's " +
                    std::to_string(kPresetSchema) + ": using the defaults";
      return out;
    }
    PipelineConfig p;
    for (const auto& st : j.at("pipeline")) {
      StageConfig s;
      s.op = st.at("op").get<std::string>();
      if (st.contains("variant")) s.variant = st["variant"].get<std::string>();
      s.enabled = st.value("enabled", true);
      if (st.contains("block")) {
        const auto b = parse_wxh(st["block"].get<std::string>());
        if (!b) throw Error(ErrorKind::Usage, "bad block in stage " + s.op);
        s.block = *b;
      }
      const std::string math = st.value("math", "precise");
      if (math != "precise" && math != "fast")
        throw Error(ErrorKind::Usage, "bad math mode '" + math + "'");
      s.math = math == "fast" ? MathMode::Fast : MathMode::Precise;
      if (st.contains("params"))
        for (const auto& [k, v] : st["params"].items()) s.params[k] = v.get<double>();
      p.stages.push_back(std::move(s));
    }
    resolve(p, nullptr);  // unknown stages, variants, blocks or parameters: not usable
    out.pipeline = std::move(p);
  } catch (const std::exception& e) {
    out.pipeline = default_pipeline();
    out.warning = std::string("preset not usable (") + e.what() + "): using the defaults";
  }
  return out;
}

void save_preset(const std::string& path, const PipelineConfig& p) {
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  std::ofstream f(path);
  if (!f) throw Error(ErrorKind::CantCreate, "cannot create " + path);
  f << preset_to_json(p) << "\n";
  f.close();
  if (!f) throw Error(ErrorKind::Io, "writing " + path + " failed");
}

PresetLoad load_preset(const std::string& path) {
  std::ifstream f(path);
  if (!f) return {default_pipeline(), "no preset at " + path + ": using the defaults"};
  std::stringstream ss;
  ss << f.rdbuf();
  PresetLoad r = preset_from_json(ss.str());
  if (!r.warning.empty()) r.warning = path + ": " + r.warning;
  return r;
}

std::string config_dir() {
  return xdg_dir("XDG_CONFIG_HOME", ".config");
}
std::string state_dir() {
  return xdg_dir("XDG_STATE_HOME", ".local/state");
}

}  // namespace lab::ui
