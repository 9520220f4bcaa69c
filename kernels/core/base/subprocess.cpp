#include "subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

extern char** environ;

namespace lab {

int ms_left(SteadyClock::time_point deadline) {
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now());
  return int(std::max<int64_t>(0, std::min<int64_t>(left.count(), 1 << 30)));
}

std::string self_executable() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, size_t(n)) : "kernel-lab";
}

std::string status_words(int status) {
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    const char* name = strsignal(sig);
    return "signal " + std::to_string(sig) + " (" + (name ? name : "?") + ")";
  }
  if (WIFEXITED(status)) return "exit status " + std::to_string(WEXITSTATUS(status));
  return "status " + std::to_string(status);
}

// ---- Child --------------------------------------------------------------------------------

std::unique_ptr<Child> Child::spawn(const std::vector<std::string>& argv, const SpawnOptions& o,
                                    std::string* why) {
  int a[2] = {-1, -1}, b[2] = {-1, -1};  // Socket: a; Pipes: a stdout, b stderr
  auto close_all = [&] {
    for (int fd : {a[0], a[1], b[0], b[1]})
      if (fd >= 0) ::close(fd);
  };
  if (o.io == ChildIo::Socket && socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, a) != 0) {
    *why = std::string("socketpair: ") + std::strerror(errno);
    return nullptr;
  }
  if (o.io == ChildIo::Pipes && (pipe2(a, O_CLOEXEC) != 0 || pipe2(b, O_CLOEXEC) != 0)) {
    *why = std::string("pipe: ") + std::strerror(errno);
    close_all();
    return nullptr;
  }
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t attr;
  posix_spawn_file_actions_init(&fa);
  posix_spawnattr_init(&attr);
  if (o.io == ChildIo::Socket) {
    posix_spawn_file_actions_adddup2(&fa, a[1], 0);
    posix_spawn_file_actions_adddup2(&fa, a[1], 1);
  } else if (o.io == ChildIo::Pipes) {
    posix_spawn_file_actions_adddup2(&fa, a[1], 1);
    posix_spawn_file_actions_adddup2(&fa, b[1], 2);
  }
  short flags = POSIX_SPAWN_SETSIGDEF;
  if (o.own_group) {
    flags |= POSIX_SPAWN_SETPGROUP;
    posix_spawnattr_setpgroup(&attr, 0);
  }
  posix_spawnattr_setflags(&attr, flags);
  sigset_t def;
  sigemptyset(&def);
  sigaddset(&def, SIGPIPE);  // the lab ignores it; the child gets the default back
  posix_spawnattr_setsigdefault(&attr, &def);
  std::vector<char*> args;
  for (const std::string& s : argv) args.push_back(const_cast<char*>(s.c_str()));
  args.push_back(nullptr);
  const std::string& file = o.path.empty() ? argv.at(0) : o.path;
  pid_t pid = -1;
  const int e = posix_spawn(&pid, file.c_str(), &fa, &attr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (e != 0) {
    *why = "cannot start " + argv.at(0) + ": " + std::strerror(e);
    close_all();
    return nullptr;
  }
  std::unique_ptr<Child> c(new Child);
  c->m_pid = pid;
  c->m_group = o.own_group;
  if (o.io == ChildIo::Socket) {
    ::close(a[1]);
    c->fd = a[0];
    fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK);
  } else if (o.io == ChildIo::Pipes) {
    ::close(a[1]), ::close(b[1]);
    c->out_fd = a[0], c->err_fd = b[0];
  }
  return c;
}

void Child::close_fd() {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

bool Child::reap(int wait_ms) {
  if (m_exited || m_pid <= 0) return m_exited;
  if (wait_ms < 0) {
    while (waitpid(m_pid, &m_status, 0) < 0 && errno == EINTR) {
    }
    return m_exited = true;
  }
  const auto end = SteadyClock::now() + std::chrono::milliseconds(wait_ms);
  for (;;) {
    const pid_t r = waitpid(m_pid, &m_status, WNOHANG);
    if (r == m_pid || (r < 0 && errno != EINTR)) return m_exited = true;
    if (SteadyClock::now() >= end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

void Child::kill() {
  if (m_exited || m_pid <= 0) return;
  if (m_group) ::kill(-m_pid, SIGKILL);
  ::kill(m_pid, SIGKILL);
  while (waitpid(m_pid, &m_status, 0) < 0 && errno == EINTR) {
  }
  m_exited = true;
}

Child::~Child() {
  for (int d : {fd, out_fd, err_fd})
    if (d >= 0) ::close(d);
  if (m_pid > 0 && !reap(0)) kill();
}

// ---- bounded I/O ----------------------------------------------------------------------------

namespace {
// Waits until `fd` is ready for `events` (none: at once): Ok, or Timeout, Failed, and Eof for a
// peer gone while writing.
IoResult wait_for(int fd, short events, const SteadyClock::time_point* deadline) {
  if (!deadline) return IoResult::Ok;
  for (;;) {
    pollfd pf{fd, events, 0};
    const int r = poll(&pf, 1, ms_left(*deadline));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return IoResult::Failed;
    if (r == 0) return IoResult::Timeout;
    if ((events & POLLOUT) && (pf.revents & (POLLHUP | POLLERR))) return IoResult::Eof;
    return IoResult::Ok;
  }
}
}  // namespace

IoResult read_exact(int fd, char* p, size_t n, const SteadyClock::time_point* deadline,
                    size_t* got) {
  *got = 0;
  while (*got < n) {
    if (const IoResult w = wait_for(fd, POLLIN, deadline); w != IoResult::Ok) return w;
    const ssize_t k = ::read(fd, p + *got, n - *got);
    if (k < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (k < 0) return errno == ECONNRESET ? IoResult::Eof : IoResult::Failed;
    if (k == 0) return IoResult::Eof;
    *got += size_t(k);
  }
  return IoResult::Ok;
}

IoResult write_all(int fd, const std::string& s, const SteadyClock::time_point* deadline) {
  size_t at = 0;
  while (at < s.size()) {
    if (const IoResult w = wait_for(fd, POLLOUT, deadline); w != IoResult::Ok) return w;
    const ssize_t k = ::send(fd, s.data() + at, s.size() - at, MSG_NOSIGNAL);
    if (k < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (k < 0) return errno == EPIPE || errno == ECONNRESET ? IoResult::Eof : IoResult::Failed;
    at += size_t(k);
  }
  return IoResult::Ok;
}

IoResult exchange_until_eof(int fd, const std::string& request, size_t cap,
                            SteadyClock::time_point deadline, std::string* reply) {
  size_t sent = 0;
  for (;;) {
    pollfd pf{fd, short(POLLIN | (sent < request.size() ? POLLOUT : 0)), 0};
    const int r = poll(&pf, 1, ms_left(deadline));
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) return IoResult::Timeout;
    if (r < 0) return IoResult::Ok;  // what arrived is the reply
    if (sent < request.size() && (pf.revents & POLLOUT)) {
      const ssize_t k = ::send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
      if (k > 0) sent += size_t(k);
      if (k < 0 && errno != EINTR && errno != EAGAIN) sent = request.size();  // it left early
      if (sent == request.size()) ::shutdown(fd, SHUT_WR);
    }
    if (pf.revents & (POLLIN | POLLHUP | POLLERR)) {
      char buf[1 << 16];
      const ssize_t k = ::read(fd, buf, sizeof buf);
      if (k == 0 || (k < 0 && errno != EINTR && errno != EAGAIN)) return IoResult::Ok;
      if (k > 0) reply->append(buf, size_t(k));
      if (reply->size() > cap) return IoResult::Failed;
    }
  }
}

CapturedRun run_captured(const std::vector<std::string>& argv, double timeout_s, size_t cap) {
  CapturedRun r;
  std::string why;
  std::unique_ptr<Child> c = Child::spawn(argv, {ChildIo::Pipes, true, ""}, &why);
  if (!c) return r;
  r.started = true;
  const auto deadline = SteadyClock::now() + std::chrono::milliseconds(int(timeout_s * 1000));
  pollfd fds[2] = {{c->out_fd, POLLIN, 0}, {c->err_fd, POLLIN, 0}};
  std::string* sinks[2] = {&r.out, &r.err};
  int open_fds = 2;
  char buf[65536];
  while (open_fds > 0) {
    const int left = ms_left(deadline);
    if (left <= 0) {
      r.timed_out = true;
      break;
    }
    if (poll(fds, 2, std::min(left, 1000)) < 0) break;
    for (int k = 0; k < 2; ++k) {
      if (fds[k].fd < 0 || !(fds[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      const ssize_t got = read(fds[k].fd, buf, sizeof buf);
      if (got <= 0) {
        fds[k].fd = -1;
        --open_fds;
      } else if (sinks[k]->size() < cap) {
        sinks[k]->append(buf, size_t(got));
      }
    }
  }
  if (r.timed_out) c->kill();
  c->reap(-1);
  r.status = WIFEXITED(c->status()) ? WEXITSTATUS(c->status()) : -1;
  return r;
}

}  // namespace lab
