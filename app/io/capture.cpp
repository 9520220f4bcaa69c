#include "app/io/capture.h"

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

Capture::Capture(Opener open, CaptureOptions opt)
    : m_open(std::move(open)), m_opt(opt), m_last_frame(std::chrono::steady_clock::now()) {
  m_thread = std::thread([this] { loop(); });
}

Capture::~Capture() {
  {
    std::lock_guard<std::mutex> lock(m_mutex);  // so a wait cannot miss the wake-up
    m_stop = true;
  }
  m_cv.notify_all();
  m_thread.join();  // the source, and so the device, is released on the thread before it ends
}

bool Capture::take_latest(Frame& out) {
  std::lock_guard<std::mutex> lock(m_mutex);
  if (!m_has_frame) return false;
  out = std::move(m_frame);
  m_has_frame = false;
  ++m_stats.taken;
  return true;
}

bool Capture::wait_latest(Frame& out, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(m_mutex);
  if (!m_cv.wait_for(lock, timeout, [&] { return m_has_frame; })) return false;
  out = std::move(m_frame);
  m_has_frame = false;
  ++m_stats.taken;
  return true;
}

CaptureStats Capture::stats() const {
  std::lock_guard<std::mutex> lock(m_mutex);
  CaptureStats s = m_stats;
  // Stalled is judged here, by the clock, so it shows even while the thread is blocked inside
  // a read that has not returned.
  if (s.state == CaptureState::Running &&
      std::chrono::steady_clock::now() - m_last_frame > m_opt.stall_after)
    s.state = CaptureState::Stalled;
  return s;
}

void Capture::set_problem(const std::string& p) {
  std::lock_guard<std::mutex> lock(m_mutex);
  m_stats.problem = p;
}

bool Capture::sleep_for(std::chrono::milliseconds d) {
  std::unique_lock<std::mutex> lock(m_mutex);
  return !m_cv.wait_for(lock, d, [&] { return m_stop.load(); });
}

void Capture::loop() {
  std::unique_ptr<FrameSource> src;
  bool lost = false;  // the source was open before: a success now is a reconnection
  auto next_tick = std::chrono::steady_clock::now();
  while (!m_stop) {
    if (!src) {
      try {
        src = m_open();
        std::lock_guard<std::mutex> lock(m_mutex);
        m_stats.source = src->describe();
        m_stats.state = CaptureState::Running;
        m_last_frame = std::chrono::steady_clock::now();
        if (lost) ++m_stats.reconnects;
      } catch (const std::exception& e) {
        {
          std::lock_guard<std::mutex> lock(m_mutex);
          m_stats.problem = e.what();
          if (m_stats.state != CaptureState::Opening) m_stats.state = CaptureState::Reconnecting;
        }
        if (!sleep_for(m_opt.retry_every)) break;
        continue;
      }
    }
    Frame f;
    ReadResult r;
    try {
      r = src->read(f);
    } catch (const std::exception& e) {
      set_problem(e.what());
      r = ReadResult::Lost;
    }
    if (r == ReadResult::Frame) {
      if (m_opt.pace && !src->live() && src->fps() > 0) {
        next_tick += std::chrono::microseconds(int64_t(1e6 / src->fps()));
        const auto now = std::chrono::steady_clock::now();
        if (next_tick > now) {
          if (!sleep_for(std::chrono::duration_cast<std::chrono::milliseconds>(next_tick - now)))
            break;
        } else {
          next_tick = now;  // fell behind: do not try to catch up with a burst
        }
      }
      {
        std::lock_guard<std::mutex> lock(m_mutex);
        if (m_has_frame) ++m_stats.dropped;
        m_frame = std::move(f);
        m_has_frame = true;
        ++m_stats.captured;
        m_stats.state = CaptureState::Running;
        m_last_frame = std::chrono::steady_clock::now();
      }
      m_cv.notify_all();
    } else if (r == ReadResult::Skip) {
      std::lock_guard<std::mutex> lock(m_mutex);
      ++m_stats.skipped;
      m_stats.problem = src->last_problem();
    } else if (r == ReadResult::Lost) {
      {
        std::lock_guard<std::mutex> lock(m_mutex);
        m_stats.state = CaptureState::Reconnecting;
        if (!src->last_problem().empty()) m_stats.problem = src->last_problem();
      }
      src.reset();  // release the device before trying again
      lost = true;
      if (!sleep_for(m_opt.retry_every)) break;
    }
    // Stall: nothing to do; stats() reports it from the clock.
  }
}

}  // namespace lab::io
