// Exercises: make, the shipped ones, submit (its refusals on the CPU; on a GPU, each shipped
// exercise solved by its target step, and kernels that cheat or break caught at a named size),
// and grade.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "check.h"
#include "exercise.h"
#include "live.h"
#include "registry.h"
#include "support.h"

namespace fs = std::filesystem;
using lab::Exercise;
using lab::parse_exercise;
using lab::sha256_hex;

namespace {

void spit(const fs::path& p, const std::string& text) {
  std::ofstream(p, std::ios::binary) << text;
}

fs::path scratch(const char* name) {
  const fs::path d = fs::temp_directory_path() /
                     (std::string("lab_ex_") + name + "_" + std::to_string(::getpid()));
  fs::create_directories(d);
  return d;
}

// examples/ of the repository: $LAB_EXAMPLES_DIR/.. (a bundle run elsewhere) or the build's.
fs::path examples_root() {
  const char* env = std::getenv("LAB_EXAMPLES_DIR");
  return fs::path(env && *env ? env : LAB_EXAMPLES_DIR).parent_path();
}
fs::path examples() {
  return examples_root() / "exercises";
}

// A result file as submit writes it, with only what grade reads.
std::string result_for(const std::string& exercise_sha, bool correct, double us) {
  nlohmann::json j;
  j["format"] = "kernel-lab exercise result 1";
  j["exercise"] = {{"sha256", exercise_sha}};
  j["kernel"] = {{"sha256", sha256_hex(std::to_string(us))}};
  j["correct"] = correct;
  j["failing_size"] = correct ? "" : "prime 997x613";
  j["device"] = {{"name", "NVIDIA H200"}};
  j["lab_version"] = "test";
  if (correct)
    j["timing"] = {{"median_us", us},
                   {"pct_of_ceiling", 40.0},
                   {"target_met", us < 10},
                   {"place", "between v3_smem_tile and v4_rows"}};
  return j.dump(2);
}

// examples/kernels/blur_smem.cu with its bounds guard replaced (and `before` put ahead of the
// kernel): the tests' broken and cheating kernels.
std::string with_guard(const std::string& before, const std::string& replacement) {
  std::string s = slurp(examples_root() / "kernels/blur_smem.cu");
  const std::string guard = "  if (!inside(out[0], x, y)) return;";
  s.replace(s.find(guard), guard.size(), replacement);
  if (!before.empty()) s.replace(s.find("__global__"), 0, before);
  return s;
}

// A blur wrong only one pixel past a block: its last column is left unwritten.
std::string edge_blur() {
  return with_guard(
      "",
      "  if (!inside(out[0], x, y) ||\n"
      "      (out[0].width > 1 && out[0].width % LAB_BLOCK_X == 1 && x == out[0].width - 1))\n"
      "    return;");
}

}  // namespace

TEST_SUITE("cpu") {
  TEST_CASE("exercise: SHA-256 is SHA-256") {
    CHECK(sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    CHECK(sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  }

  TEST_CASE("exercise: make writes an exercise from the ladder; its mistakes are usage errors") {
    const fs::path d = scratch("make");
    const Result r = lab_cli("exercise make blur --start v1_naive_2d --target v4_rows -o " +
                             (d / "a.lab").string());
    INFO(r.out);
    REQUIRE(r.code == 0);
    const Exercise e = parse_exercise(slurp(d / "a.lab"), "a.lab");
    CHECK(e.stage == "blur");
    CHECK(e.start == "v1_naive_2d");
    CHECK(e.target_step == "v4_rows");
    CHECK(e.salt.size() == 32);
    CHECK(e.starter.find("user_kernel") != std::string::npos);
    CHECK(e.starter.find("// @lab block=32x8") == 0);
    // The lesson walks the ladder from the start to the target.
    for (const char* step : {"v1_naive_2d", "v2_separable", "v3_smem_tile", "v4_rows"})
      CHECK_MESSAGE(e.lesson.find(step) != std::string::npos, step);
    CHECK(e.lesson.find("v5_rows_shfl") == std::string::npos);
    // A new salt each time: two exercises made alike draw different checks.
    REQUIRE(
        lab_cli("exercise make blur --start v1_naive_2d --target 50% -o " + (d / "b.lab").string())
            .code == 0);
    const Exercise b = parse_exercise(slurp(d / "b.lab"), "b.lab");
    CHECK(b.salt != e.salt);
    CHECK(b.target_pct == 50);
    CHECK(b.target_step.empty());
    struct Case {
      const char* args;
      const char* says;
    };
    const Case cases[] = {
        {"exercise make nope --start v1 --target v2", "unknown stage 'nope'"},
        {"exercise make blur --start v9 --target v4_rows", "no such step of blur"},
        {"exercise make blur --start v2_separable --target v4_rows", "no live copy"},
        {"exercise make blur --start v1_naive_2d --target v1_naive_2d", "other than the start"},
        {"exercise make blur --start v1_naive_2d --target 150%", "a percent in (0, 100]"},
        {"exercise make blur --start v1_naive_2d", "--target is required"},
        {"exercise", "A subcommand is required"},
    };
    for (const Case& c : cases) {
      const Result x = lab_cli(c.args);
      INFO(c.args << "\n" << x.out);
      CHECK(x.code == 64);
      CHECK(has(x, c.says));
    }
    fs::remove_all(d);
  }

  TEST_CASE("exercise: a starter holds its step's kernel, not the later steps', and compiles") {
    const fs::path d = scratch("starter");
    size_t made = 0;
    for (const char* stage : {"blur", "sobel", "harris", "nms"}) {
      const lab::Op& op = lab::find_op(stage);
      for (size_t v = 0; v < op.def.variants.size(); ++v) {
        const lab::VariantDef& vd = op.def.variants[v];
        if (vd.live_call.empty()) continue;
        const std::string target =
            v + 1 < op.def.variants.size() ? op.def.variants[v + 1].name : op.def.variants[0].name;
        const fs::path f = d / (std::string(stage) + "_" + vd.name + ".lab");
        const Result r = lab_cli("exercise make " + std::string(stage) + " --start " + vd.name +
                                 " --target " + target + " -o " + f.string());
        INFO(stage << "/" << vd.name << "\n" << r.out);
        REQUIRE(r.code == 0);
        const Exercise e = parse_exercise(slurp(f), f.string());
        auto name_of = [](const std::string& call) {
          return call.substr(0, call.find_first_of("<("));
        };
        auto defines = [&](const std::string& fn) {
          return std::regex_search(e.starter, std::regex("void\\s+" + fn + "\\s*\\("));
        };
        CHECK(defines(name_of(vd.live_call)));
        for (const lab::VariantDef& other : op.def.variants)
          if (!other.live_call.empty() && name_of(other.live_call) != name_of(vd.live_call))
            CHECK_MESSAGE(!defines(name_of(other.live_call)), name_of(other.live_call));
        lab::LiveOptions o = lab::read_live_options(e.starter, lab::LiveOptions{});
        o.arch = 90;
        const lab::LiveBuild b = lab::live_compile(e.starter, o);
        CHECK_MESSAGE(b.ok, b.log);
        ++made;
      }
    }
    CHECK(made >= 19);
    fs::remove_all(d);
  }

  TEST_CASE("exercise: the three shipped exercises are valid, on stages live kernels replace") {
    size_t n = 0;
    for (const char* name : {"blur.lab", "sobel.lab", "nms.lab"}) {
      INFO(name);
      const std::string text = slurp(examples() / name);
      REQUIRE(!text.empty());
      const Exercise e = parse_exercise(text, name);
      CHECK(!e.target_step.empty());
      CHECK(!e.lesson.empty());
      CHECK(e.starter.find("user_kernel") != std::string::npos);
      ++n;
    }
    CHECK(n == 3);
  }

  TEST_CASE("exercise: a file that is not an exercise is a data error, never a crash") {
    const fs::path d = scratch("bad");
    const std::string good = slurp(examples() / "blur.lab");
    auto edited = [&](const std::string& from, const std::string& to) {
      std::string s = good;
      const size_t at = s.find(from);
      REQUIRE(at != std::string::npos);
      return s.replace(at, from.size(), to);
    };
    const std::string bad[] = {
        "",
        "{",
        "[]",
        "{\"format\": \"something else\"}",
        edited("\"stage\": \"blur\"", "\"stage\": \"letterbox_nope\""),
        edited("\"step\": \"v4_rows\"", "\"step\": \"v99\""),
        edited("\"salt\": \"", "\"salt\": \"zz"),
    };
    for (const std::string& text : bad) {
      INFO(text.substr(0, 80));
      CHECK_THROWS_AS(parse_exercise(text, "x.lab"), lab::Error);
    }
    spit(d / "x.lab", "{");
    spit(d / "k.cu", "__global__ void user_kernel() {}\n");
    const Result r =
        lab_cli("exercise submit " + (d / "x.lab").string() + " " + (d / "k.cu").string());
    CHECK(r.code == 65);
    CHECK(lab_cli("exercise submit " + (d / "none.lab").string() + " " + (d / "k.cu").string())
              .code == 66);
    fs::remove_all(d);
  }

  TEST_CASE("exercise: the GUI opens one: its starter in the editor, the lesson beside it") {
    // Under the sanitizer build, LeakSanitizer's own tracer crashed at this child's exit
    // ("Tracer caught signal 11" reading a dynamic TLS block it recorded as 0x16e96..0x1800017f98:
    // the runtime's, not the lab's), only when run from the test binary. The leak check is off
    // for these two children alone; the other GUI tests check the same paths for leaks.
    auto gui = [](const std::string& args) {
      const char* asan = std::getenv("ASAN_OPTIONS");
      return shell("ASAN_OPTIONS='" + std::string(asan ? asan : "") +
                   ":detect_leaks=0' timeout 120 " + lab_exe() + " " + args + " 2>&1");
    };
    const Result r =
        gui("gui --headless --frames 6 --device cpu --input synthetic:320x240 "
            "--exercise " +
            (examples() / "blur.lab").string());
    INFO(r.out);
    CHECK(r.code == 0);
    CHECK(has(r,
              "gui: exercise blur: from 25 global loads a pixel to rows in registers (beat "
              "v4_rows, stage blur)"));
    CHECK(has(r, "the Viewport shows blur"));  // the exercise's stage, not the letterbox
    // A file that is not an exercise: the GUI says so and keeps running.
    const fs::path d = scratch("gui");
    spit(d / "x.lab", "{}");
    const Result bad =
        gui("gui --headless --frames 4 --device cpu --input synthetic:320x240 "
            "--exercise " +
            (d / "x.lab").string());
    INFO(bad.out);
    CHECK(bad.code == 0);
    CHECK(has(bad, "not an exercise"));
    fs::remove_all(d);
  }

  TEST_CASE("exercise: where a result failed first, read for the GUI; anything else is none") {
    const Exercise e = lab::read_exercise((examples() / "blur.lab").string());
    const std::string sha = sha256_hex("the exercise");
    nlohmann::json j = nlohmann::json::parse(result_for(sha, false, 0));
    j["checks"] = {{{"class", "1x1"}, {"width", 1}, {"height", 1}, {"pass", true}},
                   {{"class", "odd"}, {"width", 33}, {"height", 17}, {"pass", false}},
                   {{"class", "prime"}, {"width", 997}, {"height", 613}, {"pass", false}}};
    const std::string kernel = j["kernel"]["sha256"];
    const auto f = lab::first_failure(j.dump(), e, sha, kernel);
    REQUIRE(f);
    CHECK(f->where == "odd 33x17");  // the first that failed, not the last
    CHECK(f->width == 33);
    CHECK(f->height == 17);
    CHECK_FALSE(lab::first_failure(j.dump(), e, sha256_hex("another exercise"), kernel));
    CHECK_FALSE(lab::first_failure(j.dump(), e, sha, sha256_hex("an edited kernel")));
    // Every size passed and the timed runs did not: at the bench size, in the result's words.
    for (nlohmann::json& c : j["checks"]) c["pass"] = true;
    j["failing_size"] = "the timed runs' output (1280x736)";
    const auto timed = lab::first_failure(j.dump(), e, sha, kernel);
    REQUIRE(timed);
    CHECK(timed->where == "the timed runs' output (1280x736)");
    CHECK(timed->width == 1280);
    CHECK(timed->height == 736);
    // Correct, not a result, or a hand-edited one: nothing to show, never a throw.
    CHECK_FALSE(lab::first_failure(result_for(sha, true, 0), e, sha, kernel));
    CHECK_FALSE(lab::first_failure("not json", e, sha, kernel));
    j["checks"][0] = {{"class", 7}, {"width", "wide"}, {"pass", false}};
    CHECK_FALSE(lab::first_failure(j.dump(), e, sha, kernel));
    j["checks"][0] = {{"class", "huge"}, {"width", 100000}, {"height", 2}, {"pass", false}};
    CHECK_FALSE(lab::first_failure(j.dump(), e, sha, kernel));
  }

  TEST_CASE("exercise: the GUI reopens a failed submission at the size that failed") {
    const fs::path d = scratch("failed");
    const fs::path kernels = d / "kernel-lab" / "kernels";
    fs::create_directories(kernels);
    std::string bytes;
    const Exercise e = lab::read_exercise((examples() / "blur.lab").string(), &bytes);
    spit(kernels / "exercise-blur.cu", e.starter);
    nlohmann::json j = nlohmann::json::parse(result_for(sha256_hex(bytes), false, 0));
    j["kernel"]["sha256"] = sha256_hex(e.starter);  // the kernel file's, as submit writes it
    j["checks"] = {{{"class", "odd"}, {"width", 33}, {"height", 17}, {"pass", false}}};
    spit(kernels / "exercise-blur.cu.result.json", j.dump());
    const std::string run =
        "XDG_DATA_HOME=" + d.string() + " ASAN_OPTIONS='" +
        std::string(std::getenv("ASAN_OPTIONS") ? std::getenv("ASAN_OPTIONS") : "") +
        ":detect_leaks=0' timeout 120 " + lab_exe() +
        " gui --headless --frames 8 --device cpu --input synthetic:320x240 "
        "--exercise " +
        (examples() / "blur.lab").string() + " 2>&1";
    const Result r = shell(run);
    INFO(r.out);
    CHECK(r.code == 0);
    CHECK(has(r,
              "the Viewport shows blur 33x17, |output - reference| (where the last submission "
              "failed: odd 33x17)"));
    // Another exercise's result (or a correct one) leaves the planes at the input's size.
    j["exercise"]["sha256"] = sha256_hex("another");
    spit(kernels / "exercise-blur.cu.result.json", j.dump());
    const Result other = shell(run);
    INFO(other.out);
    CHECK(other.code == 0);
    CHECK_FALSE(has(other, "the last submission failed"));
    CHECK_FALSE(has(other, "blur 33x17"));
    fs::remove_all(d);
  }

  TEST_CASE("exercise: submit needs a GPU and says so" *
            doctest::skip(lab::device_info().present)) {
    const Result r = lab_cli("exercise submit " + (examples() / "blur.lab").string() + " " +
                             (examples_root() / "kernels/blur_smem.cu").string());
    INFO(r.out);
    CHECK(r.code == 69);
    CHECK(has(r, "exercise submit runs the kernel on a GPU"));
  }

  TEST_CASE("exercise: grade tables the results and refuses another exercise's (exit 65)") {
    const fs::path d = scratch("grade");
    const std::string sha = sha256_hex(slurp(examples() / "blur.lab"));
    spit(d / "ann.json", result_for(sha, true, 8.5));
    spit(d / "bob.json", result_for(sha, false, 0));
    spit(d / "eve.json", result_for(sha256_hex("another exercise"), true, 1.0));
    spit(d / "junk.json", "not json");
    // The right exercise, fields of the wrong type: refused, never an internal error.
    nlohmann::json odd = nlohmann::json::parse(result_for(sha, true, 2.0));
    odd["kernel"] = 7;
    odd["timing"]["target_met"] = "yes";
    spit(d / "odd.json", odd.dump());
    const std::string ex = (examples() / "blur.lab").string();
    const Result ok = lab_cli("exercise grade " + ex + " " + (d / "ann.json").string() + " " +
                              (d / "bob.json").string());
    INFO(ok.out);
    CHECK(ok.code == 0);
    CHECK(has(ok, "8.50"));
    CHECK(has(ok, "between v3_smem_tile and v4_rows"));
    CHECK(has(ok, "fails at prime 997x613"));
    const Result refused = lab_cli("exercise grade " + ex + " " + (d / "ann.json").string() + " " +
                                   (d / "eve.json").string() + " " + (d / "junk.json").string());
    INFO(refused.out);
    CHECK(refused.code == 65);
    CHECK(has(refused, "refused " + (d / "eve.json").string() + ": made for another exercise"));
    CHECK(has(refused, "refused " + (d / "junk.json").string()));
    const Result typed = lab_cli("exercise grade " + ex + " " + (d / "odd.json").string());
    INFO(typed.out);
    CHECK(typed.code == 65);
    CHECK(has(typed, "refused " + (d / "odd.json").string()));
    CHECK(has(refused, "8.50"));
    const Result csv = lab_cli("exercise grade --csv " + ex + " " + (d / "ann.json").string());
    CHECK(csv.code == 0);
    CHECK(has(csv, "result,kernel_sha256,correct,failing_size,median_us"));
    CHECK(has(csv, ",1,\"\",8.5,40,1,"));
    fs::remove_all(d);
  }
}

TEST_SUITE("gpu") {
  // Each shipped exercise is solved by the step it targets (its live copy passes every size
  // class); its starter passes too and stands where its step does.
  LAB_GPU_CASE("exercise: each shipped exercise is solved by its target step") {
    const fs::path d = scratch("solve");
    for (const char* name : {"blur", "sobel", "nms"}) {
      const fs::path ex = examples() / (std::string(name) + ".lab");
      const Exercise e = parse_exercise(slurp(ex), ex.string());
      const fs::path k = d / (std::string(name) + "_target.cu");
      REQUIRE(lab_cli("copy " + e.stage + "=" + e.target_step + " -o " + k.string()).code == 0);
      const fs::path res = d / (std::string(name) + ".json");
      const Result r = lab_cli(
          "exercise submit " + ex.string() + " " + k.string() + " --reps 20 -o " + res.string(),
          600);
      INFO(r.out);
      CHECK(r.code == 0);
      CHECK(has(r, "correct"));
      const nlohmann::json j = nlohmann::json::parse(slurp(res));
      CHECK(j["correct"] == true);
      CHECK(j["checks"].size() == 6);
      CHECK(j["timing"]["timed_output_pass"] == true);
      CHECK(j["timing"]["median_us"].get<double>() > 0);
      CHECK(j["exercise"]["sha256"] == sha256_hex(slurp(ex)));
      CHECK(j.contains("explanation"));
      // The learner's kernel has an instruction mix of its own (from its cubin's SASS).
      CHECK(j["explanation"]["b"]["mix_why"] == "");
      double instructions = 0;
      for (const auto& [cls, n] : j["explanation"]["b"]["mix"].items())
        instructions += n.is_number() ? n.get<double>() : 0;
      CHECK(instructions > 0);
      const fs::path starter = d / (std::string(name) + "_starter.cu");
      spit(starter, e.starter);
      const Result s = lab_cli("exercise submit " + ex.string() + " " + starter.string() +
                                   " --reps 20 --no-counters -o " + (d / "s.json").string(),
                               600);
      INFO(s.out);
      CHECK(s.code == 0);
      const Result g = lab_cli("exercise grade " + ex.string() + " " + res.string() + " " +
                               (d / "s.json").string());
      CHECK(g.code == 0);
    }
    fs::remove_all(d);
  }

  // Kernels that would pass a weaker check: NaN everywhere, one wrong only one pixel past a
  // block, one that skips the partial blocks (the tail), one that returns its input (right at
  // 1x1, where the blur of one pixel is that pixel), one that stops at 4K, one that works only on
  // its first launches (the timed runs' output is checked).
  LAB_GPU_CASE("exercise: kernels that cheat or break fail at a named size") {
    const fs::path d = scratch("cheat");
    const fs::path ex = examples() / "blur.lab";
    const std::string head =
        "// @lab block=32x8 px=1 rows=1 fast_math=0 maxrregcount=0 lineinfo=1\n";
    struct Case {
      const char* name;
      std::string source;
      const char* fails_at;
    };
    const std::string edge = edge_blur();
    const std::string tail = with_guard(
        "",
        "  if (!inside(out[0], x, y) || x >= out[0].width / LAB_BLOCK_X * LAB_BLOCK_X) return;");
    const std::string input = with_guard("",
                                         "  if (!inside(out[0], x, y)) return;\n"
                                         "  out[0].at(x, y) = clamped(src, x, y);\n  return;");
    const std::string small_only =
        with_guard("", "  if (!inside(out[0], x, y) || out[0].width > 2000) return;");
    const std::string first_only =
        with_guard("__device__ int launches;\n",
                   "  if (x == 0 && y == 0) atomicAdd(&launches, 1);\n"
                   "  if (!inside(out[0], x, y) || launches > 3) return;");
    const Case cases[] = {
        {"nan",
         head + "__global__ void user_kernel(Inputs in, Outputs out, Params p) {\n"
                "  const int x = lab_x(), y = lab_y();\n"
                "  if (inside(out[0], x, y)) out[0].at(x, y) = __int_as_float(0x7fc00000);\n}\n",
         "NOT correct: fails at 1x1"},
        {"edge", edge, "NOT correct: fails at tile+1"},
        {"tail", tail, "NOT correct: fails at 1x1"},
        {"input", input, "NOT correct: fails at tile-1"},
        {"small", small_only, "NOT correct: fails at 4k 3840x2160"},
        {"first", first_only, "NOT correct: fails at the timed runs' output"},
    };
    for (const Case& c : cases) {
      const fs::path k = d / (std::string(c.name) + ".cu");
      spit(k, c.source);
      const Result r = lab_cli("exercise submit " + ex.string() + " " + k.string() +
                                   " --reps 20 --no-counters -o " + (d / "r.json").string(),
                               600);
      INFO(c.name << "\n" << r.out);
      CHECK(r.code == 1);
      CHECK(has(r, c.fails_at));
    }
    fs::remove_all(d);
  }

  // The GUI shows where a submission failed: the planes at the size that failed, the learner's
  // kernel run there, and its error against the CPU reference compared in the Viewport.
  LAB_GPU_CASE("exercise: the GUI shows a failed submission's error at the size that failed") {
    const fs::path d = scratch("shown");
    const fs::path kernels = d / "kernel-lab" / "kernels";
    fs::create_directories(kernels);
    const fs::path k = kernels / "exercise-blur.cu";
    spit(k, edge_blur());
    const fs::path ex = examples() / "blur.lab";
    const Result r = lab_cli("exercise submit " + ex.string() + " " + k.string() +
                                 " --reps 20 --no-counters -o " + k.string() + ".result.json",
                             600);
    INFO(r.out);
    REQUIRE(r.code == 1);
    const Result g = shell("XDG_DATA_HOME=" + d.string() + " timeout 300 " + lab_exe() +
                           " gui --headless --frames 60 --input " + data_path("dock.jpg") +
                           " --exercise " + ex.string() + " 2>&1");
    INFO(g.out);
    CHECK(g.code == 0);
    CHECK(has(g, "(where the last submission failed: tile+1 "));
    const std::smatch m = [&] {
      std::smatch s;
      static const std::regex re(
          "exercise compared at (\\d+)x(\\d+): (\\d+) of (\\d+) values over");
      std::regex_search(g.out, s, re);
      return s;
    }();
    REQUIRE(m.size() == 5);
    CHECK(has(
        g, "the Viewport shows blur " + m[1].str() + "x" + m[2].str() + ", |output - reference|"));
    CHECK(std::stoul(m[3].str()) >= std::stoul(m[2].str()));  // at least its last column
    CHECK(std::stoul(m[3].str()) < std::stoul(m[4].str()));   // and not everything
    fs::remove_all(d);
  }
}
