// Live kernels: options, NVRTC compiles and their messages, copies of the built-in kernels,
// files, the CLI; on the GPU, each copy against the kernel that ships, bit for bit.
#include <sys/stat.h>

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "frame_source.h"
#include "live.h"
#include "runner.h"
#include "support.h"

namespace fs = std::filesystem;

namespace {

// Every built-in variant offered as a live copy.
std::vector<std::pair<const lab::Op*, size_t>> copyable() {
  std::vector<std::pair<const lab::Op*, size_t>> out;
  for (const lab::Op& op : lab::registry())
    for (size_t v = 0; v < op.def.variants.size(); ++v)
      if (!op.def.variants[v].live_call.empty()) out.emplace_back(&op, v);
  return out;
}

fs::path temp_dir(const std::string& tag) {
  const fs::path d = fs::temp_directory_path() / ("lab_live_" + tag + std::to_string(::getpid()));
  fs::create_directories(d);
  return d;
}

const char* const kBroken =
    "// @lab block=32x8\n"
    "__global__ void user_kernel(Inputs in, Outputs out, Params p) {\n"
    "  const int x = lab_x(), y = lab_y();\n"
    "  if (!inside(out[0], x, y)) return;\n"
    "  out[0].at(x, y) = undefined_thing + 1.0f;\n"
    "}\n";

}  // namespace

TEST_SUITE("cpu") {
  TEST_CASE("live: options line round trip, NVRTC command line") {
    lab::LiveOptions o;
    o.block = {64, 4}, o.px = 4, o.rows = 16, o.fast_math = true, o.max_regs = 64;
    o.line_info = false;
    const std::string src = lab::with_live_options("__global__ void user_kernel() {}\n", o);
    CHECK(src.rfind("// @lab block=64x4 px=4 rows=16 fast_math=1 maxrregcount=64 lineinfo=0", 0) ==
          0);
    const lab::LiveOptions back = lab::read_live_options(src, lab::LiveOptions{});
    CHECK(back.block == lab::Block{64, 4});
    CHECK(back.px == 4);
    CHECK(back.rows == 16);
    CHECK(back.fast_math);
    CHECK(back.max_regs == 64);
    CHECK(!back.line_info);
    // Written again, the line is replaced, not repeated.
    const std::string again = lab::with_live_options(src, lab::LiveOptions{});
    CHECK(again.find("@lab", again.find("@lab") + 1) == std::string::npos);
    CHECK(again.rfind("// @lab block=32x8 px=1", 0) == 0);
    for (const char* bad : {"// @lab block=0x8\n", "// @lab rows=99\n", "// @lab colour=red\n",
                            "// @lab block=33x33\n", "// @lab px=\n"})
      CHECK_THROWS_AS(lab::read_live_options(bad, lab::LiveOptions{}), lab::Error);

    o.arch = 87;
    const auto args = lab::live_nvrtc_options(o);
    auto has_arg = [&](const std::string& a) {
      return std::find(args.begin(), args.end(), a) != args.end();
    };
    CHECK(has_arg("-arch=sm_87"));
    CHECK(has_arg("--use_fast_math"));
    CHECK(has_arg("-maxrregcount=64"));
    CHECK(!has_arg("-lineinfo"));
    CHECK(has_arg("-DLAB_BLOCK_X=64"));
    CHECK(has_arg("-DLAB_ROWS=16"));
    CHECK(has_arg("--pre-include=lab_live.cuh"));
  }

  TEST_CASE("live: ptxas's resource lines are read and taken out of the log; its warnings stay") {
    std::string log =
        "user_kernel.cu(3): warning #177-D: variable \"x\" was declared but never referenced\n"
        "ptxas info    : 0 bytes gmem\n"
        "ptxas info    : Compiling entry function '_Z11user_kernel' for 'sm_90'\n"
        "ptxas info    : Function properties for _Z11user_kernel\n"
        "ptxas         .     16 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads\n"
        "ptxas info    : Used 40 registers, used 1 barriers, 3312 bytes smem, 400 bytes cmem[0]\n"
        "ptxas warning : Registers are spilled to local memory in function '_Z11user_kernel'";
    const lab::LiveResources r = lab::take_ptxas_resources(log);
    CHECK(r.regs == 40);
    CHECK(r.barriers == 1);
    CHECK(r.smem_bytes == 3312);
    CHECK(r.stack_bytes == 16);
    CHECK(r.spill_stores == 8);
    CHECK(r.spill_loads == 4);
    CHECK(r.str() == "40 registers, 3312 B shared, 16 B stack, 8 B spill stores, 4 B spill loads");
    CHECK(log ==
          "user_kernel.cu(3): warning #177-D: variable \"x\" was declared but never referenced\n"
          "ptxas warning : Registers are spilled to local memory in function '_Z11user_kernel'");
    std::string none = "user_kernel.cu(2): error: expected a \";\"";
    CHECK(lab::take_ptxas_resources(none).regs == -1);
    CHECK(none == "user_kernel.cu(2): error: expected a \";\"");
  }

  TEST_CASE("live: NVRTC messages are parsed to their lines") {
    const std::string log =
        "user_kernel.cu(12): error: identifier \"q\" is undefined\n"
        "      q = 1;\n"
        "      ^\n"
        "user_kernel.cu(3): warning #177-D: variable \"x\" was declared but never referenced\n"
        "blur_kernels.cuh(40): error: expected a \";\"\n"
        "user_kernel.cu(9): catastrophic error: #error directive: stop\n"
        "3 errors detected in the compilation of \"user_kernel.cu\".\n";
    const auto d = lab::parse_nvrtc_log(log);
    REQUIRE(d.size() == 4);
    CHECK(d[0].line == 12);
    CHECK(d[0].error);
    CHECK(d[0].message == "identifier \"q\" is undefined");
    CHECK(d[1].line == 3);
    CHECK(!d[1].error);
    CHECK(d[2].line == 0);  // in a lab header: named in the message
    CHECK(d[2].message.find("blur_kernels.cuh(40)") == 0);
    CHECK(d[3].line == 9);
    CHECK(d[3].error);
    CHECK(d[3].message == "#error directive: stop");
    // A name with brackets of its own: the longest prefix is the file, as before.
    const auto n = lab::parse_nvrtc_log("dir(1)/user_kernel.cu(7): error: x\n");
    REQUIRE(n.size() == 1);
    CHECK(n[0].message == "dir(1)/user_kernel.cu(7): x");
  }

  TEST_CASE("live: a 30,000-character line is parsed, not a stack overflow (issue 15)") {
    // NVRTC echoes the offending source line into its log; a recursive regex once recursed
    // once per character of it.
    const std::string long_line(30000, 'x');
    const auto d = lab::parse_nvrtc_log("user_kernel.cu(2): error: identifier \"" + long_line +
                                        "\" is undefined\n  " + long_line + "\n  ^\n");
    REQUIRE(d.size() == 1);
    CHECK(d[0].line == 2);
    CHECK(d[0].message.size() > 30000);
    // And end to end: the file compiles (or not) and the lab says so with a code, not a signal.
    const fs::path dir = temp_dir("long");
    {
      std::ofstream f(dir / "long.cu");
      f << "__global__ void user_kernel(Inputs in, Outputs out, Params p) {\n  int " << long_line
        << " = q;\n}\n";
    }
    const Result r = lab_cli("check --device cpu --pipeline harris --kernel-file " +
                             (dir / "long.cu").string() + " --replace blur");
    CHECK(r.code == 65);
    CHECK(has(r, "long.cu:2: error:"));
    fs::remove_all(dir);
  }

  TEST_CASE("live: compiles without a GPU; errors at the right line; the previous build stays") {
    lab::LiveOptions o;
    o.arch = 87;
    const lab::LiveBuild good = lab::live_compile(lab::live_template(lab::find_op("blur")), o);
    INFO(good.log);
    CHECK(good.ok);
    CHECK(!good.cubin.empty());
    CHECK(good.ptx.find(".entry") != std::string::npos);
    CHECK(good.lowered_name.find("user_kernel") != std::string::npos);
    // Its resources as ptxas reported them (through the compiler process), not in the log.
    CHECK(good.resources.regs > 0);
    CHECK(good.resources.str().find(" registers, ") != std::string::npos);
    CHECK(good.log.find("ptxas info") == std::string::npos);
    const lab::LiveBuild bad = lab::live_compile(kBroken, o);
    CHECK(!bad.ok);
    REQUIRE(!bad.diagnostics.empty());
    CHECK(bad.diagnostics[0].line == 5);
    CHECK(bad.diagnostics[0].error);
    CHECK(bad.diagnostics[0].message.find("undefined_thing") != std::string::npos);
    // No user_kernel: a clear message, not a crash.
    const lab::LiveBuild none = lab::live_compile("__global__ void other() {}\n", o);
    CHECK(!none.ok);
    REQUIRE(!none.diagnostics.empty());
    CHECK(none.diagnostics[0].message.find("user_kernel") != std::string::npos);
  }

  TEST_CASE("live: every copy of a built-in kernel compiles, for Orin and the H200") {
    const auto copies = copyable();
    CHECK(copies.size() >= 19);  // blur 7 of 8, sobel 4 of 5, harris 5, nms 3 of 5
    for (const auto& copy : copies) {
      const auto op = copy.first;
      const auto v = copy.second;
      const lab::VariantDef& vd = op->def.variants[v];
      for (lab::MathMode m : {lab::MathMode::Precise, lab::MathMode::Fast}) {
        lab::LiveOptions o;
        const std::string src = lab::live_copy_source(*op, v, vd.default_block, m, &o);
        REQUIRE(!src.empty());
        CHECK(o.block == vd.default_block);
        CHECK(o.px == vd.live_px);
        CHECK(o.rows == vd.live_rows);
        CHECK(o.fast_math == (m == lab::MathMode::Fast));
        // The file carries its options: read back, they are the same.
        const lab::LiveOptions back = lab::read_live_options(src, lab::LiveOptions{});
        CHECK(back.block == o.block);
        CHECK(back.rows == o.rows);
        for (int arch : {87, 90}) {
          o.arch = arch;
          const lab::LiveBuild b = lab::live_compile(src, o);
          CHECK_MESSAGE(b.ok, op->def.name << "/" << vd.name << " sm_" << arch << ": " << b.log);
        }
      }
    }
    // Two launches have no single-kernel copy.
    const lab::Op& blur = lab::find_op("blur");
    CHECK(lab::live_copy_source(blur, size_t(blur.find_variant("v2_separable")), {32, 8},
                                lab::MathMode::Precise, nullptr)
              .empty());
    CHECK(!lab::live_refusal(lab::find_op("topk")).empty());
    CHECK(lab::live_refusal(lab::find_op("blur")).empty());
  }

  TEST_CASE("live: the example kernels compile") {
    const char* env = std::getenv("LAB_EXAMPLES_DIR");
    const fs::path dir = env && *env ? env : LAB_EXAMPLES_DIR;
    int n = 0;
    for (const auto& e : fs::directory_iterator(dir)) {
      const std::string src = lab::read_live_file(e.path().string());
      lab::LiveOptions o = lab::read_live_options(src, lab::LiveOptions{});
      o.arch = 87;
      const lab::LiveBuild b = lab::live_compile(src, o);
      CHECK_MESSAGE(b.ok, e.path() << ": " << b.log);
      CHECK_MESSAGE(b.diagnostics.empty(), e.path() << ": " << b.log);  // no warnings either
      ++n;
    }
    CHECK(n >= 1);
  }

  TEST_CASE("live: the compile child gives NVRTC's result unchanged (issue 42)") {
    lab::LiveOptions o;
    o.arch = 87;
    const lab::Op& blur = lab::find_op("blur");
    const std::string copy = lab::live_copy_source(blur, size_t(blur.find_variant("v4_rows")),
                                                   {32, 8}, lab::MathMode::Precise, &o);
    o.arch = 87;
    for (const std::string& src : {lab::live_template(blur), copy}) {
      const lab::LiveBuild child = lab::live_compile(src, o);
      const lab::LiveBuild here = lab::live_compile_in_process(src, o);
      REQUIRE_MESSAGE(child.ok, child.log);
      CHECK(here.ok);
      CHECK(child.ptx == here.ptx);
      CHECK(child.cubin == here.cubin);
      CHECK(child.lowered_name == here.lowered_name);
      CHECK(child.arch == 87);
      CHECK(child.options.block == o.block);
    }
  }

  TEST_CASE("live: architectures NVRTC cannot target are said in words, asm --arch exits 64") {
    const std::vector<int> archs = lab::nvrtc_archs();
    REQUIRE(!archs.empty());
    CHECK(lab::nvrtc_arch_refusal(archs.front()).empty());
    const std::string why = lab::nvrtc_arch_refusal(50);
    CHECK(why.rfind("NVRTC of this toolkit cannot target sm_50 (it supports sm_", 0) == 0);
    lab::LiveOptions o;
    o.arch = 50;
    CHECK_THROWS_AS(lab::live_compile(lab::live_template(lab::find_op("blur")), o), lab::Error);
    const char* env = std::getenv("LAB_EXAMPLES_DIR");
    const fs::path example = fs::path(env && *env ? env : LAB_EXAMPLES_DIR) / "blur_smem.cu";
    const Result r = lab_cli("asm --arch 50 --kernel-file " + example.string());
    CHECK(r.code == 64);
    CHECK(has(r, "--arch 50: NVRTC of this toolkit cannot target sm_50 (it supports sm_"));
    const Result ok = lab_cli("asm --arch " + std::to_string(archs.back()) +
                              " --mix --kernel-file " + example.string());
    CHECK(ok.code == 0);
    CHECK(has(ok, "PTX compute_" + std::to_string(archs.back())));
  }

  TEST_CASE("cli: control characters of a kernel's text reach the terminal escaped") {
    const fs::path d = temp_dir("esc");
    const std::string esc = "\x1b]0;owned\x07\x1b[2J";
    {
      std::ofstream f(d / "esc.cu");
      f << "__global__ void user_kernel(Inputs in, Outputs out, Params p) {\n"
        << "  float v = \"" << esc << "\";\n"  // NVRTC echoes the line in its log
        << "}\n#error " << esc << "\n";        // and quotes the text in its message
    }
    {
      std::ofstream f(d / "inc.cu");
      f << "#include \"" << esc << "\"\n";
    }
    for (const char* file : {"esc.cu", "inc.cu"}) {
      const std::string path = (d / file).string();
      for (const Result& r : {lab_cli("check --device cpu --pipeline harris --kernel-file " + path +
                                      " --replace blur"),
                              lab_cli("asm --kernel-file " + path)}) {
        INFO(std::string(file), ": ", r.out);
        CHECK(r.code == 65);
        CHECK(r.out.find('\x1b') == std::string::npos);
        CHECK(r.out.find('\x07') == std::string::npos);
        CHECK(has(r, "\\x1b]0;owned\\x07\\x1b[2J"));
      }
    }
    // asm's --kernel, echoed in its refusal.
    const Result k = lab_cli("asm blur --kernel \"$(printf 'no\\033[2Jsuch')\"");
    CHECK(k.out.find('\x1b') == std::string::npos);
    if (k.code == 69 && has(k, "PTX was not embedded")) {  // the sanitizer build has no PTX
      const std::string why = "skipped the --kernel echo: " + k.out;
      MESSAGE(why);
    } else {
      CHECK(k.code == 64);
      CHECK(has(k, "no\\x1b[2Jsuch"));
    }
    fs::remove_all(d);
  }

  TEST_CASE("live: files under XDG_DATA_HOME, read back as written; errors are clear") {
    const fs::path d = temp_dir("xdg");
    ::setenv("XDG_DATA_HOME", d.c_str(), 1);
    const std::string dir = lab::live_dir();
    CHECK(dir == (d / "kernel-lab" / "kernels").string());
    CHECK(fs::is_directory(dir));
    const std::string path = dir + "/k.cu";
    const std::string src = lab::live_template(lab::find_op("harris"));
    lab::write_live_file(path, src);
    CHECK(lab::read_live_file(path) == src);
    try {
      lab::read_live_file(dir + "/absent.cu");
      FAIL("no error");
    } catch (const lab::Error& e) {
      CHECK(e.kind() == lab::ErrorKind::NoInput);  // exit 66, as live.h documents
      CHECK(std::string(e.what()).find("does not exist") != std::string::npos);
    }
    CHECK_THROWS_AS(lab::read_live_file(dir), lab::Error);
    ::unsetenv("XDG_DATA_HOME");
    fs::remove_all(d);
  }

  TEST_CASE("cli: --kernel-file: a missing file exits 66, a broken one 65, a copy compiles") {
    const fs::path d = temp_dir("cli");
    const Result missing = lab_cli("check --device cpu --pipeline harris --kernel-file " +
                                   (d / "no.cu").string() + " --replace blur");
    CHECK(missing.code == 66);
    CHECK(has(missing, "does not exist"));
    const fs::path fifo = d / "fifo.cu";
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    const Result pipe = lab_cli("check --device cpu --pipeline harris --kernel-file " +
                                fifo.string() + " --replace blur");
    CHECK(pipe.code == 65);
    CHECK(has(pipe, "not a regular file"));
    {
      std::ofstream f(d / "broken.cu");
      f << kBroken;
    }
    const Result broken = lab_cli("check --device cpu --pipeline harris --kernel-file " +
                                  (d / "broken.cu").string() + " --replace blur");
    CHECK(broken.code == 65);
    CHECK(has(broken, "broken.cu:5: error:"));
    CHECK(has(broken, "does not compile"));
    const Result copy = lab_cli("copy blur=v4_rows -o " + (d / "b.cu").string());
    CHECK(copy.code == 0);
    const Result ok = lab_cli("check --device cpu --pipeline harris --kernel-file " +
                              (d / "b.cu").string() + " --replace blur --stage blur");
    CHECK(ok.code == 0);
    CHECK(has(ok, "compiled in"));
    CHECK(has(ok, " registers, "));                       // ptxas's resources, with no GPU
    CHECK(lab_cli("copy blur=v2_separable").code == 64);  // two launches: no copy
    CHECK(lab_cli("copy blur=nope").code == 64);
    CHECK(lab_cli("check --device cpu --kernel-file " + (d / "b.cu").string()).code == 64);
    CHECK(lab_cli("check --device cpu --kernel-file " + (d / "b.cu").string() + " --replace topk")
              .code == 64);
    fs::remove_all(d);
  }
}

TEST_SUITE("gpu") {
  LAB_GPU_CASE("live: each copy runs and matches the built-in variant bit for bit") {
    const lab::HostImage frame = lab::io::synthetic_frame(643, 487, 3, 5);
    for (const auto& [op, v] : copyable()) {
      const lab::VariantDef& vd = op->def.variants[v];
      for (lab::MathMode m : {lab::MathMode::Precise, lab::MathMode::Fast}) {
        const std::string label = op->def.name + "/" + vd.name + " " + lab::math_name(m);
        lab::LiveOptions o;
        const std::string src = lab::live_copy_source(*op, v, vd.default_block, m, &o);
        const lab::LiveBuild b = lab::live_compile(src, o);
        REQUIRE_MESSAGE(b.ok, label << ": " << b.log);
        auto kernel = std::make_shared<lab::LiveKernel>(b);
        CHECK(kernel->regs > 0);
        lab::PipelineConfig p = lab::default_pipeline("keypoints");  // every copyable stage
        lab::apply_size(p, "333x211");
        size_t stage = p.stages.size();
        for (size_t i = 0; i < p.stages.size(); ++i)
          if (p.stages[i].op == op->def.name) stage = i;
        REQUIRE_MESSAGE(stage < p.stages.size(), label);
        p.stages[stage].custom = lab::make_live_op(*op, kernel);
        p.stages[stage].math = m;
        lab::Runner r(lab::Backend::Cuda);
        r.configure(p, frame.desc());
        r.set_input(frame);
        r.run();
        // The built-in variant, then the copy, on the same inputs.
        lab::ResolvedStage s = r.stages()[stage];
        s.variant = v, s.block = vd.default_block;
        r.run_stage(stage, &s);
        const std::string out = op->def.outputs[0];
        const lab::HostImage builtin = r.read_slot(out);
        s.variant = size_t(s.op->find_variant("user"));
        s.block = o.block;
        r.poison_outputs(stage);
        r.run_stage(stage, &s);
        const lab::HostImage user = r.read_slot(out);
        CHECK_MESSAGE(std::memcmp(builtin.bytes(), user.bytes(), builtin.desc().bytes()) == 0,
                      label);
        REQUIRE(!r.launches().empty());
        CHECK(r.launches().back().kernel == "user_kernel");
        CHECK(r.launches().back().blocks_per_sm > 0);
      }
    }
  }

  LAB_GPU_CASE("live: a kernel that reads past its image fails the diff; the lab runs on") {
    // The 3x3 box blur without the clamp at the bottom: the last row reads one row past the
    // image (inside the pitched allocation's padding, or garbage).
    const std::string src =
        "__global__ void user_kernel(Inputs in, Outputs out, Params p) {\n"
        "  const int x = lab_x(), y = lab_y();\n"
        "  if (!inside(out[0], x, y)) return;\n"
        "  out[0].at(x, y) = in[0].at(x, y + 1) * 1000.0f;\n"
        "}\n";
    lab::LiveOptions o;
    const lab::LiveBuild b = lab::live_compile(src, o);
    REQUIRE(b.ok);
    lab::PipelineConfig p = lab::default_pipeline("harris");
    lab::apply_size(p, "64x48");
    p.stages[1].custom =
        lab::make_live_op(lab::find_op("blur"), std::make_shared<lab::LiveKernel>(b));
    p.stages[1].variant = "user";
    const lab::HostImage frame = lab::io::synthetic_frame(64, 48, 3, 1);
    lab::Runner r(lab::Backend::Cuda);
    r.configure(p, frame.desc());
    r.set_input(frame);
    r.poison_outputs(1);
    r.run();
    const lab::DiffStats d = r.compare(1, r.reference(1), lab::MathMode::Precise);
    CHECK(!d.pass());
    // The runner and the GPU are fine: the built-in variant runs and passes.
    lab::ResolvedStage s = r.stages()[1];
    s.variant = lab::find_op("blur").default_variant();
    s.block = s.variant_def().default_block;
    r.run_stage(1, &s);
    CHECK(r.compare(1, r.reference(1, &s), lab::MathMode::Precise, &s).pass());
  }

  LAB_GPU_CASE("live: a kernel added as a new stage reads a slot and writes 'user'") {
    const std::string src =
        "__global__ void user_kernel(Inputs in, Outputs out, Params p) {\n"
        "  const int x = lab_x(), y = lab_y();\n"
        "  if (inside(out[0], x, y)) out[0].at(x, y) = 2.0f * in[0].at(x, y);\n"
        "}\n";
    const lab::LiveBuild b = lab::live_compile(src, lab::LiveOptions{});
    REQUIRE(b.ok);
    lab::PipelineConfig p = lab::default_pipeline("harris");
    lab::apply_size(p, "97x61");
    lab::StageConfig added;
    added.op = "user";
    added.custom = lab::make_live_stage("blur", std::make_shared<lab::LiveKernel>(b));
    p.stages.push_back(added);
    const lab::HostImage frame = lab::io::synthetic_frame(200, 150, 3, 2);
    lab::Runner r(lab::Backend::Cuda);
    r.configure(p, frame.desc());
    r.set_input(frame);
    r.run();
    const lab::HostImage blur = r.read_slot("blur"), user = r.read_slot("user");
    REQUIRE(user.desc() == blur.desc());
    const auto bv = blur.view<float>(), uv = user.view<float>();
    for (int y = 0; y < bv.height; ++y)
      for (int x = 0; x < bv.width; ++x) REQUIRE(uv.at(x, y) == 2.0f * bv.at(x, y));
    CHECK_THROWS_AS(r.reference(p.stages.size() - 1), lab::Error);  // timed, not compared
  }
}
