#include "output_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <random>
#include <set>
#include <system_error>
#include <utility>

#include "check.h"
#include "printable.h"

namespace lab {
namespace {

namespace fs = std::filesystem;

std::mutex g_inputs_mutex;
std::set<std::pair<dev_t, ino_t>> g_inputs;

[[noreturn]] void fail(ErrorKind kind, const std::string& path, const std::string& why) {
  throw Error(kind, printable(path, 200) + ": " + why);
}

std::string errno_text(int e) {
  return std::strerror(e);
}

// A write past RLIMIT_FSIZE should fail with EFBIG, which the writer reports, rather than end
// the process (SIGXFSZ's default) with a temporary left behind.
void ignore_sigxfsz() {
  static std::once_flag once;
  std::call_once(once, [] { std::signal(SIGXFSZ, SIG_IGN); });
}

const char* kind_of(mode_t m) {
  if (S_ISDIR(m)) return "a folder";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISSOCK(m)) return "a socket";
  return "not a regular file";
}

// The path a write lands on: a link's target (so the link stays a link), else the path.
std::string write_target(const std::string& path) {
  std::error_code ec;
  struct stat lst;
  if (::lstat(path.c_str(), &lst) == 0 && S_ISLNK(lst.st_mode)) {
    const fs::path t = fs::weakly_canonical(path, ec);
    if (!ec) return t.string();
  }
  return path;
}

// Our temporaries: ".NAME.lab-PID-RANDOM". One left by a process that is gone (killed during a
// write) is ours to remove.
std::string temp_prefix(const std::string& name) {
  return "." + name + ".lab-";
}

void remove_stale_temporaries(const fs::path& dir, const std::string& name) {
  const std::string prefix = temp_prefix(name);
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string n = it->path().filename().string();
    if (n.compare(0, prefix.size(), prefix) != 0) continue;
    const long pid = std::strtol(n.c_str() + prefix.size(), nullptr, 10);
    if (pid <= 0 || pid == long(::getpid())) continue;
    if (::kill(pid_t(pid), 0) == 0 || errno != ESRCH) continue;  // alive, or not ours to judge
    std::error_code rm;
    fs::remove_all(it->path(), rm);
  }
}

std::string random_suffix() {
  static std::mutex m;
  static std::mt19937_64 rng{std::random_device{}()};
  std::lock_guard<std::mutex> lock(m);
  return std::to_string(::getpid()) + "-" + std::to_string(rng() % 1000000000ull);
}

bool is_input(const struct stat& st) {
  std::lock_guard<std::mutex> lock(g_inputs_mutex);
  return g_inputs.count({st.st_dev, st.st_ino}) != 0;
}

// Blocks SIGINT and SIGTERM for its lifetime: a set's renames are not cut in two.
struct HoldSignals {
  sigset_t old;
  HoldSignals() {
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGINT);
    sigaddset(&s, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &s, &old);
  }
  ~HoldSignals() { pthread_sigmask(SIG_SETMASK, &old, nullptr); }
};

}  // namespace

void note_input(const std::string& path) {
  struct stat st;
  if (path.empty() || ::stat(path.c_str(), &st) != 0) return;
  std::lock_guard<std::mutex> lock(g_inputs_mutex);
  if (S_ISREG(st.st_mode)) {
    g_inputs.insert({st.st_dev, st.st_ino});
    return;
  }
  if (!S_ISDIR(st.st_mode)) return;
  std::error_code ec;
  for (fs::directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec)) {
    struct stat f;
    if (::stat(it->path().c_str(), &f) == 0 && S_ISREG(f.st_mode))
      g_inputs.insert({f.st_dev, f.st_ino});
  }
}

void clear_inputs() {
  std::lock_guard<std::mutex> lock(g_inputs_mutex);
  g_inputs.clear();
}

void check_output_path(const std::string& path) {
  if (path.empty()) throw Error(ErrorKind::CantCreate, "an empty output path");
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return;  // a new file (or a dangling link's new target)
    fail(ErrorKind::CantCreate, path, "cannot write here: " + errno_text(errno));
  }
  if (!S_ISREG(st.st_mode))
    fail(ErrorKind::CantCreate, path,
         std::string("is ") + kind_of(st.st_mode) + "; the lab writes regular files only");
  if (is_input(st))
    fail(ErrorKind::CantCreate, path, "is an input of this run; the lab will not overwrite it");
}

// ---- OutputFile ------------------------------------------------------------------------------

OutputFile::OutputFile(const std::string& path) : OutputFile(path, "") {}

OutputFile::OutputFile(const std::string& path, const std::string& temp_dir) : m_path(path) {
  ignore_sigxfsz();
  check_output_path(path);
  m_target = write_target(path);
  const fs::path target(m_target);
  std::string name = target.filename().string();
  if (name.empty() || name == "." || name == "..")
    fail(ErrorKind::CantCreate, path, "not a file name");
  fs::path dir = temp_dir.empty() ? target.parent_path() : fs::path(temp_dir);
  if (dir.empty()) dir = ".";
  // The mode the file will have: an existing file's, else what the umask gives a new one.
  struct stat old;
  const bool replacing = ::stat(m_target.c_str(), &old) == 0;
  if (temp_dir.empty()) remove_stale_temporaries(dir, name);
  for (int tries = 0; tries < 16 && m_fd < 0; ++tries) {
    // In a set's new folder, the file already has its final name.
    m_temp = (dir / (temp_dir.empty() ? temp_prefix(name) + random_suffix() : name)).string();
    m_fd = ::open(m_temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (m_fd < 0 && (errno != EEXIST || !temp_dir.empty())) break;
  }
  if (m_fd < 0) {
    const int e = errno;
    m_temp.clear();
    fail(ErrorKind::CantCreate, path, "cannot create: " + errno_text(e));
  }
  if (replacing) ::fchmod(m_fd, old.st_mode & 07777);
}

OutputFile::~OutputFile() {
  discard();
}

void OutputFile::discard() {
  if (m_fd >= 0) ::close(m_fd);
  m_fd = -1;
  if (!m_temp.empty()) ::unlink(m_temp.c_str());
  m_temp.clear();
}

void OutputFile::write(const void* data, size_t bytes) {
  if (m_fd < 0) fail(ErrorKind::Internal, m_path, "written after it was closed");
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::write(m_fd, p, bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int e = n < 0 ? errno : EIO;
      discard();
      fail(ErrorKind::Io, m_path, "write failed: " + errno_text(e));
    }
    p += n;
    bytes -= size_t(n);
  }
}

void OutputFile::close_checked() {
  if (m_fd < 0) fail(ErrorKind::Internal, m_path, "closed twice");
  // A full disk or a quota often shows only here.
  int e = 0;
  if (::fsync(m_fd) != 0 && errno != EINVAL && errno != EROFS) e = errno;
  if (::close(m_fd) != 0 && e == 0 && errno != EINTR) e = errno;
  m_fd = -1;
  if (e != 0) {
    discard();
    fail(ErrorKind::Io, m_path, "write failed: " + errno_text(e));
  }
}

void OutputFile::commit() {
  close_checked();
  if (::rename(m_temp.c_str(), m_target.c_str()) != 0) {
    const int e = errno;
    discard();
    fail(ErrorKind::Io, m_path, "cannot put the file in place: " + errno_text(e));
  }
  m_temp.clear();
}

void write_output_file(const std::string& path, const std::string& bytes) {
  OutputFile f(path);
  f.write(bytes);
  f.commit();
}

void check_stdout() {
  std::cout.flush();
  errno = 0;
  const bool flushed = std::fflush(stdout) == 0;
  const int e = errno;
  if (flushed && !std::ferror(stdout) && std::cout.good()) return;
  // Said once: the error path must not try to write to standard output again.
  std::clearerr(stdout);
  std::cout.clear();
  throw Error(ErrorKind::Io,
              std::string("standard output: write failed") + (e != 0 ? ": " + errno_text(e) : ""));
}

// ---- OutputSet -------------------------------------------------------------------------------

OutputSet::OutputSet(const std::string& folder) : m_folder(folder) {
  if (folder.empty()) throw Error(ErrorKind::CantCreate, "an empty output folder");
  struct stat st;
  if (::stat(folder.c_str(), &st) == 0 && !S_ISDIR(st.st_mode))
    fail(ErrorKind::CantCreate, folder,
         std::string("is ") + kind_of(st.st_mode) + ", not a folder");
}

OutputSet::~OutputSet() {
  m_files.clear();  // their temporaries go
  if (m_new_folder && !m_temp_dir.empty()) {
    std::error_code ec;
    fs::remove_all(m_temp_dir, ec);
  }
}

void OutputSet::prepare() {
  if (!m_temp_dir.empty()) return;
  ignore_sigxfsz();
  struct stat st;
  if (::stat(m_folder.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode))
      fail(ErrorKind::CantCreate, m_folder,
           std::string("is ") + kind_of(st.st_mode) + ", not a folder");
    m_temp_dir = m_folder;  // the files' temporaries sit beside them
    return;
  }
  // A new folder: built complete under a temporary name beside it, renamed by commit().
  fs::path target = fs::path(m_folder).lexically_normal();
  if (target.filename().empty()) target = target.parent_path();
  fs::path parent = target.parent_path();
  if (parent.empty()) parent = ".";
  std::error_code ec;
  fs::create_directories(parent, ec);
  if (ec) fail(ErrorKind::CantCreate, m_folder, "cannot create its parent: " + ec.message());
  const std::string name = target.filename().string();
  remove_stale_temporaries(parent, name);
  for (int tries = 0; tries < 16; ++tries) {
    const fs::path t = parent / (temp_prefix(name) + random_suffix());
    if (::mkdir(t.c_str(), 0777) == 0) {
      m_temp_dir = t.string();
      m_new_folder = true;
      return;
    }
    if (errno != EEXIST) break;
  }
  fail(ErrorKind::CantCreate, m_folder, "cannot create: " + errno_text(errno));
}

OutputFile& OutputSet::add(const std::string& name) {
  if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..")
    fail(ErrorKind::Internal, name, "not a plain file name");
  prepare();
  const std::string path = (fs::path(m_folder) / name).string();
  if (m_new_folder) {
    m_files.push_back(std::unique_ptr<OutputFile>(new OutputFile(path, m_temp_dir)));
  } else {
    m_files.push_back(std::make_unique<OutputFile>(path));
  }
  return *m_files.back();
}

void OutputSet::commit() {
  prepare();  // an empty set still makes its folder
  for (auto& f : m_files) f->close_checked();
  HoldSignals hold;
  if (m_new_folder) {
    fs::path target = fs::path(m_folder).lexically_normal();
    if (target.filename().empty()) target = target.parent_path();
    if (::rename(m_temp_dir.c_str(), target.c_str()) != 0)
      fail(ErrorKind::Io, m_folder, "cannot put the folder in place: " + errno_text(errno));
    m_temp_dir.clear();
    m_new_folder = false;
    for (auto& f : m_files) f->m_temp.clear();
    m_files.clear();
    return;
  }
  for (auto& f : m_files) {
    if (::rename(f->m_temp.c_str(), f->m_target.c_str()) != 0)
      fail(ErrorKind::Io, f->m_path, "cannot put the file in place: " + errno_text(errno));
    f->m_temp.clear();
  }
  m_files.clear();
}

}  // namespace lab
