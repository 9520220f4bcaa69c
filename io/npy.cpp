#include "npy.h"

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <system_error>
#include <utility>
#include <vector>

#include "check.h"
#include "output_file.h"
#include "printable.h"

namespace lab::io {
namespace {

namespace fs = std::filesystem;

constexpr char kMagic[] = "\x93NUMPY";  // 6 bytes + NUL
constexpr size_t kMagicLen = 6;
constexpr size_t kMaxHeader = 1 << 20;  // real headers are ~128 bytes; refuse absurd ones

using File = std::unique_ptr<std::FILE, int (*)(std::FILE*)>;

[[noreturn]] void fail(ErrorKind kind, const std::string& path, const std::string& problem) {
  throw Error(kind, path + ": " + problem);
}

bool little_endian() {
  const uint16_t one = 1;
  uint8_t first;
  std::memcpy(&first, &one, 1);
  return first == 1;
}

// .npy float data is little-endian; swap 4-byte words in place on a big-endian host.
void swap_f32(uint8_t* p, size_t bytes) {
  for (size_t i = 0; i + 4 <= bytes; i += 4) {
    std::swap(p[i], p[i + 3]);
    std::swap(p[i + 1], p[i + 2]);
  }
}

// A parser for the one Python literal a .npy header holds:
// {'descr': '<f4', 'fortran_order': False, 'shape': (480, 640, 3), }
class HeaderParser {
 public:
  HeaderParser(const std::string& text, const std::string& path) : m_s(text), m_path(path) {}

  void parse(std::string* descr, bool* fortran, std::vector<int64_t>* shape) {
    bool have_descr = false, have_fortran = false, have_shape = false;
    expect('{');
    for (;;) {
      skip_ws();
      if (peek() == '}') break;
      const std::string key = string_literal();
      expect(':');
      skip_ws();
      if (key == "descr") {
        if (peek() != '\'' && peek() != '"') bad("unsupported dtype (structured arrays are not)");
        *descr = string_literal();
        have_descr = true;
      } else if (key == "fortran_order") {
        *fortran = boolean();
        have_fortran = true;
      } else if (key == "shape") {
        *shape = tuple();
        have_shape = true;
      } else {
        bad("unexpected header key '" + printable(key) + "'");
      }
      skip_ws();
      if (peek() == ',') {
        ++m_i;
        continue;
      }
      skip_ws();
      if (peek() != '}') bad("malformed header");
    }
    ++m_i;
    skip_ws();
    if (m_i != m_s.size()) bad("malformed header (text after the dictionary)");
    if (!have_descr || !have_fortran || !have_shape) {
      bad("header lacks 'descr', 'fortran_order' or 'shape'");
    }
  }

 private:
  [[noreturn]] void bad(const std::string& why) { fail(ErrorKind::Data, m_path, why); }
  char peek() const { return m_i < m_s.size() ? m_s[m_i] : '\0'; }
  void skip_ws() {
    while (m_i < m_s.size() &&
           (m_s[m_i] == ' ' || m_s[m_i] == '\t' || m_s[m_i] == '\n' || m_s[m_i] == '\r')) {
      ++m_i;
    }
  }
  void expect(char c) {
    skip_ws();
    if (peek() != c) bad(std::string("malformed header (expected '") + c + "')");
    ++m_i;
  }
  std::string string_literal() {
    skip_ws();
    const char q = peek();
    if (q != '\'' && q != '"') bad("malformed header (expected a string)");
    const size_t end = m_s.find(q, m_i + 1);
    if (end == std::string::npos) bad("malformed header (unterminated string)");
    std::string out = m_s.substr(m_i + 1, end - m_i - 1);
    m_i = end + 1;
    return out;
  }
  bool boolean() {
    if (m_s.compare(m_i, 4, "True") == 0) {
      m_i += 4;
      return true;
    }
    if (m_s.compare(m_i, 5, "False") == 0) {
      m_i += 5;
      return false;
    }
    bad("malformed header (fortran_order is not True or False)");
  }
  std::vector<int64_t> tuple() {
    std::vector<int64_t> dims;
    expect('(');
    for (;;) {
      skip_ws();
      if (peek() == ')') break;
      if (peek() < '0' || peek() > '9') bad("malformed header (bad shape)");
      int64_t v = 0;
      while (peek() >= '0' && peek() <= '9') {
        if (v > (std::numeric_limits<int64_t>::max() - 9) / 10) bad("shape too large");
        v = v * 10 + (m_s[m_i++] - '0');
      }
      if (peek() == 'L') ++m_i;  // Python 2 long
      dims.push_back(v);
      skip_ws();
      if (peek() == ',') {
        ++m_i;
      } else if (peek() != ')') {
        bad("malformed header (bad shape)");
      }
    }
    ++m_i;
    return dims;
  }

  const std::string& m_s;
  const std::string& m_path;
  size_t m_i = 0;
};

}  // namespace

std::string npy_header(const ImageDesc& d) {
  std::string dict = std::string("{'descr': '") +
                     (d.type == PixelType::F32   ? "<f4"
                      : d.type == PixelType::U32 ? "<u4"
                                                 : "|u1") +
                     "', 'fortran_order': False, 'shape': (" + std::to_string(d.height) + ", " +
                     std::to_string(d.width);
  if (d.channels != 1) dict += ", " + std::to_string(d.channels);
  dict += "), }";
  // Pad so magic(6) + version(2) + length(2) + dict + '\n' is a multiple of 64: the data then
  // starts aligned, as numpy itself does.
  const size_t unpadded = kMagicLen + 4 + dict.size() + 1;
  dict.append((64 - unpadded % 64) % 64, ' ');
  dict += '\n';
  const size_t hlen = dict.size();

  std::string header(kMagic, kMagicLen);
  header += char(1);
  header += char(0);
  header += char(hlen & 0xFF);
  header += char((hlen >> 8) & 0xFF);
  header += dict;
  return header;
}

void write_npy(OutputFile& out, const HostImage& img) {
  if (img.pitch() != img.desc().row_bytes()) return write_npy(out, HostImage(img));  // rows packed
  const ImageDesc& d = img.desc();
  out.write(npy_header(d));
  const size_t bytes = d.bytes();
  if (bytes == 0) return;
  if (d.type != PixelType::U8 && !little_endian()) {
    std::vector<uint8_t> tmp(img.bytes(), img.bytes() + bytes);
    swap_f32(tmp.data(), bytes);
    out.write(tmp.data(), bytes);
  } else {
    out.write(img.bytes(), bytes);
  }
}

void write_npy(const std::string& path, const HostImage& img) {
  OutputFile out(path);
  write_npy(out, img);
  out.commit();
}

HostImage read_npy(const std::string& path) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (path.empty()) fail(ErrorKind::NoInput, "(empty path)", "no such file");
  if (st.type() == fs::file_type::not_found) fail(ErrorKind::NoInput, path, "no such file");
  if (ec) fail(ErrorKind::Io, path, "cannot read: " + ec.message());
  if (st.type() == fs::file_type::directory) fail(ErrorKind::NoInput, path, "is a directory");
  // A pipe or a device could block or never end (/dev/zero).
  if (st.type() != fs::file_type::regular) fail(ErrorKind::Data, path, "not a regular file");
  const uintmax_t size = fs::file_size(path, ec);
  if (ec) fail(ErrorKind::Io, path, "cannot read: " + ec.message());
  if (size > uintmax_t(std::numeric_limits<size_t>::max() / 2))
    fail(ErrorKind::Data, path, "file too large");

  File f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f)
    fail(ErrorKind::Io, path, std::string("cannot open for reading: ") + std::strerror(errno));
  // The file's size bounds the allocation, so a lying header costs nothing.
  std::vector<uint8_t> bytes(static_cast<size_t>(size));
  const size_t got = bytes.empty() ? 0 : std::fread(bytes.data(), 1, bytes.size(), f.get());
  if (got != bytes.size() && std::ferror(f.get()))
    fail(ErrorKind::Io, path, std::string("read failed: ") + std::strerror(errno));
  bytes.resize(got);  // a file that shrank while we read is judged on what was there
  return decode_npy(path, bytes.data(), bytes.size());
}

HostImage decode_npy(const std::string& path, const uint8_t* data, size_t size) {
  size_t pos = 0;
  auto take = [&](size_t n) -> const uint8_t* {
    if (size - pos < n) return nullptr;
    const uint8_t* p = data + pos;
    pos += n;
    return p;
  };

  const uint8_t* pre = take(8);
  if (!pre) fail(ErrorKind::Data, path, "too short to be a .npy file");
  if (std::memcmp(pre, kMagic, kMagicLen) != 0) {
    fail(ErrorKind::Data, path, "not a .npy file (bad magic)");
  }
  const int major = pre[6], minor = pre[7];
  size_t hlen = 0;
  if (major == 1) {
    const uint8_t* l = take(2);
    if (!l) fail(ErrorKind::Data, path, "truncated header");
    hlen = size_t(l[0]) | size_t(l[1]) << 8;
  } else if (major == 2) {
    const uint8_t* l = take(4);
    if (!l) fail(ErrorKind::Data, path, "truncated header");
    hlen = size_t(l[0]) | size_t(l[1]) << 8 | size_t(l[2]) << 16 | size_t(l[3]) << 24;
  } else {
    fail(ErrorKind::Data, path,
         "unsupported .npy version " + std::to_string(major) + "." + std::to_string(minor) +
             " (expected 1.0 or 2.0)");
  }
  if (hlen > kMaxHeader) fail(ErrorKind::Data, path, "header too large");
  const uint8_t* h = take(hlen);
  if (!h) fail(ErrorKind::Data, path, "truncated header");
  const std::string text(reinterpret_cast<const char*>(h), hlen);

  std::string descr;
  bool fortran = false;
  std::vector<int64_t> shape;
  HeaderParser(text, path).parse(&descr, &fortran, &shape);

  PixelType type;
  if (descr == "<f4") {
    type = PixelType::F32;
  } else if (descr == "<u4") {
    type = PixelType::U32;
  } else if (descr == "|u1" || descr == "<u1" || descr == ">u1") {
    type = PixelType::U8;
  } else {
    fail(ErrorKind::Data, path,
         "unsupported dtype '" + printable(descr) + "' (expected '<f4', '<u4' or '|u1')");
  }
  if (fortran) fail(ErrorKind::Data, path, "Fortran-order arrays are not supported");
  if (shape.size() != 2 && shape.size() != 3) {
    fail(ErrorKind::Data, path,
         "array has " + std::to_string(shape.size()) + " dimensions (expected 2 or 3)");
  }
  constexpr int64_t kIntMax = std::numeric_limits<int>::max();
  for (int64_t v : shape) {
    if (v > kIntMax) fail(ErrorKind::Data, path, "array dimension too large");
  }
  if (shape.size() == 3 && shape[2] < 1) {
    fail(ErrorKind::Data, path, "array has 0 channels");
  }

  ImageDesc desc;
  desc.height = int(shape[0]);
  desc.width = int(shape[1]);
  desc.channels = shape.size() == 3 ? int(shape[2]) : 1;
  desc.type = type;
  // Guard the byte count against overflow before anything is allocated.
  const double approx = double(desc.width) * desc.height * desc.channels * 4.0;
  if (approx > double(std::numeric_limits<size_t>::max() / 2)) {
    fail(ErrorKind::Data, path, "array too large");
  }
  const size_t bytes = desc.bytes();
  // Compare with what is there first, so a lying header cannot make us allocate gigabytes.
  if (size - pos < bytes) {
    fail(ErrorKind::Data, path,
         "truncated: " + desc.str() + " needs " + std::to_string(bytes) + " data bytes, file has " +
             std::to_string(size - pos));
  }

  HostImage img(desc);
  if (bytes > 0) std::memcpy(img.bytes(), data + pos, bytes);
  if (type != PixelType::U8 && !little_endian()) swap_f32(img.bytes(), bytes);
  return img;
}

}  // namespace lab::io
