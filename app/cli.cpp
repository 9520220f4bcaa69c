// Command-line parsing (CLI11) and the mapping of failures to sysexits codes.
#include "cli.h"

#include <CLI/CLI.hpp>

#include <cmath>
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <new>

#include "commands.h"
#include "exercise.h"
#include "check.h"
#include "live.h"
#include "output_file.h"
#include "printable.h"
#include "kernel_host.h"
#if defined(LAB_WITH_GUI)
#include "gui.h"
#endif

namespace lab::app {

namespace {

constexpr const char* kAbout =
    "Kernel Lab: an interactive visualizer and laboratory for GPU kernels.\n"
    "Runs an image keypoint pipeline (letterbox -> blur -> sobel -> harris -> nms -> topk ->\n"
    "sample -> l2norm; --variant detect=... does blur to topk in one stage) on the GPU, shows\n"
    "the keypoints and descriptors it finds,\n"
    "times every launch, estimates its occupancy (this GPU and Jetson Orin sm_87) and diffs\n"
    "every output against a plain CPU reference. Without a GPU it runs the CPU references.\n"
    "Teaching playgrounds (--lab): matmul up to cuBLAS, reduce/scan/sort against CUB and\n"
    "Thrust, transpose, memory access and warp divergence, each variant a measured step.";

constexpr const char* kFooter =
    "\nExamples:\n"
    "  kernel-lab                                       the GUI on the built-in animated input\n"
    "  kernel-lab gui --input camera:0                  the GUI on a V4L2 camera\n"
    "  kernel-lab gui --headless --screenshot out.png   the GUI offscreen (no display needed)\n"
    "  kernel-lab list                                  kernels, variants, blocks, parameters\n"
    "  kernel-lab check                                 every variant x block x math vs the CPU\n"
    "  kernel-lab check --input photo.png --stage blur  one stage on your image\n"
    "  kernel-lab bench --sweep-variants --size 3840x2160 --input synthetic:3840x2160\n"
    "  kernel-lab run --input photo.jpg --dump out/     each slot as out/<slot>.npy\n"
    "  kernel-lab run --graph --frames 100              the pipeline as one CUDA graph per frame\n"
    "  kernel-lab copy blur=v4_rows -o my_blur.cu        a built-in kernel to edit\n"
    "  kernel-lab asm branch=v1_divergent --diff         its PTX, precise vs fast, side by side\n"
    "  kernel-lab explain blur=v1_naive_2d blur=v4_rows  why B is faster, from its counters\n"
    "  kernel-lab exercise make blur --start v1_naive_2d --target v4_rows -o blur.lab\n"
    "  kernel-lab exercise submit blur.lab my_blur.cu    checked, timed, placed, explained\n"
    "  kernel-lab check --kernel-file my_blur.cu --replace blur\n"
    "                                                   your kernel against the CPU reference\n"
    "                                                   (after a trial run in a child process;\n"
    "                                                   --trial-memcheck finds bad accesses)\n"
    "  kernel-lab bench --lab matmul --sweep-variants --size 4096x4096x4096\n"
    "                                                   a playground's story, measured\n"
    "\nExit codes (sysexits): 0 ok, 1 check failed, 64 usage, 65 bad data, 66 missing input,\n"
    "69 no CUDA device (--device cuda), 70 internal or CUDA error, 73 cannot create output\n"
    "(a device, FIFO or folder at the path, or an input), 74 I/O error (standard output too),\n"
    "130/143 run interrupted by SIGINT/SIGTERM (its report written). README's table has them.";

// Integers are decimal: CLI11 would read "010" as 8 and "0x10" as 16 (base 0), and "-1" as
// 2^64 - 1 for an unsigned option (a pixel cap switched off, a seed that is not the one typed).
// Leading zeros are dropped so that "010" is ten. `sign`: a leading '-' is left for the range
// check to judge.
CLI::Validator whole(bool sign) {
  return CLI::Validator(
      [sign](std::string& s) -> std::string {
        const size_t digits = sign && !s.empty() && s[0] == '-' ? 1 : 0;
        if (s.size() == digits || s.find_first_not_of("0123456789", digits) != std::string::npos)
          return "'" + printable(s) + "' is not a whole number" +
                 (sign ? "" : " (0 or more, in decimal)");
        const size_t nz = s.find_first_not_of('0', digits);
        s.erase(digits, (nz == std::string::npos ? s.size() - 1 : nz) - digits);
        if (s.size() - digits > 18) return "'" + s + "' is too large";
        return "";
      },
      sign ? "INT" : "UINT");
}
CLI::Validator non_negative() {
  return whole(false);
}

// A number that compares: NaN passes every range check (each comparison is false), and
// infinity is no setting either.
CLI::Validator finite() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(s.c_str(), &end);
        if (s.empty() || *end != '\0' || !std::isfinite(v))
          return "'" + printable(s) + "' is not a finite number";
        return "";
      },
      "NUMBER");
}

void add_common(CLI::App* cmd, CommonOptions& o) {
  cmd->add_option(
         "--input,-i", o.input,
         "synthetic[:WxH[@FPS]] (built in, animated; default 1920x1080), an image file "
         "(8-bit gray, BGR or BGRA), a folder of images, a video file, camera:N[:WxH[@FPS]] "
         "(V4L2), or gst:PIPELINE (ending in appsink)")
      ->capture_default_str();
  cmd->add_option("--device", o.device, "auto (cuda when a GPU is present), cpu or cuda")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}))
      ->capture_default_str();
  auto* pipeline =
      cmd->add_option("--pipeline", o.pipeline,
                      "keypoints (all eight stages), harris (letterbox to the Harris response), "
                      "or a playground (as --lab)")
          ->check(CLI::IsMember(pipeline_names()))
          ->capture_default_str();
  const std::vector<std::string> names = pipeline_names();
  const std::vector<std::string> labs(names.begin() + 2, names.end());  // after the image pipelines
  std::string lab_list;
  for (const auto& n : labs) lab_list += (lab_list.empty() ? "" : ", ") + n;
  cmd->add_option("--lab", o.pipeline,
                  "a teaching playground instead of the image pipeline: " + lab_list +
                      " (its inputs are generated from --size and --seed; see list)")
      ->check(CLI::IsMember(labs))
      ->excludes(pipeline);
  cmd->add_option("--size", o.size,
                  "letterbox output size WxH (default 1280x736); for a playground its problem "
                  "size (matmul MxNxK, reduce/scan/sort/access/branch N or 2^k, transpose WxH)");
  cmd->add_option("--seed", o.seed, "seed of a playground's generated inputs")
      ->capture_default_str()
      ->transform(non_negative());
  cmd->add_option("--kernel-file", o.kernel_file,
                  "a live kernel (CUDA source, compiled with NVRTC; its options in a '// @lab' "
                  "line; see `kernel-lab copy`) to run as the --replace stage's variant 'user'");
  cmd->add_option("--replace", o.replace, "the stage the --kernel-file kernel replaces");
  cmd->add_option("--trial-timeout", o.trial_timeout_s,
                  "seconds the --kernel-file kernel's trial run (once, in a child process, "
                  "before it enters the lab) may take; one that takes longer is not installed")
      ->capture_default_str()
      ->check(finite())
      ->check(CLI::Range(0.1, 600.0));
  cmd->add_option("--frame-deadline", o.frame_deadline_s,
                  "seconds each frame of the --kernel-file kernel may take in the kernel host "
                  "(its child process); one that overruns is killed and reported (exit 70)")
      ->capture_default_str()
      ->check(finite())
      ->check(CLI::Range(0.1, 600.0));
  cmd->add_flag("--trial-memcheck", o.trial_memcheck,
                "run the trial under compute-sanitizer --tool memcheck (found where asm --sass "
                "looks) and report invalid accesses at the kernel's source lines");
  cmd->add_option("--upload", o.upload,
                  "how frames reach the GPU: auto (mapped on an integrated GPU such as Orin, "
                  "else pinned), pageable, pinned (page-locked, async on a copy stream) or mapped "
                  "(zero-copy)")
      ->check(CLI::IsMember({"auto", "pageable", "pinned", "mapped"}))
      ->capture_default_str();
  cmd->add_option("--preset", o.preset,
                  "a preset file (JSON, as the GUI saves them): the pipeline the other options "
                  "then edit; one the lab cannot use warns and gives the defaults");
  cmd->add_option("--variant", o.variants, "STAGE=NAME, e.g. blur=v2_separable (repeatable)");
  cmd->add_option("--block", o.blocks, "STAGE=WxH, e.g. blur=16x16 (repeatable)");
  cmd->add_option("--math", o.maths, "precise, fast, or STAGE=precise|fast (repeatable)");
  cmd->add_option("--param", o.params, "STAGE.NAME=VALUE, e.g. harris.k=0.05 (repeatable)");
  cmd->add_option("--max-pixels", o.max_pixels, "refuse input images larger than this")
      ->capture_default_str()
      ->transform(non_negative())
      ->check(CLI::Range(size_t(1), size_t(1) << 40));
  cmd->add_flag("--accept-truncated", o.accept_truncated,
                "decode a PNG or JPEG that ends before its end marker (a warning names it) "
                "instead of refusing it (exit 65)");
}

// A command's exit code, once standard output is known to have taken everything: output lost
// to a full disk, a closed descriptor or a broken pipe is an I/O error (74), not a success.
int finish(int rc) {
  check_stdout();
  return rc;
}

}  // namespace

int run_cli(int argc, char** argv) {
  // A write past the file-size limit fails with EFBIG, which the lab reports (74), instead of
  // ending the process with a temporary left behind; libraries' writes (a shader cache) too.
  std::signal(SIGXFSZ, SIG_IGN);
  // The trial child (trial.h): a hidden subcommand, started by the lab itself.
  if (argc == 2 && std::string(argv[1]) == "__trial") return trial_child_main(0, 1);
  // The compile child (live.h): NVRTC under a time and memory limit.
  if (argc == 2 && std::string(argv[1]) == "__compile") return live_compile_child_main(0, 1);
  CLI::App app{kAbout, "kernel-lab"};
  app.footer(kFooter);
  app.set_version_flag("--version", LAB_VERSION);
  // An option's text may hold ESC or BEL: quoted back to the terminal only escaped.
  app.failure_message([](const CLI::App*, const CLI::Error& e) {
    return printable(e.what(), 4096) + "\nRun with --help for more information.\n";
  });
  app.require_subcommand(0, 1);

  ListOptions list_o;
  auto* list = app.add_subcommand("list", "List kernels, variants, allowed blocks and parameters");
  list->add_flag("--json", list_o.json, "machine-readable output");
  list->add_flag("--fastest-preset", list_o.fastest_preset,
                 "print the fastest measured configuration as a preset file (the GUI's "
                 "\"fastest\"; examples/presets/fastest.json is this output)")
      ->excludes("--json");

  CommonOptions check_c;
  CheckOptions check_o;
  auto* check = app.add_subcommand(
      "check",
      "Run every stage x variant x allowed block x math mode against the CPU reference; "
      "exit 0 only if all are within tolerance");
  add_common(check, check_c);
  check->add_option("--stage", check_o.stages, "only these stages (repeatable)");
  check->add_flag("--quick", check_o.quick, "each variant's default block only");

  CommonOptions bench_c;
  BenchOptions bench_o;
  auto* bench = app.add_subcommand(
      "bench",
      "Time every launch (median of many runs after warm-up), GB/s against the device "
      "copy bandwidth measured in the same run, registers, occupancy and limiter. Without "
      "--input it times a real image, tests/data/box_in_scene.png (the synthetic scene leaves "
      "few NMS survivors and flatters top-K; --input synthetic times it)");
  add_common(bench, bench_c);
  bench->add_option("--stage", bench_o.stages, "only these stages (repeatable)");
  MeasureOptions& bm = bench_o.measure;
  bench->add_option("--warmup", bm.warmup, "untimed runs first")
      ->capture_default_str()
      ->transform(whole(true))
      ->check(CLI::Range(0, 100000));
  bench->add_option("--reps", bm.reps, "timed runs (with --noise: at most)")
      ->capture_default_str()
      ->transform(whole(true))
      ->check(CLI::Range(1, 100000));
  double noise_pct = 0;
  bench
      ->add_option("--noise", noise_pct,
                   "stop once the median's relative standard error is under this percent "
                   "(after --min-reps runs; at most --reps), as nvbench does; 0: run --reps")
      ->check(finite())
      ->check(CLI::Range(0.0, 100.0));
  bench->add_option("--min-reps", bm.min_reps, "with --noise: at least this many timed runs")
      ->capture_default_str()
      ->transform(whole(true))
      ->check(CLI::Range(2, 100000));
  bench->add_flag("--cold", bm.cold_l2,
                  "flush the L2 before every timed run (DRAM-cold figures; default: L2-warm)");
  bench
      ->add_option("--queue-ahead", bm.queue_ahead_us,
                   "microseconds of GPU-side delay the timed launches queue behind (0: none, "
                   "so the host's launch latency shows in the figures)")
      ->capture_default_str()
      ->check(finite())
      ->check(CLI::Range(0.0, 100000.0));
  bench->add_flag("--counters", bench_o.counters,
                  "hardware counters per launch through CUPTI (achieved occupancy, DRAM bytes, "
                  "L2 hit rate, SM and memory throughput, top stall reasons); collected after "
                  "the timed runs, by replaying each launch");
  bench->add_flag("--print-ncu", bench_o.print_ncu,
                  "print the ncu command line that profiles each selected stage's configured "
                  "kernels with the same metrics, and exit");
  bench->add_flag("--sweep-blocks", bench_o.sweep_blocks, "every allowed block of each variant");
  bench->add_flag("--sweep-variants", bench_o.sweep_variants, "every variant of each stage");
  bench->add_flag("--sweep-math", bench_o.sweep_math, "both precise and fast math");
  auto* csv = bench->add_flag("--csv", bench_o.csv, "CSV instead of a table");
  bench->add_flag("--json", bench_o.json, "JSON instead of a table")->excludes(csv);
  bench->add_option("--out,-o", bench_o.out, "write the result to this file");

  CommonOptions run_c;
  RunOptions run_o;
  auto* run = app.add_subcommand("run", "Process the input and dump every slot as .npy");
  add_common(run, run_c);
  run->add_option("--dump", run_o.dump,
                  "folder for <slot>.npy (float32 H x W, C order); keypoints.npy is N x 3 (x, y, "
                  "score), patches.npy and descriptors.npy N x 64, in the exact top-K order");
  run->add_flag("--graph", run_c.graph, "replay the pipeline as one CUDA graph each frame");
  run->add_flag("--cold", run_o.cold,
                "flush the L2 before every launch, as the lab's hardware counters do (so that "
                "ncu, profiling this command, sees each kernel start from the same cache state)")
      ->excludes("--graph");
  run->add_option("--frames", run_o.frames, "frames to process (timings: median, p95)")
      ->capture_default_str()
      ->transform(whole(true))
      ->check(CLI::Range(1, 1000000));

  CommonOptions explain_c;
  ExplainOptions explain_o;
  auto* explain_cmd = app.add_subcommand(
      "explain",
      "Why is B faster (or slower) than A? Measures two configurations of one stage as bench "
      "does, with hardware counters where CUPTI can read them, and ranks the changes that "
      "account for the time: DRAM bytes, L2 hits, occupancy and its limiter, stall reasons, "
      "instructions executed, the SASS instruction mix, registers, spills. --ladder explains "
      "every consecutive step of a stage's ladder");
  add_common(explain_cmd, explain_c);
  explain_cmd->add_option("configs", explain_o.specs,
                          "A then B: STAGE=VARIANT[/WxH][/precise|fast], e.g. blur=v1_naive_2d "
                          "blur=v4_rows");
  explain_cmd->add_option("--ladder", explain_o.ladder,
                          "explain each consecutive step of these stages' ladders (repeatable; "
                          "'all': every stage)");
  explain_cmd->add_option("--warmup", explain_o.measure.warmup, "untimed runs first")
      ->capture_default_str()
      ->transform(whole(true))
      ->check(CLI::Range(0, 100000));
  explain_cmd->add_option("--reps", explain_o.measure.reps, "timed runs")
      ->capture_default_str()
      ->transform(whole(true))
      ->check(CLI::Range(1, 100000));
  explain_cmd->add_flag("!--no-counters", explain_o.counters,
                        "time, bytes and static facts only (no CUPTI replay)");
  explain_cmd->add_flag("!--no-sass", explain_o.sass,
                        "without the SASS instruction mix (which runs cuobjdump on this binary)");
  explain_cmd->add_flag("--json", explain_o.json,
                        "JSON: both sides' facts, the verdict and every ranked change");
  explain_cmd->add_option("--out,-o", explain_o.out, "write the result to this file");

  ExerciseMakeOptions make_o;
  ExerciseSubmitOptions submit_o;
  ExerciseGradeOptions grade_o;
  auto* exercise = app.add_subcommand(
      "exercise",
      "Exercises a teacher hands out: make one from a stage's ladder, submit a kernel for it "
      "(checked at sizes and values drawn at submit time, timed, placed in the ladder, "
      "explained), grade the results");
  exercise->require_subcommand(1, 1);
  auto* make = exercise->add_subcommand(
      "make",
      "Write an exercise file: the stage, a starter kernel (a copy of --start), the "
      "lesson (the ladder's steps on the way) and the target");
  make->add_option("stage", make_o.stage, "the stage the learner's kernel replaces, e.g. blur")
      ->required();
  make->add_option("--start", make_o.start, "the built-in step the starter is a copy of")
      ->required();
  make->add_option("--target", make_o.target,
                   "a built-in step to beat (measured in the same run), or N% of the ceiling")
      ->required();
  make->add_option("--title", make_o.title, "one line (default: the stage, start and target)");
  make->add_option("--lesson", make_o.lesson, "the lesson (default: the steps on the way)");
  make->add_option("--out,-o", make_o.out, "write the exercise here (default: stdout)");
  auto* submit = exercise->add_subcommand(
      "submit",
      "Check a kernel for an exercise at every size class (1x1, a tile less and more "
      "one pixel, odd, prime, 4K; values and sizes drawn now), then time it against "
      "the built-in steps and explain it against the nearest; exit 1 if incorrect");
  submit->add_option("exercise", submit_o.exercise, "the exercise file (.lab)")->required();
  submit->add_option("kernel", submit_o.kernel, "the learner's kernel (a live-kernel .cu file)")
      ->required();
  submit->add_option("--out,-o", submit_o.out, "the result file (default: KERNEL.result.json)");
  submit->add_option("--reps", submit_o.reps, "timed runs per step")
      ->capture_default_str()
      ->transform(whole(true))
      ->check(CLI::Range(1, 100000));
  submit->add_flag("!--no-counters", submit_o.counters, "no hardware counters in the explanation");
  submit->add_option("--nonce", submit_o.nonce,
                     "replay the draw of a result (its \"nonce\"); default: a fresh one");
  auto* grade = exercise->add_subcommand(
      "grade",
      "Read result files into one table; a result made for another exercise (its "
      "hash differs) is refused (exit 65)");
  grade->add_option("exercise", grade_o.exercise, "the exercise file (.lab)")->required();
  grade->add_option("results", grade_o.results, "result files (JSON)")->required();
  grade->add_flag("--csv", grade_o.csv, "CSV instead of a table");
  grade->add_option("--out,-o", grade_o.out, "write the table here");

  CopyOptions copy_o;
  auto* copy = app.add_subcommand(
      "copy",
      "Write a built-in variant's kernel as a live-kernel file (the source that ships, ready to "
      "edit, compile and run with --kernel-file)");
  copy->add_option("spec", copy_o.spec, "STAGE=VARIANT, e.g. blur=v6_rows16_shfl")->required();
  copy->add_option("--block", copy_o.block, "WxH (default: the variant's)");
  copy->add_option("--math", copy_o.math, "precise or fast")
      ->check(CLI::IsMember({"precise", "fast"}))
      ->capture_default_str();
  copy->add_option("--out,-o", copy_o.out, "write here instead of stdout");

  AsmOptions asm_o;
  auto* asm_cmd = app.add_subcommand(
      "asm",
      "A kernel's PTX (embedded at build time: compute_87, our kernels of both math passes) or "
      "SASS (--sass: cuobjdump on this binary, where the CUDA toolkit is installed), its "
      "instruction mix (FP32, FP64, float<->double conversions, MUFU, loads and stores by "
      "space...), and precise vs fast (--diff) or one variant against another (--against) side "
      "by side, the differing lines marked. Which kernels a variant launches is guessed from "
      "their names; --list shows an op's kernels and --kernel picks one");
  asm_cmd->add_option("spec", asm_o.spec,
                      "STAGE[=VARIANT] or PLAYGROUND[=VARIANT], e.g. branch=v1_divergent "
                      "(default variant: the pipeline's)");
  asm_cmd->add_option("--math", asm_o.math, "precise or fast")
      ->check(CLI::IsMember({"precise", "fast"}))
      ->capture_default_str();
  asm_cmd->add_flag("--sass", asm_o.sass,
                    "SASS instead of PTX: cuobjdump (built-in kernels) or nvdisasm "
                    "(--kernel-file), found on PATH, then in the bin folder of the toolkit beside "
                    "nvcc, $CUDA_HOME, $CUDA_PATH, /usr/local/cuda and the one the lab was built "
                    "with");
  auto* asm_diff = asm_cmd->add_flag("--diff", asm_o.diff,
                                     "precise and fast side by side, the differing lines marked");
  asm_cmd
      ->add_option("--against", asm_o.against,
                   "STAGE=VARIANT: the first kernel(s) against this variant's, side by side")
      ->excludes(asm_diff);
  asm_cmd->add_option("--kernel", asm_o.kernel,
                      "one function: its mangled name, its launch name (blur_v3_smem_tile<32,8>) "
                      "or a part of its demangled name");
  asm_cmd->add_option("--block", asm_o.block,
                      "WxH: the instance of a kernel templated on its block (default: the "
                      "variant's block)");
  asm_cmd->add_flag("--list", asm_o.list, "list the op's functions (PTX) and exit");
  asm_cmd->add_flag("--mix", asm_o.mix_only, "only the instruction mix, not the listing");
  asm_cmd
      ->add_option("--arch", asm_o.arch,
                   "the SASS architecture, e.g. 87 or 90 (default: this GPU's, else the "
                   "first in the binary); with --kernel-file, NVRTC's target")
      ->transform(whole(true))
      ->check(CLI::Range(50, 200));
  asm_cmd->add_option("--width", asm_o.width, "columns of each side in --diff / --against")
      ->capture_default_str()
      ->transform(whole(true))
      ->check(CLI::Range(20, 400));
  asm_cmd->add_option("--kernel-file", asm_o.kernel_file,
                      "a live kernel file instead: compiled here with NVRTC (no GPU needed)");

#if defined(LAB_WITH_GUI)
  CommonOptions gui_c;
  ui::GuiOptions gui_o;
  std::string gui_window = "1600x900";
  auto* gui = app.add_subcommand(
      "gui",
      "The interactive lab (the default with no subcommand): image, pipeline, timings, "
      "occupancy and diff panels");
  add_common(gui, gui_c);
  gui->add_flag("--headless", gui_o.headless,
                "render through EGL into an offscreen framebuffer (no display needed)");
  gui->add_option("--frames", gui_o.frames,
                  "stop after N frames (default: until the window closes; 60 headless)")
      ->transform(whole(true))
      ->check(CLI::Range(0, 100000000));
  gui->add_option("--screenshot", gui_o.screenshot, "write the last frame as PNG");
  gui->add_option("--window", gui_window, "window or framebuffer size WxH")->capture_default_str();
  gui->add_flag("--graph", gui_c.graph, "start with the pipeline replayed as one CUDA graph");
  gui->add_flag("--no-keypoints", gui_o.hide_keypoints, "start with the keypoint overlay off");
  gui->add_option("--ui-scale", gui_o.ui_scale,
                  "scale of fonts and sizes (default: the monitor's content scale, 1 headless); "
                  "above 1 the font is rasterised at that size (DejaVu Sans) rather than magnified")
      ->check(finite())
      ->check(CLI::Range(0.5, 4.0));
  gui->add_flag("--free-run", gui_o.free_run,
                "with --frames: draw without waiting for the engine, as an interactive session "
                "does (measures the UI's own frame rate)");
  gui->add_flag("--cold", gui_o.measure.cold_l2,
                "start with the L2 flushed before each frame's timed run (the Timings panel's "
                "\"cold L2\")");
  gui->add_flag("--counters", gui_o.counters,
                "collect hardware counters once the first frame has run, as the Timings "
                "panel's \"measure counters\" does (a scripted run prints their time)");
  gui->add_option("--queue-ahead", gui_o.measure.queue_ahead_us,
                  "microseconds of GPU-side delay each frame's launches queue behind, as in "
                  "bench (0: none; the first launch then absorbs the host's latency)")
      ->capture_default_str()
      ->check(finite())
      ->check(CLI::Range(0.0, 100000.0));
  gui->add_option("--live-recompile", gui_o.live_recompile,
                  "with --kernel-file: compile and run it again every N frames, as a user "
                  "pressing the button would (a scripted run prints the median time to installed)")
      ->transform(whole(true))
      ->check(CLI::Range(0, 1000000));
  gui->add_option("--exercise", gui_o.exercise,
                  "open an exercise (exercise make): its starter kernel in the Live kernel "
                  "panel, compiled and running in its stage, the lesson beside it, a submit "
                  "button")
      ->excludes("--kernel-file");
  gui->add_option("--ladder", gui_o.ladder_stage,
                  "run the ladder of this stage (or the playground's) once the first frame has "
                  "run, as the Ladder panel's button does (with --counters, collecting them), "
                  "its panel in front; a scripted run prints every step")
      ->check(CLI::Validator(
          [](std::string& v) { return v.empty() ? std::string("a stage name") : std::string(); },
          "STAGE"));
  gui->add_option("--ladder-view", gui_o.ladder_view,
                  "the Ladder panel's view: chart, roofline, table or why (each step explained "
                  "against the one before)")
      ->check(CLI::IsMember({"chart", "roofline", "table", "why"}))
      ->capture_default_str();
  gui->add_option("--ladder-export", gui_o.ladder_export,
                  "with --ladder: once it is done, write BASE.csv, BASE.json and the chart shown "
                  "as BASE.png (the panel's export buttons)");
  gui->add_option("--ab", gui_o.ab,
                  "a scripted A/B compare: STAGE=VARIANT (or STAGE=fast, STAGE=precise) pins the "
                  "stage as configured as A, switches it to that variant or math mode as B, "
                  "compares them, and wipes between them in the viewport; a scripted run prints "
                  "the figures");
  gui->add_option("--code", gui_o.code,
                  "open the Code panel on this stage's kernel: STAGE (its PTX, precise and fast "
                  "side by side) or STAGE:sass (its SASS, where the CUDA toolkit's cuobjdump is "
                  "found)");
  gui->add_option("--dump-texture", gui_o.dump_texture,
                  "after the last frame, write the viewport's output texture (as OpenGL holds "
                  "it) to this .npy: checks what interop wrote");
#endif

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);  // prints help, version or the error
    if (rc != 0) return 64;
    try {
      return finish(0);
    } catch (const Error& err) {
      std::cerr << "kernel-lab: error: " << err.what() << "\n";
      return exit_code(err.kind());
    }
  }

  try {
    // What this run reads may not be what it writes (output_file.h); an output the lab will not
    // write is refused now, before any work.
    for (const CommonOptions* c : {&check_c, &bench_c, &run_c, &explain_c})
      for (const std::string& in : {c->input, c->preset, c->kernel_file}) note_input(in);
    note_input(asm_o.kernel_file);
    for (const std::string& in : {submit_o.exercise, submit_o.kernel, grade_o.exercise})
      note_input(in);
    for (const std::string& in : grade_o.results) note_input(in);
    if (*bench && !bench_o.out.empty()) check_output_path(bench_o.out);
    if (*copy && !copy_o.out.empty()) check_output_path(copy_o.out);
    if (*explain_cmd && !explain_o.out.empty()) check_output_path(explain_o.out);
    if (*make && !make_o.out.empty()) check_output_path(make_o.out);
    if (*grade && !grade_o.out.empty()) check_output_path(grade_o.out);
    if (*list) return finish(cmd_list(list_o));
    if (*check) return finish(cmd_check(check_c, check_o));
    if (*bench) {
      bench_o.measure.max_noise = noise_pct / 100;
      if (bench->get_option("--input")->count() == 0) bench_c.input = default_bench_input();
      note_input(bench_c.input);
      return finish(cmd_bench(bench_c, bench_o));
    }
    if (*run) return finish(cmd_run(run_c, run_o));
    if (*copy) return finish(cmd_copy(copy_o));
    if (*make) return finish(cmd_exercise_make(make_o));
    if (*submit) return finish(cmd_exercise_submit(submit_o));
    if (*grade) return finish(cmd_exercise_grade(grade_o));
    if (*explain_cmd) {
      if (explain_cmd->get_option("--input")->count() == 0) explain_c.input = default_bench_input();
      note_input(explain_c.input);
      return finish(cmd_explain(explain_c, explain_o));
    }
    if (*asm_cmd) return finish(cmd_asm(asm_o));
#if defined(LAB_WITH_GUI)
    if (*gui || app.get_subcommands().empty()) {
      const auto size = parse_wxh(gui_window);
      if (!size || size->x > 16384 || size->y > 16384)
        throw Error(ErrorKind::Usage, "malformed --window '" + gui_window + "': expected WxH");
      gui_o.width = size->x, gui_o.height = size->y;
      gui_o.pipeline = build_pipeline(gui_c);
      gui_o.backend = pick_backend(gui_c.device);
      gui_o.input = gui_c.input;
      if (playground_of(gui_o.pipeline)) gui_o.lab_size = gui_c.size;
      gui_o.lab_seed = gui_c.seed;
      gui_o.kernel_file = gui_c.kernel_file;
      gui_o.replace = gui_c.replace;
      gui_o.trial_timeout_s = gui_c.trial_timeout_s;
      gui_o.frame_deadline_s = gui_c.frame_deadline_s;
      gui_o.trial_memcheck = gui_c.trial_memcheck;
      if (gui_o.kernel_file.empty() != gui_o.replace.empty())
        throw Error(ErrorKind::Usage, "--kernel-file and --replace STAGE go together");
      gui_o.command_line.assign(argv + 1, argv + argc);
      gui_o.hooks = ui::read_gui_hooks();
      if (gui_o.hooks.hang_report_s > 0) gui_o.hang_report_s = gui_o.hooks.hang_report_s;
      gui_o.max_pixels = gui_c.max_pixels;
      gui_o.accept_truncated = gui_c.accept_truncated;
      gui_o.graph = gui_c.graph;
      gui_o.upload =
          gui_o.backend == Backend::Cuda ? pick_upload(gui_c.upload) : UploadMode::Pageable;
      // Offscreen, nobody can close a window: a headless or screenshot run stops by itself.
      if ((gui_o.headless || !gui_o.screenshot.empty()) && gui_o.frames == 0) gui_o.frames = 60;
      for (const std::string& in : {gui_c.input, gui_c.preset, gui_c.kernel_file, gui_o.exercise})
        note_input(in);
      for (const std::string& out : {gui_o.screenshot, gui_o.dump_texture})
        if (!out.empty()) check_output_path(out);
      if (!gui_o.ladder_export.empty())
        for (const char* ext : {".csv", ".json", ".png"})
          check_output_path(gui_o.ladder_export + ext);
      return finish(ui::run_gui(gui_o));
    }
#endif
    std::cout << app.help();
    return finish(0);
  } catch (const Error& e) {
    std::cerr << "kernel-lab: error: "
              << (e.kind() == ErrorKind::Refused ? "the device refuses this configuration: " : "")
              << printable(e.what(), 4096) << "\n";  // a file name may hold ESC or BEL
    return exit_code(e.kind());
  } catch (const std::bad_alloc&) {
    std::cerr << "kernel-lab: error: out of host memory\n";
    return 70;
  } catch (const std::exception& e) {
    std::cerr << "kernel-lab: internal error: " << printable(e.what(), 4096) << "\n";
    return 70;
  }
}

}  // namespace lab::app
