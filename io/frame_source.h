// Frame sources: the built-in synthetic scene, an image, a folder of images, a video file, a
// V4L2 camera, a GStreamer pipeline. One interface, so `run`, the GUI and the tests consume
// them alike; Capture (capture.h) runs one on its own thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "check.h"

#include "image_source.h"
#include "image.h"

namespace lab::io {

// A frame is immutable and shared: a still image hands out the same frame every read, so with
// pinned upload its page-locked block goes to the GPU as it is, with no host copy. Sources
// decode into HostImage::frame(), page-locked when frame_memory_pinned().
struct Frame {
  std::shared_ptr<const HostImage> image;
  uint64_t index = 0;  // counts up from 0 for every frame a source delivers (loops included)
  // The source's read of this frame, host wall clock: the decode (a file, a video), the render
  // (the synthetic scene) or the wait for it (a camera). A still image decodes when it opens,
  // so its reads cost next to nothing. Set by whoever reads (Capture, `run`).
  double read_ms = 0;
};

enum class ReadResult {
  Frame,  // `out` holds a new frame
  Skip,   // a frame was corrupt and is dropped; the stream goes on
  Stall,  // no frame arrived within the source's own timeout
  Lost,   // the device is gone; reopen() may bring it back
};

class FrameSource {
 public:
  virtual ~FrameSource() = default;
  // One line for the UI and logs: "video tree.avi 320x240 @ 15 fps".
  virtual std::string describe() const = 0;
  // Live sources (cameras) produce frames in real time whether or not anyone reads them: a
  // consumer should take the newest and drop the rest. Files are read as fast as consumed.
  virtual bool live() const { return false; }
  // The nominal frame rate, or 0 when unknown.
  virtual double fps() const { return 0; }
  // Lost means the source must be opened anew (Capture does that, every retry interval).
  virtual ReadResult read(Frame& out) = 0;
  // The last Skip's or Lost's reason, for the UI.
  const std::string& last_problem() const { return m_problem; }

 protected:
  std::string m_problem;
};

struct SourceOptions {
  // Every frame of every source is held to it: images and folders by the loader, the synthetic
  // scene and a video at open (the container's frame size), a camera or pipeline at open (the
  // negotiated size) and each frame as it arrives (a size change mid-stream stops the source
  // with Error(Data) from read()).
  size_t max_pixels = kDefaultMaxPixels;
  bool accept_truncated = false;  // LoadOptions::accept_truncated
  uint64_t seed = 1;              // synthetic scene
  // A video, camera or pipeline is opened, and its first frame read, on a helper thread within
  // this time: OpenCV's opens (a GStreamer preroll) can block forever and cannot be cancelled.
  // Past it open_source throws Error(Io) "no frame for 10 s from SPEC" and leaves the helper
  // to finish, or stay stuck, on its own (see stuck_source_threads()).
  std::chrono::milliseconds open_timeout{10000};
  // Polled every 100 ms while open_source waits for that helper: true ends the wait with
  // SourceCancelled (a Ctrl-C). Called on the opening thread; it must be cheap and not throw.
  std::function<bool()> cancelled;
};

// open_source gave up waiting because SourceOptions::cancelled said so.
class SourceCancelled : public Error {
 public:
  explicit SourceCancelled(const std::string& what) : Error(ErrorKind::Io, what) {}
};

// Threads left inside a source's open or read after their caller gave up on them (a pipeline
// that never prerolls, a read that never returns). While one is, the process should not run
// static destructors (OpenCV's and GStreamer's) under it: the CLI ends with std::_Exit after
// flushing its output instead of returning from main.
int stuck_source_threads();
namespace detail {
void count_stuck_source_thread(int delta);  // Capture's detached threads count themselves
}

// `spec` is one of
//   synthetic | synthetic:WxH | synthetic:WxH@FPS     the built-in animated scene
//   camera:N | camera:N:WxH | camera:N:WxH@FPS       V4L2 camera N through OpenCV (MJPG)
//   gst:PIPELINE                                     a GStreamer pipeline ending in appsink
//   a folder                                         its images in name order, looped
//   a video file (.avi .mp4 .mkv .mov .webm ...)     looped
//   an image file                                    repeated
// Throws Error: Usage (malformed spec), NoInput (missing file, empty folder, absent camera),
// Data (undecodable file or video, frames over max_pixels), Io (no first frame within
// open_timeout), SourceCancelled, Unavailable (camera or GStreamer in a build without OpenCV).
std::unique_ptr<FrameSource> open_source(const std::string& spec, const SourceOptions& opt = {});

// What a spec names, parsed without opening anything (open_source's first step; the fuzz
// target's entry). Throws Error(Usage) for a malformed spec as open_source does.
struct SourceSpec {
  enum Kind { Synthetic, Camera, GStreamer, Path } kind = Path;
  int width = 0, height = 0;  // synthetic (default 1920x1080) or the camera's request (0: any)
  double fps = 0;             // synthetic (default 30) or the camera's request (0: any)
  int camera = -1;            // camera:N
  std::string text;           // the GStreamer pipeline, or the path
};
SourceSpec parse_source_spec(const std::string& spec);

}  // namespace lab::io
