// The kernel-lab executable, end to end: help, exit codes for bad input, and `run --dump`.
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "image_source.h"
#include "npy.h"
#include "runner.h"
#include "support.h"

namespace fs = std::filesystem;

namespace {

fs::path scratch_dir() {
  const fs::path d = fs::temp_directory_path() / ("lab_cli_" + std::to_string(::getpid()));
  fs::create_directories(d);
  return d;
}

// CPU everywhere, so these tests mean the same with and without a GPU.
const std::string kCpu = " --device cpu ";

}  // namespace

TEST_SUITE("cpu") {
  TEST_CASE("cli: help and list explain themselves") {
    const Result h = lab_cli("--help");
    CHECK(h.code == 0);
    CHECK(has(h, "check"));
    CHECK(has(h, "bench"));
    CHECK(has(h, "Exit codes"));
    const Result c = lab_cli("check --help");
    CHECK(c.code == 0);
    CHECK(has(c, "--variant"));
    CHECK(has(c, "--math"));
    const Result l = lab_cli("list");
    CHECK(l.code == 0);
    for (const char* s :
         {"letterbox", "blur", "sobel", "harris", "v3_smem_tile", "32x8", "param k"})
      CHECK_MESSAGE(has(l, s), std::string(s));
    const Result j = lab_cli("list --json");
    CHECK(j.code == 0);
    CHECK(has(j, "\"variants\""));
    // bench times a real image unless told otherwise: the build's kernel-lab finds the
    // repository's test images (the installed one: install_test.sh), and its help says so.
    CHECK(has(l, "test images (bench's default input): "));
    CHECK(has(l, "tests/data"));
    CHECK(has(lab_cli("bench --help"), "box_in_scene.png"));
  }

  TEST_CASE("cli: usage errors exit 64 with a one-line reason") {
    struct Case {
      const char* args;
      const char* says;
    };
    const Case cases[] = {
        {"--frobnicate", "frobnicate"},
        {"check --frobnicate", "frobnicate"},
        {"check --stage nope", "unknown stage 'nope'"},
        {"check --variant blur=v9", "unknown variant 'v9'"},
        {"check --variant nope=v1", "unknown stage 'nope'"},
        {"check --block blur=64x32", "1024"},
        {"check --block blur=7x5", "allowed"},
        {"check --block blur=axb", "WxH"},
        {"check --block blur=65536x65536", "1024"},
        {"check --math turbo", "precise or fast"},
        {"check --param harris.q=1", "unknown parameter 'harris.q'"},
        {"check --param harris.k=9", "outside"},
        {"check --size 10", "WxH"},
        {"check --device gpu", "gpu"},
        {"check --input synthetic:0x5", "synthetic"},
        {"explain blur=v1_naive_2d", "two configurations, A then B"},
        {"explain", "two configurations (STAGE=VARIANT STAGE=VARIANT) or --ladder"},
        {"explain blur=v1_naive_2d blur=v4_rows --ladder blur", "or --ladder"},
        {"explain blur blur=v4_rows", "expected STAGE=VARIANT"},
        {"explain blur=v1_naive_2d blur=v9", "no such variant of blur"},
        {"explain blur=v1_naive_2d sobel=v1_unfused", "one stage"},
        {"explain blur=v1_naive_2d blur=v4_rows/7x5", "allowed"},
        {"explain blur=v1_naive_2d blur=v4_rows/turbo", "neither a block WxH nor precise or fast"},
        {"explain --ladder nope", "unknown stage 'nope'"},
    };
    for (const Case& c : cases) {
      const Result r =
          lab_cli(std::string(c.args) +
                  (std::string(c.args).find("--device") == std::string::npos ? kCpu : ""));
      INFO(c.args << "\n" << r.out);
      CHECK(r.code == 64);
      CHECK(has(r, c.says));
    }
  }

  TEST_CASE("cli: bad input files exit 66 or 65, never crash") {
    const fs::path d = scratch_dir();
    { std::ofstream(d / "empty.png"); }
    { std::ofstream(d / "junk.png") << "this is not an image at all, just text"; }
    {
      std::ifstream src(data_path("astronaut.png"), std::ios::binary);
      std::string head(200, '\0');
      src.read(&head[0], 200);
      std::ofstream(d / "truncated.png", std::ios::binary) << head;
    }
    const Result missing = lab_cli("check" + kCpu + "--input /nonexistent/photo.png");
    CHECK(missing.code == 66);
    CHECK(has(missing, "/nonexistent/photo.png"));
    for (const char* f : {"empty.png", "junk.png", "truncated.png"}) {
      const Result r = lab_cli("check" + kCpu + "--input " + (d / f).string());
      INFO(std::string(f) << "\n" << r.out);
      CHECK(r.code == 65);
    }
    // Not regular files: a device that never ends and a FIFO that would block.
    CHECK(lab_cli("check" + kCpu + "--input /dev/zero").code == 65);
    const std::string fifo = (d / "fifo.png").string();
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    CHECK(lab_cli("check" + kCpu + "--input " + fifo).code == 65);
    // A file whose name starts with "synthetic" is a file.
    fs::copy_file(data_path("brick.png"), d / "synthetic_g.png");
    const Result named = lab_cli("run" + kCpu + "--frames 2 --size 64x64 --input " +
                                 (d / "synthetic_g.png").string());
    CHECK(named.code == 0);
    CHECK(has(named, "512x512x1 u8"));
    const Result huge =
        lab_cli("check" + kCpu + "--max-pixels 1000 --input " + data_path("astronaut.png"));
    CHECK(huge.code == 65);
    CHECK(has(huge, "max-pixels"));
    fs::remove_all(d);
  }

  TEST_CASE("cli: --device cuda without a GPU exits 69 and says what to do" *
            doctest::skip(lab::device_info().present)) {
    const Result r = lab_cli("check --device cuda");
    CHECK(r.code == 69);
    CHECK(has(r, "--device cpu"));
  }

  TEST_CASE("cli: check on the CPU references passes") {
    const Result r = lab_cli("check" + kCpu + "--input synthetic:320x200 --size 160x96");
    INFO(r.out);
    CHECK(r.code == 0);
    CHECK(has(r, "references ok"));
  }

  TEST_CASE("cli: run --dump writes every slot as .npy that matches the pipeline") {
    const fs::path d = scratch_dir() / "dump";
    const Result r = lab_cli("run" + kCpu + "--input " + data_path("chelsea.png") +
                             " --size 200x120 --dump " + d.string());
    INFO(r.out);
    REQUIRE(r.code == 0);
    for (const char* slot : {"letterbox", "blur", "grad_x", "grad_y", "harris"}) {
      const lab::HostImage img = lab::io::read_npy((d / (std::string(slot) + ".npy")).string());
      CHECK(img.desc() == lab::ImageDesc{200, 120, 1, lab::PixelType::F32});
    }
    const lab::HostImage in = lab::io::read_npy((d / "input.npy").string());
    CHECK(in.desc() == lab::ImageDesc{451, 300, 3, lab::PixelType::U8});
    // The values are the pipeline's: the same run in-process gives the same bytes.
    lab::Runner runner(lab::Backend::Cpu);
    lab::PipelineConfig p = lab::default_pipeline();
    lab::apply_size(p, "200x120");
    const lab::HostImage src = lab::io::load_image(data_path("chelsea.png"));
    runner.configure(p, src.desc());
    runner.set_input(src);
    runner.run();
    for (const char* slot : {"input", "letterbox", "blur", "grad_x", "grad_y", "harris"}) {
      const lab::HostImage dumped = lab::io::read_npy((d / (std::string(slot) + ".npy")).string());
      const lab::HostImage direct = runner.read_slot(slot);
      REQUIRE(dumped.desc() == direct.desc());
      CHECK_MESSAGE(
          std::equal(direct.bytes(), direct.bytes() + direct.desc().bytes(), dumped.bytes()), slot);
    }
    // The keypoint head: nms H x W; keypoints N x 3, patches and descriptors N x 64, the pad
    // rows dropped, in the exact top-K order.
    CHECK(lab::io::read_npy((d / "nms.npy").string()).desc() ==
          lab::ImageDesc{200, 120, 1, lab::PixelType::F32});
    const lab::HostImage kp = lab::io::read_npy((d / "keypoints.npy").string());
    const int n = kp.desc().height;
    CHECK(kp.desc().width == 3);
    CHECK(n > 0);
    CHECK(n <= 4096);
    for (const char* slot : {"patches", "descriptors"})
      CHECK(lab::io::read_npy((d / (std::string(slot) + ".npy")).string()).desc() ==
            lab::ImageDesc{64, n, 1, lab::PixelType::F32});
    const lab::HostImage nms = runner.read_slot("nms");
    for (int i = 0; i < n; ++i) {
      const auto k = kp.view<float>();
      CHECK(k.at(2, i) == nms.view<float>().at(int(k.at(0, i)), int(k.at(1, i))));
      if (i) CHECK(k.at(2, i - 1) >= k.at(2, i));
    }
    // Fused descriptors: patches.npy is not written (its stage did not run).
    const fs::path f = scratch_dir() / "fused";
    const Result fr = lab_cli("run" + kCpu + "--input synthetic:320x200 --size 160x96 " +
                              "--variant l2norm=v3_fused_sample --dump " + f.string());
    INFO(fr.out);
    CHECK(fr.code == 0);
    CHECK(has(fr, "skipped: fused into l2norm/v3_fused_sample"));
    CHECK_FALSE(fs::exists(f / "patches.npy"));
    CHECK(fs::exists(f / "descriptors.npy"));
    // The fused dense front: blur, sobel and harris skipped; blur.npy is written (by the fused
    // variant: sample reads it), the gradients and the response are not.
    const fs::path ff = scratch_dir() / "front";
    const Result ff_run = lab_cli("run" + kCpu + "--input synthetic:320x200 --size 160x96 " +
                                  "--variant nms=v5_fused_front --dump " + ff.string());
    INFO(ff_run.out);
    CHECK(ff_run.code == 0);
    CHECK(has(ff_run, "skipped: fused into nms/v5_fused_front"));
    for (const char* slot : {"blur", "nms", "keypoints", "descriptors"})
      CHECK_MESSAGE(fs::exists(ff / (std::string(slot) + ".npy")), slot);
    for (const char* slot : {"grad_x", "grad_y", "harris"})
      CHECK_MESSAGE(!fs::exists(ff / (std::string(slot) + ".npy")), slot);
    const Result fc = lab_cli("check" + kCpu + "--input synthetic:320x200 --size 160x96 " +
                              "--variant nms=v5_fused_front");
    INFO(fc.out);
    CHECK(fc.code == 0);
    CHECK(has(fc, "skipped: fused into nms/v5_fused_front"));
    // The harris pipeline stops at the response.
    const fs::path h = scratch_dir() / "harris";
    CHECK(lab_cli("run" + kCpu + "--pipeline harris --input synthetic:64x48 --dump " + h.string())
              .code == 0);
    CHECK(fs::exists(h / "harris.npy"));
    CHECK_FALSE(fs::exists(h / "nms.npy"));
    CHECK(lab_cli("run" + kCpu + "--pipeline nope").code == 64);
    // Unwritable dump folder: 73.
    const Result bad = lab_cli("run" + kCpu + "--input synthetic:8x8 --dump " +
                               (d / "letterbox.npy" / "sub").string());
    CHECK(bad.code == 73);
    fs::remove_all(d.parent_path());
  }

  TEST_CASE("cli: run over a folder, a video and an absent camera") {
    const fs::path d = scratch_dir();
    fs::copy_file(data_path("box.png"), d / "1.png");
    fs::copy_file(data_path("chelsea.png"), d / "2.png");
    const Result f = lab_cli("run" + kCpu + "--frames 5 --size 160x120 --input " + d.string());
    INFO(f.out);
    CHECK(f.code == 0);
    CHECK(has(f, "folder"));
    CHECK(has(f, "over 5 frame(s)"));
#if defined(LAB_WITH_OPENCV)
    const Result v =
        lab_cli("run" + kCpu + "--frames 40 --size 160x120 --input " + data_path("tree.avi"));
    INFO(v.out);
    CHECK(v.code == 0);
    CHECK(has(v, "video"));
    CHECK(has(v, "over 40 frame(s); 0 dropped"));
    const Result cam = lab_cli("run" + kCpu + "--frames 3 --input camera:63");
    CHECK(cam.code == 66);
    CHECK(has(cam, "camera:63: no such camera"));
    CHECK(cam.out.find('\n') == cam.out.size() - 1);  // one line, no OpenCV chatter
#else
    std::ofstream(d / "clip.avi") << "x";
    const Result v = lab_cli("run" + kCpu + "--input " + (d / "clip.avi").string());
    CHECK(v.code == 69);
    CHECK(has(v, "needs OpenCV"));
#endif
    CHECK(lab_cli("run" + kCpu + "--input camera:abc").code == 64);
    fs::remove_all(d);
  }

  TEST_CASE("cli: bench with no test image beside it times the synthetic scene and says so") {
    const fs::path lab = lab_exe();
    // A hard link (the same file system as the lab) in a folder with no tests/data and no
    // share/kernel-lab/data beside it: /proc/self/exe names the link, so the lab looks there.
    const fs::path root = lab.parent_path() / ("lab_nodata_" + std::to_string(::getpid()));
    fs::create_directories(root / "bin");
    std::error_code ec;
    fs::create_hard_link(lab, root / "bin" / "kernel-lab", ec);
    if (ec) {
      MESSAGE("no hard link beside the lab (" << ec.message() << "): not tested here");
    } else {
      const Result r = shell((root / "bin" / "kernel-lab").string() + " bench --device cpu 2>&1");
      INFO(r.out);
      CHECK(r.code == 69);  // bench needs a GPU in use; the note comes first
      CHECK(has(r, "no test image beside this executable"));
      CHECK(has(r, "synthetic scene"));
    }
    fs::remove_all(root);
  }

  TEST_CASE("cli: run stops cleanly on SIGINT and still reports") {
    // A long run, interrupted once it catches SIGINT: exit 130 with the summary, not a kill. A
    // background job of sh starts with SIGINT ignored, so a signal sent before the lab installs
    // its handler is lost: the sanitizer build took over a second to get there, and then ran
    // all 100,000 frames. So wait (up to 60 s) until /proc says the handler is in (SigCgt bit 2).
    const Result r =
        shell(lab_exe() +
              " run --device cpu --frames 100000 --input synthetic:64x64 2>&1 & "
              "pid=$!; i=0; while [ $i -lt 600 ]; do "
              "c=$(sed -n 's/^SigCgt:[[:space:]]*//p' /proc/$pid/status 2>/dev/null); "
              "[ -n \"$c\" ] && [ $(( 0x$c & 2 )) -ne 0 ] && break; sleep 0.1; i=$((i + 1)); done; "
              "kill -INT $pid; wait $pid");
    INFO(r.out);
    CHECK(r.code == 130);  // it exited with 128 + SIGINT, its report written
    CHECK(has(r, "interrupted (SIGINT): stopping after"));
    CHECK(has(r, "frame: median"));
  }

  TEST_CASE("cli: run ends with one frame's budget, the part that limits it named") {
    const Result r = lab_cli("run --device cpu --frames 3 --input synthetic:64x48");
    INFO(r.out);
    CHECK(r.code == 0);
    CHECK(has(r, "budget (medians, each part on its own): decode or capture "));
    CHECK(has(r, "CPU references "));
    CHECK(has(r, "; the limit: "));
    CHECK(!has(r, "upload"));  // no GPU: nothing is uploaded
  }

  TEST_CASE("cli: every exit code the README documents, on the CPU") {
    const fs::path d = scratch_dir() / "codes";
    fs::create_directories(d);
    CHECK(lab_cli("list").code == 0);
    CHECK(lab_cli("check" + kCpu + "--input synthetic:32x24 --size 32x24").code == 0);
    CHECK(lab_cli("check" + kCpu + "--stage nope").code == 64);                          // usage
    CHECK(lab_cli("check" + kCpu + "--input /dev/zero").code == 65);                     // bad data
    CHECK(lab_cli("check" + kCpu + "--input " + (d / "none.png").string()).code == 66);  // missing
    CHECK(lab_cli("check --device cuda --quick --input synthetic:8x8 --size 8x8").code ==
          (lab::device_info().present ? 0 : 69));  // unavailable
    {
      std::ofstream f(d / "file");
      f << "x";
    }
    CHECK(lab_cli("run" + kCpu + "--dump " + (d / "file" / "sub").string()).code == 73);
    // Cannot create: a device is no output (the lab writes regular files only).
    CHECK(lab_cli("copy blur=v4_rows -o /dev/full").code == 73);
    // I/O: a write that fails part-way (a file-size limit of 512 bytes).
    const Result io = shell("ulimit -f 1; " + lab_exe() + " copy blur=v4_rows -o " +
                            (d / "k.cu").string() + " 2>&1");
    CHECK(io.code == 74);
    CHECK(has(io, "failed"));
    CHECK_FALSE(fs::exists(d / "k.cu"));
    fs::remove_all(d);
  }

  TEST_CASE("cli: bench needs a GPU and says so" * doctest::skip(lab::device_info().present)) {
    const Result r = lab_cli("bench --input synthetic:64x64 --reps 1");
    CHECK(r.code == 69);
    const Result e = lab_cli("explain --input synthetic:64x64 blur=v1_naive_2d blur=v4_rows");
    CHECK(e.code == 69);
    CHECK(has(e, "explain compares GPU kernels"));
  }
}
