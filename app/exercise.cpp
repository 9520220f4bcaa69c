#include "exercise.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <sstream>

#include "bench_report.h"
#include "check.h"
#include "commands.h"
#include "counters.h"
#include "device.h"
#include "device_state.h"
#include "explain.h"
#include "image_source.h"
#include "json_number.h"
#include "ladder.h"
#include "live.h"
#include "output_file.h"
#include "printable.h"
#include "text.h"

namespace lab::app {

namespace {

constexpr const char* kResultFormat = "kernel-lab exercise result 1";
std::string random_hex(size_t bytes) {
  std::random_device rd;
  std::string s;
  for (size_t i = 0; i < bytes; ++i) {
    char b[3];
    std::snprintf(b, sizeof b, "%02x", unsigned(rd() & 0xff));
    s += b;
  }
  return s;
}

// The lesson a made exercise starts with: the steps from start to target, each with its delta.
std::string default_lesson(const Op& op, size_t start, const std::string& target, double pct) {
  const auto& vs = op.def.variants;
  std::string s = "Replace " + op.def.name + " with a faster kernel. You start from " +
                  vs[start].name + ": " + vs[start].delta + ".";
  const int t = target.empty() ? -1 : op.find_variant(target);
  if (t >= 0) {
    s += " Beat " + vs[size_t(t)].name +
         ", measured in the same run. The ladder's steps on the way:";
    for (size_t v = start + 1; v <= size_t(t) && v < vs.size(); ++v)
      s += " " + vs[v].name + ": " + vs[v].delta + ".";
  } else {
    s += fmt(" Reach %.0f %% of the ceiling measured in the same run (", pct) +
         "a device copy of the stage's own bytes).";
  }
  return s;
}

// The starter holds the start's kernel and the helpers it uses, not the later steps' kernels
// (the op's header holds them all): each other step's kernel definition, with the comment lines
// and template line just above it, is cut out (its name: its live call up to '<' or '(').
std::string without_other_steps(std::string src, const Op& op, size_t keep) {
  auto name_of = [](const std::string& call) { return call.substr(0, call.find_first_of("<(")); };
  const std::string kept = name_of(op.def.variants[keep].live_call);
  for (size_t v = 0; v < op.def.variants.size(); ++v) {
    const std::string name = name_of(op.def.variants[v].live_call);
    if (v == keep || name.empty() || name == kept) continue;
    std::smatch m;  // "__device__ void\n    name(" as clang-format breaks it, too
    if (!std::regex_search(src, m, std::regex("__device__\\s+void\\s+" + name + "\\s*\\(")))
      continue;
    const size_t at = size_t(m.position(0));
    size_t open = src.find('{', at), end = open;
    for (int depth = 0; end < src.size(); ++end) {
      depth += src[end] == '{' ? 1 : src[end] == '}' ? -1 : 0;
      if (depth == 0 && src[end] == '}') break;
    }
    if (open == std::string::npos || end >= src.size()) continue;
    size_t begin = src.rfind('\n', at == 0 ? 0 : at - 1);
    begin = begin == std::string::npos ? 0 : begin + 1;
    // The template line and the comment lines above it belong to it.
    while (begin > 0) {
      const size_t prev = src.rfind('\n', begin - 2);
      const size_t line = prev == std::string::npos ? 0 : prev + 1;
      const std::string text = trim(src.substr(line, begin - line));
      if (!starts_with(text, "//") && !starts_with(text, "template")) break;
      begin = line;
    }
    src.erase(begin, end + 1 - begin + (end + 1 < src.size() && src[end + 1] == '\n'));
  }
  return std::regex_replace(src, std::regex("\n{3,}"), "\n\n");  // the gaps they left
}

}  // namespace

// ---- make ------------------------------------------------------------------------------------

int cmd_exercise_make(const ExerciseMakeOptions& o) {
  const Op& op = find_op(o.stage);  // an unknown stage: "unknown stage" with the known ones
  const std::string why = exercise_stage_refusal(o.stage);
  if (!why.empty()) throw Error(ErrorKind::Usage, "exercise: " + why);
  const int start = op.find_variant(o.start);
  if (start < 0)
    throw Error(ErrorKind::Usage,
                "exercise make --start " + o.start + ": no such step of " + o.stage);
  Exercise e;
  e.stage = o.stage;
  e.start = o.start;
  const VariantDef& sv = op.def.variants[size_t(start)];
  e.starter = without_other_steps(
      live_copy_source(op, size_t(start), sv.default_block, MathMode::Precise, nullptr), op,
      size_t(start));
  if (e.starter.empty())
    throw Error(ErrorKind::Usage, "exercise make --start " + o.start +
                                      ": not one kernel launch, so it has no live copy");
  if (!o.target.empty() && o.target.back() == '%') {
    char* end = nullptr;
    e.target_pct = std::strtod(o.target.c_str(), &end);
    if (end != o.target.c_str() + o.target.size() - 1 || !(e.target_pct > 0 && e.target_pct <= 100))
      throw Error(ErrorKind::Usage,
                  "exercise make --target " + o.target + ": a percent in (0, 100]");
  } else {
    const int t = op.find_variant(o.target);
    if (t < 0 || t == start)
      throw Error(ErrorKind::Usage, "exercise make --target " + o.target + ": a step of " +
                                        o.stage + " other than the start, or N%");
    e.target_step = o.target;
  }
  e.title = !o.title.empty()
                ? o.title
                : o.stage + ": from " + o.start + " to " +
                      (e.target_step.empty() ? o.target + " of the ceiling" : e.target_step);
  e.lesson =
      !o.lesson.empty() ? o.lesson : default_lesson(op, size_t(start), e.target_step, e.target_pct);
  e.salt = random_hex(16);
  const std::string text = exercise_text(e);
  if (o.out.empty()) {
    std::cout << text;
  } else {
    write_output_file(o.out, text);
    std::cout << "wrote " << o.out << " (" << e.title << ")\n";
  }
  return 0;
}

// ---- submit ----------------------------------------------------------------------------------

namespace {

struct SizeCheck {
  std::string cls;
  int w = 0, h = 0;
  bool pass = false;
  std::string why;  // a trial that failed, or the first mismatches
  DiffStats diff;
  std::vector<std::string> mismatches;
};

// A photograph-like image no one has seen: smooth waves, noise and rectangles, BGR.
HostImage draw_image(std::mt19937_64& rng, int w, int h) {
  std::uniform_real_distribution<double> U(0, 1);
  const double fx = 0.002 + 0.2 * U(rng), fy = 0.002 + 0.2 * U(rng), phase = 6.28 * U(rng);
  const double amp = 120 * U(rng), noise = 80 * U(rng);
  HostImage img(ImageDesc{w, h, 3, PixelType::U8});
  auto v = img.view<uint8_t>();
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int c = 0; c < 3; ++c) {
        const double s =
            128 + amp * std::sin(fx * x + fy * y + phase + c) + noise * (2 * U(rng) - 1);
        v.at(x, y, c) = uint8_t(std::clamp(s, 0.0, 255.0));
      }
  const int rects = int(U(rng) * 9);
  for (int r = 0; r < rects; ++r) {
    const int x0 = int(U(rng) * w), y0 = int(U(rng) * h);
    const int x1 = std::min(w, x0 + 1 + int(U(rng) * w / 3)),
              y1 = std::min(h, y0 + 1 + int(U(rng) * h / 3));
    const uint8_t col[3] = {uint8_t(U(rng) * 256), uint8_t(U(rng) * 256), uint8_t(U(rng) * 256)};
    for (int y = y0; y < y1; ++y)
      for (int x = x0; x < x1; ++x)
        for (int c = 0; c < 3; ++c) v.at(x, y, c) = col[c];
  }
  return img;
}

bool is_prime(int n) {
  if (n < 2) return false;
  for (int d = 2; d * d <= n; ++d)
    if (n % d == 0) return false;
  return true;
}

int draw_odd(std::mt19937_64& rng, int lo, int hi) {
  return std::uniform_int_distribution<int>(lo / 2, hi / 2)(rng) * 2 + 1;
}

int draw_prime(std::mt19937_64& rng, int lo, int hi) {
  int n = std::uniform_int_distribution<int>(lo, hi)(rng);
  while (!is_prime(n)) ++n;
  return n;
}

// The pipeline up to the exercise's stage at a letterbox of w x h, the learner's kernel
// installed (compiled, then a trial run in the child on this image) in the kernel host that
// `hosting` receives; throws what install_live_kernel throws.
PipelineConfig exercise_pipeline(const Exercise& e, const std::string& kernel_path, int w, int h,
                                 const HostImage& image, std::ostream& log, LiveHosting& hosting) {
  PipelineConfig p = default_pipeline("keypoints");
  for (size_t k = 0; k < p.stages.size(); ++k)  // the stages after it have nothing to say here
    if (p.stages[k].op == e.stage) p.stages.resize(k + 1);
  for (StageConfig& s : p.stages)
    if (s.op == "letterbox") s.params["width"] = w, s.params["height"] = h;
  CommonOptions c;
  c.kernel_file = kernel_path;
  c.replace = e.stage;
  hosting = install_live_kernel(p, c, Backend::Cuda, &image, log);
  return p;
}

// The first few values over the limit, in raster order: where to look. NaN and Inf are values:
// equal to the reference only where it holds the same.
std::vector<std::string> first_mismatches(const Runner& r, const ResolvedStage& cfg,
                                          const std::vector<HostImage>& ref, double limit,
                                          size_t most = 5) {
  std::vector<std::string> out;
  const std::vector<std::string>& names = cfg.outputs();
  for (size_t k = 0; k < names.size() && k < ref.size() && out.size() < most; ++k) {
    const HostImage got = r.read_slot(slot_name(names[k]));
    if (got.desc() != ref[k].desc() || got.desc().type != PixelType::F32) continue;
    const auto g = got.view<float>();
    const auto f = ref[k].view<float>();
    for (int y = 0; y < g.height && out.size() < most; ++y)
      for (int x = 0; x < g.width * g.channels && out.size() < most; ++x) {
        const float a = g.row(y)[x], b = f.row(y)[x];
        const bool same = a == b || (std::isnan(a) && std::isnan(b));
        if (same || std::fabs(double(a) - double(b)) <= limit) continue;
        char line[160];
        std::snprintf(line, sizeof line, "%s (%d, %d): got %.9g, expected %.9g", names[k].c_str(),
                      x / g.channels, y, double(a), double(b));
        out.push_back(line);
      }
  }
  return out;
}

SizeCheck check_size(const Exercise& e, const std::string& kernel_path, const std::string& cls,
                     int w, int h, std::mt19937_64& rng) {
  SizeCheck s;
  s.cls = cls, s.w = w, s.h = h;
  const HostImage img = draw_image(rng, w, h);
  std::ostringstream log;
  PipelineConfig p;
  LiveHosting hosting;  // outlives the runner that launches through it
  try {
    p = exercise_pipeline(e, kernel_path, w, h, img, log, hosting);
  } catch (const Error& x) {
    if (x.kind() == ErrorKind::Usage) throw;
    s.why = x.what();  // the trial: faulted, did not finish, left outputs unwritten
    return s;
  }
  Runner r(Backend::Cuda);
  r.set_remote(hosting.launches.get());
  r.configure(p, img.desc());
  r.set_input(img);
  const size_t i = stage_index(r, e.stage);
  const ResolvedStage cfg = r.stages()[i];
  std::vector<HostImage> ref;
  try {
    r.run();
    ref = r.reference(i, &cfg);
    r.poison_outputs(i, &cfg);
    r.run_stage(i, &cfg);
  } catch (const KernelHostFault& x) {
    s.why = x.what();  // passed its trial, failed on a later run
    return s;
  }
  s.diff = r.compare(i, ref, cfg.math, &cfg);
  s.pass = s.diff.pass();
  if (!s.pass) {
    s.mismatches = first_mismatches(r, cfg, ref, s.diff.limit);
    s.why = !s.diff.fail.empty()
                ? s.diff.fail
                : std::to_string(s.diff.over) + " values over the limit" +
                      fmt(" %.3g", s.diff.limit) + fmt(" (max |error| %.3g)", s.diff.max_abs);
  }
  return s;
}

// The time on bench's input beside every built-in step (measured in this run), the timed runs'
// own output checked (poisoned before each run), the place in the ladder, the target, and the
// explanation against the nearest step, into j["timing"] and j["explanation"].
void time_and_place(const Exercise& e, const ExerciseSubmitOptions& o, const HostImage& frame,
                    const std::string& input, nlohmann::ordered_json& j, bool& correct,
                    std::string& failing) {
  const auto size = parse_wxh(e.bench_size);
  std::ostringstream log;
  LiveHosting hosting;  // outlives the runner that launches through it
  const PipelineConfig p = exercise_pipeline(e, o.kernel, size->x, size->y, frame, log, hosting);
  Runner r(Backend::Cuda);
  r.set_remote(hosting.launches.get());
  r.configure(p, frame.desc());
  r.set_input(frame);
  r.run();
  const size_t i = stage_index(r, e.stage);
  fill_fused_slots(r, i);
  std::unique_ptr<CounterCollector> counters;
  if (o.counters) {
    counters = std::make_unique<CounterCollector>();
    if (!counters->unavailable().empty()) counters.reset();
  }
  MeasureOptions m;
  m.reps = o.reps;
  CopyCeiling copy;
  Ladder l;
  l.op = e.stage;
  l.copy_gbs = measure_copy_bandwidth();
  const ResolvedStage user = r.stages()[i];
  for (const ResolvedStage& cfg : ladder_configs(r, i, LadderSpec{})) {
    if (cfg.variant == user.variant) continue;
    if (cfg.variant_def().ceiling && l.ceiling_variant.empty())
      l.ceiling_variant = cfg.variant_def().name;
    try {
      l.steps.push_back(measure_step(r, i, cfg, m, counters.get(), copy));
    } catch (const Error& x) {
      if (x.kind() != ErrorKind::Refused) throw;
    }
  }
  // The learner's kernel: outputs poisoned before every run, the last timed run's output
  // checked before anything else runs (counters replay it after).
  const std::vector<HostImage> ref = r.reference(i, &user);
  MeasureOptions mu = m;
  mu.poison_each = true;
  LadderStep us = measure_step(r, i, user, mu, nullptr, copy);
  const DiffStats timed = r.compare(i, ref, user.math, &user);
  if (counters) {
    us.counters = collect_counters(r, *counters, i, &user);
    us.counted = us.counters.report.ok;
  }
  const double pct = l.pct_of_ceiling(us);
  std::vector<const LadderStep*> order;
  for (const LadderStep& s : l.steps) order.push_back(&s);
  std::sort(order.begin(), order.end(), [](const LadderStep* a, const LadderStep* b) {
    return a->median_us() > b->median_us();
  });
  std::string place = "faster than every built-in step";
  for (size_t k = 0; k < order.size(); ++k)
    if (order[k]->median_us() <= us.median_us()) {
      place = k == 0 ? "slower than every built-in step"
                     : "between " + order[k - 1]->cfg.variant_def().name + " and " +
                           order[k]->cfg.variant_def().name;
      break;
    }
  const LadderStep* nearest = nullptr;
  for (const LadderStep& s : l.steps)
    if (!nearest || std::fabs(std::log(s.median_us() / us.median_us())) <
                        std::fabs(std::log(nearest->median_us() / us.median_us())))
      nearest = &s;
  double target_us = NAN;
  bool met = false;
  if (!e.target_step.empty()) {
    for (const LadderStep& s : l.steps)
      if (s.cfg.variant_def().name == e.target_step) target_us = s.median_us();
    met = us.median_us() < target_us;
  } else {
    met = pct >= e.target_pct;
  }
  if (!timed.pass()) correct = false, failing = "the timed runs' output (" + e.bench_size + ")";
  met = met && correct;  // a target is met only by a correct kernel
  nlohmann::json ladder = nlohmann::json::array();
  for (const LadderStep* s : order)
    ladder.push_back({{"step", step_text(s->cfg)}, {"median_us", json_number(s->median_us())}});
  j["timing"] = {{"input", input},
                 {"size", e.bench_size},
                 {"median_us", json_number(us.median_us())},
                 {"noise", json_number(us.meas.total.noise)},
                 {"reps", us.meas.total.n},
                 {"timed_output_pass", timed.pass()},
                 {"pct_of_ceiling", json_number(pct)},
                 {"ceiling", l.ceiling_name()},
                 {"target", e.target_text()},
                 {"target_us", json_number(target_us)},
                 {"target_met", met},
                 {"place", place},
                 {"ladder", ladder},
                 {"state", state_json(us.meas.state_start, us.meas.state_end)}};
  std::cout << "time: " << fmt("%.2f us", us.median_us()) << " median of " << us.meas.total.n
            << " runs on " << input << " at " << e.bench_size << fmt(", %.1f %% of ", pct)
            << l.ceiling_name() << "\nplace: " << place << "\ntarget: " << e.target_text()
            << (e.target_step.empty() ? "" : fmt(" (%.2f us)", target_us))
            << (met ? ": met" : ": not met") << "\n";
  if (!timed.pass())
    std::cout << "the timed runs' output: FAIL (" << timed.over << " values over the limit)\n";
  if (nearest) {
    const Explanation why = explain(step_facts(*nearest, true), step_facts(us, true));
    std::cout << "against the nearest built-in step:\n" << explanation_text(why, 3);
    j["explanation"] = nlohmann::json::parse(explanation_json({why}))[0];
  }
}

}  // namespace

int cmd_exercise_submit(const ExerciseSubmitOptions& o) {
  std::string ex_bytes;
  const Exercise e = read_exercise(o.exercise, &ex_bytes);
  const std::string source = read_live_file(o.kernel);
  if (pick_backend("auto") != Backend::Cuda)
    throw Error(ErrorKind::Unavailable,
                "exercise submit runs the kernel on a GPU: " + device_info().why_absent);
  // Compile once here, so that the diagnostics are shown once and a kernel that does not compile
  // is a data error, not a failed size.
  const LiveOptions lo = read_live_options(source, LiveOptions{});
  const LiveBuild build = live_compile(source, lo, o.kernel);
  for (const LiveDiagnostic& d : build.diagnostics)
    std::cerr << o.kernel << ":" << d.line << ": " << (d.error ? "error" : "warning") << ": "
              << d.message << "\n";
  if (!build.ok) throw Error(ErrorKind::Data, o.kernel + " does not compile (messages above)");
  const std::string out_path = o.out.empty() ? o.kernel + ".result.json" : o.out;
  check_output_path(out_path);
  // The timed input, read now: a missing one is the exercise's fault, said before any work.
  const std::string input = e.bench_input == "default" ? default_bench_input() : e.bench_input;
  const HostImage frame =
      input == "synthetic" ? io::synthetic_frame(1920, 1080) : io::load_image(input);

  const std::string nonce = o.nonce.empty() ? random_hex(8) : o.nonce;
  if (!is_hex(nonce)) throw Error(ErrorKind::Usage, "exercise submit --nonce: hex digits");
  const std::string digest = sha256_hex(e.salt + ":" + nonce);
  std::mt19937_64 rng(std::stoull(digest.substr(0, 16), nullptr, 16));
  const int tx = lo.block.x * lo.px, ty = lo.block.y * lo.rows;
  struct Class {
    const char* name;
    int w, h;
  };
  const Class classes[] = {
      {"1x1", 1, 1},
      {"tile-1", std::max(1, tx - 1), std::max(1, ty - 1)},
      {"tile+1", tx + 1, ty + 1},
      {"odd", draw_odd(rng, 101, 1999), draw_odd(rng, 101, 1199)},
      {"prime", draw_prime(rng, 211, 1999), draw_prime(rng, 211, 1199)},
      {"4k", 3840, 2160},
  };
  std::cout << "exercise: " << e.title << "\nkernel: " << o.kernel << " (block " << lo.block.str()
            << ", tile " << tx << "x" << ty << ")\nchecks (sizes and values drawn from the "
            << "exercise's salt and nonce " << nonce << "):\n";
  std::vector<SizeCheck> checks;
  bool correct = true;
  std::string failing;
  for (const Class& c : classes) {
    checks.push_back(check_size(e, o.kernel, c.name, c.w, c.h, rng));
    const SizeCheck& s = checks.back();
    std::printf("  %-7s %5dx%-5d %s%s%s\n", s.cls.c_str(), s.w, s.h, s.pass ? "ok" : "FAIL",
                s.why.empty() ? "" : ": ", s.why.c_str());
    for (const std::string& m : s.mismatches) std::printf("          %s\n", m.c_str());
    if (!s.pass && correct)
      correct = false, failing = s.cls + " " + std::to_string(s.w) + "x" + std::to_string(s.h);
  }

  nlohmann::ordered_json j;
  j["format"] = kResultFormat;
  j["exercise"] = {{"path", o.exercise},
                   {"sha256", sha256_hex(ex_bytes)},
                   {"stage", e.stage},
                   {"title", e.title}};
  j["kernel"] = {{"path", o.kernel}, {"sha256", sha256_hex(source)}};
  j["lab_version"] = LAB_VERSION;
  const DeviceInfo& dev = device_info();
  const DeviceState state0 = read_device_state();
  j["device"] = {{"name", dev.name}, {"arch", dev.arch()}, {"state", state_json(state0, state0)}};
  j["nonce"] = nonce;
  j["nonce_supplied"] = !o.nonce.empty();  // a replayed draw, not a fresh one
  nlohmann::json cj = nlohmann::json::array();
  for (const SizeCheck& s : checks)
    cj.push_back({{"class", s.cls},
                  {"width", s.w},
                  {"height", s.h},
                  {"pass", s.pass},
                  {"why", s.why},
                  {"max_abs", json_number(s.diff.max_abs)},
                  {"limit", json_number(s.diff.limit)},
                  {"over", s.diff.over},
                  {"first_mismatches", s.mismatches}});
  j["checks"] = cj;
  j["correct"] = correct;
  j["failing_size"] = failing;

  if (correct) {
    try {
      time_and_place(e, o, frame, input, j, correct, failing);
    } catch (const CudaError&) {
      throw;  // the context is gone: exit 70 (the kernel host will make this one frame's loss)
    } catch (const Error& x) {  // the trial at the bench size, an unwritten output
      correct = false, failing = "bench " + e.bench_size + " (" + x.what() + ")";
      std::cout << "timing: " << x.what() << "\n";
    }
    j["correct"] = correct;
    j["failing_size"] = failing;
  }
  if (sha256_hex(read_live_file(o.kernel)) != sha256_hex(source))
    throw Error(ErrorKind::Data, o.kernel + " changed while it was being submitted");
  std::cout << (correct ? "correct" : "NOT correct: fails at " + failing) << "\n";
  write_output_file(out_path, j.dump(2) + "\n");
  std::cout << "result: " << out_path << "\n";
  return correct ? 0 : 1;
}

// ---- grade -----------------------------------------------------------------------------------

int cmd_exercise_grade(const ExerciseGradeOptions& o) {
  std::string ex_bytes;
  const Exercise e = read_exercise(o.exercise, &ex_bytes);
  const std::string sha = sha256_hex(ex_bytes);
  std::ostringstream table;
  if (o.csv)
    table << "result,kernel_sha256,correct,failing_size,median_us,pct_of_ceiling,target_met,place,"
             "device,lab_version\n";
  else
    table << e.title << "\n"
          << "result                        kernel        correct  "
          << "median us  % ceil  target  place\n";
  int refused = 0;
  for (const std::string& path : o.results) {
    // Every field read here, as its type: a result of the wrong shape is refused, not a crash.
    struct Row {
      std::string kernel, failing, place, device, version;
      bool correct = false, met = false;
      double us = NAN, pct = NAN;
    } row;
    try {
      const nlohmann::json j = nlohmann::json::parse(read_small_file(path, "result"));
      if (!j.is_object() || j.value("format", "") != kResultFormat)
        throw Error(ErrorKind::Data, "not an exercise result");
      if (j.at("exercise").at("sha256").get<std::string>() != sha)
        throw Error(ErrorKind::Data, "made for another exercise (or another version of it)");
      row.kernel = j.at("kernel").at("sha256").get<std::string>();
      row.correct = j.at("correct").get<bool>();
      row.failing = j.value("failing_size", "");
      row.version = j.value("lab_version", "");
      if (j.contains("device")) row.device = j.at("device").value("name", "");
      if (row.correct) {
        const nlohmann::json& t = j.at("timing");
        row.us = t.at("median_us").is_number() ? t["median_us"].get<double>() : NAN;
        row.pct = t.contains("pct_of_ceiling") && t["pct_of_ceiling"].is_number()
                      ? t["pct_of_ceiling"].get<double>()
                      : NAN;
        row.met = t.value("target_met", false);
        row.place = t.value("place", "");
      }
    } catch (const std::exception& x) {
      std::cerr << "exercise grade: refused " << printable(path) << ": " << x.what() << "\n";
      ++refused;
      continue;
    }
    if (o.csv) {
      table << csv_text(path) << "," << row.kernel << "," << (row.correct ? 1 : 0) << ","
            << csv_text(row.failing) << "," << csv_num(row.us) << "," << csv_num(row.pct) << ","
            << (row.met ? 1 : 0) << "," << csv_text(row.place) << "," << csv_text(row.device) << ","
            << csv_text(row.version) << "\n";
    } else {
      char line[512];
      std::snprintf(line, sizeof line, "%-29s %-13s %-8s %9s  %6s  %-6s  %s\n",
                    printable(path).substr(0, 29).c_str(), row.kernel.substr(0, 12).c_str(),
                    row.correct ? "yes" : "NO", format_or_dash("%.2f", row.us).c_str(),
                    format_or_dash("%.1f", row.pct).c_str(), row.met ? "met" : "-",
                    row.correct ? row.place.c_str() : ("fails at " + row.failing).c_str());
      table << line;
    }
  }
  if (o.out.empty())
    std::cout << table.str();
  else
    write_output_file(o.out, table.str());
  return refused ? 65 : 0;
}

}  // namespace lab::app
