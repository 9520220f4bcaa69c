// Two listings line by line: the differing lines marked, registers and labels ignored.
#include "listing.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <string>
#include <vector>

#include "text.h"

namespace lab {

// ---- diff ------------------------------------------------------------------------------------

namespace {

// The comparison key of a line: trimmed, the math pass's namespace made one, and register and
// label numbers dropped (PTX %r12, %fd3, $L__BB0_17; SASS R12, UR4, P0, .L_x_3): the compiler
// renumbers them whenever anything changes, which would mark nearly every line.
std::string diff_key(const std::string& line) {
  std::string s = trim(line);
  for (const char* ns : {"3ops7precise", "3ops4fast"}) {
    size_t p;
    while ((p = s.find(ns)) != std::string::npos) s.replace(p, std::strlen(ns), "3ops4MATH");
  }
  std::string out;
  out.reserve(s.size());
  auto digits_end = [&](size_t i) {
    while (i < s.size() && (std::isdigit((unsigned char)s[i]) || s[i] == '_')) ++i;
    return i;
  };
  for (size_t i = 0; i < s.size();) {
    const bool token_start = i == 0 || !(ident_char(s[i - 1]) || s[i - 1] == '.');
    if (s[i] == '%') {  // %r12 -> %r
      size_t j = i + 1;
      while (j < s.size() && std::isalpha((unsigned char)s[j])) ++j;
      out.append(s, i, j - i);
      i = digits_end(j);
      continue;
    }
    if (s.compare(i, 6, "$L__BB") == 0 || s.compare(i, 4, ".L_x") == 0) {
      const size_t j = i + (s[i] == '$' ? 6 : 4);
      out.append(s, i, j - i);
      i = digits_end(j);
      continue;
    }
    if (token_start && (s[i] == 'R' || s[i] == 'P' || s.compare(i, 2, "UR") == 0 ||
                        s.compare(i, 2, "UP") == 0)) {  // SASS registers: R12, UR4, P0
      const size_t j = i + (s[i] == 'U' ? 2 : 1);
      size_t k = j;
      while (k < s.size() && std::isdigit((unsigned char)s[k])) ++k;
      if (k > j && (k == s.size() || !ident_char(s[k]))) {
        out.append(s, i, j - i);
        i = k;
        continue;
      }
    }
    out += s[i++];
  }
  return out;
}

}  // namespace

std::vector<DiffRow> diff_lines(const std::vector<std::string>& a,
                                const std::vector<std::string>& b) {
  std::vector<std::string> ka(a.size()), kb(b.size());
  for (size_t i = 0; i < a.size(); ++i) ka[i] = diff_key(a[i]);
  for (size_t j = 0; j < b.size(); ++j) kb[j] = diff_key(b[j]);
  size_t head = 0;
  while (head < a.size() && head < b.size() && ka[head] == kb[head]) ++head;
  size_t tail = 0;
  while (tail < a.size() - head && tail < b.size() - head &&
         ka[a.size() - 1 - tail] == kb[b.size() - 1 - tail])
    ++tail;
  const size_t n = a.size() - head - tail, m = b.size() - head - tail;
  // The ops of the middle: 0 same, 1 removed (a), 2 added (b).
  std::vector<std::pair<int, std::pair<int, int>>> ops;
  const size_t kMaxCells = size_t(16) << 20;  // 64 MB of table at most
  if (n && m && n * m <= kMaxCells) {
    // LCS lengths of suffixes, then one walk forward.
    std::vector<uint32_t> L((n + 1) * (m + 1), 0);
    auto at = [&](size_t i, size_t j) -> uint32_t& { return L[i * (m + 1) + j]; };
    for (size_t i = n; i-- > 0;)
      for (size_t j = m; j-- > 0;)
        at(i, j) = ka[head + i] == kb[head + j] ? at(i + 1, j + 1) + 1
                                                : std::max(at(i + 1, j), at(i, j + 1));
    size_t i = 0, j = 0;
    while (i < n || j < m) {
      if (i < n && j < m && ka[head + i] == kb[head + j]) {
        ops.push_back({0, {int(head + i), int(head + j)}}), ++i, ++j;
      } else if (j < m && (i == n || at(i, j + 1) >= at(i + 1, j))) {
        ops.push_back({2, {-1, int(head + j)}}), ++j;
      } else {
        ops.push_back({1, {int(head + i), -1}}), ++i;
      }
    }
  } else {
    // Too large to align (or one side empty): everything in the middle differs.
    for (size_t i = 0; i < n; ++i) ops.push_back({1, {int(head + i), -1}});
    for (size_t j = 0; j < m; ++j) ops.push_back({2, {-1, int(head + j)}});
  }
  std::vector<DiffRow> rows;
  for (size_t i = 0; i < head; ++i) rows.push_back({DiffOp::Same, int(i), int(i)});
  for (size_t k = 0; k < ops.size();) {
    if (ops[k].first == 0) {
      rows.push_back({DiffOp::Same, ops[k].second.first, ops[k].second.second});
      ++k;
      continue;
    }
    // A run of changes: its removed lines beside its added ones.
    std::vector<int> rem, add;
    for (; k < ops.size() && ops[k].first != 0; ++k)
      (ops[k].first == 1 ? rem : add)
          .push_back(ops[k].first == 1 ? ops[k].second.first : ops[k].second.second);
    const size_t both = std::min(rem.size(), add.size());
    for (size_t r = 0; r < both; ++r) rows.push_back({DiffOp::Changed, rem[r], add[r]});
    for (size_t r = both; r < rem.size(); ++r) rows.push_back({DiffOp::Removed, rem[r], -1});
    for (size_t r = both; r < add.size(); ++r) rows.push_back({DiffOp::Added, -1, add[r]});
  }
  for (size_t t = 0; t < tail; ++t)
    rows.push_back({DiffOp::Same, int(a.size() - tail + t), int(b.size() - tail + t)});
  return rows;
}

std::string format_side_by_side(const std::vector<std::string>& a,
                                const std::vector<std::string>& b, const std::vector<DiffRow>& rows,
                                int width) {
  auto cell = [&](const std::vector<std::string>& v, int i) {
    std::string s = i >= 0 ? v[size_t(i)] : "";
    for (char& c : s)
      if (c == '\t') c = ' ';
    if (int(s.size()) > width) s = s.substr(0, size_t(std::max(0, width - 1))) + "~";
    s.resize(size_t(width), ' ');
    return s;
  };
  std::string out;
  for (const DiffRow& r : rows) {
    const char* mark = r.op == DiffOp::Same      ? "  "
                       : r.op == DiffOp::Changed ? "! "
                       : r.op == DiffOp::Removed ? "- "
                                                 : "+ ";
    std::string line = mark + cell(a, r.a) + " | " + cell(b, r.b);
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

}  // namespace lab
