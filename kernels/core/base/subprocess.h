// Child processes: the one place the lab starts one. posix_spawn, never fork: the GUI starts
// children from worker threads, and a forked copy of a threaded process (NVRTC, the CUDA driver)
// can find a lock held forever. A child is always reaped, a timed-out one killed with its whole
// process group, and every read from it is bounded by a deadline and a size.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace lab {

using SteadyClock = std::chrono::steady_clock;

// Milliseconds from now to `deadline`, in [0, 2^30] (poll's timeout).
int ms_left(SteadyClock::time_point deadline);

// This process's executable, resolved (/proc/self/exe); "kernel-lab" where it cannot be read.
std::string self_executable();

// "exit status 3", "signal 9 (Killed)": a waitpid status in words.
std::string status_words(int status);

enum class ChildIo {
  Inherit,  // the lab's own stdin, stdout and stderr
  Pipes,    // stdout and stderr each to a pipe (out_fd, err_fd); stdin inherited
  Socket,   // stdin and stdout to one end of a socket pair (fd, non-blocking); stderr inherited
};

struct SpawnOptions {
  ChildIo io = ChildIo::Inherit;
  bool own_group = false;  // its own process group: kill() also reaches what it starts
  std::string path;        // the file to run, when it is not argv[0] (/proc/self/exe)
};

class Child {
 public:
  // Starts argv (SIGPIPE back at its default in the child); nullptr and *why when it cannot.
  static std::unique_ptr<Child> spawn(const std::vector<std::string>& argv, const SpawnOptions& o,
                                      std::string* why);
  ~Child();  // its descriptors closed; a child still running is killed and reaped
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  pid_t pid() const { return m_pid; }
  int fd = -1, out_fd = -1, err_fd = -1;  // as SpawnOptions::io wired them; -1 once closed
  void close_fd();                        // the socket: EOF on the child's stdin

  // True once it has ended (then status()), waiting at most `wait_ms` for that (< 0: until it
  // does).
  bool reap(int wait_ms);
  bool exited() const { return m_exited; }
  int status() const { return m_status; }
  // SIGKILL to it (and its group, where it has its own), then reaped.
  void kill();
  // Forgets it: it goes on after this object (a restart hands over to it).
  void release() { m_pid = -1; }

 private:
  Child() = default;
  pid_t m_pid = -1;
  bool m_group = false, m_exited = false;
  int m_status = 0;
};

// Bounded I/O on a child's descriptor: Ok, Eof (it closed or went away), Timeout (the deadline,
// where one is given; none waits as long as it takes), Failed.
enum class IoResult { Ok, Eof, Timeout, Failed };
IoResult read_exact(int fd, char* p, size_t n, const SteadyClock::time_point* deadline,
                    size_t* got);
IoResult write_all(int fd, const std::string& s, const SteadyClock::time_point* deadline);
// Sends `request` (then shuts the sending side) while reading until the child closes its end:
// Ok with *reply, Timeout at the deadline, Failed past `cap` bytes.
IoResult exchange_until_eof(int fd, const std::string& request, size_t cap,
                            SteadyClock::time_point deadline, std::string* reply);

// Runs argv to its end with a timeout (then its process group is killed), its stdout and stderr
// captured (at most `cap` bytes each, give or take one read).
struct CapturedRun {
  bool started = false, timed_out = false;
  int status = -1;  // the exit status; -1 for a signal
  std::string out, err;
};
CapturedRun run_captured(const std::vector<std::string>& argv, double timeout_s,
                         size_t cap = size_t(256) << 20);

}  // namespace lab
