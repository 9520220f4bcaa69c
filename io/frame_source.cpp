#include "frame_source.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <vector>

#include <dlfcn.h>

#include "check.h"
#include "pipeline.h"  // parse_wxh
#include "printable.h"

#if defined(LAB_WITH_OPENCV)
#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>
#include <opencv2/core/utils/logger.hpp>
#include <opencv2/videoio.hpp>
#include <opencv2/videoio/registry.hpp>
#endif

namespace fs = std::filesystem;

namespace lab::io {

namespace {
std::atomic<int> g_stuck_threads{0};
#if defined(LAB_WITH_OPENCV)
// Specs whose abandoned open has not returned yet. Never destroyed: such an open may return
// while the process exits.
struct StuckOpens {
  std::mutex mutex;
  std::set<std::string> specs;
};
StuckOpens& stuck_opens() {
  static StuckOpens* s = new StuckOpens;
  return *s;
}
#endif
}  // namespace

int stuck_source_threads() {
  return g_stuck_threads.load();
}

namespace detail {
void count_stuck_source_thread(int delta) {
  g_stuck_threads += delta;
}
}  // namespace detail

namespace {

std::string lower_ext(const fs::path& p) {
  std::string e = p.extension().string();
  std::transform(e.begin(), e.end(), e.begin(), [](unsigned char c) { return std::tolower(c); });
  return e;
}

bool is_video_ext(const std::string& e) {
  static const char* const exts[] = {".avi", ".mp4",  ".mkv", ".mov", ".webm", ".m4v",
                                     ".mpg", ".mpeg", ".wmv", ".flv", ".ts",   ".mjpeg"};
  return std::find(std::begin(exts), std::end(exts), e) != std::end(exts);
}

bool is_image_ext(const std::string& e) {
  static const char* const exts[] = {".png", ".jpg", ".jpeg", ".bmp",  ".pgm", ".ppm",
                                     ".pnm", ".tif", ".tiff", ".webp", ".tga", ".gif"};
  return std::find(std::begin(exts), std::end(exts), e) != std::end(exts);
}

// "WxH" or "WxH@FPS"; fps 0 when absent.
bool parse_size_fps(const std::string& s, int& w, int& h, double& fps) {
  const auto at = s.find('@');
  const auto b = parse_wxh(s.substr(0, at));
  if (!b) return false;
  w = b->x, h = b->y, fps = 0;
  if (at != std::string::npos) {
    char* end = nullptr;
    fps = std::strtod(s.c_str() + at + 1, &end);
    if (*end != '\0' || !(fps > 0 && fps <= 1000)) return false;
  }
  return true;
}

class SyntheticSource : public FrameSource {
 public:
  SyntheticSource(int w, int h, double fps, uint64_t seed)
      : m_w(w), m_h(h), m_fps(fps), m_seed(seed) {}
  std::string describe() const override {
    return "synthetic " + std::to_string(m_w) + "x" + std::to_string(m_h) + " @ " +
           std::to_string(int(m_fps)) + " fps";
  }
  double fps() const override { return m_fps; }
  ReadResult read(Frame& out) override {
    out.image = std::make_shared<const HostImage>(
        synthetic_frame(m_w, m_h, m_seed, int(m_next % (1u << 30))));
    out.index = m_next++;
    return ReadResult::Frame;
  }

 private:
  int m_w, m_h;
  double m_fps;
  uint64_t m_seed;
  uint64_t m_next = 0;
};

class ImageFileSource : public FrameSource {
 public:
  ImageFileSource(const std::string& path, const LoadOptions& lo)
      : m_path(path), m_image(std::make_shared<const HostImage>(load_image(path, lo))) {}
  std::string describe() const override { return "image " + m_path + " " + m_image->desc().str(); }
  // A still image is offered at 30 fps, so a capture thread paces it instead of spinning.
  double fps() const override { return 30; }
  ReadResult read(Frame& out) override {
    out.image = m_image;
    out.index = m_next++;
    return ReadResult::Frame;
  }

 private:
  std::string m_path;
  std::shared_ptr<const HostImage> m_image;  // every read hands out this frame
  uint64_t m_next = 0;
};

// The images of a folder in name order, as a looping slideshow. An unreadable file is skipped
// (and said), not fatal.
class FolderSource : public FrameSource {
 public:
  FolderSource(const std::string& dir, const LoadOptions& lo) : m_dir(dir), m_load(lo) {
    std::error_code ec;
    fs::directory_iterator it(dir, ec), end;
    if (ec) throw Error(ErrorKind::Io, dir + ": cannot list the folder: " + ec.message());
    for (; it != end; it.increment(ec)) {
      if (ec) throw Error(ErrorKind::Io, dir + ": cannot list the folder: " + ec.message());
      std::error_code entry_ec;  // an unreadable entry (a dangling link) is just not an image
      if (it->is_regular_file(entry_ec) && is_image_ext(lower_ext(it->path())))
        m_files.push_back(it->path());
    }
    std::sort(m_files.begin(), m_files.end());
    if (m_files.empty()) throw Error(ErrorKind::NoInput, dir + ": no image files in this folder");
  }
  std::string describe() const override {
    return "folder " + m_dir + " (" + std::to_string(m_files.size()) + " images)";
  }
  // A slideshow: one image a second when paced (the GUI); `run` reads them back to back.
  double fps() const override { return 1; }
  ReadResult read(Frame& out) override {
    const fs::path& f = m_files[m_pos];
    m_pos = (m_pos + 1) % m_files.size();
    try {
      out.image = std::make_shared<const HostImage>(load_image(f.string(), m_load));
    } catch (const Error& e) {
      if (e.kind() == ErrorKind::Usage) throw;
      m_problem = e.what();
      // A whole pass without one good image: nothing in the folder decodes, bad data (65),
      // whether it holds 5 files or 150 (the same rule as a reader that gives up on tries).
      if (++m_bad_in_a_row >= m_files.size())
        throw Error(ErrorKind::Data, m_dir + ": none of its " + std::to_string(m_files.size()) +
                                         " image files decodes (the last: " + m_problem + ")");
      return ReadResult::Skip;
    }
    m_bad_in_a_row = 0;
    out.index = m_next++;
    return ReadResult::Frame;
  }

 private:
  std::string m_dir;
  LoadOptions m_load;
  std::vector<fs::path> m_files;
  size_t m_pos = 0;
  size_t m_bad_in_a_row = 0;
  uint64_t m_next = 0;
};

#if defined(LAB_WITH_OPENCV)

// GLib's warnings and criticals (GStreamer's "assertion 'GST_IS_BIN (bin)' failed" for a pipeline
// it cannot parse) would print before the lab's one-line error: they are kept here instead, and
// the last one goes inside that error's parentheses. GLib comes with OpenCV's GStreamer backend;
// its handler is found at run time, so a build without it needs nothing.
std::mutex g_glib_mutex;
std::string g_glib_last;

void keep_glib_message(const char* domain, int level, const char* message, void*) {
  if (!(level & 0x1C)) return;  // G_LOG_LEVEL_ERROR, _CRITICAL, _WARNING; not messages or debug
  std::lock_guard<std::mutex> lock(g_glib_mutex);
  g_glib_last = std::string(domain ? domain : "GLib") + ": " + (message ? message : "");
}

// The GLib message kept since the last call, as " (DOMAIN: message)", or "".
std::string take_glib_message() {
  std::lock_guard<std::mutex> lock(g_glib_mutex);
  std::string m = g_glib_last.empty() ? "" : " (" + printable(g_glib_last, 200) + ")";
  g_glib_last.clear();
  return m;
}

// OpenCV logs its own multi-line warnings when a backend fails to open something; the error
// we throw is the one line the user should see.
void quiet_opencv() {
  cv::utils::logging::setLogLevel(cv::utils::logging::LOG_LEVEL_SILENT);
  static std::once_flag once;  // once, before any source's threads read the environment
  std::call_once(once, [] {
    using Handler = void (*)(const char*, int, const char*, void*);
    using SetDefault = Handler (*)(Handler, void*);
    if (auto set = reinterpret_cast<SetDefault>(dlsym(RTLD_DEFAULT, "g_log_set_default_handler")))
      set(keep_glib_message, nullptr);
    // FFmpeg's own log ("moov atom not found") would precede the lab's one-line error: OpenCV
    // reads this when its FFmpeg backend first starts (-8 is AV_LOG_QUIET). A user's value stays.
    setenv("OPENCV_FFMPEG_LOGLEVEL", "-8", 0);
  });
}

std::string seconds_text(std::chrono::milliseconds d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", double(d.count()) / 1000.0);
  return buf;
}

std::string over_cap_text(int w, int h, size_t cap) {
  return std::to_string(w) + "x" + std::to_string(h) + " (" +
         std::to_string(size_t(w) * size_t(h)) + " pixels), over the cap of " +
         std::to_string(cap) + " pixels; --max-pixels raises it";
}

bool over_cap(int w, int h, size_t cap) {
  return w > 0 && h > 0 && size_t(w) * size_t(h) > cap;
}

// Runs `work` (an OpenCV open and first read: they can block forever and cannot be cancelled)
// on a helper thread, and waits for it up to opt.open_timeout in 100 ms slices that poll
// opt.cancelled. On giving up, the helper is left detached with its own share of the state: if
// it ever returns, it drops what it made (releasing the device) there. Until then a second
// open of the same spec is refused at once, so retries (Capture's, every 0.5 s) cannot pile up
// stuck pipelines. `work` sets `opened` once the device or pipeline is open, for the message;
// `shown` is the spec as errors quote it.
template <typename T>
T open_within_deadline(const std::string& spec, const std::string& shown, const SourceOptions& opt,
                       std::function<T(std::atomic<bool>& opened)> work) {
  {
    std::lock_guard<std::mutex> lock(stuck_opens().mutex);
    if (stuck_opens().specs.count(spec))
      throw Error(ErrorKind::Io,
                  "no frame from " + shown + ": an earlier open of it has still not returned");
  }
  struct State {
    std::mutex mutex;
    std::condition_variable cv;
    bool done = false, abandoned = false;
    std::atomic<bool> opened{false};
    std::optional<T> result;
    std::exception_ptr error;
  };
  auto st = std::make_shared<State>();
  std::thread([st, spec, work = std::move(work)] {
    std::optional<T> r;
    std::exception_ptr e;
    try {
      r.emplace(work(st->opened));
    } catch (...) {
      e = std::current_exception();
    }
    std::unique_lock<std::mutex> lock(st->mutex);
    st->done = true;
    if (!st->abandoned) {
      st->result = std::move(r);
      st->error = e;
      st->cv.notify_all();
      return;
    }
    lock.unlock();
    r.reset();  // nobody took it: release the device or pipeline here
    std::lock_guard<std::mutex> g(stuck_opens().mutex);
    stuck_opens().specs.erase(spec);
    --g_stuck_threads;
  }).detach();

  const auto deadline = std::chrono::steady_clock::now() + opt.open_timeout;
  std::unique_lock<std::mutex> lock(st->mutex);
  while (!st->done) {
    const bool cancel = opt.cancelled && opt.cancelled();
    const auto now = std::chrono::steady_clock::now();
    if (cancel || now >= deadline) {
      st->abandoned = true;
      {
        std::lock_guard<std::mutex> g(stuck_opens().mutex);
        stuck_opens().specs.insert(spec);
        ++g_stuck_threads;
      }
      if (cancel) throw SourceCancelled(shown + ": interrupted while opening");
      throw Error(ErrorKind::Io, "no frame for " + seconds_text(opt.open_timeout) + " s from " +
                                     shown +
                                     (st->opened ? ": it opened, but no frame arrived"
                                                 : ": it did not finish opening (a pipeline "
                                                   "that never prerolls, or a device that does "
                                                   "not answer)"));
    }
    st->cv.wait_until(lock, std::min(deadline, now + std::chrono::milliseconds(100)));
  }
  if (st->error) std::rethrow_exception(st->error);
  return std::move(*st->result);
}

// cv::Mat (8-bit gray, BGR or BGRA) -> HostImage.
HostImage to_host(const cv::Mat& m) {
  cv::Mat src = m;
  if (src.depth() != CV_8U) src.convertTo(src, CV_8U);
  if (src.channels() == 2) cv::cvtColor(src, src, cv::COLOR_YUV2BGR_YUYV);  // raw YUYV
  HostImage out = HostImage::frame(ImageDesc{src.cols, src.rows, src.channels(), PixelType::U8});
  for (int y = 0; y < src.rows; ++y)
    std::copy(src.ptr<uint8_t>(y), src.ptr<uint8_t>(y) + out.desc().row_bytes(),
              out.bytes() + size_t(y) * out.pitch());
  return out;
}

// A file's decoder: FFmpeg, or GStreamer where this OpenCV has no FFmpeg. CAP_ANY would also
// probe the camera backends with the file's name (libdc1394 enumerates the USB devices 2,500
// times for one bad .avi, and leaks each list).
bool open_video_file(cv::VideoCapture& cap, const std::string& path,
                     const std::vector<int>& params) {
  namespace reg = cv::videoio_registry;
  const int api = reg::hasBackend(cv::CAP_FFMPEG)      ? cv::CAP_FFMPEG
                  : reg::hasBackend(cv::CAP_GSTREAMER) ? cv::CAP_GSTREAMER
                                                       : cv::CAP_ANY;
  return cap.open(path, api, params) && cap.isOpened();
}

// What the open helper hands over: the capture, open, and its first frame (empty when that
// read failed: read() then treats it as any failed read).
struct Opened {
  std::unique_ptr<cv::VideoCapture> cap;
  cv::Mat first;
};

class VideoFileSource : public FrameSource {
 public:
  VideoFileSource(const std::string& path, const SourceOptions& opt)
      : m_path(path), m_max_pixels(opt.max_pixels) {
    quiet_opencv();
    const size_t max_pixels = opt.max_pixels;
    Opened o = open_within_deadline<Opened>(
        path, path, opt, [path, max_pixels](std::atomic<bool>& opened) {
          Opened o;
          o.cap = std::make_unique<cv::VideoCapture>();
          // FFmpeg's own timeouts, so a stalled stream cannot block a read (or a shutdown) forever.
          const std::vector<int> params = {cv::CAP_PROP_OPEN_TIMEOUT_MSEC, 5000,
                                           cv::CAP_PROP_READ_TIMEOUT_MSEC, 5000};
          if (!open_video_file(*o.cap, path, params))
            throw Error(ErrorKind::Data, path +
                                             ": cannot decode this video (not a video, or a codec "
                                             "OpenCV's FFmpeg lacks)");
          opened = true;
          // The container's frame size, before we decode a frame: an oversized video is refused
          // here, not decoded frame after frame (a 12000x9000 MJPEG frame takes a second).
          const int w = int(o.cap->get(cv::CAP_PROP_FRAME_WIDTH));
          const int h = int(o.cap->get(cv::CAP_PROP_FRAME_HEIGHT));
          if (over_cap(w, h, max_pixels))
            throw Error(ErrorKind::Data,
                        "video " + path + ": frames are " + over_cap_text(w, h, max_pixels));
          if (!o.cap->read(o.first)) o.first.release();
          return o;
        });
    m_cap = std::move(o.cap);
    m_first = std::move(o.first);
    // Containers may not know (a negative, NaN or absurd count): 0 means "unknown".
    const double count = m_cap->get(cv::CAP_PROP_FRAME_COUNT);
    m_count = std::isfinite(count) && count >= 1 && count < 1e12 ? int64_t(count) : 0;
    m_fps = m_cap->get(cv::CAP_PROP_FPS);
    if (!(m_fps > 0 && m_fps < 1000)) m_fps = 30;  // unknown: pace it like a camera
  }
  std::string describe() const override {
    return "video " + m_path + " " + std::to_string(int(m_cap->get(cv::CAP_PROP_FRAME_WIDTH))) +
           "x" + std::to_string(int(m_cap->get(cv::CAP_PROP_FRAME_HEIGHT))) + " @ " +
           std::to_string(int(m_fps + 0.5)) + " fps, " +
           (m_count > 0 ? std::to_string(m_count) + " frames" : "frame count unknown");
  }
  double fps() const override { return m_fps; }
  ReadResult read(Frame& out) override {
    cv::Mat m;
    std::swap(m, m_first);  // the frame the open read, if any
    if (m.empty() && (!m_cap->read(m) || m.empty())) {
      // The end? Frame counts in headers overstate (AVI "drop" chunks): the timestamp of the
      // last good frame, within two frames of the duration, says it better.
      const double duration_ms = m_count > 0 ? 1000.0 * double(m_count) / m_fps : 0;
      const bool at_end = m_bad_from < 0 && m_last_ms >= duration_ms - 2000.0 / m_fps;
      // Otherwise a frame that does not decode: jump ahead, twice as far after each failure (a
      // damaged stretch of a file can span many frames, and seeks into it fail too), until a
      // frame decodes or the end is passed; then loop to the start.
      if (m_bad_from < 0) m_bad_from = int64_t(m_cap->get(cv::CAP_PROP_POS_FRAMES));
      const int64_t target = m_bad_from + m_jump;
      m_jump *= 2;
      if (!at_end && m_count > 0 && target < m_count) {
        m_problem = m_path + ": frame " + std::to_string(m_bad_from) + " does not decode";
        m_cap->set(cv::CAP_PROP_POS_FRAMES, double(target));
        return ReadResult::Skip;
      }
      m_bad_from = -1, m_jump = 1;
      m_cap->set(cv::CAP_PROP_POS_FRAMES, 0);
      if (!m_cap->read(m) || m.empty()) {
        // Some containers cannot seek back (a one-frame video): open the file again.
        m_cap->release();
        if (!open_video_file(*m_cap, m_path, {}) || !m_cap->read(m) || m.empty())
          throw Error(ErrorKind::Data, m_path + ": no frame decodes");  // the file is broken
      }
    }
    m_bad_from = -1, m_jump = 1;
    m_last_ms = m_cap->get(cv::CAP_PROP_POS_MSEC);
    // A frame larger than the header said (a size change mid-stream) stops the video: it is
    // decoded once, never skipped and decoded again on every pass.
    if (over_cap(m.cols, m.rows, m_max_pixels))
      throw Error(ErrorKind::Data,
                  "video " + m_path + ": frame " +
                      std::to_string(int64_t(m_cap->get(cv::CAP_PROP_POS_FRAMES)) - 1) + " is " +
                      over_cap_text(m.cols, m.rows, m_max_pixels));
    out.image = std::make_shared<const HostImage>(to_host(m));
    out.index = m_next++;
    return ReadResult::Frame;
  }

 private:
  std::string m_path;
  size_t m_max_pixels;
  std::unique_ptr<cv::VideoCapture> m_cap;
  cv::Mat m_first;
  int64_t m_count = 0;
  double m_fps = 0;
  uint64_t m_next = 0;
  int64_t m_bad_from = -1;  // where the current run of undecodable frames began
  int64_t m_jump = 1;
  double m_last_ms = 0;  // timestamp of the last good frame
};

// A live device through OpenCV: a V4L2 camera or a GStreamer pipeline.
class LiveSource : public FrameSource {
 public:
  // `spec` names it in errors; `name` in describe().
  LiveSource(const std::string& spec, std::string name, int camera, const std::string& pipeline,
             int w, int h, double fps, const SourceOptions& opt)
      : m_spec(printable(spec)), m_name(std::move(name)), m_max_pixels(opt.max_pixels) {
    quiet_opencv();
    const std::string shown = m_spec, label = m_name;
    const size_t max_pixels = opt.max_pixels;
    Opened o = open_within_deadline<Opened>(spec, m_spec, opt, [=](std::atomic<bool>& opened) {
      Opened o;
      o.cap = std::make_unique<cv::VideoCapture>();
      cv::VideoCapture& c = *o.cap;
      bool ok = false;
      if (pipeline.empty()) {
        ok = c.open(camera, cv::CAP_V4L2);
        if (ok) {
          // MJPG where offered (USB 2 bandwidth), and a one-frame queue: the view stays live
          // instead of showing frames that waited in the driver's buffers.
          c.set(cv::CAP_PROP_FOURCC, cv::VideoWriter::fourcc('M', 'J', 'P', 'G'));
          c.set(cv::CAP_PROP_BUFFERSIZE, 1);
          if (w > 0) c.set(cv::CAP_PROP_FRAME_WIDTH, w), c.set(cv::CAP_PROP_FRAME_HEIGHT, h);
          if (fps > 0) c.set(cv::CAP_PROP_FPS, fps);
        }
      } else {
        take_glib_message();  // one from an earlier pipeline is not this one's
        ok = c.open(pipeline, cv::CAP_GSTREAMER);
      }
      if (!ok || !c.isOpened())
        throw Error(ErrorKind::NoInput,
                    pipeline.empty()
                        ? label + ": no such camera, or it is busy (/dev/video" +
                              std::to_string(camera) + ")"
                        : label +
                              ": the pipeline did not start (is it valid, does it end in "
                              "appsink, and was OpenCV built with GStreamer?)" +
                              take_glib_message());
      opened = true;
      // The negotiated size, where OpenCV reports it, before a frame is read.
      const int nw = int(c.get(cv::CAP_PROP_FRAME_WIDTH)),
                nh = int(c.get(cv::CAP_PROP_FRAME_HEIGHT));
      if (over_cap(nw, nh, max_pixels))
        throw Error(ErrorKind::Data, shown + ": frames are " + over_cap_text(nw, nh, max_pixels));
      if (!c.read(o.first)) o.first.release();
      return o;
    });
    m_cap = std::move(o.cap);
    m_first = std::move(o.first);
  }
  std::string describe() const override {
    return m_name + " " + std::to_string(int(m_cap->get(cv::CAP_PROP_FRAME_WIDTH))) + "x" +
           std::to_string(int(m_cap->get(cv::CAP_PROP_FRAME_HEIGHT))) + " @ " +
           std::to_string(int(m_cap->get(cv::CAP_PROP_FPS) + 0.5)) + " fps";
  }
  bool live() const override { return true; }
  double fps() const override { return m_cap->get(cv::CAP_PROP_FPS); }
  ReadResult read(Frame& out) override {
    cv::Mat m;
    std::swap(m, m_first);  // the frame the open read, if any
    if (m.empty() && (!m_cap->read(m) || m.empty())) {
      // One bad frame (a corrupt MJPEG) is skipped; several in a row mean the device is gone.
      if (++m_failures < 5) {
        m_problem = m_name + ": a frame did not arrive or decode";
        return ReadResult::Skip;
      }
      m_problem = m_name + ": no frame (unplugged or stopped?)";
      return ReadResult::Lost;
    }
    m_failures = 0;
    // Checked once, as it arrives: a device that switched to an oversized mode stops here
    // (Capture reopens it, and the open checks the size again).
    if (over_cap(m.cols, m.rows, m_max_pixels))
      throw Error(ErrorKind::Data, m_spec + ": frame " + std::to_string(m_next) + " is " +
                                       over_cap_text(m.cols, m.rows, m_max_pixels));
    out.image = std::make_shared<const HostImage>(to_host(m));
    out.index = m_next++;
    return ReadResult::Frame;
  }

 private:
  std::string m_spec;
  std::string m_name;
  size_t m_max_pixels;
  std::unique_ptr<cv::VideoCapture> m_cap;
  cv::Mat m_first;
  uint64_t m_next = 0;
  int m_failures = 0;
};

#endif  // LAB_WITH_OPENCV

#if !defined(LAB_WITH_OPENCV)
[[noreturn]] void no_opencv(const std::string& what) {
  throw Error(ErrorKind::Unavailable,
              what +
                  " needs OpenCV: this build has LAB_WITH_OPENCV=OFF (synthetic, images and "
                  "folders still work)");
}
#endif

}  // namespace

SourceSpec parse_source_spec(const std::string& spec) {
  SourceSpec out;
  const std::string shown = printable(spec);  // errors quote it on one line
  if (spec == "synthetic" || spec.rfind("synthetic:", 0) == 0) {
    out.kind = SourceSpec::Synthetic;
    out.width = 1920, out.height = 1080, out.fps = 30;
    if (spec != "synthetic" && !parse_size_fps(spec.substr(10), out.width, out.height, out.fps))
      throw Error(
          ErrorKind::Usage,
          "malformed '" + shown + "': expected synthetic, synthetic:WxH or synthetic:WxH@FPS");
    if (out.fps == 0) out.fps = 30;
    if (out.width > 16384 || out.height > 16384)
      throw Error(ErrorKind::Usage, shown + ": the synthetic scene is at most 16384 on a side");
    return out;
  }
  if (spec.rfind("camera:", 0) == 0) {
    const std::string rest = spec.substr(7);
    const auto colon = rest.find(':');
    char* end = nullptr;
    const std::string num = rest.substr(0, colon);
    const long n = std::strtol(num.c_str(), &end, 10);
    out.kind = SourceSpec::Camera;
    if (num.empty() || !std::isdigit((unsigned char)num[0]) || *end != '\0' || n < 0 || n > 255 ||
        (colon != std::string::npos &&
         !parse_size_fps(rest.substr(colon + 1), out.width, out.height, out.fps)))
      throw Error(ErrorKind::Usage,
                  "malformed '" + shown + "': expected camera:N, camera:N:WxH or camera:N:WxH@FPS");
    out.camera = int(n);
    return out;
  }
  if (spec.rfind("gst:", 0) == 0) {
    if (spec.size() == 4) throw Error(ErrorKind::Usage, "gst: needs a pipeline after the colon");
    out.kind = SourceSpec::GStreamer;
    out.text = spec.substr(4);
    return out;
  }
  if (spec.empty())
    throw Error(ErrorKind::Usage,
                "empty input: expected a file, a folder, "
                "synthetic, camera:N or gst:PIPELINE");
  out.kind = SourceSpec::Path;
  out.text = spec;
  return out;
}

std::unique_ptr<FrameSource> open_source(const std::string& spec, const SourceOptions& opt) {
  LoadOptions lo;
  lo.max_pixels = opt.max_pixels;
  lo.accept_truncated = opt.accept_truncated;
  const SourceSpec s = parse_source_spec(spec);
  switch (s.kind) {
    case SourceSpec::Synthetic:
      if (size_t(s.width) * size_t(s.height) > opt.max_pixels)
        throw Error(ErrorKind::Data, spec + ": over --max-pixels");
      return std::make_unique<SyntheticSource>(s.width, s.height, s.fps, opt.seed);
    case SourceSpec::Camera:
#if defined(LAB_WITH_OPENCV)
      return std::make_unique<LiveSource>(spec, spec, s.camera, "", s.width, s.height, s.fps, opt);
#else
      no_opencv("a camera");
#endif
    case SourceSpec::GStreamer:
#if defined(LAB_WITH_OPENCV)
      return std::make_unique<LiveSource>(spec, "gst", -1, s.text, 0, 0, 0, opt);
#else
      no_opencv("a GStreamer pipeline");
#endif
    case SourceSpec::Path:
      break;
  }
  std::error_code ec;
  const auto st = fs::status(spec, ec);
  if (st.type() == fs::file_type::directory) return std::make_unique<FolderSource>(spec, lo);
  if (st.type() == fs::file_type::not_found)
    throw Error(ErrorKind::NoInput, spec + ": no such file or folder");
  if (st.type() != fs::file_type::regular)
    throw Error(ErrorKind::Data, spec + ": not a regular file (a device or pipe could block)");
  if (is_video_ext(lower_ext(spec))) {
#if defined(LAB_WITH_OPENCV)
    return std::make_unique<VideoFileSource>(spec, opt);
#else
    no_opencv("a video file");
#endif
  }
  return std::make_unique<ImageFileSource>(spec, lo);
}

}  // namespace lab::io
