#include "toolkit.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <sstream>

namespace lab {

std::string ToolLookup::where() const {
  std::string s;
  for (const std::string& l : looked) s += (s.empty() ? "" : ", ") + l;
  return s;
}

namespace {
bool executable(const std::string& p) {
  struct stat st {};
  return stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(p.c_str(), X_OK) == 0;
}
std::string without_slash(std::string d) {
  while (d.size() > 1 && d.back() == '/') d.pop_back();
  return d;
}
std::string parent_of(const std::string& d) {
  const size_t slash = d.find_last_of('/');
  return slash == std::string::npos || slash == 0 ? "/" : d.substr(0, slash);
}
}  // namespace

ToolLookup find_cuda_tool(const std::string& name) {
  ToolLookup r;
  std::vector<std::string> dirs;
  auto add = [&](const std::string& d, const std::string& words) {  // each folder once
    const std::string f = without_slash(d);
    if (f.empty() || std::find(dirs.begin(), dirs.end(), f) != dirs.end()) return;
    dirs.push_back(f);
    if (!words.empty()) r.looked.push_back(words);
  };
  std::vector<std::pair<std::string, std::string>> roots;  // (folder, its words)
  if (const char* path = std::getenv("PATH")) {
    std::stringstream ss(path);
    std::string d;
    while (std::getline(ss, d, ':')) {
      add(d, "");
      if (!d.empty() && executable(without_slash(d) + "/nvcc"))
        roots.emplace_back(parent_of(without_slash(d)), "beside nvcc");
    }
    r.looked.push_back("PATH");
  } else {
    r.looked.push_back("PATH (unset)");
  }
  for (const char* var : {"CUDA_HOME", "CUDA_PATH"})
    if (const char* v = std::getenv(var); v && *v) roots.emplace_back(v, std::string("$") + var);
  roots.emplace_back("/usr/local/cuda", "");
#ifdef LAB_CUDA_BIN_DIR
  roots.emplace_back(parent_of(without_slash(LAB_CUDA_BIN_DIR)), "this build's toolkit");
#endif
  for (const auto& [root, words] : roots) {
    const std::string bin = without_slash(root) + "/bin";
    add(bin, words.empty() ? bin : bin + " (" + words + ")");
    add(without_slash(root) + "/" + name, "");
  }
  for (const std::string& d : dirs)
    if (executable(d + "/" + name)) {
      r.path = d + "/" + name;
      break;
    }
  return r;
}

}  // namespace lab
