// Image headers read before any decoder runs (issue 42): every format's dimensions from its
// header, the pixel cap checked before the cost, truncated or corrupt files refused, and no
// third-party library text ahead of the lab's one line.
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#if defined(LAB_WITH_OPENCV)
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#endif

#include "check.h"
#include "image_header.h"
#include "image_source.h"
#include "support.h"

namespace fs = std::filesystem;
using lab::io::ImageFormat;
using lab::io::ImageHeader;

namespace {

fs::path scratch(const std::string& tag) {
  const fs::path d = fs::temp_directory_path() / ("lab_hdr_" + tag + std::to_string(::getpid()));
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

const uint8_t* u8(const std::string& s) {
  return reinterpret_cast<const uint8_t*>(s.data());
}

ImageHeader inspect(const std::string& bytes) {
  return lab::io::inspect_image("t", u8(bytes), bytes.size());
}

// The Data error inspect_image throws, or "" when it accepts the bytes.
std::string refusal(const std::string& bytes) {
  try {
    inspect(bytes);
  } catch (const lab::Error& e) {
    CHECK(e.kind() == lab::ErrorKind::Data);
    return e.what();
  }
  return "";
}

std::string be32(uint32_t v) {
  return {char(v >> 24), char(v >> 16), char(v >> 8), char(v)};
}
std::string le32(uint32_t v) {
  return {char(v), char(v >> 8), char(v >> 16), char(v >> 24)};
}
std::string le16(uint32_t v) {
  return {char(v), char(v >> 8)};
}

// A PNG chunk with its CRC.
std::string chunk(const std::string& type, const std::string& data) {
  const std::string body = type + data;
  return be32(uint32_t(data.size())) + body + be32(lab::io::crc32(u8(body), body.size()));
}

// A baseline or arithmetic (SOF9) JPEG header claiming w x h, a scan header and a tiny body.
std::string jpeg_claiming(int sof, int w, int h) {
  std::string s = "\xff\xd8";
  s += std::string("\xff") + char(sof) + std::string("\x00\x11\x08", 3);
  s += {char(h >> 8), char(h), char(w >> 8), char(w), 3};
  s += std::string("\x01\x11\x00\x02\x11\x00\x03\x11\x00", 9);
  s += std::string("\xff\xda\x00\x0c\x03\x01\x00\x02\x11\x03\x11\x00\x3f\x00", 14);
  s += std::string(64, '\x55');
  return s + "\xff\xd9";
}

// A 4x2 8-bit RLE BMP with a two-colour palette; `end` adds the end-of-bitmap marker.
std::string rle_bmp(bool end) {
  const std::string rle =
      std::string("\x04\x01\x00\x00\x04\x00", 6) + (end ? std::string("\x00\x01", 2) : "");
  const uint32_t off = 14 + 40 + 8;
  std::string s = "BM" + le32(off + uint32_t(rle.size())) + le32(0) + le32(off);
  s += le32(40) + le32(4) + le32(2) + le16(1) + le16(8) + le32(1) + le32(uint32_t(rle.size())) +
       le32(2835) + le32(2835) + le32(2) + le32(0);
  s += std::string("\x00\x00\x00\x00\xff\xff\xff\x00", 8);
  return s + rle;
}

const std::string kCpu = " --device cpu ";

// The lab's stderr alone.
Result lab_stderr(const std::string& args) {
  return shell("timeout 60 " + lab_exe() + " " + args + " 2>&1 >/dev/null");
}

int lines(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

TEST_SUITE("cpu") {
  TEST_CASE("image header: CRC-32 and the test images' dimensions") {
    CHECK(lab::io::crc32(u8("123456789"), 9) == 0xCBF43926u);
    for (const char* name :
         {"astronaut.png", "box.png", "box_in_scene.png", "brick.png", "chelsea.png",
          "chessboard.png", "coffee.png", "dock.jpg", "graf1.png", "lantern.jpg", "pier_4k.jpg",
          "pier_5k.jpg", "rocket.jpg"}) {  // dock.jpg: progressive, with EXIF
      INFO(std::string(name));
      const std::string bytes = read_bytes(data_path(name));
      const ImageHeader h = inspect(bytes);
      CHECK_FALSE(h.truncated);
      CHECK(h.end == bytes.size());
      CHECK(h.trailing == 0);
      const lab::HostImage img = lab::io::load_image(data_path(name));
      CHECK(h.width == img.desc().width);
      CHECK(h.height == img.desc().height);
    }
  }

#if defined(LAB_WITH_OPENCV)
  TEST_CASE("image header: every format OpenCV writes, with its real size") {
    cv::Mat color = cv::imread(data_path("chelsea.png"), cv::IMREAD_COLOR);
    REQUIRE(!color.empty());
    color = color(cv::Rect(10, 20, 37, 23)).clone();
    cv::Mat gray;
    cv::cvtColor(color, gray, cv::COLOR_BGR2GRAY);
    cv::Mat bgra;
    cv::cvtColor(color, bgra, cv::COLOR_BGR2BGRA);
    cv::Mat g16;
    gray.convertTo(g16, CV_16U, 257.0);
    struct Case {
      const char* ext;
      const cv::Mat* m;
      std::vector<int> params;
      ImageFormat f;
    };
    const Case cases[] = {
        {".png", &color, {}, ImageFormat::Png},
        {".png", &g16, {}, ImageFormat::Png},
        {".jpg", &color, {}, ImageFormat::Jpeg},
        {".jpg", &color, {cv::IMWRITE_JPEG_PROGRESSIVE, 1}, ImageFormat::Jpeg},
        {".jpg", &gray, {}, ImageFormat::Jpeg},
        {".bmp", &color, {}, ImageFormat::Bmp},
        {".bmp", &gray, {}, ImageFormat::Bmp},
        {".bmp", &bgra, {}, ImageFormat::Bmp},
        {".pgm", &gray, {}, ImageFormat::Pnm},
        {".pgm", &g16, {}, ImageFormat::Pnm},
        {".ppm", &color, {}, ImageFormat::Pnm},
        {".pbm", &gray, {}, ImageFormat::Pnm},
        {".pgm", &gray, {cv::IMWRITE_PXM_BINARY, 0}, ImageFormat::Pnm},
        {".ppm", &color, {cv::IMWRITE_PXM_BINARY, 0}, ImageFormat::Pnm},
        {".pbm", &gray, {cv::IMWRITE_PXM_BINARY, 0}, ImageFormat::Pnm},
        {".tiff", &color, {}, ImageFormat::Tiff},
        {".tiff", &g16, {}, ImageFormat::Tiff},
        {".webp", &color, {}, ImageFormat::WebP},
        {".webp", &bgra, {cv::IMWRITE_WEBP_QUALITY, 101}, ImageFormat::WebP},
    };
    for (const Case& c : cases) {
      INFO(c.ext << " channels " << c.m->channels() << " depth " << c.m->depth() << " params "
                 << c.params.size());
      std::vector<uint8_t> buf;
      REQUIRE(cv::imencode(c.ext, *c.m, buf, c.params));
      const std::string bytes(buf.begin(), buf.end());
      const ImageHeader h = inspect(bytes);
      CHECK(h.format == c.f);
      CHECK(h.width == 37);
      CHECK(h.height == 23);
      CHECK_FALSE(h.truncated);
      CHECK(h.trailing == 0);
      const lab::HostImage img = lab::io::decode_image("t", u8(bytes), bytes.size());
      CHECK(img.desc().width == 37);
      CHECK(img.desc().height == 23);
      if (c.f != ImageFormat::Tiff && bytes.size() > 200) {
        // Cut short: truncated (or, where the cut lands in the header, malformed): never
        // decoded without a word.
        const std::string half = bytes.substr(0, bytes.size() * 2 / 3);
        bool refused = false;
        try {
          refused = inspect(half).truncated;
        } catch (const lab::Error& e) {
          refused = e.kind() == lab::ErrorKind::Data;
        }
        CHECK(refused);
      }
    }
  }
#endif

  TEST_CASE("image header: hand-made headers of every format") {
    // PNG: IHDR, and a 16-bit gray+alpha one.
    const std::string sig = "\x89PNG\r\n\x1a\n";
    const std::string ihdr = be32(70000) + be32(3) + std::string("\x10\x04\x00\x00\x00", 5);
    const std::string png = sig + chunk("IHDR", ihdr) + chunk("IEND", "");
    ImageHeader h = inspect(png);
    CHECK(h.format == ImageFormat::Png);
    CHECK(h.width == 70000);
    CHECK(h.height == 3);
    CHECK(h.channels == 2);
    CHECK(h.bits == 16);
    CHECK_FALSE(h.truncated);
    CHECK(inspect(png + "garbage").trailing == 7);
    CHECK(inspect(sig + chunk("IHDR", ihdr)).truncated);
    CHECK(refusal(sig + chunk("IHDR", be32(1) + be32(1) + std::string("\x03\x02\0\0\0", 5))) !=
          "");  // bit depth 3

    // JPEG: every SOF kind, arithmetic and lossless included.
    for (int sof : {0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC9, 0xCA, 0xCB, 0xCD, 0xCF}) {
      INFO("SOF " << sof);
      h = inspect(jpeg_claiming(sof, 30000, 20000));
      CHECK(h.width == 30000);
      CHECK(h.height == 20000);
      CHECK(h.channels == 3);
      CHECK_FALSE(h.truncated);
    }
    const std::string jpg = jpeg_claiming(0xC9, 8, 8);
    CHECK(inspect(jpg.substr(0, jpg.size() - 2)).truncated);
    CHECK(inspect(jpg + "tail").trailing == 4);
    // FF 00 and RSTn inside the scan do not end it.
    std::string rst = jpg;
    rst.insert(rst.size() - 10, std::string("\xff\x00\xff\xd3\xff\xff\x00", 7));
    CHECK_FALSE(inspect(rst).truncated);
    CHECK(refusal(jpeg_claiming(0xC0, 8, 0)).find("DNL") != std::string::npos);

    // BMP: RLE with and without its end marker; an OS/2 core header; top-down.
    h = inspect(rle_bmp(true));
    CHECK(h.width == 4);
    CHECK(h.height == 2);
    CHECK_FALSE(h.truncated);
    CHECK(inspect(rle_bmp(false)).truncated);
    const std::string core = "BM" + le32(26 + 6 * 2 + 4) + le32(0) + le32(26) + le32(12) + le16(2) +
                             le16(2) + le16(1) + le16(24) + std::string(16, '\x7f');
    h = inspect(core);
    CHECK(h.width == 2);
    CHECK(h.height == 2);
    CHECK_FALSE(h.truncated);
    CHECK(inspect(core.substr(0, core.size() - 1)).truncated);
    std::string down = rle_bmp(true);
    down.replace(22, 4, le32(uint32_t(-2)));
    down.replace(30, 4, le32(0));  // uncompressed, 4x2 at 8 bits: 8 bytes of data
    h = inspect(down);
    CHECK(h.height == 2);
    CHECK_FALSE(h.truncated);

    // PNM: comments in the header; 16-bit samples need two bytes each; ASCII counted.
    h = inspect("P5\n# a comment\n3 2\n65535\n" + std::string(12, '\1'));
    CHECK(h.width == 3);
    CHECK(h.height == 2);
    CHECK(h.bits == 16);
    CHECK_FALSE(h.truncated);
    CHECK(inspect("P5\n3 2\n65535\n" + std::string(11, '\1')).truncated);
    CHECK(inspect("P4\n9 2\n" + std::string(4, '\1')).end == 11);
    CHECK_FALSE(inspect("P1\n3 2\n010\n1 1 1\n").truncated);
    CHECK(inspect("P1\n3 2\n010\n1 1\n").truncated);
    CHECK(inspect("P3\n2 1\n255\n1 2 3 4 5\n").truncated);
    CHECK_FALSE(inspect("P3\n2 1\n255\n1 2 3 4 5 600\n").truncated);
    CHECK(refusal("P2\n2 1\n0\n1 2\n") != "");         // maxval 0
    CHECK(refusal("P6\n2 1\n70000\n") != "");          // maxval over 16 bits
    CHECK(refusal("P6\n99999999999 1\n255\n") != "");  // width over 10 digits

    // TIFF: little- and big-endian, SHORT and LONG sizes; a malformed IFD refused.
    const std::string tiff_le = std::string("II*\0", 4) + le32(8) + le16(2) + le16(256) + le16(4) +
                                le32(1) + le32(100000) + le16(257) + le16(3) + le32(1) + le32(300) +
                                le32(0);
    h = inspect(tiff_le);
    CHECK(h.format == ImageFormat::Tiff);
    CHECK(h.width == 100000);
    CHECK(h.height == 300);
    const std::string tiff_be = std::string("MM\0*", 4) + be32(8) + std::string("\0\1", 2) +
                                std::string("\1\0\0\3", 4) + be32(1) + std::string("\0\7\0\0", 4) +
                                be32(0);
    CHECK(refusal(tiff_be).find("ImageLength") != std::string::npos);     // no height tag
    CHECK(refusal(std::string("II*\0", 4) + le32(4000)) != "");           // IFD outside the file
    CHECK(refusal(std::string("II*\0", 4) + le32(8) + le16(500)) != "");  // entries past the end

    // WebP: VP8L and VP8X sizes; a RIFF size past the end is truncation.
    const std::string vp8l = "RIFF" + le32(4 + 8 + 6) + "WEBPVP8L" + le32(5) + "\x2f" +
                             le32((16383u) | (99u << 14)) + std::string(1, '\0');
    h = inspect(vp8l);
    CHECK(h.format == ImageFormat::WebP);
    CHECK(h.width == 16384);
    CHECK(h.height == 100);
    CHECK_FALSE(h.truncated);
    const std::string vp8x = "RIFF" + le32(4 + 8 + 10 + 100) + "WEBPVP8X" + le32(10) +
                             std::string(4, '\0') + std::string("\xff\xff\x00\x0f\x27\x00", 6);
    h = inspect(vp8x);
    CHECK(h.width == 65536);
    CHECK(h.height == 10000);
    CHECK(h.truncated);
  }

  TEST_CASE("image header: hostile headers are refused before any decoding, in milliseconds") {
    const fs::path d = scratch("cap");
    // 125 bytes of arithmetic JPEG claiming 30000x30000 (once 10 s and 2 GB), and a baseline one.
    write_bytes(d / "arith.jpg", jpeg_claiming(0xC9, 30000, 30000));
    write_bytes(d / "lossless.jpg", jpeg_claiming(0xC3, 30000, 30000));
    write_bytes(d / "big.tiff", std::string("II*\0", 4) + le32(8) + le16(2) + le16(256) + le16(4) +
                                    le32(1) + le32(100000) + le16(257) + le16(4) + le32(1) +
                                    le32(100000) + le32(0) + std::string(100, '\0'));
    write_bytes(d / "big.webp", "RIFF" + le32(4 + 8 + 10) + "WEBPVP8X" + le32(10) +
                                    std::string(4, '\0') +
                                    std::string("\xff\xff\x00\xff\xff\x00", 6));
    write_bytes(d / "big.pbm", "P1\n40000 40000\n0101");
    for (const char* f : {"arith.jpg", "lossless.jpg", "big.tiff", "big.webp", "big.pbm"}) {
      for (const char* cap : {"", " --max-pixels 1000"}) {
        INFO(f << cap);
        const auto t0 = std::chrono::steady_clock::now();
        const Result r = lab_cli("check" + kCpu + "--input " + (d / f).string() + cap, 30);
        CHECK(seconds_since(t0) < 2.0);
        CHECK(r.code == 65);
        CHECK(has(r, "over the cap"));
      }
    }
    // In the library too: no decoder runs, so no memory is spent.
    const std::string arith = jpeg_claiming(0xC9, 30000, 30000);
    const auto t0 = std::chrono::steady_clock::now();
    CHECK_THROWS_AS(lab::io::decode_image("a", u8(arith), arith.size()), lab::Error);
    CHECK(seconds_since(t0) < 0.5);
    fs::remove_all(d);
  }

  TEST_CASE("image header: a huge file is refused from its header, unread") {
    const fs::path d = scratch("huge");
    const std::string png = read_bytes(data_path("box.png"));
    for (uintmax_t size : {uintmax_t(2) << 30, uintmax_t(1) << 30}) {
      INFO(size << " bytes");
      const fs::path p = d / "sparse.png";
      write_bytes(p, png);
      fs::resize_file(p, size);  // sparse: no disk, but a reader of the whole file pays for it
      const auto t0 = std::chrono::steady_clock::now();
      const Result r = lab_cli("check" + kCpu + "--input " + p.string(), 30);
      CHECK(seconds_since(t0) < 2.0);
      CHECK(r.code == 65);
      CHECK((has(r, "far more than") || has(r, "over the")));
      fs::remove(p);
    }
    // A 153-byte PNG whose chunk claims 2 GB: truncated, or corrupt past 2^31.
    const std::string head = png.substr(0, 33);
    const std::string claims = head + be32(0x7ffffff0) + "IDAT" + std::string(112, 'x');
    CHECK(claims.size() == 153);
    write_bytes(d / "claims.png", claims);
    auto t0 = std::chrono::steady_clock::now();
    Result r = lab_cli("check" + kCpu + "--input " + (d / "claims.png").string(), 30);
    CHECK(seconds_since(t0) < 2.0);
    CHECK(r.code == 65);
    CHECK(has(r, "truncated PNG (chunk 'IDAT' runs past the end of the file)"));
    write_bytes(d / "over.png", head + be32(0x80000000u) + "IDAT" + std::string(112, 'x'));
    r = lab_cli("check" + kCpu + "--input " + (d / "over.png").string(), 30);
    CHECK(r.code == 65);
    CHECK(has(r, "corrupt PNG (chunk 'IDAT' claims 2147483648 bytes)"));
    fs::remove_all(d);
  }

#if defined(LAB_WITH_OPENCV)
  TEST_CASE("image header: truncated BMP, PNM and RLE files are 65, or a warning when accepted") {
    const fs::path d = scratch("cut");
    cv::Mat color = cv::imread(data_path("chelsea.png"), cv::IMREAD_COLOR);
    REQUIRE(!color.empty());
    color = color(cv::Rect(0, 0, 64, 48)).clone();
    cv::Mat gray;
    cv::cvtColor(color, gray, cv::COLOR_BGR2GRAY);
    struct Case {
      const char* file;
      const cv::Mat* m;
      std::vector<int> params;
      const char* fmt;
    };
    const Case cases[] = {
        {"c.bmp", &color, {}, "BMP"},
        {"g.pgm", &gray, {}, "PNM"},
        {"c.ppm", &color, {}, "PNM"},
        {"g.pbm", &gray, {}, "PNM"},
        {"a.pgm", &gray, {cv::IMWRITE_PXM_BINARY, 0}, "PNM"},
        {"a.ppm", &color, {cv::IMWRITE_PXM_BINARY, 0}, "PNM"},
    };
    for (const Case& c : cases) {
      INFO(c.file);
      std::vector<uint8_t> buf;
      REQUIRE(cv::imencode(fs::path(c.file).extension().string(), *c.m, buf, c.params));
      const std::string bytes(buf.begin(), buf.end());
      write_bytes(d / c.file, bytes.substr(0, bytes.size() * 3 / 4));
      const std::string in = " --size 64x48 --input " + (d / c.file).string();
      const Result r = lab_cli("check" + kCpu + in, 30);
      CHECK(r.code == 65);
      CHECK(has(r, std::string("truncated ") + c.fmt + " ("));
      const Result ok = lab_cli("check" + kCpu + "--accept-truncated" + in, 30);
      CHECK(ok.code == 0);
      CHECK(has(ok, "kernel-lab: warning: " + (d / c.file).string() + ": truncated " + c.fmt));
      write_bytes(d / c.file, bytes);
      CHECK(lab_cli("check" + kCpu + in, 30).code == 0);
    }
    write_bytes(d / "rle.bmp", rle_bmp(false));
    const Result r = lab_cli("check" + kCpu + "--input " + (d / "rle.bmp").string(), 30);
    CHECK(r.code == 65);
    CHECK(has(r, "truncated BMP (no RLE end-of-bitmap marker)"));
    fs::remove_all(d);
  }
#endif

  TEST_CASE(
      "image header: a PNG failing its CRC or its zlib check is refused, trailing data is not") {
    const fs::path d = scratch("png");
    const std::string png = read_bytes(data_path("box.png"));
    const size_t idat = png.find("IDAT");
    REQUIRE(idat != std::string::npos);
    std::string flipped = png;
    flipped[idat + 100] = char(flipped[idat + 100] ^ 0x40);
    write_bytes(d / "crc.png", flipped);
    Result r = lab_stderr("check" + kCpu + "--input " + (d / "crc.png").string());
    CHECK(r.code == 65);
    CHECK(has(r, "corrupt PNG (chunk 'IDAT' fails its CRC)"));
    CHECK(lines(r.out) == 1);

    // The same byte flipped with the CRC fixed: only zlib's check (or the inflate) sees it.
    // stb would skip that check; libpng's complaint goes inside the lab's line.
    const uint32_t len = uint32_t(uint8_t(png[idat - 4])) << 24 |
                         uint32_t(uint8_t(png[idat - 3])) << 16 |
                         uint32_t(uint8_t(png[idat - 2])) << 8 | uint8_t(png[idat - 1]);
    const uint32_t crc = lab::io::crc32(u8(flipped) + idat, len + 4);
    flipped.replace(idat + 4 + len, 4, be32(crc));
    write_bytes(d / "zlib.png", flipped);
    r = lab_stderr("check" + kCpu + "--input " + (d / "zlib.png").string());
    CHECK(r.code == 65);
    CHECK(r.out.rfind("kernel-lab: error: ", 0) == 0);
    CHECK(lines(r.out) == 1);

    write_bytes(d / "tail.png", png + std::string(5000, 'G'));
    r = lab_cli("check" + kCpu + "--input " + (d / "tail.png").string(), 30);
    CHECK(r.code == 0);
    CHECK_FALSE(has(r, "truncated"));
    fs::remove_all(d);
  }

  TEST_CASE("image header: a JPEG with data after EOI decodes; a damaged one says so in one line") {
    const fs::path d = scratch("jpg");
    const std::string jpg = read_bytes(data_path("rocket.jpg"));
    write_bytes(d / "tail.jpg", jpg + std::string(3000, '\xd9'));
    Result r = lab_cli("check" + kCpu + "--input " + (d / "tail.jpg").string(), 30);
    CHECK(r.code == 0);
    CHECK_FALSE(has(r, "truncated"));
    CHECK_FALSE(has(r, "warning"));

    // Extra bytes before EOI: libjpeg warns "Corrupt JPEG data: 3 extraneous bytes"; harmless,
    // and not printed.
    write_bytes(d / "extra.jpg", jpg.substr(0, jpg.size() - 2) + "abc\xff\xd9");
    r = lab_stderr("check" + kCpu + "--input " + (d / "extra.jpg").string());
    CHECK(r.code == 0);
    CHECK(r.out.empty());

    // The scan cut in the middle but EOI kept: libjpeg fills the rest and warns; the lab refuses
    // with its own line first and alone, libjpeg's words inside it.
    const size_t sos = jpg.find("\xff\xda");
    REQUIRE(sos != std::string::npos);
    const size_t cut = sos + (jpg.size() - sos) / 2;
    write_bytes(d / "short.jpg", jpg.substr(0, cut) + "\xff\xd9");
    r = lab_stderr("check" + kCpu + "--input " + (d / "short.jpg").string());
    CHECK(r.code == 65);
    CHECK(r.out.rfind("kernel-lab: error: ", 0) == 0);
    CHECK(lines(r.out) == 1);
    CHECK(has(r, "truncated JPEG (Corrupt JPEG data"));
    r = lab_stderr("check" + kCpu + "--accept-truncated --input " + (d / "short.jpg").string());
    CHECK(r.code == 0);
    CHECK(r.out.rfind("kernel-lab: warning: ", 0) == 0);
    CHECK(lines(r.out) == 1);
    fs::remove_all(d);
  }

  TEST_CASE("image header: control bytes in a file name are escaped in the message") {
    const fs::path d = scratch("name");
    const std::string png = read_bytes(data_path("box.png"));
    const std::string name = "a\x1b[31mred\x07.png";
    write_bytes(d / name, png.substr(0, png.size() / 2));
    const Result r = lab_cli("check" + kCpu + "--input '" + (d / name).string() + "'", 30);
    CHECK(r.code == 65);
    CHECK(has(r, "a\\x1b[31mred\\x07.png: truncated PNG"));
    CHECK(r.out.find('\x1b') == std::string::npos);
    CHECK(r.out.find('\x07') == std::string::npos);
    fs::remove_all(d);
  }
}
