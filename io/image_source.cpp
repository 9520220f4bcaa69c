#include "image_source.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <system_error>
#include <vector>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <stb/stb_image.h>

#if defined(LAB_WITH_OPENCV)
#include <opencv2/core.hpp>
#include <opencv2/core/utils/logger.hpp>
#include <opencv2/imgcodecs.hpp>
#endif

#include "check.h"
#include "image_header.h"
#include "printable.h"

namespace lab::io {
namespace {

namespace fs = std::filesystem;

// A file name as messages show it: control bytes (ESC, BEL) escaped, never sent to the terminal.
std::string shown(const std::string& path) {
  return printable(path, 1024);
}

// `path` is already shown().
[[noreturn]] void fail(ErrorKind kind, const std::string& path, const std::string& problem) {
  throw Error(kind, path + ": " + problem);
}

// libpng, libjpeg and libtiff write warnings and errors straight to stderr; the lab's one-line
// error must come first and alone. While one of these lives, fd 2 goes to an anonymous file,
// whose text the caller quotes inside its own message (or drops on success). The mutex keeps
// two decodes from swapping fd 2 under each other.
class StderrCapture {
 public:
  StderrCapture() : m_lock(mutex()) {
    std::fflush(stderr);
    m_file = ::memfd_create("kernel-lab-stderr", MFD_CLOEXEC);
    if (m_file < 0) {
      std::FILE* t = std::tmpfile();
      if (t) m_file = ::dup(::fileno(t)), std::fclose(t);
    }
    if (m_file >= 0) m_saved = ::dup(2);
    if (m_saved >= 0 && ::dup2(m_file, 2) < 0) {
      ::close(m_saved);
      m_saved = -1;
    }
  }
  ~StderrCapture() {
    restore();
    if (m_file >= 0) ::close(m_file);
  }
  StderrCapture(const StderrCapture&) = delete;
  StderrCapture& operator=(const StderrCapture&) = delete;

  // Puts fd 2 back and returns what was written: one line, printable, at most ~200 bytes.
  std::string text() {
    restore();
    if (m_file < 0) return {};
    std::string raw;
    char buf[4096];
    ssize_t n;
    off_t off = 0;
    while (raw.size() < 16384 && (n = ::pread(m_file, buf, sizeof buf, off)) > 0) {
      raw.append(buf, size_t(n));
      off += n;
    }
    std::string line;
    for (char c : raw) {
      if (c == '\n' || c == '\r') c = ' ';
      if (c == ' ' && (line.empty() || line.back() == ' ')) continue;
      line += c;
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    return printable(line, 200);
  }

 private:
  static std::mutex& mutex() {
    static std::mutex m;
    return m;
  }
  void restore() {
    if (m_saved >= 0) {
      std::fflush(stderr);
      ::dup2(m_saved, 2);
      ::close(m_saved);
      m_saved = -1;
    }
  }
  std::unique_lock<std::mutex> m_lock;
  int m_file = -1, m_saved = -1;
};

// Throws Data if the image is empty or over the cap; shared by the header check and the
// post-decode check.
void check_size(const std::string& path, long long width, long long height,
                const LoadOptions& opt) {
  if (width <= 0 || height <= 0) {
    fail(ErrorKind::Data, path,
         "image has zero size (" + std::to_string(width) + "x" + std::to_string(height) + ")");
  }
  const unsigned long long pixels = (unsigned long long)width * (unsigned long long)height;
  if (pixels > opt.max_pixels) {
    fail(ErrorKind::Data, path,
         "image is " + std::to_string(width) + "x" + std::to_string(height) + " (" +
             std::to_string(pixels) + " pixels), over the cap of " +
             std::to_string(opt.max_pixels) + " pixels; --max-pixels raises it");
  }
}

// stb takes an int length; no 8-bit image under the pixel cap compresses to more than this.
constexpr uintmax_t kMaxFileBytes = uintmax_t(INT_MAX);

// The checks every image passes before a decoder sees it (the header is in hand, the pixel data
// perhaps not yet): the pixel cap, then a file size that fits the dimensions.
void check_header(const std::string& path, const ImageHeader& h, uint64_t file_size,
                  const LoadOptions& opt) {
  check_size(path, h.width, h.height, opt);
  const uint64_t plausible = plausible_file_bytes(h);
  if (file_size > plausible)
    fail(ErrorKind::Data, path,
         "file is " + std::to_string(file_size) + " bytes, far more than a " +
             std::to_string(h.width) + "x" + std::to_string(h.height) + " " +
             image_format_name(h.format) + " needs (at most " + std::to_string(plausible) + ")");
}

// A regular file opened for reading; `size` from fstat.
struct OpenFile {
  int fd = -1;
  uint64_t size = 0;
  ~OpenFile() {
    if (fd >= 0) ::close(fd);
  }
};

void open_image_file(const std::string& path, const std::string& name, OpenFile& f) {
  if (path.empty()) fail(ErrorKind::NoInput, "(empty path)", "no such file");
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (st.type() == fs::file_type::not_found) fail(ErrorKind::NoInput, name, "no such file");
  if (ec) fail(ErrorKind::Io, name, "cannot read: " + ec.message());
  if (st.type() == fs::file_type::directory) {
    fail(ErrorKind::NoInput, name, "is a directory, not an image file");
  }
  // Devices, pipes and sockets could block or never end (/dev/zero): image files only.
  if (st.type() != fs::file_type::regular) fail(ErrorKind::Data, name, "not a regular file");
  f.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (f.fd < 0)
    fail(ErrorKind::Io, name, std::string("cannot open for reading: ") + std::strerror(errno));
  struct stat s {};
  if (::fstat(f.fd, &s) != 0)
    fail(ErrorKind::Io, name, std::string("cannot read: ") + std::strerror(errno));
  // Checked again on the descriptor: the path could have been swapped since.
  if (!S_ISREG(s.st_mode)) fail(ErrorKind::Data, name, "not a regular file");
  f.size = uint64_t(s.st_size);
  if (f.size == 0) fail(ErrorKind::Data, name, "empty file (0 bytes)");
  if (f.size > kMaxFileBytes)
    fail(ErrorKind::Data, name,
         "file is " + std::to_string(f.size) + " bytes, over the " + std::to_string(kMaxFileBytes) +
             "-byte limit of an image file");
}

size_t pread_full(int fd, uint8_t* dst, size_t n, uint64_t off, const std::string& name) {
  size_t got = 0;
  while (got < n) {
    const ssize_t r = ::pread(fd, dst + got, n - got, off_t(off + got));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) fail(ErrorKind::Io, name, std::string("read failed: ") + std::strerror(errno));
    if (r == 0) break;
    got += size_t(r);
  }
  return got;
}

#if defined(LAB_WITH_OPENCV)
void quiet_opencv() {
  static std::once_flag once;
  std::call_once(once,
                 [] { cv::utils::logging::setLogLevel(cv::utils::logging::LOG_LEVEL_SILENT); });
}

// Returns an empty image when OpenCV cannot decode; `why` then says what it and its libraries
// said, and on success what they warned about.
HostImage decode_with_opencv(const std::string& path, const uint8_t* data, size_t size,
                             int header_channels, std::string& why) {
  quiet_opencv();
  cv::Mat m;
  {
    StderrCapture capture;
    try {
      const cv::Mat buf(1, int(size), CV_8U, const_cast<uint8_t*>(data));
      m = cv::imdecode(buf, cv::IMREAD_UNCHANGED);
    } catch (const cv::Exception& e) {
      why = e.what();
    }
    const std::string said = capture.text();
    if (!said.empty()) why = why.empty() ? said : said + "; " + why;
  }
  why = printable(why, 240);  // OpenCV's text spans lines; our errors are one line
  if (m.empty() || m.dims != 2) return HostImage();

  switch (m.depth()) {
    case CV_8U:
      break;
    case CV_8S:
      m.convertTo(m, CV_8U);
      break;
    case CV_16U:
    case CV_16S:
      m.convertTo(m, CV_8U, 1.0 / 257.0);  // 65535 -> 255, rounded
      break;
    case CV_32F:
    case CV_64F:
      m.convertTo(m, CV_8U, 255.0);  // [0,1] -> [0,255], saturated
      break;
    default:
      fail(ErrorKind::Data, path, "unsupported pixel depth");
  }

  // OpenCV expands a gray+alpha PNG to BGRA; stb reports it as 2 components. Take the gray
  // plane so both decoders give the same 1-channel image.
  if (m.channels() == 2 || (m.channels() == 4 && header_channels == 2)) {
    cv::Mat gray;
    cv::extractChannel(m, gray, 0);
    m = gray;
  }
  const int channels = m.channels();
  if (channels != 1 && channels != 3 && channels != 4) {
    fail(ErrorKind::Data, path, "unsupported channel count " + std::to_string(channels));
  }

  // A frame: page-locked when frames go up by pinned upload (sent from here, never staged).
  HostImage out = HostImage::frame(ImageDesc{m.cols, m.rows, channels, PixelType::U8});
  const size_t row = out.desc().row_bytes();
  for (int y = 0; y < m.rows; ++y)
    std::memcpy(out.bytes() + size_t(y) * out.pitch(), m.ptr(y), row);
  return out;
}
#endif

// --- synthetic scene -----------------------------------------------------------------------

// splitmix64: tiny, well mixed, and the same on every platform (unlike std distributions).
struct SplitMix64 {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform-ish integer in [lo, hi]; modulo bias is irrelevant for a test scene.
  int range(int lo, int hi) {
    if (hi <= lo) return lo;
    return lo + int(next() % uint64_t(int64_t(hi) - lo + 1));
  }
  int sign() { return (next() >> 63) ? 1 : -1; }
};

// cos/sin of k*pi/32 for k = 0..15 in Q14; integer so rotated shapes are bit-exact everywhere.
constexpr int kRot[16][2] = {
    {16384, 0},    {16305, 1606},  {16069, 3196},  {15679, 4756},  {15137, 6270}, {14449, 7723},
    {13623, 9102}, {12665, 10394}, {11585, 11585}, {10394, 12665}, {9102, 13623}, {7723, 14449},
    {6270, 15137}, {4756, 15679},  {3196, 16069},  {1606, 16305},
};

void rotation(int k, int* c, int* s) {  // k in 0..31, angle k*pi/32
  k &= 31;
  if (k < 16) {
    *c = kRot[k][0];
    *s = kRot[k][1];
  } else {  // rotate by a further 90 degrees
    *c = -kRot[k - 16][1];
    *s = kRot[k - 16][0];
  }
}

enum class Kind { Rect, RotRect, Disc, Ring, Triangle, Line, Checker };

struct Shape {
  Kind kind;
  int ext;           // half-size of the bounding box around the centre, in pixels
  int64_t x0, y0;    // start position of the centre, Q4, in [0, period)
  int vx, vy;        // velocity, Q4 pixels per frame
  int a = 0, b = 0;  // half-width/height, radius/inner radius, line half-vector, cell size
  int c = 0, s = 0;  // rotation (Q14), line half-width (quarter pixels), checker cells
  int tri[6] = {};   // triangle vertices relative to the centre
  uint8_t col[3];    // BGR
  uint8_t col2[3];   // second checker colour
};

uint8_t clamp_u8(int v) {
  return uint8_t(std::min(255, std::max(0, v)));
}

void random_colour(SplitMix64& rng, uint8_t* col) {
  // A random luminance with a random tint: some shapes stand out, some barely do.
  const int lum = rng.range(0, 255);
  for (int i = 0; i < 3; ++i) col[i] = clamp_u8(lum + rng.range(-70, 70));
}

std::vector<Shape> make_shapes(int width, int height, uint64_t seed) {
  SplitMix64 rng{seed * 0xD1B54A32D192ED03ull + 0x2545F4914F6CDD1Dull};
  const int unit = std::min(width, height);
  auto sz = [&](int div) { return std::max(1, unit / div); };
  std::vector<Shape> shapes;

  auto add = [&](Kind kind, int ext) -> Shape& {
    Shape sh{};
    sh.kind = kind;
    sh.ext = std::max(1, ext);
    const int64_t px = int64_t(width + 2 * sh.ext) * 16, py = int64_t(height + 2 * sh.ext) * 16;
    sh.x0 = int64_t(rng.next() % uint64_t(px));
    sh.y0 = int64_t(rng.next() % uint64_t(py));
    // One rng call per statement: the order of operands of * is unspecified, and a
    // different order on another compiler would give a different scene.
    sh.vx = rng.range(8, 48);  // 0.5 .. 3 pixels per frame
    sh.vx *= rng.sign();
    sh.vy = rng.range(8, 48);
    sh.vy *= rng.sign();
    random_colour(rng, sh.col);
    shapes.push_back(sh);
    return shapes.back();
  };

  for (int i = 0; i < 8; ++i) {
    const int hw = rng.range(sz(40), sz(10)), hh = rng.range(sz(40), sz(10));
    Shape& sh = add(Kind::Rect, std::max(hw, hh) + 1);
    sh.a = hw;
    sh.b = hh;
  }
  for (int i = 0; i < 2; ++i) {
    const int cell = std::max(2, unit / (i == 0 ? 40 : 25)), nx = rng.range(4, 7),
              ny = rng.range(3, 6);
    Shape& sh = add(Kind::Checker, (std::max(nx, ny) * cell + 1) / 2 + 1);
    sh.a = cell;
    sh.c = nx;
    sh.s = ny;
    const uint8_t dark = uint8_t(rng.range(0, 50)), light = uint8_t(rng.range(205, 255));
    for (int k = 0; k < 3; ++k) {
      sh.col[k] = dark;
      sh.col2[k] = light;
    }
  }
  for (int i = 0; i < 6; ++i) {
    const int r = rng.range(sz(40), sz(12));
    Shape& sh = add(Kind::Disc, r + 1);
    sh.a = r;
  }
  for (int i = 0; i < 3; ++i) {
    const int r = rng.range(sz(20), sz(10));
    Shape& sh = add(Kind::Ring, r + 1);
    sh.a = r;
    sh.b = r - std::max(1, r / 5);
  }
  for (int i = 0; i < 5; ++i) {
    const int r = sz(12);
    int v[6];
    int64_t area2 = 0;
    // Retry a few times for a triangle that is not a sliver; a sliver is still valid.
    for (int tries = 0; tries < 8; ++tries) {
      for (int& k : v) k = rng.range(-r, r);
      area2 = int64_t(v[2] - v[0]) * (v[5] - v[1]) - int64_t(v[3] - v[1]) * (v[4] - v[0]);
      if (area2 * 8 > int64_t(r) * r) break;
    }
    if (area2 < 0) {  // make it counter-clockwise so one sign test suffices
      std::swap(v[2], v[4]);
      std::swap(v[3], v[5]);
    }
    Shape& sh = add(Kind::Triangle, r + 1);
    std::copy(v, v + 6, sh.tri);
  }
  for (int i = 0; i < 6; ++i) {
    const int hw = rng.range(sz(30), sz(10)), hh = rng.range(sz(30), sz(10));
    Shape& sh = add(Kind::RotRect, hw + hh + 1);
    sh.a = hw;
    sh.b = hh;
    rotation(rng.range(1, 31), &sh.c, &sh.s);
  }
  for (int i = 0; i < 8; ++i) {
    const int len = rng.range(sz(12), sz(5));
    int dir_c, dir_s;
    rotation(rng.range(0, 31), &dir_c, &dir_s);
    const int dx = int(int64_t(len) * dir_c / 16384), dy = int(int64_t(len) * dir_s / 16384);
    Shape& sh = add(Kind::Line, std::max(std::abs(dx), std::abs(dy)) + 3);
    sh.a = dx;
    sh.b = dy;
    sh.c = rng.range(2, 5);  // half-width 0.5 .. 1.25 px
  }
  return shapes;
}

// Paints the pixels of the box [cx-ext, cx+ext]^2 (clipped) for which inside(px, py) holds,
// px/py relative to the centre. Only the box is visited, so large frames stay cheap.
template <typename Inside>
void paint(HostImage& img, int cx, int cy, int ext, const uint8_t* col, Inside inside) {
  const int w = img.desc().width, h = img.desc().height;
  const int x0 = std::max(0, cx - ext), x1 = std::min(w - 1, cx + ext);
  const int y0 = std::max(0, cy - ext), y1 = std::min(h - 1, cy + ext);
  for (int y = y0; y <= y1; ++y) {
    uint8_t* row = img.bytes() + size_t(y) * img.pitch();
    for (int x = x0; x <= x1; ++x) {
      if (const uint8_t* c = inside(int64_t(x) - cx, int64_t(y) - cy, col)) {
        uint8_t* p = row + size_t(x) * 3;
        p[0] = c[0];
        p[1] = c[1];
        p[2] = c[2];
      }
    }
  }
}

int64_t wrap(int64_t v, int64_t period) {
  v %= period;
  return v < 0 ? v + period : v;
}

void draw(HostImage& img, const Shape& sh, int frame) {
  const int w = img.desc().width, h = img.desc().height;
  const int64_t px = int64_t(w + 2 * sh.ext) * 16, py = int64_t(h + 2 * sh.ext) * 16;
  // The centre slides through [-ext, size+ext): a shape leaves one edge and re-enters at the
  // opposite one.
  const int cx = int(wrap(sh.x0 + int64_t(sh.vx) * frame, px) / 16) - sh.ext;
  const int cy = int(wrap(sh.y0 + int64_t(sh.vy) * frame, py) / 16) - sh.ext;
  const uint8_t* none = nullptr;

  switch (sh.kind) {
    case Kind::Rect:
      paint(img, cx, cy, sh.ext, sh.col, [&](int64_t x, int64_t y, const uint8_t* c) {
        return (x >= -sh.a && x < sh.a && y >= -sh.b && y < sh.b) ? c : none;
      });
      break;
    case Kind::RotRect: {
      const int64_t hw = int64_t(sh.a) << 14, hh = int64_t(sh.b) << 14;
      paint(img, cx, cy, sh.ext, sh.col, [&](int64_t x, int64_t y, const uint8_t* c) {
        const int64_t u = x * sh.c + y * sh.s, v = y * sh.c - x * sh.s;
        return (u >= -hw && u <= hw && v >= -hh && v <= hh) ? c : none;
      });
      break;
    }
    case Kind::Disc: {
      const int64_t r2 = int64_t(sh.a) * sh.a;
      paint(img, cx, cy, sh.ext, sh.col,
            [&](int64_t x, int64_t y, const uint8_t* c) { return x * x + y * y <= r2 ? c : none; });
      break;
    }
    case Kind::Ring: {
      const int64_t r2 = int64_t(sh.a) * sh.a, q2 = int64_t(sh.b) * sh.b;
      paint(img, cx, cy, sh.ext, sh.col, [&](int64_t x, int64_t y, const uint8_t* c) {
        const int64_t d2 = x * x + y * y;
        return d2 <= r2 && d2 >= q2 ? c : none;
      });
      break;
    }
    case Kind::Triangle: {
      const int* v = sh.tri;
      paint(img, cx, cy, sh.ext, sh.col, [&](int64_t x, int64_t y, const uint8_t* c) {
        for (int i = 0; i < 3; ++i) {
          const int j = (i + 1) % 3;
          const int64_t e = int64_t(v[2 * j] - v[2 * i]) * (y - v[2 * i + 1]) -
                            int64_t(v[2 * j + 1] - v[2 * i + 1]) * (x - v[2 * i]);
          if (e < 0) return none;
        }
        return c;
      });
      break;
    }
    case Kind::Line: {
      // Segment centre-d .. centre+d, half-width c/4 px. Squared distances, no sqrt.
      const int64_t dx = sh.a, dy = sh.b, len2 = std::max<int64_t>(1, dx * dx + dy * dy);
      const int64_t hw2 = int64_t(sh.c) * sh.c;
      paint(img, cx, cy, sh.ext, sh.col, [&](int64_t x, int64_t y, const uint8_t* c) {
        const int64_t cross = dx * y - dy * x, dot = dx * x + dy * y;
        return (dot <= len2 && dot >= -len2 && cross * cross * 16 <= hw2 * len2) ? c : none;
      });
      break;
    }
    case Kind::Checker: {
      const int cell = sh.a, nx = sh.c, ny = sh.s;
      const int64_t left = -int64_t(nx) * cell / 2, top = -int64_t(ny) * cell / 2;
      paint(img, cx, cy, sh.ext, sh.col, [&](int64_t x, int64_t y, const uint8_t*) {
        const int64_t i = x - left, j = y - top;
        if (i < 0 || j < 0 || i >= int64_t(nx) * cell || j >= int64_t(ny) * cell) return none;
        return ((i / cell + j / cell) & 1) ? sh.col2 : sh.col;
      });
      break;
    }
  }
}

}  // namespace

namespace detail {

HostImage decode_with_stb(const std::string& name, const uint8_t* data, size_t size) {
  if (size > size_t(INT_MAX)) fail(ErrorKind::Data, name, "file too large for the stb decoder");
  const int len = int(size);
  int w = 0, h = 0, n = 0;
  // 16-bit PNGs are decoded at 16 bits and rounded like OpenCV's convertTo(1/257), so both
  // builds agree; stb's own 16->8 conversion truncates.
  const bool is16 = stbi_is_16_bit_from_memory(data, len) != 0;
  std::unique_ptr<void, void (*)(void*)> pixels(
      is16 ? static_cast<void*>(stbi_load_16_from_memory(data, len, &w, &h, &n, 0))
           : static_cast<void*>(stbi_load_from_memory(data, len, &w, &h, &n, 0)),
      &stbi_image_free);
  if (!pixels) {
    const char* why = stbi_failure_reason();
    fail(ErrorKind::Data, name,
         std::string("not an image or corrupt") + (why ? std::string(" (") + why + ")" : ""));
  }
  if (w <= 0 || h <= 0) fail(ErrorKind::Data, name, "image has zero size");
  if (n < 1 || n > 4) fail(ErrorKind::Data, name, "unsupported channel count " + std::to_string(n));

  const int channels = n <= 2 ? 1 : n;  // gray+alpha -> gray
  HostImage out = HostImage::frame(ImageDesc{w, h, channels, PixelType::U8});
  const uint8_t* src8 = static_cast<const uint8_t*>(pixels.get());
  const uint16_t* src16 = static_cast<const uint16_t*>(pixels.get());
  auto at = [&](size_t i) -> uint8_t {
    return is16 ? uint8_t((uint32_t(src16[i]) + 128) / 257) : src8[i];
  };
  for (int y = 0; y < h; ++y) {
    uint8_t* dst = out.bytes() + size_t(y) * out.pitch();  // rows are pitch() apart
    for (int x = 0; x < w; ++x) {
      const size_t s = (size_t(y) * size_t(w) + size_t(x)) * size_t(n),
                   d = size_t(x) * size_t(channels);
      if (n <= 2) {
        dst[d] = at(s);
      } else {  // RGB(A) -> BGR(A)
        dst[d + 0] = at(s + 2);
        dst[d + 1] = at(s + 1);
        dst[d + 2] = at(s + 0);
        if (n == 4) dst[d + 3] = at(s + 3);
      }
    }
  }
  return out;
}

}  // namespace detail

ImageFormat sniff_image_format(const uint8_t* d, size_t n) {
  auto starts = [&](const char* magic, size_t len) {
    return n >= len && std::memcmp(d, magic, len) == 0;
  };
  if (starts("\x89PNG\r\n\x1a\n", 8)) return ImageFormat::Png;
  if (starts("\xff\xd8\xff", 3)) return ImageFormat::Jpeg;
  if (starts("BM", 2) && n >= 26) return ImageFormat::Bmp;
  // PNM: P1..P6 followed by whitespace (P7/PAM and PF/PFM, float, are not documented).
  if (n >= 3 && d[0] == 'P' && d[1] >= '1' && d[1] <= '6' && std::isspace(d[2]))
    return ImageFormat::Pnm;
  if (starts("II*\0", 4) || starts("MM\0*", 4)) return ImageFormat::Tiff;
  if (n >= 12 && starts("RIFF", 4) && std::memcmp(d + 8, "WEBP", 4) == 0) return ImageFormat::WebP;
  return ImageFormat::Unknown;
}

const char* image_format_name(ImageFormat f) {
  // In the enum's order.
  static const char* const names[] = {"PNG", "JPEG", "BMP", "PNM", "TIFF", "WebP", "unknown"};
  return names[int(f)];
}

bool image_truncated(ImageFormat f, const uint8_t* d, size_t n) {
  if (sniff_image_format(d, n) != f) return false;
  try {
    return inspect_image("", d, n).truncated;
  } catch (const Error&) {
    return false;  // corrupt, which is not the same as cut short
  }
}

HostImage load_image(const std::string& path, const LoadOptions& opt) {
  const std::string name = shown(path);
  OpenFile f;
  open_image_file(path, name, f);
  // The header first, through a 64 KiB window: the cap and the file size are checked before
  // the rest of the file is read.
  std::vector<uint8_t> window;
  uint64_t window_at = 0;
  const ReadAt at = [&](uint64_t off, uint8_t* dst, size_t n) -> size_t {
    if (off >= f.size) return 0;
    n = size_t(std::min<uint64_t>(n, f.size - off));
    if (off < window_at || off + n > window_at + window.size()) {
      window.resize(std::max<size_t>(n, size_t(1) << 16));
      window.resize(pread_full(f.fd, window.data(), window.size(), off, name));
      window_at = off;
      n = std::min(n, window.size());
    }
    std::memcpy(dst, window.data() + (off - window_at), n);
    return n;
  };
  const ImageHeader h = read_image_header(name, at, f.size);
  check_header(name, h, f.size, opt);

  std::vector<uint8_t> bytes(size_t(f.size));
  const size_t got = pread_full(f.fd, bytes.data(), bytes.size(), 0, name);
  bytes.resize(got);  // a file that shrank since fstat reads as truncated
  if (bytes.empty()) fail(ErrorKind::Data, name, "empty file (0 bytes)");
  return decode_image(path, bytes.data(), bytes.size(), opt);
}

HostImage decode_image(const std::string& path_in, const uint8_t* data, size_t size,
                       const LoadOptions& opt) {
  const std::string path = shown(path_in);
  if (size == 0) fail(ErrorKind::Data, path, "empty file (0 bytes)");
  if (size > kMaxFileBytes) fail(ErrorKind::Data, path, "over the size limit of an image file");

  // The signature decides, before any decoder sees the bytes: only the documented formats.
  const ImageFormat format = sniff_image_format(data, size);
  if (format == ImageFormat::Unknown)
    fail(ErrorKind::Data, path,
         "not an image the lab reads (PNG, JPEG, BMP, PGM/PPM"
#if defined(LAB_WITH_OPENCV)
         ", PBM, TIFF, WebP"
#endif
         ")");
#if !defined(LAB_WITH_OPENCV)
  if (format == ImageFormat::Tiff || format == ImageFormat::WebP)
    fail(ErrorKind::Data, path,
         std::string(image_format_name(format)) + " needs the OpenCV build (LAB_WITH_OPENCV)");
#endif
  // The header's size is checked before anything is decoded, for every format; then the
  // structure (chunk CRCs, end markers, pixel data size), which needs no decoder either.
  ImageHeader h = read_image_header(path, data, size);
  check_header(path, h, size, opt);
  check_image_body(path, h, data, size);
  const char* fmt = image_format_name(format);
  // A truncated file is refused, or when accepted, decoded with one warning (printed only once
  // the decoder has produced an image, so a failure stays a single error line).
  std::string warning;
  auto cut_short = [&](const std::string& why) {
    if (!opt.accept_truncated)
      fail(
          ErrorKind::Data, path,
          std::string("truncated ") + fmt + " (" + why + "); --accept-truncated decodes it anyway");
    warning = std::string("truncated ") + fmt + " (" + why + ")";
  };
  if (h.truncated) cut_short(h.why);
  // An accepted truncated BMP or PNM is completed with zeros here, the same in every build,
  // rather than left to whatever each decoder does with a short file.
  std::vector<uint8_t> completed;
  if (h.truncated && (h.missing_bytes || h.missing_samples || h.rle_end)) {
    completed.assign(data, data + size);
    if (h.rle_end) {
      completed.push_back(0);
      completed.push_back(1);
    }
    completed.resize(completed.size() + size_t(h.missing_bytes), 0);
    if (h.missing_samples) completed.push_back('\n');
    for (uint64_t k = 0; k < h.missing_samples; ++k) {
      completed.push_back('0');
      completed.push_back(' ');
    }
    data = completed.data();
    size = completed.size();
  }

#if defined(LAB_WITH_OPENCV)
  std::string why;
  HostImage img = decode_with_opencv(path, data, size, h.channels, why);
  if (img.desc().empty()) {
    // A second opinion from stb, only where it cannot hide damage: BMP and binary PNM, whose
    // pixel data size was checked above, or a truncated file the user accepted. Never a PNG
    // (stb skips CRCs and zlib's checksum) or a JPEG (stb fills what it cannot decode).
    const bool stb_safe =
        format == ImageFormat::Bmp || (format == ImageFormat::Pnm && !h.ascii) ||
        (h.truncated && format != ImageFormat::Tiff && format != ImageFormat::WebP);
    bool decoded = false;
    if (stb_safe) {
      try {
        img = detail::decode_with_stb(path, data, size);
        decoded = true;
      } catch (const Error&) {
      }
    }
    if (!decoded)
      fail(ErrorKind::Data, path,
           (h.truncated ? warning + ", and no decoder reads what is there"
                        : std::string("not an image or corrupt")) +
               (why.empty() ? "" : " (" + why + ")"));
  } else if (format == ImageFormat::Jpeg && !h.truncated &&
             why.find("Corrupt JPEG data") != std::string::npos &&
             why.find("extraneous bytes") == std::string::npos) {
    // libjpeg decoded it but filled what it could not read.
    cut_short(why);
  }
#else
  HostImage img = detail::decode_with_stb(path, data, size);
#endif
  check_size(path, img.desc().width, img.desc().height, opt);
  if (img.desc().width != h.width || img.desc().height != h.height)
    fail(ErrorKind::Data, path,
         "decoded as " + std::to_string(img.desc().width) + "x" +
             std::to_string(img.desc().height) + " but its header says " + std::to_string(h.width) +
             "x" + std::to_string(h.height));
  if (!warning.empty())
    std::fprintf(stderr,
                 "kernel-lab: warning: %s: %s, decoded anyway: its missing part is filled by the "
                 "decoder\n",
                 path.c_str(), warning.c_str());
  return img;
}

HostImage synthetic_frame(int width, int height, uint64_t seed, int frame) {
  constexpr int kMaxSide = 16384;
  if (width < 1 || height < 1 || width > kMaxSide || height > kMaxSide) {
    throw Error(ErrorKind::Usage, "synthetic frame size " + std::to_string(width) + "x" +
                                      std::to_string(height) + " is invalid: width and height " +
                                      "must be 1.." + std::to_string(kMaxSide));
  }
  HostImage img = HostImage::frame(ImageDesc{width, height, 3, PixelType::U8});

  // Smooth background: B varies along x, G along y, R along both; no corners of its own.
  std::vector<uint8_t> bx(static_cast<size_t>(width)), rx(static_cast<size_t>(width));
  for (int x = 0; x < width; ++x) {
    bx[size_t(x)] = uint8_t(40 + int64_t(120) * x / width);
    rx[size_t(x)] = uint8_t(int64_t(70) * x / width);
  }
  for (int y = 0; y < height; ++y) {
    const uint8_t g = uint8_t(50 + int64_t(110) * y / height);
    const int ry = 150 - int(int64_t(60) * y / height);
    uint8_t* row = img.bytes() + size_t(y) * img.pitch();
    for (int x = 0; x < width; ++x) {
      row[3 * x + 0] = bx[size_t(x)];
      row[3 * x + 1] = g;
      row[3 * x + 2] = uint8_t(ry + rx[size_t(x)] / 2);
    }
  }

  for (const Shape& sh : make_shapes(width, height, seed)) draw(img, sh, frame);
  return img;
}

}  // namespace lab::io
