// SASS at run time: the toolkit's cuobjdump (this binary's fatbin) or nvdisasm (a live
// kernel's cubin), found by the toolkit finder and run as a child process.
#include "listing.h"

#include <cuda_runtime_api.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "subprocess.h"
#include "text.h"

namespace lab {

// ---- SASS at run time ----------------------------------------------------------------------

namespace {

std::string missing_message(const std::string& tool, const ToolLookup& t, const char* what) {
  return std::string("SASS is not available: ") + what + " needs " + tool +
         " from the CUDA toolkit (a full CUDA install or JetPack has it), and it was not found "
         "(looked on " +
         t.where() + ").";
}

std::string first_line(const std::string& s) {
  const std::string t = trim(s);
  const size_t nl = t.find('\n');
  return nl == std::string::npos ? t : t.substr(0, nl);
}

SassResult sass_from_run(const std::string& tool, const CapturedRun& run, double timeout_s) {
  SassResult r;
  if (!run.started) {
    r.message = "SASS is not available: " + tool + " could not be started.";
  } else if (run.timed_out) {
    r.message = "SASS is not available: " + tool + " did not finish within " +
                std::to_string(int(timeout_s)) + " s and was stopped.";
  } else if (run.status != 0) {
    r.message = "SASS is not available: " + tool + " failed (exit " + std::to_string(run.status) +
                ")" + (run.err.empty() ? std::string(".") : ": " + first_line(run.err));
  } else {
    r.functions = split_sass(run.out);
    r.ok = !r.functions.empty();
    if (!r.ok)
      r.message = "SASS is not available: " + tool +
                  "'s output held no function this view can read" +
                  (run.out.empty() ? " (it printed nothing)." : ".");
  }
  return r;
}

}  // namespace

SassResult builtin_sass(const std::string& mangled, double timeout_s) {
  static std::mutex mu;
  static std::map<std::string, SassResult> cache;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = cache.find(mangled);
    if (it != cache.end()) return it->second;
  }
  const ToolLookup t = find_cuda_tool("cuobjdump");
  if (t.path.empty()) {
    SassResult r;
    r.message = missing_message("cuobjdump", t, "a built-in kernel's SASS");
    return r;  // not cached: PATH may change (the tests empty it)
  }
  // Our own path, resolved here: the tool's /proc/self/exe would be the tool.
  const CapturedRun run =
      run_captured({t.path, "-sass", "-fun", mangled, self_executable()}, timeout_s);
  SassResult r = sass_from_run("cuobjdump", run, timeout_s);
  if (r.ok) {
    std::vector<AsmFunction> mine;
    for (auto& f : r.functions)
      if (f.name == mangled) mine.push_back(std::move(f));
    r.functions = std::move(mine);
    r.ok = !r.functions.empty();
    if (!r.ok) r.message = "SASS is not available: cuobjdump found no function " + mangled + ".";
  }
  std::lock_guard<std::mutex> lock(mu);
  cache[mangled] = r;
  return r;
}

SassResult cubin_sass(const std::vector<char>& cubin, double timeout_s) {
  SassResult r;
  if (cubin.empty()) {
    r.message = "SASS is not available: the live kernel has no cubin (it did not compile).";
    return r;
  }
  const ToolLookup t = find_cuda_tool("nvdisasm");
  if (t.path.empty()) {
    r.message = missing_message("nvdisasm", t, "a live kernel's SASS");
    return r;
  }
  const char* tmp = std::getenv("TMPDIR");
  std::string path = std::string(tmp && *tmp ? tmp : "/tmp") + "/kernel-lab-XXXXXX.cubin";
  std::vector<char> name(path.begin(), path.end());
  name.push_back('\0');
  const int fd = mkstemps(name.data(), 6);
  if (fd < 0) {
    r.message = "SASS is not available: no temporary file for the cubin (" +
                std::string(std::strerror(errno)) + ").";
    return r;
  }
  size_t done = 0;
  while (done < cubin.size()) {
    const ssize_t w = write(fd, cubin.data() + done, cubin.size() - done);
    if (w <= 0) break;
    done += size_t(w);
  }
  close(fd);
  if (done == cubin.size())
    r = sass_from_run("nvdisasm", run_captured({t.path, "-c", name.data()}, timeout_s), timeout_s);
  else
    r.message = "SASS is not available: the cubin could not be written to a temporary file.";
  unlink(name.data());
  return r;
}

const AsmFunction* pick_arch(const std::vector<AsmFunction>& fns, int arch) {
  for (const AsmFunction& f : fns)
    if (f.arch == arch) return &f;
  return fns.empty() ? nullptr : &fns.front();
}

std::string kernel_mangled_name(const void* func) {
#if CUDART_VERSION >= 12030
  const char* name = nullptr;
  if (func && cudaFuncGetName(&name, func) == cudaSuccess && name) return name;
  cudaGetLastError();  // no driver or device: not an error of the caller's
#else
  (void)func;
#endif
  return "";
}

}  // namespace lab
