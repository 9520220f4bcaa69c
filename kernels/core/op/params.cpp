#include "params.h"

#include <cmath>

#include "check.h"

namespace lab {

void validate_params(const std::string& op, const std::vector<ParamSpec>& specs,
                     const ParamMap& values) {
  for (const auto& [name, value] : values) {
    const ParamSpec* spec = nullptr;
    for (const auto& s : specs)
      if (s.name == name) spec = &s;
    if (!spec) {
      std::string known;
      for (const auto& s : specs) known += (known.empty() ? "" : ", ") + s.name;
      throw Error(ErrorKind::Usage, "unknown parameter '" + op + "." + name + "' (" +
                                        (known.empty() ? op + " has none" : "known: " + known) +
                                        ")");
    }
    if (!(value >= spec->min && value <= spec->max))
      throw Error(ErrorKind::Usage, "parameter " + op + "." + name + " = " + std::to_string(value) +
                                        " is outside [" + std::to_string(spec->min) + ", " +
                                        std::to_string(spec->max) + "]");
    if (spec->integer && std::floor(value) != value)
      throw Error(ErrorKind::Usage, "parameter " + op + "." + name + " must be an integer");
  }
}

}  // namespace lab
