#include "listing.h"

#include <cuda_runtime_api.h>
#include <cxxabi.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <sstream>

#include "subprocess.h"
#include "text.h"

namespace lab {

// ---- embedded PTX ----------------------------------------------------------------------------

const char* embedded_ptx(const std::string& op, MathMode m) {
  const char* math = m == MathMode::Fast ? "fast" : "precise";
  for (size_t i = 0; i < kEmbeddedPtxCount; ++i)
    if (op == kEmbeddedPtx[i].op && std::strcmp(math, kEmbeddedPtx[i].math) == 0)
      return kEmbeddedPtx[i].text;
  return nullptr;
}

std::string ptx_missing_reason(const std::string& op) {
  if (!kPtxEmbedded)
    return "PTX was not embedded in this build (configured with LAB_SM87_TABLE=OFF, which also "
           "skips the sm_87 step that keeps it)";
  return "no embedded PTX for '" + op + "' (not a built-in op file)";
}

// ---- splitting -------------------------------------------------------------------------------

namespace {

std::vector<std::string> split_lines(const std::string& s) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t nl = s.find('\n', pos);
    if (nl == std::string::npos) nl = s.size();
    std::string line = s.substr(pos, nl - pos);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    out.push_back(std::move(line));
    pos = nl + 1;
  }
  if (!out.empty() && out.back().empty()) out.pop_back();
  return out;
}

// The name a PTX function header declares: ".visible .entry NAME(" or
// ".func  (.param .b32 func_retval0) NAME(": the first identifier after the directive and any
// parenthesised return parameter.
std::string ptx_header_name(const std::string& line, size_t directive_end) {
  size_t i = directive_end;
  auto skip_ws = [&] {
    while (i < line.size() && std::isspace((unsigned char)line[i])) ++i;
  };
  skip_ws();
  if (i < line.size() && line[i] == '(') {
    int depth = 0;
    for (; i < line.size(); ++i) {
      if (line[i] == '(') ++depth;
      if (line[i] == ')' && --depth == 0) {
        ++i;
        break;
      }
    }
    skip_ws();
  }
  size_t e = i;
  while (e < line.size() && ident_char(line[e])) ++e;
  return line.substr(i, e - i);
}

}  // namespace

std::vector<AsmFunction> split_ptx(const std::string& module) {
  std::vector<AsmFunction> out;
  AsmFunction cur;
  bool in_fn = false;
  int depth = 0;
  bool opened = false;
  for (const std::string& line : split_lines(module)) {
    if (!in_fn) {
      if (line.empty() || std::isspace((unsigned char)line[0]) || starts_with(line, "//")) continue;
      size_t at = std::string::npos, len = 0;
      for (const char* d : {".entry", ".func"}) {
        const size_t p = line.find(d);
        if (p != std::string::npos &&
            (p + std::strlen(d) >= line.size() || !ident_char(line[p + std::strlen(d)]))) {
          at = p, len = std::strlen(d);
          break;
        }
      }
      // Only definitions: `.extern .func` declarations have no body.
      if (at == std::string::npos || line.find(".extern") != std::string::npos) continue;
      cur = AsmFunction{};
      cur.name = ptx_header_name(line, at + len);
      cur.entry = line.compare(at, len, ".entry") == 0;
      in_fn = true, depth = 0, opened = false;
    }
    cur.lines.push_back(line);
    // A forward declaration ends with ';' before any body.
    if (!opened && trim(line) == ";") {
      in_fn = false;
      continue;
    }
    for (char c : line) {
      if (c == '{') ++depth, opened = true;
      if (c == '}') --depth;
    }
    if (opened && depth <= 0) {
      in_fn = false;
      if (!cur.name.empty()) out.push_back(std::move(cur));
    }
  }
  return out;
}

namespace {

// One SASS instruction line ("  /*0040*/   @P0 FFMA R3, R2, R5, R4 ;   /* 0x... */") as
// "@P0 FFMA R3, R2, R5, R4 ;"; empty for an encoding-only line or anything else.
std::string sass_instruction(const std::string& line) {
  const std::string t = trim(line);
  if (!starts_with(t, "/*")) return "";
  const size_t close = t.find("*/");
  if (close == std::string::npos) return "";
  const std::string addr = t.substr(2, close - 2);
  if (addr.empty() || addr.find("0x") == 0) return "";  // the second encoding line
  for (char c : addr)
    if (!std::isxdigit((unsigned char)c)) return "";
  std::string rest = t.substr(close + 2);
  const size_t enc = rest.find("/*");
  if (enc != std::string::npos) rest = rest.substr(0, enc);
  return trim(rest);
}

int sm_of(const std::string& s) {
  const size_t p = s.find("sm_");
  if (p == std::string::npos) return 0;
  return std::atoi(s.c_str() + p + 3);
}

}  // namespace

std::vector<AsmFunction> split_sass(const std::string& dump) {
  std::vector<AsmFunction> out;
  AsmFunction cur;
  bool in_fn = false;
  int arch = 0;
  auto flush = [&] {
    if (in_fn && !cur.name.empty()) out.push_back(std::move(cur));
    cur = AsmFunction{};
    in_fn = false;
  };
  for (const std::string& line : split_lines(dump)) {
    const std::string t = trim(line);
    if (starts_with(t, "code for sm_")) {  // cuobjdump: one section per architecture
      flush();
      arch = sm_of(t);
      continue;
    }
    if (t.find("EF_CUDA_SM") != std::string::npos && !in_fn) {  // nvdisasm's header flags
      const size_t p = t.find("EF_CUDA_SM");
      arch = std::atoi(t.c_str() + p + 10);
      continue;
    }
    std::string name;
    if (starts_with(t, "Function : ")) {
      name = trim(t.substr(11));
    } else if (starts_with(t, "//-") && t.find(" .text.") != std::string::npos) {
      // nvdisasm: "//--------------------- .text.NAME --------------------------"
      const size_t p = t.find(" .text.") + 7;
      size_t e = p;
      while (e < t.size() && !std::isspace((unsigned char)t[e])) ++e;
      name = t.substr(p, e - p);
    }
    if (!name.empty()) {
      flush();
      cur.name = name;
      cur.entry = true;
      cur.arch = arch;
      in_fn = true;
      continue;
    }
    if (!in_fn) continue;
    const std::string ins = sass_instruction(line);
    if (!ins.empty()) {
      cur.lines.push_back(ins);
    } else if (!t.empty() && t.back() == ':' && (starts_with(t, ".L") || starts_with(t, "`"))) {
      cur.lines.push_back(t);  // a branch target label (nvdisasm)
    } else if (starts_with(t, "....") || starts_with(t, "Fatbin")) {
      flush();
    }
  }
  flush();
  return out;
}

std::string demangle(const std::string& mangled) {
  int status = 0;
  char* d = abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status);
  if (status != 0 || !d) return mangled;
  std::string s(d);
  std::free(d);
  return s;
}

// ---- finding a kernel ------------------------------------------------------------------------

namespace {

// Reads "<len><chars>" at `i`.
bool read_source_name(const std::string& m, size_t& i, std::string* out) {
  size_t len = 0, j = i;
  while (j < m.size() && std::isdigit((unsigned char)m[j])) len = len * 10 + size_t(m[j++] - '0');
  if (j == i || len == 0 || j + len > m.size()) return false;
  *out = m.substr(j, len);
  i = j + len;
  return true;
}

std::vector<std::string> words(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (std::isalnum((unsigned char)c)) {
      cur += c;
    } else if (!cur.empty()) {
      out.push_back(cur), cur.clear();
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

bool is_version_word(const std::string& w) {
  return w.size() >= 2 && w[0] == 'v' &&
         std::all_of(w.begin() + 1, w.end(), [](char c) { return std::isdigit((unsigned char)c); });
}

std::string strip_kernel_suffix(const std::string& ident) {
  const std::string k = "_kernel";
  if (ident.size() > k.size() && ident.compare(ident.size() - k.size(), k.size(), k) == 0)
    return ident.substr(0, ident.size() - k.size());
  return ident;
}

// "blur_v3_smem_tile<32,8>" -> ("blur_v3_smem_tile", {32, 8}); `ok` false when an argument
// is no number (or true/false).
void parse_launch_name(const std::string& key, std::string* base, std::vector<long long>* targs,
                       bool* has_targs) {
  const size_t lt = key.find('<');
  *base = trim(key.substr(0, lt));
  targs->clear();
  *has_targs = lt != std::string::npos;
  if (!*has_targs) return;
  const size_t gt = key.find('>', lt);
  std::stringstream ss(
      key.substr(lt + 1, gt == std::string::npos ? std::string::npos : gt - lt - 1));
  std::string a;
  while (std::getline(ss, a, ',')) {
    a = trim(a);
    if (a == "true")
      targs->push_back(1);
    else if (a == "false")
      targs->push_back(0);
    else
      targs->push_back(std::atoll(a.c_str()));
  }
}

}  // namespace

LabKernelName parse_lab_kernel(const std::string& m) {
  LabKernelName r;
  if (!starts_with(m, "_ZN3lab3ops")) return r;
  size_t i = 11;
  std::string ns, ident;
  if (!read_source_name(m, i, &ns) || !read_source_name(m, i, &ident)) return r;
  r.ident = ident;
  if (i < m.size() && m[i] == 'I') {  // template arguments: L<type><value>E ...
    ++i;
    while (i < m.size() && m[i] == 'L') {
      ++i;
      if (i >= m.size()) return r;
      const char type = m[i++];
      bool neg = false;
      if (i < m.size() && m[i] == 'n') neg = true, ++i;
      long long v = 0;
      size_t start = i;
      while (i < m.size() && std::isdigit((unsigned char)m[i])) v = v * 10 + (m[i++] - '0');
      if (i == start || i >= m.size() || m[i] != 'E') return r;
      ++i;
      (void)type;
      r.targs.push_back(neg ? -v : v);
    }
    if (i >= m.size() || m[i] != 'E') return r;  // a type argument: not one we read
  }
  r.ok = true;
  return r;
}

const AsmFunction* find_function(const std::vector<AsmFunction>& fns, const std::string& key) {
  for (const AsmFunction& f : fns)
    if (f.name == key) return &f;
  std::string base;
  std::vector<long long> targs;
  bool has_targs = false;
  parse_launch_name(key, &base, &targs, &has_targs);
  if (base.empty()) return nullptr;
  // Exact: "<base>_kernel" or "<base>" with the same template arguments.
  for (const AsmFunction& f : fns) {
    const LabKernelName k = parse_lab_kernel(f.name);
    if (!k.ok || (k.ident != base && k.ident != base + "_kernel")) continue;
    if (!has_targs || k.targs == targs) return &f;
  }
  // Else the entry sharing most words, with the op's first word and the same "vN" when both
  // have one, and the template arguments when the launch names them.
  const std::vector<std::string> kw = words(base);
  std::string kv;
  for (const auto& w : kw)
    if (is_version_word(w)) kv = w;
  const AsmFunction* best = nullptr;
  int best_score = 1;  // at least two words in common
  for (const AsmFunction& f : fns) {
    const LabKernelName k = parse_lab_kernel(f.name);
    if (!k.ok || !f.entry) continue;
    if (has_targs && k.targs != targs) continue;
    const std::vector<std::string> fw = words(strip_kernel_suffix(k.ident));
    if (fw.empty() || kw.empty() || fw[0] != kw[0]) continue;
    std::string fv;
    for (const auto& w : fw)
      if (is_version_word(w)) fv = w;
    if (!kv.empty() && !fv.empty() && kv != fv) continue;
    int score = 0;
    for (const auto& w : fw)
      if (std::find(kw.begin(), kw.end(), w) != kw.end()) ++score;
    if (score > best_score) best = &f, best_score = score;
  }
  return best;
}

std::vector<const AsmFunction*> variant_functions(const std::vector<AsmFunction>& fns,
                                                  const std::string& op, const std::string& variant,
                                                  const Block* block) {
  const std::vector<std::string> vw = words(variant);
  std::string vn;
  for (const auto& w : vw)
    if (is_version_word(w)) vn = w;
  std::vector<const AsmFunction*> by_version, by_word;
  for (const AsmFunction& f : fns) {
    const LabKernelName k = parse_lab_kernel(f.name);
    if (!k.ok || !f.entry) continue;
    const std::vector<std::string> fw = words(strip_kernel_suffix(k.ident));
    if (fw.empty() || fw[0] != op) continue;
    bool version = false, word = false;
    for (const auto& w : fw) {
      if (!vn.empty() && w == vn) version = true;
      if (w != op && !is_version_word(w) && std::find(vw.begin(), vw.end(), w) != vw.end())
        word = true;
    }
    if (version)
      by_version.push_back(&f);
    else if (word)
      by_word.push_back(&f);
  }
  std::vector<const AsmFunction*> out = by_version.empty() ? by_word : by_version;
  if (block) {
    std::vector<const AsmFunction*> exact;
    for (const AsmFunction* f : out) {
      const LabKernelName k = parse_lab_kernel(f->name);
      if (k.targs.size() == 2 && k.targs[0] == block->x && k.targs[1] == block->y)
        exact.push_back(f);
    }
    if (!exact.empty()) {
      // Keep the untemplated kernels and the instances of this block.
      std::vector<const AsmFunction*> keep;
      for (const AsmFunction* f : out) {
        const LabKernelName k = parse_lab_kernel(f->name);
        if (k.targs.size() != 2 || std::find(exact.begin(), exact.end(), f) != exact.end())
          keep.push_back(f);
      }
      out = keep;
    }
  }
  return out;
}

}  // namespace lab
