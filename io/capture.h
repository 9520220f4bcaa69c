// Capture: runs a FrameSource on its own thread into a single-slot, latest-frame mailbox.
//
// The consumer (the GUI's frame loop, `run`) never waits for a camera: take_latest() returns at
// once with the newest frame or nothing. A frame the consumer did not take before the next one
// arrived counts as dropped. A source that stops delivering shows as Stalled after
// `stall_after`; a lost or absent device is reopened every `retry_every` until it returns.
// Destruction never blocks for long either: the thread is told to stop, and if its source is
// stuck inside an open or a read, the thread is left to finish (and release the device) on its
// own; it shares nothing with the Capture object that could dangle.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "frame_source.h"

namespace lab::io {

struct CaptureOptions {
  std::chrono::milliseconds stall_after{1000};
  std::chrono::milliseconds retry_every{500};
  // Pace non-live sources (files, synthetic) at their frame rate, as a camera would be; off:
  // read them as fast as the thread can.
  bool pace = true;
  // How long the destructor waits for the thread before leaving it to finish alone.
  std::chrono::milliseconds stop_wait{300};
};

enum class CaptureState { Opening, Running, Stalled, Reconnecting };
const char* capture_state_name(CaptureState s);

struct CaptureStats {
  CaptureState state = CaptureState::Opening;
  uint64_t captured = 0;    // frames read from the source
  uint64_t taken = 0;       // frames the consumer took
  uint64_t dropped = 0;     // frames replaced in the mailbox before they were taken
  uint64_t skipped = 0;     // corrupt frames the source skipped
  uint64_t reconnects = 0;  // successful reopenings after a loss
  std::string source;       // describe() of the open source
  double fps = 0;           // the rate it delivers at: a live source's, or the pace; 0: unpaced
  std::string problem;      // the last error or skip reason, for the UI
};

class Capture {
 public:
  using Opener = std::function<std::unique_ptr<FrameSource>()>;
  explicit Capture(Opener open, CaptureOptions opt = {});
  ~Capture();
  Capture(const Capture&) = delete;
  Capture& operator=(const Capture&) = delete;

  // The newest frame not taken yet; false (at once) when there is none.
  bool take_latest(Frame& out);
  // Like take_latest, waiting up to `timeout` for a frame.
  bool wait_latest(Frame& out, std::chrono::milliseconds timeout);
  CaptureStats stats() const;

 private:
  struct Shared;  // everything the thread touches, owned jointly with the thread
  static void loop(const std::shared_ptr<Shared>& shared);
  std::shared_ptr<Shared> m_shared;
  std::thread m_thread;
};

}  // namespace lab::io
