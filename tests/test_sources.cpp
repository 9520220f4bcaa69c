// Frame sources and the capture thread: parsing, files, folders, video, cameras that are
// absent, and, through a scripted fake source, stalls, disconnects, corrupt frames and
// resolution changes.
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include <sys/stat.h>
#include <unistd.h>

#if defined(LAB_WITH_OPENCV)
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/videoio.hpp>
#include <opencv2/videoio/registry.hpp>
#endif

#include "capture.h"
#include "frame_source.h"
#include "check.h"
#include "support.h"

using namespace lab;
using namespace std::chrono_literals;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

ErrorKind open_error(const std::string& spec) {
  try {
    io::open_source(spec);
  } catch (const Error& e) {
    return e.kind();
  }
  return ErrorKind::Internal;  // nothing thrown
}

bool same_pixels(const HostImage& a, const HostImage& b) {
  return a.desc() == b.desc() && std::equal(a.bytes(), a.bytes() + a.desc().bytes(), b.bytes());
}

// A source that plays a script: each step is a frame of a size, a skip, a stall of some time,
// or a loss. After the script it keeps delivering frames of the last size.
struct Step {
  enum Kind { Frame, Skip, Stall, Lost } kind;
  int w = 8, h = 8;
  std::chrono::milliseconds stall{0};
};

class FakeSource : public io::FrameSource {
 public:
  FakeSource(std::vector<Step> script, std::shared_ptr<std::atomic<int>> alive)
      : m_script(std::move(script)), m_alive(std::move(alive)) {
    ++*m_alive;
  }
  ~FakeSource() override { --*m_alive; }
  std::string describe() const override { return "fake"; }
  bool live() const override { return true; }
  io::ReadResult read(io::Frame& out) override {
    const Step s = m_pos < m_script.size() ? m_script[m_pos++] : Step{Step::Frame, m_w, m_h};
    switch (s.kind) {
      case Step::Frame:
        m_w = s.w, m_h = s.h;
        out.image = std::make_shared<const HostImage>(ImageDesc{s.w, s.h, 3, PixelType::U8});
        out.index = m_next++;
        std::this_thread::sleep_for(1ms);  // a fast camera, not a spinning loop
        return io::ReadResult::Frame;
      case Step::Skip:
        m_problem = "corrupt frame";
        return io::ReadResult::Skip;
      case Step::Stall:
        std::this_thread::sleep_for(s.stall);
        return io::ReadResult::Stall;
      case Step::Lost:
        m_problem = "unplugged";
        return io::ReadResult::Lost;
    }
    return io::ReadResult::Stall;
  }

 private:
  std::vector<Step> m_script;
  std::shared_ptr<std::atomic<int>> m_alive;
  size_t m_pos = 0;
  int m_w = 8, m_h = 8;
  uint64_t m_next = 0;
};

template <typename Pred>
bool eventually(Pred p, std::chrono::milliseconds within) {
  const auto end = Clock::now() + within;
  while (Clock::now() < end) {
    if (p()) return true;
    std::this_thread::sleep_for(2ms);
  }
  return p();
}

io::CaptureOptions fast_options() {
  io::CaptureOptions o;
  o.retry_every = 20ms;
  return o;
}

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

#if defined(LAB_WITH_OPENCV)
// The gst: tests need OpenCV's GStreamer backend and the base plugins (scripts/setup.sh).
bool has_gstreamer() {
  if (cv::videoio_registry::hasBackend(cv::CAP_GSTREAMER)) return true;
  MESSAGE("skipped: this OpenCV has no GStreamer backend");
  return false;
}

fs::path scratch_dir(const std::string& tag) {
  const fs::path d = fs::temp_directory_path() / ("lab_src_" + tag + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// An MJPEG AVI of `frames` frames of w x h.
void write_mjpeg_avi(const std::string& path, int w, int h, int frames) {
  cv::VideoWriter vw(path, cv::VideoWriter::fourcc('M', 'J', 'P', 'G'), 10, cv::Size(w, h));
  REQUIRE(vw.isOpened());
  for (int i = 0; i < frames; ++i) vw.write(cv::Mat(h, w, CV_8UC3, cv::Scalar(10 * i, 100, 30)));
}
#endif

}  // namespace

TEST_SUITE("cpu") {
  TEST_CASE("sources: malformed specs are usage errors, missing ones NoInput") {
    for (const char* bad : {"synthetic:0x5", "synthetic:64x48@0", "synthetic:64x",
                            "camera:", "camera:x", "camera:1:axb", "camera:-1", "gst:"}) {
      INFO(std::string(bad));
      CHECK(open_error(bad) == ErrorKind::Usage);
    }
    CHECK(open_error("/nonexistent/clip.avi") == ErrorKind::NoInput);
    CHECK(open_error("/nonexistent/folder/") == ErrorKind::NoInput);
  }

  TEST_CASE("sources: synthetic and file specs give the frames they name") {
    auto first = [](const std::string& spec, const io::SourceOptions& o = {}) {
      io::Frame f;
      REQUIRE(io::open_source(spec, o)->read(f) == io::ReadResult::Frame);
      return *f.image;
    };
    const HostImage full = first("synthetic");
    CHECK(full.desc() == ImageDesc{1920, 1080, 3, PixelType::U8});
    CHECK(same_pixels(full, io::synthetic_frame(1920, 1080, 1, 0)));
    CHECK(same_pixels(first("synthetic:640x480"), io::synthetic_frame(640, 480, 1, 0)));
    CHECK(same_pixels(first(data_path("brick.png")), io::load_image(data_path("brick.png"))));
    for (const char* spec : {"synthetic:", "synthetic:640", "synthetic:640x", "synthetic:x480",
                             "synthetic:axb", "synthetic:640x480x3", "synthetic:-5x10",
                             "synthetic: 64x48", "synthetic:0x10", "synthetic:20000x10"}) {
      INFO(std::string(spec));
      CHECK(open_error(spec) == ErrorKind::Usage);
    }
    try {
      io::open_source("synthetic:big");
      FAIL("accepted synthetic:big");
    } catch (const Error& e) {
      CHECK(std::string(e.what()).find("synthetic:WxH") != std::string::npos);
    }
    io::SourceOptions small;
    small.max_pixels = 1000;
    try {
      io::open_source("synthetic:640x480", small);
      FAIL("accepted an oversized synthetic scene");
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::Data);
    }
    CHECK(open_error("/no/such/file.png") == ErrorKind::NoInput);
  }

  TEST_CASE("sources: the synthetic scene animates, deterministically") {
    auto a = io::open_source("synthetic:64x48@15");
    auto b = io::open_source("synthetic:64x48");
    CHECK(a->fps() == 15);
    CHECK(b->fps() == 30);
    CHECK_FALSE(a->live());
    io::Frame f0, f1, g0;
    REQUIRE(a->read(f0) == io::ReadResult::Frame);
    REQUIRE(a->read(f1) == io::ReadResult::Frame);
    REQUIRE(b->read(g0) == io::ReadResult::Frame);
    CHECK(f0.image->desc() == ImageDesc{64, 48, 3, PixelType::U8});
    CHECK(f0.index == 0);
    CHECK(f1.index == 1);
    CHECK(same_pixels(*f0.image, *g0.image));
    CHECK_FALSE(same_pixels(*f0.image, *f1.image));
  }

  TEST_CASE("sources: an image repeats; a folder plays in name order, skips bad files, loops") {
    auto img = io::open_source(data_path("box.png"));
    io::Frame a, b;
    REQUIRE(img->read(a) == io::ReadResult::Frame);
    REQUIRE(img->read(b) == io::ReadResult::Frame);
    CHECK(same_pixels(*a.image, *b.image));
    CHECK(b.index == 1);

    const fs::path dir = fs::temp_directory_path() / ("lab_folder_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    fs::copy_file(data_path("box.png"), dir / "b.png", fs::copy_options::overwrite_existing);
    fs::copy_file(data_path("brick.png"), dir / "a.png", fs::copy_options::overwrite_existing);
    std::ofstream(dir / "c.png") << "not a png";
    std::ofstream(dir / "notes.txt") << "ignored: not an image name";
    auto folder = io::open_source(dir.string());
    CHECK(folder->describe().find("3 images") != std::string::npos);
    io::Frame f;
    REQUIRE(folder->read(f) == io::ReadResult::Frame);
    CHECK(f.image->desc().width == 512);  // a.png (brick) first
    REQUIRE(folder->read(f) == io::ReadResult::Frame);
    CHECK(f.image->desc().width == 324);  // b.png (box)
    CHECK(folder->read(f) == io::ReadResult::Skip);
    CHECK(folder->last_problem().find("c.png") != std::string::npos);
    REQUIRE(folder->read(f) == io::ReadResult::Frame);
    CHECK(f.image->desc().width == 512);  // looped
    CHECK(f.index == 2);

    fs::remove_all(dir);
    fs::create_directories(dir);
    CHECK(open_error(dir.string()) == ErrorKind::NoInput);  // no images
    fs::remove_all(dir);
  }

#if defined(LAB_WITH_OPENCV)
  TEST_CASE("sources: a video loops at its real end, though its header overstates the count") {
    auto v = io::open_source(data_path("tree.avi"));
    CHECK(v->describe().find("320x240") != std::string::npos);
    CHECK(v->fps() == doctest::Approx(15).epsilon(0.01));
    io::Frame first, f;
    REQUIRE(v->read(first) == io::ReadResult::Frame);
    CHECK(first.image->desc() == ImageDesc{320, 240, 3, PixelType::U8});
    // Read until the first frame comes round again: the video looped.
    int frames = 1, skips = 0;
    bool looped = false;
    while (frames + skips < 2000 && !looped) {
      const io::ReadResult r = v->read(f);
      REQUIRE(r != io::ReadResult::Lost);
      if (r == io::ReadResult::Skip) {
        ++skips;
        continue;
      }
      ++frames;
      looped = same_pixels(*f.image, *first.image);
    }
    CHECK(looped);
    CHECK(f.index == uint64_t(frames - 1));  // indices keep counting across the loop
    // tree.avi declares 444 frames; 376 of them are AVI "drop" chunks, 68 decode. Its end is
    // an end, not a run of corrupt frames.
    CHECK(skips == 0);
    CHECK(frames == 69);
  }

  TEST_CASE("sources: an absent camera and a broken pipeline say so") {
    try {
      io::open_source("camera:63");
      FAIL("camera 63 opened");
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::NoInput);
      CHECK(std::string(e.what()).find("/dev/video63") != std::string::npos);
    }
    CHECK(open_error("gst:nosuchelement ! appsink") == ErrorKind::NoInput);
    const fs::path junk =
        fs::temp_directory_path() / ("lab_junk_" + std::to_string(::getpid()) + ".avi");
    std::ofstream(junk) << "not a video";
    CHECK(open_error(junk.string()) == ErrorKind::Data);
    fs::remove(junk);
  }
#endif

  TEST_CASE("capture: the consumer takes the newest frame at once; older ones are dropped") {
    auto alive = std::make_shared<std::atomic<int>>(0);
    {
      io::Capture cap([&] { return std::make_unique<FakeSource>(std::vector<Step>{}, alive); },
                      fast_options());
      io::Frame f;
      REQUIRE(cap.wait_latest(f, 2000ms));
      std::this_thread::sleep_for(50ms);  // the camera runs on without us
      const auto t0 = Clock::now();
      REQUIRE(cap.take_latest(f));
      CHECK(Clock::now() - t0 < 5ms);
      CHECK(f.index > 5);
      const io::CaptureStats s = cap.stats();
      CHECK(s.state == io::CaptureState::Running);
      CHECK(s.dropped > 0);
      CHECK(s.taken == 2);
      CHECK(s.source == "fake");
    }
    CHECK(*alive == 0);  // the device is released when the capture ends
  }

  TEST_CASE("capture: a stalled source shows as stalled within a second; the UI never waits") {
    auto alive = std::make_shared<std::atomic<int>>(0);
    io::CaptureOptions o = fast_options();
    io::Capture cap(
        [&] {
          return std::make_unique<FakeSource>(
              std::vector<Step>{{Step::Frame}, {Step::Stall, 8, 8, 1500ms}}, alive);
        },
        o);
    io::Frame f;
    REQUIRE(cap.wait_latest(f, 2000ms));
    const auto last = Clock::now();
    bool waited_long = false;
    const bool stalled = eventually(
        [&] {
          const auto t0 = Clock::now();
          cap.take_latest(f);
          waited_long = waited_long || Clock::now() - t0 > 5ms;
          return cap.stats().state == io::CaptureState::Stalled;
        },
        1500ms);
    CHECK(stalled);
    CHECK(Clock::now() - last < 1200ms);
    CHECK_FALSE(waited_long);
    // The stall ends; frames come back and the state with them.
    CHECK(eventually([&] { return cap.stats().state == io::CaptureState::Running; }, 2000ms));
  }

  TEST_CASE("capture: an unplugged camera reconnects when it returns") {
    auto alive = std::make_shared<std::atomic<int>>(0);
    std::atomic<int> opens{0};
    io::Capture cap(
        [&]() -> std::unique_ptr<io::FrameSource> {
          const int n = opens++;
          if (n == 0)
            return std::make_unique<FakeSource>(
                std::vector<Step>{{Step::Frame}, {Step::Frame}, {Step::Lost}}, alive);
          if (n < 3) throw Error(ErrorKind::NoInput, "camera:0: no such camera");
          return std::make_unique<FakeSource>(std::vector<Step>{}, alive);
        },
        fast_options());
    CHECK(eventually([&] { return cap.stats().reconnects == 1; }, 3000ms));
    io::Frame f;
    CHECK(cap.wait_latest(f, 1000ms));
    const io::CaptureStats s = cap.stats();
    CHECK(s.state == io::CaptureState::Running);
    CHECK(opens >= 4);
    CHECK(*alive == 1);  // the lost device was released before the new one opened
  }

  TEST_CASE("capture: corrupt frames are skipped and counted; a resolution change passes") {
    auto alive = std::make_shared<std::atomic<int>>(0);
    io::Capture cap(
        [&] {
          return std::make_unique<FakeSource>(std::vector<Step>{{Step::Frame, 64, 48},
                                                                {Step::Skip},
                                                                {Step::Skip},
                                                                {Step::Frame, 64, 48},
                                                                {Step::Frame, 32, 16}},
                                              alive);
        },
        fast_options());
    io::Frame f;
    CHECK(eventually([&] { return cap.take_latest(f) && f.image->desc().width == 32; }, 2000ms));
    CHECK(f.image->desc() == ImageDesc{32, 16, 3, PixelType::U8});
    const io::CaptureStats s = cap.stats();
    CHECK(s.skipped == 2);
    CHECK(s.problem == "corrupt frame");
  }

  TEST_CASE("capture: a source that never opens keeps retrying and stops promptly") {
    std::atomic<int> opens{0};
    const auto t0 = Clock::now();
    {
      io::Capture cap(
          [&]() -> std::unique_ptr<io::FrameSource> {
            ++opens;
            throw Error(ErrorKind::NoInput, "camera:0: no such camera");
          },
          fast_options());
      CHECK(eventually([&] { return opens >= 3; }, 2000ms));
      const io::CaptureStats s = cap.stats();
      CHECK(s.state == io::CaptureState::Opening);
      CHECK(s.problem == "camera:0: no such camera");
      io::Frame f;
      CHECK_FALSE(cap.take_latest(f));
    }
    CHECK(Clock::now() - t0 < 2500ms);
  }

  TEST_CASE("capture: stopping never waits on a source blocked inside a read") {
    auto alive = std::make_shared<std::atomic<int>>(0);
    const auto t0 = Clock::now();
    {
      io::Capture cap(
          [&] {
            return std::make_unique<FakeSource>(
                std::vector<Step>{{Step::Frame}, {Step::Stall, 8, 8, 1500ms}}, alive);
          },
          fast_options());
      io::Frame f;
      REQUIRE(cap.wait_latest(f, 2000ms));
      std::this_thread::sleep_for(50ms);  // now inside the 1.5 s read
    }
    CHECK(Clock::now() - t0 < 1000ms);
    // The detached thread releases the device when the read returns.
    CHECK(eventually([&] { return *alive == 0; }, 3000ms));
  }

  TEST_CASE("sources: a folder of only broken files is bad data, and does not spin a core") {
    const fs::path dir = fs::temp_directory_path() / ("lab_broken_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    std::ofstream(dir / "a.png") << "broken";
    std::ofstream(dir / "b.png") << "broken";
    auto folder = io::open_source(dir.string());
    io::Frame f;
    CHECK(folder->read(f) == io::ReadResult::Skip);
    try {  // a whole pass, nothing good: bad data (65), as a reader that gives up on tries says
      folder->read(f);
      FAIL("a folder where nothing decodes read on");
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::Data);
      CHECK(std::string(e.what()).find("none of its 2 image files decodes") != std::string::npos);
    }
    {
      io::Capture cap([&] { return io::open_source(dir.string()); }, fast_options());
      std::this_thread::sleep_for(300ms);
      CHECK(cap.stats().skipped < 20);  // paced, not thousands
      CHECK_FALSE(cap.stats().problem.empty());
    }
    fs::remove_all(dir);
    // A FIFO (or any non-regular file) is refused rather than opened and blocked on.
    const fs::path fifo =
        fs::temp_directory_path() / ("lab_fifo_" + std::to_string(::getpid()) + ".avi");
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    CHECK(open_error(fifo.string()) == ErrorKind::Data);
    fs::remove(fifo);
  }

  TEST_CASE("capture: files are paced at their frame rate") {
    io::CaptureOptions o = fast_options();
    io::Capture cap([] { return io::open_source("synthetic:32x32@50"); }, o);
    std::this_thread::sleep_for(300ms);
    const uint64_t n = cap.stats().captured;
    CHECK(n >= 8);   // 50 fps for 0.3 s: about 15
    CHECK(n <= 25);  // not as fast as the thread can
  }
#if defined(LAB_WITH_OPENCV)
  TEST_CASE("sources: a video over --max-pixels is refused at open, from its header") {
    const fs::path d = scratch_dir("bigvideo");
    const std::string path = (d / "big.avi").string();
    write_mjpeg_avi(path, 400, 300, 30);
    io::SourceOptions small;
    small.max_pixels = 1000;
    try {
      io::open_source(path, small);
      FAIL("an over-cap video opened");
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::Data);
      CHECK(std::string(e.what()) == "video " + path +
                                         ": frames are 400x300 (120000 pixels), over the cap of "
                                         "1000 pixels; --max-pixels raises it");
    }
    // The CLI: exit 65 at once, not 100 decodes and a retry loop.
    const auto t0 = Clock::now();
    const Result r = lab_cli("run --device cpu --frames 30 --max-pixels 1000 --input " + path, 60);
    CHECK(r.code == 65);
    CHECK(has(r, "kernel-lab: error: video " + path + ": frames are 400x300"));
    CHECK(seconds_since(t0) < 5);
    // Under the cap it runs.
    const Result ok = lab_cli("run --device cpu --frames 5 --input " + path, 60);
    CHECK(ok.code == 0);
    CHECK(has(ok, "over 5 frame(s)"));
    fs::remove_all(d);
  }

  TEST_CASE("sources: a video frame that grows past the cap mid-stream is never delivered") {
    // A raw MJPEG stream is JPEGs back to back: three small frames, then a large one. OpenCV
    // 4.6's FFmpeg reader scales every frame to the header's size (it logs "Slice parameters
    // ... are invalid" and hands back a 40x30 frame); a reader that passes the new size on
    // meets read()'s check, which stops the video with Data. Either way no frame over the cap
    // comes out, and the stream ends or loops instead of retrying the large frame.
    const fs::path d = scratch_dir("growing");
    const std::string path = (d / "grows.mjpeg").string();
    {
      std::vector<uchar> small_jpeg, big_jpeg;
      REQUIRE(cv::imencode(".jpg", cv::Mat(30, 40, CV_8UC3, cv::Scalar(0, 80, 160)), small_jpeg));
      REQUIRE(cv::imencode(".jpg", cv::Mat(300, 400, CV_8UC3, cv::Scalar(0, 80, 160)), big_jpeg));
      std::ofstream f(path, std::ios::binary);
      for (int i = 0; i < 3; ++i) f.write((const char*)small_jpeg.data(), small_jpeg.size());
      f.write((const char*)big_jpeg.data(), big_jpeg.size());
    }
    io::SourceOptions o;
    o.max_pixels = 5000;
    auto v = io::open_source(path, o);
    io::Frame f;
    int frames = 0;
    const auto t0 = Clock::now();
    try {
      for (int i = 0; i < 20; ++i) {
        const io::ReadResult r = v->read(f);
        REQUIRE(r != io::ReadResult::Lost);
        if (r != io::ReadResult::Frame) continue;
        ++frames;
        CHECK(f.image->desc().pixels() <= o.max_pixels);
      }
      CHECK(frames >= 3);
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::Data);
      CHECK(std::string(e.what()).find("is 400x300 (120000 pixels), over the cap of 5000") !=
            std::string::npos);
      CHECK(frames == 3);
    }
    CHECK(seconds_since(t0) < 5);
    fs::remove_all(d);
  }

  TEST_CASE("sources: the repository's video still runs") {
    const Result r = lab_cli("run --device cpu --frames 5 --input " + data_path("tree.avi"), 60);
    CHECK(r.code == 0);
    CHECK(has(r, "over 5 frame(s)"));
  }

  TEST_CASE("gst: a pipeline GStreamer cannot build: the lab's line first, GLib's inside it") {
    if (!has_gstreamer()) return;
    const Result r =
        lab_cli("run --device cpu --frames 1 --input 'gst:videotestsrc ! ! appsink'", 30);
    INFO(r.out);
    CHECK(r.code == 66);
    CHECK(r.out.rfind("kernel-lab: error: gst: the pipeline did not start", 0) == 0);
    CHECK(r.out.find('\n') == r.out.size() - 1);  // one line
  }

  TEST_CASE("sources: a corrupt video is one line from the lab, no FFmpeg text before it") {
    // An MP4 signature, then noise: FFmpeg logs "moov atom not found" unless the lab quiets it.
    const fs::path f =
        fs::temp_directory_path() / ("lab-corrupt-" + std::to_string(getpid()) + ".mp4");
    std::string bytes(
        "\0\0\0\x18"
        "ftypmp42\0\0\0\0mp42isom",
        24);
    for (int k = 0; k < 2000; ++k) bytes += char((k * 2654435761u) >> 24);
    std::ofstream(f, std::ios::binary) << bytes;
    const Result r = lab_cli("run --device cpu --frames 1 --input " + f.string(), 60);
    INFO(r.out);
    CHECK(r.code == 65);
    CHECK(r.out.rfind("kernel-lab: error: ", 0) == 0);
    CHECK_FALSE(has(r, "moov"));
    fs::remove(f);
  }

  TEST_CASE("gst: a pipeline that never prerolls times out with Io; a cancel ends the wait") {
    if (!has_gstreamer()) return;
    io::SourceOptions o;
    o.open_timeout = 1000ms;
    auto t0 = Clock::now();
    try {
      io::open_source("gst:appsrc ! appsink", o);
      FAIL("a pipeline with no data opened");
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::Io);
      CHECK(std::string(e.what()).find("no frame for 1 s from gst:appsrc ! appsink") == 0);
    }
    CHECK(seconds_since(t0) >= 0.9);
    CHECK(seconds_since(t0) < 1.6);
    CHECK(io::stuck_source_threads() >= 1);  // the helper is still inside GStreamer
    // While it is, the same spec is refused at once, not opened (and stuck) again.
    t0 = Clock::now();
    try {
      io::open_source("gst:appsrc ! appsink", o);
      FAIL("a stuck pipeline was opened again");
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::Io);
    }
    CHECK(seconds_since(t0) < 0.5);
    // A Ctrl-C (the caller's `cancelled`) ends the wait within 100 ms or so.
    io::SourceOptions c;
    const auto cancel_at = Clock::now() + 300ms;
    c.cancelled = [&] { return Clock::now() >= cancel_at; };
    t0 = Clock::now();
    CHECK_THROWS_AS(io::open_source("gst:appsrc name=quiet ! appsink", c), io::SourceCancelled);
    CHECK(seconds_since(t0) < 0.6);
  }

  TEST_CASE("gst: run gives up on a pipeline that never prerolls after 10 s, exit 74") {
    if (!has_gstreamer()) return;
    const auto t0 = Clock::now();
    const Result r = lab_cli("run --device cpu --input 'gst:appsrc ! appsink'", 30);
    const double s = seconds_since(t0);
    CHECK(r.code == 74);
    CHECK(has(r, "kernel-lab: error: no frame for 10 s from gst:appsrc ! appsink"));
    CHECK(s >= 9.5);
    CHECK(s < 14);  // 10 s and the start of the process, on a loaded machine
  }

  TEST_CASE("gst: frames over --max-pixels are refused at open; under it they run") {
    if (!has_gstreamer()) return;
    const std::string spec =
        "'gst:videotestsrc num-buffers=3 ! video/x-raw,width=64,height=48 ! videoconvert ! "
        "appsink'";
    const auto t0 = Clock::now();
    const Result big = lab_cli("run --device cpu --max-pixels 1000 --input " + spec, 30);
    CHECK(big.code == 65);
    CHECK(has(big,
              "frames are 64x48 (3072 pixels), over the cap of 1000 pixels; --max-pixels "
              "raises it"));
    CHECK(seconds_since(t0) < 5);
    const Result ok = lab_cli("run --device cpu --frames 3 --max-pixels 3072 --input " + spec, 30);
    CHECK(ok.code == 0);
    CHECK(has(ok, "over 3 frame(s)"));
    // The library: the first frame is the pipeline's, at its size.
    io::SourceOptions o;
    o.max_pixels = 3072;
    auto src = io::open_source(
        "gst:videotestsrc num-buffers=3 ! video/x-raw,width=64,height=48 ! videoconvert ! appsink",
        o);
    io::Frame f;
    REQUIRE(src->read(f) == io::ReadResult::Frame);
    CHECK(f.image->desc().width == 64);
    CHECK(f.image->desc().height == 48);
  }
#endif

  // Pinned upload sends a frame from where the source holds it: sources decode into page-locked
  // frames and a still image hands out the same one every read. Tested through a replaced
  // allocator (no GPU here to pin memory with): counted blocks stand for page-locked ones.
  TEST_CASE("sources: with pinned upload, frames are page-locked and a still image is not copied") {
    static std::atomic<int> blocks{0};
    set_pinned_allocator({[](size_t n) -> void* { return ++blocks, std::malloc(n); },
                          [](void* p) { --blocks, std::free(p); }});
    struct Restore {
      ~Restore() { set_frame_memory_pinned(false), set_pinned_allocator({}); }
    } restore;
    auto frames = [](const std::string& spec, int n) {
      std::vector<io::Frame> out(static_cast<size_t>(n));
      auto src = io::open_source(spec);
      for (io::Frame& f : out) REQUIRE(src->read(f) == io::ReadResult::Frame);
      return out;
    };
    for (bool pinned : {false, true}) {
      CAPTURE(pinned);
      set_frame_memory_pinned(pinned);
      const int before = blocks;
      // A still image: one decode, one frame, handed out every read (no copy per frame).
      const auto still = frames(data_path("box_in_scene.png"), 3);
      CHECK(still[0].image == still[1].image);
      CHECK(still[1].image == still[2].image);
      CHECK(still[0].image->pinned() == pinned);
      CHECK(blocks - before == (pinned ? 1 : 0));
      // A folder: each image decoded into its own frame, page-locked with pinned upload.
      for (const io::Frame& f : frames(data_path(""), 3)) CHECK(f.image->pinned() == pinned);
      // The synthetic scene renders into page-locked frames.
      for (const io::Frame& f : frames("synthetic:64x48", 2)) CHECK(f.image->pinned() == pinned);
#if defined(LAB_WITH_OPENCV)
      // A video's frames are decoded into page-locked frames too.
      for (const io::Frame& f : frames(data_path("tree.avi"), 3))
        CHECK(f.image->pinned() == pinned);
#endif
    }
    // A page-locked frame's rows are padded as the device's are (kernels may read it in place);
    // copies are plain memory, rows back to back, the same pixels: a consumer that needs its own
    // copy never holds a pooled block.
    set_frame_memory_pinned(true);
    const auto still = frames(data_path("coffee.png"), 1);  // 600 x 3 bytes a row
    const HostImage& f = *still[0].image;
    CHECK(f.pinned());
    CHECK(f.pitch() >= f.desc().row_bytes() + 16);
    CHECK(f.pitch() % 16 == 0);
    const HostImage copy(f);
    CHECK_FALSE(copy.pinned());
    CHECK(copy.pitch() == copy.desc().row_bytes());
    set_frame_memory_pinned(false);
    const HostImage plain = io::load_image(data_path("coffee.png"));
    CHECK(same_pixels(copy, plain));
    bool rows_equal = true;
    for (int y = 0; y < f.desc().height; ++y)
      rows_equal &=
          std::memcmp(f.bytes() + size_t(y) * f.pitch(), plain.bytes() + size_t(y) * plain.pitch(),
                      plain.desc().row_bytes()) == 0;
    CHECK(rows_equal);
  }
}
