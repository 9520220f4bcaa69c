// Viewport: a slot (input, any stage output, its CPU reference, or their difference) through a
// colormap, with zoom, pan, a pixel probe and the keypoints drawn over it. The output texture and
// the keypoint buffer are written when a job's result arrives (display_result): by CUDA-GL
// interop when the GL context is on the GPU, else from host copies.
#include <epoxy/gl.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cmath>

#include "app_state.h"
#include "probe.h"
#include "shaders.h"
#include "widgets.h"

namespace lab::ui {

namespace {

const char* const kViews[] = {"output", "CPU reference", "|output - reference|"};

// The reference image of a slot from the last comparison (and the GPU output it was compared
// with), if there is one.
const HostImage* reference_of(const GuiApp& app, const std::string& slot,
                              const HostImage** output = nullptr) {
  for (const StageDiff& d : app.ui.diff) {
    const Op& op = find_op(d.stage);
    // The slots of the stage's configured variant (the fused front's diff holds nms and blur).
    const std::vector<std::string>* outs = &op.def.outputs;
    for (const StageConfig& s : app.ui.pipeline.stages)
      if (s.op == d.stage && !s.custom) {
        const int v = s.variant.empty() ? int(op.default_variant()) : op.find_variant(s.variant);
        if (v >= 0) outs = &variant_outputs(op, size_t(v));
      }
    for (size_t k = 0; k < outs->size(); ++k)
      if ((*outs)[k] == slot && k < d.reference.size()) {
        if (output) *output = k < d.output.size() ? &d.output[k] : nullptr;
        return &d.reference[k];
      }
  }
  return nullptr;
}

// The output tile each block of a playground computed, from the grid of the launch that ran:
// its size and the grid, when the shown slot is the playground's output and the kernel is ours.
struct Tiles {
  int w = 0, h = 0, gx = 0, gy = 0, threads = 0;
  bool matmul = false;
  std::string why;  // when there are none
};

Tiles tiles_of(const GuiApp& app, const std::string& slot) {
  Tiles t;
  const Op* op = playground_of(app.ui.pipeline);
  if (!op || !app.view.lab) return t;
  if (std::find(op->def.outputs.begin(), op->def.outputs.end(), slot) == op->def.outputs.end())
    return t;
  const int v = op->find_variant(app.view.lab_variant);
  const LaunchRecord* rec = nullptr;
  for (const LaunchRecord& l : app.view.launches)
    if (l.func && !rec) rec = &l;
  if (v < 0 || !rec) {
    t.why = "a library call: its own tiles, not ours to show";
    return t;
  }
  const ImageDesc& d = app.view.shown_desc;
  const bool swap = op->def.variants[size_t(v)].grid_x_over_rows;
  t.gx = int(swap ? rec->grid.y : rec->grid.x), t.gy = int(swap ? rec->grid.x : rec->grid.y);
  if (t.gx < 1 || t.gy < 1) return t;
  t.w = (d.width + t.gx - 1) / t.gx, t.h = (d.height + t.gy - 1) / t.gy;
  t.threads = rec->threads();
  t.matmul = op->def.name == "matmul";
  return t;
}

// Pinned A's output of a slot from the last A/B compare, if the slot is one of its outputs.
const HostImage* pinned_output(const GuiApp& app, const std::string& slot) {
  const auto& ab = app.ui.ab.result;
  if (!ab) return nullptr;
  for (size_t k = 0; k < ab->output_names.size() && k < ab->a.outputs.size(); ++k)
    if (ab->output_names[k] == slot) return &ab->a.outputs[k];
  return nullptr;
}

GLuint compile(GLenum type, const char* src, std::string& log) {
  const GLuint sh = glCreateShader(type);
  glShaderSource(sh, 1, &src, nullptr);
  glCompileShader(sh);
  GLint ok = 0;
  glGetShaderiv(sh, GL_COMPILE_STATUS, &ok);
  if (!ok) {
    char buf[1024];
    glGetShaderInfoLog(sh, sizeof buf, nullptr, buf);
    log += buf;
  }
  return sh;
}

// Builds the colormap program with Dear ImGui's attribute locations, read from its own program
// (bound when the callback runs), so the backend's vertex setup feeds ours unchanged.
// Compiles and links a program; 0 (with the log) when the driver refuses it. `attribs_from`:
// a program whose attribute locations the new one takes (Dear ImGui's, so that its vertex setup
// feeds ours unchanged), or 0.
GLuint link_program(const char* vert, const char* frag, GLuint attribs_from, std::string& log) {
  const GLuint vs = compile(GL_VERTEX_SHADER, vert, log);
  const GLuint fs = compile(GL_FRAGMENT_SHADER, frag, log);
  const GLuint p = glCreateProgram();
  glAttachShader(p, vs);
  glAttachShader(p, fs);
  if (attribs_from)
    for (const char* name : {"Position", "UV", "Color"}) {
      const GLint loc = glGetAttribLocation(attribs_from, name);
      if (loc >= 0) glBindAttribLocation(p, GLuint(loc), name);
    }
  glLinkProgram(p);
  glDeleteShader(vs);
  glDeleteShader(fs);
  GLint ok = 0;
  glGetProgramiv(p, GL_LINK_STATUS, &ok);
  if (!ok || !log.empty()) {
    glDeleteProgram(p);
    return 0;
  }
  return p;
}

// Builds the colormap program with Dear ImGui's attribute locations, read from its own program
// (bound when the callback runs).
void build_colormap_program(GuiApp& app, GLuint imgui_program) {
  auto& g = app.colormap_gl;
  std::string log;
  const GLuint p = link_program(kColormapVert, kColormapFrag, imgui_program, log);
  if (!p) {
    g.failed = true;
    app.ui.message = "colormap shader unavailable (" + log + "): colormapping on the CPU";
    return;
  }
  g.program = p;
  g.proj = glGetUniformLocation(p, "ProjMtx");
  g.lo = glGetUniformLocation(p, "Lo");
  g.hi = glGetUniformLocation(p, "Hi");
  g.map = glGetUniformLocation(p, "Map");
  g.value = glGetUniformLocation(p, "Value");
}

// A draw-list callback: switches the image quad to the colormap program with ImGui's
// projection. ImDrawCallback_ResetRenderState, queued after the image, switches back.
void use_colormap(const ImDrawList*, const ImDrawCmd* cmd) {
  GuiApp& app = *static_cast<GuiApp*>(cmd->UserCallbackData);
  GLint imgui_program = 0;
  glGetIntegerv(GL_CURRENT_PROGRAM, &imgui_program);
  if (!app.colormap_gl.program && !app.colormap_gl.failed)
    build_colormap_program(app, GLuint(imgui_program));
  const auto& g = app.colormap_gl;
  if (!g.program) return;
  float proj[16];
  glGetUniformfv(GLuint(imgui_program), glGetUniformLocation(GLuint(imgui_program), "ProjMtx"),
                 proj);
  glUseProgram(g.program);
  glUniformMatrix4fv(g.proj, 1, GL_FALSE, proj);
  glUniform1f(g.lo, app.ui.lo);
  glUniform1f(g.hi, app.ui.hi);
  glUniform1i(g.map, int(app.ui.cmap));
  glUniform1i(g.value, 0);
}

struct TextureSlot {
  unsigned* tex;
  int *w, *h;
  bool* is_float;
};

// (Re)creates `t` for a w x h image; a new size or format gets a new texture name, so that an
// interop registration of the old one is never used on re-specified storage.
void ensure_texture(TextureSlot t, int w, int h, bool as_float) {
  if (*t.tex && *t.w == w && *t.h == h && *t.is_float == as_float) {
    glBindTexture(GL_TEXTURE_2D, *t.tex);
    return;
  }
  if (*t.tex) glDeleteTextures(1, t.tex);
  glGenTextures(1, t.tex);
  glBindTexture(GL_TEXTURE_2D, *t.tex);
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MIN_FILTER, GL_NEAREST);  // floats: no filtering
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MAG_FILTER, GL_NEAREST);  // pixels stay pixels
  glTexImage2D(GL_TEXTURE_2D, 0, as_float ? GL_R32F : GL_RGBA8, w, h, 0,
               as_float ? GL_RED : GL_RGBA, as_float ? GL_FLOAT : GL_UNSIGNED_BYTE, nullptr);
  *t.w = w, *t.h = h, *t.is_float = as_float;
}

// A host image into `t`: float planes as they are (the shader colormaps them), 8-bit images, or
// anything when the shader is unavailable, as RGBA8 converted on the CPU.
void upload(GuiApp& app, TextureSlot t, const HostImage& host, Range r) {
  const ImageRef img = display_view(host.ref());
  const ImageDesc& d = img.desc;
  const bool as_float = d.type == PixelType::F32 && d.channels == 1 && !app.colormap_gl.failed;
  std::vector<uint32_t> rgba;
  if (!as_float) rgba = to_rgba(img, r, app.ui.cmap);
  ensure_texture(t, d.width, d.height, as_float);
  glPixelStorei(GL_UNPACK_ALIGNMENT, 4);
  glTexSubImage2D(GL_TEXTURE_2D, 0, 0, 0, d.width, d.height, as_float ? GL_RED : GL_RGBA,
                  as_float ? GL_FLOAT : GL_UNSIGNED_BYTE,
                  as_float ? static_cast<const void*>(img.data) : rgba.data());
}

Range view_range(GuiApp& app, Range data) {
  if (!app.ui.auto_range) return {app.ui.lo, app.ui.hi};
  if (app.ui.cmap == Colormap::Diverging) {
    const float m = std::max(std::abs(data.lo), std::abs(data.hi));
    data = m > 0 ? Range{-m, m} : Range{-1, 1};
  }
  app.ui.lo = data.lo, app.ui.hi = data.hi;
  return data;
}

// ---- the keypoint overlay: GL points from the buffer CUDA wrote ----------------------------

const char* const kPointsVert = R"(#version 330 core
layout(location = 0) in vec3 Kp;  // x, y, score (score 0: a pad row)
uniform mat4 ProjMtx;
uniform vec2 Origin;  // screen position of pixel (0, 0)'s corner
uniform float Scale;  // screen pixels per image pixel
uniform float Hi;     // the highest score: colours span three decades below it
out float T;
void main() {
  if (Kp.z <= 0.0) { gl_Position = vec4(2.0, 2.0, 2.0, 1.0); T = 0.0; return; }  // clipped
  vec2 p = Origin + (Kp.xy + 0.5) * Scale;
  gl_Position = ProjMtx * vec4(p, 0.0, 1.0);
  gl_PointSize = 7.0;
  T = clamp((log(Kp.z) - log(Hi) + 6.9078) / 6.9078, 0.0, 1.0);
}
)";
const char* const kPointsFrag = R"(#version 330 core
in float T;
out vec4 Out_Color;
void main() {
  vec2 d = gl_PointCoord - vec2(0.5);
  float r = dot(d, d);
  if (r > 0.25) discard;  // round points with a dark rim
  vec3 lo = vec3(0.2, 0.4, 1.0), mid = vec3(0.1, 1.0, 0.3), hi = vec3(1.0, 0.25, 0.1);
  vec3 c = T < 0.5 ? mix(lo, mid, T * 2.0) : mix(mid, hi, T * 2.0 - 1.0);
  Out_Color = vec4(r > 0.14 ? c * 0.25 : c, 1.0);
}
)";

struct OverlayArgs {
  GuiApp* app;
  float ox, oy, scale;
};
OverlayArgs g_overlay;  // the one viewport's draw-callback arguments, set each frame

void draw_keypoints(const ImDrawList*, const ImDrawCmd*) {
  GuiApp& app = *g_overlay.app;
  auto& g = app.overlay_gl;
  GLint imgui_program = 0;
  glGetIntegerv(GL_CURRENT_PROGRAM, &imgui_program);
  if (!g.program && !g.failed) {
    std::string log;
    const GLuint p = link_program(kPointsVert, kPointsFrag, 0, log);
    if (!p) {
      g.failed = true;
      app.ui.message = "keypoint overlay shader unavailable: " + log;
      return;
    }
    g.program = p;
    g.proj = glGetUniformLocation(p, "ProjMtx");
    g.origin = glGetUniformLocation(p, "Origin");
    g.scale = glGetUniformLocation(p, "Scale");
    g.hi = glGetUniformLocation(p, "Hi");
  }
  if (!g.program || !app.kp_vao) return;
  float proj[16];
  glGetUniformfv(GLuint(imgui_program), glGetUniformLocation(GLuint(imgui_program), "ProjMtx"),
                 proj);
  glUseProgram(g.program);
  glUniformMatrix4fv(g.proj, 1, GL_FALSE, proj);
  glUniform2f(g.origin, g_overlay.ox, g_overlay.oy);
  glUniform1f(g.scale, g_overlay.scale);
  glUniform1f(g.hi, std::max(app.view.keypoint_max, 1e-30f));
  glEnable(GL_PROGRAM_POINT_SIZE);
  glBindVertexArray(app.kp_vao);
  glDrawArrays(GL_POINTS, 0, app.view.keypoints_k);
  glDisable(GL_PROGRAM_POINT_SIZE);
}

// The keypoint buffer sized for K keypoints, with its vertex layout.
void ensure_keypoint_buffer(GuiApp& app, size_t bytes) {
  if (app.kp_vbo && app.kp_bytes >= bytes) {
    glBindBuffer(GL_ARRAY_BUFFER, app.kp_vbo);
    return;
  }
  if (app.kp_vbo) glDeleteBuffers(1, &app.kp_vbo);  // a new name: re-registered with CUDA
  if (!app.kp_vao) glGenVertexArrays(1, &app.kp_vao);
  glGenBuffers(1, &app.kp_vbo);
  glBindVertexArray(app.kp_vao);
  glBindBuffer(GL_ARRAY_BUFFER, app.kp_vbo);
  glBufferData(GL_ARRAY_BUFFER, GLsizeiptr(bytes), nullptr, GL_DYNAMIC_DRAW);
  glEnableVertexAttribArray(0);
  glVertexAttribPointer(0, 3, GL_FLOAT, GL_FALSE, 3 * sizeof(float), nullptr);
  glBindVertexArray(0);
  app.kp_bytes = bytes;
}

}  // namespace

void draw_viewport_panel(GuiApp& app) {
  if (!ImGui::Begin("Viewport")) {
    ImGui::End();
    return;
  }
  const auto& slots = app.view.slots;
  if (slots.empty()) {
    ImGui::TextUnformatted("waiting for the first frame...");
    ImGui::End();
    return;
  }
  UiState& ui = app.ui;
  ui.slot = std::min(ui.slot, int(slots.size()) - 1);
  ImGui::SetNextItemWidth(140);
  if (ImGui::BeginCombo("slot", slots[size_t(ui.slot)].name.c_str())) {
    for (size_t i = 0; i < slots.size(); ++i)
      if (ImGui::Selectable(slots[i].name.c_str(), int(i) == ui.slot)) ui.slot = int(i);
    ImGui::EndCombo();
  }
  tip("the named image to show: the input or any stage's output");
  ImGui::SameLine();
  ImGui::SetNextItemWidth(170);
  ImGui::Combo("view", &ui.view, kViews, IM_ARRAYSIZE(kViews));
  tip("the GPU output, the CPU reference of its stage, or their absolute difference (press "
      "'compare now' in the Diff panel first)");
  ImGui::SameLine();
  int cm = int(ui.cmap);
  ImGui::SetNextItemWidth(110);
  if (ImGui::Combo("colormap", &cm, "gray\0viridis\0diverging\0")) ui.cmap = Colormap(cm);
  tip("how float values become colours; NaN (an unwritten pixel) shows magenta");
  ImGui::SameLine();
  ImGui::Checkbox("auto range", &ui.auto_range);
  tip("auto: the frame's finite min..max (diverging: symmetric about 0); off: the range below");
  if (!ui.auto_range) {
    ImGui::SameLine();
    ImGui::SetNextItemWidth(160);
    ImGui::DragFloatRange2("range", &ui.lo, &ui.hi, 0.01f);
  }

  ImGui::SameLine();
  ImGui::Checkbox("keypoints", &ui.overlay);
  tip("draw the top-K keypoints over the image, coloured by score (blue: 1/1000 of the best, "
      "green, red: the best); from a GL buffer CUDA writes (interop), else uploaded from the "
      "host. Shown on slots of the NMS map's size");

  // A second row: what is drawn over the image, and what it is compared with.
  if (playground_of(app.ui.pipeline)) {
    ImGui::Checkbox("tiles", &ui.tiles);
    tip("the output tile each block computed, from the grid of the launch that ran (hover a "
        "tile: its outputs, threads and, in matmul, the rows of A and columns of B it reads)");
    ImGui::SameLine();
  }
  ImGui::SetNextItemWidth(90);
  ImGui::Combo("compare", &ui.ab.mode, "none\0wipe\0flicker\0");
  tip("show the output against another image of the same slot: wipe (drag the split line) or "
      "flicker (twice a second)");
  if (ui.ab.mode != 0) {
    ImGui::SameLine();
    ImGui::SetNextItemWidth(130);
    ImGui::Combo("against", &ui.ab.against, "CPU reference\0pinned A\0");
    tip("CPU reference: the last 'compare now' (Diff panel); pinned A: the last A/B compare's A "
        "(A/B panel), when the slot is an output of its stage");
  }

  // The engine job copies the slot chosen here for its next frame; until then the last one.
  const std::string& name = app.view.shown_name;
  const HostImage* gpu_out = nullptr;
  const HostImage* ref = reference_of(app, name, &gpu_out);
  // The output texture was written when the result arrived; the reference and difference views
  // go up from the host when what they show changes.
  bool use_ref = false;
  // Wipe or flicker: the other image in the second texture, the output in the first.
  const HostImage* other = ui.ab.mode == 0 || ui.view != 0 ? nullptr
                           : ui.ab.against == 0            ? ref
                                                           : pinned_output(app, name);
  // Both as shown: a long array folds into rows (display_view) the same way.
  if (other && display_view(other->ref()).desc != app.view.shown_desc) other = nullptr;
  if (other) {
    const std::string key = std::to_string(app.result_gen) + "/cmp" +
                            std::to_string(ui.ab.against) + "/" + std::to_string(int(ui.cmap)) +
                            "/" + std::to_string(ui.lo) + "/" + std::to_string(ui.hi) + "/" +
                            std::to_string(reinterpret_cast<uintptr_t>(other));
    if (key != app.uploaded || !app.ref_texture)
      upload(app, {&app.ref_texture, &app.ref_w, &app.ref_h, &app.ref_float}, *other,
             {ui.lo, ui.hi});
    app.uploaded = key;
  } else if (ui.ab.mode != 0 && ui.view == 0) {
    ImGui::TextUnformatted(ui.ab.against == 0
                               ? "nothing to compare with yet: press 'compare now' (Diff panel)"
                               : "nothing to compare with: no A/B compare of this slot's stage");
  }
  if (ui.view != 0 && ref &&
      (ui.view == 1 || (gpu_out && gpu_out->desc() == ref->desc() &&
                        ref->desc().type == PixelType::F32 && ref->desc().channels == 1))) {
    const std::string key = std::to_string(app.result_gen) + "/" + std::to_string(ui.view) + "/" +
                            std::to_string(int(ui.cmap)) + "/" + std::to_string(ui.auto_range);
    const HostImage shown = ui.view == 1 ? HostImage(*ref) : abs_difference(*gpu_out, *ref);
    const Range data = shown.desc().type == PixelType::F32 ? auto_range(shown.ref()) : Range{0, 1};
    const Range r = view_range(app, data);
    if (key != app.uploaded || !app.ref_texture)
      upload(app, {&app.ref_texture, &app.ref_w, &app.ref_h, &app.ref_float}, shown, r);
    app.uploaded = key;
    use_ref = true;
  } else {
    if (ui.view != 0) ImGui::TextUnformatted("no reference yet ('compare now'): the output");
    view_range(app, {app.view.shown_range.lo, app.view.shown_range.hi});
  }
  const unsigned tex = use_ref ? app.ref_texture : app.texture;
  const int tw = use_ref ? app.ref_w : app.tex_w, th = use_ref ? app.ref_h : app.tex_h;
  const bool tfloat = use_ref ? app.ref_float : app.tex_float;
  if (!tex || tw <= 0 || th <= 0) {
    ImGui::TextUnformatted("waiting for the first frame...");
    ImGui::End();
    return;
  }
  ImGui::Text("%s  %s  range [%.4g, %.4g]  zoom %.2fx", name.c_str(),
              app.view.shown_desc.str().c_str(), ui.lo, ui.hi, ui.zoom);
  tip("the slot's size and type; the value range the colormap spans (with auto range: min..max "
      "of this frame's finite values, computed on the GPU when it is there); the zoom (mouse "
      "wheel) over the fit-to-panel size. Drag to pan.");

  // The image, zoomed with the wheel and panned by dragging; fit to the panel at zoom 1.
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  const float fit = std::min(avail.x / float(tw), avail.y / float(th));
  const float scale = fit * ui.zoom;
  const ImVec2 size(float(tw) * scale, float(th) * scale);
  ImGui::BeginChild("image", avail, false,
                    ImGuiWindowFlags_NoScrollbar | ImGuiWindowFlags_NoScrollWithMouse);
  if (ui.focus_x >= 0) {  // centre the requested pixel (the diff panel's first bad value)
    ui.pan.x = avail.x / 2 - (float(ui.focus_x) + 0.5f) * scale;
    ui.pan.y = avail.y / 2 - (float(ui.focus_y) + 0.5f) * scale;
    ui.focus_x = ui.focus_y = -1;
  }
  const ImVec2 child_origin = ImGui::GetCursorScreenPos();
  const ImVec2 origin(child_origin.x + ui.pan.x, child_origin.y + ui.pan.y);
  ImGui::SetCursorScreenPos(origin);
  ImDrawList* dl = ImGui::GetWindowDrawList();
  if (tfloat) dl->AddCallback(use_colormap, &app);
  ImGui::Image(reinterpret_cast<ImTextureID>(static_cast<intptr_t>(tex)), size);
  if (tfloat) dl->AddCallback(ImDrawCallback_ResetRenderState, nullptr);
  float split_x = -1;  // the wipe's line, on screen
  if (other && app.ref_texture && !use_ref) {
    const ImTextureID id = reinterpret_cast<ImTextureID>(static_cast<intptr_t>(app.ref_texture));
    // Flicker: the other image for half of each second, over the whole output.
    const bool flick_on = std::fmod(ImGui::GetTime(), 1.0) >= 0.5;
    const float from = ui.ab.mode == 1 ? ui.ab.wipe : flick_on ? 0.0f : 1.0f;
    if (from < 1.0f) {
      if (app.ref_float) dl->AddCallback(use_colormap, &app);
      dl->AddImage(id, ImVec2(origin.x + size.x * from, origin.y),
                   ImVec2(origin.x + size.x, origin.y + size.y), ImVec2(from, 0), ImVec2(1, 1));
      if (app.ref_float) dl->AddCallback(ImDrawCallback_ResetRenderState, nullptr);
    }
    const char* left = ui.ab.against == 0 ? "GPU" : "B (now)";
    const char* right = ui.ab.against == 0 ? "CPU reference" : "A (pinned)";
    const ImU32 label = IM_COL32(255, 255, 255, 255), shade = IM_COL32(0, 0, 0, 170);
    auto tag = [&](ImVec2 at, const char* text) {
      const ImVec2 ts = ImGui::CalcTextSize(text);
      dl->AddRectFilled(at, ImVec2(at.x + ts.x + 8, at.y + ts.y + 4), shade);
      dl->AddText(ImVec2(at.x + 4, at.y + 2), label, text);
    };
    if (ui.ab.mode == 1) {
      split_x = origin.x + size.x * ui.ab.wipe;
      dl->AddLine(ImVec2(split_x, origin.y), ImVec2(split_x, origin.y + size.y), label, 2.0f);
      tag(ImVec2(std::max(child_origin.x, origin.x) + 4, child_origin.y + 4), left);
      tag(ImVec2(split_x + 4, child_origin.y + 4), right);
    } else {
      tag(ImVec2(child_origin.x + 4, child_origin.y + 4), flick_on ? right : left);
    }
  }
  const ImageDesc& space = app.view.keypoint_space;
  if (ui.overlay && app.view.keypoints_k > 0 && app.kp_vao && tw == space.width &&
      th == space.height) {
    g_overlay = {&app, origin.x, origin.y, scale};
    dl->AddCallback(draw_keypoints, nullptr);
    dl->AddCallback(ImDrawCallback_ResetRenderState, nullptr);
  }
  const Tiles tiles = ui.tiles && !use_ref ? tiles_of(app, name) : Tiles{};
  if (tiles.w > 0 && (tiles.gx > 1 || tiles.gy > 1)) {
    // Lines closer than 4 screen pixels would only grey the image: then only the hover says.
    const ImU32 line = IM_COL32(255, 255, 255, 110);
    if (float(tiles.w) * scale >= 4)
      for (int k = 1; k < tiles.gx; ++k) {
        const float x = origin.x + float(k * tiles.w) * scale;
        dl->AddLine(ImVec2(x, origin.y), ImVec2(x, origin.y + size.y), line);
      }
    if (float(tiles.h) * scale >= 4)
      for (int k = 1; k < tiles.gy; ++k) {
        const float y = origin.y + float(k * tiles.h) * scale;
        dl->AddLine(ImVec2(origin.x, y), ImVec2(origin.x + size.x, y), line);
      }
  }
  // An invisible button over the whole panel owns the mouse, so dragging pans the image
  // instead of moving the window.
  ImGui::SetCursorScreenPos(child_origin);
  ImGui::InvisibleButton("canvas", ImVec2(std::max(avail.x, 1.0f), std::max(avail.y, 1.0f)));
  ui.probe_x = ui.probe_y = -1;
  if (ImGui::IsItemHovered() || ImGui::IsItemActive()) {
    const ImGuiIO& io = ImGui::GetIO();
    if (io.MouseWheel != 0)
      ui.zoom = std::clamp(ui.zoom * std::pow(1.15f, io.MouseWheel), 0.1f, 64.0f);
    // A drag that starts on the wipe's line moves the line; elsewhere it pans.
    if (ImGui::IsItemClicked(ImGuiMouseButton_Left))
      ui.ab.dragging_wipe = split_x >= 0 && std::fabs(io.MousePos.x - split_x) < 6;
    if (ImGui::IsItemActive() && ImGui::IsMouseDragging(ImGuiMouseButton_Left)) {
      if (ui.ab.dragging_wipe && size.x > 0)
        ui.ab.wipe = std::clamp((io.MousePos.x - origin.x) / size.x, 0.0f, 1.0f);
      else
        ui.pan.x += io.MouseDelta.x, ui.pan.y += io.MouseDelta.y;
    }
    const int px = int(std::floor((io.MousePos.x - origin.x) / scale));
    const int py = int(std::floor((io.MousePos.y - origin.y) / scale));
    const ImageDesc& d = app.view.shown_desc;
    const HostImage* same = ref && ref->desc() == d ? ref : nullptr;
    std::string text;
    if (!app.view.shown_on_device) {
      text = probe_text(app.view.shown, same, px, py);
    } else if (px >= 0 && py >= 0 && px < d.width && py < d.height) {
      ui.probe_x = px, ui.probe_y = py;  // the next job reads this pixel back (4 bytes)
      text = app.view.probe_x == px && app.view.probe_y == py
                 ? probe_value_text(app.view.probe_value, same, px, py)
                 : "(" + std::to_string(px) + ", " + std::to_string(py) + ")\nreading...";
    }
    if (tiles.w > 0 && px >= 0 && py >= 0 && px < app.view.shown_desc.width &&
        py < app.view.shown_desc.height) {
      const int bx = px / tiles.w, by = py / tiles.h;
      const int x0 = bx * tiles.w, y0 = by * tiles.h;
      const int x1 = std::min(x0 + tiles.w, app.view.shown_desc.width);
      const int y1 = std::min(y0 + tiles.h, app.view.shown_desc.height);
      char buf[400];
      std::snprintf(buf, sizeof buf,
                    "\nblock (%d, %d) of %d x %d: outputs x %d..%d, y %d..%d (%d x %d), %d "
                    "threads, %.1f outputs each",
                    bx, by, tiles.gx, tiles.gy, x0, x1 - 1, y0, y1 - 1, tiles.w, tiles.h,
                    tiles.threads, double(tiles.w) * tiles.h / std::max(1, tiles.threads));
      text += buf;
      if (tiles.matmul) {
        std::snprintf(buf, sizeof buf,
                      "\nit reads rows %d..%d of A and columns %d..%d of B (all of K) once for "
                      "its %d outputs",
                      y0, y1 - 1, x0, x1 - 1, (x1 - x0) * (y1 - y0));
        text += buf;
      }
    }
    if (!text.empty()) ImGui::SetTooltip("%s", text.c_str());
  }
  ImGui::EndChild();
  ImGui::End();
}

void display_result(GuiApp& app, const FrameResult& r) {
  const auto t0 = std::chrono::steady_clock::now();
  TextureSlot out{&app.texture, &app.tex_w, &app.tex_h, &app.tex_float};
  const size_t kp_bytes = size_t(r.keypoints_k) * 3 * sizeof(float);
  if (r.keypoints_k > 0) {
    ensure_keypoint_buffer(app, kp_bytes);
    glBindBuffer(GL_ARRAY_BUFFER, 0);
  }
  bool done = false;
  if (r.shown_on_device) {
    ensure_texture(out, r.shown_desc.width, r.shown_desc.height, true);
    glBindTexture(GL_TEXTURE_2D, 0);
    const bool kp = r.keypoints_on_device && r.keypoints_k > 0;
    done = app.interop.write(app.texture, app.staging.shown.ref(), kp ? app.kp_vbo : 0,
                             kp ? app.staging.keypoints.data() : nullptr, kp_bytes);
    if (!done) app.ui.message = "CUDA-GL interop stopped (" + app.interop.why() + "): host upload";
    if (done) {
      push_history(app.ui.map_ms, float(app.interop.map_ms()));
      push_history(app.ui.unmap_ms, float(app.interop.unmap_ms()));
    }
  } else if (r.shown.desc().width > 0) {
    upload(app, out, r.shown, {r.shown_range.lo, r.shown_range.hi});
    done = true;
  }
  if (r.keypoints_k > 0 && !r.keypoints_on_device && r.keypoints.desc().width == r.keypoints_k) {
    glBindBuffer(GL_ARRAY_BUFFER, app.kp_vbo);
    glBufferSubData(GL_ARRAY_BUFFER, 0, GLsizeiptr(kp_bytes), r.keypoints.bytes());
    glBindBuffer(GL_ARRAY_BUFFER, 0);
  }
  if (done)
    push_history(
        app.ui.display_ms,
        std::chrono::duration<float, std::milli>(std::chrono::steady_clock::now() - t0).count());
}

const char* viewport_view_name(int view) {
  return kViews[std::clamp(view, 0, int(IM_ARRAYSIZE(kViews)) - 1)];
}

}  // namespace lab::ui
