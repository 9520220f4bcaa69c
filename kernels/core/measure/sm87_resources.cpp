#include "sm87_resources.h"

#include <cstring>

namespace lab {

const Sm87Resource* find_sm87_resources(const char* mangled) {
  if (!mangled) return nullptr;
  for (size_t i = 0; i < kSm87ResourceCount; ++i)
    if (std::strcmp(kSm87Resources[i].kernel, mangled) == 0) return &kSm87Resources[i];
  return nullptr;
}

}  // namespace lab
