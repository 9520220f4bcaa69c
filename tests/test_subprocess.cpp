// The one subprocess module, the toolkit finder and the text helpers every other module uses.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "json_number.h"
#include "subprocess.h"
#include "text.h"
#include "toolkit.h"

namespace fs = std::filesystem;

namespace {

// Sets an environment variable for one scope, then puts back what was there.
class EnvScope {
 public:
  EnvScope(const char* name, const char* value) : m_name(name) {
    const char* old = std::getenv(name);
    m_had = old != nullptr;
    if (old) m_old = old;
    if (value)
      setenv(name, value, 1);
    else
      unsetenv(name);
  }
  ~EnvScope() {
    if (m_had)
      setenv(m_name, m_old.c_str(), 1);
    else
      unsetenv(m_name);
  }

 private:
  const char* m_name;
  bool m_had = false;
  std::string m_old;
};

void make_tool(const fs::path& p) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << "#!/bin/sh\n";
  fs::permissions(p, fs::perms::owner_all);
}

}  // namespace

TEST_SUITE("cpu") {
  TEST_CASE("subprocess: a run's output, error output and exit status are captured") {
    const lab::CapturedRun r =
        lab::run_captured({"/bin/sh", "-c", "echo out; echo err >&2; exit 3"}, 10);
    CHECK(r.started);
    CHECK_FALSE(r.timed_out);
    CHECK(r.status == 3);
    CHECK(r.out == "out\n");
    CHECK(r.err == "err\n");
    const lab::CapturedRun capped =
        lab::run_captured({"/bin/sh", "-c", "head -c 100000 /dev/zero"}, 10, 1000);
    CHECK(capped.status == 0);
    CHECK(capped.out.size() < 100000);  // read to the end, kept up to the cap (one read's worth)
    CHECK_FALSE(lab::run_captured({"/no/such/program"}, 10).started);
  }

  TEST_CASE("subprocess: a run past its deadline is killed with what it started, not waited for") {
    const auto t0 = std::chrono::steady_clock::now();
    const lab::CapturedRun r = lab::run_captured({"/bin/sh", "-c", "sleep 30 & sleep 30"}, 0.3);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    CHECK(r.timed_out);
    CHECK(s < 10);  // its group killed, the grandchild holding the pipe too
  }

  TEST_CASE("subprocess: a child on a socket pair, its group killed, its status in words") {
    std::string why;
    std::unique_ptr<lab::Child> c =
        lab::Child::spawn({"/bin/cat"}, {lab::ChildIo::Socket, true, ""}, &why);
    REQUIRE(c);
    CHECK(why.empty());
    const auto deadline = lab::SteadyClock::now() + std::chrono::seconds(10);
    CHECK(lab::write_all(c->fd, "hello", &deadline) == lab::IoResult::Ok);
    char buf[5];
    size_t got = 0;
    CHECK(lab::read_exact(c->fd, buf, 5, &deadline, &got) == lab::IoResult::Ok);
    CHECK(std::string(buf, 5) == "hello");
    const auto soon = lab::SteadyClock::now() + std::chrono::milliseconds(100);
    CHECK(lab::read_exact(c->fd, buf, 1, &soon, &got) == lab::IoResult::Timeout);
    CHECK_FALSE(c->reap(0));
    c->kill();
    CHECK(c->exited());
    CHECK(WIFSIGNALED(c->status()));
    CHECK(lab::status_words(c->status()).find("signal 9") == 0);

    std::unique_ptr<lab::Child> e =
        lab::Child::spawn({"/bin/cat"}, {lab::ChildIo::Socket, false, ""}, &why);
    REQUIRE(e);
    e->close_fd();  // EOF on its stdin: it ends by itself
    CHECK(e->reap(10000));
    CHECK(lab::status_words(e->status()) == "exit status 0");

    std::string reply;
    std::unique_ptr<lab::Child> x =
        lab::Child::spawn({"/bin/cat"}, {lab::ChildIo::Socket, true, ""}, &why);
    REQUIRE(x);
    CHECK(lab::exchange_until_eof(x->fd, "request", 1 << 20,
                                  lab::SteadyClock::now() + std::chrono::seconds(10),
                                  &reply) == lab::IoResult::Ok);
    CHECK(reply == "request");

    CHECK_FALSE(lab::Child::spawn({"/no/such/program"}, {}, &why));
    CHECK(why.find("/no/such/program") != std::string::npos);
    CHECK(lab::self_executable().find('/') == 0);
  }

  TEST_CASE("toolkit: one order, PATH first, then each toolkit's bin and the tool's own folder") {
    const fs::path root = fs::temp_directory_path() / ("lab_toolkit_" + std::to_string(getpid()));
    fs::remove_all(root);
    make_tool(root / "home/compute-sanitizer/compute-sanitizer");
    make_tool(root / "path/compute-sanitizer");
    make_tool(root / "cpath/bin/compute-sanitizer");
    {
      const EnvScope path("PATH", "");
      const EnvScope home("CUDA_HOME", (root / "home").c_str());
      const EnvScope cpath("CUDA_PATH", (root / "cpath").c_str());
      const lab::ToolLookup t = lab::find_cuda_tool("compute-sanitizer");
      CHECK(t.path == (root / "home/compute-sanitizer/compute-sanitizer").string());
      CHECK(t.where().find("PATH") == 0);
      CHECK(t.where().find("($CUDA_HOME)") != std::string::npos);
      CHECK(t.where().find("($CUDA_PATH)") != std::string::npos);
      CHECK(t.where().find("/usr/local/cuda/bin") != std::string::npos);
    }
    {
      const EnvScope path("PATH", (root / "path").c_str());
      const EnvScope home("CUDA_HOME", (root / "home").c_str());
      CHECK(lab::find_cuda_tool("compute-sanitizer").path ==
            (root / "path/compute-sanitizer").string());
    }
    {
      const EnvScope path("PATH", "");
      const EnvScope home("CUDA_HOME", nullptr);
      const EnvScope cpath("CUDA_PATH", (root / "cpath/").c_str());
      CHECK(lab::find_cuda_tool("compute-sanitizer").path ==
            (root / "cpath/bin/compute-sanitizer").string());
      CHECK(lab::find_cuda_tool("no-such-cuda-tool").path.empty());
    }
    fs::remove_all(root);
  }

  TEST_CASE("text: trim, prefixes, numbers and JSON's null for what is not known") {
    CHECK(lab::trim("  a b \t\n") == "a b");
    CHECK(lab::trim(std::string("gv11b\0", 6)) == "gv11b");  // device-tree strings end in a NUL
    CHECK(lab::trim("   ").empty());
    CHECK(lab::starts_with("========= ERROR", "========="));
    CHECK_FALSE(lab::starts_with("==", "==="));
    CHECK(lab::ends_with("in0_label", "_label"));
    CHECK(lab::fmt("%.2f us", 1.5) == "1.50 us");
    CHECK(lab::format_or_dash("%.1f", NAN) == "-");
    CHECK(lab::format_or_dash("%.1f", 2.25) == "2.2");
    CHECK(lab::json_number(NAN).is_null());
    CHECK(lab::json_number(INFINITY).is_null());
    CHECK(lab::json_number(2.5) == 2.5);
    CHECK(lab::ident_char('$'));
    CHECK_FALSE(lab::ident_char('.'));
  }
}
