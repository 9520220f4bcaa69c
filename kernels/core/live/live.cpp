#include "live.h"

#include <cuda_runtime_api.h>
#include <nvrtc.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <new>
#include <regex>
#include <sstream>

#include "check.h"
#include "device.h"
#include "live_sources.h"
#include "output_file.h"
#include "paths.h"
#include "pipeline.h"
#include "presets.h"
#include "printable.h"

namespace lab {

namespace fs = std::filesystem;

namespace {

const char* const kFileName = "user_kernel.cu";

void check_nvrtc(nvrtcResult r, const char* what) {
  // Out of memory is the compile child's memory limit (live_compile says so in words).
  if (r == NVRTC_ERROR_OUT_OF_MEMORY) throw std::bad_alloc();
  if (r != NVRTC_SUCCESS)
    throw Error(ErrorKind::Unavailable,
                std::string("NVRTC ") + what + " failed: " + nvrtcGetErrorString(r));
}

// The host side of lab_live.cuh's Inputs, Outputs and Params (the same layout: ImageView is one
// type on both sides).
struct Inputs {
  ImageView<const float> img[4];
  int count;
};
struct Outputs {
  ImageView<float> img[4];
  int count;
};
struct LiveParams {
  float v[8];
  int count;
};
static_assert(sizeof(ImageView<float>) == 32, "ImageView's layout is part of the live ABI");

// Libraries stay loaded for the whole process: a kernel handle is then never reused for another
// kernel, so the runner's per-kernel attribute cache cannot mix two builds up.
std::mutex g_libraries_mutex;
std::vector<cudaLibrary_t> g_libraries;

// A device reset unloads every library with its context.
void forget_libraries() {
  std::lock_guard<std::mutex> lock(g_libraries_mutex);
  g_libraries.clear();
}

}  // namespace

int live_arch(const LiveOptions& o) {
  if (o.arch > 0) return o.arch;
  const DeviceInfo& d = device_info();
  return d.present ? d.major * 10 + d.minor : 87;
}

namespace {
const char* const kOptionsTag = "// @lab ";

std::string options_line(const LiveOptions& o) {
  return std::string(kOptionsTag) + "block=" + o.block.str() + " px=" + std::to_string(o.px) +
         " rows=" + std::to_string(o.rows) + " fast_math=" + (o.fast_math ? "1" : "0") +
         " maxrregcount=" + std::to_string(o.max_regs) + " lineinfo=" + (o.line_info ? "1" : "0");
}
}  // namespace

LiveOptions read_live_options(const std::string& source, LiveOptions o) {
  std::istringstream in(source);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(kOptionsTag, 0) != 0) continue;
    std::istringstream words(line.substr(std::strlen(kOptionsTag)));
    std::string w;
    while (words >> w) {
      const size_t eq = w.find('=');
      const std::string key = w.substr(0, eq),
                        value = eq == std::string::npos ? "" : w.substr(eq + 1);
      auto number = [&](int lo, int hi) {
        char* end = nullptr;
        const long v = std::strtol(value.c_str(), &end, 10);
        if (value.empty() || *end || v < lo || v > hi)
          throw Error(ErrorKind::Data, "@lab " + printable(key) + "=" + printable(value) +
                                           ": expected " + std::to_string(lo) + " to " +
                                           std::to_string(hi));
        return int(v);
      };
      if (key == "block") {
        const auto b = parse_wxh(value);
        if (!b || b->threads() > 1024 || b->x < 1 || b->y < 1)
          throw Error(ErrorKind::Data,
                      "@lab block=" + printable(value) + ": expected WxH, at most 1024 threads");
        o.block = *b;
      } else if (key == "px") {
        o.px = number(1, 64);
      } else if (key == "rows") {
        o.rows = number(1, 64);
      } else if (key == "fast_math") {
        o.fast_math = number(0, 1) == 1;
      } else if (key == "maxrregcount") {
        o.max_regs = number(0, 255);
      } else if (key == "lineinfo") {
        o.line_info = number(0, 1) == 1;
      } else {
        throw Error(ErrorKind::Data, "@lab: unknown option '" + printable(key) +
                                         "' (block, px, rows, fast_math, maxrregcount, lineinfo)");
      }
    }
    break;  // the first such line counts
  }
  return o;
}

std::string with_live_options(const std::string& source, const LiveOptions& o) {
  std::istringstream in(source);
  std::string line, rest;
  bool replaced = false;
  while (std::getline(in, line)) {
    if (!replaced && line.rfind(kOptionsTag, 0) == 0) {
      rest += options_line(o) + "\n";
      replaced = true;
      continue;
    }
    rest += line + "\n";
  }
  return replaced ? rest : options_line(o) + "\n" + rest;
}

std::vector<std::string> live_nvrtc_options(const LiveOptions& o) {
  std::vector<std::string> v = {
      "-arch=sm_" + std::to_string(live_arch(o)),
      "--std=c++17",
      "--pre-include=lab_live.cuh",
      "-DLAB_MATH_NS=live",
      "-DLAB_BLOCK_X=" + std::to_string(o.block.x),
      "-DLAB_BLOCK_Y=" + std::to_string(o.block.y),
      "-DLAB_PX=" + std::to_string(o.px),
      "-DLAB_ROWS=" + std::to_string(o.rows),
      // Quoted includes not given by name are not looked for in the working folder either.
      "--no-source-include",
      // ptxas's resource report (registers, shared memory, spills): shown without a GPU too.
      "--ptxas-options=-v",
  };
  if (o.fast_math) v.push_back("--use_fast_math");
  if (o.max_regs > 0) v.push_back("-maxrregcount=" + std::to_string(o.max_regs));
  if (o.line_info) v.push_back("-lineinfo");
  return v;
}

namespace {
// "name(12): error ...: message" -> name, 12, error, message. The file name is the longest prefix
// that fits (as the greedy pattern ^(.*)\((\d+)\): (error|warning)[^:]*: (.*)$ would take it),
// found by a scan that is linear in the line: a log line can be as long as a line of source
// (NVRTC echoes it), and a recursive regex overflowed the stack on a 30,000-character one.
bool parse_log_line(const std::string& line, std::string& file, int& number, bool& error,
                    std::string& message) {
  for (size_t open = line.rfind('('); open != std::string::npos && open > 0;
       open = line.rfind('(', open - 1)) {
    size_t i = open + 1, digits = 0;
    while (i < line.size() && line[i] >= '0' && line[i] <= '9') ++i, ++digits;
    if (digits == 0 || digits > 9 || line.compare(i, 3, "): ") != 0) continue;
    // "catastrophic error" (an #error, a missing file, out of memory) is an error too.
    size_t kind = i + 3;
    if (line.compare(kind, 13, "catastrophic ") == 0) kind += 13;
    const bool is_error = line.compare(kind, 5, "error") == 0;
    if (!is_error && line.compare(kind, 7, "warning") != 0) continue;
    const size_t colon = line.find(": ", kind);
    if (colon == std::string::npos) continue;
    file = line.substr(0, open);
    number = std::atoi(line.substr(open + 1, digits).c_str());
    error = is_error;
    message = line.substr(colon + 2);
    return true;
  }
  return false;
}
}  // namespace

std::string LiveResources::str() const {
  if (regs < 0) return "ptxas reported no resources";
  std::string s = std::to_string(regs) + " registers, " + std::to_string(smem_bytes) +
                  " B shared, " + std::to_string(stack_bytes) + " B stack, ";
  s += spill_stores || spill_loads ? std::to_string(spill_stores) + " B spill stores, " +
                                         std::to_string(spill_loads) + " B spill loads"
                                   : "no spills";
  return s;
}

LiveResources take_ptxas_resources(std::string& log) {
  // "ptxas info    : Used 10 registers, used 1 barriers, 256 bytes smem"
  // "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads"
  LiveResources r;
  std::istringstream in(log);
  std::string line, kept;
  const auto number_before = [](const std::string& l, const char* what) -> long {
    const size_t at = l.find(what);
    if (at == std::string::npos) return -1;
    size_t b = at;
    while (b > 0 && l[b - 1] == ' ') --b;
    size_t a = b;
    while (a > 0 && std::isdigit(static_cast<unsigned char>(l[a - 1]))) --a;
    return a < b && b - a < 10 ? std::stol(l.substr(a, b - a)) : -1;
  };
  while (std::getline(in, line)) {
    // ptxas's warnings and errors stay in the log; only its information lines ("ptxas info",
    // and their continuations "ptxas    . ...") are taken.
    const size_t after = line.rfind("ptxas ", 0) == 0 ? line.find_first_not_of(' ', 5) : line.npos;
    const bool info =
        after != line.npos && (line.compare(after, 4, "info") == 0 || line[after] == '.');
    if (!info) {
      kept += (kept.empty() ? "" : "\n") + line;
      continue;
    }
    if (line.find("Used ") != std::string::npos) {
      r.regs = int(std::max(0L, number_before(line, " registers")));
      r.barriers = int(std::max(0L, number_before(line, " barriers")));
      r.smem_bytes = std::max(0L, number_before(line, " bytes smem"));
    }
    if (line.find("stack frame") != std::string::npos) {  // per function: the largest
      r.stack_bytes = std::max(r.stack_bytes, number_before(line, " bytes stack frame"));
      r.spill_stores = std::max(r.spill_stores, number_before(line, " bytes spill stores"));
      r.spill_loads = std::max(r.spill_loads, number_before(line, " bytes spill loads"));
    }
  }
  log = kept;
  return r;
}

std::vector<LiveDiagnostic> parse_nvrtc_log(const std::string& log) {
  // "user_kernel.cu(12): error: identifier "q" is undefined"
  // "user_kernel.cu(3): warning #177-D: variable "x" was declared but never referenced"
  std::vector<LiveDiagnostic> out;
  std::istringstream in(log);
  std::string line, file, message;
  int number = 0;
  bool error = false;
  while (std::getline(in, line)) {
    if (parse_log_line(line, file, number, error, message)) {
      LiveDiagnostic d;
      // A message inside one of the lab's headers is reported at line 0 with the header named.
      const bool user = file == kFileName;
      d.line = user ? number : 0;
      d.error = error;
      d.message = printable(user ? message : file + "(" + std::to_string(number) + "): " + message,
                            std::string::npos);
      out.push_back(std::move(d));
    } else if (line.find("error") != std::string::npos && line.find(": ") != std::string::npos &&
               line.rfind("At end of source", 0) == 0) {
      out.push_back({0, true, printable(line, std::string::npos)});
    }
  }
  return out;
}

namespace {

// An #include (or #include_next, #import, #embed, __has_include...) in a source, as written.
struct IncludeRef {
  int line = 0;
  std::string directive;  // "include", "__has_include", ...
  std::string name;       // between the quotes or brackets; "" when a macro names it
  bool angle = false;
};

bool ident_char(char c) {
  const unsigned char u = static_cast<unsigned char>(c);
  return std::isalnum(u) || c == '_' || c == '$' || u >= 0x80;
}

// Finds every include a preprocessor could act on, as EDG (NVRTC's front end) reads the text:
// lines spliced by a backslash before a newline (or CR LF), comments as white space, string and
// character literals ending at the line's end, raw strings, '#' or '%:' then the directive's name.
// It errs on the side of finding too many: a '#' followed by `include` anywhere counts, and
// directives in branches the preprocessor skips count as well.
std::vector<IncludeRef> scan_includes(const std::string& src) {
  std::string t;
  std::vector<int> line_of;
  t.reserve(src.size());
  line_of.reserve(src.size() + 1);
  int line = 1;
  for (size_t i = 0; i < src.size(); ++i) {
    if (src[i] == '\\') {
      const size_t j = i + 1 < src.size() && src[i + 1] == '\r' ? i + 2 : i + 1;
      if (j < src.size() && src[j] == '\n') {
        i = j, ++line;
        continue;
      }
    }
    t += src[i];
    line_of.push_back(line);
    if (src[i] == '\n') ++line;
  }
  line_of.push_back(line);
  const size_t n = t.size();
  auto at = [&](size_t k) { return k < n ? t[k] : '\0'; };
  // Skips a comment at k (returns true), else leaves k.
  auto comment = [&](size_t& k) {
    if (at(k) == '/' && at(k + 1) == '/') {
      while (k < n && t[k] != '\n') ++k;
      return true;
    }
    if (at(k) == '/' && at(k + 1) == '*') {
      const size_t end = t.find("*/", k + 2);
      k = end == std::string::npos ? n : end + 2;
      return true;
    }
    return false;
  };
  auto blank = [&](size_t& k) {  // white space and comments, not the line's end
    for (;;) {
      if (k < n && (t[k] == ' ' || t[k] == '\t' || t[k] == '\r' || t[k] == '\v' || t[k] == '\f'))
        ++k;
      else if (!comment(k))
        return;
    }
  };
  // A header name at k ("name" or <name>), else a macro: "" and not moved.
  auto header = [&](size_t& k, IncludeRef& r) {
    blank(k);
    const char open = at(k);
    if (open != '"' && open != '<') return;
    const char close = open == '"' ? '"' : '>';
    size_t e = k + 1;
    while (e < n && t[e] != close && t[e] != '\n') ++e;
    r.name = t.substr(k + 1, e - k - 1);
    r.angle = open == '<';
    k = e < n && t[e] == close ? e + 1 : e;
  };
  std::vector<IncludeRef> out;
  bool after_hash = false;
  int hash_line = 0;
  size_t i = 0;
  while (i < n) {
    const char c = t[i];
    if (comment(i)) continue;
    if (c == '\n') {
      after_hash = false, ++i;
      continue;
    }
    if (c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f') {
      ++i;
      continue;
    }
    if (c == '#' || (c == '%' && at(i + 1) == ':')) {
      const size_t len = c == '#' ? 1 : 2;
      const bool paste = c == '#' ? at(i + 1) == '#' : at(i + 2) == '%' && at(i + 3) == ':';
      after_hash = !paste;
      hash_line = line_of[i];
      i += paste ? 2 * len : len;
      continue;
    }
    if (ident_char(c) && !std::isdigit(static_cast<unsigned char>(c))) {
      size_t e = i;
      while (e < n && ident_char(t[e])) ++e;
      const std::string id = t.substr(i, e - i);
      if ((id == "R" || id == "u8R" || id == "uR" || id == "UR" || id == "LR") && at(e) == '"') {
        // A raw string: R"delim( ... )delim", which may span lines.
        const size_t paren = t.find('(', e + 1);
        const std::string delim = paren == std::string::npos ? "" : t.substr(e + 1, paren - e - 1);
        if (paren == std::string::npos || delim.size() > 16 ||
            delim.find_first_of(" \t\n\\)\"") != std::string::npos) {
          i = e + 1;  // not a raw string after all: the quote starts an ordinary literal
          after_hash = false;
          continue;
        }
        const size_t end = t.find(")" + delim + "\"", paren + 1);
        i = end == std::string::npos ? n : end + delim.size() + 2;
        after_hash = false;
        continue;
      }
      if ((id == "u8" || id == "u" || id == "U" || id == "L") && (at(e) == '"' || at(e) == '\'')) {
        i = e;  // the literal's prefix: the literal follows
        after_hash = false;
        continue;
      }
      const bool directive = after_hash && (id == "include" || id == "include_next" ||
                                            id == "import" || id == "embed");
      const bool probe = id == "__has_include" || id == "__has_include_next" || id == "__has_embed";
      if (directive || probe) {
        IncludeRef r;
        r.line = directive ? hash_line : line_of[i];
        r.directive = id;
        size_t k = e;
        if (probe) {
          blank(k);
          if (at(k) == '(') ++k;
        }
        header(k, r);
        out.push_back(r);
        e = std::max(e, k);
      }
      after_hash = false;
      i = e;
      continue;
    }
    if (std::isdigit(static_cast<unsigned char>(c)) ||
        (c == '.' && std::isdigit(static_cast<unsigned char>(at(i + 1))))) {
      // A pp-number: 1'000'000 has quotes that start no literal.
      size_t e = i + 1;
      while (e < n) {
        if ((t[e] == '+' || t[e] == '-') && std::strchr("eEpP", t[e - 1]))
          ++e;
        else if (ident_char(t[e]) || t[e] == '.' || (t[e] == '\'' && ident_char(at(e + 1))))
          ++e;
        else
          break;
      }
      after_hash = false;
      i = e;
      continue;
    }
    if (c == '"' || c == '\'') {
      size_t e = i + 1;
      while (e < n && t[e] != c && t[e] != '\n') e += t[e] == '\\' && at(e + 1) != '\n' ? 2 : 1;
      i = e < n && t[e] == c ? e + 1 : e;
      after_hash = false;
      continue;
    }
    after_hash = false;
    ++i;
  }
  return out;
}

}  // namespace

std::vector<std::string> live_includable() {
  std::vector<std::string> names;
  for (size_t i = 0; i < kLiveFileCount; ++i) names.push_back(kLiveFiles[i].name);
  return names;
}

std::vector<LiveDiagnostic> live_include_refusals(const std::string& source) {
  const std::vector<std::string> lab = live_includable();
  // In angle brackets, also the standard headers the lab's headers name (<cfloat> in a branch
  // NVRTC skips, in a copy of nms): with no include directory NVRTC opens no file for them.
  static const std::vector<std::string> standard = [] {
    std::vector<std::string> v;
    for (size_t i = 0; i < kLiveFileCount; ++i)
      for (const IncludeRef& r : scan_includes(kLiveFiles[i].text))
        if (r.angle && r.directive == "include") v.push_back(r.name);
    return v;
  }();
  std::string list;
  for (const std::string& h : lab) list += (list.empty() ? "" : ", ") + h;
  auto in = [](const std::vector<std::string>& v, const std::string& s) {
    return std::find(v.begin(), v.end(), s) != v.end();
  };
  std::vector<LiveDiagnostic> out;
  for (const IncludeRef& r : scan_includes(source)) {
    const bool probe = r.directive.rfind("__has_", 0) == 0;
    if (!probe && !r.name.empty() && (in(lab, r.name) || (r.angle && in(standard, r.name))))
      continue;
    std::string what = probe ? r.directive : "#" + r.directive;
    if (!r.name.empty())
      what += r.angle ? " <" + printable(r.name) + ">" : " \"" + printable(r.name) + "\"";
    out.push_back({r.line, true,
                   what + (probe ? ": a live kernel cannot look for files; " : ": ") +
                       "only the lab's headers (" + list + ")" +
                       (r.name.empty() && !probe ? ", named in quotes," : "") +
                       " may be included"});
  }
  return out;
}

std::vector<int> nvrtc_archs() {
  int count = 0;
  if (nvrtcGetNumSupportedArchs(&count) != NVRTC_SUCCESS || count <= 0) return {};
  std::vector<int> v(size_t(count), 0);
  if (nvrtcGetSupportedArchs(v.data()) != NVRTC_SUCCESS) return {};
  return v;
}

std::string nvrtc_arch_refusal(int arch) {
  const std::vector<int> v = nvrtc_archs();
  if (v.empty() || std::find(v.begin(), v.end(), arch) != v.end()) return "";
  return "NVRTC of this toolkit cannot target sm_" + std::to_string(arch) + " (it supports sm_" +
         std::to_string(*std::min_element(v.begin(), v.end())) + "..sm_" +
         std::to_string(*std::max_element(v.begin(), v.end())) + ")";
}

LiveBuild live_compile_in_process(const std::string& source, const LiveOptions& given) {
  LiveBuild b;
  b.source = source;
  LiveOptions o = given;
  o.arch = live_arch(given);
  b.options = given;
  b.arch = o.arch;
  const auto t0 = std::chrono::steady_clock::now();
  // NVRTC opens what an #include names, a FIFO or /etc/passwd alike: only the lab's headers.
  b.diagnostics = live_include_refusals(source);
  if (!b.diagnostics.empty()) {
    for (const LiveDiagnostic& d : b.diagnostics)
      b.log += std::string(b.log.empty() ? "" : "\n") + kFileName + "(" + std::to_string(d.line) +
               "): error: " + d.message;
    return b;
  }
  std::vector<const char*> names, texts;
  for (size_t i = 0; i < kLiveFileCount; ++i)
    names.push_back(kLiveFiles[i].name), texts.push_back(kLiveFiles[i].text);
  nvrtcProgram prog = nullptr;
  check_nvrtc(nvrtcCreateProgram(&prog, source.c_str(), kFileName, int(names.size()), texts.data(),
                                 names.data()),
              "nvrtcCreateProgram");
  struct Destroy {
    nvrtcProgram* p;
    ~Destroy() { nvrtcDestroyProgram(p); }
  } destroy{&prog};
  check_nvrtc(nvrtcAddNameExpression(prog, "user_kernel"), "nvrtcAddNameExpression");
  const std::vector<std::string> opts = live_nvrtc_options(o);
  std::vector<const char*> argv;
  for (const auto& s : opts) argv.push_back(s.c_str());
  const nvrtcResult r = nvrtcCompileProgram(prog, int(argv.size()), argv.data());
  size_t n = 0;
  check_nvrtc(nvrtcGetProgramLogSize(prog, &n), "nvrtcGetProgramLogSize");
  std::string log(n, '\0');
  if (n) check_nvrtc(nvrtcGetProgramLog(prog, &log[0]), "nvrtcGetProgramLog");
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  b.resources = take_ptxas_resources(log);
  // The log echoes source lines: their control characters are escaped, the lines kept.
  b.log = printable_lines(log);
  b.diagnostics = parse_nvrtc_log(b.log);
  // EDG's own allocation failure ends the compile as an error of the source: it is the limit.
  if (r == NVRTC_ERROR_COMPILATION &&
      log.find("catastrophic error: out of memory") != std::string::npos)
    throw std::bad_alloc();
  if (r == NVRTC_ERROR_COMPILATION) {
    if (b.diagnostics.empty()) b.diagnostics.push_back({0, true, b.log});
    b.compile_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    return b;
  }
  check_nvrtc(r, "nvrtcCompileProgram");
  const char* lowered = nullptr;
  if (nvrtcGetLoweredName(prog, "user_kernel", &lowered) != NVRTC_SUCCESS || !lowered) {
    b.diagnostics.push_back({0, true,
                             "no kernel named user_kernel: the entry point must be __global__ void "
                             "user_kernel(Inputs in, Outputs out, Params p)"});
    return b;
  }
  b.lowered_name = lowered;
  size_t ptx = 0, cubin = 0;
  check_nvrtc(nvrtcGetPTXSize(prog, &ptx), "nvrtcGetPTXSize");
  b.ptx.resize(ptx);
  if (ptx) check_nvrtc(nvrtcGetPTX(prog, &b.ptx[0]), "nvrtcGetPTX");
  while (!b.ptx.empty() && b.ptx.back() == '\0') b.ptx.pop_back();
  check_nvrtc(nvrtcGetCUBINSize(prog, &cubin), "nvrtcGetCUBINSize");
  b.cubin.resize(cubin);
  if (cubin) check_nvrtc(nvrtcGetCUBIN(prog, b.cubin.data()), "nvrtcGetCUBIN");
  b.ok = !b.cubin.empty();
  b.compile_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return b;
}

LiveKernel::LiveKernel(LiveBuild build) : m_build(std::move(build)) {
  if (!m_build.ok) throw Error(ErrorKind::Usage, "the kernel did not compile");
  const DeviceInfo& d = device_info();
  if (!d.present) throw Error(ErrorKind::Unavailable, "loading a kernel needs a CUDA device");
  if (m_build.arch != d.major * 10 + d.minor)
    throw Error(ErrorKind::Usage, "the kernel was compiled for sm_" + std::to_string(m_build.arch) +
                                      ", this GPU is " + d.arch());
  const auto t0 = std::chrono::steady_clock::now();
  cudaLibrary_t lib = nullptr;
  LAB_CUDA_CHECK(
      cudaLibraryLoadData(&lib, m_build.cubin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
  {
    std::lock_guard<std::mutex> lock(g_libraries_mutex);
    g_libraries.push_back(lib);
  }
  on_device_reset(forget_libraries);
  cudaKernel_t kernel = nullptr;
  LAB_CUDA_CHECK(cudaLibraryGetKernel(&kernel, lib, m_build.lowered_name.c_str()));
  m_func = reinterpret_cast<const void*>(kernel);
  cudaFuncAttributes a{};
  LAB_CUDA_CHECK(cudaFuncGetAttributes(&a, m_func));
  regs = a.numRegs;
  static_smem = a.sharedSizeBytes;
  local_bytes = a.localSizeBytes;
  m_load_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

std::string live_refusal(const Op& op) {
  if (op.def.inputs.size() > 4 || op.def.outputs.size() > 4)
    return op.def.name + " has more than 4 inputs or outputs";
  // ops.def says which ops read and write float planes only (a fused variant's optional
  // inputs, nms's reliability?, are not offered to a live kernel).
  bool live = op.live;
  std::string takes;
  for (const Op& o : registry()) {
    if (o.def.name == op.def.name) live = live || o.live;
    if (o.live) takes += (takes.empty() ? "" : ", ") + o.def.name;
  }
  if (live) return "";
  return op.def.name + " does not read and write float planes only (live kernels take " + takes +
         ")";
}

void launch_live(LaunchContext& ctx, const StageArgs& a, const LiveKernel& k,
                 const std::vector<ParamSpec>& specs) {
  Inputs ins{};
  Outputs outs{};
  auto plane = [](const ImageRef& r, const char* what, size_t i) {
    if (r.desc.type != PixelType::F32 || r.desc.channels != 1)
      throw Error(ErrorKind::Usage, std::string("a live kernel's ") + what + " " +
                                        std::to_string(i) + " must be a float plane, not " +
                                        r.desc.str());
  };
  if (a.in.size() > 4 || a.out.size() > 4 || a.out.empty())
    throw Error(ErrorKind::Usage, "a live kernel takes 1 to 4 outputs and at most 4 inputs");
  for (size_t i = 0; i < a.in.size(); ++i) {
    plane(a.in[i], "input", i);
    ins.img[i] = a.in[i].view<const float>();
  }
  for (size_t i = 0; i < a.out.size(); ++i) {
    plane(a.out[i], "output", i);
    outs.img[i] = a.out[i].view<float>();
  }
  ins.count = int(a.in.size()), outs.count = int(a.out.size());
  LiveParams p{};
  for (const ParamSpec& s : specs) {
    if (p.count == 8) break;
    const auto it = a.params.find(s.name);
    p.v[p.count++] = float(it != a.params.end() ? it->second : s.def);
  }
  const LiveOptions& o = k.build().options;
  if (a.block != o.block)
    throw Error(ErrorKind::Usage, "the live kernel was compiled for block " + o.block.str() +
                                      ", not " + a.block.str());
  const ImageDesc& d = a.out[0].desc;
  const long long cx = (long long)o.block.x * o.px, cy = (long long)o.block.y * o.rows;
  const dim3 grid(unsigned((d.width + cx - 1) / cx), unsigned((d.height + cy - 1) / cy));
  const dim3 block(unsigned(o.block.x), unsigned(o.block.y));
  ctx.before_launch(k.func(), "user_kernel", grid, block, 0);
  void* args[] = {&ins, &outs, &p};
  LAB_CUDA_CHECK(cudaLaunchKernel(k.func(), grid, block, args, 0, ctx.stream()));
  ctx.after_launch();
}

namespace {
void unbound_launch(LaunchContext&, const StageArgs&) {
  throw Error(ErrorKind::Internal, "a live variant is launched through launch_live");
}
}  // namespace

std::shared_ptr<const Op> make_live_op(const Op& base, std::shared_ptr<const LiveKernel> k) {
  auto op = std::make_shared<Op>(base);
  // A user kernel replaces the op's earlier user variant, if any.
  auto& vs = op->def.variants;
  for (size_t v = vs.size(); v-- > 0;)
    if (vs[v].live) {
      vs.erase(vs.begin() + long(v));
      op->fast_launch.erase(op->fast_launch.begin() + long(v));
    }
  VariantDef u;
  u.name = "user";
  u.delta = "your kernel, compiled with NVRTC (" + std::to_string(k->build().source.size()) +
            " bytes of source)";
  u.blocks = {k->build().options.block};
  u.default_block = k->build().options.block;
  u.launch = unbound_launch;
  u.expect = "whatever you made it do: the diff says whether it matches the reference";
  u.live = std::move(k);
  vs.push_back(std::move(u));
  op->fast_launch.push_back(unbound_launch);
  return op;
}

std::shared_ptr<const Op> make_live_stage(const std::string& input_slot,
                                          std::shared_ptr<const LiveKernel> k) {
  Op base;
  base.def.name = "user";
  base.def.summary = "your kernel, added as a stage: reads " + input_slot + ", writes user";
  base.def.inputs = {input_slot};
  base.def.outputs = {"user"};
  base.def.shape = [](const std::vector<ImageDesc>& in, const ParamMap&) {
    if (in.empty() || in[0].type != PixelType::F32 || in[0].channels != 1 || in[0].empty())
      throw Error(ErrorKind::Data, "user: a live stage reads a float plane");
    return std::vector<ImageDesc>{in[0]};
  };
  base.def.tol_why = "no CPU reference: a live kernel added as a new stage is timed, not compared";
  return make_live_op(base, std::move(k));
}

std::string live_copy_source(const Op& op, size_t variant, Block block, MathMode math,
                             LiveOptions* options) {
  const VariantDef& v = op.def.variants.at(variant);
  if (v.live_call.empty()) return "";
  const std::string header = op.def.name + "_kernels.cuh";
  const char* text = nullptr;
  for (size_t i = 0; i < kLiveFileCount; ++i)
    if (header == kLiveFiles[i].name) text = kLiveFiles[i].text;
  if (!text) return "";
  // The kernels become device functions that user_kernel calls; their launch bounds move to
  // user_kernel. The code is otherwise the file that ships, byte for byte.
  std::string body = std::regex_replace(
      text, std::regex(R"(__global__ void __launch_bounds__\([^)]*\))"), "__device__ void");
  body = std::regex_replace(body, std::regex(R"(__global__ void)"), "__device__ void");
  std::ostringstream s;
  s << "// " << op.def.name << "/" << v.name << ", as it ships: kernels/ops/" << header
    << ",\n// its kernels turned into device functions. " << v.delta << "\n"
    << "// Block " << block.str() << ", " << math_name(math)
    << " math. The lab launches user_kernel (end of file).\n\n"
    << body << "\n// The entry point: one launch of " << v.name << ".\n"
    << "__global__ void " << (v.live_bounds ? "__launch_bounds__(LAB_BLOCK_X * LAB_BLOCK_Y) " : "")
    << "user_kernel(Inputs in, Outputs out, Params p) {\n"
    << "  using namespace lab::ops::live;\n"
    << "  " << v.live_call << ";\n"
    << "}\n";
  LiveOptions lo = options ? *options : LiveOptions{};
  lo.block = block;
  lo.px = v.live_px, lo.rows = v.live_rows;
  lo.fast_math = math == MathMode::Fast;
  if (options) *options = lo;
  return with_live_options(s.str(), lo);
}

std::string live_template(const Op& op) {
  std::ostringstream s;
  s << options_line(LiveOptions{}) << "\n"
    << "// A live kernel for " << op.def.name << ": " << op.def.summary << "\n"
    << "// in[0.." << op.def.inputs.size() - 1 << "]: ";
  for (size_t i = 0; i < op.def.inputs.size(); ++i) s << (i ? ", " : "") << op.def.inputs[i];
  s << "; out[0.." << op.def.outputs.size() - 1 << "]: ";
  for (size_t i = 0; i < op.def.outputs.size(); ++i) s << (i ? ", " : "") << op.def.outputs[i];
  s << "\n// Helpers: lab_x(), lab_y(), inside(), ldg(), clamped(), bilinear() (lab_live.cuh).\n"
    << "// A 3x3 box filter to start from: edit it, then compile.\n"
    << "__global__ void user_kernel(Inputs in, Outputs out, Params p) {\n"
    << "  const int x = lab_x(), y = lab_y();\n"
    << "  if (!inside(out[0], x, y)) return;\n"
    << "  float s = 0.0f;\n"
    << "  for (int dy = -1; dy <= 1; ++dy)\n"
    << "    for (int dx = -1; dx <= 1; ++dx) s += clamped(in[0], x + dx, y + dy);\n"
    << "  for (int o = 0; o < out.count; ++o) out[o].at(x, y) = s / 9.0f;\n"
    << "}\n";
  return s.str();
}

std::string live_dir() {
  return xdg_dir("XDG_DATA_HOME", ".local/share", "kernels");
}

std::string read_live_file(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec))
    throw Error(ErrorKind::NoInput, "kernel file " + path + " does not exist");
  if (fs::is_directory(path, ec))
    throw Error(ErrorKind::Data, "kernel file " + path + " is a folder");
  // A FIFO or a device has no size to check and may never end: regular files only.
  if (!fs::is_regular_file(path, ec))
    throw Error(ErrorKind::Data, "kernel file " + path + " is not a regular file");
  if (fs::file_size(path, ec) > (size_t(1) << 20))
    throw Error(ErrorKind::Data, "kernel file " + path + " is over 1 MiB");
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error(ErrorKind::NoInput, "kernel file " + path + " cannot be read");
  std::ostringstream s;
  s << f.rdbuf();
  if (!f && !f.eof()) throw Error(ErrorKind::Io, "reading " + path + " failed");
  return s.str();
}

void write_live_file(const std::string& path, const std::string& source) {
  write_output_file(path, source);
}

std::string live_draft_path() {
  return (fs::path(state_dir()) / "live_draft.json").string();
}

void write_live_draft(const std::string& path, const LiveDraft& d) {
  const nlohmann::json j{{"schema", 1},  {"source", d.source},     {"stage", d.stage},
                         {"add", d.add}, {"add_slot", d.add_slot}, {"file", d.file}};
  write_output_file(path, j.dump(1) + "\n");
}

std::optional<LiveDraft> read_live_draft(const std::string& path, std::string* warning) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return std::nullopt;
  auto fail = [&](const std::string& why) -> std::optional<LiveDraft> {
    if (warning) *warning = "the editor's autosave " + path + " was not restored: " + why;
    return std::nullopt;
  };
  if (!fs::is_regular_file(path, ec) || fs::file_size(path, ec) > (size_t(4) << 20))
    return fail("not a file of at most 4 MiB");
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  try {
    const nlohmann::json j = nlohmann::json::parse(ss.str());
    if (!j.is_object() || j.value("schema", 0) != 1) return fail("not schema 1");
    LiveDraft d;
    d.source = j.at("source").get<std::string>();
    d.stage = j.value("stage", std::string());
    d.add = j.value("add", false);
    d.add_slot = j.value("add_slot", std::string());
    d.file = j.value("file", std::string());
    return d;
  } catch (const std::exception& e) {
    return fail(printable(e.what()));
  }
}

}  // namespace lab
