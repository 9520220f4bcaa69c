// Live compiles in a child process of this executable (`kernel-lab __compile`), under a time and
// a memory limit: NVRTC runs in the lab's own address space otherwise, and a few kilobytes of
// macros that expand without end took minutes and gigabytes. posix_spawn and exec, not fork: the
// GUI compiles from a worker thread, and NVRTC in a forked copy of a threaded process could find
// a lock held forever.
//
// The wire: one request (the source and options, the memory limit) on the child's stdin, one
// reply (the build, or an error) on its stdout, each "KLC1", its length (u64), its payload; the
// parent reads with a deadline and a size cap, so a child that hangs, floods or dies is an error
// with words, never a hang.
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#include "check.h"
#include "live.h"
#include "measure.h"
#include "printable.h"
#include "subprocess.h"
#include "text.h"
#include "wire.h"

namespace lab {

namespace {

constexpr char kMagic[4] = {'K', 'L', 'C', '1'};
constexpr uint64_t kMaxRequest = uint64_t(64) << 20;  // a source is at most 1 MiB as a file
constexpr uint64_t kMaxReply = uint64_t(256) << 20;   // PTX, cubin and log

enum class Status : uint8_t { Built = 0, Failed = 1, OutOfMemory = 2 };

// A whole message: magic, the payload's length, the payload.
std::string framed(const WireWriter& w) {
  std::string f(kMagic, 4);
  const uint64_t n = w.s.size();
  f.append(reinterpret_cast<const char*>(&n), sizeof n);
  return f + w.s;
}

// The payload of a whole message (magic, length, payload) or why it is not one.
bool unframe(const std::string& m, std::string* payload) {
  uint64_t n = 0;
  if (m.size() < 12 || std::memcmp(m.data(), kMagic, 4) != 0) return false;
  std::memcpy(&n, m.data() + 4, 8);
  if (n != m.size() - 12) return false;
  *payload = m.substr(12);
  return true;
}

}  // namespace

void put_live_options(WireWriter& w, const LiveOptions& o) {
  w.pod(uint8_t(o.fast_math)), w.pod(int32_t(o.max_regs)), w.pod(uint8_t(o.line_info));
  w.pod(int32_t(o.block.x)), w.pod(int32_t(o.block.y));
  w.pod(int32_t(o.px)), w.pod(int32_t(o.rows)), w.pod(int32_t(o.arch));
}

LiveOptions get_live_options(WireReader& in) {
  LiveOptions o;
  o.fast_math = in.pod<uint8_t>() != 0;
  o.max_regs = in.pod<int32_t>();
  o.line_info = in.pod<uint8_t>() != 0;
  o.block.x = in.pod<int32_t>(), o.block.y = in.pod<int32_t>();
  o.px = in.pod<int32_t>(), o.rows = in.pod<int32_t>(), o.arch = in.pod<int32_t>();
  return o;
}

namespace {

std::string size_words(uint64_t bytes) {
  const uint64_t mib = bytes >> 20;
  return mib % 1024 == 0 ? std::to_string(mib / 1024) + " GiB" : std::to_string(mib) + " MiB";
}

// This process's address space now (/proc/self/statm's first field, in pages).
uint64_t mapped_bytes() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  unsigned long long pages = 0;
  if (f) {
    if (std::fscanf(f, "%llu", &pages) != 1) pages = 0;
    std::fclose(f);
  }
  return uint64_t(pages) * uint64_t(sysconf(_SC_PAGESIZE));
}

}  // namespace

CompileLimits compile_limits() {
  CompileLimits l;
  auto number = [](const char* var, double lo, double hi, double def, const char* unit) {
    const char* v = std::getenv(var);
    if (!v || !*v) return def;
    char* end = nullptr;
    errno = 0;
    const double x = std::strtod(v, &end);
    if (errno || *end || !(x >= lo && x <= hi))
      throw Error(ErrorKind::Usage, std::string(var) + "=" + printable(v) + ": expected " + unit +
                                        ", " + fmt("%g", lo) + " to " + fmt("%g", hi));
    return x;
  };
  l.timeout_s = number("LAB_COMPILE_TIMEOUT_S", 0.1, 3600, l.timeout_s, "seconds");
  l.memory_bytes =
      uint64_t(number("LAB_COMPILE_MEMORY_MIB", 64, 1 << 20, double(l.memory_bytes >> 20), "MiB"))
      << 20;
  return l;
}

LiveBuild live_compile(const std::string& source, const LiveOptions& o, const std::string& name) {
  return live_compile(source, o, name, compile_limits());
}

LiveBuild live_compile(const std::string& source, const LiveOptions& o, const std::string& name,
                       const CompileLimits& limits) {
  const std::string prefix = name.empty() ? "" : name + ": ";
  LiveOptions resolved = o;
  resolved.arch = live_arch(o);  // here: the child never touches the GPU
  const std::string refusal = nvrtc_arch_refusal(resolved.arch);
  if (!refusal.empty())
    throw Error(o.arch > 0 ? ErrorKind::Usage : ErrorKind::Unavailable, prefix + refusal);

  WireWriter req;
  req.str(source);
  put_live_options(req, resolved);
  req.pod(uint64_t(limits.memory_bytes));
  const std::string request = framed(req);

  // /proc/self/exe: this very binary, even where its file was replaced or removed since.
  const std::string self = self_executable();
  std::string why;
  std::unique_ptr<Child> c =
      Child::spawn({self, "__compile"}, {ChildIo::Socket, true, "/proc/self/exe"}, &why);
  if (!c)
    throw Error(ErrorKind::Unavailable,
                "cannot start the compiler process (" + self + " __compile): " + why);

  const auto deadline =
      SteadyClock::now() + std::chrono::milliseconds(int64_t(limits.timeout_s * 1e3));
  // The request, then the reply until the child closes its end, both by the deadline.
  std::string reply;
  const IoResult io = exchange_until_eof(c->fd, request, kMaxReply, deadline, &reply);
  if (io == IoResult::Timeout) {
    c->kill();
    throw Error(ErrorKind::Data, prefix + "compiling took longer than " +
                                     fmt("%g", limits.timeout_s) +
                                     " s (a macro or template that expands without end?); "
                                     "LAB_COMPILE_TIMEOUT_S sets the limit");
  }
  if (io == IoResult::Failed) {
    c->kill();
    throw Error(ErrorKind::Data, prefix + "the compiler's output is over " + size_words(kMaxReply) +
                                     ": not compiled");
  }
  // Its reply is complete at EOF: it ends at once, else it is ended.
  if (!c->reap(std::max(1000, std::min(ms_left(deadline), 5000)))) c->kill();
  const std::string memory_words =
      prefix + "compiling needed more than " + size_words(limits.memory_bytes) +
      " of memory (a macro or template that expands without end?); LAB_COMPILE_MEMORY_MIB sets "
      "the limit";
  std::string payload;
  if (!unframe(reply, &payload)) {
    // No reply: what ended it. Out of address space, NVRTC may abort rather than fail.
    if (c->exited() && WIFSIGNALED(c->status()) &&
        (WTERMSIG(c->status()) == SIGABRT || WTERMSIG(c->status()) == SIGSEGV ||
         WTERMSIG(c->status()) == SIGBUS))
      throw Error(ErrorKind::Data,
                  prefix + "the compiler process ended with " + status_words(c->status()) +
                      " (possibly its memory limit of " + size_words(limits.memory_bytes) + ")");
    throw Error(ErrorKind::Unavailable,
                prefix + "the compiler process ended without a result (" +
                    (c->exited() ? status_words(c->status()) : std::string("still running")) + ")");
  }
  LiveBuild b;
  b.source = source;
  b.options = o;
  b.arch = resolved.arch;
  Status st = Status::Built;
  uint8_t kind = 0;
  std::string message;
  try {
    WireReader in(payload);
    st = Status(in.pod<uint8_t>());
    if (st == Status::Failed) {
      kind = in.pod<uint8_t>();
      message = in.str();
      if (kind > uint8_t(ErrorKind::Refused)) throw Error(ErrorKind::Data, "an unknown error kind");
    } else if (st == Status::Built) {
      b.ok = in.pod<uint8_t>() != 0;
      b.log = in.str();
      const uint32_t n = in.pod<uint32_t>();
      if (n > 100000) throw Error(ErrorKind::Data, "too many messages");
      for (uint32_t i = 0; i < n; ++i) {
        LiveDiagnostic d;
        d.line = in.pod<int32_t>();
        d.error = in.pod<uint8_t>() != 0;
        d.message = in.str();
        b.diagnostics.push_back(std::move(d));
      }
      b.ptx = in.str();
      const std::string cubin = in.str();
      b.cubin.assign(cubin.begin(), cubin.end());
      b.lowered_name = in.str();
      b.compile_ms = in.pod<double>();
      LiveResources& res = b.resources;
      res.regs = in.pod<int32_t>(), res.barriers = in.pod<int32_t>();
      res.smem_bytes = long(in.pod<int64_t>()), res.stack_bytes = long(in.pod<int64_t>());
      res.spill_stores = long(in.pod<int64_t>()), res.spill_loads = long(in.pod<int64_t>());
    } else if (st != Status::OutOfMemory) {
      throw Error(ErrorKind::Data, "an unknown status");
    }
    in.end();
  } catch (const Error& e) {
    throw Error(ErrorKind::Internal,
                prefix + "the compiler process sent an unreadable reply: " + e.what());
  }
  if (st == Status::OutOfMemory) throw Error(ErrorKind::Data, memory_words);
  if (st == Status::Failed) throw Error(ErrorKind(kind), prefix + message);
  return b;
}

int live_compile_child_main(int in_fd, int out_fd) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the lab
  // Whatever NVRTC might print goes to stderr; the reply keeps its own descriptor.
  const int proto = dup(out_fd);
  if (proto < 0) return 71;
  dup2(2, 1);
  std::string message;
  char buf[1 << 16];
  for (;;) {
    const ssize_t k = ::read(in_fd, buf, sizeof buf);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) break;
    message.append(buf, size_t(k));
    if (message.size() > kMaxRequest) return 65;
  }
  std::string payload;
  if (!unframe(message, &payload)) return 65;
  WireWriter w;
  try {
    WireReader in(payload);
    const std::string source = in.str();
    const LiveOptions o = get_live_options(in);
    const uint64_t memory = in.pod<uint64_t>();
    in.end();
    // The limit is on what compiling adds: the binary and its libraries (cuBLAS alone maps over
    // half a GiB) are already in the address space.
    const uint64_t limit = mapped_bytes() + memory;
    const rlimit as{rlim_t(limit), rlim_t(limit)}, core{0, 0};
    setrlimit(RLIMIT_CORE, &core);
    if (setrlimit(RLIMIT_AS, &as) != 0) return 71;
    const LiveBuild b = live_compile_in_process(source, o);
    w.pod(uint8_t(Status::Built));
    w.pod(uint8_t(b.ok));
    w.str(b.log);
    w.pod(uint32_t(b.diagnostics.size()));
    for (const LiveDiagnostic& d : b.diagnostics)
      w.pod(int32_t(d.line)), w.pod(uint8_t(d.error)), w.str(d.message);
    w.str(b.ptx);
    w.str(std::string(b.cubin.begin(), b.cubin.end()));
    w.str(b.lowered_name);
    w.pod(b.compile_ms);
    const LiveResources& res = b.resources;
    w.pod(int32_t(res.regs)), w.pod(int32_t(res.barriers));
    w.pod(int64_t(res.smem_bytes)), w.pod(int64_t(res.stack_bytes));
    w.pod(int64_t(res.spill_stores)), w.pod(int64_t(res.spill_loads));
  } catch (const std::bad_alloc&) {
    w.s.clear();
    w.pod(uint8_t(Status::OutOfMemory));
  } catch (const Error& e) {
    w.s.clear();
    w.pod(uint8_t(Status::Failed)), w.pod(uint8_t(e.kind())), w.str(e.what());
  } catch (const std::exception& e) {
    w.s.clear();
    w.pod(uint8_t(Status::Failed)), w.pod(uint8_t(ErrorKind::Internal)), w.str(e.what());
  }
  const std::string out = framed(w);
  for (size_t at = 0; at < out.size();) {
    const ssize_t k = ::write(proto, out.data() + at, out.size() - at);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return 74;
    at += size_t(k);
  }
  return 0;
}

}  // namespace lab
