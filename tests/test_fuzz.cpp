// The fuzz corpus replayed on every test run: every input the fuzzers kept (tests/fuzz/corpus/,
// the reproducers of issue 15 among them) and the repository's test images, through the same
// targets libFuzzer calls (tests/fuzz/targets.h). A target that breaks a promise throws
// FuzzFailure; a crash or a sanitizer report fails the run outright.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "fuzz/targets.h"
#include "support.h"

namespace fs = std::filesystem;

namespace {

std::vector<uint8_t> read_all(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

std::vector<fs::path> files_in(const fs::path& dir) {
  std::vector<fs::path> out;
  if (fs::is_directory(dir))
    for (const auto& e : fs::directory_iterator(dir))
      if (e.is_regular_file()) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

// The corpus: LAB_FUZZ_CORPUS from the environment (a bundle run on another machine), else the
// folder configured at build time.
fs::path corpus_dir() {
  const char* env = std::getenv("LAB_FUZZ_CORPUS");
  return fs::path(env && *env ? env : LAB_FUZZ_CORPUS_DIR);
}

void replay(const lab::fuzz::Target& t, const fs::path& file) {
  const std::vector<uint8_t> bytes = read_all(file);
  INFO(t.name << " <- " << file.string());
  CHECK_NOTHROW(t.run(bytes.data(), bytes.size()));
}

}  // namespace

TEST_SUITE("cpu") {
  TEST_CASE("fuzz: every corpus input replays through its target without a finding") {
    size_t n = 0;
    const lab::fuzz::Target* all = lab::fuzz::targets(&n);
    REQUIRE(n == 11);
    for (size_t i = 0; i < n; ++i) {
      const auto files = files_in(corpus_dir() / all[i].name);
      INFO("corpus of " << all[i].name);
      CHECK(files.size() >= 5);  // seeds and reproducers; an emptied folder would test nothing
      for (const auto& f : files) replay(all[i], f);
    }
  }

  TEST_CASE("fuzz: the repository's test images are seeds the image target decodes") {
    size_t n = 0;
    const lab::fuzz::Target* image = lab::fuzz::targets(&n);
    REQUIRE(std::string(image->name) == "image");
    for (const char* name : {"box.png", "chessboard.png", "rocket.jpg", "graf1.png"})
      replay(*image, data_path(name));
  }

  TEST_CASE("fuzz: issue 15's reproducers are in the corpus") {
    // Named so that nobody prunes them with a corpus merge.
    for (const char* path :
         {"image/repro-radiance-hdr-rle-loop", "image/repro-truncated-jpeg",
          "image/repro-truncated-png", "nvrtc_log/repro-30000-char-line",
          "live_options/repro-30000-char-line", "source_spec/repro-camera-sign",
          "preset/repro-100000-deep", "preset/repro-newer-schema", "npy/repro-lying-shape",
          "trial_wire/repro-huge-frame", "preset/repro-schema-1e300"}) {
      INFO(std::string(path));
      CHECK(fs::is_regular_file(corpus_dir() / path));
    }
  }
}
