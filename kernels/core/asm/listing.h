// PTX and SASS listings of the lab's kernels, for the "PTX and SASS, side by side" view.
//
// PTX is always at hand: the built-in kernels' compute_87 PTX of both math passes is embedded at
// build time (the sm_87 resource step keeps it, cmake/sm87_resources.cmake: only our lab::
// functions, not CUB's), and a live kernel has NVRTC's. SASS needs the toolkit's cuobjdump (on
// this binary's own fatbin) or nvdisasm (on a live kernel's cubin), run at run time where they
// are found; where they are not, the result says so and where it looked.
//
// Engine layer: no GL, ImGui or OpenCV.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "op.h"
#include "toolkit.h"

namespace lab {

// ---- embedded PTX (generated: build/generated/ptx_listings.cpp) ----------------------------
struct EmbeddedPtx {
  const char* op;    // the op's file stem, which is its name in ops.def ("branch")
  const char* math;  // "precise" or "fast"
  const char* text;  // the filtered PTX module
};
extern const bool kPtxEmbedded;  // false when built with LAB_SM87_TABLE=OFF
extern const EmbeddedPtx kEmbeddedPtx[];
extern const size_t kEmbeddedPtxCount;

// The embedded PTX module of an op in one math pass; null when there is none (say why:
// ptx_missing_reason()).
const char* embedded_ptx(const std::string& op, MathMode m);
std::string ptx_missing_reason(const std::string& op);

// ---- functions of a listing ------------------------------------------------------------------
enum class AsmKind : uint8_t { Ptx, Sass };

struct AsmFunction {
  std::string name;                // mangled
  bool entry = false;              // a kernel (.entry; every SASS function cuobjdump names)
  int arch = 0;                    // SASS: the sm_XX it was built for (0: unknown); PTX: 0
  std::vector<std::string> lines;  // PTX: as written; SASS: one instruction or label per line
};

// A PTX module's .entry and .func definitions, in order (declarations are skipped).
std::vector<AsmFunction> split_ptx(const std::string& module);
// cuobjdump -sass or nvdisasm output: its functions, each instruction without its address and
// encoding ("FFMA R3, R2, R5, R4 ;").
std::vector<AsmFunction> split_sass(const std::string& dump);

// "lab::ops::precise::branch_v1_divergent_kernel(float const*, float*, int, int)"; the input
// unchanged when it does not demangle.
std::string demangle(const std::string& mangled);

// A kernel of lab::ops::<math>, parsed from its mangled name: its identifier
// ("blur_v3_smem_tile_kernel") and integer/bool template arguments ({32, 8}). ok = false for
// any other name.
struct LabKernelName {
  bool ok = false;
  std::string ident;
  std::vector<long long> targs;
};
LabKernelName parse_lab_kernel(const std::string& mangled);

// The function named `key`: a mangled name, or a launch name as the lab records it
// ("branch_v1_divergent", "blur_v3_smem_tile<32,8>"). A launch name is matched to an entry's
// identifier: "<name>_kernel" or "<name>" with the same template arguments; else the entry that
// shares most words with it ("sobel_v1_dx" -> sobel_v1_unfused_kernel), needing the op's word and
// the same "vN". Null when nothing matches.
const AsmFunction* find_function(const std::vector<AsmFunction>& fns, const std::string& key);

// The entries that likely belong to a variant of `op` (a guess from names, for when no launch
// was recorded): those whose identifier has the variant's "vN" word, else those sharing another
// word with it; with a block, an instance templated on exactly that block is preferred.
std::vector<const AsmFunction*> variant_functions(const std::vector<AsmFunction>& fns,
                                                  const std::string& op, const std::string& variant,
                                                  const Block* block = nullptr);

// ---- instruction mix -------------------------------------------------------------------------
enum class MixClass : uint8_t {
  Fp32,
  Fp64,
  CvtF64,  // float <-> double conversions
  Mufu,    // special-function unit: approximate transcendentals, reciprocal, square root
  LdGlobal,
  StGlobal,
  LdShared,
  StShared,
  LdLocal,
  StLocal,
  LdConst,  // constant bank and kernel parameters
  LdStGeneric,
  Atomic,
  Integer,
  Control,
  Other,
  Count
};
constexpr size_t kMixClasses = size_t(MixClass::Count);
const char* mix_name(MixClass c);
// What the class is and how it is counted, for PTX and SASS (a tooltip).
const char* mix_help(MixClass c);

// The class of one listing line; false for a line that is no instruction (a label, a directive,
// a brace, a comment).
bool classify_instruction(const std::string& line, AsmKind kind, MixClass* out);

struct InstructionMix {
  int count[kMixClasses] = {};
  int total = 0;
  int operator[](MixClass c) const { return count[size_t(c)]; }
};
InstructionMix count_mix(const std::vector<std::string>& lines, AsmKind kind);

// ---- side-by-side diff -----------------------------------------------------------------------
enum class DiffOp : uint8_t { Same, Changed, Removed, Added };
struct DiffRow {
  DiffOp op = DiffOp::Same;
  int a = -1, b = -1;  // line indices on each side; -1: none on that side
};
// A line diff (longest common subsequence after the common head and tail), as side-by-side rows:
// a run of removed lines next to a run of added ones pairs up as Changed rows. Lines compare
// with surrounding blanks, register and label numbers ignored (%r12 and %r40, R3 and R7 compare
// equal: the compiler renumbers them at every change) and the math namespace in mangled names
// (7precise / 4fast) treated as equal, so a precise and a fast build differ where their code does.
std::vector<DiffRow> diff_lines(const std::vector<std::string>& a,
                                const std::vector<std::string>& b);
// A side-by-side text rendering: "  " same, "! " changed, "- " only on the left, "+ " only on
// the right; each side cut or padded to `width` characters.
std::string format_side_by_side(const std::vector<std::string>& a,
                                const std::vector<std::string>& b, const std::vector<DiffRow>& rows,
                                int width);

// ---- SASS at run time ------------------------------------------------------------------------
struct SassResult {
  bool ok = false;
  std::vector<AsmFunction> functions;  // of every architecture in the binary
  std::string message;                 // why there is no SASS, in a plain sentence
};
// SASS of a built-in kernel (mangled name) from this executable's own fatbin, through
// `cuobjdump -sass -fun`; cached per name. Never throws: a missing tool, a failure, a timeout or
// output it cannot read is a message.
SassResult builtin_sass(const std::string& mangled, double timeout_s = 20);
// SASS of a live kernel's cubin, through nvdisasm on a temporary file.
SassResult cubin_sass(const std::vector<char>& cubin, double timeout_s = 20);

// The function for architecture `arch` (say 90), else the first; null when empty.
const AsmFunction* pick_arch(const std::vector<AsmFunction>& fns, int arch);

// A kernel function pointer's mangled name (cudaFuncGetName: needs the driver); empty when it
// cannot be had.
std::string kernel_mangled_name(const void* func);

}  // namespace lab
