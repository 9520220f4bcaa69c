// The kernel host (kernel_host.h): a live kernel's frames in a child process. On the CPU: the
// frame messages on the wire; the host against a fake child (this test binary, `__fake_host
// MODE`) that reports, crashes, hangs, exits, sends garbage or stops mid-reply on a frame, each
// an outcome in words within the deadline, the kernel dropped and a fresh child started; and a
// shared region mapped in two processes (the child writes, this process reads). On a GPU: a
// user copy of blur run in the host gives the built-in's bytes; kernels that fault, trap or
// never end on a later frame are recovered from in-process.
#include <doctest/doctest.h>
#include <cuda_runtime.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <string>
#include <thread>

#include "kernel_host.h"
#include "live.h"
#include "support.h"
#include "wire.h"

namespace {

constexpr char kMagic[4] = {'K', 'L', 'T', '1'};

void put(int fd, char type, const std::string& payload) {
  if (lab::write_all(fd, lab::wire_frame(kMagic, type, payload), nullptr) != lab::IoResult::Ok)
    std::_Exit(4);
}

std::string ready_payload() {
  lab::WireWriter w;
  w.pod(uint8_t(1)), w.str("fake GPU");
  return w.s;
}

}  // namespace

// The fake child: ready, installs anything, then on its frames does what `mode` says
// ("ok", "crash", "hang", "exit", "garbage", "truncated", "fault", "late:N" (N frames, then a
// fault), "share" (maps a region it is given and writes 0x5A bytes and its id into it)).
int fake_host_main(const std::string& mode) {
  const int in = 0, out = dup(1);
  dup2(2, 1);
  put(out, 'R', ready_payload());
  int frames = 0;
  const int late = mode.rfind("late:", 0) == 0 ? std::stoi(mode.substr(5)) : -1;
  for (;;) {
    const lab::WireFrame f = lab::read_wire_frame(in, kMagic, uint64_t(1) << 30, nullptr);
    if (f.io != lab::IoResult::Ok) return 0;
    if (f.type == 'I') {
      lab::TrialReport r;
      r.outcome = lab::TrialOutcome::Passed;
      r.message = "loaded";
      put(out, 'i', lab::encode_trial_report(r));
    } else if (f.type == 'S') {
      lab::WireReader rd(f.payload);
      const uint64_t id = rd.pod<uint64_t>(), bytes = rd.pod<uint64_t>();
      const int fd = lab::recv_fd(in, std::chrono::steady_clock::now() + std::chrono::seconds(5));
      lab::WireWriter w;
      try {
        lab::SharedRegion r = lab::SharedRegion::adopt(fd, size_t(bytes), id);
        std::memset(r.data(), 0x5A, r.size());
        std::memcpy(r.data(), &id, sizeof id);
        w.pod(uint8_t(1)), w.str("");
      } catch (const std::exception& e) {
        w.pod(uint8_t(0)), w.str(e.what());
      }
      put(out, 's', w.s);
    } else if (f.type == 'L') {
      const lab::HostLaunch l = lab::decode_host_launch(f.payload);
      ++frames;
      lab::HostLaunchReport r;
      r.outcome = lab::TrialOutcome::Passed;
      r.kernel_ms = 0.25;
      r.grid = dim3(unsigned(l.out.at(0).desc.width), 1), r.block = dim3(32, 8);
      r.attrs.regs = 31;
      if (mode == "crash") {
        signal(SIGSEGV, SIG_DFL);
        raise(SIGSEGV);
      } else if (mode == "hang") {
        std::this_thread::sleep_for(std::chrono::seconds(30));
      } else if (mode == "exit") {
        return 3;
      } else if (mode == "garbage") {
        const std::string g = "Segmentation fault (core dumped) and more text";
        lab::write_all(out, g, nullptr);
        std::this_thread::sleep_for(std::chrono::seconds(30));
      } else if (mode == "truncated") {
        lab::write_all(out, lab::wire_frame(kMagic, 'l', lab::encode_host_report(r)).substr(0, 20),
                       nullptr);
        return 0;
      } else if (mode == "fault" || (late >= 0 && frames > late)) {
        r.outcome = lab::TrialOutcome::Faulted;
        r.message = "faulted: an illegal memory access was encountered";
        put(out, 'l', lab::encode_host_report(r));
        return 70;
      }
      put(out, 'l', lab::encode_host_report(r));
    } else if (f.type == 'U') {
      put(out, 'u', "");
    } else {
      return 65;
    }
  }
}

namespace {

lab::KernelHost fake(const std::string& mode) {
  return lab::KernelHost({lab::self_executable(), "__fake_host", mode});
}

lab::LiveBuild fake_build() {
  lab::LiveBuild b;
  b.ok = true;
  b.source = "__global__ void user_kernel(Inputs in, Outputs out, Params p) {}\n";
  b.cubin = {'x'};
  b.lowered_name = "user_kernel";
  return b;
}

lab::HostLaunch one_frame() {
  lab::HostLaunch l;
  lab::HostSlot in, out;
  in.desc = out.desc = lab::ImageDesc{64, 48, 1, lab::PixelType::F32};
  in.pitch = out.pitch = 512;
  in.handle[0] = 'a', out.handle[0] = 'b';
  l.in = {in};
  l.out = {out};
  l.params = {0.04f};
  return l;
}

lab::TrialLimits quick() {
  lab::TrialLimits t;
  t.timeout_s = 2.0;
  t.start_timeout_s = 5.0;
  return t;
}

}  // namespace

TEST_SUITE("cpu") {
  TEST_CASE("kernel host: frames and their reports survive the wire; malformed ones are refused") {
    lab::HostLaunch l = one_frame();
    l.frame = 12;
    l.transport = lab::HostTransport::Shared;
    l.out[0].region = 77, l.out[0].offset = 4096;
    l.block = {16, 4};
    l.counters = true;
    l.has_event = true;
    l.event[63] = 'e';
    const std::string wire = lab::encode_host_launch(l);
    const lab::HostLaunch b = lab::decode_host_launch(wire);
    CHECK(b.frame == 12);
    CHECK(b.transport == lab::HostTransport::Shared);
    REQUIRE(b.in.size() == 1);
    REQUIRE(b.out.size() == 1);
    CHECK(b.in[0].desc == l.in[0].desc);
    CHECK(b.in[0].handle == l.in[0].handle);
    CHECK(b.out[0].region == 77);
    CHECK(b.out[0].offset == 4096);
    CHECK(b.params == l.params);
    CHECK(b.block == l.block);
    CHECK(b.counters);
    CHECK(b.has_event);
    CHECK(b.event == l.event);
    for (size_t n : {size_t(0), size_t(9), wire.size() / 2, wire.size() - 1})
      CHECK_THROWS_AS(lab::decode_host_launch(wire.substr(0, n)), lab::WireError);
    CHECK_THROWS_AS(lab::decode_host_launch(wire + "x"), lab::WireError);
    lab::HostLaunch bad = l;
    bad.in[0].pitch = 8;  // rows of 256 bytes in 8
    CHECK_THROWS_AS(lab::decode_host_launch(lab::encode_host_launch(bad)), lab::WireError);
    bad = l;
    bad.params.assign(9, 1.0f);
    CHECK_THROWS_AS(lab::decode_host_launch(lab::encode_host_launch(bad)), lab::WireError);

    lab::HostLaunchReport r;
    r.outcome = lab::TrialOutcome::Faulted;
    r.message = "faulted: an illegal memory access was encountered";
    r.kernel_ms = 0.5, r.child_ms = 0.75, r.wait_ms = 0.625;
    r.attrs.regs = 40, r.attrs.static_smem = 2048;
    r.blocks_per_sm = 6;
    r.grid = dim3(40, 92), r.block = dim3(32, 8);
    r.counted = true;
    r.values.range = "blur/user user_kernel";
    r.values.dram_read_bytes = 3.5e6, r.values.inst_executed = 1e5;
    r.values.stalls = {{"long_scoreboard", "waiting on global memory", 2.5}};
    r.values.top_stalls = r.values.stalls;
    const lab::HostLaunchReport rb = lab::decode_host_report(lab::encode_host_report(r));
    CHECK(rb.counted);
    CHECK(rb.values.range == "blur/user user_kernel");
    CHECK(rb.values.dram_read_bytes == 3.5e6);
    CHECK(rb.values.inst_executed == 1e5);
    CHECK(std::isnan(rb.values.l2_hit_pct));
    REQUIRE(rb.values.stalls.size() == 1);
    CHECK(rb.values.stalls[0].per_issue == 2.5);
    CHECK(rb.values.top_stalls[0].words == "waiting on global memory");
    CHECK(rb.outcome == r.outcome);
    CHECK(rb.message == r.message);
    CHECK(rb.kernel_ms == 0.5);
    CHECK(rb.child_ms == 0.75);
    CHECK(rb.wait_ms == 0.625);
    CHECK(rb.attrs.regs == 40);
    CHECK(rb.attrs.static_smem == 2048);
    CHECK(rb.blocks_per_sm == 6);
    CHECK(rb.grid.y == 92);
    CHECK_THROWS_AS(lab::decode_host_report("\x09"), lab::WireError);
  }

  TEST_CASE("kernel host: the transport: shared memory on an integrated GPU or when asked") {
    unsetenv("LAB_KERNEL_HOST_SHARED");
    CHECK(lab::host_transport_for(true) == lab::HostTransport::Shared);
    CHECK(lab::host_transport_for(false) == lab::HostTransport::Ipc);
    setenv("LAB_KERNEL_HOST_SHARED", "1", 1);
    CHECK(lab::host_transport_for(false) == lab::HostTransport::Shared);
    unsetenv("LAB_KERNEL_HOST_SHARED");
  }

  TEST_CASE(
      "kernel host: a frame in a fake child: reported, or an outcome in words, the kernel "
      "dropped and a fresh child started") {
    using O = lab::TrialOutcome;
    const auto t0 = std::chrono::steady_clock::now();
    auto elapsed_s = [&] {
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    };
    SUBCASE("reports, frame after frame, in the same child") {
      auto h = fake("ok");
      CHECK_FALSE(h.installed());
      CHECK_FALSE(h.launch(one_frame(), 1.0).ran());  // nothing installed yet: refused
      REQUIRE(h.install(fake_build(), quick()).passed());
      CHECK(h.installed());
      const int pid = h.child_pid();
      for (int i = 0; i < 5; ++i) {
        const lab::HostLaunchReport r = h.launch(one_frame(), 1.0);
        REQUIRE(r.ran());
        CHECK(r.kernel_ms == 0.25);
        CHECK(r.attrs.regs == 31);
        CHECK(r.grid.x == 64);
        CHECK(r.round_trip_ms > 0);
      }
      CHECK(h.child_pid() == pid);
      CHECK(h.spawned() == 1);
      h.uninstall();
      CHECK_FALSE(h.installed());
      CHECK(h.child_pid() == pid);  // the child stays warm for the next kernel
    }
    struct Case {
      const char* mode;
      O outcome;
      const char* words;
    };
    const Case cases[] = {
        {"fault", O::Faulted, "illegal memory access"},
        {"crash", O::Crashed, "signal 11"},
        {"exit", O::Crashed, "exit status 3"},
        {"hang", O::Timeout, "did not finish in 0.5 s"},
        {"garbage", O::Protocol, "\"Segmentation"},
        {"truncated", O::Protocol, "of the"},
    };
    for (const Case& c : cases) {
      SUBCASE(c.mode) {
        auto h = fake(c.mode);
        REQUIRE(h.install(fake_build(), quick()).passed());
        const int pid = h.child_pid();
        const lab::HostLaunchReport r = h.launch(one_frame(), 0.5);
        CHECK(r.outcome == c.outcome);
        CHECK_MESSAGE(r.message.find(c.words) != std::string::npos, r.message);
        CHECK_FALSE(h.installed());   // back to the built-in variant
        CHECK(h.spawned() == 2);      // a fresh child is starting ...
        CHECK(h.child_pid() != pid);  // ... in place of the old one, which is gone
        CHECK(kill(pid, 0) != 0);
        CHECK(elapsed_s() < 4.0);
        // And the host takes a kernel again.
        CHECK(h.install(fake_build(), quick()).passed());
      }
    }
  }

  TEST_CASE("kernel host: twenty late faults in a row leave one child and no descriptors") {
    auto h = fake("late:2");
    auto open_fds = [] {
      int n = 0;
      for (int fd = 0; fd < 4096; ++fd) n += fcntl(fd, F_GETFD) != -1;
      return n;
    };
    int fds = -1;
    for (int round = 0; round < 20; ++round) {
      REQUIRE(h.install(fake_build(), quick()).passed());
      CHECK(h.launch(one_frame(), 1.0).ran());
      CHECK(h.launch(one_frame(), 1.0).ran());
      const lab::HostLaunchReport r = h.launch(one_frame(), 1.0);
      CHECK(r.outcome == lab::TrialOutcome::Faulted);
      if (round == 1) fds = open_fds();
      if (round > 1) CHECK(open_fds() == fds);
    }
    CHECK(h.spawned() == 21);
  }

  TEST_CASE(
      "kernel host: a shared region is mapped in two processes; the child's bytes are "
      "seen here") {
    auto h = fake("ok");
    lab::SharedRegion r(100000);
    CHECK(r.size() % size_t(sysconf(_SC_PAGESIZE)) == 0);
    CHECK(r.size() >= 100000);
    h.share(r);
    uint64_t id = 0;
    std::memcpy(&id, r.data(), sizeof id);
    CHECK(id == r.id());
    const auto* p = static_cast<const unsigned char*>(r.data());
    CHECK(p[8] == 0x5A);
    CHECK(p[r.size() - 1] == 0x5A);
    // A descriptor that is not a sealed region of the size announced is refused.
    lab::SharedRegion other(4096);
    CHECK_THROWS_AS(lab::SharedRegion::adopt(dup(other.fd()), 8192, 1), lab::Error);
  }
}

namespace {

std::string kernels_dir() {
  const char* env = std::getenv("LAB_EXAMPLES_DIR");
  return env && *env ? env : LAB_EXAMPLES_DIR;
}

std::string scratch_dir(const std::string& name) {
  const std::string d = "/tmp/lab_host_" + std::to_string(getpid()) + "_" + name;
  shell("rm -rf " + d + " && mkdir -p " + d);
  return d;
}

}  // namespace

TEST_SUITE("gpu") {
  // A user copy of blur in the host gives the built-in's bytes, frame after frame, through
  // either transport, as a graph too.
  LAB_GPU_CASE("kernel host: a copy of blur in the host gives the built-in's bytes") {
    const std::string d = scratch_dir("copy");
    const std::string in = " --pipeline harris --input " + data_path("dock.jpg") + " --frames 8";
    REQUIRE(lab_cli("copy blur=v4_rows -o " + d + "/blur.cu").code == 0);
    const Result built_in = lab_cli("run" + in + " --variant blur=v4_rows --dump " + d + "/a", 120);
    REQUIRE(built_in.code == 0);
    for (const std::string env :
         {"", "LAB_KERNEL_HOST_SHARED=1 ", "LAB_KERNEL_HOST_ORDER=events "}) {
      for (const char* graph : {"", " --graph"}) {
        INFO(env << graph);
        shell("rm -rf " + d + "/b");
        const Result r = shell(env + lab_exe() + " run" + in + graph + " --kernel-file " + d +
                               "/blur.cu --replace blur --dump " + d + "/b 2>&1");
        INFO(r.out);
        REQUIRE(r.code == 0);
        CHECK(has(r, "runs in the kernel host"));
        const bool shared = env.find("SHARED") != std::string::npos;
        CHECK(has(r, shared ? "page-locked shared memory" : "CUDA IPC"));
        if (env.find("events") != std::string::npos)
          CHECK(has(r, "ordered by interprocess events"));
        CHECK(has(r, "the host adds"));
        for (const char* slot : {"blur", "harris"})
          CHECK(shell("cmp " + d + "/a/" + slot + ".npy " + d + "/b/" + slot + ".npy").code == 0);
      }
    }
    // Its counters come from the child, collected by the lab's counter code there.
    const Result k = lab_cli("bench --pipeline harris --input " + data_path("dock.jpg") +
                                 " --kernel-file " + d + "/blur.cu --replace blur --stage blur" +
                                 " --counters --reps 20 --json --out " + d + "/bench.json",
                             180);
    INFO(k.out);
    CHECK(k.code == 0);
    CHECK(!has(k, "counters of the kernel host's launch"));
    const Result c = lab_cli("check --pipeline harris --input " + data_path("dock.jpg") +
                                 " --kernel-file " + d + "/blur.cu --replace blur --stage blur",
                             120);
    INFO(c.out);
    CHECK(c.code == 0);
    shell("rm -rf " + d);
  }

  // Kernels that pass their trial and fail on their fifth frame: the run stops with exit 70 and
  // the frame, stage and outcome in words, within a few seconds (the deadline for the loop).
  LAB_GPU_CASE("kernel host: a late fault, trap or endless loop is exit 70 with words") {
    struct Case {
      const char* file;
      const char* words;
    };
    const Case cases[] = {
        {"fault_later.cu", "frame 5: stage blur, variant user, faulted"},
        {"trap_later.cu", "frame 5: stage blur, variant user, faulted"},
        {"loop_later.cu", "frame 5: stage blur, variant user, did not finish in 1 s"},
    };
    for (const Case& c : cases) {
      const auto t0 = std::chrono::steady_clock::now();
      const Result r = lab_cli("run --pipeline harris --input " + data_path("dock.jpg") +
                                   " --frames 20 --frame-deadline 1 --kernel-file " +
                                   kernels_dir() + "/" + c.file + " --replace blur",
                               60);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      INFO(c.file << "\n" << r.out);
      CHECK(r.code == 70);
      CHECK(has(r, c.words));
      CHECK(s < 15.0);
    }
  }

  // The GUI: a late fault costs a frame; the lab goes on with blur's built-in variant, the
  // banner says so, and live frames come back within the target (3 s; BENCHMARKS.md).
  LAB_GPU_CASE("kernel host: the GUI recovers from a late fault in-process") {
    for (const char* file : {"fault_later.cu", "loop_later.cu"}) {
      const Result r = lab_cli("gui --headless --frames 40 --pipeline harris --input " +
                                   data_path("dock.jpg") + " --frame-deadline 1 --kernel-file " +
                                   kernels_dir() + "/" + file + " --replace blur",
                               120);
      INFO(file << "\n" << r.out);
      CHECK(r.code == 0);
      CHECK(has(r, "frame 5: stage blur, variant user"));
      CHECK(has(r, "the kernel host's child replaced"));
      const size_t at = r.out.find("live frames again ");
      REQUIRE(at != std::string::npos);
      const double ms = std::stod(r.out.substr(at + 18));
      CHECK(ms < 3000);
    }
  }

  // Twenty real faults in a row through the host: one child at the end, and the lab's descriptors,
  // resident memory and the device's memory in use (both processes) flat from the third round on.
  LAB_GPU_CASE("kernel host: twenty faults in a row leave one child, descriptors and memory flat") {
    const std::string src =
        "// @lab block=32x8 px=1 rows=1 fast_math=0 maxrregcount=0 lineinfo=1\n"
        "__global__ void user_kernel(Inputs in, Outputs out, Params p) {\n"
        "  reinterpret_cast<volatile float*>(8)[0] = 1.0f;\n}\n";
    const lab::LiveBuild b = lab::live_compile(src, lab::read_live_options(src, {}));
    REQUIRE(b.ok);
    lab::KernelHost h({lab_exe(), "__trial"});
    lab::HostedLaunches hosted(h, lab::HostTransport::Ipc, 2.0);
    const lab::ImageDesc d{64, 48, 1, lab::PixelType::F32};
    lab::DeviceImage in(d), out(d);
    lab::StageArgs a;
    a.in = {in.ref()}, a.out = {out.ref()}, a.block = {32, 8};
    auto open_fds = [] {
      int n = 0;
      for (int fd = 0; fd < 4096; ++fd) n += fcntl(fd, F_GETFD) != -1;
      return n;
    };
    auto children = [] {
      return shell("ps -o pid= --ppid " + std::to_string(getpid()) + " | wc -l").out;
    };
    auto rss_mb = [] {
      long pages = 0, resident = 0;
      FILE* f = std::fopen("/proc/self/statm", "r");
      if (f && std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
      if (f) std::fclose(f);
      return double(resident) * double(sysconf(_SC_PAGESIZE)) / 1e6;
    };
    auto device_used_mb = [] {
      size_t free = 0, total = 0;
      REQUIRE(cudaMemGetInfo(&free, &total) == cudaSuccess);
      return double(total - free) / 1e6;
    };
    lab::TrialLimits limits;
    limits.timeout_s = 10;
    int fds = -1;
    double rss = 0, used = 0;
    for (int round = 0; round < 20; ++round) {
      // Measured with the kernel installed: a warm child with its context and module, each round.
      REQUIRE(h.install(b, limits).passed());
      // From the third round: the first two open what the lab keeps (the driver's IPC
      // descriptor, the interprocess event), once.
      if (round == 2) fds = open_fds(), rss = rss_mb(), used = device_used_mb();
      if (round > 2) CHECK(open_fds() == fds);
      CHECK_THROWS_AS(hosted.launch("blur", a, {}, nullptr), lab::KernelHostFault);
      CHECK_FALSE(h.installed());
    }
    REQUIRE(h.install(b, limits).passed());
    const double rss_end = rss_mb(), used_end = device_used_mb();
    MESSAGE("after 20 faults: descriptors "
            << open_fds() << " (round 3: " << fds << "), RSS " << rss_end << " MB (" << rss
            << "), device memory in use " << used_end << " MB (" << used << ")");
    CHECK(rss_end - rss < 16);  // MB: allocator noise, not a context or a module a round
    CHECK(std::fabs(used_end - used) < 64);  // MB: one CUDA context is several hundred
    CHECK(h.spawned() == 21);
    CHECK(std::stoi(children()) <= 2);  // the warm child (and the ps itself)
  }
}
