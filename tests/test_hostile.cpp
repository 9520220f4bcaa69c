// Hostile input (issue 15's reproducers): each once hung the lab, crashed it, or was accepted
// without a word. Every command here must end, with the documented exit code and one line.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#if defined(LAB_WITH_OPENCV)
#include <opencv2/core.hpp>
#include <opencv2/videoio.hpp>
#endif

#include "image_source.h"
#include "support.h"

namespace fs = std::filesystem;

namespace {

fs::path scratch(const std::string& tag) {
  const fs::path d =
      fs::temp_directory_path() / ("lab_hostile_" + tag + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

void write_bytes(const fs::path& p, const std::string& bytes) {
  std::ofstream f(p, std::ios::binary);
  f << bytes;
}

std::string read_bytes(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// A 49-byte Radiance HDR whose RLE data stops short: Debian's stb 2.27 loops on it forever
// (CVE-2021-42715).
const std::string kBadHdr = std::string("#?RADIANCE\nFORMAT=32-bit_rle_rgbe\n\n-Y 1 +X 8\n") +
                            std::string("\x02\x02\x00\x08", 4);

const std::string kCpu = " --device cpu ";

}  // namespace

TEST_SUITE("cpu") {
  TEST_CASE("hostile: a truncated Radiance HDR, whatever its name, is refused at once") {
    const fs::path d = scratch("hdr");
    write_bytes(d / "b.png", kBadHdr);
    const Result r = lab_cli("check" + kCpu + "--input " + (d / "b.png").string(), 30);
    CHECK(r.code == 65);
    CHECK(has(r, "not an image the lab reads"));
    // In a folder it no longer blocks the source: the good image beside it is read.
    fs::copy_file(data_path("box.png"), d / "c.png");
    const Result f = lab_cli("run" + kCpu + "--frames 3 --input " + d.string(), 30);
    CHECK(f.code == 0);
    CHECK(has(f, " skipped"));
    fs::remove_all(d);
  }

  TEST_CASE("hostile: formats are told by their signature, not their name") {
    const std::string png = read_bytes(data_path("box.png"));
    const std::string jpg = read_bytes(data_path("rocket.jpg"));
    auto fmt = [](const std::string& b) {
      return lab::io::sniff_image_format(reinterpret_cast<const uint8_t*>(b.data()), b.size());
    };
    CHECK(fmt(png) == lab::io::ImageFormat::Png);
    CHECK(fmt(jpg) == lab::io::ImageFormat::Jpeg);
    CHECK(fmt("P5\n2 2\n255\nabcd") == lab::io::ImageFormat::Pnm);
    CHECK(fmt(kBadHdr) == lab::io::ImageFormat::Unknown);
    CHECK(fmt("GIF89a....") == lab::io::ImageFormat::Unknown);  // not documented
    CHECK(fmt("") == lab::io::ImageFormat::Unknown);
    auto cut = [&](const std::string& b, lab::io::ImageFormat f) {
      return lab::io::image_truncated(f, reinterpret_cast<const uint8_t*>(b.data()), b.size());
    };
    CHECK_FALSE(cut(png, lab::io::ImageFormat::Png));
    CHECK_FALSE(cut(jpg, lab::io::ImageFormat::Jpeg));
    CHECK_FALSE(cut(jpg + std::string(100, '\0'), lab::io::ImageFormat::Jpeg));  // data after EOI
    CHECK(cut(png.substr(0, png.size() / 2), lab::io::ImageFormat::Png));
    CHECK(cut(jpg.substr(0, jpg.size() / 2), lab::io::ImageFormat::Jpeg));
  }

  TEST_CASE("hostile: a truncated JPEG is an error, or at the user's choice a warning") {
    const fs::path d = scratch("jpg");
    const std::string jpg = read_bytes(data_path("rocket.jpg"));
    write_bytes(d / "half.jpg", jpg.substr(0, jpg.size() / 2));
    const std::string in = " --input " + (d / "half.jpg").string() + " --size 64x48";
    const Result r = lab_cli("check" + kCpu + in, 30);
    CHECK(r.code == 65);
    CHECK(has(r, "truncated JPEG"));
    const Result ok = lab_cli("check" + kCpu + "--accept-truncated" + in, 30);
    CHECK(ok.code == 0);
    CHECK(has(ok, "warning: " + (d / "half.jpg").string() + ": truncated JPEG"));
    fs::remove_all(d);
  }

  TEST_CASE("hostile: numbers out of range are usage errors, not wrapped") {
    for (const char* bad : {"--max-pixels -1", "--max-pixels 99999999999999999999999",
                            "--max-pixels 0", "--seed -1", "--seed 1.5"}) {
      INFO(std::string(bad));
      const Result r = lab_cli("check" + kCpu + "--input synthetic:32x24 " + bad, 30);
      CHECK(r.code == 64);
    }
  }

  TEST_CASE("hostile: a --stage the pipeline does not have is a usage error") {
    const Result r = lab_cli("check" + kCpu + "--pipeline harris --stage topk", 30);
    CHECK(r.code == 64);
    CHECK(has(r, "not a stage of this pipeline"));
    CHECK(lab_cli("check" + kCpu + "--input synthetic:32x24 --size 32x24 --stage blur", 60).code ==
          0);
  }

  TEST_CASE("hostile: a folder where nothing decodes is bad data, 5 files or 150") {
    for (int n : {5, 150}) {
      INFO(n << " files");
      const fs::path d = scratch("bad" + std::to_string(n));
      for (int k = 0; k < n; ++k) write_bytes(d / ("f" + std::to_string(k) + ".png"), "not a png");
      const Result r = lab_cli("check" + kCpu + "--input " + d.string(), 60);
      CHECK(r.code == 65);
      fs::remove_all(d);
    }
  }

#if defined(LAB_WITH_OPENCV)
  TEST_CASE("hostile: a one-frame video loops, and its frame count is known or said unknown") {
    const fs::path d = scratch("video");
    const std::string path = (d / "one.avi").string();
    {
      cv::VideoWriter w(path, cv::VideoWriter::fourcc('M', 'J', 'P', 'G'), 10, cv::Size(64, 48));
      REQUIRE(w.isOpened());
      w.write(cv::Mat(48, 64, CV_8UC3, cv::Scalar(10, 200, 30)));
    }
    const Result c = lab_cli("check" + kCpu + "--input " + path + " --size 64x48", 60);
    CHECK(c.code == 0);
    CHECK_FALSE(has(c, "-9223372036854775808"));
    const Result r = lab_cli("run" + kCpu + "--frames 30 --input " + path + " --size 64x48", 60);
    CHECK(r.code == 0);
    CHECK(has(r, "over 30 frame(s)"));
    fs::remove_all(d);
  }
#endif
}
