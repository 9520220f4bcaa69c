// The lab's writer (output_file.h) and every command that writes through it: nothing the lab
// did not make is destroyed, no half-written output is left, standard output is checked, and an
// interrupted run says so in its exit code.
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <csignal>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "check.h"
#include "output_file.h"
#include "support.h"

namespace fs = std::filesystem;

namespace {

fs::path scratch(const std::string& tag) {
  const fs::path d = fs::temp_directory_path() / ("lab_out_" + tag + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

void put(const fs::path& p, const std::string& bytes) {
  std::ofstream f(p, std::ios::binary);
  f << bytes;
}

std::string get(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// Names in a folder, hidden ones included (a temporary left behind shows here).
std::string listing(const fs::path& d) {
  std::string out;
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(d)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  for (const auto& n : names) out += n + " ";
  return out;
}

// A character device like /dev/full (1, 7): only root may make one.
bool make_full_device(const fs::path& p) {
  return ::mknod(p.c_str(), S_IFCHR | 0666, makedev(1, 7)) == 0;
}

bool is_char_device(const fs::path& p) {
  struct stat st;
  return ::lstat(p.c_str(), &st) == 0 && S_ISCHR(st.st_mode);
}

bool gui_built() {
  return lab_cli("gui --help").code == 0;
}

// One CPU frame of the pipeline on the synthetic scene at `input`'s size.
std::string run_on(const std::string& input = "96x64") {
  return "run --device cpu --frames 1 --size 64x64 --input synthetic:" + input + " ";
}
const std::string kRun = run_on();

// Shell text that waits (up to 60 s) until process $p catches `sig`: a background job of sh
// starts with SIGINT ignored, so a signal sent before the lab installs its handler is lost.
std::string wait_for_handler(int sig) {
  return "i=0; while [ $i -lt 600 ]; do c=$(sed -n 's/^SigCgt:[[:space:]]*//p' /proc/$p/status "
         "2>/dev/null); [ -n \"$c\" ] && [ $(( 0x$c & " +
         std::to_string(1 << (sig - 1)) + " )) -ne 0 ] && break; sleep 0.1; i=$((i + 1)); done; ";
}

}  // namespace

TEST_SUITE("cpu") {
  TEST_CASE("output writer: a file is put in place whole, with no temporary left") {
    const fs::path d = scratch("whole");
    lab::write_output_file((d / "a.txt").string(), "first");
    CHECK(get(d / "a.txt") == "first");
    ::chmod((d / "a.txt").c_str(), 0640);
    lab::write_output_file((d / "a.txt").string(), "second");
    CHECK(get(d / "a.txt") == "second");
    struct stat st;
    REQUIRE(::stat((d / "a.txt").c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0640);  // a replaced file keeps its mode
    CHECK(listing(d) == "a.txt ");
    // Not committed: the temporary goes, the old file stays.
    {
      lab::OutputFile f((d / "a.txt").string());
      f.write("third");
    }
    CHECK(get(d / "a.txt") == "second");
    CHECK(listing(d) == "a.txt ");
    // A temporary of a process that is gone (killed mid-write) is removed by the next write.
    put(d / ".a.txt.lab-999999999-7", "stale");
    lab::write_output_file((d / "a.txt").string(), "fourth");
    CHECK(listing(d) == "a.txt ");
  }

  TEST_CASE("output writer: a link is written through, and an input is never an output") {
    const fs::path d = scratch("link");
    put(d / "target.txt", "old");
    fs::create_symlink(d / "target.txt", d / "link.txt");
    lab::write_output_file((d / "link.txt").string(), "new");
    CHECK(fs::is_symlink(d / "link.txt"));
    CHECK(get(d / "target.txt") == "new");

    put(d / "in.png", "input bytes");
    fs::create_symlink(d / "in.png", d / "alias.png");
    fs::create_hard_link(d / "in.png", d / "hard.png");
    lab::clear_inputs();
    lab::note_input((d / "in.png").string());
    for (const char* out : {"in.png", "alias.png", "hard.png"}) {
      CAPTURE(out);
      try {
        lab::write_output_file((d / out).string(), "clobbered");
        FAIL("an input was overwritten");
      } catch (const lab::Error& e) {
        CHECK(e.kind() == lab::ErrorKind::CantCreate);
        CHECK(std::string(e.what()).find("is an input of this run") != std::string::npos);
      }
    }
    CHECK(get(d / "in.png") == "input bytes");
    lab::clear_inputs();
  }

  TEST_CASE("output writer: folders, FIFOs and devices are refused before anything opens") {
    const fs::path d = scratch("kinds");
    fs::create_directories(d / "dir");
    REQUIRE(::mkfifo((d / "fifo").c_str(), 0600) == 0);
    for (const char* out : {"dir", "fifo"}) {
      CAPTURE(out);
      CHECK_THROWS_WITH_AS(lab::write_output_file((d / out).string(), "x"),
                           doctest::Contains("the lab writes regular files only"), lab::Error);
    }
    CHECK(fs::is_fifo(d / "fifo"));
    if (!make_full_device(d / "full")) {
      MESSAGE("skipped the device node: mknod needs root");
      return;
    }
    CHECK_THROWS_WITH_AS(lab::write_output_file((d / "full").string(), "x"),
                         doctest::Contains("character device"), lab::Error);
    CHECK(is_char_device(d / "full"));
  }

  TEST_CASE("output writer: a set is put in place whole or not at all") {
    const fs::path d = scratch("set");
    // A new folder: built aside, renamed in place by commit.
    {
      lab::OutputSet set((d / "new").string());
      set.add("a.npy").write("A");
      set.add("b.npy").write("B");
      CHECK(!fs::exists(d / "new"));
      set.commit();
    }
    CHECK(listing(d / "new") == "a.npy b.npy ");
    CHECK(listing(d) == "new ");
    // A failing member: nothing of the set is left, and the folder is not made.
    {
      fs::create_directories(d / "old");
      put(d / "old" / "a.npy", "previous A");
      fs::create_directories(d / "old" / "b.npy");  // a folder where a slot goes
      lab::OutputSet set((d / "old").string());
      set.add("a.npy").write("new A");
      CHECK_THROWS_AS(set.add("b.npy"), lab::Error);
    }
    CHECK(get(d / "old" / "a.npy") == "previous A");
    CHECK(listing(d / "old") == "a.npy b.npy ");
    {
      lab::OutputSet set((d / "never").string());
      set.add("a.npy").write("A");
    }  // not committed
    CHECK(listing(d) == "new old ");
    // A file where the folder goes.
    put(d / "file", "x");
    CHECK_THROWS_WITH_AS(lab::OutputSet((d / "file").string()), doctest::Contains("not a folder"),
                         lab::Error);
  }

  TEST_CASE("outputs: a device node at a dump slot or a texture dump is refused, untouched") {
    const fs::path d = scratch("dev");
    fs::create_directories(d / "dump");
    if (!make_full_device(d / "dump" / "blur.npy")) {
      MESSAGE("skipped: mknod needs root");
      return;
    }
    const Result r = lab_cli(kRun + "--dump " + (d / "dump").string(), 60);
    CHECK(r.code == 73);
    CHECK(has(r, "character device"));
    CHECK(is_char_device(d / "dump" / "blur.npy"));
    CHECK(listing(d / "dump") == "blur.npy ");  // no half dump beside it
    if (!gui_built()) return;
    REQUIRE(make_full_device(d / "fulldev"));
    const Result g = lab_cli(
        "gui --headless --device cpu --frames 2 --window 320x200 --input "
        "synthetic:96x64 --dump-texture " +
            (d / "fulldev").string(),
        60);
    CHECK(g.code == 73);
    CHECK(is_char_device(d / "fulldev"));
  }

  TEST_CASE("outputs: no output may overwrite an input, through links too") {
    const fs::path d = scratch("input");
    fs::copy_file(data_path("box.png"), d / "in.png");
    const std::string before = get(d / "in.png");
    const Result b = lab_cli("bench --device cpu --input " + (d / "in.png").string() + " --out " +
                                 (d / "in.png").string(),
                             60);
    CHECK(b.code == 73);
    fs::create_directories(d / "dump");
    fs::create_symlink(d / "in.png", d / "dump" / "input.npy");
    const Result r = lab_cli("run --device cpu --frames 1 --input " + (d / "in.png").string() +
                                 " --dump " + (d / "dump").string(),
                             60);
    CHECK(r.code == 73);
    CHECK(has(r, "is an input of this run"));
    CHECK(get(d / "in.png") == before);
    if (gui_built()) {
      const Result g =
          lab_cli("gui --headless --device cpu --frames 1 --window 320x200 --input " +
                      (d / "in.png").string() + " --screenshot " + (d / "in.png").string(),
                  60);
      CHECK(g.code == 73);
      CHECK(get(d / "in.png") == before);
    }
  }

  TEST_CASE("outputs: a full disk leaves the previous output, never a truncated one") {
    const fs::path d = scratch("full");
    // The first dump succeeds; the second, with room for 8 KiB, fails and leaves the first.
    const std::string dump = (d / "dump").string();
    REQUIRE(lab_cli(kRun + "--dump " + dump, 60).code == 0);
    const std::string blur = get(d / "dump" / "blur.npy"), list = listing(d / "dump");
    const Result r =
        shell("ulimit -f 8; " + lab_exe() + " " + run_on("97x64") + "--dump " + dump + " 2>&1");
    CHECK(r.code == 74);
    CHECK(has(r, "write failed: File too large"));
    CHECK(get(d / "dump" / "blur.npy") == blur);
    CHECK(listing(d / "dump") == list);
    // A new dump folder that cannot be completed is not made at all.
    const Result n = shell("ulimit -f 8; " + lab_exe() + " " + kRun + "--dump " +
                           (d / "fresh").string() + " 2>&1");
    CHECK(n.code == 74);
    CHECK(listing(d) == "dump ");
    // copy -o over an existing file.
    put(d / "k.cu", "my kernel");
    const Result c = shell("ulimit -f 1; " + lab_exe() + " copy blur=v4_rows -o " +
                           (d / "k.cu").string() + " 2>&1");
    CHECK(c.code == 74);
    CHECK(get(d / "k.cu") == "my kernel");
    if (gui_built()) {
      put(d / "shot.png", "previous shot");
      const Result g = shell("ulimit -f 4; " + lab_exe() +
                             " gui --headless --device cpu --frames 1 --window 320x200 "
                             "--input synthetic:96x64 --screenshot " +
                             (d / "shot.png").string() + " 2>&1");
      CHECK(g.code == 74);
      CHECK(get(d / "shot.png") == "previous shot");
    }
    CHECK(listing(d) == "dump k.cu " + std::string(gui_built() ? "shot.png " : ""));
  }

  TEST_CASE("outputs: a dump folder is made only once the input opened and every slot ran") {
    const fs::path d = scratch("late");
    const Result r = lab_cli("run --device cpu --input " + (d / "missing.png").string() +
                                 " --dump " + (d / "dump").string(),
                             60);
    CHECK(r.code == 66);
    put(d / "empty.png", "");
    const Result e = lab_cli("run --device cpu --input " + (d / "empty.png").string() + " --dump " +
                                 (d / "dump").string(),
                             60);
    CHECK(e.code == 65);
    CHECK(!fs::exists(d / "dump"));
    REQUIRE(::mkfifo((d / "fifo").c_str(), 0600) == 0);
    fs::create_directories(d / "slots");
    REQUIRE(::mkfifo((d / "slots" / "blur.npy").c_str(), 0600) == 0);
    const Result f = lab_cli(kRun + "--dump " + (d / "slots").string(), 30);
    CHECK(f.code == 73);  // at once: a FIFO is never opened
  }

  TEST_CASE("outputs: standard output is checked like a file") {
    for (const std::string& args :
         {std::string("list"), std::string("list --json"), std::string("--help"),
          std::string("--version"), std::string("copy blur=v4_rows"),
          std::string("check --device cpu --quick --stage blur --input synthetic:64x48")}) {
      CAPTURE(args);
      const Result full = shell(lab_exe() + " " + args + " 2>&1 >/dev/full");
      CHECK(full.code == 74);
      CHECK(full.out.find("standard output: write failed") != std::string::npos);
      const Result closed = shell(lab_exe() + " " + args + " 2>&1 >&-");
      CHECK(closed.code == 74);
    }
    // A broken pipe with SIGPIPE ignored: the write fails with EPIPE.
    const Result pipe =
        shell("bash -c \"trap '' PIPE; " + lab_exe() +
              " list 2>/dev/null | (exec 0<&-; sleep 0); echo rc=\\${PIPESTATUS[0]}\"");
    CHECK(has(pipe, "rc=74"));
  }

  TEST_CASE("outputs: numbers are decimal, whole where they count, and never NaN") {
    // 01000 is a thousand (base 0 read it as 512): a 40x25 scene is exactly at the cap.
    CHECK(lab_cli(run_on("40x25") + "--max-pixels 01000", 60).code == 0);
    CHECK(lab_cli(run_on("41x25") + "--max-pixels 01000", 60).code == 65);
    for (const std::string& bad :
         {std::string("run --device cpu --frames 0x10"),
          std::string("run --device cpu --frames 5.5"), std::string("run --device cpu --seed 0x8"),
          std::string("bench --noise nan"), std::string("bench --queue-ahead inf"),
          std::string("check --trial-timeout nan"), std::string("run --device cpu --frames 1e3")}) {
      CAPTURE(bad);
      const Result r = lab_cli(bad, 30);
      CHECK(r.code == 64);
      CHECK((has(r, "not a whole number") || has(r, "not a finite number")));
    }
    if (gui_built()) CHECK(lab_cli("gui --headless --ui-scale nan", 30).code == 64);
  }

  TEST_CASE("outputs: a preset whose pipeline is null or empty warns and gives the defaults") {
    const fs::path d = scratch("preset");
    for (const char* text : {R"({"schema":1,"pipeline":null})", R"({"schema":1,"pipeline":[]})",
                             R"({"schema":1,"pipeline":{}})"}) {
      CAPTURE(text);
      put(d / "p.json", text);
      const Result r = lab_cli(kRun + "--preset " + (d / "p.json").string(), 60);
      CHECK(r.code == 0);
      CHECK(has(r, "'pipeline' is not a list of stages"));
      CHECK(has(r, "letterbox"));  // the defaults ran
    }
  }

  TEST_CASE("outputs: an interrupted run says so in its exit code, within a second") {
    // Between frames: the loop stops, prints its report and writes the dump of the last frame.
    const fs::path d = scratch("signal");
    const Result r = shell("( " + lab_exe() +
                           " run --device cpu --frames 1000000 --size 64x64 --input "
                           "synthetic:96x64 --dump " +
                           (d / "dump").string() + " & p=$!; " + wait_for_handler(SIGINT) +
                           "kill -INT $p; wait $p; echo rc=$? ) 2>&1");
    INFO(r.out);
    CHECK(has(r, "rc=130"));
    CHECK(has(r, "interrupted (SIGINT)"));
    CHECK(fs::exists(d / "dump" / "keypoints.npy"));
    // Inside a frame that takes seconds (the CPU references at 6000x6000): within a second.
    const Result t = shell("( " + lab_exe() +
                           " run --device cpu --frames 3 --size 6000x6000 --input "
                           "synthetic:6000x6000 & p=$!; " +
                           wait_for_handler(SIGTERM) +
                           "sleep 1; kill -TERM $p; s=$(date +%s%N); wait $p; echo rc=$?; "
                           "echo ms=$(( ($(date +%s%N) - s) / 1000000 )) ) 2>&1");
    INFO(t.out);
    CHECK(has(t, "rc=143"));
    const size_t at = t.out.find("ms=");
    REQUIRE(at != std::string::npos);
    CHECK(std::stoi(t.out.substr(at + 3)) < 1500);
  }
}
