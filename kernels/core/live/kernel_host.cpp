#include "kernel_host.h"

#include <cuda_runtime_api.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "check.h"
#include "counters.h"
#include "delay.h"
#include "device.h"
#include "driver_entry.h"
#include "measure.h"
#include "pipeline.h"
#include "presets.h"
#include "printable.h"
#include "runner.h"
#include "stats.h"
#include "subprocess.h"
#include "text.h"
#include "toolkit.h"
#include "wire.h"

namespace lab {

using Clock = std::chrono::steady_clock;

const char* trial_outcome_name(TrialOutcome o) {
  switch (o) {
    case TrialOutcome::Passed:
      return "passed";
    case TrialOutcome::Unwritten:
      return "did not write its outputs";
    case TrialOutcome::Faulted:
      return "faulted";
    case TrialOutcome::Timeout:
      return "did not finish";
    case TrialOutcome::Crashed:
      return "crashed";
    case TrialOutcome::Protocol:
      return "unreadable reply";
    case TrialOutcome::Error:
      return "could not run";
  }
  return "?";
}

// ---- the wire format ------------------------------------------------------------------------
// Frames of wire.h with the magic "KLT1". Payloads are fields in a fixed order.

namespace {

constexpr char kMagic[4] = {'K', 'L', 'T', '1'};
// Requests and their replies: a trial (Q, A), an install (I, i), a frame (L, l), a shared region
// (S and its descriptor, s), an uninstall (U, u); R: the child is ready.
constexpr char kReady = 'R', kRequest = 'Q', kReport = 'A', kInstall = 'I', kInstalled = 'i',
               kLaunch = 'L', kLaunched = 'l', kShare = 'S', kShared = 's', kUninstall = 'U',
               kUninstalled = 'u';
constexpr uint64_t kMaxPayload = uint64_t(1) << 30;  // a 4K BGRA frame is 33 MB

std::string frame(char type, const std::string& payload) {
  return wire_frame(kMagic, type, payload);
}

void put_build(WireWriter& w, const LiveBuild& b) {
  w.str(b.source);
  put_live_options(w, b.options);
  w.pod(int32_t(b.arch));
  w.bytes(b.cubin.data(), b.cubin.size());
  w.str(b.lowered_name);
}

LiveBuild get_build(WireReader& in) {
  LiveBuild b;
  b.source = in.str();
  b.options = get_live_options(in);
  b.arch = in.pod<int32_t>();
  const std::string cubin = in.str();
  b.cubin.assign(cubin.begin(), cubin.end());
  b.lowered_name = in.str();
  b.ok = !b.cubin.empty() && !b.lowered_name.empty();
  return b;
}

TrialOutcome get_outcome(WireReader& in) {
  const uint8_t o = in.pod<uint8_t>();
  if (o > uint8_t(TrialOutcome::Error)) throw WireError("an unknown outcome");
  return TrialOutcome(o);
}

void put_desc(WireWriter& w, const ImageDesc& d) {
  w.pod(int32_t(d.width)), w.pod(int32_t(d.height)), w.pod(int32_t(d.channels));
  w.pod(uint8_t(d.type));
}

ImageDesc get_desc(WireReader& in) {
  ImageDesc d;
  d.width = in.pod<int32_t>(), d.height = in.pod<int32_t>(), d.channels = in.pod<int32_t>();
  const uint8_t type = in.pod<uint8_t>();
  if (type > uint8_t(PixelType::U32)) throw WireError("an unknown pixel type");
  d.type = PixelType(type);
  if (d.width < 0 || d.height < 0 || d.width > 65536 || d.height > 65536 || d.channels < 0 ||
      d.channels > 4)
    throw WireError("an image of impossible size");
  return d;
}

}  // namespace

std::string encode_trial_request(const TrialRequest& r) {
  WireWriter w;
  put_build(w, r.build);
  w.str(r.stage), w.str(r.add_slot), w.str(r.pipeline);
  const ImageDesc d = r.frame.desc();
  put_desc(w, d);
  w.bytes(r.frame.bytes(), d.empty() ? 0 : d.bytes());
  w.str(r.lab_size), w.pod(uint64_t(r.lab_seed));
  return w.s;
}

TrialRequest decode_trial_request(const std::string& payload) {
  WireReader in(payload);
  TrialRequest r;
  r.build = get_build(in);
  r.stage = in.str(), r.add_slot = in.str(), r.pipeline = in.str();
  const ImageDesc d = get_desc(in);
  // The frame's bytes must be in the message before they are allocated: a header can announce
  // 64 GB.
  if (!d.empty() && d.bytes() > in.remaining()) throw WireError("a frame larger than its message");
  if (!d.empty()) {
    r.frame = HostImage(d);
    in.bytes(r.frame.bytes(), d.bytes());
  } else {
    in.bytes(nullptr, 0);
  }
  r.lab_size = in.str();
  r.lab_seed = in.pod<uint64_t>();
  in.end();
  return r;
}

std::string encode_trial_report(const TrialReport& r) {
  WireWriter w;
  w.pod(uint8_t(r.outcome));
  w.str(r.message);
  w.pod(r.kernel_ms), w.pod(r.trial_ms);
  w.pod(uint8_t(r.compared)), w.pod(r.max_abs), w.pod(uint8_t(r.within_tolerance));
  w.pod(r.unwritten), w.pod(r.total);
  w.pod(uint8_t(r.memchecked));
  w.pod(uint32_t(r.memcheck.size()));
  for (const MemcheckFinding& f : r.memcheck) w.pod(int32_t(f.line)), w.str(f.text);
  return w.s;
}

TrialReport decode_trial_report(const std::string& payload) {
  WireReader in(payload);
  TrialReport r;
  r.outcome = get_outcome(in);
  r.message = in.str();
  r.kernel_ms = in.pod<double>(), r.trial_ms = in.pod<double>();
  r.compared = in.pod<uint8_t>() != 0;
  r.max_abs = in.pod<double>();
  r.within_tolerance = in.pod<uint8_t>() != 0;
  r.unwritten = in.pod<uint64_t>(), r.total = in.pod<uint64_t>();
  r.memchecked = in.pod<uint8_t>() != 0;
  const uint32_t n = in.pod<uint32_t>();
  if (n > 1000) throw WireError("too many findings");
  for (uint32_t i = 0; i < n; ++i) {
    MemcheckFinding f;
    f.line = in.pod<int32_t>();
    f.text = in.str();
    r.memcheck.push_back(std::move(f));
  }
  in.end();
  return r;
}

namespace {

void put_slot(WireWriter& w, const HostSlot& s) {
  put_desc(w, s.desc);
  w.pod(s.pitch);
  w.bytes(s.handle.data(), s.handle.size());
  w.pod(s.region), w.pod(s.offset);
}

HostSlot get_slot(WireReader& in) {
  HostSlot s;
  s.desc = get_desc(in);
  s.pitch = in.pod<uint64_t>();
  in.bytes(s.handle.data(), s.handle.size());
  s.region = in.pod<uint64_t>(), s.offset = in.pod<uint64_t>();
  if (s.pitch < s.desc.row_bytes() || s.pitch > (uint64_t(1) << 24))
    throw WireError("a slot whose pitch does not hold its rows");
  return s;
}

void put_stalls(WireWriter& w, const std::vector<StallReason>& v) {
  w.pod(uint32_t(v.size()));
  for (const StallReason& s : v) w.str(s.metric), w.str(s.words), w.pod(s.per_issue);
}

std::vector<StallReason> get_stalls(WireReader& in) {
  const uint32_t n = in.pod<uint32_t>();
  if (n > 256) throw WireError("too many stall reasons");
  std::vector<StallReason> v(n);
  for (StallReason& s : v) s.metric = in.str(), s.words = in.str(), s.per_issue = in.pod<double>();
  return v;
}

void put_counters(WireWriter& w, const CounterValues& v) {
  w.str(v.range);
  for (double x : {v.achieved_occupancy_pct, v.dram_read_bytes, v.dram_write_bytes, v.l2_hit_pct,
                   v.sm_throughput_pct, v.mem_throughput_pct, v.duration_ns, v.fp32_flops,
                   v.fp64_flops, v.inst_executed})
    w.pod(x);
  put_stalls(w, v.stalls);
  put_stalls(w, v.top_stalls);
}

CounterValues get_counters(WireReader& in) {
  CounterValues v;
  v.range = in.str();
  for (double* x : {&v.achieved_occupancy_pct, &v.dram_read_bytes, &v.dram_write_bytes,
                    &v.l2_hit_pct, &v.sm_throughput_pct, &v.mem_throughput_pct, &v.duration_ns,
                    &v.fp32_flops, &v.fp64_flops, &v.inst_executed})
    *x = in.pod<double>();
  v.stalls = get_stalls(in);
  v.top_stalls = get_stalls(in);
  return v;
}

}  // namespace

std::string encode_host_launch(const HostLaunch& l) {
  WireWriter w;
  w.pod(l.frame), w.pod(uint8_t(l.transport));
  w.pod(uint32_t(l.in.size()));
  for (const HostSlot& s : l.in) put_slot(w, s);
  w.pod(uint32_t(l.out.size()));
  for (const HostSlot& s : l.out) put_slot(w, s);
  w.pod(uint32_t(l.params.size()));
  for (float v : l.params) w.pod(v);
  w.pod(int32_t(l.block.x)), w.pod(int32_t(l.block.y));
  w.pod(uint8_t(l.counters));
  w.pod(uint8_t(l.has_event));
  w.bytes(l.event.data(), l.event.size());
  return w.s;
}

HostLaunch decode_host_launch(const std::string& payload) {
  WireReader in(payload);
  HostLaunch l;
  l.frame = in.pod<uint64_t>();
  const uint8_t t = in.pod<uint8_t>();
  if (t > uint8_t(HostTransport::Shared)) throw WireError("an unknown transport");
  l.transport = HostTransport(t);
  for (std::vector<HostSlot>* v : {&l.in, &l.out}) {
    const uint32_t n = in.pod<uint32_t>();
    if (n > 4) throw WireError("more than 4 slots");
    for (uint32_t i = 0; i < n; ++i) v->push_back(get_slot(in));
  }
  const uint32_t n = in.pod<uint32_t>();
  if (n > 8) throw WireError("more than 8 parameters");
  for (uint32_t i = 0; i < n; ++i) l.params.push_back(in.pod<float>());
  l.block.x = in.pod<int32_t>(), l.block.y = in.pod<int32_t>();
  l.counters = in.pod<uint8_t>() != 0;
  l.has_event = in.pod<uint8_t>() != 0;
  in.bytes(l.event.data(), l.event.size());
  in.end();
  return l;
}

std::string encode_host_report(const HostLaunchReport& r) {
  WireWriter w;
  w.pod(uint8_t(r.outcome));
  w.str(r.message);
  w.pod(r.kernel_ms), w.pod(r.child_ms), w.pod(r.wait_ms);
  w.pod(int32_t(r.attrs.regs)), w.pod(uint64_t(r.attrs.static_smem));
  w.pod(uint64_t(r.attrs.local_bytes)), w.pod(int32_t(r.attrs.max_threads));
  w.pod(int32_t(r.attrs.binary_version)), w.pod(uint64_t(r.attrs.max_dyn_smem));
  w.pod(int32_t(r.blocks_per_sm));
  w.pod(uint32_t(r.grid.x)), w.pod(uint32_t(r.grid.y)), w.pod(uint32_t(r.block.x));
  w.pod(uint32_t(r.block.y));
  w.pod(uint8_t(r.counted));
  if (r.counted) w.str(r.counters_why), put_counters(w, r.values);
  return w.s;
}

HostLaunchReport decode_host_report(const std::string& payload) {
  WireReader in(payload);
  HostLaunchReport r;
  r.outcome = get_outcome(in);
  r.message = in.str();
  r.kernel_ms = in.pod<double>(), r.child_ms = in.pod<double>(), r.wait_ms = in.pod<double>();
  r.attrs.regs = in.pod<int32_t>(), r.attrs.static_smem = in.pod<uint64_t>();
  r.attrs.local_bytes = in.pod<uint64_t>(), r.attrs.max_threads = in.pod<int32_t>();
  r.attrs.binary_version = in.pod<int32_t>(), r.attrs.max_dyn_smem = in.pod<uint64_t>();
  r.blocks_per_sm = in.pod<int32_t>();
  r.grid.x = in.pod<uint32_t>(), r.grid.y = in.pod<uint32_t>();
  r.block.x = in.pod<uint32_t>(), r.block.y = in.pod<uint32_t>();
  r.counted = in.pod<uint8_t>() != 0;
  if (r.counted) r.counters_why = in.str(), r.values = get_counters(in);
  in.end();
  return r;
}

const char* host_ordering_name(HostOrdering o) {
  return o == HostOrdering::Sync ? "host synchronisation" : "interprocess events";
}

const char* host_transport_name(HostTransport t) {
  return t == HostTransport::Ipc ? "CUDA IPC" : "page-locked shared memory";
}

HostTransport host_transport_for(bool integrated) {
  const char* force = std::getenv("LAB_KERNEL_HOST_SHARED");
  if (integrated || (force && std::strcmp(force, "1") == 0)) return HostTransport::Shared;
  return HostTransport::Ipc;
}

namespace {

using Io = IoResult;

std::string cuda_words(int code) {
  const cudaError_t e = cudaError_t(code);
  return std::string(cudaGetErrorString(e)) + " (" + cudaGetErrorName(e) + ", error " +
         std::to_string(code) + ")";
}

}  // namespace

// ---- the parent ----------------------------------------------------------------------------

struct KernelHost::Process {
  std::unique_ptr<Child> proc;
  bool ready = false;
};

// A reply read back (ok, its payload), or the outcome that stopped the exchange, in words.
struct KernelHost::Reply {
  bool ok = false;
  std::string payload;
  TrialOutcome outcome = TrialOutcome::Error;
  std::string message;
};

std::vector<std::string> trial_command() {
  return {self_executable(), "__trial"};
}

KernelHost::KernelHost(std::vector<std::string> command) : m_command(std::move(command)) {}
KernelHost::~KernelHost() = default;

std::unique_ptr<KernelHost::Process> KernelHost::spawn(const std::vector<std::string>& argv,
                                                       std::string* why) {
  // Its own process group: a timeout kills compute-sanitizer and its target together.
  std::unique_ptr<Child> c = Child::spawn(argv, {ChildIo::Socket, true, ""}, why);
  if (!c) return nullptr;
  ++m_spawned;
  auto p = std::make_unique<Process>();
  p->proc = std::move(c);
  return p;
}

void KernelHost::warm() {
  if (m_warm && !m_warm->proc->reap(0)) return;
  std::string why;
  m_warm = spawn(m_command, &why);  // a failure shows at the next request
}

int KernelHost::child_pid() const {
  return m_warm && !m_warm->proc->exited() ? int(m_warm->proc->pid()) : -1;
}

KernelHost::Process* KernelHost::warm_child(std::string* why) {
  if (!m_warm || m_warm->proc->reap(0)) {
    m_installed = false;  // a new child has no kernel
    m_warm = spawn(m_command, why);
  }
  return m_warm.get();
}

// A child that faulted exits (its context is unusable) and a killed one is gone: the next child
// starts now, so that its context is made before the next request. One that only refused a
// request stays, with its kernel.
void KernelHost::retire_if_gone(TrialOutcome o) {
  if (!m_warm) return;
  if (o == TrialOutcome::Faulted || m_warm->proc->exited() || m_warm->proc->reap(0)) {
    // LAB_TRIAL_TRY_RESET (a diagnosis): the faulted child tries a device reset, with no GL in
    // its process, and says on stderr how it went; it gets the time to, not a SIGKILL.
    if (o == TrialOutcome::Faulted && std::getenv("LAB_TRIAL_TRY_RESET")) m_warm->proc->reap(65000);
    m_warm.reset();
    m_installed = false;
    warm();
  }
}

// A child that ended (reaped, or killed if it lingers), or that sent what is not a reply
// (killed), as an outcome in words.
KernelHost::Reply KernelHost::died(Process& c, const std::string& when) {
  c.proc->reap(2000);
  if (!c.proc->exited()) c.proc->kill();
  Reply rep;
  rep.outcome = TrialOutcome::Crashed;
  rep.message = "the kernel's process ended " + when + ": " + status_words(c.proc->status());
  return rep;
}

KernelHost::Reply KernelHost::garbage(Process& c, const std::string& problem) {
  c.proc->kill();
  Reply rep;
  rep.outcome = TrialOutcome::Protocol;
  rep.message = "the kernel's process sent an unreadable reply: " + problem;
  return rep;
}

KernelHost::Reply KernelHost::ready(Process& c, double start_s) {
  Reply rep;
  if (c.ready) {
    rep.ok = true;
    return rep;
  }
  const auto deadline = Clock::now() + std::chrono::milliseconds(int64_t(start_s * 1e3));
  const WireFrame f = read_wire_frame(c.proc->fd, kMagic, kMaxPayload, &deadline);
  if (f.io == Io::Timeout) {
    c.proc->kill();
    rep.outcome = TrialOutcome::Error;
    rep.message = "the kernel's process did not start within " + fmt("%.0f", start_s) + " s";
    return rep;
  }
  if (!f.problem.empty()) {
    if (c.proc->reap(200) && WIFSIGNALED(c.proc->status())) return died(c, "while starting");
    return garbage(c, f.problem);
  }
  if (f.io != Io::Ok) return died(c, "before it was ready");
  if (f.type != kReady) return garbage(c, "its first message is not 'ready'");
  WireReader in(f.payload);
  try {
    const bool ok = in.pod<uint8_t>() != 0;
    const std::string what = in.str();
    if (!ok) {  // no GPU, no context: it exits
      c.proc->reap(2000);
      rep.outcome = TrialOutcome::Error;
      rep.message = "the kernel's process has no GPU: " + what;
      return rep;
    }
  } catch (const WireError& e) {
    return garbage(c, e.what());
  }
  c.ready = true;
  rep.ok = true;
  return rep;
}

KernelHost::Reply KernelHost::transact(Process& c, char type, const std::string& payload,
                                       char reply_type, Clock::time_point deadline,
                                       const std::string& timeout_words) {
  Reply rep;
  const Io w = write_all(c.proc->fd, frame(type, payload), &deadline);
  if (w == Io::Timeout) {
    c.proc->kill();
    rep.outcome = TrialOutcome::Timeout;
    rep.message = timeout_words + " (it did not read its input)";
    return rep;
  }
  if (w != Io::Ok) return died(c, "before it read its input");
  const WireFrame f = read_wire_frame(c.proc->fd, kMagic, kMaxPayload, &deadline);
  if (f.io == Io::Timeout) {
    c.proc->kill();
    rep.outcome = TrialOutcome::Timeout;
    rep.message = timeout_words;
    return rep;
  }
  if (!f.problem.empty()) {
    if (c.proc->reap(200) && WIFSIGNALED(c.proc->status())) return died(c, "while it reported");
    return garbage(c, f.problem);
  }
  if (f.io != Io::Ok) return died(c, "before it reported");
  if (f.type != reply_type) return garbage(c, "a reply of the wrong kind");
  rep.ok = true;
  rep.payload = f.payload;
  return rep;
}

TrialReport KernelHost::exchange(Process& c, const TrialRequest& req, double timeout_s,
                                 double start_s) {
  TrialReport rep;
  Reply r = ready(c, start_s);
  if (r.ok) {
    const auto deadline = Clock::now() + std::chrono::milliseconds(int64_t(timeout_s * 1e3));
    r = transact(
        c, kRequest, encode_trial_request(req), kReport, deadline,
        "did not finish in " + fmt("%g", timeout_s) + " s: an endless loop, or far too slow");
  }
  if (!r.ok) {
    rep.outcome = r.outcome;
    rep.message = r.message;
    return rep;
  }
  try {
    rep = decode_trial_report(r.payload);
  } catch (const WireError& e) {
    r = garbage(c, e.what());
    rep.outcome = r.outcome, rep.message = r.message;
  }
  return rep;
}

TrialReport KernelHost::install(const LiveBuild& build, const TrialLimits& limits) {
  TrialReport rep;
  std::string why;
  Process* c = warm_child(&why);
  if (!c) {
    rep.message = why;
    return rep;
  }
  Reply r = ready(*c, limits.start_timeout_s);
  if (r.ok) {
    WireWriter w;
    put_build(w, build);
    const auto deadline = Clock::now() + std::chrono::milliseconds(int64_t(limits.timeout_s * 1e3));
    r = transact(*c, kInstall, w.s, kInstalled, deadline,
                 "did not load the kernel in " + fmt("%g", limits.timeout_s) + " s");
  }
  if (r.ok) {
    try {
      rep = decode_trial_report(r.payload);
    } catch (const WireError& e) {
      r = garbage(*c, e.what());
    }
  }
  if (!r.ok) rep.outcome = r.outcome, rep.message = r.message;
  m_installed = rep.passed();
  retire_if_gone(rep.outcome);
  return rep;
}

HostLaunchReport KernelHost::launch(const HostLaunch& l, double deadline_s) {
  const auto t0 = Clock::now();
  HostLaunchReport rep;
  if (!m_installed || !m_warm || !m_warm->ready) {
    rep.message = "no kernel is installed in the kernel's process";
    return rep;
  }
  const Reply r = transact(*m_warm, kLaunch, encode_host_launch(l), kLaunched,
                           t0 + std::chrono::milliseconds(int64_t(deadline_s * 1e3)),
                           "did not finish in " + fmt("%g", deadline_s) + " s");
  if (r.ok) {
    try {
      rep = decode_host_report(r.payload);
    } catch (const WireError& e) {
      const Reply g = garbage(*m_warm, e.what());
      rep.outcome = g.outcome, rep.message = g.message;
    }
  } else {
    rep.outcome = r.outcome;
    rep.message = r.message;
  }
  rep.round_trip_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  if (!rep.ran()) {
    m_installed = false;  // whatever went wrong, the stage goes back to its built-in variant
    if (m_warm && !m_warm->proc->exited() && rep.outcome != TrialOutcome::Error)
      m_warm->proc->kill();
    retire_if_gone(rep.outcome);
  }
  return rep;
}

void KernelHost::uninstall() {
  if (!m_installed || !m_warm) return;
  m_installed = false;
  const Reply r = transact(*m_warm, kUninstall, "", kUninstalled,
                           Clock::now() + std::chrono::seconds(2), "did not uninstall in 2 s");
  if (!r.ok) retire_if_gone(r.outcome);
}

HostSlot KernelHost::ipc_slot(const ImageRef& r) {
  using GetRange = int (*)(unsigned long long*, size_t*, unsigned long long);
  static GetRange range = nullptr;
  static const bool found = driver_function("cuMemGetAddressRange", range);
  HostSlot s;
  s.desc = r.desc, s.pitch = r.pitch;
  unsigned long long base = 0;
  size_t size = 0;
  if (!found || range(&base, &size, reinterpret_cast<unsigned long long>(r.data)) != 0)
    throw Error(ErrorKind::Unavailable,
                "the kernel host: a slot that is not device memory cannot be shared by CUDA IPC");
  cudaIpcMemHandle_t h;
  LAB_CUDA_CHECK(cudaIpcGetMemHandle(&h, reinterpret_cast<void*>(base)));
  std::memcpy(s.handle.data(), &h, sizeof h);
  s.offset = reinterpret_cast<unsigned long long>(r.data) - base;
  return s;
}

HostSlot KernelHost::shared_slot(size_t index, const ImageRef& r, void** staging) {
  if (m_staging.size() <= index) m_staging.resize(index + 1);
  Staging& st = m_staging[index];
  const size_t bytes = r.pitch * size_t(std::max(r.desc.height, 1));
  if (st.region.size() < bytes) st = Staging{SharedRegion(bytes), -1};
  if (st.shared_with != m_spawned || !m_warm) {
    share(st.region);
    st.shared_with = m_spawned;
  }
  HostSlot s;
  s.desc = r.desc, s.pitch = r.pitch;
  s.region = st.region.id();
  *staging = st.region.device_pointer();
  return s;
}

KernelHostFault::KernelHostFault(const std::string& stage_, uint64_t frame_, TrialOutcome o,
                                 const std::string& message)
    : Error(ErrorKind::Internal,
            "frame " + std::to_string(frame_) + ": stage " + stage_ + ", variant user, " + message),
      stage(stage_),
      frame(frame_),
      outcome(o) {}

HostedLaunches::HostedLaunches(KernelHost& host, HostTransport transport, double deadline_s)
    : m_host(host), m_transport(transport), m_deadline_s(deadline_s) {
  const char* o = std::getenv("LAB_KERNEL_HOST_ORDER");
  const std::string order = o ? o : "";
  if (!order.empty() && order != "sync" && order != "events")
    throw Error(ErrorKind::Usage,
                "LAB_KERNEL_HOST_ORDER=" + printable(order) + ": expected sync or events");
  m_forced = !order.empty() || transport == HostTransport::Shared;
  m_ordering = order == "events" ? HostOrdering::Events : HostOrdering::Sync;
}

HostedLaunches::~HostedLaunches() {
  if (m_event) cudaEventDestroy(m_event);
}

HostLaunchReport HostedLaunches::run(const std::string& stage, const StageArgs& a,
                                     const std::vector<ParamSpec>& specs, cudaStream_t stream,
                                     bool counters) {
  const uint64_t frame = ++m_frames;
  constexpr uint64_t kTrialFrames = 32;
  const bool trying = !m_forced && !counters && frame <= kTrialFrames;
  if (trying) m_ordering = frame % 2 ? HostOrdering::Sync : HostOrdering::Events;
  const auto t0 = std::chrono::steady_clock::now();
  HostLaunch l;
  l.frame = frame;
  l.transport = m_transport;
  l.block = a.block;
  l.counters = counters;
  for (const ParamSpec& p : specs) {
    if (l.params.size() == 8) break;
    const auto it = a.params.find(p.name);
    l.params.push_back(float(it != a.params.end() ? it->second : p.def));
  }
  std::vector<void*> out_staging;
  for (size_t k = 0; k < a.in.size() + a.out.size(); ++k) {
    const bool input = k < a.in.size();
    const ImageRef& r = input ? a.in[k] : a.out[k - a.in.size()];
    HostSlot slot;
    if (m_transport == HostTransport::Ipc) {
      slot = m_host.ipc_slot(r);
    } else {
      void* staging = nullptr;
      slot = m_host.shared_slot(k, r, &staging);
      if (input)
        LAB_CUDA_CHECK(cudaMemcpy2DAsync(staging, r.pitch, r.data, r.pitch, r.desc.row_bytes(),
                                         size_t(r.desc.height), cudaMemcpyDefault, stream));
      else
        out_staging.push_back(staging);
    }
    (input ? l.in : l.out).push_back(slot);
  }
  if (m_transport == HostTransport::Shared || m_ordering == HostOrdering::Sync || counters) {
    LAB_CUDA_CHECK(cudaStreamSynchronize(stream));  // what the child reads is written
  } else {
    if (!m_event) {
      LAB_CUDA_CHECK(
          cudaEventCreateWithFlags(&m_event, cudaEventInterprocess | cudaEventDisableTiming));
      cudaIpcEventHandle_t h;
      LAB_CUDA_CHECK(cudaIpcGetEventHandle(&h, m_event));
      std::memcpy(m_event_handle.data(), &h, sizeof h);
    }
    LAB_CUDA_CHECK(cudaEventRecord(m_event, stream));
    l.has_event = true;
    l.event = m_event_handle;
  }
  // Counters replay the launch several times: far longer than a frame may take.
  const HostLaunchReport rep = m_host.launch(l, counters ? m_deadline_s + 60 : m_deadline_s);
  if (!rep.ran()) {
    const std::string words =
        rep.outcome == TrialOutcome::Faulted || rep.outcome == TrialOutcome::Timeout
            ? rep.message
            : std::string(trial_outcome_name(rep.outcome)) + ": " + rep.message;
    throw KernelHostFault(stage, frame, rep.outcome, words);
  }
  for (size_t k = 0; k < out_staging.size(); ++k) {
    const ImageRef& r = a.out[k];
    LAB_CUDA_CHECK(cudaMemcpy2DAsync(r.data, r.pitch, out_staging[k], r.pitch, r.desc.row_bytes(),
                                     size_t(r.desc.height), cudaMemcpyDefault, stream));
  }
  if (trying) {
    m_order_us[int(m_ordering)].push_back(
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    if (frame == kTrialFrames)  // the faster from now on
      m_ordering =
          median(m_order_us[1]) < median(m_order_us[0]) ? HostOrdering::Events : HostOrdering::Sync;
  }
  return rep;
}

RemoteLaunch HostedLaunches::launch(const std::string& stage, const StageArgs& a,
                                    const std::vector<ParamSpec>& specs, cudaStream_t stream) {
  const HostLaunchReport rep = run(stage, a, specs, stream, false);
  if (m_kernel_us.size() < 1000000) {
    m_round_trip_us.push_back(1e3 * rep.round_trip_ms);
    m_kernel_us.push_back(1e3 * rep.kernel_ms);
    m_child_us.push_back(1e3 * rep.child_ms);
    m_wait_us.push_back(1e3 * rep.wait_ms);
  }
  RemoteLaunch r;
  r.grid = rep.grid, r.block = rep.block;
  r.ms = float(rep.kernel_ms);
  r.attrs = rep.attrs;
  r.blocks_per_sm = rep.blocks_per_sm;
  return r;
}

CounterValues HostedLaunches::counters(const std::string& stage, const StageArgs& a,
                                       const std::vector<ParamSpec>& specs, cudaStream_t stream,
                                       std::string* why) {
  const HostLaunchReport rep = run(stage, a, specs, stream, true);
  if (!rep.counted || !rep.counters_why.empty()) {
    if (why) *why = rep.counted ? rep.counters_why : "the kernel's process collected none";
    return {};
  }
  return rep.values;
}

std::string HostedLaunches::summary() const {
  if (m_kernel_us.empty()) return "";
  std::vector<double> cost(m_kernel_us.size());
  for (size_t k = 0; k < cost.size(); ++k) cost[k] = m_round_trip_us[k] - m_kernel_us[k];
  std::string order = std::string(host_ordering_name(m_ordering)) +
                      (m_forced ? "" : " (the faster on the first frames: ");
  if (!m_forced)
    order += m_order_us[0].empty() || m_order_us[1].empty()
                 ? "not measured yet)"
                 : "host synchronisation " + fmt("%.1f", median(m_order_us[0])) +
                       " us, interprocess events " + fmt("%.1f", median(m_order_us[1])) +
                       " us per frame)";
  return std::string("kernel host: slots by ") + host_transport_name(m_transport) +
         ", ordered by " + order + ", " + std::to_string(m_kernel_us.size()) +
         " frames; per frame, round trip median " + fmt("%.1f", median(m_round_trip_us)) +
         " us (p95 " + fmt("%.1f", percentile(m_round_trip_us, 95)) + "), of which the kernel " +
         fmt("%.1f", median(m_kernel_us)) + " us: the host adds " + fmt("%.1f", median(cost)) +
         " us (p95 " + fmt("%.1f", percentile(cost, 95)) + "); in the child " +
         fmt("%.1f", median(m_child_us)) + " us, of which waiting for its stream " +
         fmt("%.1f", median(m_wait_us)) +
         " us (the GPU switching from the lab's process to the child's, the kernel, and with "
         "events the lab's work queued before the stage)";
}

void KernelHost::share(const SharedRegion& region, double timeout_s) {
  std::string why;
  Process* c = warm_child(&why);
  if (!c) throw Error(ErrorKind::Unavailable, "shared slots: " + why);
  Reply r = ready(*c, 30.0);
  if (!r.ok) throw Error(ErrorKind::Unavailable, "shared slots: " + r.message);
  const auto deadline = Clock::now() + std::chrono::milliseconds(int64_t(timeout_s * 1e3));
  WireWriter w;
  w.pod(region.id()), w.pod(uint64_t(region.size()));
  // The descriptor follows its message on the socket, with one byte; the child takes it with
  // recvmsg once it has read the message.
  if (write_all(c->proc->fd, frame(kShare, w.s), &deadline) != Io::Ok ||
      !send_fd(c->proc->fd, region.fd())) {
    c->proc->kill();
    retire_if_gone(TrialOutcome::Crashed);
    throw Error(ErrorKind::Unavailable, "shared slots: the kernel's process took no region");
  }
  const WireFrame f = read_wire_frame(c->proc->fd, kMagic, kMaxPayload, &deadline);
  std::string problem = f.io != Io::Ok ? "no reply" : f.type != kShared ? "a wrong reply" : "";
  if (problem.empty()) try {
      WireReader in(f.payload);
      const bool ok = in.pod<uint8_t>() != 0;
      const std::string what = in.str();
      if (!ok) problem = what;
    } catch (const WireError& e) {
      problem = e.what();
    }
  if (!problem.empty()) {
    if (f.io != Io::Ok) c->proc->kill(), retire_if_gone(TrialOutcome::Crashed);
    throw Error(ErrorKind::Unavailable, "shared slots: the kernel's process: " + problem);
  }
}

TrialReport KernelHost::run(const TrialRequest& req, const TrialLimits& limits) {
  const auto t0 = Clock::now();
  TrialReport rep;
  if (!limits.memcheck) {
    std::string why;
    Process* c = warm_child(&why);
    if (!c) {
      rep.message = why;
      return rep;
    }
    rep = exchange(*c, req, limits.timeout_s, limits.start_timeout_s);
    retire_if_gone(rep.outcome);
  } else {
    std::string why;
    const std::string sanitizer = find_compute_sanitizer(&why);
    if (sanitizer.empty()) {
      rep.message = "memcheck: " + why;
      return rep;
    }
    char log_path[] = "/tmp/kernel-lab-memcheck-XXXXXX";
    const int log_fd = mkstemp(log_path);
    if (log_fd < 0) {
      rep.message = std::string("memcheck: no temporary file: ") + std::strerror(errno);
      return rep;
    }
    ::close(log_fd);
    std::vector<std::string> argv = {sanitizer,    "--tool",           "memcheck",
                                     "--log-file", log_path,           "--print-limit",
                                     "20",         "--show-backtrace", "device"};
    argv.insert(argv.end(), m_command.begin(), m_command.end());
    std::unique_ptr<Process> c = spawn(argv, &why);
    if (!c) {
      std::remove(log_path);
      rep.message = "memcheck: " + why;
      return rep;
    }
    rep = exchange(*c, req, limits.timeout_s + limits.memcheck_extra_s,
                   limits.start_timeout_s + limits.memcheck_extra_s);
    // End it (EOF on its input) and give the sanitizer time to write its report.
    c->proc->close_fd();
    if (!c->proc->reap(10000)) c->proc->kill();
    std::ifstream in(log_path);
    std::stringstream log;
    log << in.rdbuf();
    std::remove(log_path);
    if (const char* keep = std::getenv("LAB_MEMCHECK_LOG"))  // the raw report, for a look
      std::ofstream(keep, std::ios::app) << log.str();
    rep.memchecked = true;
    rep.memcheck = parse_memcheck_log(log.str());
    if (!rep.memcheck.empty() &&
        (rep.outcome == TrialOutcome::Passed || rep.outcome == TrialOutcome::Unwritten)) {
      rep.outcome = TrialOutcome::Faulted;  // it finished, but touched memory it must not
      rep.message = "memcheck found " + std::to_string(rep.memcheck.size()) +
                    " invalid access(es): " + rep.memcheck[0].str();
    } else if (rep.outcome == TrialOutcome::Faulted && !rep.memcheck.empty()) {
      rep.message += "; memcheck: " + rep.memcheck[0].str();
    }
  }
  rep.trial_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  return rep;
}

std::string find_compute_sanitizer(std::string* why) {
  const ToolLookup t = find_cuda_tool("compute-sanitizer");
  if (t.path.empty() && why)
    *why = "compute-sanitizer is not installed (looked on " + t.where() +
           "); it comes with the full CUDA toolkit and JetPack";
  return t.path;
}

// ---- the child ------------------------------------------------------------------------------

namespace {

void send_or_exit(int fd, char type, const std::string& payload) {
  if (write_all(fd, frame(type, payload), nullptr) != Io::Ok) std::_Exit(4);
}

uint64_t count_poisoned(const HostImage& img) {
  // poison() fills with 0xFF bytes: a float or u32 still all ones was never written.
  uint64_t n = 0;
  const size_t words = img.desc().bytes() / 4;
  const uint8_t* p = img.bytes();
  for (size_t i = 0; i < words; ++i) {
    uint32_t v;
    std::memcpy(&v, p + 4 * i, 4);
    n += v == 0xFFFFFFFFu;
  }
  return n;
}

TrialReport run_one(const TrialRequest& req) {
  TrialReport rep;
  try {
    auto kernel = std::make_shared<LiveKernel>(req.build);
    const PresetLoad pl = preset_from_json(req.pipeline, PipelineConfig{});
    if (!pl.warning.empty())
      throw Error(ErrorKind::Usage, "the trial's pipeline does not load: " + pl.warning);
    PipelineConfig cfg = pl.pipeline;
    std::string live_op = req.stage;
    if (!req.stage.empty()) {
      StageConfig* s = nullptr;
      for (StageConfig& st : cfg.stages)
        if (st.op == req.stage) s = &st;
      if (!s) throw Error(ErrorKind::Usage, "stage " + req.stage + " is not in the pipeline");
      s->custom = make_live_op(find_op(s->op), kernel);
      s->variant = "user";
      s->block.reset();
    } else {
      StageConfig s;
      s.op = live_op = "user";
      s.custom = make_live_stage(req.add_slot, kernel);
      s.variant = "user";
      cfg.stages.push_back(s);
    }
    Runner r(Backend::Cuda);
    if (const Op* lab = playground_of(cfg)) {
      r.configure_lab(cfg, make_lab_inputs(*lab, req.lab_size, req.lab_seed));
    } else {
      if (req.frame.desc().empty()) throw Error(ErrorKind::Usage, "the trial has no input frame");
      r.configure(cfg, req.frame.desc());
      r.set_input(req.frame);
    }
    size_t i = 0;
    while (i < r.stages().size() && r.stages()[i].op->def.name != live_op) ++i;
    if (i == r.stages().size()) throw Error(ErrorKind::Internal, "the live stage went missing");
    for (size_t j = 0; j < i; ++j)
      if (!r.skipped(j)) r.run_stage(j);
    r.poison_outputs(i);
    r.run_stage(i);  // waits: a fault or a trap throws here, an endless loop never returns
    for (const LaunchRecord& l : r.launches())
      if (l.kernel == "user_kernel") rep.kernel_ms = l.ms;
    for (const std::string& name : r.stages()[i].outputs()) {
      const HostImage out = r.read_slot(name);
      rep.unwritten += count_poisoned(out);
      rep.total += out.desc().bytes() / 4;
    }
    if (r.stages()[i].reference()) {
      const StageCompare c = compare_stage(r, i);
      rep.compared = true;
      rep.max_abs = c.diff.max_abs;
      rep.within_tolerance = c.diff.pass();
    }
    if (rep.unwritten > 0) {
      rep.outcome = TrialOutcome::Unwritten;
      rep.message = "finished in " + fmt("%.3f", rep.kernel_ms) + " ms but left " +
                    std::to_string(rep.unwritten) + " of " + std::to_string(rep.total) +
                    " output values unwritten: does the grid cover every pixel?";
    } else {
      rep.outcome = TrialOutcome::Passed;
      rep.message = "ran in " + fmt("%.3f", rep.kernel_ms) + " ms" +
                    (rep.compared ? (rep.within_tolerance ? ", within the stage's tolerance"
                                                          : ", outside the stage's tolerance "
                                                            "(max |diff| " +
                                                                fmt("%.3g", rep.max_abs) + ")")
                                  : "");
    }
  } catch (const CudaError& e) {
    rep.outcome = e.sticky() ? TrialOutcome::Faulted : TrialOutcome::Error;
    rep.message = (e.sticky() ? "faulted: " : "") + cuda_words(e.code());
  } catch (const std::exception& e) {
    rep.outcome = TrialOutcome::Error;
    rep.message = e.what();
  }
  return rep;
}

// The child's frames: the installed kernel, the slots it has opened, the launch recorder that
// times it (the lab's own measuring code) and its stream.
class FrameContext : public LaunchContext {
 public:
  FrameContext(LaunchRecorder& rec, cudaStream_t s) : m_rec(rec), m_stream(s) {}
  cudaStream_t stream() const override { return m_stream; }
  void* scratch(size_t, int) override {
    throw Error(ErrorKind::Internal, "a live kernel has no scratch memory");
  }
  void* persistent(size_t, uint64_t, const std::function<void(void*)>&) override {
    throw Error(ErrorKind::Internal, "a live kernel has no persistent memory");
  }
  void before_launch(const void* func, const char* name, dim3 grid, dim3 block,
                     size_t smem) override {
    m_rec.refuse_if_unlaunchable(func, name, grid, block, smem);
    m_rec.begin(m_stream, 0, "user", func, name, grid, block, smem);
  }
  void after_launch() override { m_rec.end(m_stream); }
  void runs_step(const std::string&, const std::string&) override {}
  ~FrameContext() override { m_rec.close_range(); }

 private:
  LaunchRecorder& m_rec;
  cudaStream_t m_stream;
};

struct HostState {
  std::shared_ptr<LiveKernel> kernel;
  std::map<std::string, void*> ipc;           // opened handles, by their bytes
  std::map<std::string, cudaEvent_t> events;  // the lab's interprocess events, by handle
  std::map<uint64_t, SharedRegion> regions;   // given by the lab, by id
  LaunchRecorder rec;
  cudaStream_t stream = nullptr;
  std::unique_ptr<CounterCollector> counters;  // made on the first frame that asks
  L2Flush flush;
  ~HostState() {
    for (auto& [h, p] : ipc) cudaIpcCloseMemHandle(p);
    for (auto& [h, e] : events) cudaEventDestroy(e);
  }
};

void* slot_address(HostState& st, HostTransport t, const HostSlot& s) {
  const uint64_t span = s.pitch * uint64_t(std::max(s.desc.height, 1));
  if (t == HostTransport::Shared) {
    const auto it = st.regions.find(s.region);
    if (it == st.regions.end()) throw Error(ErrorKind::Usage, "a slot in a region never shared");
    if (s.offset > it->second.size() || span > it->second.size() - s.offset)
      throw Error(ErrorKind::Usage, "a slot past its region's end");
    return static_cast<char*>(it->second.device_pointer()) + s.offset;
  }
  const std::string key(s.handle.data(), s.handle.size());
  auto it = st.ipc.find(key);
  if (it == st.ipc.end()) {
    cudaIpcMemHandle_t h;
    std::memcpy(&h, s.handle.data(), sizeof h);
    void* p = nullptr;
    LAB_CUDA_CHECK(cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess));
    it = st.ipc.emplace(key, p).first;
  }
  return static_cast<char*>(it->second) + s.offset;
}

// The frame's launch again under the lab's counter collector, replayed once per pass, the L2
// flushed before it (outside its range), as the lab collects a built-in launch's.
void count_frame(HostState& st, const StageArgs& a, const std::vector<ParamSpec>& specs,
                 HostLaunchReport& rep) {
  rep.counted = true;
  if (!st.counters) st.counters = std::make_unique<CounterCollector>();
  if (!st.counters->unavailable().empty()) {
    rep.counters_why = st.counters->unavailable();
    return;
  }
  const CounterReport cr = st.counters->collect([&](RangeSink& sink) {
    st.flush.enqueue(st.stream);
    st.rec.clear();
    st.rec.set_ranges(&sink);
    try {
      FrameContext ctx(st.rec, st.stream);
      launch_live(ctx, a, *st.kernel, specs);
    } catch (...) {
      st.rec.set_ranges(nullptr);
      throw;
    }
    st.rec.set_ranges(nullptr);
    LAB_CUDA_CHECK(cudaStreamSynchronize(st.stream));
  });
  if (!cr.ok)
    rep.counters_why = cr.why;
  else if (cr.ranges.size() != 1)
    rep.counters_why = std::to_string(cr.ranges.size()) + " ranges for one launch";
  else
    rep.values = cr.ranges[0];
}

HostLaunchReport run_frame(HostState& st, const HostLaunch& l) {
  HostLaunchReport rep;
  try {
    if (!st.kernel) throw Error(ErrorKind::Usage, "no kernel is installed");
    if (!st.stream) LAB_CUDA_CHECK(cudaStreamCreateWithFlags(&st.stream, cudaStreamNonBlocking));
    StageArgs a;
    std::set<std::string> used;
    for (const HostSlot& s : l.in) {
      a.in.push_back({s.desc, slot_address(st, l.transport, s), size_t(s.pitch)});
      used.insert(std::string(s.handle.data(), s.handle.size()));
    }
    for (const HostSlot& s : l.out) {
      a.out.push_back({s.desc, slot_address(st, l.transport, s), size_t(s.pitch)});
      used.insert(std::string(s.handle.data(), s.handle.size()));
    }
    a.block = l.block;
    std::vector<ParamSpec> specs;
    for (size_t i = 0; i < l.params.size(); ++i) {
      ParamSpec p;
      p.name = "p" + std::to_string(i);
      p.def = l.params[i];
      specs.push_back(p);
    }
    if (l.has_event) {  // the lab's stages before, on the GPU
      const std::string key(l.event.data(), l.event.size());
      auto it = st.events.find(key);
      if (it == st.events.end()) {
        cudaIpcEventHandle_t h;
        std::memcpy(&h, l.event.data(), sizeof h);
        cudaEvent_t e = nullptr;
        LAB_CUDA_CHECK(cudaIpcOpenEventHandle(&e, h));
        it = st.events.emplace(key, e).first;
      }
      LAB_CUDA_CHECK(cudaStreamWaitEvent(st.stream, it->second, 0));
    }
    st.rec.clear();
    {
      FrameContext ctx(st.rec, st.stream);
      launch_live(ctx, a, *st.kernel, specs);
    }
    const auto wait0 = std::chrono::steady_clock::now();
    LAB_CUDA_CHECK(cudaStreamSynchronize(st.stream));  // a fault or a trap throws here
    rep.wait_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - wait0).count();
    st.rec.collect(true);
    const LaunchRecord& r = st.rec.launches().at(0);
    rep.outcome = TrialOutcome::Passed;
    rep.kernel_ms = r.ms;
    rep.attrs = r.attrs;
    rep.blocks_per_sm = r.blocks_per_sm;
    rep.grid = r.grid, rep.block = r.block;
    if (l.counters) count_frame(st, a, specs, rep);
    // Handles the lab no longer uses (its slots were reallocated) are closed.
    if (l.transport == HostTransport::Ipc) {
      for (auto it = st.ipc.begin(); it != st.ipc.end();) {
        if (used.count(it->first)) {
          ++it;
          continue;
        }
        cudaIpcCloseMemHandle(it->second);
        it = st.ipc.erase(it);
      }
    }
  } catch (const CudaError& e) {
    rep.outcome = e.sticky() ? TrialOutcome::Faulted : TrialOutcome::Error;
    rep.message = (e.sticky() ? "faulted: " : "") + cuda_words(e.code());
  } catch (const std::exception& e) {
    rep.outcome = TrialOutcome::Error;
    rep.message = e.what();
  }
  return rep;
}

TrialReport install_kernel(HostState& st, const LiveBuild& b) {
  TrialReport rep;
  try {
    st.kernel = std::make_shared<LiveKernel>(b);
    rep.outcome = TrialOutcome::Passed;
    rep.message = "loaded in " + fmt("%.1f", st.kernel->load_ms()) + " ms";
  } catch (const CudaError& e) {
    st.kernel.reset();
    rep.outcome = e.sticky() ? TrialOutcome::Faulted : TrialOutcome::Error;
    rep.message = cuda_words(e.code());
  } catch (const std::exception& e) {
    st.kernel.reset();
    rep.outcome = TrialOutcome::Error;
    rep.message = e.what();
  }
  return rep;
}

}  // namespace

int trial_child_main(int in_fd, int out_fd) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the lab
  // A kernel's printf goes to stdout: stdout becomes stderr, the protocol keeps its own fd.
  const int proto = dup(out_fd);
  if (proto < 0) return 71;
  dup2(2, 1);
  const DeviceInfo& d = device_info();
  std::string ready_why = d.present ? "" : d.why_absent;
  if (d.present) {
    const cudaError_t e = cudaFree(nullptr);  // the context, made now
    if (e != cudaSuccess) ready_why = cuda_words(e);
  }
  {
    WireWriter w;
    w.pod(uint8_t(ready_why.empty()));
    w.str(ready_why.empty() ? d.name + " " + d.arch() : ready_why);
    send_or_exit(proto, kReady, w.s);
  }
  if (!ready_why.empty()) return 69;
  HostState st;
  for (;;) {
    const WireFrame f = read_wire_frame(in_fd, kMagic, kMaxPayload, nullptr);
    if (f.io == Io::Eof && f.problem.empty()) return 0;  // the lab closed it
    if (f.io != Io::Ok) return 65;
    TrialOutcome outcome = TrialOutcome::Passed;
    try {
      if (f.type == kRequest) {
        TrialReport rep = run_one(decode_trial_request(f.payload));
        outcome = rep.outcome;
        send_or_exit(proto, kReport, encode_trial_report(rep));
      } else if (f.type == kInstall) {
        WireReader in(f.payload);
        const LiveBuild b = get_build(in);
        in.end();
        const TrialReport rep = install_kernel(st, b);
        outcome = rep.outcome;
        send_or_exit(proto, kInstalled, encode_trial_report(rep));
      } else if (f.type == kLaunch) {
        const auto t0 = std::chrono::steady_clock::now();
        HostLaunchReport rep = run_frame(st, decode_host_launch(f.payload));
        rep.child_ms =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                .count();
        outcome = rep.outcome;
        send_or_exit(proto, kLaunched, encode_host_report(rep));
      } else if (f.type == kUninstall) {
        st.kernel.reset();
        send_or_exit(proto, kUninstalled, "");
      } else if (f.type == kShare) {
        WireReader in(f.payload);
        const uint64_t id = in.pod<uint64_t>(), bytes = in.pod<uint64_t>();
        in.end();
        const int fd = recv_fd(in_fd, Clock::now() + std::chrono::seconds(5));
        WireWriter w;
        try {
          if (fd < 0) throw Error(ErrorKind::Data, "no descriptor came with the region");
          SharedRegion r = SharedRegion::adopt(fd, size_t(bytes), id);
          r.device_pointer();  // page-locked here too, now: a frame does not wait for it
          st.regions[id] = std::move(r);
          w.pod(uint8_t(1)), w.str("");
        } catch (const std::exception& e) {
          w.s.clear();
          w.pod(uint8_t(0)), w.str(e.what());
        }
        send_or_exit(proto, kShared, w.s);
      } else {
        return 65;
      }
    } catch (const WireError& e) {
      TrialReport rep;
      rep.outcome = TrialOutcome::Error;
      rep.message = std::string("a malformed request: ") + e.what();
      if (f.type == kLaunch) {
        HostLaunchReport h;
        h.message = rep.message;
        send_or_exit(proto, kLaunched, encode_host_report(h));
      } else if (f.type == kShare) {
        WireWriter w;
        w.pod(uint8_t(0)), w.str(rep.message);
        send_or_exit(proto, kShared, w.s);
      } else {
        send_or_exit(proto, f.type == kInstall ? kInstalled : kReport, encode_trial_report(rep));
      }
    }
    if (outcome == TrialOutcome::Faulted) {
      if (std::getenv("LAB_TRIAL_TRY_RESET")) {  // diagnosis: can a process without GL reset?
        const std::string why = reset_device();
        std::fprintf(stderr, "trial child: reset_device after the fault: %s\n",
                     why.empty() ? "a working context" : why.c_str());
      }
      return 70;  // its context is gone with the fault
    }
  }
}

}  // namespace lab
