// Messages between the lab and its child processes (the trial child, the compiler child): fields
// in a fixed order, each a plain value or a length-prefixed string (u64 lengths, in the host's
// byte order: both ends are this binary on this machine). A reader checks every length against
// what is left, so a truncated or hostile message is a WireError, never a read past its end.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

#include "check.h"
#include "subprocess.h"

namespace lab {

// A malformed message: Error(Data), one documented kind for the callers and the fuzz targets.
struct WireError : Error {
  explicit WireError(const std::string& what) : Error(ErrorKind::Data, what) {}
};

class WireWriter {
 public:
  template <class T>
  void pod(const T& v) {
    s.append(reinterpret_cast<const char*>(&v), sizeof v);
  }
  void str(const std::string& v) {
    pod(uint64_t(v.size()));
    s += v;
  }
  void bytes(const void* p, size_t n) {
    pod(uint64_t(n));
    s.append(static_cast<const char*>(p), n);
  }
  std::string s;
};

class WireReader {
 public:
  explicit WireReader(const std::string& s) : m_s(s) {}
  template <class T>
  T pod() {
    T v;
    need(sizeof v);
    std::memcpy(&v, m_s.data() + m_at, sizeof v);
    m_at += sizeof v;
    return v;
  }
  std::string str() {
    const uint64_t n = pod<uint64_t>();
    need(n);
    std::string v = m_s.substr(m_at, size_t(n));
    m_at += size_t(n);
    return v;
  }
  void bytes(void* p, size_t n) {
    if (pod<uint64_t>() != n) throw WireError("a field of the wrong size");
    need(n);
    if (n) std::memcpy(p, m_s.data() + m_at, n);
    m_at += n;
  }
  void end() const {
    if (m_at != m_s.size()) throw WireError("bytes after the last field");
  }
  size_t remaining() const { return m_s.size() - m_at; }

 private:
  void need(uint64_t n) const {
    if (n > m_s.size() - m_at) throw WireError("a field runs past the message's end");
  }
  const std::string& m_s;
  size_t m_at = 0;
};

// A message on a stream (the trial child and kernel host's socket): 4 magic bytes, a type byte,
// the payload's length (u64), the payload.
std::string wire_frame(const char* magic, char type, const std::string& payload);

// One message read by a deadline. io is Ok with type and payload; Eof when the other end closed
// before a message began; Timeout; Failed or Eof with `problem` set for garbage (not a message,
// an announced length over `max_payload`) or a message cut short, in words.
struct WireFrame {
  IoResult io = IoResult::Ok;
  char type = 0;
  std::string payload;
  std::string problem;
};
WireFrame read_wire_frame(int fd, const char* magic, uint64_t max_payload,
                          const SteadyClock::time_point* deadline);

}  // namespace lab
