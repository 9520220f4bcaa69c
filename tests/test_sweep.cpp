// The registry-wide sweep (GPU): every op x variant x allowed block x math mode, on odd sizes and
// real images, against the op's CPU reference within its tolerance, outputs poisoned first.
// A new op is covered here with no new test code.
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "frame_source.h"
#include "image_source.h"
#include "support.h"
#include "measure.h"
#include "runner.h"

namespace {

struct Pattern {
  std::string input;  // synthetic:WxH or a file in the test data folder
  std::string size;   // letterbox output
};

lab::HostImage load(const Pattern& p) {
  if (p.input == "tall") {  // taller than a grid's 65535 blocks in y at one row per block
    lab::HostImage img(lab::ImageDesc{3, 70000, 1, lab::PixelType::U8});
    for (size_t i = 0; i < img.desc().bytes(); ++i) img.bytes()[i] = uint8_t((i * 7) % 251);
    return img;
  }
  if (p.input.rfind("synthetic", 0) == 0) {
    lab::io::Frame f;
    lab::io::open_source(p.input)->read(f);
    return lab::HostImage(*f.image);
  }
  return lab::io::load_image(data_path(p.input));
}

// Sweeps every stage of the default pipeline on one input; returns the configurations run.
int sweep(const Pattern& p) {
  lab::PipelineConfig cfg = lab::default_pipeline();
  lab::apply_size(cfg, p.size);
  const lab::HostImage in = load(p);
  lab::Runner r(lab::Backend::Cuda);
  r.configure(cfg, in.desc());
  r.set_input(in);
  r.run();
  int runs = 0;
  for (size_t i = 0; i < r.stages().size(); ++i)
    lab::check_stage(r, i, false, [&](const lab::CheckResult& res) {
      const std::string label = p.input + " -> " + p.size + ": " + res.cfg.label();
      // A shape this build of the kernel cannot launch (registers on this GPU) is refused with
      // a reason, as `check` reports it; a rule refusing an allowed block is a failure.
      REQUIRE_MESSAGE((!res.refused || res.at_launch), label << ": " << res.why);
      if (res.refused) {
        MESSAGE(label << ": refused at launch: " << res.why);
        return;
      }
      const lab::DiffStats& d = res.diff;
      CHECK_MESSAGE(d.pass(), label << ": " << d.detail() << " max_abs " << d.max_abs << " limit "
                                    << d.limit << " over " << d.over << " nan " << d.nans
                                    << " first bad " << d.bad_slot << "(" << d.bad_x << ","
                                    << d.bad_y << ") got " << d.bad_got << " ref " << d.bad_ref);
      // Every launch was recorded with a time and an occupancy that CUDA agrees with.
      for (const lab::LaunchRecord& rec : res.launches) {
        CHECK_MESSAGE(rec.ms > 0, label << " " << rec.kernel);
        if (!rec.func) continue;  // a library call (CUB): no occupancy of ours
        CHECK_MESSAGE(rec.est.blocks_per_sm == rec.blocks_per_sm,
                      label << " " << rec.kernel << ": our occupancy calculator says "
                            << rec.est.blocks_per_sm << " blocks/SM, CUDA " << rec.blocks_per_sm);
      }
      ++runs;
    });
  return runs;
}

}  // namespace

TEST_SUITE("gpu") {
  LAB_GPU_CASE("sweep: odd sizes, every variant x block x math against the reference") {
    const std::vector<Pattern> patterns = {
        {"synthetic:1x1", "1x1"},
        {"synthetic:17x13", "17x13"},
        {"synthetic:17x13", "64x48"},
        {"synthetic:640x480", "37x29"},
        {"synthetic:333x777", "1000x999"},
        {"synthetic:1920x1080", "1280x736"},
        {"tall", "64x48"},
    };
    for (const Pattern& p : patterns) CHECK(sweep(p) > 0);
  }

  LAB_GPU_CASE("sweep: real images (gray, BGR, BGRA, JPEG, 13 Mpx)") {
    const std::vector<Pattern> patterns = {
        {"brick.png", "257x131"},    {"astronaut.png", "1280x736"}, {"rocket.jpg", "640x480"},
        {"box.png", "1280x736"},     {"graf1.png", "1280x736"},     {"chessboard.png", "1280x736"},
        {"coffee.png", "3840x2160"},
    };
    for (const Pattern& p : patterns) CHECK(sweep(p) > 0);
  }

  LAB_GPU_CASE("upload modes: pageable, pinned, mapped and the overlapped pinned upload agree") {
    // Three distinct frames; the reference is each frame sent pageable and run on its own.
    std::vector<lab::HostImage> frames;
    for (int k = 0; k < 3; ++k) frames.push_back(lab::io::synthetic_frame(320, 200, 1, k * 7));
    lab::PipelineConfig cfg = lab::default_pipeline();
    lab::apply_size(cfg, "160x96");
    auto outputs = [](lab::Runner& r) {
      std::vector<lab::HostImage> v;
      for (const char* s : {"input", "letterbox", "harris", "keypoints", "descriptors"})
        v.push_back(r.read_slot(s));
      return v;
    };
    auto same = [](const std::vector<lab::HostImage>& a, const std::vector<lab::HostImage>& b) {
      for (size_t i = 0; i < a.size(); ++i)
        if (a[i].desc() != b[i].desc() ||
            std::memcmp(a[i].bytes(), b[i].bytes(), a[i].desc().bytes()) != 0)
          return false;
      return true;
    };
    std::vector<std::vector<lab::HostImage>> expect;
    {
      lab::Runner r(lab::Backend::Cuda);
      r.set_upload_mode(lab::UploadMode::Pageable);
      r.configure(cfg, frames[0].desc());
      for (const auto& f : frames) {
        r.set_input(f);
        r.run();
        expect.push_back(outputs(r));
      }
    }
    for (lab::UploadMode m : {lab::UploadMode::Pinned, lab::UploadMode::Mapped})
      for (bool graph : {false, true}) {
        INFO(lab::upload_mode_name(m) << (graph ? " graph" : ""));
        lab::Runner r(lab::Backend::Cuda);
        r.set_upload_mode(m);
        r.configure(cfg, frames[0].desc());
        r.set_graph(graph);
        for (size_t k = 0; k < frames.size(); ++k) {
          r.set_input(frames[k]);
          r.run();
          CHECK(same(outputs(r), expect[k]));
          CHECK(r.upload_ms() > 0);
        }
      }
    // Overlapped: frame k computes while frame k + 1 goes up; each run still sees its own frame.
    // Frames captured into page-locked memory (no staging copy) and plain ones.
    lab::set_frame_memory_pinned(true);
    std::vector<lab::HostImage> pinned;
    for (int k = 0; k < 3; ++k) pinned.push_back(lab::io::synthetic_frame(320, 200, 1, k * 7));
    lab::set_frame_memory_pinned(false);
    REQUIRE(pinned[0].pinned());
    for (const auto* seq : {&frames, &pinned}) {
      lab::Runner r(lab::Backend::Cuda);
      r.set_upload_mode(lab::UploadMode::Pinned);
      r.configure(cfg, frames[0].desc());
      r.set_input((*seq)[0]);
      for (size_t k = 0; k < frames.size(); ++k) {
        r.run_overlapped((*seq)[(k + 1) % frames.size()]);
        if (seq == &pinned) CHECK(r.staging_ms() == 0);
        std::vector<lab::HostImage> got = outputs(r);
        got[0] = expect[k][0];  // the input slot now holds the next frame; the rest is frame k's
        CHECK(same(got, expect[k]));
      }
    }
    // Mapped: page-locked frames (padded rows) are read where they are, with no copy, to the
    // same outputs; a CUDA graph, which holds one address, gets copies of frames that move.
    for (bool graph : {false, true}) {
      INFO("mapped, page-locked frames" << (graph ? ", graph" : ""));
      lab::Runner r(lab::Backend::Cuda);
      r.set_upload_mode(lab::UploadMode::Mapped);
      r.configure(cfg, frames[0].desc());
      r.set_graph(graph);
      for (size_t k = 0; k < pinned.size(); ++k) {
        r.set_input(pinned[k]);
        r.run();
        CHECK(same(outputs(r), expect[k]));
        CHECK((r.upload_ms() == 0 && r.staging_ms() == 0) == !graph);
      }
    }
  }

  LAB_GPU_CASE("an unwritten pixel fails the diff") {
    // Poison the output and run nothing: the comparison must fail on NaNs.
    lab::Runner r(lab::Backend::Cuda);
    const lab::HostImage in = lab::io::synthetic_frame(64, 48);
    lab::PipelineConfig cfg = lab::default_pipeline();
    lab::apply_size(cfg, "64x48");
    r.configure(cfg, in.desc());
    r.set_input(in);
    r.run();
    const auto ref = r.reference(1);
    r.poison_outputs(1);
    const lab::DiffStats d = r.compare(1, ref, lab::MathMode::Precise);
    CHECK_FALSE(d.pass());
    CHECK(d.nans == size_t(64 * 48));
    CHECK(d.bad_x == 0);
    CHECK(d.bad_y == 0);
  }

  LAB_GPU_CASE("a block over the kernel's limits is refused with the reason, not launched") {
    lab::PipelineConfig cfg = lab::default_pipeline();
    lab::apply_block(cfg, "blur=64x32");
    try {
      lab::Runner r(lab::Backend::Cuda);
      r.configure(cfg, lab::ImageDesc{64, 48, 3, lab::PixelType::U8});
      FAIL("configure accepted a 2048-thread block");
    } catch (const lab::Error& e) {
      CHECK(e.kind() == lab::ErrorKind::Usage);
      CHECK(std::string(e.what()).find("1024") != std::string::npos);
    }
  }

  LAB_GPU_CASE("slots are reused across frames and re-allocated when the input size changes") {
    lab::Runner r(lab::Backend::Cuda);
    lab::PipelineConfig cfg = lab::default_pipeline();
    lab::apply_size(cfg, "96x64");
    for (int w : {50, 50, 320, 17}) {
      const lab::HostImage in = lab::io::synthetic_frame(w, 40, 3, w);
      r.configure(cfg, in.desc());
      r.set_input(in);
      r.run();
      const auto ref = r.reference(0);
      CHECK(r.compare(0, ref, lab::MathMode::Precise).pass());
    }
  }
}
