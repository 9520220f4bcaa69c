#include "exercise_file.h"

#include <openssl/evp.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "check.h"
#include "live.h"
#include "pipeline.h"
#include "printable.h"
#include "registry.h"
#include "text.h"

namespace lab {

namespace {
constexpr const char* kFormat = "kernel-lab exercise 1";
constexpr size_t kMaxFile = size_t(16) << 20;
}  // namespace

std::string Exercise::target_text() const {
  return target_step.empty() ? fmt("reach %.0f %% of the ceiling", target_pct)
                             : "beat " + target_step;
}

bool is_hex(const std::string& s) {
  return !s.empty() && s.find_first_not_of("0123456789abcdef") == std::string::npos;
}

std::string sha256_hex(const std::string& bytes) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  if (!EVP_Digest(bytes.data(), bytes.size(), md, &n, EVP_sha256(), nullptr))
    throw Error(ErrorKind::Internal, "SHA-256 failed (OpenSSL)");
  std::string s;
  for (unsigned int i = 0; i < n; ++i) {
    char b[3];
    std::snprintf(b, sizeof b, "%02x", md[i]);
    s += b;
  }
  return s;
}

std::string exercise_text(const Exercise& e) {
  nlohmann::ordered_json j;
  j["format"] = kFormat;
  j["stage"] = e.stage;
  j["title"] = e.title;
  j["lesson"] = e.lesson;
  j["start"] = e.start;
  if (!e.target_step.empty())
    j["target"] = {{"step", e.target_step}};
  else
    j["target"] = {{"percent_of_ceiling", e.target_pct}};
  j["salt"] = e.salt;
  j["bench"] = {{"input", e.bench_input}, {"size", e.bench_size}};
  j["starter"] = e.starter;
  return j.dump(2) + "\n";
}

Exercise parse_exercise(const std::string& text, const std::string& path) {
  const std::string where = "exercise " + printable(path) + ": ";
  Exercise e;
  try {
    const nlohmann::json j = nlohmann::json::parse(text);
    if (!j.is_object() || j.value("format", "") != kFormat)
      throw Error(ErrorKind::Data, where + "not an exercise (no \"format\": \"" + kFormat + "\")");
    e.stage = j.at("stage").get<std::string>();
    e.title = j.value("title", "");
    e.lesson = j.value("lesson", "");
    e.start = j.value("start", "");
    e.starter = j.at("starter").get<std::string>();
    e.salt = j.at("salt").get<std::string>();
    const nlohmann::json& t = j.at("target");
    if (t.contains("step"))
      e.target_step = t["step"].get<std::string>();
    else
      e.target_pct = t.at("percent_of_ceiling").get<double>();
    if (j.contains("bench")) {
      e.bench_input = j["bench"].value("input", e.bench_input);
      e.bench_size = j["bench"].value("size", e.bench_size);
    }
  } catch (const nlohmann::json::exception& x) {
    throw Error(ErrorKind::Data, where + x.what());
  }
  const std::string why = exercise_stage_refusal(e.stage);
  if (!why.empty()) throw Error(ErrorKind::Data, where + why);
  const Op& op = find_op(e.stage);
  if (e.starter.empty()) throw Error(ErrorKind::Data, where + "no starter kernel");
  if (!is_hex(e.salt) || e.salt.size() < 16) throw Error(ErrorKind::Data, where + "a bad salt");
  if (!e.target_step.empty() && op.find_variant(e.target_step) < 0)
    throw Error(ErrorKind::Data, where + "no step " + printable(e.target_step) + " of " + e.stage);
  if (e.target_step.empty() && !(e.target_pct > 0 && e.target_pct <= 100))
    throw Error(ErrorKind::Data, where + "the target percent must be in (0, 100]");
  if (!parse_wxh(e.bench_size)) throw Error(ErrorKind::Data, where + "bench size is not WxH");
  return e;
}

std::string read_small_file(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw Error(ErrorKind::NoInput, std::string(what) + " " + printable(path) + ": cannot open");
  std::string bytes;
  char buf[65536];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    bytes.append(buf, size_t(in.gcount()));
    if (bytes.size() > kMaxFile)
      throw Error(ErrorKind::Data, std::string(what) + " " + printable(path) + ": over 16 MiB");
  }
  return bytes;
}

Exercise read_exercise(const std::string& path, std::string* bytes_out) {
  std::string bytes = read_small_file(path, "exercise");
  Exercise e = parse_exercise(bytes, path);
  if (bytes_out) *bytes_out = std::move(bytes);
  return e;
}

namespace {
std::optional<ExerciseFailure> failure_of(const nlohmann::json& j, const Exercise& e,
                                          const std::string& exercise_sha256,
                                          const std::string& kernel_sha256) {
  const auto sha_of = [&](const char* what) {
    return j.contains(what) && j[what].is_object() ? j[what].value("sha256", "") : "";
  };
  if (!j.is_object() || sha_of("exercise") != exercise_sha256 ||
      sha_of("kernel") != kernel_sha256 || j.value("correct", true))
    return std::nullopt;
  ExerciseFailure f;
  if (j.contains("checks") && j["checks"].is_array())
    for (const nlohmann::json& c : j["checks"]) {
      if (!c.is_object() || c.value("pass", true)) continue;
      f.width = c.value("width", 0), f.height = c.value("height", 0);
      f.where = printable(c.value("class", "")) + " " + std::to_string(f.width) + "x" +
                std::to_string(f.height);
      break;
    }
  if (f.where.empty()) {  // every size passed: the timed runs, at the bench size, did not
    const auto size = parse_wxh(e.bench_size);
    if (!size) return std::nullopt;
    f.width = size->x, f.height = size->y;
    f.where = printable(j.value("failing_size", "bench " + e.bench_size));
  }
  if (f.width < 1 || f.height < 1 || f.width > 16384 || f.height > 16384) return std::nullopt;
  return f;
}

}  // namespace

std::optional<ExerciseFailure> first_failure(const std::string& result_text, const Exercise& e,
                                             const std::string& exercise_sha256,
                                             const std::string& kernel_sha256) {
  const nlohmann::json j = nlohmann::json::parse(result_text, nullptr, false);
  try {  // a hand-edited result: a field of another type is no failure to show, not a crash
    return failure_of(j, e, exercise_sha256, kernel_sha256);
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
}

std::string exercise_stage_refusal(const std::string& stage) {
  const Op* op = nullptr;
  for (const Op& o : registry())
    if (o.def.name == stage) op = &o;
  if (!op) return "no stage " + printable(stage);
  if (!live_refusal(*op).empty()) return live_refusal(*op);
  for (const StageConfig& s : default_pipeline("keypoints").stages)
    if (s.op == stage) return "";
  return stage + " is not a stage of the keypoint pipeline";
}

}  // namespace lab
