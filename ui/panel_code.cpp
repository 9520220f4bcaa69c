// Code: a kernel's PTX or SASS, its precise and fast builds (or any A and B) side by side with
// the differing lines marked, and the instruction mix of each (kernels/core/asm/listing.h).
#include "panel_code.h"

#include <algorithm>
#include <cstring>

#include "app_state.h"
#include "device.h"
#include "registry.h"
#include "widgets.h"

namespace lab::ui {

namespace {

// An item the view can show: a launch of the last frame ("L<n>"), a pipeline stage ("S<n>",
// its variant's kernel guessed by name) or the live kernel ("live").
struct Item {
  std::string key, label;
};

std::vector<Item> items_of(const GuiApp& app) {
  std::vector<Item> out;
  std::vector<std::string> seen;
  for (size_t n = 0; n < app.view.launches.size(); ++n) {
    const LaunchRecord& r = app.view.launches[n];
    if (!r.func || r.kernel == "user_kernel") continue;  // a library call; the live kernel below
    if (std::find(seen.begin(), seen.end(), r.kernel) != seen.end()) continue;
    seen.push_back(r.kernel);
    out.push_back({"L" + std::to_string(n), "launch: " + r.kernel});
  }
  const auto& stages = app.ui.pipeline.stages;
  for (size_t s = 0; s < stages.size(); ++s)
    out.push_back(
        {"S" + std::to_string(s),
         "stage: " + stages[s].op + (stages[s].variant.empty() ? "" : "/") + stages[s].variant});
  if (app.live.last.ok) out.push_back({"live", "live kernel (" + app.live.last.lowered_name + ")"});
  return out;
}

std::string other_math(std::string name, MathMode to) {
  const char* from = to == MathMode::Fast ? "3ops7precise" : "3ops4fast";
  const char* into = to == MathMode::Fast ? "3ops4fast" : "3ops7precise";
  const size_t p = name.find(from);
  if (p != std::string::npos) name.replace(p, std::strlen(from), into);
  return name;
}

const std::vector<AsmFunction>& module(CodeViewState& st, const std::string& op, MathMode m) {
  const std::string key = op + "/" + math_name(m);
  auto it = st.modules.find(key);
  if (it == st.modules.end()) {
    const char* ptx = embedded_ptx(op, m);
    it = st.modules.emplace(key, ptx ? split_ptx(ptx) : std::vector<AsmFunction>{}).first;
  }
  return it->second;
}

// The embedded function of `mangled` (any op), or null.
const AsmFunction* embedded_function(CodeViewState& st, const std::string& mangled, MathMode m) {
  for (size_t i = 0; i < kEmbeddedPtxCount; ++i) {
    if (std::strcmp(kEmbeddedPtx[i].math, math_name(m)) != 0) continue;
    for (const AsmFunction& f : module(st, kEmbeddedPtx[i].op, m))
      if (f.name == mangled) return &f;
  }
  return nullptr;
}

CodeSide sass_side(CodeViewState& st, const std::string& mangled, MathMode m) {
  CodeSide s;
  s.title = demangle(mangled);
  auto it = st.sass_runs.find(mangled);
  if (it == st.sass_runs.end())  // cuobjdump takes a moment: off the UI thread
    it =
        st.sass_runs
            .emplace(
                mangled,
                std::async(std::launch::async, [mangled] { return builtin_sass(mangled); }).share())
            .first;
  if (it->second.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
    s.pending = true;
    s.message = "running cuobjdump...";
    return s;
  }
  const SassResult& r = it->second.get();
  if (!r.ok) {
    s.message = r.message;
    return s;
  }
  const DeviceInfo& d = device_info();
  const AsmFunction* f = pick_arch(r.functions, d.present ? d.major * 10 + d.minor : 0);
  s.build = "SASS sm_" + std::to_string(f->arch) + " " + math_name(m);
  s.lines = f->lines;
  return s;
}

// The side for a built-in kernel by its mangled name in math pass `m`.
CodeSide builtin_side(CodeViewState& st, const std::string& mangled_any, MathMode m, bool sass) {
  const std::string mangled = other_math(mangled_any, m);
  if (sass) return sass_side(st, mangled, m);
  CodeSide s;
  s.title = demangle(mangled);
  if (!kPtxEmbedded) {
    s.message = ptx_missing_reason("");
    return s;
  }
  const AsmFunction* f = embedded_function(st, mangled, m);
  if (!f) {
    s.message = "no embedded PTX of " + s.title;
    return s;
  }
  s.build = std::string("PTX compute_87 ") + math_name(m);
  s.lines = f->lines;
  return s;
}

CodeSide live_side(const LiveBuild& b, bool sass) {
  CodeSide s;
  s.title = demangle(b.lowered_name) + " (live)";
  const char* math = b.options.fast_math ? "fast" : "precise";
  if (sass) {
    // nvdisasm on a small cubin is quick; done here, once per build (the caller caches).
    const SassResult r = cubin_sass(b.cubin);
    if (!r.ok) {
      s.message = r.message;
      return s;
    }
    const AsmFunction* f = &r.functions.front();
    for (const auto& fn : r.functions)
      if (fn.name == b.lowered_name) f = &fn;
    s.build = "SASS sm_" + std::to_string(b.arch) + " " + math;
    s.lines = f->lines;
    return s;
  }
  const std::vector<AsmFunction> fns = split_ptx(b.ptx);
  const AsmFunction* f = find_function(fns, b.lowered_name);
  if (!f) {
    s.message = "NVRTC's PTX has no " + b.lowered_name;
    return s;
  }
  s.build = "PTX compute_" + std::to_string(b.arch) + " " + math;
  s.lines = f->lines;
  return s;
}

// The mangled name of an item's kernel; empty (and `why`) when there is none.
std::string mangled_of(GuiApp& app, const std::string& key, std::string* why) {
  CodeViewState& st = app.code;
  if (key.size() > 1 && key[0] == 'L') {
    const size_t n = size_t(std::stoul(key.substr(1)));
    if (n >= app.view.launches.size()) return "";
    const LaunchRecord& r = app.view.launches[n];
    auto it = st.mangled.find(r.func);
    if (it == st.mangled.end()) it = st.mangled.emplace(r.func, kernel_mangled_name(r.func)).first;
    if (!it->second.empty()) return it->second;
    // No name from the runtime (older CUDA): the launch's name, in its stage's op.
    const auto& stages = app.ui.pipeline.stages;
    if (r.stage < stages.size()) {
      const std::vector<AsmFunction>& fns = module(st, stages[r.stage].op, stages[r.stage].math);
      if (const AsmFunction* f = find_function(fns, r.kernel)) return f->name;
    }
    *why = "no kernel of the embedded PTX matches the launch " + r.kernel;
    return "";
  }
  if (key.size() > 1 && key[0] == 'S') {
    const size_t s = size_t(std::stoul(key.substr(1)));
    const auto& stages = app.ui.pipeline.stages;
    if (s >= stages.size()) return "";
    const StageConfig& sc = stages[s];
    const Op& op = find_op(sc.op);
    const int v = sc.variant.empty() ? int(op.default_variant()) : op.find_variant(sc.variant);
    if (v < 0) return "";
    const VariantDef& vd = op.def.variants[size_t(v)];
    const Block block = sc.block ? *sc.block : vd.default_block;
    const auto fns =
        variant_functions(module(st, sc.op, MathMode::Precise), sc.op, vd.name, &block);
    if (fns.empty()) {
      *why = sc.op + "/" + vd.name +
             ": no kernel of ours is named after this variant (a library call?); run a frame "
             "and pick one of its launches";
      return "";
    }
    return fns.front()->name;
  }
  return "";
}

CodeSide resolve(GuiApp& app, const std::string& key, MathMode m) {
  CodeViewState& st = app.code;
  if (key == "live") {
    const LiveBuild& b = app.live.last;
    CodeSide s = live_side(b, st.sass);
    if (b.options.fast_math != (m == MathMode::Fast) && !st.ab)
      s.message = std::string("the live kernel was compiled ") +
                  (b.options.fast_math ? "fast" : "precise") +
                  "; compile it with the other setting to see that build";
    return s;
  }
  std::string why;
  const std::string mangled = mangled_of(app, key, &why);
  if (mangled.empty()) {
    CodeSide s;
    s.message = why.empty() ? "nothing selected" : why;
    return s;
  }
  return builtin_side(st, mangled, m, st.sass);
}

bool combo(const char* label, const std::vector<Item>& items, std::string& key) {
  std::string preview = "(none)";
  for (const Item& i : items)
    if (i.key == key) preview = i.label;
  bool changed = false;
  if (ImGui::BeginCombo(label, preview.c_str())) {
    for (const Item& i : items) {
      if (ImGui::Selectable(i.label.c_str(), i.key == key)) key = i.key, changed = true;
    }
    ImGui::EndCombo();
  }
  return changed;
}

void draw_mix(const CodeViewState& st, bool two) {
  if (!ImGui::BeginTable(
          "mix", two ? 3 : 2,
          ImGuiTableFlags_RowBg | ImGuiTableFlags_Borders | ImGuiTableFlags_SizingFixedFit))
    return;
  ImGui::TableSetupColumn("instruction mix");
  ImGui::TableSetupColumn(two ? "A" : "count");
  if (two) ImGui::TableSetupColumn("B");
  ImGui::TableHeadersRow();
  for (size_t c = 0; c < kMixClasses; ++c) {
    if (st.mix_a.count[c] == 0 && (!two || st.mix_b.count[c] == 0)) continue;
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(mix_name(MixClass(c)));
    tip(mix_help(MixClass(c)));
    ImGui::TableNextColumn();
    ImGui::Text("%d", st.mix_a.count[c]);
    if (two) {
      ImGui::TableNextColumn();
      if (st.mix_b.count[c] != st.mix_a.count[c])
        ImGui::TextColored(ImVec4(1, 0.8f, 0.3f, 1), "%d", st.mix_b.count[c]);
      else
        ImGui::Text("%d", st.mix_b.count[c]);
    }
  }
  ImGui::TableNextRow();
  ImGui::TableNextColumn();
  ImGui::TextUnformatted("total");
  tip("every instruction line counted (labels, directives and braces are not)");
  ImGui::TableNextColumn();
  ImGui::Text("%d", st.mix_a.total);
  if (two) {
    ImGui::TableNextColumn();
    ImGui::Text("%d", st.mix_b.total);
  }
  ImGui::EndTable();
}

}  // namespace

void draw_code_panel(GuiApp& app) {
  ImGui::SetNextWindowBgAlpha(1.0f);  // it opens over the viewport: nothing shows through
  if (!ImGui::Begin("Code", &app.ui.panels["Code"])) {
    ImGui::End();
    return;
  }
  CodeViewState& st = app.code;
  const std::vector<Item> items = items_of(app);
  if (items.empty()) {
    ImGui::TextWrapped("No kernel to show yet.");
    ImGui::End();
    return;
  }
  auto known = [&](const std::string& k) {
    return std::any_of(items.begin(), items.end(), [&](const Item& i) { return i.key == k; });
  };
  if (!known(st.a_key)) st.a_key = items.front().key;
  if (!known(st.b_key)) st.b_key = items.size() > 1 ? items[1].key : items.front().key;

  ImGui::SetNextItemWidth(ImGui::GetContentRegionAvail().x * 0.45f);
  combo("A", items, st.a_key);
  ImGui::SameLine();
  int kind = st.sass ? 1 : 0;
  ImGui::RadioButton("PTX", &kind, 0);
  tip("the compute_87 PTX the build embedded (both math passes); a live kernel's from NVRTC");
  ImGui::SameLine();
  ImGui::RadioButton("SASS", &kind, 1);
  tip("the machine code: cuobjdump on this binary (built-in kernels) or nvdisasm on the live "
      "kernel's cubin; needs the CUDA toolkit on this machine");
  st.sass = kind == 1;
  ImGui::SameLine();
  ImGui::Checkbox("A vs B", &st.ab);
  tip("off: A's precise and fast builds side by side; on: A against any B");
  const char* maths[] = {"precise", "fast"};
  if (st.ab) {
    ImGui::SetNextItemWidth(ImGui::GetContentRegionAvail().x * 0.45f);
    combo("B", items, st.b_key);
    ImGui::SameLine();
    ImGui::SetNextItemWidth(90);
    ImGui::Combo("A math", &st.a_math, maths, 2);
    ImGui::SameLine();
    ImGui::SetNextItemWidth(90);
    ImGui::Combo("B math", &st.b_math, maths, 2);
  }
  ImGui::SameLine();
  ImGui::Checkbox("differences only", &st.only_diff);

  // Resolve; the diff is redone only when what is shown changes (or SASS arrives).
  const MathMode ma = st.ab ? MathMode(st.a_math) : MathMode::Precise;
  const MathMode mb = st.ab ? MathMode(st.b_math) : MathMode::Fast;
  const std::string want = st.a_key + "|" + st.b_key + "|" + std::to_string(st.sass) +
                           std::to_string(st.ab) + std::to_string(int(ma)) +
                           std::to_string(int(mb)) + "|" + app.live.last.lowered_name +
                           std::to_string(app.live.last.compile_ms);
  const bool fresh = want != st.shown;
  if (fresh || st.a.pending || st.b.pending) {
    // Only a side whose SASS is still being disassembled is asked again.
    if (fresh || st.a.pending) st.a = resolve(app, st.a_key, ma);
    if (fresh || st.b.pending) st.b = resolve(app, st.ab ? st.b_key : st.a_key, mb);
    st.rows = diff_lines(st.a.lines, st.b.lines);
    st.diff_rows.clear();
    for (size_t i = 0; i < st.rows.size(); ++i)
      if (st.rows[i].op != DiffOp::Same) st.diff_rows.push_back(int(i));
    const AsmKind kind_a = st.sass ? AsmKind::Sass : AsmKind::Ptx;
    st.mix_a = count_mix(st.a.lines, kind_a);
    st.mix_b = count_mix(st.b.lines, kind_a);
    st.shown = want;
  }

  ImGui::Text("A: %s  [%s]", st.a.title.c_str(), st.a.build.c_str());
  ImGui::Text("B: %s  [%s]", st.b.title.c_str(), st.b.build.c_str());
  if (!st.a.message.empty()) ImGui::TextWrapped("A: %s", st.a.message.c_str());
  if (!st.b.message.empty()) ImGui::TextWrapped("B: %s", st.b.message.c_str());
  ImGui::Text("%zu of %zu lines differ", st.diff_rows.size(), st.rows.size());
  tip("yellow: changed, red: only in A, green: only in B. Lines compare with register and label "
      "numbers ignored (the compiler renumbers them at every change) and the math namespace in "
      "names ignored");

  const float mix_w = 230;
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  if (ImGui::BeginTable("code", 2,
                        ImGuiTableFlags_ScrollY | ImGuiTableFlags_ScrollX |
                            ImGuiTableFlags_BordersInnerV | ImGuiTableFlags_Resizable,
                        ImVec2(std::max(100.0f, avail.x - mix_w - 8), avail.y))) {
    ImGui::TableSetupScrollFreeze(0, 1);
    ImGui::TableSetupColumn("A", ImGuiTableColumnFlags_WidthStretch);
    ImGui::TableSetupColumn("B", ImGuiTableColumnFlags_WidthStretch);
    ImGui::TableHeadersRow();
    const int count = st.only_diff ? int(st.diff_rows.size()) : int(st.rows.size());
    ImGuiListClipper clip;
    clip.Begin(count);
    while (clip.Step()) {
      for (int i = clip.DisplayStart; i < clip.DisplayEnd; ++i) {
        const DiffRow& r = st.rows[size_t(st.only_diff ? st.diff_rows[size_t(i)] : i)];
        ImGui::TableNextRow();
        const ImU32 bg = r.op == DiffOp::Changed   ? IM_COL32(110, 90, 20, 110)
                         : r.op == DiffOp::Removed ? IM_COL32(120, 30, 30, 110)
                         : r.op == DiffOp::Added   ? IM_COL32(30, 110, 40, 110)
                                                   : 0;
        ImGui::TableNextColumn();
        if (bg && r.a >= 0) ImGui::TableSetBgColor(ImGuiTableBgTarget_CellBg, bg);
        if (r.a >= 0) ImGui::TextUnformatted(st.a.lines[size_t(r.a)].c_str());
        ImGui::TableNextColumn();
        if (bg && r.b >= 0) ImGui::TableSetBgColor(ImGuiTableBgTarget_CellBg, bg);
        if (r.b >= 0) ImGui::TextUnformatted(st.b.lines[size_t(r.b)].c_str());
      }
    }
    ImGui::EndTable();
  }
  ImGui::SameLine();
  ImGui::BeginChild("mixes", ImVec2(mix_w, avail.y));
  draw_mix(st, true);
  ImGui::EndChild();
  ImGui::End();
}

}  // namespace lab::ui
