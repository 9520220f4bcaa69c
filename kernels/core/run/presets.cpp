#include "presets.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "output_file.h"
#include "printable.h"
#include "paths.h"

namespace lab {

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

namespace {
// The deepest nesting of [ and { outside strings: a preset nests four levels; a file nested
// 100,000 deep would take the parser and the destructor that deep.
int nesting_depth(const std::string& text) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    if (c == '[' || c == '{') deepest = std::max(deepest, ++depth);
    if ((c == ']' || c == '}') && depth > 0) --depth;
  }
  return deepest;
}
}  // namespace

PresetLoad preset_from_json(const std::string& text, const PipelineConfig& fallback) {
  PresetLoad out{fallback, ""};
  const int depth = nesting_depth(text);
  if (depth > kPresetMaxDepth) {
    out.warning = "preset not usable (nested " + std::to_string(depth) + " levels deep, over " +
                  std::to_string(kPresetMaxDepth) + "): using the defaults";
    return out;
  }
  try {
    const nlohmann::json j = nlohmann::json::parse(text);
    // Read as a JSON integer of any size: get<int>() of 1e300 converts a double that no int
    // holds (undefined behaviour; the fuzzer found it), and of 2^40 wraps.
    const nlohmann::json& js = j.at("schema");
    if (!js.is_number_integer() ||
        (js.is_number_unsigned() ? js.get<uint64_t>() == 0 : js.get<int64_t>() < 1))
      throw Error(ErrorKind::Usage, "schema is not a positive integer");
    const uint64_t schema = js.get<uint64_t>();
    if (schema > uint64_t(kPresetSchema)) {
      out.warning = "preset schema " + std::to_string(schema) + " is newer than this build's " +
                    std::to_string(kPresetSchema) + ": using the defaults";
      return out;
    }
    // null or {} iterate as nothing: a pipeline of no stage would run without a word.
    const nlohmann::json& stages = j.at("pipeline");
    if (!stages.is_array() || stages.empty())
      throw Error(ErrorKind::Usage, "'pipeline' is not a list of stages");
    PipelineConfig p;
    for (const auto& st : stages) {
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
    // A retired or unknown variant costs its stage's choice only, not the user's whole pipeline.
    std::string notes;
    for (const std::string& n : migrate_variants(p)) notes += (notes.empty() ? "" : "; ") + n;
    resolve(p, nullptr);  // unknown stages, blocks or parameters: not usable
    out.pipeline = std::move(p);
    out.warning = notes;
  } catch (const std::exception& e) {
    out.pipeline = fallback;
    // The reason may quote the file (an unknown op's name): one line, cut short.
    out.warning = "preset not usable (" + printable(e.what(), 200) + "): using the defaults";
  }
  return out;
}

void save_preset(const std::string& path, const PipelineConfig& p) {
  std::error_code ec;  // a folder the user named for it is made; a failure shows in the write
  fs::create_directories(fs::path(path).parent_path(), ec);
  write_output_file(path, preset_to_json(p) + "\n");
}

PresetLoad load_preset(const std::string& path, const PipelineConfig& fallback) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec) || fs::file_size(path, ec) > (size_t(1) << 20))
    return {fallback, "no preset file at " + path +
                          " (or not a regular file under 1 MiB): using "
                          "the defaults"};
  std::ifstream f(path);
  if (!f) return {fallback, "no preset at " + path + ": using the defaults"};
  std::stringstream ss;
  ss << f.rdbuf();
  PresetLoad r = preset_from_json(ss.str(), fallback);
  if (!r.warning.empty()) r.warning = path + ": " + r.warning;
  return r;
}

std::string config_dir() {
  return xdg_dir("XDG_CONFIG_HOME", ".config");
}
std::string state_dir() {
  return xdg_dir("XDG_STATE_HOME", ".local/state");
}

}  // namespace lab
