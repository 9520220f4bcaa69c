// Viewport: a slot (input, any stage output, its CPU reference, or their difference) through a
// colormap, with zoom, pan and a pixel probe.
#include <epoxy/gl.h>

#include <cmath>

#include "app_state.h"
#include "probe.h"
#include "shaders.h"

namespace lab::ui {

namespace {

const char* const kViews[] = {"output", "CPU reference", "|output - reference|"};

// The reference image of a slot from the last comparison, if there is one.
const HostImage* reference_of(const GuiApp& app, const std::string& slot) {
  for (const StageDiff& d : app.ui.diff) {
    const Op& op = find_op(d.stage);
    for (size_t k = 0; k < op.def.outputs.size(); ++k)
      if (op.def.outputs[k] == slot && k < d.reference.size()) return &d.reference[k];
  }
  return nullptr;
}

HostImage abs_difference(const HostImage& a, const HostImage& b) {
  HostImage out(a.desc());
  const auto x = a.view<float>(), y = b.view<float>();
  auto o = out.view<float>();
  for (int r = 0; r < a.desc().height; ++r)
    for (int c = 0; c < a.desc().width; ++c) o.at(c, r) = std::abs(x.at(c, r) - y.at(c, r));
  return out;
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
void build_colormap_program(GuiApp& app, GLuint imgui_program) {
  auto& g = app.colormap_gl;
  std::string log;
  const GLuint vs = compile(GL_VERTEX_SHADER, kColormapVert, log);
  const GLuint fs = compile(GL_FRAGMENT_SHADER, kColormapFrag, log);
  const GLuint p = glCreateProgram();
  glAttachShader(p, vs);
  glAttachShader(p, fs);
  for (const char* name : {"Position", "UV", "Color"}) {
    const GLint loc = glGetAttribLocation(imgui_program, name);
    if (loc >= 0) glBindAttribLocation(p, GLuint(loc), name);
  }
  glLinkProgram(p);
  glDeleteShader(vs);
  glDeleteShader(fs);
  GLint ok = 0;
  glGetProgramiv(p, GL_LINK_STATUS, &ok);
  if (!ok || !log.empty()) {
    glDeleteProgram(p);
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

void upload(GuiApp& app, const HostImage& img) {
  const ImageDesc& d = img.desc();
  Range r{app.ui.lo, app.ui.hi};
  const bool signed_map = app.ui.cmap == Colormap::Diverging;
  if (app.ui.auto_range) {
    r = signed_map ? symmetric_range(img.ref()) : auto_range(img.ref());
    app.ui.lo = r.lo, app.ui.hi = r.hi;
  }
  // Float planes go up as they are and are colormapped by the shader; 8-bit images, or any
  // image when the shader is unavailable, are converted on the CPU.
  const bool as_float = d.type == PixelType::F32 && d.channels == 1 && !app.colormap_gl.failed;
  std::vector<uint32_t> rgba;
  if (!as_float) rgba = to_rgba(img.ref(), r, app.ui.cmap);
  const void* pixels = as_float ? static_cast<const void*>(img.bytes()) : rgba.data();
  const GLenum format = as_float ? GL_RED : GL_RGBA;
  const GLenum type = as_float ? GL_FLOAT : GL_UNSIGNED_BYTE;
  if (!app.texture) glGenTextures(1, &app.texture);
  glBindTexture(GL_TEXTURE_2D, app.texture);
  glPixelStorei(GL_UNPACK_ALIGNMENT, 4);
  if (app.tex_w != d.width || app.tex_h != d.height || app.tex_float != as_float) {
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MIN_FILTER, GL_NEAREST);  // floats: no filtering
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MAG_FILTER, GL_NEAREST);  // pixels stay pixels
    glTexImage2D(GL_TEXTURE_2D, 0, as_float ? GL_R32F : GL_RGBA8, d.width, d.height, 0, format,
                 type, pixels);
    app.tex_w = d.width, app.tex_h = d.height, app.tex_float = as_float;
  } else {
    glTexSubImage2D(GL_TEXTURE_2D, 0, 0, 0, d.width, d.height, format, type, pixels);
  }
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
  ImGui::Combo("view", &ui.view, kViews, 3);
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

  // The engine job downloads the slot chosen here for its next frame; until then the last one.
  const std::string& name = app.view.shown_name;
  const HostImage* ref = reference_of(app, name);
  const bool float_slot =
      app.view.shown.desc().type == PixelType::F32 && app.view.shown.desc().channels == 1;
  // Upload only when what is shown changed: a new result, another view, colormap or range.
  const std::string key =
      std::to_string(app.result_gen) + "/" + std::to_string(ui.view) + "/" +
      std::to_string(int(ui.cmap)) + "/" + std::to_string(ui.auto_range) +
      (ui.auto_range ? "" : "/" + std::to_string(ui.lo) + "/" + std::to_string(ui.hi));
  const bool fresh = key != app.uploaded || !app.texture;
  app.uploaded = key;
  if (!fresh) {
    if (ui.view != 0 && !ref) ImGui::TextUnformatted("no reference yet: showing the output");
  } else if (ui.view == 1 && ref) {
    upload(app, *ref);
  } else if (ui.view == 2 && ref && float_slot && ref->desc() == app.view.shown.desc()) {
    upload(app, abs_difference(app.view.shown, *ref));
  } else {
    upload(app, app.view.shown);
    if (ui.view != 0) ImGui::TextUnformatted("no reference yet: showing the output");
  }
  ImGui::Text("%s  %s  range [%.4g, %.4g]  zoom %.2fx", name.c_str(),
              app.view.shown.desc().str().c_str(), ui.lo, ui.hi, ui.zoom);
  tip("the slot's size and type; the value range the colormap spans (min..max of this frame "
      "with auto range); the zoom (mouse wheel) over the fit-to-panel size. Drag to pan.");

  // The image, zoomed with the wheel and panned by dragging; fit to the panel at zoom 1.
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  const float fit = std::min(avail.x / float(app.tex_w), avail.y / float(app.tex_h));
  const float scale = fit * ui.zoom;
  const ImVec2 size(float(app.tex_w) * scale, float(app.tex_h) * scale);
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
  if (app.tex_float) ImGui::GetWindowDrawList()->AddCallback(use_colormap, &app);
  ImGui::Image(reinterpret_cast<ImTextureID>(static_cast<intptr_t>(app.texture)), size);
  if (app.tex_float)
    ImGui::GetWindowDrawList()->AddCallback(ImDrawCallback_ResetRenderState, nullptr);
  // An invisible button over the whole panel owns the mouse, so dragging pans the image
  // instead of moving the window.
  ImGui::SetCursorScreenPos(child_origin);
  ImGui::InvisibleButton("canvas", ImVec2(std::max(avail.x, 1.0f), std::max(avail.y, 1.0f)));
  if (ImGui::IsItemHovered() || ImGui::IsItemActive()) {
    const ImGuiIO& io = ImGui::GetIO();
    if (io.MouseWheel != 0)
      ui.zoom = std::clamp(ui.zoom * std::pow(1.15f, io.MouseWheel), 0.1f, 64.0f);
    if (ImGui::IsItemActive() && ImGui::IsMouseDragging(ImGuiMouseButton_Left))
      ui.pan.x += io.MouseDelta.x, ui.pan.y += io.MouseDelta.y;
    const int px = int(std::floor((io.MousePos.x - origin.x) / scale));
    const int py = int(std::floor((io.MousePos.y - origin.y) / scale));
    const HostImage* same = ref && ref->desc() == app.view.shown.desc() ? ref : nullptr;
    const std::string text = probe_text(app.view.shown, same, px, py);
    if (!text.empty()) ImGui::SetTooltip("%s", text.c_str());
  }
  ImGui::EndChild();
  ImGui::End();
}

}  // namespace lab::ui
