// list, check, bench, run: thin loops over the registry and the runner.
#include "commands.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "bench_report.h"
#include "explain.h"
#include "capture.h"
#include "frame_source.h"
#include "keypoint_slots.h"
#include "ladder.h"
#include "npy.h"
#include "output_file.h"
#include "live.h"
#include "frame_budget.h"
#include "measure.h"
#include "paths.h"
#include "presets.h"
#include "printable.h"
#include "stats.h"
#include "kernel_host.h"

namespace lab::app {

std::string default_bench_input() {
  const std::string dir = test_data_dir();
  const std::filesystem::path img = std::filesystem::path(dir) / "box_in_scene.png";
  std::error_code ec;
  if (!dir.empty() && std::filesystem::is_regular_file(img, ec)) return img.string();
  std::cerr << "bench: no test image beside this executable (share/kernel-lab/data or "
               "tests/data): timing the synthetic scene, which flatters top-K; --input chooses\n";
  return "synthetic";
}

namespace {

bool selected(const std::vector<std::string>& only, const std::string& name) {
  return only.empty() || std::find(only.begin(), only.end(), name) != only.end();
}

// `c` with the on-demand stages `names` selects (bench --stage detect adds detect).
CommonOptions with_stages(CommonOptions c, const std::vector<std::string>& names) {
  for (const auto& n : names)
    for (const Op& op : registry())
      if (op.def.name == n && (op.pipelines & LAB_ON_DEMAND)) c.add_stages.push_back(n);
  return c;
}

// Every --stage must name a stage of the pipeline that runs (not only an op the lab knows).
void check_stage_names(const std::vector<std::string>& names, const CommonOptions& c) {
  if (names.empty()) return;
  const PipelineConfig p = build_pipeline(c);
  std::string known;
  for (const StageConfig& s : p.stages) known += (known.empty() ? "" : ", ") + s.op;
  for (const auto& n : names) {
    find_op(n);  // throws Usage for a name the lab does not know at all
    bool found = false;
    for (const StageConfig& s : p.stages) found = found || s.op == n;
    if (!found)
      throw Error(ErrorKind::Usage,
                  "--stage " + n + ": not a stage of this pipeline (its stages: " + known + ")");
  }
}

std::string device_line(Backend b) {
  const DeviceInfo& d = device_info();
  if (b == Backend::Cpu)
    return d.present ? "device: cpu (CPU references; --device cuda uses " + d.name + ")"
                     : "device: cpu (no CUDA device: " + d.why_absent + ")";
  std::ostringstream s;
  s << "device: " << d.name << " (" << d.arch() << ", " << d.sms << " SMs, "
    << fmt("%.1f", double(d.global_mem) / (1 << 30)) << " GiB, "
    << (d.integrated ? "integrated" : "discrete") << ")";
  return s.str();
}

struct Session {
  PipelineConfig pipeline;
  Runner runner;
  std::unique_ptr<io::FrameSource> source;  // null for a playground
  std::shared_ptr<const HostImage> input;   // the first frame (null for a playground)
  size_t skipped = 0;
  const Op* lab = nullptr;  // the playground, when the pipeline is one
  std::string describe() const {
    return source ? source->describe() : lab->def.name + " playground, inputs " + lab_in.describe();
  }
  LabInputs lab_in;
  double input_read_ms = 0;  // the source's read of the first frame
  LiveHosting hosting;       // a live kernel's host, when --kernel-file installed one
};

// What the kernel host cost the frames so far ("" without one, or before a frame ran there).
std::string host_summary(const Session& s) {
  return s.hosting.launches ? s.hosting.launches->summary() : "";
}

// The next frame of a source read directly (files, synthetic, the first frame of a camera),
// skipping corrupt frames, up to a bound.
io::Frame next_frame(io::FrameSource& src, size_t& skipped) {
  io::Frame f;
  for (int tries = 0; tries < 100; ++tries) {
    const auto t0 = std::chrono::steady_clock::now();
    const io::ReadResult r = src.read(f);
    f.read_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    switch (r) {
      case io::ReadResult::Frame:
        return f;
      case io::ReadResult::Skip:
        ++skipped;
        continue;
      case io::ReadResult::Stall:
        continue;
      case io::ReadResult::Lost:
        throw Error(ErrorKind::NoInput, src.last_problem().empty() ? src.describe() + ": no frame"
                                                                   : src.last_problem());
    }
  }
  throw Error(ErrorKind::Data,
              src.describe() + ": no decodable frame in 100 tries (" + src.last_problem() + ")");
}

// Opens the input, reads its first frame, builds and configures the pipeline.
std::unique_ptr<Session> open_session(const CommonOptions& c) {
  PipelineConfig p = build_pipeline(c);
  const Backend b = pick_backend(c.device);
  if (const Op* lab = playground_of(p)) {
    LiveHosting hosting = install_live_kernel(p, c, b, nullptr);
    // A playground: inputs generated from the size and seed, no frame source.
    auto s = std::unique_ptr<Session>(
        new Session{std::move(p), Runner(b), nullptr, {}, 0, lab, {}, 0, {}});
    s->hosting = std::move(hosting);
    s->runner.set_remote(s->hosting.launches.get());
    s->lab_in = make_lab_inputs(*lab, c.size, c.seed);
    s->runner.configure_lab(s->pipeline, s->lab_in);
    if (c.graph && b == Backend::Cuda) s->runner.set_graph(true);
    return s;
  }
  const UploadMode upload = b == Backend::Cuda ? pick_upload(c.upload) : UploadMode::Pageable;
  // Pinned and mapped upload: sources decode straight into page-locked frames, sent with no
  // staging copy or (mapped) read by the kernels where they are.
  set_frame_memory_pinned(upload == UploadMode::Pinned || upload == UploadMode::Mapped);
  io::SourceOptions so;
  so.max_pixels = c.max_pixels;
  so.accept_truncated = c.accept_truncated;
  auto source = io::open_source(c.input, so);
  size_t skipped = 0;
  io::Frame first = next_frame(*source, skipped);
  std::shared_ptr<const HostImage> in = first.image;
  LiveHosting hosting = install_live_kernel(p, c, b, in.get());  // its trial: on this frame
  auto s = std::unique_ptr<Session>(new Session{
      std::move(p), Runner(b), std::move(source), std::move(in), skipped, nullptr, {}, 0, {}});
  s->hosting = std::move(hosting);
  s->runner.set_remote(s->hosting.launches.get());
  s->input_read_ms = first.read_ms;
  if (b == Backend::Cuda) s->runner.set_upload_mode(upload);
  s->runner.configure(s->pipeline, s->input->desc());
  s->runner.set_input(*s->input);
  if (c.graph && b == Backend::Cuda)
    s->runner.set_graph(true);
  else if (c.graph)
    std::cerr << "kernel-lab: --graph: no CUDA graph on the CPU references; running them "
                 "stage by stage\n";
  return s;
}

std::string bad_pixel(const DiffStats& d) {
  if (d.bad_x < 0) return "-";
  return d.bad_slot + "(" + std::to_string(d.bad_x) + "," + std::to_string(d.bad_y) + ")";
}

}  // namespace

LiveHosting install_live_kernel(PipelineConfig& p, const CommonOptions& c, Backend b,
                                const HostImage* frame, std::ostream& log) {
  if (c.kernel_file.empty() != c.replace.empty())
    throw Error(ErrorKind::Usage, "--kernel-file and --replace STAGE go together");
  if (c.kernel_file.empty()) return {};
  StageConfig* stage = nullptr;
  for (StageConfig& s : p.stages)
    if (s.op == c.replace) stage = &s;
  if (!stage) throw Error(ErrorKind::Usage, "--replace " + c.replace + ": no such stage here");
  const Op& base = find_op(c.replace);
  const std::string why = live_refusal(base);
  if (!why.empty()) throw Error(ErrorKind::Usage, "--replace " + c.replace + ": " + why);
  const std::string source = read_live_file(c.kernel_file);
  const LiveOptions opts = read_live_options(source, LiveOptions{});
  const LiveBuild build = live_compile(source, opts, c.kernel_file);
  for (const LiveDiagnostic& d : build.diagnostics)
    std::cerr << c.kernel_file << ":" << d.line << ": " << (d.error ? "error" : "warning") << ": "
              << d.message << "\n";
  if (!build.ok)
    throw Error(ErrorKind::Data, c.kernel_file + " does not compile (" +
                                     std::to_string(build.diagnostics.size()) +
                                     " message(s) above)");
  log << "kernel: " << c.kernel_file << " compiled in " << fmt("%.0f", build.compile_ms)
      << " ms for sm_" << build.arch << ", block " << opts.block.str() << ": "
      << build.resources.str() << " (ptxas)\n";
  if (b != Backend::Cuda) {
    std::cerr << "kernel-lab: " << c.kernel_file
              << " compiles; without a GPU it cannot run (the CPU references run)\n";
    return {};
  }
  // The trial: one run in a child process, on this input, before the kernel may enter.
  TrialRequest req;
  req.build = build;
  req.stage = c.replace;
  req.pipeline = preset_to_json(p);
  if (frame) req.frame = *frame;
  req.lab_size = c.size, req.lab_seed = c.seed;
  TrialLimits limits;
  limits.timeout_s = c.trial_timeout_s;
  limits.memcheck = c.trial_memcheck;
  LiveHosting h;
  h.host = std::make_unique<KernelHost>(trial_command());
  const TrialReport rep = h.host->run(req, limits);
  for (const MemcheckFinding& f : rep.memcheck)
    std::cerr << c.kernel_file << ":" << f.line << ": memcheck: " << f.text << "\n";
  if (!rep.passed())
    throw Error(rep.outcome == TrialOutcome::Unwritten ? ErrorKind::Data : ErrorKind::Internal,
                c.kernel_file + ": the trial run " + trial_outcome_name(rep.outcome) + ": " +
                    rep.message + " (it was not installed)");
  log << "kernel: trial passed in " << fmt("%.0f", rep.trial_ms) << " ms"
      << (rep.memchecked ? " under memcheck (no finding)" : "") << ": " << rep.message << "\n";
  const auto t0 = std::chrono::steady_clock::now();
  // Its frames run in the trial's child, kept warm (under memcheck the trial had its own).
  const TrialReport inst = h.host->install(build, limits);
  if (!inst.passed())
    throw Error(ErrorKind::Internal, c.kernel_file + ": the kernel host " +
                                         trial_outcome_name(inst.outcome) + ": " + inst.message);
  const HostTransport transport = host_transport_for(device_info().integrated);
  h.launches = std::make_unique<HostedLaunches>(*h.host, transport, c.frame_deadline_s);
  log << "kernel: runs in the kernel host (process " << h.host->child_pid() << ", slots by "
      << host_transport_name(transport) << ", frame deadline " << fmt("%g", c.frame_deadline_s)
      << " s)\n";
  // Loaded here too, never run here: its attributes (registers, shared memory) for the views.
  auto kernel = std::make_shared<LiveKernel>(build);
  stage->custom = make_live_op(base, kernel);
  stage->variant = "user";
  stage->block.reset();
  log << "kernel: loaded in " << fmt("%.1f", kernel->load_ms()) << " ms; " << kernel->regs
      << " registers, " << kernel->static_smem << " B shared, " << kernel->local_bytes
      << " B local (spills) per thread; compile to loaded "
      << fmt("%.0f", build.compile_ms + std::chrono::duration<double, std::milli>(
                                            std::chrono::steady_clock::now() - t0)
                                            .count())
      << " ms\n";
  return h;
}

size_t stage_index(const Runner& r, const std::string& name) {
  for (size_t i = 0; i < r.stages().size(); ++i)
    if (r.stages()[i].op->def.name == name) return i;
  throw Error(ErrorKind::Usage, printable(name) + " is not a stage of this pipeline");
}

// ---- explain ---------------------------------------------------------------------------------

namespace {

// STAGE=VARIANT[/WxH][/precise|fast], read before anything runs; throws Error(Usage).
struct ExplainSpec {
  const Op* op = nullptr;
  size_t variant = 0;
  std::optional<Block> block;
  std::optional<MathMode> math;
};

ExplainSpec parse_explain_spec(const std::string& spec) {
  const size_t eq = spec.find('=');
  if (eq == std::string::npos)
    throw Error(ErrorKind::Usage,
                "explain " + printable(spec) + ": expected STAGE=VARIANT, e.g. blur=v4_rows");
  ExplainSpec e;
  e.op = &find_op(spec.substr(0, eq));
  std::vector<std::string> parts;
  std::stringstream rest(spec.substr(eq + 1));
  for (std::string p; std::getline(rest, p, '/');) parts.push_back(p);
  const int v = parts.empty() ? -1 : e.op->find_variant(parts[0]);
  if (v < 0) {
    std::string names;
    for (const VariantDef& vd : e.op->def.variants) names += (names.empty() ? "" : ", ") + vd.name;
    throw Error(ErrorKind::Usage, "explain " + printable(spec) + ": no such variant of " +
                                      e.op->def.name + " (" + names + ")");
  }
  e.variant = size_t(v);
  for (size_t k = 1; k < parts.size(); ++k) {
    if (parts[k] == "precise" || parts[k] == "fast")
      e.math = parts[k] == "fast" ? MathMode::Fast : MathMode::Precise;
    else if (const auto b = parse_wxh(parts[k]))
      e.block = *b;
    else
      throw Error(ErrorKind::Usage, "explain " + printable(spec) + ": '" + printable(parts[k]) +
                                        "' is neither a block WxH nor precise or fast");
  }
  const VariantDef& vd = e.op->def.variants[e.variant];
  const std::string why = block_refusal(vd, e.block.value_or(vd.default_block), nullptr);
  if (!why.empty()) throw Error(ErrorKind::Usage, "explain " + printable(spec) + ": " + why);
  return e;
}

// Stage i as configured, with the spec's variant, block (else the variant's default) and math.
ResolvedStage explain_config(const Runner& r, size_t i, const ExplainSpec& e) {
  ResolvedStage cfg = r.stages()[i];
  cfg.variant = e.variant;
  cfg.block = e.block.value_or(cfg.variant_def().default_block);
  if (e.math) cfg.math = *e.math;
  const DeviceInfo& d = device_info();
  const std::string why = block_refusal(cfg.variant_def(), cfg.block, d.present ? &d : nullptr);
  if (!why.empty()) throw Error(ErrorKind::Refused, cfg.label() + ": " + why);
  return cfg;
}

}  // namespace

int cmd_explain(const CommonOptions& common, const ExplainOptions& o) {
  if (o.specs.empty() == o.ladder.empty())
    throw Error(ErrorKind::Usage,
                "explain: give two configurations (STAGE=VARIANT STAGE=VARIANT) or --ladder");
  std::string stage;
  std::vector<ExplainSpec> specs;
  if (!o.specs.empty()) {
    if (o.specs.size() != 2)
      throw Error(ErrorKind::Usage, "explain: two configurations, A then B, of one stage");
    for (const std::string& spec : o.specs) specs.push_back(parse_explain_spec(spec));
    if (specs[0].op != specs[1].op)
      throw Error(ErrorKind::Usage, "explain: A and B must be configurations of one stage");
    stage = specs[0].op->def.name;
  }
  std::vector<std::string> only = o.ladder;
  if (!stage.empty()) only = {stage};
  if (only.size() == 1 && only[0] == "all") only.clear();
  const CommonOptions c = with_stages(common, only);
  check_stage_names(only, c);
  auto s = open_session(c);
  Runner& r = s->runner;
  if (r.backend() == Backend::Cpu)
    throw Error(
        ErrorKind::Unavailable,
        "explain compares GPU kernels: no CUDA device in use (" +
            (device_info().present ? std::string("--device cpu") : device_info().why_absent) + ")");
  std::unique_ptr<CounterCollector> counters;
  std::string no_counters = "counters were not asked for (--no-counters)";
  if (o.counters) {
    counters = std::make_unique<CounterCollector>();
    no_counters = counters->unavailable();
    if (!no_counters.empty()) counters.reset();
  }
  auto facts = [&](const LadderStep& step) {
    StepFacts f = step_facts(step, o.sass);
    if (!f.counted && !counters) f.counters_why = no_counters;
    return f;
  };
  r.run();
  std::vector<Explanation> out;
  CopyCeiling copy;
  if (!stage.empty()) {
    const size_t i = stage_index(r, stage);
    fill_fused_slots(r, i);
    const ResolvedStage a = explain_config(r, i, specs[0]), b = explain_config(r, i, specs[1]);
    const LadderStep sa = measure_step(r, i, a, o.measure, counters.get(), copy);
    const LadderStep sb = measure_step(r, i, b, o.measure, counters.get(), copy);
    out.push_back(explain(facts(sa), facts(sb)));
    out.back().stage = stage;
  } else {
    for (size_t i = 0; i < r.stages().size(); ++i) {
      const std::string& name = r.stages()[i].op->def.name;
      if (!selected(only, name)) continue;
      fill_fused_slots(r, i);
      const Ladder l = run_ladder(r, i, LadderSpec{}, o.measure, counters.get());
      for (const std::string& n : l.notes) std::cerr << "explain: " << name << ": " << n << "\n";
      std::vector<StepFacts> steps;
      for (const LadderStep& st : l.steps) steps.push_back(facts(st));
      for (Explanation& e : explain_steps(steps)) {
        e.stage = name;
        out.push_back(std::move(e));
      }
    }
  }
  std::ostringstream text;
  if (o.json) {
    text << explanation_json(out);
  } else {
    text << device_line(r.backend()) << "\ninput: " << s->describe() << "; median of "
         << o.measure.reps << " timed runs after " << o.measure.warmup
         << " warm-up, L2-warm; counters DRAM-cold"
         << (counters ? "" : " (none here: " + no_counters + ")") << "\n";
    for (size_t k = 0; k < out.size(); ++k)
      text << "\n== " << out[k].stage << "\n" << explanation_text(out[k]);
  }
  if (o.out.empty())
    std::cout << text.str();
  else
    write_output_file(o.out, text.str());
  return 0;
}

int cmd_copy(const CopyOptions& o) {
  const size_t eq = o.spec.find('=');
  if (eq == std::string::npos)
    throw Error(ErrorKind::Usage, "copy " + o.spec + ": expected STAGE=VARIANT, e.g. blur=v4_rows");
  const Op& op = find_op(o.spec.substr(0, eq));
  const int v = op.find_variant(o.spec.substr(eq + 1));
  if (v < 0)
    throw Error(ErrorKind::Usage,
                "copy: no variant " + o.spec.substr(eq + 1) + " of " + op.def.name);
  const VariantDef& vd = op.def.variants[size_t(v)];
  Block block = vd.default_block;
  if (!o.block.empty()) {
    const auto b = parse_wxh(o.block);
    if (!b) throw Error(ErrorKind::Usage, "copy --block " + o.block + ": expected WxH");
    block = *b;
  }
  const std::string why = block_refusal(vd, block, nullptr);
  if (!why.empty()) throw Error(ErrorKind::Usage, "copy --block " + block.str() + ": " + why);
  const std::string src = live_copy_source(
      op, size_t(v), block, o.math == "fast" ? MathMode::Fast : MathMode::Precise, nullptr);
  if (src.empty())
    throw Error(ErrorKind::Usage,
                op.def.name + "/" + vd.name + " is not one kernel launch: it has no live copy");
  if (o.out.empty()) {
    std::cout << src;
  } else {
    write_live_file(o.out, src);
    std::cout << "wrote " << o.out << "\n";
  }
  return 0;
}

PipelineConfig build_pipeline(const CommonOptions& o) {
  PipelineConfig p = default_pipeline(o.pipeline);
  if (!o.preset.empty()) {
    // A preset the lab cannot use warns and gives the defaults, as in the GUI; a preset that
    // is not there at all is a missing input.
    std::error_code ec;
    if (!std::filesystem::exists(o.preset, ec))
      throw Error(ErrorKind::NoInput, "--preset " + o.preset + ": no such file");
    const PresetLoad loaded = load_preset(o.preset, p);
    if (!loaded.warning.empty()) std::cerr << "kernel-lab: warning: " << loaded.warning << "\n";
    p = loaded.pipeline;
  }
  // A playground's size is its problem size (make_lab_inputs), not the letterbox's.
  if (!o.size.empty() && !playground_of(p)) apply_size(p, o.size);
  for (const auto& s : o.add_stages) stage_of(p, s);
  for (const auto& s : o.variants) apply_variant(p, s);
  for (const auto& s : o.blocks) apply_block(p, s);
  for (const auto& s : o.maths) apply_math(p, s);
  for (const auto& s : o.params) apply_param(p, s);
  return p;
}

Backend pick_backend(const std::string& device) {
  const DeviceInfo& d = device_info();
  if (device == "cpu") return Backend::Cpu;
  if (device == "cuda") {
    if (!d.present)
      throw Error(ErrorKind::Unavailable,
                  "--device cuda: no usable CUDA device (" + d.why_absent + "); use --device cpu");
    return Backend::Cuda;
  }
  if (!d.present)
    std::cerr << "kernel-lab: no CUDA device (" << d.why_absent
              << "): running the CPU references only\n";
  return d.present ? Backend::Cuda : Backend::Cpu;
}

UploadMode pick_upload(const std::string& spec) {
  if (spec == "auto") return default_upload_mode();
  if (auto m = parse_upload_mode(spec)) return *m;
  throw Error(ErrorKind::Usage,
              "unknown upload mode '" + spec + "' (auto, pageable, pinned or mapped)");
}

// ---- list ------------------------------------------------------------------------------------

int cmd_list(const ListOptions& o) {
  if (o.fastest_preset) {  // examples/presets/fastest.json is this output (a test checks it)
    PipelineConfig p = default_pipeline();
    apply_fastest(p);
    std::cout << preset_to_json(p) << "\n";
    return 0;
  }
  if (o.json) {
    nlohmann::json j = nlohmann::json::array();
    for (const Op& op : registry()) {
      nlohmann::json e{{"name", op.def.name},
                       {"summary", op.def.summary},
                       {"inputs", op.def.inputs},
                       {"outputs", op.def.outputs},
                       {"tolerance_why", op.def.tol_why}};
      for (const auto& v : op.def.variants) {
        std::vector<std::string> blocks;
        for (const auto& b : v.blocks) blocks.push_back(b.str());
        e["variants"].push_back({{"name", v.name},
                                 {"delta", v.delta},
                                 {"expect", v.expect},
                                 {"ceiling", v.ceiling},
                                 {"blocks", blocks},
                                 {"default_block", v.default_block.str()},
                                 {"fuses", v.fuses},
                                 {"inputs", v.inputs.empty() ? op.def.inputs : v.inputs},
                                 {"outputs", v.outputs.empty() ? op.def.outputs : v.outputs},
                                 {"approx", v.approx},
                                 {"runs_when", v.runs_when}});
      }
      if (op.def.lab_inputs)
        e["playground"] = {{"story", op.def.story},
                           {"size", op.def.lab_size_help},
                           {"default_size", op.def.lab_default_size}};
      e["params"] = nlohmann::json::array();
      for (const auto& p : op.def.params)
        e["params"].push_back({{"name", p.name},
                               {"min", p.min},
                               {"max", p.max},
                               {"default", p.def},
                               {"integer", p.integer},
                               {"help", p.help}});
      j.push_back(e);
    }
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  for (const Op& op : registry()) {
    const auto& d = op.def;
    std::string io;
    for (const auto& s : d.inputs) io += (io.empty() ? "" : ", ") + s;
    io += " -> ";
    for (size_t k = 0; k < d.outputs.size(); ++k) io += (k ? ", " : "") + d.outputs[k];
    std::cout << d.name << (d.lab_inputs ? " (playground, --lab " + d.name + ")" : "") << ": "
              << d.summary << "\n  slots: " << io << "\n";
    if (d.lab_inputs)
      std::cout << "  lesson: " << d.story << "\n  size: " << d.lab_size_help << " (default "
                << d.lab_default_size << ")\n";
    if (d.compare)  // the op's own comparison: its bound is in tol_why
      std::cout << "  tolerance: " << d.tol_why << "\n";
    else
      std::cout << "  tolerance: precise abs " << d.tol_precise.abs << " + rel "
                << d.tol_precise.rel << " x max|ref|, fast abs " << d.tol_fast.abs << " + rel "
                << d.tol_fast.rel << " (" << d.tol_why << ")\n";
    for (size_t v = 0; v < d.variants.size(); ++v) {
      const auto& vd = d.variants[v];
      std::cout << "  " << (v == op.default_variant() ? "*" : " ") << " " << vd.name << ": "
                << vd.delta
                << (vd.ceiling && vd.delta.find("ceiling") == std::string::npos ? " (the ceiling)"
                                                                                : "")
                << "\n";
      if (!vd.expect.empty()) std::cout << "      expect: " << vd.expect << "\n";
      if (!vd.runs_when.empty())
        std::cout << "      runs another step's code: " << vd.runs_when << "\n";
      if (!vd.fuses.empty() || !vd.inputs.empty() || !vd.outputs.empty()) {
        std::string fuses, in, out;
        for (const auto& s : vd.fuses) fuses += (fuses.empty() ? "" : ", ") + s;
        for (const auto& s : vd.inputs.empty() ? d.inputs : vd.inputs)
          in += (in.empty() ? "" : ", ") + s;
        for (const auto& s : variant_outputs(op, v)) out += (out.empty() ? "" : ", ") + s;
        std::cout << "      slots: " << in << " -> " << out
                  << (fuses.empty() ? "" : "; does the work of " + fuses + " (skipped)") << "\n";
      }
      if (!vd.approx.empty()) std::cout << "      compared: " << vd.approx << "\n";
      std::cout << "      blocks:";
      for (const auto& b : vd.blocks)
        std::cout << " " << b.str() << (b == vd.default_block ? "*" : "");
      std::cout << "\n";
    }
    for (const auto& p : d.params)
      std::cout << "  param " << p.name << " = " << p.def << " in [" << p.min << ", " << p.max
                << "]" << (p.integer ? " (integer)" : "") << ": " << p.help << "\n";
  }
  std::cout << "(* default variant / block)\n";
  const std::string examples = examples_dir();
  std::cout << "live-kernel examples: " << (examples.empty() ? "(not found)" : examples) << "\n";
  const std::string data = test_data_dir();
  std::cout << "test images (bench's default input): " << (data.empty() ? "(not found)" : data)
            << "\n";
  return 0;
}

// ---- check -----------------------------------------------------------------------------------

int cmd_check(const CommonOptions& common, const CheckOptions& o) {
  const CommonOptions c = with_stages(common, o.stages);
  check_stage_names(o.stages, c);
  auto s = open_session(c);
  Runner& r = s->runner;
  std::cout << device_line(r.backend()) << "\ninput: " << s->describe() << "\n";

  if (r.backend() == Backend::Cpu) {
    // No kernels to check: run the references with poisoned outputs and make sure every value
    // is written and finite.
    for (size_t i = 0; i < r.stages().size(); ++i) r.poison_outputs(i);
    r.run();
    int bad = 0;
    for (size_t i = 0; i < r.stages().size(); ++i) {
      const auto& st = r.stages()[i];
      if (!selected(o.stages, st.op->def.name)) continue;
      if (r.skipped(i) && !r.disabled(i)) {  // its slots are the fused variant's to write
        std::printf("%-10s skipped: fused into %s\n", st.op->def.name.c_str(),
                    r.fused_into(i).c_str());
        continue;
      }
      size_t nonfinite = 0, n = 0;
      for (const auto& name : st.outputs()) {
        const HostImage img = r.read_slot(name);
        if (img.desc().type != PixelType::F32) {  // integers: every bit pattern is a value
          n += img.desc().pixels() * size_t(img.desc().channels);
          continue;
        }
        const auto v = img.view<float>();
        for (int y = 0; y < v.height; ++y)
          for (int x = 0; x < v.width; ++x, ++n) nonfinite += !std::isfinite(v.at(x, y));
      }
      bad += nonfinite != 0;
      std::printf("%-10s cpu reference  %8.2f ms  %zu values  %s\n", st.op->def.name.c_str(),
                  r.stage_ms()[i], n, nonfinite ? "FAIL: unwritten or non-finite values" : "ok");
    }
    std::printf("GPU variants not checked: no CUDA device. %s\n", bad ? "FAILED" : "references ok");
    return bad ? 1 : 0;
  }

  r.run();
  std::printf("%-10s %-18s %-6s %-8s %10s %10s %8s %6s %-18s %9s  %s\n", "stage", "variant",
              "block", "math", "max_abs", "mean_abs", "PSNR", "over", "first bad", "limit",
              "result (keypoint sets: precision, recall; descriptors: cosine similarity)");
  int total = 0, failed = 0, refused = 0;
  for (size_t i = 0; i < r.stages().size(); ++i) {
    if (!selected(o.stages, r.stages()[i].op->def.name)) continue;
    check_stage(r, i, o.quick, [&](const CheckResult& res) {
      const ResolvedStage& cfg = res.cfg;
      if (res.refused) {
        ++refused;
        std::printf("%-10s %-18s %-6s %-8s refused: %s\n", cfg.op->def.name.c_str(),
                    cfg.variant_def().name.c_str(), cfg.block.str().c_str(), math_name(cfg.math),
                    res.why.c_str());
        return;
      }
      const DiffStats& d = res.diff;
      ++total;
      failed += !d.pass();
      const std::string detail = d.detail();
      std::printf("%-10s %-18s %-6s %-8s %10.3g %10.3g %8s %6zu %-18s %9.3g  %s%s%s\n",
                  cfg.op->def.name.c_str(), cfg.variant_def().name.c_str(), cfg.block.str().c_str(),
                  math_name(cfg.math), d.max_abs, d.mean_abs,
                  std::isinf(d.psnr) ? "inf" : fmt("%.1f", d.psnr).c_str(), d.over,
                  bad_pixel(d).c_str(), d.limit, d.pass() ? "ok" : "FAIL",
                  detail.empty() ? "" : "  ", detail.c_str());
      if (!res.runs().empty()) std::printf("%-10s   runs %s\n", "", res.runs().c_str());
    });
  }
  std::printf("%d of %d configurations within tolerance%s%s\n", total - failed, total,
              refused ? (", " + std::to_string(refused) + " refused by the device").c_str() : "",
              failed ? ": FAILED" : "");
  return failed ? 1 : 0;
}

// ---- bench -----------------------------------------------------------------------------------

namespace {
void write_report(const BenchOptions& o, const std::vector<BenchRow>& rows, double copy_gbs,
                  const std::string& header, const std::vector<FrameTiming>& frames,
                  const std::string& story) {
  if (o.out.empty()) {
    print_rows(std::cout, rows, o, copy_gbs, header, frames, story);
    return;
  }
  std::ostringstream text;
  print_rows(text, rows, o, copy_gbs, header, frames, story);
  write_output_file(o.out, text.str());
}

// The per-launch rows: every configuration of every selected stage (ladder_configs: the
// configured one, or the sweeps asked for; a playground's story needs every variant), each
// timed on its own by measure_step, the ladder's one way of measuring a step, with its
// bandwidth against the device copy and, with --counters, its hardware counters (collected
// after the timed runs, never inside them).
std::vector<BenchRow> bench_stages(Session& s, const BenchOptions& o, double copy_gbs,
                                   CounterCollector* counters, std::vector<std::string>& notes) {
  Runner& r = s.runner;
  std::vector<BenchRow> rows;
  CopyCeiling copy;
  LadderSpec spec;
  spec.every_variant = o.sweep_variants || s.lab != nullptr;
  spec.every_block = o.sweep_blocks;
  spec.both_math = o.sweep_math;
  for (size_t i = 0; i < r.stages().size(); ++i) {
    if (!selected(o.stages, r.stages()[i].op->def.name)) continue;
    fill_fused_slots(r, i);  // unfused variants read slots a fused configuration never writes
    for (const ResolvedStage& cfg : ladder_configs(r, i, spec)) {
      LadderStep step;
      try {
        step = measure_step(r, i, cfg, o.measure, counters, copy);
      } catch (const Error& e) {
        if (e.kind() != ErrorKind::Refused) throw;
        std::cerr << "bench: skipped " << cfg.label() << ": " << e.what() << "\n";
        continue;
      }
      const Measurement& meas = step.meas;
      const CounterRun& cr = step.counters;
      if (meas.clock.moved()) notes.push_back(cfg.label() + ": " + meas.clock.note());
      if (step.counted)
        notes.push_back(cfg.label() + ": counters in " + std::to_string(cr.report.passes) +
                        " passes, " + fmt("%.0f ms", cr.report.ms));
      else if (counters)
        notes.push_back(cfg.label() + ": no counters: " + cr.report.why);
      auto rates = [&](BenchRow& row) {
        row.model_bytes = step.model_bytes;
        row.gbs = step.model_bytes / (row.median_us * 1e-6) / 1e9;
        row.pct_copy = 100 * row.gbs / copy_gbs;
        row.pct_copy_same = 100 * row.gbs / step.copy_same_gbs;
      };
      const auto& L = meas.launches;
      for (size_t n = 0; n < L.size(); ++n) {
        BenchRow row = bench_row(cfg, L[n].rec.kernel);
        row.median_us = L[n].t.median_us;
        row.p95_us = L[n].t.p95_us;
        row.noise = L[n].t.noise;
        row.reps = L[n].t.n;
        if (L.size() == 1) rates(row);
        row.rec = L[n].rec;
        row.library = L[n].rec.func == nullptr;
        row.state_start = meas.state_start, row.state_end = meas.state_end;
        if (n < cr.report.ranges.size())
          row.counters = cr.report.ranges[n], row.has_counters = true;
        rows.push_back(row);
      }
      if (L.size() > 1) {
        BenchRow row = bench_row(cfg, "");
        row.total = true;
        row.rec.runs = L.front().rec.runs;
        row.median_us = meas.total.median_us;
        row.state_start = meas.state_start, row.state_end = meas.state_end;
        row.p95_us = meas.total.p95_us;
        row.noise = meas.total.noise;
        row.reps = meas.total.n;
        rates(row);
        if (!cr.report.ranges.empty()) {  // the stage's DRAM traffic: its launches together
          row.has_counters = true;
          row.counters.range = cfg.label();
          const CounterValues sum = sum_counters(cr.report.ranges);
          row.counters.dram_read_bytes = sum.dram_read_bytes;
          row.counters.dram_write_bytes = sum.dram_write_bytes;
          row.counters.fp32_flops = sum.fp32_flops;
          row.counters.fp64_flops = sum.fp64_flops;
        }
        rows.push_back(row);
      }
    }
    r.run_stage(i);  // restore the configured output for the next stage
  }
  return rows;
}

// The whole pipeline: stage by stage with an event pair per launch (what the per-launch rows
// and the GUI see), stage by stage with one pair around the frame (what an application pays),
// and replayed as one CUDA graph.
std::vector<FrameTiming> bench_frames(Runner& r, const MeasureOptions& m,
                                      std::vector<std::string>& notes,
                                      std::vector<BenchRow>& in_frame) {
  std::vector<FrameTiming> frames = {
      {"frame", "stage by stage, an event pair per launch, first start to last end"},
      {"frame_stream", "stage by stage, one event pair around the frame"},
      {"frame_graph", "one CUDA graph, cudaGraphLaunch between one event pair"}};
  const FrameMode modes[] = {FrameMode::PerLaunch, FrameMode::Stream, FrameMode::Graph};
  for (size_t k = 0; k < frames.size(); ++k) {
    const Measurement meas = measure_frame(r, modes[k], m);
    // Each launch inside the whole frame: the figures the GUI's Timings panel shows (a stage
    // alone, above, keeps its input and output in the L2 from run to run; in the frame, the
    // other stages' data compete with them).
    for (const LaunchTiming& l : meas.launches) {
      BenchRow row = bench_row(r.stages()[l.rec.stage], l.rec.kernel);
      row.in_frame = true;
      row.median_us = l.t.median_us, row.p95_us = l.t.p95_us, row.noise = l.t.noise;
      row.reps = l.t.n, row.rec = l.rec, row.library = l.rec.func == nullptr;
      row.state_start = meas.state_start, row.state_end = meas.state_end;
      in_frame.push_back(row);
    }
    frames[k].median_us = meas.total.median_us;
    frames[k].p95_us = meas.total.p95_us;
    frames[k].state_start = meas.state_start, frames[k].state_end = meas.state_end;
    if (meas.clock.moved())
      notes.push_back("pipeline (" + frames[k].key + "): " + meas.clock.note());
  }
  return frames;
}

// Uploads: the frame's whole cost (host wall clock per frame: upload and pipeline) over a cycle
// of distinct frames, in each upload mode, against the frame already on the GPU. As an
// application runs it: one event pair around the frame, none per launch.
std::vector<FrameTiming> bench_uploads(Session& s, const BenchOptions& o) {
  Runner& r = s.runner;
  const int warmup = o.measure.warmup, reps = o.measure.reps;
  r.set_per_launch_timing(false);
  // A still image gives the same shared frame each time: sent from where the source holds it.
  std::vector<std::shared_ptr<const HostImage>> inputs;
  for (int k = 0; k < 8; ++k) {
    std::shared_ptr<const HostImage> f = next_frame(*s.source, s.skipped).image;
    if (f->desc() == s.input->desc()) inputs.push_back(std::move(f));
  }
  if (inputs.empty()) inputs.push_back(s.input);
  const UploadMode configured_upload = r.upload_mode();
  struct UploadCase {
    const char* key;
    int mode;  // -1: no upload
  };
  std::vector<FrameTiming> frames;
  double baseline = 0;
  for (const UploadCase& u : {UploadCase{"upload_none", -1}, UploadCase{"upload_pageable", 0},
                              UploadCase{"upload_pinned", 1}, UploadCase{"upload_mapped", 2}}) {
    if (u.mode >= 0) r.set_upload_mode(UploadMode(u.mode));
    // Pinned and mapped: the frames as the source made them (page-locked when the session's
    // upload is either); pageable: plain copies, as a plain decoder would hand them over.
    std::vector<std::shared_ptr<const HostImage>> cycle;
    for (const auto& f : inputs) {
      if (u.mode != 0 || !f->pinned()) continue;
      cycle.push_back(std::make_shared<const HostImage>(HostImage(*f)));
    }
    const auto& frames_in = cycle.empty() ? inputs : cycle;
    r.set_input(*frames_in[0]);
    std::vector<double> wall, up, stage, gpu;
    DeviceState state_start;
    for (int k = 0; k < warmup + reps; ++k) {
      if (k == warmup) state_start = read_device_state();
      const HostImage& next = *frames_in[size_t(k + 1) % frames_in.size()];
      const auto t0 = std::chrono::steady_clock::now();
      if (u.mode < 0)
        r.run();
      else if (u.mode == 1)
        r.run_overlapped(next);  // the next frame goes up while this one computes
      else
        r.set_input(next), r.run();
      const double us =
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
      if (k < warmup) continue;
      wall.push_back(us);
      gpu.push_back(1e3 * r.frame_ms());
      up.push_back(1e3 * r.upload_ms());
      stage.push_back(1e3 * r.staging_ms());
    }
    const double med = median(wall);
    if (u.mode < 0) baseline = med;
    std::string what = u.mode < 0
                           ? "the frame already on the GPU, host wall clock per frame"
                           : std::string("upload ") + upload_mode_name(UploadMode(u.mode)) +
                                 " + pipeline, host wall clock per frame (" +
                                 fmt("%.1f", 100 * (med / baseline - 1)) +
                                 " % over on-GPU; upload " + fmt("%.1f", median(up)) + " us" +
                                 (u.mode == 2 && median(up) == 0 && median(stage) == 0
                                      ? ", frames read in place, no copy"
                                  : u.mode != 1 ? ""
                                  : frames_in[0]->pinned()
                                      ? ", frames captured page-locked, no staging copy"
                                      : ", staging copy " + fmt("%.1f", median(stage)) + " us") +
                                 (u.mode == 1 ? ", overlapped with the previous frame)" : ")");
    // The GPU's own span of the frame (first launch's start to last launch's end): whether an
    // upload slows the kernels, or only the host waits.
    what += "; GPU frame " + fmt("%.1f", median(gpu)) + " us";
    // Overlapped, a frame can cost no less than the longer of its copy and its kernels.
    if (u.mode == 1)
      what += "; " + fmt("%.1f", 100 * (med / std::max(median(up), median(gpu)) - 1)) +
              " % over max(upload, GPU frame)";
    frames.push_back(
        {u.key, what, med, percentile(wall, 95), std::move(state_start), read_device_state()});
  }
  r.set_upload_mode(configured_upload);
  r.set_per_launch_timing(true);
  return frames;
}

// --print-ncu: the ncu command line for each selected stage's configured kernels.
int print_ncu(const CommonOptions& c, const BenchOptions& o) {
  PipelineConfig p = build_pipeline(c);
  install_live_kernel(p, c, Backend::Cpu, nullptr);
  const std::vector<ResolvedStage> stages = resolve(p, nullptr);
  std::string input = playground_of(p) ? "--lab " + c.pipeline : "--input " + c.input;
  if (!playground_of(p) && c.pipeline != "keypoints") input += " --pipeline " + c.pipeline;
  if (!c.size.empty()) input += " --size " + c.size;
  if (playground_of(p)) input += " --seed " + std::to_string(c.seed);
  if (!c.upload.empty() && c.upload != "auto") input += " --upload " + c.upload;
  std::cout << "# one command per stage: its configured kernels, profiled by ncu with the lab's "
               "metrics (run --frames 1 --cold launches each of them once, the L2 flushed before "
               "each as for the lab's counters; --launch-count is an upper "
               "bound for multi-kernel library calls)\n";
  for (size_t i = 0; i < stages.size(); ++i) {
    if (!selected(o.stages, stages[i].op->def.name)) continue;
    std::cout << ncu_command(self_executable(), input, stages, i, 16) << "\n";
  }
  return 0;
}
}  // namespace

int cmd_bench(const CommonOptions& common, const BenchOptions& o) {
  const CommonOptions c = with_stages(common, o.stages);
  check_stage_names(o.stages, c);
  if (o.print_ncu) return print_ncu(c, o);
  auto s = open_session(c);
  Runner& r = s->runner;
  if (r.backend() == Backend::Cpu)
    throw Error(ErrorKind::Unavailable,
                std::string(o.counters ? "--counters reads the GPU's counters"
                                       : "bench times GPU kernels") +
                    ": no CUDA device in use (" +
                    (device_info().present ? "--device cpu" : device_info().why_absent) + ")");
  std::unique_ptr<CounterCollector> counters;
  if (o.counters) {  // refused up front, with the reason, before anything is timed
    counters = std::make_unique<CounterCollector>();
    if (!counters->unavailable().empty())
      throw Error(ErrorKind::Unavailable, counters->unavailable());
  }
  const MeasureOptions& m = o.measure;
  const double copy_gbs = measure_copy_bandwidth();
  const OrinBandwidth orin = orin_bandwidth_for(read_device_state());
  std::ostringstream header;
  header << device_line(r.backend()) << "\ninput: " << s->describe() << "; warm-up " << m.warmup
         << ", median of "
         << (m.max_noise > 0 ? std::to_string(m.min_reps) + " to " + std::to_string(m.reps) +
                                   " timed runs (stopping once the median's relative standard "
                                   "error is under " +
                                   fmt("%.2f %%)", 100 * m.max_noise)
                             : std::to_string(m.reps) + " timed runs")
         << ", each launch between its own CUDA event pair, "
         << (m.queue_ahead_us > 0 ? "queued behind a " + fmt("%.0f", m.queue_ahead_us) +
                                        " us GPU-side delay (kernel time, not launch latency)"
                                  : "not queued (launch latency included)")
         << (m.cold_l2 ? "; L2 flushed before each timed run (DRAM-cold)"
                       : "; L2-warm (inputs left in the L2 by the previous run)")
         << "\ndevice copy bandwidth (cudaMemcpy D2D 256 MiB, read + write): "
         << fmt("%.1f", copy_gbs)
         << " GB/s (%copy); %cp=sz: against a copy of the stage's own bytes, measured likewise; "
            "Orin: the bytes model over "
         << fmt("%.1f", orin.gbs) << " GB/s, an estimate (" << orin.how << ")\n";

  r.run();
  std::vector<std::string> notes;
  std::vector<BenchRow> rows = bench_stages(*s, o, copy_gbs, counters.get(), notes);
  for (BenchRow& row : rows) row.orin_gbs = orin.gbs;
  if (s->lab) {  // a playground: its rows against the ceiling, and its story; no frames
    const ResolvedStage& st = r.stages()[0];
    std::vector<ImageDesc> in;
    for (const std::string& name : st.inputs())
      for (const SlotInfo& slot : r.slots())
        if (slot.name == slot_name(name)) in.push_back(slot.desc);
    add_ceiling(rows, *s->lab, s->lab->def.flops ? s->lab->def.flops(in, st.params) : 0);
    const std::string story = story_text(*s->lab, rows);
    if (const std::string h = host_summary(*s); !h.empty()) notes.push_back(h);
    for (const std::string& n : notes) header << "note: " << n << "\n";
    write_report(o, rows, copy_gbs, header.str(), {}, story);
    return 0;
  }
  std::vector<BenchRow> in_frame;
  std::vector<FrameTiming> frames = bench_frames(r, m, notes, in_frame);
  for (FrameTiming& f : bench_uploads(*s, o)) frames.push_back(std::move(f));
  if (const std::string h = host_summary(*s); !h.empty()) notes.push_back(h);
  for (const std::string& n : notes) header << "note: " << n << "\n";
  for (BenchRow& row : in_frame) row.orin_gbs = orin.gbs, rows.push_back(std::move(row));
  write_report(o, rows, copy_gbs, header.str(), frames, "");
  return 0;
}
// ---- run -------------------------------------------------------------------------------------

namespace {
// Ctrl-C or SIGTERM during `run`: the loop stops at the next frame boundary, and the run ends
// with its complete report (and dump) and 130 or 143. A signal that lands inside a long frame
// (the CPU references on a large image) or a blocking open cannot wait for that: RunWatch's
// thread then prints the report of the frames done so far and ends the process within a second.
std::atomic<int> g_signal{0};
extern "C" void on_interrupt(int sig) {
  g_signal = sig;
  std::signal(sig, SIG_DFL);  // a second one ends the process at once
}

// What `run` reports: one line per stage, then the frame line. Filled by the loop, printed by
// it at the end, or by the watchdog when a signal cannot wait for the loop.
struct RunReport {
  std::vector<std::string> heads, fixed;  // per stage: its name columns; a fixed status or ""
  std::vector<std::vector<double>> ms;    // per stage, per frame
  std::vector<double> frame;
  bool graph = false;
  const char* unit = "CPU";
  uint64_t dropped = 0;
  size_t skipped = 0;
  // One frame's budget: the source's read, the host copy and the upload (GPU runs), per frame.
  std::vector<double> read, host_copy, upload;
  double source_fps = 0;

  void print(int sig) const {
    for (size_t i = 0; i < heads.size(); ++i) {
      if (!fixed[i].empty())
        std::printf("%s%s\n", heads[i].c_str(), fixed[i].c_str());
      else
        std::printf("%s%s median %9.3f ms  p95 %9.3f ms\n", heads[i].c_str(), unit, median(ms[i]),
                    percentile(ms[i], 95));
    }
    if (sig)
      std::printf("interrupted (%s): stopping after %zu frame(s)\n",
                  sig == SIGINT ? "SIGINT" : "SIGTERM", frame.size());
    std::printf(
        "frame%s: median %.3f ms, p95 %.3f ms over %zu frame(s); %llu dropped, %zu skipped\n",
        graph ? " (CUDA graph)" : "", median(frame), percentile(frame, 95), frame.size(),
        (unsigned long long)dropped, skipped);
    if (frame.empty()) return;
    const bool gpu = std::string(unit) == "GPU";
    auto med = [](const std::vector<double>& v) { return v.empty() ? -1.0 : median(v); };
    std::printf("budget (medians, each part on its own): %s\n",
                frame_budget(med(read), gpu ? med(host_copy) : -1, gpu ? med(upload) : -1,
                             median(frame), -1, source_fps, gpu ? "GPU" : "CPU references")
                    .line()
                    .c_str());
  }
};

// Installs the handlers; its thread ends the run when a signal is not seen at a frame boundary
// within `grace`.
class RunWatch {
 public:
  RunWatch() {
    g_signal = 0;
    std::signal(SIGINT, on_interrupt);
    std::signal(SIGTERM, on_interrupt);
    m_thread = std::thread([this] { watch(); });
  }
  ~RunWatch() {
    {
      std::lock_guard<std::mutex> lock(m_mutex);
      m_done = true;
    }
    m_cv.notify_all();
    m_thread.join();
    std::signal(SIGINT, SIG_DFL);
    std::signal(SIGTERM, SIG_DFL);
  }
  // The loop's view: a frame ended (its figures are in the report), or the run is finishing
  // (the watchdog no longer acts: the loop writes the report and the dump itself).
  template <typename F>
  void update(F&& f) {
    std::lock_guard<std::mutex> lock(m_mutex);
    f(m_report);
    ++m_progress;
  }
  void finishing() {
    std::lock_guard<std::mutex> lock(m_mutex);
    m_finishing = true;
  }
  bool opened = false;  // set by the loop once the input is open
  const RunReport& report() const { return m_report; }

 private:
  void watch() {
    std::unique_lock<std::mutex> lock(m_mutex);
    uint64_t seen_progress = 0;
    auto since = std::chrono::steady_clock::time_point{};
    while (!m_cv.wait_for(lock, std::chrono::milliseconds(50), [&] { return m_done; })) {
      const int sig = g_signal;
      if (sig == 0 || m_finishing) continue;
      const auto now = std::chrono::steady_clock::now();
      if (since == std::chrono::steady_clock::time_point{} || seen_progress != m_progress)
        since = now, seen_progress = m_progress;
      if (now - since < std::chrono::milliseconds(500)) continue;
      // The loop is inside a frame or an open that does not end soon: report and stop here.
      if (m_report.heads.empty()) {
        std::fprintf(stderr, "kernel-lab: interrupted while opening the input\n");
      } else {
        m_report.print(sig);
        std::fprintf(stderr,
                     "kernel-lab: interrupted during a frame: the report above covers the "
                     "frames that ended; no dump was written\n");
      }
      std::fflush(stdout);
      std::fflush(stderr);
      std::_Exit(128 + sig);
    }
  }
  std::mutex m_mutex;
  std::condition_variable m_cv;
  RunReport m_report;
  uint64_t m_progress = 0;
  bool m_done = false, m_finishing = false;
  std::thread m_thread;
};
}  // namespace

namespace {

// Rows of the keypoint slots in the exact top-K order (score descending, then y * W + x), the
// pad rows dropped: the histogram top-K appends in no particular order, and a dump should not
// depend on the variant.
std::vector<int> keypoint_order(const HostImage& kp, int width) {
  const auto v = kp.view<float>();
  std::vector<int> rows;
  for (int i = 0; i < v.width; ++i)
    if (v.at(i, 0, 0) >= 0) rows.push_back(i);
  auto index = [&](int i) { return double(v.at(i, 0, 1)) * width + v.at(i, 0, 0); };
  std::stable_sort(rows.begin(), rows.end(), [&](int a, int b) {
    if (v.at(a, 0, 2) != v.at(b, 0, 2)) return v.at(a, 0, 2) > v.at(b, 0, 2);
    return index(a) < index(b);
  });
  return rows;
}

// The listed rows of a K-row slot (keypoints: K x 1 x 3; patches, descriptors: K x 64) as an
// N x C float image.
HostImage take_rows(const HostImage& img, const std::vector<int>& rows, bool keypoints) {
  const int cols = keypoints ? 3 : img.desc().width;
  HostImage out(ImageDesc{cols, int(rows.size()), 1, PixelType::F32});
  const auto src = img.view<float>();
  auto dst = out.view<float>();
  for (size_t r = 0; r < rows.size(); ++r)
    for (int c = 0; c < cols; ++c)
      dst.at(c, int(r)) = keypoints ? src.at(rows[r], 0, c) : src.at(c, rows[r]);
  return out;
}

}  // namespace

void dump_slots(const Runner& r, const std::string& folder) {
  // A set: every slot is written before any is put in place (output_file.h).
  OutputSet dump(folder);
  std::vector<std::string> lines;
  // Outputs of stages a fused variant did the work of, unless a stage that ran wrote them (the
  // fused front writes blur, which sample reads).
  std::set<std::string> unwritten;
  for (size_t i = 0; i < r.stages().size(); ++i)
    if (r.skipped(i) && !r.disabled(i))
      for (const auto& name : r.stages()[i].op->def.outputs) unwritten.insert(name);
  for (size_t i = 0; i < r.stages().size(); ++i)
    if (!r.skipped(i))
      for (const auto& name : r.stages()[i].outputs()) unwritten.erase(name);
  int index_width = 1;  // the top-K index y * W + x is over the NMS map
  for (const SlotInfo& s : r.slots())
    if (s.name == "nms") index_width = s.desc.width;
  std::vector<int> rows;
  bool have_rows = false;
  for (const SlotInfo& slot : r.slots()) {
    const std::string path = (std::filesystem::path(folder) / (slot.name + ".npy")).string();
    if (unwritten.count(slot.name)) {
      lines.push_back("not written: " + slot.name + " (its stage is fused into a later one)");
      continue;
    }
    HostImage img = r.read_slot(slot.name);
    if (slot.name == slots::kKeypoints) {
      rows = keypoint_order(img, index_width);
      have_rows = true;
      img = take_rows(img, rows, true);
    } else if (have_rows && (slot.name == slots::kPatches || slot.name == slots::kDescriptors)) {
      img = take_rows(img, rows, false);
    }
    io::write_npy(dump.add(slot.name + ".npy"), img);
    lines.push_back("wrote " + path + " (" + img.desc().str() + ")");
  }
  dump.commit();
  for (const std::string& l : lines) std::cout << l << "\n";
}

int cmd_run(const CommonOptions& c, const RunOptions& o) {
  // The dump's path is checked now; its folder is made only when every slot is written.
  if (!o.dump.empty()) OutputSet check_only(o.dump);
  RunWatch watch;
  auto s = open_session(c);
  Runner& r = s->runner;
  r.set_flush_before_launch(o.cold);
  std::cout << device_line(r.backend()) << "\ninput: " << s->describe() << "\n";
  watch.update([&](RunReport& rep) {
    for (size_t i = 0; i < r.stages().size(); ++i) {
      const ResolvedStage& st = r.stages()[i];
      char head[160];
      std::snprintf(head, sizeof head, "%-10s %-18s %-6s %-8s ", st.op->def.name.c_str(),
                    st.variant_def().name.c_str(), st.block.str().c_str(), math_name(st.math));
      rep.heads.push_back(head);
      rep.fixed.push_back(r.disabled(i)  ? "disabled: its input passed through, or zeros"
                          : r.skipped(i) ? "skipped: fused into " + r.fused_into(i)
                          : r.graph()    ? "in the CUDA graph (timed as a whole)"
                                         : "");
    }
    rep.ms.resize(r.stages().size());
    rep.graph = r.graph();
    rep.unit = r.backend() == Backend::Cuda ? "GPU" : "CPU";
    // A camera delivers at its own rate; files are read as fast as the pipeline takes them.
    rep.source_fps = s->source && s->source->live() ? s->source->fps() : 0;
    rep.skipped = s->skipped;
  });
  // A frame of another size (a camera's resolution changed, a slideshow of mixed sizes)
  // reallocates the slots.
  auto process = [&](const HostImage& img, double read_ms) {
    if (!s->lab) {
      if (img.desc() != r.slots()[0].desc) r.configure(s->pipeline, img.desc());
      r.set_input(img);
    }
    r.run();
    watch.update([&](RunReport& rep) {
      for (size_t i = 0; i < rep.ms.size(); ++i) rep.ms[i].push_back(r.stage_ms()[i]);
      rep.frame.push_back(r.frame_ms());
      rep.skipped = s->skipped;
      if (s->lab) return;  // generated inputs: no source, no upload
      rep.read.push_back(read_ms);
      if (r.backend() != Backend::Cuda) return;
      rep.host_copy.push_back(r.staging_ms());
      // Mapped: the host's write is the whole upload (no copy engine): one part, not two.
      if (r.upload_mode() != UploadMode::Mapped) rep.upload.push_back(r.upload_ms());
    });
  };
  auto stopped = [] { return g_signal != 0; };
  const HostImage none;  // a playground runs on its generated inputs
  try {
    process(s->lab ? none : *s->input, s->input_read_ms);
    if (s->lab) {
      // A playground: the same generated inputs, run again.
      for (int f = 1; f < o.frames && !stopped(); ++f) process(none, 0);
    } else if (!s->source->live()) {
      // Files and the synthetic scene: every frame, in order.
      for (int f = 1; f < o.frames && !stopped(); ++f) {
        const io::Frame next = next_frame(*s->source, s->skipped);
        process(*next.image, next.read_ms);
      }
    } else if (o.frames > 1) {
      // A camera runs on its own thread; the pipeline takes the newest frame, as the GUI does.
      io::SourceOptions so;
      so.max_pixels = c.max_pixels;
      so.accept_truncated = c.accept_truncated;
      std::unique_ptr<io::FrameSource> first = std::move(s->source);
      io::Capture cap([&]() -> std::unique_ptr<io::FrameSource> {
        if (first) return std::move(first);
        return io::open_source(c.input, so);
      });
      int done = 1;
      auto waited = std::chrono::milliseconds(0);
      while (done < o.frames && !stopped()) {
        io::Frame f;
        if (cap.wait_latest(f, std::chrono::milliseconds(500))) {
          process(*f.image, f.read_ms);
          ++done, waited = {};
          continue;
        }
        if (stopped()) break;
        waited += std::chrono::milliseconds(500);
        const io::CaptureStats st = cap.stats();
        std::cerr << "kernel-lab: " << capture_state_name(st.state)
                  << (st.problem.empty() ? "" : ": " + st.problem) << "\n";
        if (waited >= std::chrono::seconds(10))
          throw Error(ErrorKind::Io, "no frame for 10 s from " + c.input + ": " + st.problem);
      }
      const io::CaptureStats st = cap.stats();
      watch.update([&](RunReport& rep) {
        rep.dropped = st.dropped;
        rep.skipped = s->skipped + st.skipped;
      });
    }
  } catch (const KernelHostFault&) {
    // The frames that ran are reported, complete; then the failure (exit 70).
    watch.finishing();
    watch.report().print(0);
    if (const std::string h = host_summary(*s); !h.empty()) std::cout << h << "\n";
    throw;
  }
  watch.finishing();
  const int sig = g_signal;
  watch.report().print(sig);
  if (const std::string h = host_summary(*s); !h.empty()) std::cout << h << "\n";
  if (!o.dump.empty()) dump_slots(r, o.dump);
  return sig ? 128 + sig : 0;
}

}  // namespace lab::app
