#include "trial.h"

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
#include <sstream>

#include "check.h"
#include "device.h"
#include "measure.h"
#include "pipeline.h"
#include "presets.h"
#include "printable.h"
#include "runner.h"
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
// A frame: "KLT1", a type byte, the payload's length (u64, little-endian as the host is: both
// ends are this binary on this machine), the payload. Payloads are fields in a fixed order.

namespace {

constexpr char kMagic[4] = {'K', 'L', 'T', '1'};
constexpr char kReady = 'R', kRequest = 'Q', kReport = 'A';
constexpr uint64_t kMaxPayload = uint64_t(1) << 30;  // a 4K BGRA frame is 33 MB
constexpr size_t kHeader = 4 + 1 + 8;

std::string frame(char type, const std::string& payload) {
  std::string f(kMagic, 4);
  f += type;
  const uint64_t n = payload.size();
  f.append(reinterpret_cast<const char*>(&n), sizeof n);
  return f + payload;
}

}  // namespace

std::string encode_trial_request(const TrialRequest& r) {
  WireWriter w;
  const LiveBuild& b = r.build;
  w.str(b.source);
  w.pod(uint8_t(b.options.fast_math)), w.pod(int32_t(b.options.max_regs));
  w.pod(uint8_t(b.options.line_info));
  w.pod(int32_t(b.options.block.x)), w.pod(int32_t(b.options.block.y));
  w.pod(int32_t(b.options.px)), w.pod(int32_t(b.options.rows)), w.pod(int32_t(b.options.arch));
  w.pod(int32_t(b.arch));
  w.bytes(b.cubin.data(), b.cubin.size());
  w.str(b.lowered_name);
  w.str(r.stage), w.str(r.add_slot), w.str(r.pipeline);
  const ImageDesc d = r.frame.desc();
  w.pod(int32_t(d.width)), w.pod(int32_t(d.height)), w.pod(int32_t(d.channels));
  w.pod(uint8_t(d.type));
  w.bytes(r.frame.bytes(), d.empty() ? 0 : d.bytes());
  w.str(r.lab_size), w.pod(uint64_t(r.lab_seed));
  return w.s;
}

TrialRequest decode_trial_request(const std::string& payload) {
  WireReader in(payload);
  TrialRequest r;
  LiveBuild& b = r.build;
  b.source = in.str();
  b.options.fast_math = in.pod<uint8_t>() != 0;
  b.options.max_regs = in.pod<int32_t>();
  b.options.line_info = in.pod<uint8_t>() != 0;
  b.options.block.x = in.pod<int32_t>(), b.options.block.y = in.pod<int32_t>();
  b.options.px = in.pod<int32_t>(), b.options.rows = in.pod<int32_t>();
  b.options.arch = in.pod<int32_t>();
  b.arch = in.pod<int32_t>();
  const std::string cubin = in.str();
  b.cubin.assign(cubin.begin(), cubin.end());
  b.lowered_name = in.str();
  b.ok = !b.cubin.empty() && !b.lowered_name.empty();
  r.stage = in.str(), r.add_slot = in.str(), r.pipeline = in.str();
  ImageDesc d;
  d.width = in.pod<int32_t>(), d.height = in.pod<int32_t>(), d.channels = in.pod<int32_t>();
  const uint8_t type = in.pod<uint8_t>();
  if (type > uint8_t(PixelType::U32)) throw WireError("an unknown pixel type");
  d.type = PixelType(type);
  if (d.width < 0 || d.height < 0 || d.width > 65536 || d.height > 65536 || d.channels < 0 ||
      d.channels > 4)
    throw WireError("a frame of impossible size");
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
  const uint8_t o = in.pod<uint8_t>();
  if (o > uint8_t(TrialOutcome::Error)) throw WireError("an unknown outcome");
  r.outcome = TrialOutcome(o);
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

// ---- bounded I/O ------------------------------------------------------------------------------

namespace {

using Io = IoResult;

struct ReadFrame {
  Io io = Io::Ok;
  char type = 0;
  std::string payload;
  std::string problem;  // garbage or truncated: what was wrong
};

ReadFrame read_frame(int fd, const Clock::time_point* deadline) {
  ReadFrame f;
  char h[kHeader];
  size_t got = 0;
  f.io = read_exact(fd, h, kHeader, deadline, &got);
  if (f.io == Io::Eof && got > 0) {
    f.problem = "it stopped after " + std::to_string(got) + " bytes of a message's header";
    return f;
  }
  if (f.io != Io::Ok) return f;
  if (std::memcmp(h, kMagic, 4) != 0) {
    f.io = Io::Failed;
    f.problem = "it sent \"" + printable(std::string(h, kHeader), 24) + "\", not a message";
    return f;
  }
  f.type = h[4];
  uint64_t n = 0;
  std::memcpy(&n, h + 5, sizeof n);
  if (n > kMaxPayload) {
    f.io = Io::Failed;
    f.problem = "it announced a message of " + std::to_string(n) + " bytes";
    return f;
  }
  f.payload.resize(size_t(n));
  f.io = read_exact(fd, f.payload.data(), size_t(n), deadline, &got);
  if (f.io == Io::Eof)
    f.problem = "it stopped after " + std::to_string(got) + " of the " + std::to_string(n) +
                " bytes of its message";
  return f;
}

std::string cuda_words(int code) {
  const cudaError_t e = cudaError_t(code);
  return std::string(cudaGetErrorString(e)) + " (" + cudaGetErrorName(e) + ", error " +
         std::to_string(code) + ")";
}

}  // namespace

// ---- the parent ----------------------------------------------------------------------------

struct TrialRunner::Process {
  std::unique_ptr<Child> proc;
  bool ready = false;
};

std::vector<std::string> trial_command() {
  return {self_executable(), "__trial"};
}

TrialRunner::TrialRunner(std::vector<std::string> command) : m_command(std::move(command)) {}
TrialRunner::~TrialRunner() = default;

std::unique_ptr<TrialRunner::Process> TrialRunner::spawn(const std::vector<std::string>& argv,
                                                         std::string* why) {
  // Its own process group: a timeout kills compute-sanitizer and its target together.
  std::unique_ptr<Child> c = Child::spawn(argv, {ChildIo::Socket, true, ""}, why);
  if (!c) return nullptr;
  ++m_spawned;
  auto p = std::make_unique<Process>();
  p->proc = std::move(c);
  return p;
}

void TrialRunner::warm() {
  if (m_warm && !m_warm->proc->reap(0)) return;
  std::string why;
  m_warm = spawn(m_command, &why);  // a failure shows at the next run()
}

TrialReport TrialRunner::exchange(Process& c, const TrialRequest& req, double timeout_s,
                                  double start_s) {
  TrialReport rep;
  auto died = [&](const std::string& when) {
    c.proc->reap(2000);
    if (!c.proc->exited()) c.proc->kill();
    rep.outcome = TrialOutcome::Crashed;
    rep.message = "the trial process ended " + when + ": " + status_words(c.proc->status());
    return rep;
  };
  auto garbage = [&](const std::string& problem) {
    c.proc->kill();
    rep.outcome = TrialOutcome::Protocol;
    rep.message = "the trial process sent an unreadable reply: " + problem;
    return rep;
  };
  if (!c.ready) {
    const auto deadline = Clock::now() + std::chrono::milliseconds(int64_t(start_s * 1e3));
    const ReadFrame f = read_frame(c.proc->fd, &deadline);
    if (f.io == Io::Timeout) {
      c.proc->kill();
      rep.outcome = TrialOutcome::Error;
      rep.message = "the trial process did not start within " + fmt("%.0f", start_s) + " s";
      return rep;
    }
    if (!f.problem.empty()) {
      if (c.proc->reap(200) && WIFSIGNALED(c.proc->status())) return died("while starting");
      return garbage(f.problem);
    }
    if (f.io != Io::Ok) return died("before it was ready");
    if (f.type != kReady) return garbage("its first message is not 'ready'");
    WireReader in(f.payload);
    try {
      const bool ok = in.pod<uint8_t>() != 0;
      const std::string what = in.str();
      if (!ok) {  // no GPU, no context: it exits
        c.proc->reap(2000);
        rep.outcome = TrialOutcome::Error;
        rep.message = "the trial process has no GPU: " + what;
        return rep;
      }
    } catch (const WireError& e) {
      return garbage(e.what());
    }
    c.ready = true;
  }
  const auto deadline = Clock::now() + std::chrono::milliseconds(int64_t(timeout_s * 1e3));
  const std::string timeout_words =
      "did not finish in " + fmt("%g", timeout_s) + " s: an endless loop, or far too slow";
  const Io w = write_all(c.proc->fd, frame(kRequest, encode_trial_request(req)), &deadline);
  if (w == Io::Timeout) {
    c.proc->kill();
    rep.outcome = TrialOutcome::Timeout;
    rep.message = timeout_words + " (it did not read its input)";
    return rep;
  }
  if (w != Io::Ok) return died("before it read its input");
  const ReadFrame f = read_frame(c.proc->fd, &deadline);
  if (f.io == Io::Timeout) {
    c.proc->kill();
    rep.outcome = TrialOutcome::Timeout;
    rep.message = timeout_words;
    return rep;
  }
  if (!f.problem.empty()) {
    if (c.proc->reap(200) && WIFSIGNALED(c.proc->status())) return died("while it reported");
    return garbage(f.problem);
  }
  if (f.io != Io::Ok) return died("before it reported");
  if (f.type != kReport) return garbage("a message that is not a report");
  try {
    rep = decode_trial_report(f.payload);
  } catch (const WireError& e) {
    return garbage(e.what());
  }
  return rep;
}

TrialReport TrialRunner::run(const TrialRequest& req, const TrialLimits& limits) {
  const auto t0 = Clock::now();
  TrialReport rep;
  if (!limits.memcheck) {
    if (!m_warm || m_warm->proc->reap(0)) {
      std::string why;
      m_warm = spawn(m_command, &why);
      if (!m_warm) {
        rep.message = why;
        return rep;
      }
    }
    rep = exchange(*m_warm, req, limits.timeout_s, limits.start_timeout_s);
    // A faulted child exits (its context is unusable) and a killed one is gone: the next child
    // starts now, so that its context is made before the next trial. One that only refused a
    // request stays.
    if (rep.outcome == TrialOutcome::Faulted || m_warm->proc->exited() || m_warm->proc->reap(0)) {
      // LAB_TRIAL_TRY_RESET (a diagnosis): the faulted child tries a device reset, with no GL in
      // its process, and says on stderr how it went; it gets the time to, not a SIGKILL.
      if (rep.outcome == TrialOutcome::Faulted && std::getenv("LAB_TRIAL_TRY_RESET"))
        m_warm->proc->reap(65000);
      m_warm.reset();
      warm();
    }
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
  for (;;) {
    const ReadFrame f = read_frame(in_fd, nullptr);
    if (f.io == Io::Eof && f.problem.empty()) return 0;  // the lab closed it
    if (f.io != Io::Ok || f.type != kRequest) return 65;
    TrialReport rep;
    try {
      rep = run_one(decode_trial_request(f.payload));
    } catch (const WireError& e) {
      rep.outcome = TrialOutcome::Error;
      rep.message = std::string("a malformed request: ") + e.what();
    }
    send_or_exit(proto, kReport, encode_trial_report(rep));
    if (rep.outcome == TrialOutcome::Faulted) {
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
