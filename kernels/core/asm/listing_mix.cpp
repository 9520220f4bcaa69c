// The instruction mix of a PTX or SASS listing: each instruction in one class.
#include "listing.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "text.h"

namespace lab {

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

}  // namespace lab
