#include "wire.h"

#include "printable.h"

namespace lab {

namespace {
constexpr size_t kHeader = 4 + 1 + 8;
}

std::string wire_frame(const char* magic, char type, const std::string& payload) {
  std::string f(magic, 4);
  f += type;
  const uint64_t n = payload.size();
  f.append(reinterpret_cast<const char*>(&n), sizeof n);
  return f + payload;
}

WireFrame read_wire_frame(int fd, const char* magic, uint64_t max_payload,
                          const SteadyClock::time_point* deadline) {
  WireFrame f;
  char h[kHeader];
  size_t got = 0;
  f.io = read_exact(fd, h, kHeader, deadline, &got);
  if (f.io == IoResult::Eof && got > 0) {
    f.problem = "it stopped after " + std::to_string(got) + " bytes of a message's header";
    return f;
  }
  if (f.io != IoResult::Ok) return f;
  if (std::memcmp(h, magic, 4) != 0) {
    f.io = IoResult::Failed;
    f.problem = "it sent \"" + printable(std::string(h, kHeader), 24) + "\", not a message";
    return f;
  }
  f.type = h[4];
  uint64_t n = 0;
  std::memcpy(&n, h + 5, sizeof n);
  if (n > max_payload) {
    f.io = IoResult::Failed;
    f.problem = "it announced a message of " + std::to_string(n) + " bytes";
    return f;
  }
  f.payload.resize(size_t(n));
  f.io = read_exact(fd, f.payload.data(), size_t(n), deadline, &got);
  if (f.io == IoResult::Eof)
    f.problem = "it stopped after " + std::to_string(got) + " of the " + std::to_string(n) +
                " bytes of its message";
  return f;
}

}  // namespace lab
