// JSON has no NaN: a value not known is null (bench's JSON, the ladder's export).
#pragma once

#include <cmath>
#include <nlohmann/json.hpp>

namespace lab {

inline nlohmann::json json_number(double v) {
  return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr);
}

}  // namespace lab
