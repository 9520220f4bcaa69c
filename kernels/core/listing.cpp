#include "listing.h"

#include <cuda_runtime_api.h>
#include <cxxabi.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <sstream>

extern char** environ;

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

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace((unsigned char)s[b])) ++b;
  while (e > b && std::isspace((unsigned char)s[e - 1])) --e;
  return s.substr(b, e - b);
}

bool starts_with(const std::string& s, const char* p) {
  return s.rfind(p, 0) == 0;
}

bool ident_char(char c) {
  return std::isalnum((unsigned char)c) || c == '_' || c == '$';
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

// ---- instruction mix -------------------------------------------------------------------------

const char* mix_name(MixClass c) {
  switch (c) {
    case MixClass::Fp32:
      return "FP32";
    case MixClass::Fp64:
      return "FP64";
    case MixClass::CvtF64:
      return "F32<->F64";
    case MixClass::Mufu:
      return "MUFU";
    case MixClass::LdGlobal:
      return "ld global";
    case MixClass::StGlobal:
      return "st global";
    case MixClass::LdShared:
      return "ld shared";
    case MixClass::StShared:
      return "st shared";
    case MixClass::LdLocal:
      return "ld local";
    case MixClass::StLocal:
      return "st local";
    case MixClass::LdConst:
      return "ld const/param";
    case MixClass::LdStGeneric:
      return "ld/st generic";
    case MixClass::Atomic:
      return "atomic";
    case MixClass::Integer:
      return "integer";
    case MixClass::Control:
      return "control";
    case MixClass::Other:
      return "other";
    case MixClass::Count:
      break;
  }
  return "?";
}

const char* mix_help(MixClass c) {
  switch (c) {
    case MixClass::Fp32:
      return "Single-precision arithmetic and comparisons. PTX: add/sub/mul/fma/mad/div/rcp/sqrt/"
             "min/max/abs/neg/setp of .f32 (not .approx transcendentals). SASS: FADD, FMUL, FFMA, "
             "FMNMX, FSETP, FSEL, FCHK and their 32I forms.";
    case MixClass::Fp64:
      return "Double-precision arithmetic and comparisons: any of those ops on .f64 (PTX); DADD, "
             "DMUL, DFMA, DSETP, DMNMX (SASS). A few per SM on GeForce and Orin: a stray double "
             "(a literal without f, sin instead of sinf) shows up here.";
    case MixClass::CvtF64:
      return "Conversions between float and double: cvt with both .f32 and .f64 (PTX); F2F with "
             "F64 and F32 (SASS). Usually the sign of an unintended double.";
    case MixClass::Mufu:
      return "The special-function unit (a quarter rate or less): sin, cos, ex2, lg2, tanh and "
             ".approx rcp/sqrt/rsqrt/div (PTX: --use_fast_math turns sinf, expf, divisions into "
             "these); MUFU.* (SASS, which also shows the MUFU inside precise sqrt and division).";
    case MixClass::LdGlobal:
      return "Loads from global memory: ld.global (and .nc, ldu, tex) in PTX; LDG (SASS).";
    case MixClass::StGlobal:
      return "Stores to global memory: st.global (PTX); STG (SASS).";
    case MixClass::LdShared:
      return "Loads from shared memory: ld.shared, ldmatrix (PTX); LDS, LDSM (SASS).";
    case MixClass::StShared:
      return "Stores to shared memory: st.shared (PTX); STS (SASS).";
    case MixClass::LdLocal:
      return "Loads from local memory (per-thread, in DRAM behind L1): ld.local (PTX); LDL "
             "(SASS). In SASS these are usually register spills or indexed local arrays.";
    case MixClass::StLocal:
      return "Stores to local memory: st.local (PTX); STL (SASS).";
    case MixClass::LdConst:
      return "Loads from the constant banks and kernel parameters: ld.const, ld.param (PTX); "
             "LDC, ULDC (SASS).";
    case MixClass::LdStGeneric:
      return "Loads and stores through a generic address (no state space known at compile "
             "time): ld/st without a space (PTX); LD, ST (SASS).";
    case MixClass::Atomic:
      return "Atomics and reductions: atom, red (PTX); ATOM, ATOMG, ATOMS, RED (SASS).";
    case MixClass::Integer:
      return "Integer and bit arithmetic, comparisons and address computation: add/mul/mad/shl/"
             "and/setp... on .s/.u/.b types (PTX); IADD3, IMAD, LOP3, SHF, LEA, ISETP, their "
             "uniform U* forms (SASS).";
    case MixClass::Control:
      return "Branches, calls, returns and barriers: bra, call, ret, exit, bar, membar, fence "
             "(PTX); BRA, BSSY, BSYNC, CALL, RET, EXIT, BAR, WARPSYNC, MEMBAR (SASS).";
    case MixClass::Other:
      return "Everything else: moves, selects, conversions between integers and floats, "
             "shuffles, votes, special registers (mov, selp, cvt, shfl; MOV, SEL, S2R, SHFL).";
    case MixClass::Count:
      break;
  }
  return "";
}

namespace {

std::vector<std::string> split_dots(const std::string& op) {
  std::vector<std::string> parts;
  std::string cur;
  for (char c : op) {
    if (c == '.')
      parts.push_back(cur), cur.clear();
    else
      cur += c;
  }
  parts.push_back(cur);
  return parts;
}

bool has(const std::vector<std::string>& v, const char* s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

bool one_of(const std::string& s, std::initializer_list<const char*> l) {
  for (const char* x : l)
    if (s == x) return true;
  return false;
}

MixClass classify_ptx(const std::string& opcode) {
  const std::vector<std::string> p = split_dots(opcode);
  const std::string& b = p[0];
  const bool f32 = has(p, "f32"), f64 = has(p, "f64");
  if (one_of(b, {"ld", "ldu"})) {
    if (has(p, "global")) return MixClass::LdGlobal;
    if (has(p, "shared")) return MixClass::LdShared;
    if (has(p, "local")) return MixClass::LdLocal;
    if (has(p, "const") || has(p, "param")) return MixClass::LdConst;
    return MixClass::LdStGeneric;
  }
  if (b == "st") {
    if (has(p, "global")) return MixClass::StGlobal;
    if (has(p, "shared")) return MixClass::StShared;
    if (has(p, "local")) return MixClass::StLocal;
    if (has(p, "param")) return MixClass::Other;  // a call's argument
    return MixClass::LdStGeneric;
  }
  if (one_of(b, {"tex", "tld4"})) return MixClass::LdGlobal;
  if (b == "ldmatrix") return MixClass::LdShared;
  if (one_of(b, {"atom", "red"})) return MixClass::Atomic;
  if (b == "cvt") return f32 && f64 ? MixClass::CvtF64 : MixClass::Other;
  if (one_of(b, {"sin", "cos", "ex2", "lg2", "tanh"})) return MixClass::Mufu;
  if (one_of(b, {"rcp", "sqrt", "rsqrt", "div"}) && has(p, "approx") && !f64) return MixClass::Mufu;
  const bool float_op = one_of(b, {"add", "sub", "mul", "fma", "mad", "div", "rcp", "sqrt", "rsqrt",
                                   "min", "max", "abs", "neg", "setp", "set", "testp", "copysign"});
  if (float_op && f64) return MixClass::Fp64;
  if (float_op && f32) return MixClass::Fp32;
  if (one_of(b, {"bra", "brx", "call", "ret", "exit", "bar", "barrier", "membar", "fence", "trap",
                 "brkpt"}))
    return MixClass::Control;
  if (float_op ||
      one_of(b, {"mul24", "mad24", "sad",  "and",  "or",    "xor",  "not",   "shl",  "shr",
                 "shf",   "popc",  "clz",  "brev", "bfe",   "bfi",  "bfind", "prmt", "lop3",
                 "rem",   "cnot",  "dp4a", "dp2a", "szext", "bmsk", "addc",  "subc", "madc"}))
    return MixClass::Integer;
  return MixClass::Other;
}

MixClass classify_sass(const std::string& opcode) {
  const std::vector<std::string> p = split_dots(opcode);
  const std::string& b = p[0];
  if (b == "LDG") return MixClass::LdGlobal;
  if (b == "STG") return MixClass::StGlobal;
  if (one_of(b, {"LDS", "LDSM"})) return MixClass::LdShared;
  if (b == "STS") return MixClass::StShared;
  if (b == "LDL") return MixClass::LdLocal;
  if (b == "STL") return MixClass::StLocal;
  if (one_of(b, {"LDC", "ULDC"})) return MixClass::LdConst;
  if (one_of(b, {"LD", "ST"})) return MixClass::LdStGeneric;
  if (one_of(b, {"ATOM", "ATOMG", "ATOMS", "RED", "REDG", "REDUX"})) return MixClass::Atomic;
  if (b == "MUFU") return MixClass::Mufu;
  if (b == "F2F") return has(p, "F64") && has(p, "F32") ? MixClass::CvtF64 : MixClass::Other;
  if (one_of(b, {"FADD", "FMUL", "FFMA", "FMNMX", "FSETP", "FSET", "FSEL", "FCHK", "FADD32I",
                 "FMUL32I", "FFMA32I", "FSWZADD", "FMNMX3"}))
    return MixClass::Fp32;
  if (one_of(b, {"DADD", "DMUL", "DFMA", "DSETP", "DMNMX", "DSET"})) return MixClass::Fp64;
  if (one_of(b, {"BRA",   "BRX",  "JMP",    "JMX",      "CALL",   "RET", "EXIT",
                 "BAR",   "BSSY", "BSYNC",  "WARPSYNC", "MEMBAR", "BPT", "BREAK",
                 "YIELD", "KILL", "ERRBAR", "CCTL",     "DEPBAR", "BMOV"}))
    return MixClass::Control;
  std::string ib = b;
  if (ib.size() > 1 && ib[0] == 'U' && ib != "UMOV") ib = ib.substr(1);  // uniform datapath
  if (one_of(ib, {"IADD3",  "IADD",  "IADD32I", "IMAD",   "IMUL",   "IMUL32I", "IMAD32I", "ISETP",
                  "ISCADD", "LOP3",  "LOP",     "LOP32I", "SHF",    "SHL",     "SHR",     "LEA",
                  "IABS",   "IMNMX", "POPC",    "FLO",    "BFE",    "BFI",     "PRMT",    "BREV",
                  "SGXT",   "BMSK",  "IDP",     "VIADD",  "VIMNMX", "IMNMX3"}))
    return MixClass::Integer;
  return MixClass::Other;
}

}  // namespace

bool classify_instruction(const std::string& line, AsmKind kind, MixClass* out) {
  std::string t = trim(line);
  if (t.empty() || starts_with(t, "//") || t[0] == '.' || t[0] == '{' || t[0] == '}' ||
      t[0] == '(' || t[0] == ')' || t[0] == '$' || t[0] == '`' || t.back() == ':')
    return false;
  if (kind == AsmKind::Ptx && t.back() != ';') return false;
  if (t[0] == '@') {  // a predicate guard: @%p1, @!P0
    const size_t sp = t.find_first_of(" \t");
    if (sp == std::string::npos) return false;
    t = trim(t.substr(sp));
  }
  size_t e = 0;
  while (e < t.size() && !std::isspace((unsigned char)t[e]) && t[e] != ';') ++e;
  const std::string opcode = t.substr(0, e);
  if (opcode.empty() || !std::isalpha((unsigned char)opcode[0])) return false;
  if (kind == AsmKind::Sass && !std::isupper((unsigned char)opcode[0])) return false;
  *out = kind == AsmKind::Ptx ? classify_ptx(opcode) : classify_sass(opcode);
  return true;
}

InstructionMix count_mix(const std::vector<std::string>& lines, AsmKind kind) {
  InstructionMix m;
  for (const std::string& l : lines) {
    MixClass c;
    if (!classify_instruction(l, kind, &c)) continue;
    ++m.count[size_t(c)];
    ++m.total;
  }
  return m;
}

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

// ---- tools -----------------------------------------------------------------------------------

ToolLookup find_cuda_tool(const std::string& name) {
  ToolLookup r;
  std::vector<std::string> dirs;
  auto add = [&](std::string d) {  // each folder once, however many variables name it
    while (d.size() > 1 && d.back() == '/') d.pop_back();
    if (d.empty() || std::find(dirs.begin(), dirs.end(), d) != dirs.end()) return false;
    dirs.push_back(d);
    return true;
  };
  if (const char* path = std::getenv("PATH")) {
    std::stringstream ss(path);
    std::string d;
    while (std::getline(ss, d, ':')) add(d);
    r.looked.push_back("PATH");
  } else {
    r.looked.push_back("PATH (unset)");
  }
  for (const char* var : {"CUDA_HOME", "CUDA_PATH"})
    if (const char* v = std::getenv(var); v && *v && add(std::string(v) + "/bin"))
      r.looked.push_back(dirs.back() + " ($" + var + ")");
  if (add("/usr/local/cuda/bin")) r.looked.push_back(dirs.back());
#ifdef LAB_CUDA_BIN_DIR
  if (add(LAB_CUDA_BIN_DIR)) r.looked.push_back(dirs.back() + " (this build's toolkit)");
#endif
  for (const std::string& d : dirs) {
    const std::string p = d + "/" + name;
    struct stat st {};
    if (stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(p.c_str(), X_OK) == 0) {
      r.path = p;
      return r;
    }
  }
  return r;
}

namespace {

std::string missing_message(const std::string& tool, const ToolLookup& t, const char* what) {
  std::string where;
  for (const auto& l : t.looked) where += (where.empty() ? "" : ", ") + l;
  return std::string("SASS is not available: ") + what + " needs " + tool +
         " from the CUDA toolkit (a full CUDA install or JetPack has it), and it was not found "
         "(looked on " +
         where + ").";
}

struct ToolRun {
  bool started = false, timed_out = false;
  int status = -1;
  std::string out, err;
};

// Runs argv with a timeout, capturing stdout and stderr (at most `cap` bytes each).
ToolRun run_tool(const std::vector<std::string>& argv, double timeout_s,
                 size_t cap = size_t(256) << 20) {
  ToolRun r;
  int out_pipe[2], err_pipe[2];
  if (pipe(out_pipe) != 0) return r;
  if (pipe(err_pipe) != 0) {
    close(out_pipe[0]), close(out_pipe[1]);
    return r;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, out_pipe[1], 1);
  posix_spawn_file_actions_adddup2(&fa, err_pipe[1], 2);
  posix_spawn_file_actions_addclose(&fa, out_pipe[0]);
  posix_spawn_file_actions_addclose(&fa, err_pipe[0]);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  close(out_pipe[1]), close(err_pipe[1]);
  if (rc != 0) {
    close(out_pipe[0]), close(err_pipe[0]);
    return r;
  }
  r.started = true;
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(int(timeout_s * 1000));
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&r.out, &r.err};
  int open_fds = 2;
  char buf[65536];
  while (open_fds > 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    if (left <= 0) {
      r.timed_out = true;
      break;
    }
    if (poll(fds, 2, int(std::min<long long>(left, 1000))) < 0) break;
    for (int k = 0; k < 2; ++k) {
      if (fds[k].fd < 0 || !(fds[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      const ssize_t got = read(fds[k].fd, buf, sizeof buf);
      if (got <= 0) {
        close(fds[k].fd);
        fds[k].fd = -1;
        --open_fds;
      } else if (sinks[k]->size() < cap) {
        sinks[k]->append(buf, size_t(got));
      }
    }
  }
  for (auto& f : fds)
    if (f.fd >= 0) close(f.fd);
  if (r.timed_out) kill(pid, SIGKILL);
  int st = 0;
  waitpid(pid, &st, 0);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

std::string first_line(const std::string& s) {
  const std::string t = trim(s);
  const size_t nl = t.find('\n');
  return nl == std::string::npos ? t : t.substr(0, nl);
}

SassResult sass_from_run(const std::string& tool, const ToolRun& run, double timeout_s) {
  SassResult r;
  if (!run.started) {
    r.message = "SASS is not available: " + tool + " could not be started.";
  } else if (run.timed_out) {
    r.message = "SASS is not available: " + tool + " did not finish within " +
                std::to_string(int(timeout_s)) + " s and was stopped.";
  } else if (run.status != 0) {
    r.message = "SASS is not available: " + tool + " failed (exit " + std::to_string(run.status) +
                ")" + (run.err.empty() ? std::string(".") : ": " + first_line(run.err));
  } else {
    r.functions = split_sass(run.out);
    r.ok = !r.functions.empty();
    if (!r.ok)
      r.message = "SASS is not available: " + tool +
                  "'s output held no function this view can read" +
                  (run.out.empty() ? " (it printed nothing)." : ".");
  }
  return r;
}

}  // namespace

SassResult builtin_sass(const std::string& mangled, double timeout_s) {
  static std::mutex mu;
  static std::map<std::string, SassResult> cache;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = cache.find(mangled);
    if (it != cache.end()) return it->second;
  }
  const ToolLookup t = find_cuda_tool("cuobjdump");
  if (t.path.empty()) {
    SassResult r;
    r.message = missing_message("cuobjdump", t, "a built-in kernel's SASS");
    return r;  // not cached: PATH may change (the tests empty it)
  }
  // Our own path, resolved here: the tool's /proc/self/exe would be the tool.
  char exe[4096];
  const ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (len <= 0) {
    SassResult r;
    r.message = "SASS is not available: this executable's path cannot be read (/proc/self/exe).";
    return r;
  }
  exe[len] = '\0';
  const ToolRun run = run_tool({t.path, "-sass", "-fun", mangled, exe}, timeout_s);
  SassResult r = sass_from_run("cuobjdump", run, timeout_s);
  if (r.ok) {
    std::vector<AsmFunction> mine;
    for (auto& f : r.functions)
      if (f.name == mangled) mine.push_back(std::move(f));
    r.functions = std::move(mine);
    r.ok = !r.functions.empty();
    if (!r.ok) r.message = "SASS is not available: cuobjdump found no function " + mangled + ".";
  }
  std::lock_guard<std::mutex> lock(mu);
  cache[mangled] = r;
  return r;
}

SassResult cubin_sass(const std::vector<char>& cubin, double timeout_s) {
  SassResult r;
  if (cubin.empty()) {
    r.message = "SASS is not available: the live kernel has no cubin (it did not compile).";
    return r;
  }
  const ToolLookup t = find_cuda_tool("nvdisasm");
  if (t.path.empty()) {
    r.message = missing_message("nvdisasm", t, "a live kernel's SASS");
    return r;
  }
  const char* tmp = std::getenv("TMPDIR");
  std::string path = std::string(tmp && *tmp ? tmp : "/tmp") + "/kernel-lab-XXXXXX.cubin";
  std::vector<char> name(path.begin(), path.end());
  name.push_back('\0');
  const int fd = mkstemps(name.data(), 6);
  if (fd < 0) {
    r.message = "SASS is not available: no temporary file for the cubin (" +
                std::string(std::strerror(errno)) + ").";
    return r;
  }
  size_t done = 0;
  while (done < cubin.size()) {
    const ssize_t w = write(fd, cubin.data() + done, cubin.size() - done);
    if (w <= 0) break;
    done += size_t(w);
  }
  close(fd);
  if (done == cubin.size())
    r = sass_from_run("nvdisasm", run_tool({t.path, "-c", name.data()}, timeout_s), timeout_s);
  else
    r.message = "SASS is not available: the cubin could not be written to a temporary file.";
  unlink(name.data());
  return r;
}

const AsmFunction* pick_arch(const std::vector<AsmFunction>& fns, int arch) {
  for (const AsmFunction& f : fns)
    if (f.arch == arch) return &f;
  return fns.empty() ? nullptr : &fns.front();
}

std::string kernel_mangled_name(const void* func) {
#if CUDART_VERSION >= 12030
  const char* name = nullptr;
  if (func && cudaFuncGetName(&name, func) == cudaSuccess && name) return name;
  cudaGetLastError();  // no driver or device: not an error of the caller's
#else
  (void)func;
#endif
  return "";
}

}  // namespace lab
