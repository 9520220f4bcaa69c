// Text from outside (a file's bytes, a command-line value) quoted inside an error message, which
// the CLI prints as one line: control characters escaped (\n, \t, \xNN) and the text cut to
// `max` bytes, so that no input can break the line or flood the terminal.
#pragma once

#include <cstdio>
#include <string>

namespace lab {

inline std::string printable(const std::string& s, size_t max = 80) {
  std::string out;
  for (size_t i = 0; i < s.size() && i < max; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      char hex[5];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    } else {
      out += char(c);
    }
  }
  if (s.size() > max) out += "...";
  return out;
}

}  // namespace lab
