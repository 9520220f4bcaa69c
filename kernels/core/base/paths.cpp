#include "paths.h"

#include <cstdlib>
#include <filesystem>

#include "subprocess.h"

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

namespace {
// The first of <bin>/../share/kernel-lab/<installed> and <bin>/../<in_tree> that is a folder.
std::string beside_exe(const char* installed, const std::filesystem::path& in_tree) {
  const std::string self = self_executable();
  if (self.empty() || self[0] != '/') return "";  // /proc/self/exe could not be read
  std::error_code ec;
  const std::filesystem::path bin = std::filesystem::path(self).parent_path();
  for (const auto& d : {bin / ".." / "share" / "kernel-lab" / installed, bin / ".." / in_tree})
    if (std::filesystem::is_directory(d, ec)) return d.lexically_normal().string();
  return "";
}
}  // namespace

std::string examples_dir() {
  return beside_exe("examples", std::filesystem::path("examples") / "kernels");
}

std::string test_data_dir() {
  return beside_exe("data", std::filesystem::path("tests") / "data");
}

}  // namespace lab
