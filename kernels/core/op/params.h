// Kernel parameters: one typed struct per op, described once by a visit() function.
//
// An op writes
//   struct Params { float k = 0.04f;
//     template <class V> void visit(V& v) { v("k", k, 0.0, 0.25, "tooltip"); } };
// and the same visit() yields the parameter list for `list`, the GUI controls, CLI flags
// (--param harris.k=0.05), presets and test sweeps, and decodes a ParamMap back into the struct.
#pragma once

#include <map>
#include <string>
#include <type_traits>
#include <vector>

namespace lab {

struct ParamSpec {
  std::string name;
  double min = 0, max = 0, def = 0;
  bool integer = false;
  std::string help;
};

// Values by name; a missing name takes the default.
using ParamMap = std::map<std::string, double>;

namespace detail {
struct SpecCollector {
  std::vector<ParamSpec> specs;
  template <typename T>
  void operator()(const char* name, T& value, double lo, double hi, const char* help) {
    specs.push_back({name, lo, hi, double(value), std::is_integral<T>::value, help});
  }
};
struct Assigner {
  const ParamMap* values;
  template <typename T>
  void operator()(const char* name, T& value, double, double, const char*) {
    auto it = values->find(name);
    if (it != values->end()) value = static_cast<T>(it->second);
  }
};
}  // namespace detail

template <typename P>
std::vector<ParamSpec> param_specs() {
  P p{};
  detail::SpecCollector c;
  p.visit(c);
  return c.specs;
}

// Values must already be validated (validate_params); this only assigns.
template <typename P>
P decode_params(const ParamMap& values) {
  P p{};
  detail::Assigner a{&values};
  p.visit(a);
  return p;
}

// The parameters of a stage that a fused variant does the work of, as the runner passes them to
// that variant ("harris.k" in nms's map -> "k"): decode them with that op's struct.
inline ParamMap fused_params(const ParamMap& values, const std::string& stage) {
  ParamMap out;
  const std::string prefix = stage + ".";
  for (const auto& [name, value] : values)
    if (name.compare(0, prefix.size(), prefix) == 0) out[name.substr(prefix.size())] = value;
  return out;
}

// Throws Error(Usage) naming the op and parameter for an unknown name, a value out of range
// or a fractional value for an integer parameter.
void validate_params(const std::string& op, const std::vector<ParamSpec>& specs,
                     const ParamMap& values);

}  // namespace lab
