#include "memcheck_report.h"

#include <cctype>
#include <sstream>

#include "printable.h"
#include "text.h"

namespace lab {

namespace {

const char* const kPrefix = "=========";

// The line number after "<file>:" in a frame ("at user_kernel(...)+0x90 in user_kernel.cu:6",
// older: "at 0x90 in /tmp/x/user_kernel.cu:6:user_kernel(...)"); 0 when the frame is elsewhere.
int line_in(const std::string& frame, const std::string& file) {
  for (size_t at = frame.find(file + ":"); at != std::string::npos;
       at = frame.find(file + ":", at + 1)) {
    // A whole file name: the start of the string, or a path separator or space before it.
    if (at > 0 && frame[at - 1] != '/' && frame[at - 1] != ' ') continue;
    size_t p = at + file.size() + 1;
    int line = 0;
    size_t digits = 0;
    while (p < frame.size() && std::isdigit(static_cast<unsigned char>(frame[p])) && digits < 7)
      line = line * 10 + (frame[p++] - '0'), ++digits;
    if (digits > 0) return line;
  }
  return 0;
}

// "Invalid __global__ write of size 4 bytes" -> {"write", "global", "4"}.
struct Access {
  std::string op, space, bytes;
};
bool parse_access(const std::string& h, Access& a) {
  std::istringstream in(h);
  std::string invalid, space, op, of, size, n;
  if (!(in >> invalid >> space >> op >> of >> size >> n)) return false;
  if (invalid != "Invalid" || of != "of" || size != "size") return false;
  if (space.size() > 4 && starts_with(space, "__") && space.compare(space.size() - 2, 2, "__") == 0)
    space = space.substr(2, space.size() - 4);
  a = {op, space, n};
  return true;
}

struct Pending {
  std::string heading;
  int line = 0;
  std::string thread, block, address, address_problem;
  bool device = false;  // a kernel's finding (else an API error)
};

std::string words(const Pending& p) {
  Access a;
  std::string what;
  if (parse_access(p.heading, a)) {
    const std::string kind = p.address_problem == "out of bounds" ? "out-of-bounds"
                             : p.address_problem == "misaligned"  ? "misaligned"
                                                                  : "invalid";
    what = kind + " " + a.op + " of " + a.bytes + (a.bytes == "1" ? " byte" : " bytes");
    if (a.space != "global") what += " (" + a.space + " memory)";
  } else {
    what = p.heading;
    if (!what.empty()) what[0] = char(std::tolower(static_cast<unsigned char>(what[0])));
  }
  if (!p.address.empty()) what += " at " + p.address;
  if (!p.thread.empty()) what += ", thread " + p.thread;
  if (!p.block.empty()) what += " block " + p.block;
  return printable(what, 240);
}

}  // namespace

std::vector<MemcheckFinding> parse_memcheck_log(const std::string& log, const std::string& file,
                                                size_t limit) {
  std::vector<MemcheckFinding> device, api;
  std::istringstream in(log);
  std::string raw;
  Pending cur;
  bool open = false;
  auto flush = [&] {
    if (!open) return;
    (cur.device ? device : api).push_back({cur.line, words(cur)});
    open = false;
    cur = Pending{};
  };
  while (std::getline(in, raw)) {
    if (!starts_with(raw, kPrefix)) continue;
    const std::string body = raw.substr(std::string(kPrefix).size());
    const bool detail =
        !body.empty() && (body[0] == ' ' || body[0] == '\t') && body.find_first_not_of(" \t") > 1;
    const std::string t = trim(body);
    if (t.empty()) continue;
    if (!detail) {
      // A heading: a new finding, or the tool's own lines.
      if (t == "COMPUTE-SANITIZER" || starts_with(t, "ERROR SUMMARY") ||
          starts_with(t, "LEAK SUMMARY") || starts_with(t, "Target application") ||
          starts_with(t, "Saved host backtrace") || starts_with(t, "RACECHECK") ||
          starts_with(t, "Error: ") || starts_with(t, "Internal"))
        continue;
      flush();
      open = true;
      cur.heading = t;
      // "Program hit cudaErrorLaunchFailure (error 719) due to ... on CUDA API call to ...":
      // what the fault did to the next API call, not the fault.
      cur.device = !starts_with(t, "Program hit");
      continue;
    }
    if (!open) continue;
    if (starts_with(t, "at ") && cur.line == 0) {
      cur.line = line_in(t, file);
    } else if (starts_with(t, "by thread ")) {
      // "by thread (3,0,0) in block (0,0,0)"
      const size_t a = t.find('('), b = t.find(')');
      const size_t c = t.find('(', b == std::string::npos ? t.size() : b),
                   d = c == std::string::npos ? std::string::npos : t.find(')', c);
      if (a != std::string::npos && b != std::string::npos) cur.thread = t.substr(a, b - a + 1);
      if (c != std::string::npos && d != std::string::npos) cur.block = t.substr(c, d - c + 1);
    } else if (starts_with(t, "Address ") || starts_with(t, "Access to ") ||
               starts_with(t, "Access at ")) {
      // "Access to 0x8 is out of bounds" (compute-sanitizer 2025), "Address 0x8 is out of
      // bounds" (older); "... is misaligned"
      std::istringstream w(t.substr(starts_with(t, "Address ") ? 8 : 10));
      std::string addr;
      w >> addr;
      cur.address = addr;
      const size_t is = t.find(" is ");
      if (is != std::string::npos) cur.address_problem = trim(t.substr(is + 4));
    }
  }
  flush();
  std::vector<MemcheckFinding> out = device.empty() ? api : device;
  if (out.size() > limit) out.resize(limit);
  return out;
}

}  // namespace lab
