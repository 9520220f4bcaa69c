// Untrusted kernels, run first as trials (trial.h): the protocol against fake children that crash,
// hang, exit early, print garbage or stop mid-message; the memcheck report reader; the editor's
// autosave; and, on a GPU, real kernels that fault, trap and never end, caught in the child while
// this process runs on.
#include <doctest/doctest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "frame_source.h"
#include "image_source.h"
#include "live.h"
#include "measure.h"
#include "memcheck_report.h"
#include "pipeline.h"
#include "presets.h"
#include "runner.h"
#include "support.h"
#include "kernel_host.h"

namespace fs = std::filesystem;

namespace {

fs::path scratch() {
  const fs::path d = fs::temp_directory_path() / ("lab_trial_" + std::to_string(::getpid()));
  fs::create_directories(d);
  return d;
}

// One protocol frame, as the child writes it: "KLT1", type, u64 length, payload.
std::string frame_bytes(char type, const std::string& payload) {
  std::string f = "KLT1";
  f += type;
  const uint64_t n = payload.size();
  f.append(reinterpret_cast<const char*>(&n), 8);
  return f + payload;
}
std::string ready_payload(bool ok, const std::string& what) {
  std::string p(1, char(ok));
  const uint64_t n = what.size();
  p.append(reinterpret_cast<const char*>(&n), 8);
  return p + what;
}

std::string write_file(const std::string& name, const std::string& bytes) {
  const fs::path p = scratch() / name;
  std::ofstream(p, std::ios::binary) << bytes;
  return p.string();
}

// A fake child: a shell script that behaves as the test says.
lab::KernelHost fake(const std::string& script) {
  return lab::KernelHost({"/bin/sh", "-c", script});
}

lab::TrialRequest small_request() {
  lab::TrialRequest r;
  r.build.ok = true;
  r.build.source = "__global__ void user_kernel(Inputs in, Outputs out, Params p) {}\n";
  r.build.cubin = {'x'};
  r.build.lowered_name = "user_kernel";
  r.stage = "blur";
  r.pipeline = lab::preset_to_json(lab::default_pipeline("harris"));
  return r;
}

lab::TrialLimits quick(double timeout_s = 1.0) {
  lab::TrialLimits l;
  l.timeout_s = timeout_s;
  l.start_timeout_s = 2.0;
  return l;
}

}  // namespace

TEST_SUITE("cpu") {
  TEST_CASE("trial: requests and reports survive the wire; malformed ones are refused") {
    lab::TrialRequest q = small_request();
    q.frame = lab::io::synthetic_frame(33, 17, 3, 2);
    q.lab_size = "4096", q.lab_seed = 9, q.add_slot = "harris";
    q.build.options.block = {16, 4};
    q.build.options.fast_math = true;
    const std::string wire = lab::encode_trial_request(q);
    const lab::TrialRequest back = lab::decode_trial_request(wire);
    CHECK(back.build.source == q.build.source);
    CHECK(back.build.options.block == q.build.options.block);
    CHECK(back.build.options.fast_math);
    CHECK(back.build.cubin == q.build.cubin);
    CHECK(back.stage == "blur");
    CHECK(back.add_slot == "harris");
    CHECK(back.pipeline == q.pipeline);
    CHECK(back.lab_size == "4096");
    CHECK(back.lab_seed == 9);
    REQUIRE(back.frame.desc() == q.frame.desc());
    CHECK(std::memcmp(back.frame.bytes(), q.frame.bytes(), q.frame.desc().bytes()) == 0);
    // Every cut of the message is refused, never read past its end.
    for (size_t n : {size_t(0), size_t(5), wire.size() / 2, wire.size() - 1})
      CHECK_THROWS(lab::decode_trial_request(wire.substr(0, n)));
    CHECK_THROWS(lab::decode_trial_request(wire + "x"));

    lab::TrialReport r;
    r.outcome = lab::TrialOutcome::Faulted;
    r.message = "faulted: an illegal memory access was encountered";
    r.kernel_ms = 0.25;
    r.unwritten = 7, r.total = 99;
    r.memchecked = true;
    r.memcheck = {{6, "out-of-bounds write of 4 bytes at 0x8"}};
    const lab::TrialReport rb = lab::decode_trial_report(lab::encode_trial_report(r));
    CHECK(rb.outcome == r.outcome);
    CHECK(rb.message == r.message);
    CHECK(rb.kernel_ms == 0.25);
    CHECK(rb.unwritten == 7);
    CHECK(rb.total == 99);
    REQUIRE(rb.memcheck.size() == 1);
    CHECK(rb.memcheck[0].str() == "line 6: out-of-bounds write of 4 bytes at 0x8");
    CHECK_THROWS(lab::decode_trial_report("\x09"));  // an outcome that does not exist
  }

  TEST_CASE(
      "trial: a fake child that crashes, hangs, exits early, prints garbage or stops "
      "mid-message is an outcome in words, within its limit") {
    using O = lab::TrialOutcome;
    const std::string ready = write_file("ready", frame_bytes('R', ready_payload(true, "fake")));
    const std::string req_then = "cat " + ready + "; head -c 1 >/dev/null; ";
    const auto t0 = std::chrono::steady_clock::now();
    auto elapsed_s = [&] {
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    };

    SUBCASE("a passing report is read back as sent") {
      lab::TrialReport good;
      good.outcome = O::Passed;
      good.message = "ran in 0.010 ms";
      good.total = 12;
      const std::string rep =
          write_file("report", frame_bytes('A', lab::encode_trial_report(good)));
      auto t = fake(req_then + "cat " + rep + "; cat >/dev/null");
      const lab::TrialReport r = t.run(small_request(), quick());
      CHECK(r.outcome == O::Passed);
      CHECK(r.message == "ran in 0.010 ms");
      CHECK(r.total == 12);
      CHECK(r.trial_ms > 0);
      CHECK(t.spawned() == 1);  // the child that passed is kept warm for the next trial
    }
    SUBCASE("crashes") {
      auto t = fake(req_then + "ulimit -c 0; kill -SEGV $$");
      const lab::TrialReport r = t.run(small_request(), quick());
      CHECK(r.outcome == O::Crashed);
      CHECK_MESSAGE(r.message.find("signal 11") != std::string::npos, r.message);
      CHECK(t.spawned() == 2);  // replaced at once, so the next trial finds a warm child
    }
    SUBCASE("hangs after reading its input") {
      auto t = fake(req_then + "exec sleep 30");
      const lab::TrialReport r = t.run(small_request(), quick(0.5));
      CHECK(r.outcome == O::Timeout);
      CHECK_MESSAGE(r.message.find("did not finish in 0.5 s") != std::string::npos, r.message);
      CHECK(elapsed_s() < 3.0);
    }
    SUBCASE("hangs without reading a large input") {
      lab::TrialRequest big = small_request();
      big.frame = lab::io::synthetic_frame(1920, 1080, 3, 1);  // 6 MB: more than a socket holds
      auto t = fake("cat " + ready + "; exec sleep 30");
      const lab::TrialReport r = t.run(big, quick(0.5));
      CHECK(r.outcome == O::Timeout);
      CHECK(elapsed_s() < 3.0);
    }
    SUBCASE("never starts") {
      auto t = fake("exec sleep 30");
      lab::TrialLimits l = quick();
      l.start_timeout_s = 0.3;
      const lab::TrialReport r = t.run(small_request(), l);
      CHECK(r.outcome == O::Error);
      CHECK_MESSAGE(r.message.find("did not start") != std::string::npos, r.message);
      CHECK(elapsed_s() < 3.0);
    }
    SUBCASE("exits early") {
      auto t = fake("exit 3");
      const lab::TrialReport r = t.run(small_request(), quick());
      CHECK(r.outcome == O::Crashed);
      CHECK_MESSAGE(r.message.find("exit status 3") != std::string::npos, r.message);
    }
    SUBCASE("prints garbage") {
      auto t = fake("echo this is not a message at all; exec sleep 30");
      const lab::TrialReport r = t.run(small_request(), quick());
      CHECK(r.outcome == O::Protocol);
      CHECK_MESSAGE(r.message.find("this is not") != std::string::npos, r.message);
      CHECK(elapsed_s() < 3.0);  // the sleeping child was killed, not waited for
    }
    SUBCASE("writes a truncated report") {
      std::string cut = frame_bytes('A', std::string(100, 'z')).substr(0, 13 + 10);
      const std::string trunc = write_file("trunc", cut);
      auto t = fake(req_then + "cat " + trunc);
      const lab::TrialReport r = t.run(small_request(), quick());
      CHECK(r.outcome == O::Protocol);
      CHECK_MESSAGE(r.message.find("10 of the 100 bytes") != std::string::npos, r.message);
    }
    SUBCASE("writes a report that does not decode") {
      const std::string bad = write_file("bad", frame_bytes('A', "\x01\x02"));
      auto t = fake(req_then + "cat " + bad + "; cat >/dev/null");
      CHECK(t.run(small_request(), quick()).outcome == O::Protocol);
    }
    SUBCASE("has no GPU") {
      const std::string no =
          write_file("nogpu", frame_bytes('R', ready_payload(false, "no CUDA device found")));
      auto t = fake("cat " + no);
      const lab::TrialReport r = t.run(small_request(), quick());
      CHECK(r.outcome == O::Error);
      CHECK_MESSAGE(r.message.find("no CUDA device found") != std::string::npos, r.message);
    }
    SUBCASE("cannot be started") {
      lab::KernelHost t({"/nonexistent/kernel-lab", "__trial"});
      const lab::TrialReport r = t.run(small_request(), quick());
      CHECK(r.outcome == O::Error);
      CHECK_MESSAGE(r.message.find("cannot start") != std::string::npos, r.message);
    }
  }

  // Skipped (not passed) where there is a GPU: the gpu suite runs the real child there.
  TEST_CASE("trial: the real child without a GPU says so in one line" *
            doctest::skip(lab::device_info().present)) {
    const char* env = std::getenv("LAB_CLI");
    lab::KernelHost t({env && *env ? env : LAB_CLI_PATH, "__trial"});
    const lab::TrialReport r = t.run(small_request(), quick());
    CHECK(r.outcome == lab::TrialOutcome::Error);
    CHECK_MESSAGE(r.message.find("has no GPU") != std::string::npos, r.message);
  }

  TEST_CASE("memcheck: a report is read back at the kernel's source lines") {
    const std::string log =
        "========= COMPUTE-SANITIZER\n"
        "========= Invalid __global__ write of size 4 bytes\n"
        "=========     at user_kernel(Inputs, Outputs, Params)+0x90 in user_kernel.cu:6\n"
        "=========     by thread (3,0,0) in block (0,0,0)\n"
        "=========     Address 0x8 is out of bounds\n"
        "=========     and is 139,842,104,705,016 bytes before the nearest allocation\n"
        "=========     Device Frame: lab_helper+0x10 in lab_live.cuh:88\n"
        "=========\n"
        "========= Invalid __global__ read of size 1 bytes\n"
        "=========     at 0x70 in /tmp/x/user_kernel.cu:12:user_kernel(Inputs, Outputs, Params)\n"
        "=========     by thread (0,1,0) in block (2,0,0)\n"
        "=========     Address 0x7f0000001 is misaligned\n"
        "=========\n"
        "========= Program hit cudaErrorLaunchFailure (error 719) due to \"unspecified launch "
        "failure\" on CUDA API call to cudaStreamSynchronize.\n"
        "=========     Saved host backtrace up to driver entry point at error\n"
        "========= ERROR SUMMARY: 3 errors\n";
    const auto f = lab::parse_memcheck_log(log);
    REQUIRE(f.size() == 2);  // the API error the fault caused is left out
    CHECK(f[0].str() ==
          "line 6: out-of-bounds write of 4 bytes at 0x8, thread (3,0,0) block (0,0,0)");
    CHECK(f[1].str() ==
          "line 12: misaligned read of 1 byte at 0x7f0000001, thread (0,1,0) block "
          "(2,0,0)");
    // The wording of compute-sanitizer 2025 (CUDA 13), as the H200 printed it.
    const auto newer = lab::parse_memcheck_log(
        "========= Invalid __global__ write of size 4 bytes\n"
        "=========     at user_kernel(Inputs, Outputs, Params)+0x90 in user_kernel.cu:4\n"
        "=========     by thread (3,0,0) in block (0,0,0)\n"
        "=========     Access to 0x8 is out of bounds\n"
        "=========     and is 139,732,575,191,032 bytes before the nearest allocation at "
        "0x7f1606820000 of size 65,536 bytes\n");
    REQUIRE(newer.size() == 1);
    CHECK(newer[0].str() ==
          "line 4: out-of-bounds write of 4 bytes at 0x8, thread (3,0,0) block (0,0,0)");
    // An API error alone is still said; a clean log says nothing; garbage is skipped.
    const auto api = lab::parse_memcheck_log(
        "========= Program hit cudaErrorIllegalAddress (error 700) due to \"an illegal memory "
        "access\" on CUDA API call to cudaMemcpy.\n");
    REQUIRE(api.size() == 1);
    CHECK(api[0].line == 0);
    CHECK(lab::parse_memcheck_log("========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 "
                                  "errors\n")
              .empty());
    CHECK(lab::parse_memcheck_log(std::string(5000, '=') +
                                  "\n\x01\x02 at user_kernel.cu:99999999"
                                  "99999\n=========     at user_kernel.cu:\n")
              .size() <= 1);
    std::string many;
    for (int i = 0; i < 50; ++i)
      many +=
          "========= Invalid __shared__ write of size 4 bytes\n=========     at k+0x0 in "
          "user_kernel.cu:3\n";
    const auto capped = lab::parse_memcheck_log(many);
    CHECK(capped.size() == 10);
    CHECK(capped[0].text == "invalid write of 4 bytes (shared memory)");  // no address given
  }

  TEST_CASE("memcheck: compute-sanitizer is found on PATH, or said to be missing") {
    const fs::path dir = scratch() / "bin";
    fs::create_directories(dir);
    const fs::path tool = dir / "compute-sanitizer";
    std::ofstream(tool) << "#!/bin/sh\n";
    fs::permissions(tool, fs::perms::owner_all);
    const std::string old = std::getenv("PATH") ? std::getenv("PATH") : "";
    setenv("PATH", (dir.string() + ":" + old).c_str(), 1);
    std::string why;
    CHECK(lab::find_compute_sanitizer(&why) == tool.string());
    setenv("PATH", old.c_str(), 1);
    const std::string found = lab::find_compute_sanitizer(&why);
    if (found.empty()) CHECK(why.find("not installed") != std::string::npos);
  }

  TEST_CASE("live: the editor's autosave is written whole and read back; a bad one is said") {
    const std::string path = (scratch() / "draft.json").string();
    fs::remove(path);
    std::string warning;
    CHECK(!lab::read_live_draft(path, &warning));
    CHECK(warning.empty());  // none yet: nothing to say
    lab::LiveDraft d;
    d.source =
        "// @lab block=16x16\n__global__ void user_kernel(Inputs in, Outputs out, "
        "Params p) {\n  // \"quotes\", tabs\t and ünïcödé\n}\n";
    d.stage = "harris";
    d.add = true;
    d.add_slot = "blur";
    d.file = "mine.cu";
    lab::write_live_draft(path, d);
    CHECK(!fs::exists(path + ".tmp"));
    const auto back = lab::read_live_draft(path, &warning);
    REQUIRE(back);
    CHECK(back->source == d.source);
    CHECK(back->stage == "harris");
    CHECK(back->add);
    CHECK(back->add_slot == "blur");
    CHECK(back->file == "mine.cu");
    for (const std::string bad : {"{", "[]", "{\"schema\": 2, \"source\": \"x\"}",
                                  "{\"schema\": 1}", "{\"schema\": \"1\", \"source\": 3}"}) {
      std::ofstream(path) << bad;
      warning.clear();
      CHECK(!lab::read_live_draft(path, &warning));
      CHECK_MESSAGE(warning.find("was not restored") != std::string::npos, bad);
    }
    CHECK_THROWS_AS(lab::write_live_draft("/nonexistent/dir/draft.json", d), lab::Error);
  }

  TEST_CASE("cli: --trial-timeout out of range or malformed is a usage error") {
    CHECK(lab_cli("check --device cpu --trial-timeout 0 --stage blur --quick").code == 64);
    CHECK(lab_cli("check --device cpu --trial-timeout 601 --stage blur --quick").code == 64);
    CHECK(lab_cli("check --device cpu --trial-timeout two --stage blur --quick").code == 64);
    CHECK(lab_cli("__trial extra").code == 64);  // the hidden subcommand takes nothing more
    CHECK(lab_cli("__compile extra").code == 64);
  }

  // ---- compiles: includes, limits, architectures, what reaches the terminal (issue 42) --------

  TEST_CASE("live: only the lab's headers may be included, however the #include is spelled") {
    auto refused = [](const std::string& src) { return lab::live_include_refusals(src); };
    // What live kernels and their copies include.
    CHECK(refused("#include \"lab_live.cuh\"\n#include <image_view.h>\n").empty());
    CHECK(refused("#if defined(__CUDACC_RTC__)\n#define FLT_MAX 1\n#else\n#include <cfloat>\n"
                  "#endif\n")
              .empty());
    // Text that only looks like an include: comments, strings, a raw string, digit separators.
    CHECK(refused("// #include \"/etc/passwd\"\n/* #include \"/etc/passwd\" */\n"
                  "const char* s = \"#include \\\"/etc/passwd\\\"\";\n"
                  "const char* r = R\"x(\n#include \"/etc/passwd\"\n)x\";\n"
                  "int n = 1'000'000; char c = '#';\n")
              .empty());
    const auto plain = refused("// a kernel\n\n#include \"/etc/passwd\"\n");
    REQUIRE(plain.size() == 1);
    CHECK(plain[0].line == 3);
    CHECK(plain[0].error);
    CHECK(plain[0].message.rfind("#include \"/etc/passwd\": only the lab's headers (", 0) == 0);
    CHECK(plain[0].message.find("lab_live.cuh") != std::string::npos);
    // Spellings a preprocessor reads as an include: each refused, at the '#''s line.
    const std::pair<const char*, int> hidden[] = {
        {"%:include \"x.h\"\n", 1},                      // a digraph
        {"\n#inc\\\nlude \"x.h\"\n", 2},                 // a spliced line
        {"\n#inc\\\r\nlude \"x.h\"\n", 2},               // CR LF
        {"/* a\n b */ # /**/ include /**/ <x.h>\n", 2},  // comments as white space
        {"// one line \\ \n#include \"x.h\"\n", 2},      // a space after the backslash: no splice
        {"\"open\n#include \"x.h\"\n", 2},               // a literal ends at the line's end
        {"#define F \"x.h\"\n#include F\n", 2},          // a macro
        {"#include_next <x.h>\n", 1},
        {"#if __has_include(\"/dev/fifo\")\n#endif\n", 1},  // opens what it names
        {"#include <../../etc/passwd>\n", 1},
    };
    for (const auto& h : hidden) {  // no structured binding: CHECK_MESSAGE captures it (C++20)
      const std::string src = h.first;
      const int line = h.second;
      const auto d = refused(src);
      CHECK_MESSAGE(d.size() == 1, src);
      if (d.size() == 1) CHECK_MESSAGE(d[0].line == line, src);
    }
    // The refusal is the compile's result, at its line, before NVRTC reads anything.
    lab::LiveOptions o;
    o.arch = 87;
    const lab::LiveBuild b = lab::live_compile("\n#include \"/etc/passwd\"\n", o);
    CHECK(!b.ok);
    REQUIRE(b.diagnostics.size() == 1);
    CHECK(b.diagnostics[0].line == 2);
    CHECK(b.log.find("root:") == std::string::npos);
  }

  TEST_CASE("cli: an #include of a FIFO, a huge file or /etc/passwd is refused at once, unread") {
    const fs::path d = scratch() / "includes";
    fs::create_directories(d);
    const fs::path fifo = d / "fifo.h";
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    const fs::path sparse = d / "huge.h";
    { std::ofstream f(sparse); }
    fs::resize_file(sparse, uint64_t(4) << 30);  // 4 GiB of hole: reading it takes 4 GiB
    for (const fs::path& target : {fifo, sparse, fs::path("/etc/passwd")}) {
      const fs::path k = d / "k.cu";
      {
        std::ofstream f(k);
        f << "// @lab block=32x8\n// includes " << target.filename().string() << "\n"
          << "#include \"" << target.string() << "\"\n"
          << "__global__ void user_kernel(Inputs in, Outputs out, Params p) {}\n";
      }
      const auto t0 = std::chrono::steady_clock::now();
      const Result r = lab_cli(
          "check --device cpu --pipeline harris --kernel-file " + k.string() + " --replace blur",
          60);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      INFO(target, ": ", r.out);
      CHECK(r.code == 65);
      CHECK(has(r, "k.cu:3: error: #include \"" + target.string() + "\": only the lab's headers"));
      CHECK(!has(r, "root:"));
      CHECK(s < 20);  // promptly: not the compile's time limit
    }
    fs::remove_all(d);
  }

  TEST_CASE("live: a macro bomb stops at the compile's time limit, with words") {
    // 2^40 copies of x: NVRTC expands it for ever, in ever more memory.
    std::string bomb = "#define A0 x\n";
    for (int i = 1; i <= 40; ++i)
      bomb += "#define A" + std::to_string(i) + " A" + std::to_string(i - 1) + " A" +
              std::to_string(i - 1) + "\n";
    bomb += "__global__ void user_kernel(Inputs in, Outputs out, Params p) { int A40; }\n";
    lab::LiveOptions o;
    o.arch = 87;
    lab::CompileLimits limits;
    limits.timeout_s = 2;
    const auto t0 = std::chrono::steady_clock::now();
    try {
      lab::live_compile(bomb, o, "bomb.cu", limits);
      FAIL("it compiled");
    } catch (const lab::Error& e) {
      CHECK(e.kind() == lab::ErrorKind::Data);
      CHECK(std::string(e.what()).rfind("bomb.cu: compiling took longer than 2 s", 0) == 0);
    }
    CHECK(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < 10);
    // Out of memory first (a limit NVRTC cannot even start in): said as such.
    limits.timeout_s = 60;
    limits.memory_bytes = uint64_t(64) << 20;
    try {
      lab::live_compile(bomb, o, "bomb.cu", limits);
      FAIL("it compiled");
    } catch (const lab::Error& e) {
      CHECK(e.kind() == lab::ErrorKind::Data);
      CHECK(std::string(e.what()).find("64 MiB") != std::string::npos);
    }
    // From the command line: the limit from the environment, exit 65, check and asm alike.
    const fs::path d = scratch();
    const std::string file = (d / "bomb.cu").string();
    {
      std::ofstream f(file);
      f << bomb;
    }
    for (const std::string& args :
         {"check --device cpu --pipeline harris --kernel-file " + file + " --replace blur",
          "asm --kernel-file " + file}) {
      const Result r =
          shell("LAB_COMPILE_TIMEOUT_S=1.5 timeout 60 " + lab_exe() + " " + args + " 2>&1");
      INFO(args, ": ", r.out);
      CHECK(r.code == 65);
      CHECK(has(r, "bomb.cu: compiling took longer than 1.5 s (a macro or template"));
    }
    const Result bad =
        shell("LAB_COMPILE_TIMEOUT_S=soon " + lab_exe() + " asm --kernel-file " + file + " 2>&1");
    CHECK(bad.code == 64);
    CHECK(has(bad, "LAB_COMPILE_TIMEOUT_S=soon: expected seconds"));
    fs::remove(file);
  }
}

// ---- on a GPU ----------------------------------------------------------------------------------

namespace {

// A copy kernel with one bad line at line 4.
std::string kernel_with(const std::string& line4) {
  return "__global__ void user_kernel(Inputs in, Outputs out, Params p) {\n"
         "  const int x = lab_x(), y = lab_y();\n"
         "  if (!inside(out[0], x, y)) return;\n" +
         line4 +
         "\n"
         "  out[0].at(x, y) = in[0].at(x, y);\n"
         "}\n";
}

lab::TrialRequest gpu_request(const std::string& src, const lab::HostImage& frame) {
  lab::LiveOptions o;
  o.line_info = true;
  lab::TrialRequest r;
  r.build = lab::live_compile(src, o);
  REQUIRE_MESSAGE(r.build.ok, r.build.log);
  lab::PipelineConfig p = lab::default_pipeline("harris");
  lab::apply_size(p, "320x192");
  r.pipeline = lab::preset_to_json(p);
  r.stage = "blur";
  r.frame = frame;
  return r;
}

}  // namespace

TEST_SUITE("gpu") {
  LAB_GPU_CASE(
      "trial: faults, traps, endless loops and bad reads are caught in the child; this "
      "process runs on and still matches the CPU reference") {
    using O = lab::TrialOutcome;
    const lab::HostImage frame = lab::io::synthetic_frame(640, 480, 3, 4);
    const char* env = std::getenv("LAB_CLI");
    lab::KernelHost t({env && *env ? env : LAB_CLI_PATH, "__trial"});
    lab::TrialLimits limits;
    limits.timeout_s = 2.0;

    // A good kernel passes (and warms the child).
    const lab::TrialReport good = t.run(gpu_request(kernel_with(""), frame), limits);
    CHECK_MESSAGE(good.outcome == O::Passed, good.message);
    CHECK(good.unwritten == 0);
    CHECK(good.total == 320u * 192u);
    CHECK(good.compared);
    MESSAGE("good kernel: trial " << good.trial_ms << " ms (cold child), " << good.message);

    struct Case {
      const char* name;
      std::string line;
      O want;
      const char* words;
    };
    const Case cases[] = {
        {"null write", "  if (x == 3 && y == 0) reinterpret_cast<volatile float*>(8)[0] = 1.0f;",
         O::Faulted, "illegal memory access"},
        {"far write", "  if (x == 0 && y == 0) out[0].row(0)[size_t(1) << 38] = 1.0f;", O::Faulted,
         "illegal memory access"},
        {"endless loop", "  while (clock64() >= 0) {}", O::Timeout, "did not finish in 2 s"},
        {"trap", "  if (x == 5 && y == 5) __trap();", O::Faulted, "faulted"},
        {"far read",
         "  if (x == 1 && y == 1) { out[0].at(x, y) = *(reinterpret_cast<volatile const float*>("
         "in[0].row(0)) - (size_t(1) << 36)); return; }",
         O::Faulted, "illegal memory access"},
        {"no write", "  return;", O::Unwritten, "unwritten"},
    };
    for (const Case& c : cases) {
      const lab::TrialReport r = t.run(gpu_request(kernel_with(c.line), frame), limits);
      MESSAGE(c.name << ": " << lab::trial_outcome_name(r.outcome) << " in " << r.trial_ms
                     << " ms: " << r.message);
      CHECK_MESSAGE(r.outcome == c.want, c.name << ": " << r.message);
      CHECK_MESSAGE(r.message.find(c.words) != std::string::npos, c.name << ": " << r.message);
      // Within its limit; a replaced child's start (its new CUDA context) comes on top.
      CHECK(r.trial_ms < 1e3 * (limits.timeout_s + 10.0));
    }

    // memcheck names the line, where compute-sanitizer is installed.
    if (!lab::find_compute_sanitizer().empty()) {
      lab::TrialLimits mc = limits;
      mc.memcheck = true;
      for (const Case* c : {&cases[0], &cases[4]}) {
        const lab::TrialReport r = t.run(gpu_request(kernel_with(c->line), frame), mc);
        MESSAGE(c->name << " under memcheck in " << r.trial_ms << " ms: " << r.message);
        CHECK(r.memchecked);
        CHECK(r.outcome == O::Faulted);
        REQUIRE_MESSAGE(!r.memcheck.empty(), c->name);
        CHECK_MESSAGE(r.memcheck[0].line == 4, r.memcheck[0].str());
      }
      const lab::TrialReport r0 = t.run(gpu_request(kernel_with(cases[0].line), frame), mc);
      REQUIRE(!r0.memcheck.empty());
      CHECK_MESSAGE(r0.memcheck[0].text.find("write of 4 bytes at 0x8") != std::string::npos,
                    r0.memcheck[0].text);
      CHECK_MESSAGE(r0.memcheck[0].text.find("thread (3,0,0) block (0,0,0)") != std::string::npos,
                    r0.memcheck[0].text);
      const lab::TrialReport clean = t.run(gpu_request(kernel_with(""), frame), mc);
      CHECK_MESSAGE(clean.outcome == O::Passed, clean.message);
      CHECK(clean.memcheck.empty());
      MESSAGE("clean kernel under memcheck: " << clean.trial_ms << " ms");
    } else {
      MESSAGE("compute-sanitizer not installed: memcheck not tested");
    }

    // This process's context was never touched: the pipeline runs and matches its reference.
    lab::PipelineConfig p = lab::default_pipeline("harris");
    lab::apply_size(p, "320x192");
    lab::Runner r(lab::Backend::Cuda);
    r.configure(p, frame.desc());
    r.set_input(frame);
    for (int k = 0; k < 3; ++k) r.run();
    for (size_t i = 0; i < r.stages().size(); ++i) {
      r.poison_outputs(i);
      r.run_stage(i);
      CHECK_MESSAGE(lab::compare_stage(r, i).diff.pass(), r.stages()[i].label());
    }
    // And a good kernel still passes in the replacement child.
    CHECK(t.run(gpu_request(kernel_with(""), frame), limits).passed());
  }

  LAB_GPU_CASE(
      "cli: --kernel-file: a kernel that faults or never ends is refused by its trial "
      "(exit 70), a good one installed") {
    const std::string endless =
        write_file("endless.cu", kernel_with("  while (clock64() >= 0) {}"));
    const Result e = lab_cli("check --pipeline harris --size 320x192 --kernel-file " + endless +
                                 " --replace blur --stage blur --quick --trial-timeout 1",
                             60);
    CHECK(e.code == 70);
    CHECK_MESSAGE(has(e, "did not finish in 1 s"), e.out);
    const std::string fault = write_file(
        "fault.cu",
        kernel_with("  if (x == 3 && y == 0) reinterpret_cast<volatile float*>(8)[0] = 1.0f;"));
    const Result f = lab_cli("check --pipeline harris --size 320x192 --kernel-file " + fault +
                                 " --replace blur --stage blur --quick",
                             60);
    CHECK(f.code == 70);
    CHECK_MESSAGE(has(f, "faulted"), f.out);
    const std::string good = write_file("good.cu", kernel_with(""));  // a copy, not a blur
    const Result g = lab_cli(
        "run --pipeline harris --size 320x192 --frames 3 --kernel-file " + good + " --replace blur",
        60);
    CHECK_MESSAGE(g.code == 0, g.out);
    CHECK_MESSAGE(has(g, "trial passed"), g.out);
  }
}
