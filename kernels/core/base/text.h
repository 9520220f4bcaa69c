// Small text helpers the listing, the report parsers, the reports and the panels share.
#pragma once

#include <string>
#include <string_view>

namespace lab {

// Without whitespace (and the NULs device-tree strings end in) at either end.
std::string trim(std::string_view s);
inline bool starts_with(std::string_view s, std::string_view p) {
  return s.substr(0, p.size()) == p;
}
inline bool ends_with(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.substr(s.size() - p.size()) == p;
}
// A character of a C or PTX identifier ('$' included: PTX labels use it).
inline bool ident_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '$';
}
// One number through a printf format ("%.2f us").
std::string fmt(const char* format, double v);
// The same, or "-" for a value not known (NaN, infinite).
std::string format_or_dash(const char* format, double v);
// A CSV field: text quoted (quotes doubled), a number in %.6g or empty when not known.
std::string csv_text(const std::string& t);
std::string csv_num(double v);

}  // namespace lab
