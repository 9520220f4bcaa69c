#include "capture.h"

#include <atomic>
#include <condition_variable>
#include <mutex>

#include "check.h"

namespace lab::io {

const char* capture_state_name(CaptureState s) {
  switch (s) {
    case CaptureState::Opening:
      return "opening";
    case CaptureState::Running:
      return "running";
    case CaptureState::Stalled:
      return "stalled";
    case CaptureState::Reconnecting:
      return "reconnecting";
  }
  return "?";
}

struct Capture::Shared {
  Opener open;
  CaptureOptions opt;
  std::mutex mutex;
  std::condition_variable cv;
  bool stop = false;
  bool exited = false;
  bool detached = false;  // counted in stuck_source_threads() until it exits
  bool has_frame = false;
  Frame frame;
  CaptureStats stats;
  std::chrono::steady_clock::time_point last_frame = std::chrono::steady_clock::now();

  // Sleeps unless asked to stop; false when asked to stop.
  bool sleep_for(std::chrono::milliseconds d) {
    std::unique_lock<std::mutex> lock(mutex);
    return !cv.wait_for(lock, d, [&] { return stop; });
  }
  bool stopping() {
    std::lock_guard<std::mutex> lock(mutex);
    return stop;
  }
};

Capture::Capture(Opener open, CaptureOptions opt) : m_shared(std::make_shared<Shared>()) {
  m_shared->open = std::move(open);
  m_shared->opt = opt;
  std::shared_ptr<Shared> shared = m_shared;
  m_thread = std::thread([shared] { loop(shared); });
}

Capture::~Capture() {
  std::unique_lock<std::mutex> lock(m_shared->mutex);
  m_shared->stop = true;
  m_shared->cv.notify_all();
  // The thread ends at its next check; a source blocked in an open or a read is left to return
  // (and release its device) on the detached thread, which owns its share of the state.
  const bool exited =
      m_shared->cv.wait_for(lock, m_shared->opt.stop_wait, [&] { return m_shared->exited; });
  if (!exited) {
    m_shared->detached = true;
    detail::count_stuck_source_thread(+1);
  }
  lock.unlock();
  if (exited)
    m_thread.join();
  else
    m_thread.detach();
}

bool Capture::take_latest(Frame& out) {
  std::lock_guard<std::mutex> lock(m_shared->mutex);
  if (!m_shared->has_frame) return false;
  out = std::move(m_shared->frame);
  m_shared->has_frame = false;
  ++m_shared->stats.taken;
  return true;
}

bool Capture::wait_latest(Frame& out, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(m_shared->mutex);
  if (!m_shared->cv.wait_for(lock, timeout, [&] { return m_shared->has_frame; })) return false;
  out = std::move(m_shared->frame);
  m_shared->has_frame = false;
  ++m_shared->stats.taken;
  return true;
}

CaptureStats Capture::stats() const {
  std::lock_guard<std::mutex> lock(m_shared->mutex);
  CaptureStats s = m_shared->stats;
  // Stalled is judged here, by the clock, so it shows even while the thread is blocked inside
  // a read that has not returned.
  if (s.state == CaptureState::Running &&
      std::chrono::steady_clock::now() - m_shared->last_frame > m_shared->opt.stall_after)
    s.state = CaptureState::Stalled;
  return s;
}

void Capture::loop(const std::shared_ptr<Shared>& sp) {
  Shared& s = *sp;
  std::unique_ptr<FrameSource> src;
  bool lost = false;  // the source was open before: a success now is a reconnection
  auto next_tick = std::chrono::steady_clock::now();
  // The frame interval when paced; a skipped frame waits it too, so a source that fails
  // every read (a folder of broken files) cannot spin a core.
  auto interval = [&] {
    const double fps = src && src->fps() > 0 ? src->fps() : 30.0;
    return std::chrono::microseconds(int64_t(1e6 / fps));
  };
  while (!s.stopping()) {
    if (!src) {
      try {
        std::unique_ptr<FrameSource> opened = s.open();
        std::lock_guard<std::mutex> lock(s.mutex);
        src = std::move(opened);
        s.stats.source = src->describe();
        s.stats.fps = src->live() || s.opt.pace ? src->fps() : 0;
        s.stats.state = CaptureState::Running;
        s.last_frame = std::chrono::steady_clock::now();
        if (lost) ++s.stats.reconnects;
      } catch (const std::exception& e) {
        {
          std::lock_guard<std::mutex> lock(s.mutex);
          s.stats.problem = e.what();
          if (s.stats.state != CaptureState::Opening) s.stats.state = CaptureState::Reconnecting;
        }
        if (!s.sleep_for(s.opt.retry_every)) break;
        continue;
      }
    }
    Frame f;
    ReadResult r;
    try {
      const auto t0 = std::chrono::steady_clock::now();
      r = src->read(f);
      f.read_ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    } catch (const std::exception& e) {
      std::lock_guard<std::mutex> lock(s.mutex);
      s.stats.problem = e.what();
      r = ReadResult::Lost;
    }
    if (r == ReadResult::Frame) {
      if (s.opt.pace && !src->live()) {
        next_tick += interval();
        const auto now = std::chrono::steady_clock::now();
        if (next_tick > now) {
          if (!s.sleep_for(std::chrono::duration_cast<std::chrono::milliseconds>(next_tick - now)))
            break;
        } else {
          next_tick = now;  // fell behind: do not try to catch up with a burst
        }
      }
      {
        std::lock_guard<std::mutex> lock(s.mutex);
        if (s.has_frame) ++s.stats.dropped;
        s.frame = std::move(f);
        s.has_frame = true;
        ++s.stats.captured;
        s.stats.state = CaptureState::Running;
        s.last_frame = std::chrono::steady_clock::now();
      }
      s.cv.notify_all();
    } else if (r == ReadResult::Skip) {
      {
        std::lock_guard<std::mutex> lock(s.mutex);
        ++s.stats.skipped;
        s.stats.problem = src->last_problem();
      }
      if (!s.sleep_for(std::chrono::duration_cast<std::chrono::milliseconds>(interval()))) break;
    } else if (r == ReadResult::Lost) {
      {
        std::lock_guard<std::mutex> lock(s.mutex);
        s.stats.state = CaptureState::Reconnecting;
        if (!src->last_problem().empty()) s.stats.problem = src->last_problem();
      }
      src.reset();  // release the device before trying again
      lost = true;
      if (!s.sleep_for(s.opt.retry_every)) break;
    }
    // Stall: nothing to do; stats() reports it from the clock.
  }
  src.reset();  // release the device before saying we are done
  std::lock_guard<std::mutex> lock(s.mutex);
  s.exited = true;
  if (s.detached) detail::count_stuck_source_thread(-1);
  s.cv.notify_all();
}

}  // namespace lab::io
