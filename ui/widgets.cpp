#include "widgets.h"

#include <imgui.h>

#include <algorithm>

#include "app_state.h"

namespace lab::ui {

void tip(const char* text) {
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", text);
}

bool stage_window_begin(GuiApp& app, const char* title, int& stage, const char* why) {
  ImGui::SetNextWindowBgAlpha(1.0f);  // it may open over the viewport: nothing shows through
  if (!ImGui::Begin(title, &app.ui.panels[title])) {
    ImGui::End();
    return false;
  }
  const auto& names = app.view.stage_names;
  if (names.empty()) {
    ImGui::TextWrapped("Waiting for the first frame.");
    ImGui::End();
    return false;
  }
  stage = std::clamp(stage, 0, int(names.size()) - 1);
  ImGui::SetNextItemWidth(160);
  if (ImGui::BeginCombo("stage", names[size_t(stage)].c_str())) {
    for (size_t i = 0; i < names.size(); ++i)
      if (ImGui::Selectable(names[i].c_str(), int(i) == stage)) stage = int(i);
    ImGui::EndCombo();
  }
  tip(why);
  return true;
}

void push_history(std::vector<float>& h, float v) {
  if (h.size() >= kHistory) h.erase(h.begin());
  h.push_back(v);
}

}  // namespace lab::ui
