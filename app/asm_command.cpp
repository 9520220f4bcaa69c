// `kernel-lab asm`: a kernel's PTX or SASS, its instruction mix, and precise vs fast (or one
// variant against another) side by side (kernels/core/asm/listing.h does the work).
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <sstream>

#include "commands.h"
#include "device.h"
#include "listing.h"
#include "live.h"
#include "printable.h"
#include "registry.h"

namespace lab::app {

namespace {

// One function's listing in one build: what the view prints or compares.
struct Listing {
  std::string title;  // "lab::ops::fast::branch_v1_divergent_kernel(...)"
  std::string build;  // "PTX compute_87 fast"
  std::vector<std::string> lines;
};

MathMode math_of(const std::string& s) {
  return s == "fast" ? MathMode::Fast : MathMode::Precise;
}

// The SASS architecture shown: --arch, else this GPU's, else the first in the binary.
int sass_arch(const AsmOptions& o) {
  if (o.arch > 0) return o.arch;
  const DeviceInfo& d = device_info();
  return d.present ? d.major * 10 + d.minor : 0;
}

struct Target {
  const Op* op = nullptr;
  size_t variant = 0;
};

Target parse_target(const std::string& spec, const char* what) {
  Target t;
  const size_t eq = spec.find('=');
  t.op = &find_op(spec.substr(0, eq));
  if (eq == std::string::npos) {
    t.variant = t.op->default_variant();
  } else {
    const int v = t.op->find_variant(spec.substr(eq + 1));
    if (v < 0) {
      std::string names;
      for (const auto& vd : t.op->def.variants) names += (names.empty() ? "" : ", ") + vd.name;
      throw Error(ErrorKind::Usage, std::string(what) + ": no variant '" +
                                        printable(spec.substr(eq + 1)) + "' of " + t.op->def.name +
                                        " (" + names + ")");
    }
    t.variant = size_t(v);
  }
  return t;
}

std::vector<AsmFunction> module_of(const Op& op, MathMode m) {
  const char* ptx = embedded_ptx(op.def.name, m);
  if (!ptx) throw Error(ErrorKind::Unavailable, ptx_missing_reason(op.def.name));
  return split_ptx(ptx);
}

// The functions the view shows for a target: --kernel's, else the variant's (a guess by name).
std::vector<const AsmFunction*> select(const std::vector<AsmFunction>& fns, const Target& t,
                                       const AsmOptions& o) {
  const Op& op = *t.op;
  const VariantDef& vd = op.def.variants[t.variant];
  if (!o.kernel.empty()) {
    if (const AsmFunction* f = find_function(fns, o.kernel)) return {f};
    std::vector<const AsmFunction*> hits;
    for (const AsmFunction& f : fns)
      if (demangle(f.name).find(o.kernel) != std::string::npos) hits.push_back(&f);
    if (hits.size() == 1) return hits;
    throw Error(ErrorKind::Usage,
                "asm --kernel " + printable(o.kernel) + ": " +
                    (hits.empty() ? "no function of " + op.def.name + " by that name"
                                  : std::to_string(hits.size()) + " functions of " + op.def.name +
                                        " match; name one") +
                    " (asm " + op.def.name + " --list shows them)");
  }
  Block block = vd.default_block;
  if (!o.block.empty()) {
    const auto b = parse_wxh(o.block);
    if (!b) throw Error(ErrorKind::Usage, "asm --block " + printable(o.block) + ": expected WxH");
    block = *b;
  }
  std::vector<const AsmFunction*> out = variant_functions(fns, op.def.name, vd.name, &block);
  if (out.empty())
    throw Error(ErrorKind::Usage, op.def.name + "/" + vd.name +
                                      ": no kernel of this op's file is named after this variant "
                                      "(it may be a library call, CUB or Thrust); `asm " +
                                      op.def.name +
                                      " --list` shows its kernels, --kernel picks one");
  return out;
}

Listing listing_of(const AsmFunction& ptx_fn, MathMode m, const AsmOptions& o) {
  Listing l;
  l.title = demangle(ptx_fn.name);
  if (!o.sass) {
    l.build = std::string("PTX compute_87 ") + math_name(m);
    l.lines = ptx_fn.lines;
    return l;
  }
  const SassResult s = builtin_sass(ptx_fn.name);
  if (!s.ok) throw Error(ErrorKind::Unavailable, s.message);
  const AsmFunction* f = pick_arch(s.functions, sass_arch(o));
  l.build = "SASS sm_" + std::to_string(f->arch) + " " + math_name(m);
  l.lines = f->lines;
  return l;
}

void print_mix(std::ostream& os, const std::vector<const Listing*>& ls, AsmKind kind) {
  std::vector<InstructionMix> mixes;
  for (const Listing* l : ls) mixes.push_back(count_mix(l->lines, kind));
  char buf[160];
  std::snprintf(buf, sizeof buf, "%-16s", "instruction mix");
  os << buf;
  for (size_t i = 0; i < ls.size(); ++i) {
    // The math pass heads a column; with two, A and B as well.
    const std::string math = ls[i]->build.substr(ls[i]->build.rfind(' ') + 1);
    const std::string head = ls.size() == 2 ? std::string(i ? "B " : "A ") + math : math;
    std::snprintf(buf, sizeof buf, " %14s", head.c_str());
    os << buf;
  }
  os << "\n";
  for (size_t c = 0; c < kMixClasses; ++c) {
    bool any = false;
    for (const auto& m : mixes) any |= m.count[c] != 0;
    if (!any) continue;
    std::snprintf(buf, sizeof buf, "%-16s", mix_name(MixClass(c)));
    os << buf;
    for (const auto& m : mixes) {
      std::snprintf(buf, sizeof buf, " %14d", m.count[c]);
      os << buf;
    }
    os << "\n";
  }
  std::snprintf(buf, sizeof buf, "%-16s", "total");
  os << buf;
  for (const auto& m : mixes) {
    std::snprintf(buf, sizeof buf, " %14d", m.total);
    os << buf;
  }
  os << "\n";
}

void print_one(std::ostream& os, const Listing& l, AsmKind kind, bool mix_only) {
  os << "== " << l.title << "\n   " << l.build << ", " << l.lines.size() << " lines\n";
  if (!mix_only)
    for (const auto& line : l.lines) os << line << "\n";
  print_mix(os, {&l}, kind);
  os << "\n";
}

void print_pair(std::ostream& os, const Listing& a, const Listing& b, AsmKind kind,
                const AsmOptions& o) {
  const std::vector<DiffRow> rows = diff_lines(a.lines, b.lines);
  size_t differ = 0;
  for (const auto& r : rows) differ += r.op != DiffOp::Same;
  os << "== A: " << a.title << "  [" << a.build << "]\n"
     << "   B: " << b.title << "  [" << b.build << "]\n"
     << "   " << differ << " of " << rows.size()
     << " rows differ (! changed, - only in A, + only in B)\n";
  if (!o.mix_only) os << format_side_by_side(a.lines, b.lines, rows, o.width);
  print_mix(os, {&a, &b}, kind);
  os << "\n";
}

// --kernel-file: a live kernel, compiled here with NVRTC (no GPU needed).
LiveBuild compile_file(const AsmOptions& o, bool fast) {
  const std::string src = read_live_file(o.kernel_file);
  LiveOptions lo = read_live_options(src, LiveOptions{});
  lo.fast_math = fast;
  if (o.arch > 0) {
    // An architecture inside --arch's range that this NVRTC cannot target is the user's to change.
    const std::string why = nvrtc_arch_refusal(o.arch);
    if (!why.empty())
      throw Error(ErrorKind::Usage, "--arch " + std::to_string(o.arch) + ": " + why);
    lo.arch = o.arch;
  }
  LiveBuild b = live_compile(src, lo, o.kernel_file);
  if (!b.ok) {
    std::cerr << b.log << "\n";  // its source lines' control characters escaped (live.h)
    throw Error(ErrorKind::Data, o.kernel_file + " does not compile (NVRTC's log above)");
  }
  return b;
}

Listing live_listing(const LiveBuild& b, const AsmOptions& o) {
  Listing l;
  l.title = demangle(b.lowered_name) + " (" + o.kernel_file + ")";
  const std::string math = b.options.fast_math ? "fast" : "precise";
  if (!o.sass) {
    const std::vector<AsmFunction> fns = split_ptx(b.ptx);
    const AsmFunction* f = find_function(fns, b.lowered_name);
    if (!f) throw Error(ErrorKind::Internal, "NVRTC's PTX has no " + b.lowered_name);
    l.build = "PTX compute_" + std::to_string(b.arch) + " " + math;
    l.lines = f->lines;
    return l;
  }
  const SassResult s = cubin_sass(b.cubin);
  if (!s.ok) throw Error(ErrorKind::Unavailable, s.message);
  const AsmFunction* f = nullptr;
  for (const auto& fn : s.functions)
    if (fn.name == b.lowered_name) f = &fn;
  if (!f) f = &s.functions.front();
  l.build = "SASS sm_" + std::to_string(b.arch) + " " + math;
  l.lines = f->lines;
  return l;
}

}  // namespace

int cmd_asm(const AsmOptions& o) {
  const AsmKind kind = o.sass ? AsmKind::Sass : AsmKind::Ptx;
  std::ostringstream os;
  if (!o.kernel_file.empty()) {
    if (o.diff) {
      print_pair(os, live_listing(compile_file(o, false), o),
                 live_listing(compile_file(o, true), o), kind, o);
    } else {
      print_one(os, live_listing(compile_file(o, o.math == "fast"), o), kind, o.mix_only);
    }
    std::cout << os.str();
    return 0;
  }
  if (o.spec.empty())
    throw Error(ErrorKind::Usage, "asm: name a STAGE[=VARIANT] (or --kernel-file FILE)");
  const Target t = parse_target(o.spec, "asm");
  const MathMode m = math_of(o.math);
  if (o.list) {
    const std::vector<AsmFunction> fns = module_of(*t.op, m);
    os << t.op->def.name << ": " << fns.size() << " functions in its " << math_name(m)
       << " PTX (lab::ops only; CUB's are not kept)\n";
    for (const AsmFunction& f : fns)
      os << (f.entry ? "  kernel " : "  func   ") << f.name << "\n         " << demangle(f.name)
         << "  (" << count_mix(f.lines, AsmKind::Ptx).total << " instructions)\n";
    std::cout << os.str();
    return 0;
  }
  if (o.diff) {
    const std::vector<AsmFunction> pre = module_of(*t.op, MathMode::Precise);
    const std::vector<AsmFunction> fast = module_of(*t.op, MathMode::Fast);
    for (const AsmFunction* a : select(pre, t, o)) {
      // The same kernel in the fast pass: its name with the other namespace.
      std::string name = a->name;
      const size_t p = name.find("3ops7precise");
      if (p != std::string::npos) name.replace(p, 12, "3ops4fast");
      const AsmFunction* b = find_function(fast, name);
      if (!b) throw Error(ErrorKind::Internal, "no fast build of " + a->name);
      print_pair(os, listing_of(*a, MathMode::Precise, o), listing_of(*b, MathMode::Fast, o), kind,
                 o);
    }
  } else if (!o.against.empty()) {
    const Target u = parse_target(o.against, "asm --against");
    const std::vector<AsmFunction> fa = module_of(*t.op, m);
    const std::vector<AsmFunction> fb = u.op == t.op ? fa : module_of(*u.op, m);
    AsmOptions ob = o;
    ob.kernel.clear();  // --kernel picks A's function only
    const std::vector<const AsmFunction*> sa = select(fa, t, o), sb = select(fb, u, ob);
    for (size_t i = 0; i < std::max(sa.size(), sb.size()); ++i) {
      const AsmFunction* a = sa[std::min(i, sa.size() - 1)];
      const AsmFunction* b = sb[std::min(i, sb.size() - 1)];
      print_pair(os, listing_of(*a, m, o), listing_of(*b, m, o), kind, o);
    }
  } else {
    const std::vector<AsmFunction> fns = module_of(*t.op, m);
    for (const AsmFunction* f : select(fns, t, o))
      print_one(os, listing_of(*f, m, o), kind, o.mix_only);
  }
  std::cout << os.str();
  return 0;
}

}  // namespace lab::app
