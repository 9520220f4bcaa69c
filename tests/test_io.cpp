// Tests for io/: .npy round trips, image loading and its errors, the synthetic scene.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <set>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include <stb/stb_image_write.h>

#if defined(LAB_WITH_OPENCV)
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#endif

#include "image_source.h"
#include "npy.h"
#include "support.h"
#include "check.h"
#include "image.h"

#ifndef LAB_DATA_DIR
#error "the build must define LAB_DATA_DIR (absolute path of tests/data)"
#endif

namespace fs = std::filesystem;
using lab::Error;
using lab::ErrorKind;
using lab::HostImage;
using lab::ImageDesc;
using lab::PixelType;

namespace {

// A fresh folder under the system temp dir, removed with its contents at scope exit.
struct TempDir {
  fs::path path;
  TempDir() {
    const auto stamp = std::chrono::steady_clock::now().time_since_epoch().count();
    for (int i = 0;; ++i) {
      path = fs::temp_directory_path() /
             ("lab_test_io_" + std::to_string(stamp) + "_" + std::to_string(i));
      if (fs::create_directory(path)) break;
    }
  }
  ~TempDir() {
    std::error_code ec;
    fs::permissions(path, fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(path, ec);
  }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

std::string data_file(const std::string& name) {
  return data_path(name);
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), std::streamsize(bytes.size()));
  REQUIRE(f.good());
}

std::string read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  REQUIRE(f.good());
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

struct Caught {
  bool thrown = false;
  ErrorKind kind = ErrorKind::Internal;
  std::string what;
};

Caught catch_error(const std::function<void()>& fn) {
  Caught c;
  try {
    fn();
  } catch (const Error& e) {
    c.thrown = true;
    c.kind = e.kind();
    c.what = e.what();
  }
  return c;
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

bool same_pixels(const HostImage& a, const HostImage& b) {
  return a.desc() == b.desc() && std::memcmp(a.bytes(), b.bytes(), a.desc().bytes()) == 0;
}

HostImage make_image(int w, int h, int c, PixelType t, uint32_t seed) {
  HostImage img(ImageDesc{w, h, c, t});
  uint32_t s = seed;
  if (t == PixelType::F32) {
    auto v = img.view<float>();
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w; ++x)
        for (int k = 0; k < c; ++k) {
          s = s * 1664525u + 1013904223u;
          v.at(x, y, k) = float(int32_t(s >> 8)) / 65536.0f - 128.0f;
        }
  } else {
    for (size_t i = 0; i < img.desc().bytes(); ++i) {
      s = s * 1664525u + 1013904223u;
      img.bytes()[i] = uint8_t(s >> 24);
    }
  }
  return img;
}

// A .npy header written by hand, to test what read_npy accepts and refuses.
std::string npy_v1(const std::string& dict, const std::string& data) {
  std::string h = dict + "\n";
  std::string out("\x93NUMPY\x01\x00", 8);
  out += char(h.size() & 0xFF);
  out += char(h.size() >> 8);
  return out + h + data;
}

int gray_at(const HostImage& img, int x, int y) {
  const uint8_t* p = img.bytes() + size_t(y) * img.pitch() + size_t(x) * 3;
  return (p[0] + p[1] + p[2]) / 3;
}

// A plain Harris detector: 3x3 local maxima of det - 0.05 tr^2 over a 5x5 window, above 1% of
// the strongest response. Returns corner positions as y * width + x.
std::set<int> harris_corners(const HostImage& img) {
  const int w = img.desc().width, h = img.desc().height;
  std::vector<float> ixx(size_t(w) * h), iyy(ixx.size()), ixy(ixx.size()), r(ixx.size(), 0.f);
  for (int y = 1; y < h - 1; ++y)
    for (int x = 1; x < w - 1; ++x) {
      const float gx = float(gray_at(img, x + 1, y) - gray_at(img, x - 1, y));
      const float gy = float(gray_at(img, x, y + 1) - gray_at(img, x, y - 1));
      const size_t i = size_t(y) * w + x;
      ixx[i] = gx * gx;
      iyy[i] = gy * gy;
      ixy[i] = gx * gy;
    }
  float best = 0;
  for (int y = 3; y < h - 3; ++y)
    for (int x = 3; x < w - 3; ++x) {
      float a = 0, b = 0, c = 0;
      for (int dy = -2; dy <= 2; ++dy)
        for (int dx = -2; dx <= 2; ++dx) {
          const size_t i = size_t(y + dy) * w + (x + dx);
          a += ixx[i];
          b += iyy[i];
          c += ixy[i];
        }
      const float resp = a * b - c * c - 0.05f * (a + b) * (a + b);
      r[size_t(y) * w + x] = resp;
      best = std::max(best, resp);
    }
  std::set<int> corners;
  for (int y = 4; y < h - 4; ++y)
    for (int x = 4; x < w - 4; ++x) {
      const float v = r[size_t(y) * w + x];
      if (v <= 0.01f * best) continue;
      bool is_max = true;
      for (int dy = -1; dy <= 1 && is_max; ++dy)
        for (int dx = -1; dx <= 1; ++dx)
          if ((dx || dy) && r[size_t(y + dy) * w + x + dx] >= v) is_max = false;
      if (is_max) corners.insert(y * w + x);
    }
  return corners;
}

}  // namespace

TEST_SUITE("cpu") {
  // --- npy ---------------------------------------------------------------------------------

  TEST_CASE("npy round trip keeps desc and bytes") {
    TempDir tmp;
    struct Case {
      int w, h, c;
      PixelType t;
    };
    const Case cases[] = {{1, 1, 1, PixelType::F32},   {17, 13, 1, PixelType::F32},
                          {1, 1, 3, PixelType::U8},    {17, 13, 3, PixelType::U8},
                          {17, 13, 3, PixelType::F32}, {17, 13, 1, PixelType::U8},
                          {5, 4, 4, PixelType::U8}};
    uint32_t seed = 1;
    for (const Case& c : cases) {
      const HostImage img = make_image(c.w, c.h, c.c, c.t, seed++);
      CAPTURE(img.desc().width);
      CAPTURE(img.desc().height);
      CAPTURE(img.desc().channels);
      const std::string path = tmp.file("a.npy");
      lab::io::write_npy(path, img);
      const HostImage back = lab::io::read_npy(path);
      CHECK(back.desc() == img.desc());
      CHECK(same_pixels(back, img));
    }
  }

  TEST_CASE("npy header is numpy 1.0, 64-byte aligned, with the right descr and shape") {
    TempDir tmp;
    const std::string path = tmp.file("h.npy");

    lab::io::write_npy(path, make_image(17, 13, 1, PixelType::F32, 7));
    std::string f = read_bytes(path);
    REQUIRE(f.size() > 10);
    CHECK(f.compare(0, 6, std::string("\x93NUMPY", 6)) == 0);
    CHECK(f[6] == 1);
    CHECK(f[7] == 0);
    size_t hlen = uint8_t(f[8]) | size_t(uint8_t(f[9])) << 8;
    CHECK((10 + hlen) % 64 == 0);
    std::string dict = f.substr(10, hlen);
    CHECK(dict.back() == '\n');
    CHECK(contains(dict, "'descr': '<f4'"));
    CHECK(contains(dict, "'fortran_order': False"));
    CHECK(contains(dict, "'shape': (13, 17)"));
    CHECK(f.size() == 10 + hlen + 17 * 13 * 4);

    lab::io::write_npy(path, make_image(17, 13, 3, PixelType::U8, 8));
    f = read_bytes(path);
    hlen = uint8_t(f[8]) | size_t(uint8_t(f[9])) << 8;
    CHECK((10 + hlen) % 64 == 0);
    dict = f.substr(10, hlen);
    CHECK(contains(dict, "'descr': '|u1'"));
    CHECK(contains(dict, "'shape': (13, 17, 3)"));
    CHECK(f.size() == 10 + hlen + 17 * 13 * 3);
  }

  TEST_CASE("read_npy accepts hand-written 1.0 and 2.0 headers") {
    TempDir tmp;
    const std::string path = tmp.file("v.npy");
    const std::string data6 = "\x01\x02\x03\x04\x05\x06";

    // Key order and spacing differ from ours; a trailing 1 channel stays 1 channel.
    write_bytes(path,
                npy_v1("{'shape': (2, 3, 1), 'fortran_order': False, 'descr': '|u1'}", data6));
    HostImage img = lab::io::read_npy(path);
    CHECK(img.desc() == ImageDesc{3, 2, 1, PixelType::U8});
    CHECK(img.bytes()[5] == 6);

    std::string h = "{'descr': '|u1', 'fortran_order': False, 'shape': (3, 2), }\n";
    std::string v2("\x93NUMPY\x02\x00", 8);
    v2 += char(h.size());
    v2 += std::string(3, '\0');
    write_bytes(path, v2 + h + data6);
    img = lab::io::read_npy(path);
    CHECK(img.desc() == ImageDesc{2, 3, 1, PixelType::U8});
    CHECK(img.bytes()[0] == 1);
  }

  TEST_CASE("read_npy errors") {
    TempDir tmp;
    const std::string path = tmp.file("bad.npy");
    const std::string f4 = std::string(2 * 3 * 4, '\0');
    auto kind_of = [&](const std::string& bytes) {
      write_bytes(path, bytes);
      const Caught c = catch_error([&] { lab::io::read_npy(path); });
      CHECK(c.thrown);
      CHECK(contains(c.what, path));
      return c.kind;
    };

    const Caught missing = catch_error([&] { lab::io::read_npy(tmp.file("none.npy")); });
    CHECK(missing.thrown);
    CHECK(missing.kind == ErrorKind::NoInput);

    CHECK(kind_of("") == ErrorKind::Data);
    CHECK(kind_of("PK\x03\x04 not numpy at all") == ErrorKind::Data);
    CHECK(kind_of(std::string("\x93NUMPY\x03\x00\x10\x00", 10) + std::string(16, ' ')) ==
          ErrorKind::Data);
    CHECK(kind_of(npy_v1("{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }", f4 + f4)) ==
          ErrorKind::Data);
    CHECK(kind_of(npy_v1("{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), }", f4)) ==
          ErrorKind::Data);
    CHECK(kind_of(npy_v1("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", f4)) ==
          ErrorKind::Data);
    CHECK(kind_of(npy_v1("{'descr': '<f4', 'fortran_order': False, 'shape': (6,), }", f4)) ==
          ErrorKind::Data);
    CHECK(kind_of(npy_v1("{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2, 3, 1), }",
                         f4)) == ErrorKind::Data);
    CHECK(kind_of(npy_v1("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }",
                         f4.substr(0, 10))) == ErrorKind::Data);
    CHECK(kind_of(npy_v1("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", f4)
                      .substr(0, 30)) == ErrorKind::Data);
    CHECK(kind_of(npy_v1("{'descr': '<f4', 'shape': (2, 3), }", f4)) == ErrorKind::Data);
    CHECK(kind_of(npy_v1("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)", f4)) ==
          ErrorKind::Data);
    CHECK(kind_of(npy_v1("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999, "
                         "99999999999), }",
                         f4)) == ErrorKind::Data);
  }

  TEST_CASE("write_npy into a missing folder is CantCreate") {
    TempDir tmp;
    const Caught c = catch_error([&] {
      lab::io::write_npy(tmp.file("no/such/dir/x.npy"), make_image(2, 2, 1, PixelType::U8, 1));
    });
    CHECK(c.thrown);
    CHECK(c.kind == ErrorKind::CantCreate);
  }

  // --- synthetic scene ---------------------------------------------------------------------

  TEST_CASE("synthetic_frame is deterministic and animated") {
    const HostImage a = lab::io::synthetic_frame(640, 480, 1, 0);
    CHECK(a.desc() == ImageDesc{640, 480, 3, PixelType::U8});
    CHECK(same_pixels(a, lab::io::synthetic_frame(640, 480, 1, 0)));
    CHECK_FALSE(same_pixels(a, lab::io::synthetic_frame(640, 480, 1, 1)));
    CHECK_FALSE(same_pixels(a, lab::io::synthetic_frame(640, 480, 2, 0)));
    CHECK(same_pixels(lab::io::synthetic_frame(640, 480, 9, 1000),
                      lab::io::synthetic_frame(640, 480, 9, 1000)));
  }

  TEST_CASE("synthetic_frame matches golden hashes") {
    // Pins the scene across compilers and machines (g++ and clang++, x86-64, agree). If the
    // scene is changed on purpose, update the hashes.
    auto fnv1a = [](const HostImage& img) {
      uint64_t h = 1469598103934665603ull;
      for (size_t i = 0; i < img.desc().bytes(); ++i) {
        h ^= img.bytes()[i];
        h *= 1099511628211ull;
      }
      return h;
    };
    CHECK(fnv1a(lab::io::synthetic_frame(320, 240, 1, 3)) == 0xc6c2ad297070ef0bull);
    CHECK(fnv1a(lab::io::synthetic_frame(1920, 1080, 1, 0)) == 0x6845dbb042727548ull);
    CHECK(fnv1a(lab::io::synthetic_frame(641, 479, 42, -7)) == 0x586ba9c300931e22ull);
  }

  TEST_CASE("synthetic_frame is not flat: many colours, strong edges, moving corners") {
    const int w = 640, h = 480;
    const HostImage a = lab::io::synthetic_frame(w, h, 1, 0);

    std::unordered_set<uint32_t> colours;
    for (size_t i = 0; i < a.desc().pixels(); ++i) {
      const uint8_t* p = a.bytes() + 3 * i;
      colours.insert(uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16);
    }
    CHECK(colours.size() > 1000);

    int strong = 0;
    for (int y = 0; y < h; ++y)
      for (int x = 0; x + 1 < w; ++x)
        strong += std::abs(gray_at(a, x + 1, y) - gray_at(a, x, y)) > 60;
    CHECK(strong > w * h / 500);

    const std::set<int> c0 = harris_corners(a);
    const std::set<int> c4 = harris_corners(lab::io::synthetic_frame(w, h, 1, 4));
    MESSAGE("Harris corners: frame 0 ", c0.size(), ", frame 4 ", c4.size());
    CHECK(c0.size() >= 40);
    CHECK(c4.size() >= 40);
    size_t still = 0;
    for (int p : c4) still += c0.count(p);
    CHECK(still * 2 < c4.size());  // most corners moved
  }

  TEST_CASE("synthetic_frame sizes") {
    for (auto wh : {std::pair<int, int>{1, 1}, {2, 3}, {7, 1}, {1920, 1080}, {16384, 2}}) {
      const HostImage img = lab::io::synthetic_frame(wh.first, wh.second, 3, 5);
      CHECK(img.desc() == ImageDesc{wh.first, wh.second, 3, PixelType::U8});
    }
    for (auto wh : {std::pair<int, int>{0, 10}, {10, 0}, {-1, 5}, {16385, 10}, {10, 16385}}) {
      const Caught c = catch_error([&] { lab::io::synthetic_frame(wh.first, wh.second); });
      CHECK(c.thrown);
      CHECK(c.kind == ErrorKind::Usage);
    }
  }

  // --- load_image --------------------------------------------------------------------------

  TEST_CASE("load_image decodes the shared test images") {
    struct Case {
      const char* name;
      int w, h, c;
    };
    for (const Case& k : {Case{"astronaut.png", 512, 512, 3}, Case{"brick.png", 512, 512, 1},
                          Case{"chessboard.png", 3595, 3723, 4}, Case{"rocket.jpg", 640, 427, 3}}) {
      CAPTURE(k.name);
      const HostImage img = lab::io::load_image(data_file(k.name));
      CHECK(img.desc() == ImageDesc{k.w, k.h, k.c, PixelType::U8});
      const uint8_t* p = img.bytes();
      const size_t n = img.desc().bytes();
      CHECK(std::count(p, p + n, p[0]) != std::ptrdiff_t(n));  // not a constant image
    }
  }

  TEST_CASE("load_image channel order and conversions") {
    TempDir tmp;
    // 2x1 RGB: red, then green. Loaded as BGR.
    const uint8_t rgb[] = {255, 0, 0, 0, 255, 0};
    REQUIRE(stbi_write_png(tmp.file("rgb.png").c_str(), 2, 1, 3, rgb, 6));
    HostImage img = lab::io::load_image(tmp.file("rgb.png"));
    REQUIRE(img.desc() == ImageDesc{2, 1, 3, PixelType::U8});
    CHECK(img.bytes()[0] == 0);
    CHECK(img.bytes()[2] == 255);
    CHECK(img.bytes()[4] == 255);

    const uint8_t rgba[] = {10, 20, 30, 40};
    REQUIRE(stbi_write_png(tmp.file("rgba.png").c_str(), 1, 1, 4, rgba, 4));
    img = lab::io::load_image(tmp.file("rgba.png"));
    REQUIRE(img.desc() == ImageDesc{1, 1, 4, PixelType::U8});
    CHECK(std::vector<uint8_t>(img.bytes(), img.bytes() + 4) ==
          std::vector<uint8_t>{30, 20, 10, 40});

    // Gray + alpha becomes gray.
    const uint8_t ga[] = {77, 128, 200, 0};
    REQUIRE(stbi_write_png(tmp.file("ga.png").c_str(), 2, 1, 2, ga, 4));
    img = lab::io::load_image(tmp.file("ga.png"));
    REQUIRE(img.desc() == ImageDesc{2, 1, 1, PixelType::U8});
    CHECK(img.bytes()[0] == 77);
    CHECK(img.bytes()[1] == 200);

#if defined(LAB_WITH_OPENCV)
    // 16-bit PNG: rounded to 8 bits the same way by OpenCV and stb.
    cv::Mat m16(3, 300, CV_16UC3);
    for (int x = 0; x < 300; ++x)
      for (int y = 0; y < 3; ++y)
        for (int c = 0; c < 3; ++c)
          m16.at<cv::Vec3w>(y, x)[c] = uint16_t((x * 219 + y * 7 + c * 97) * 73);
    REQUIRE(cv::imwrite(tmp.file("w16.png"), m16));
    img = lab::io::load_image(tmp.file("w16.png"));
    REQUIRE(img.desc() == ImageDesc{300, 3, 3, PixelType::U8});
    const std::string bytes = read_bytes(tmp.file("w16.png"));
    const HostImage stb = lab::io::detail::decode_with_stb(
        "w16.png", reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    CHECK(same_pixels(img, stb));
    CHECK(img.bytes()[0] == uint8_t((uint32_t(m16.at<cv::Vec3w>(0, 0)[0]) + 128) / 257));
#endif
  }

  TEST_CASE("load_image PNGs match the stb decoder and cv::imread") {
    for (const char* name : {"astronaut.png", "brick.png", "chessboard.png", "box.png",
                             "box_in_scene.png", "chelsea.png", "coffee.png", "graf1.png"}) {
      INFO(std::string(name));
      const HostImage img = lab::io::load_image(data_file(name));
      const std::string bytes = read_bytes(data_file(name));
      const HostImage stb = lab::io::detail::decode_with_stb(
          name, reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
      CHECK(same_pixels(img, stb));
#if defined(LAB_WITH_OPENCV)
      const cv::Mat ref = cv::imread(data_file(name), cv::IMREAD_UNCHANGED);
      REQUIRE(!ref.empty());
      REQUIRE(ref.depth() == CV_8U);
      CHECK(img.desc() == ImageDesc{ref.cols, ref.rows, ref.channels(), PixelType::U8});
      bool equal = true;
      for (int y = 0; y < ref.rows && equal; ++y) {
        equal = std::memcmp(ref.ptr(y), img.bytes() + size_t(y) * img.pitch(), img.pitch()) == 0;
      }
      CHECK(equal);
#endif
    }
  }

  TEST_CASE("load_image errors") {
    TempDir tmp;
    auto caught = [](const std::string& path, lab::io::LoadOptions opt = {}) {
      const Caught c = catch_error([&] { lab::io::load_image(path, opt); });
      CHECK(c.thrown);
      CHECK(contains(c.what, path));
      CHECK(c.what.find('\n') == std::string::npos);
      return c;
    };

    CHECK(caught(tmp.file("missing.png")).kind == ErrorKind::NoInput);

    const Caught dir = caught(tmp.path.string());
    CHECK(dir.kind == ErrorKind::NoInput);
    CHECK(contains(dir.what, "directory"));

    write_bytes(tmp.file("empty.png"), "");
    CHECK(caught(tmp.file("empty.png")).kind == ErrorKind::Data);

    std::string noise(4096, '\0');
    uint32_t s = 12345;
    for (char& ch : noise) {
      s = s * 1664525u + 1013904223u;
      ch = char(s >> 24);
    }
    write_bytes(tmp.file("noise.png"), noise);
    CHECK(caught(tmp.file("noise.png")).kind == ErrorKind::Data);

    write_bytes(tmp.file("cut.png"), read_bytes(data_file("astronaut.png")).substr(0, 100));
    CHECK(caught(tmp.file("cut.png")).kind == ErrorKind::Data);

    lab::io::LoadOptions small;
    small.max_pixels = 1000;
    const Caught big = caught(data_file("astronaut.png"), small);
    CHECK(big.kind == ErrorKind::Data);
    CHECK(contains(big.what, "512x512"));
    CHECK(contains(big.what, "1000"));
    CHECK(contains(big.what, "--max-pixels"));

    lab::io::LoadOptions exact;
    exact.max_pixels = 512 * 512;
    CHECK(lab::io::load_image(data_file("astronaut.png"), exact).desc().pixels() == 512 * 512);

    // Unreadable file: only testable when not running as root.
    const std::string locked = tmp.file("locked.png");
    write_bytes(locked, read_bytes(data_file("brick.png")));
    fs::permissions(locked, fs::perms::none);
    if (!std::ifstream(locked).good()) {
      CHECK(caught(locked).kind == ErrorKind::Io);
    } else {
      MESSAGE("running as root: unreadable-file case skipped");
    }
  }
}
