#include "paths.h"

#include <cstdlib>
#include <filesystem>

namespace lab {

std::string xdg_dir(const char* var, const char* fallback, const std::string& sub) {
  namespace fs = std::filesystem;
  const char* v = std::getenv(var);
  fs::path base;
  if (v && *v) {
    base = v;
  } else {
    const char* home = std::getenv("HOME");
    base = fs::path(home && *home ? home : "/tmp") / fallback;
  }
  fs::path dir = base / "kernel-lab";
  if (!sub.empty()) dir /= sub;
  std::error_code ec;
  fs::create_directories(dir, ec);
  return dir.string();
}

std::string examples_dir() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  const std::filesystem::path bin = exe.parent_path();
  for (const auto& d :
       {bin / ".." / "share" / "kernel-lab" / "examples", bin / ".." / "examples" / "kernels"})
    if (std::filesystem::is_directory(d, ec)) return d.string();
  return "";
}

}  // namespace lab
