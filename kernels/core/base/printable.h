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

// Many lines (a compiler's log, which echoes source lines): each as printable() makes it, whole,
// the line breaks and tabs kept, so that the text stays readable and no byte of it reaches the
// terminal as a control sequence.
inline std::string printable_lines(const std::string& s) {
  std::string out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find('\n', start);
    if (end == std::string::npos) end = s.size();
    const std::string line = s.substr(start, end - start);
    size_t tab = 0, from = 0;
    while ((tab = line.find('\t', from)) != std::string::npos) {
      out += printable(line.substr(from, tab - from), std::string::npos) + "\t";
      from = tab + 1;
    }
    out += printable(line.substr(from), std::string::npos);
    if (end == s.size()) break;
    out += '\n';
    start = end + 1;
  }
  return out;
}

}  // namespace lab
