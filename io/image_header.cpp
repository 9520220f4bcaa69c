#include "image_header.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstring>
#include <vector>

#include "check.h"

namespace lab::io {
namespace {

constexpr size_t kHead = size_t(64) << 10;
constexpr uint64_t kJpegFrameSearch = uint64_t(16) << 20;

[[noreturn]] void bad(const std::string& name, const std::string& problem) {
  throw Error(ErrorKind::Data, name + ": " + problem);
}

uint32_t be32(const uint8_t* p) {
  return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3];
}
uint32_t be16(const uint8_t* p) {
  return uint32_t(p[0]) << 8 | p[1];
}
uint32_t le32(const uint8_t* p) {
  return uint32_t(p[3]) << 24 | uint32_t(p[2]) << 16 | uint32_t(p[1]) << 8 | p[0];
}
uint32_t le16(const uint8_t* p) {
  return uint32_t(p[1]) << 8 | p[0];
}
uint32_t le24(const uint8_t* p) {
  return uint32_t(p[2]) << 16 | uint32_t(p[1]) << 8 | p[0];
}

std::string fourcc(const uint8_t* p) {
  std::string s;
  for (int i = 0; i < 4; ++i) {
    const unsigned char c = p[i];
    if (std::isprint(c)) {
      s += char(c);
    } else {
      char hex[5];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      s += hex;
    }
  }
  return s;
}

void set_truncated(ImageHeader& h, const std::string& why) {
  h.truncated = true;
  h.why = why;
}

void set_end(ImageHeader& h, uint64_t end, size_t size) {
  h.end = end;
  h.trailing = size > end ? size - end : 0;
}

// --- PNG ------------------------------------------------------------------------------------

void png_header(const std::string& name, ImageHeader& h, const uint8_t* p, size_t n) {
  if (n < 33 || be32(p + 8) != 13 || std::memcmp(p + 12, "IHDR", 4) != 0)
    bad(name, "malformed PNG header (no IHDR chunk first)");
  const uint32_t w = be32(p + 16), ht = be32(p + 20);
  if (w > 0x7fffffffu || ht > 0x7fffffffu) bad(name, "malformed PNG header (size over 2^31)");
  h.width = w;
  h.height = ht;
  h.bits = p[24];
  const int type = p[25];
  static const int channels[7] = {1, 0, 3, 3, 2, 0, 4};
  if (type > 6 || channels[type] == 0)
    bad(name, "malformed PNG header (colour type " + std::to_string(type) + ")");
  h.channels = channels[type];
  const int b = h.bits;
  const bool ok = type == 0   ? (b == 1 || b == 2 || b == 4 || b == 8 || b == 16)
                  : type == 3 ? (b == 1 || b == 2 || b == 4 || b == 8)
                              : (b == 8 || b == 16);
  if (!ok) bad(name, "malformed PNG header (bit depth " + std::to_string(b) + ")");
}

void png_body(const std::string& name, ImageHeader& h, const uint8_t* d, size_t n) {
  size_t i = 8;
  while (i + 8 <= n) {
    const uint32_t len = be32(d + i);
    const std::string type = fourcc(d + i + 4);
    for (int k = 4; k < 8; ++k)
      if (!std::isalpha(d[i + k])) bad(name, "corrupt PNG (chunk name '" + type + "')");
    if (len >= 0x80000000u)
      bad(name, "corrupt PNG (chunk '" + type + "' claims " + std::to_string(len) + " bytes)");
    if (len + uint64_t(12) > n - i) {
      set_truncated(h, "chunk '" + type + "' runs past the end of the file");
      return;
    }
    if (crc32(d + i + 4, len + 4) != be32(d + i + 8 + len))
      bad(name, "corrupt PNG (chunk '" + type + "' fails its CRC)");
    i += 12 + size_t(len);
    if (type == "IEND") {
      set_end(h, i, n);
      return;
    }
  }
  set_truncated(h, "no IEND chunk");
}

// --- JPEG -----------------------------------------------------------------------------------

bool is_sof(int m) {
  return m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC;
}

// Walks marker segments from `pos` (just after SOI) through `at`, up to the first SOFn.
void jpeg_header(const std::string& name, ImageHeader& h, const ReadAt& at, uint64_t size) {
  uint64_t pos = 2;
  const uint64_t limit = std::min(size, kJpegFrameSearch);
  uint8_t b[10];
  while (pos + 4 <= limit) {
    if (at(pos, b, 4) < 4) break;
    if (b[0] != 0xFF) bad(name, "malformed JPEG (no marker at byte " + std::to_string(pos) + ")");
    const int m = b[1];
    if (m == 0xFF) {  // fill byte
      ++pos;
      continue;
    }
    if (m == 0x01 || (m >= 0xD0 && m <= 0xD7)) {  // no length
      pos += 2;
      continue;
    }
    if (m == 0xD8 || m == 0xD9 || m == 0xDA || m == 0x00)
      bad(name, "malformed JPEG (no frame header before marker " + std::to_string(m) + ")");
    const uint32_t len = be16(b + 2);
    if (len < 2) bad(name, "malformed JPEG (segment length " + std::to_string(len) + ")");
    if (is_sof(m)) {
      if (len < 8 || at(pos + 4, b, 6) < 6) break;
      h.bits = b[0];
      h.height = be16(b + 1);
      h.width = be16(b + 3);
      h.channels = b[5];
      if (h.height == 0) bad(name, "JPEG whose height comes from a DNL marker: not supported");
      if (h.channels != 1 && h.channels != 3 && h.channels != 4)
        bad(name, "malformed JPEG (" + std::to_string(h.channels) + " components)");
      return;
    }
    pos += 2 + uint64_t(len);
  }
  if (pos + 4 > size) bad(name, "malformed JPEG (the file ends before its frame header)");
  bad(name, "malformed JPEG (no frame header in the first 16 MiB)");
}

void jpeg_body(const std::string& name, ImageHeader& h, const uint8_t* d, size_t n) {
  size_t pos = 2;
  bool in_scan = false;
  while (pos < n) {
    if (in_scan) {  // entropy-coded data: FF is stuffed as FF 00; RSTn belong to the scan
      const void* ff = std::memchr(d + pos, 0xFF, n - pos);
      if (!ff) break;
      pos = size_t(static_cast<const uint8_t*>(ff) - d);
      if (pos + 1 >= n) break;
      const int m = d[pos + 1];
      if (m == 0x00 || m == 0xFF || (m >= 0xD0 && m <= 0xD7)) {
        pos += 1;
        continue;
      }
      in_scan = false;
      continue;  // a marker: read as a segment below
    }
    if (pos + 2 > n) break;
    if (d[pos] != 0xFF) bad(name, "corrupt JPEG (no marker at byte " + std::to_string(pos) + ")");
    const int m = d[pos + 1];
    if (m == 0xFF) {
      ++pos;
      continue;
    }
    if (m == 0xD9) {
      set_end(h, pos + 2, n);
      return;
    }
    if (m == 0x01 || (m >= 0xD0 && m <= 0xD7)) {
      pos += 2;
      continue;
    }
    if (pos + 4 > n) break;
    const uint32_t len = be16(d + pos + 2);
    if (len < 2) bad(name, "corrupt JPEG (segment length " + std::to_string(len) + ")");
    pos += 2 + size_t(len);
    if (m == 0xDA) in_scan = true;
  }
  set_truncated(h, "no end-of-image marker");
}

// --- BMP ------------------------------------------------------------------------------------

struct BmpInfo {
  uint32_t offset = 0, compression = 0, bpp = 0;
};

BmpInfo bmp_header(const std::string& name, ImageHeader& h, const uint8_t* p, size_t n) {
  if (n < 26) bad(name, "malformed BMP header (too short)");
  BmpInfo b;
  b.offset = le32(p + 10);
  const uint32_t hsize = le32(p + 14);
  int64_t w = 0, ht = 0;
  if (hsize == 12) {  // OS/2 core header
    w = le16(p + 18);
    ht = le16(p + 20);
    b.bpp = le16(p + 24);
  } else if (hsize == 40 || hsize == 52 || hsize == 56 || hsize == 108 || hsize == 124) {
    if (n < 34) bad(name, "malformed BMP header (too short)");
    w = int32_t(le32(p + 18));
    ht = int32_t(le32(p + 22));
    b.bpp = le16(p + 28);
    b.compression = le32(p + 30);
  } else {
    bad(name, "unsupported BMP header (" + std::to_string(hsize) + " bytes)");
  }
  if (b.bpp != 1 && b.bpp != 4 && b.bpp != 8 && b.bpp != 16 && b.bpp != 24 && b.bpp != 32)
    bad(name, "malformed BMP header (" + std::to_string(b.bpp) + " bits per pixel)");
  const uint32_t c = b.compression;
  if (c > 3 || (c == 1 && b.bpp != 8) || (c == 2 && b.bpp != 4) ||
      (c == 3 && b.bpp != 16 && b.bpp != 32))
    bad(name, "unsupported BMP compression " + std::to_string(c) + " at " + std::to_string(b.bpp) +
                  " bits per pixel");
  if ((c == 1 || c == 2) && ht < 0) bad(name, "malformed BMP header (top-down RLE)");
  if (b.offset < 14 + hsize) bad(name, "malformed BMP header (pixel data inside the header)");
  if (w < 0) bad(name, "malformed BMP header (width " + std::to_string(w) + ")");  // only rows flip
  h.width = w;
  h.height = ht < 0 ? -ht : ht;
  h.channels = b.bpp == 32 ? 4 : 3;
  h.bits = 8;
  return b;
}

void bmp_body(const std::string& name, ImageHeader& h, const uint8_t* d, size_t n) {
  const BmpInfo b = bmp_header(name, h, d, n);
  if (b.offset > n) {
    set_truncated(h, "the pixel data starts past the end of the file");
    return;
  }
  if (b.compression == 0 || b.compression == 3) {
    const uint64_t stride = (uint64_t(h.width) * b.bpp + 31) / 32 * 4;
    const uint64_t need = b.offset + stride * uint64_t(h.height);
    if (need > n) {
      set_truncated(h, "its pixel data needs " + std::to_string(need) + " bytes, the file has " +
                           std::to_string(n));
      h.missing_bytes = need - n;
      return;
    }
    set_end(h, need, n);
    return;
  }
  // RLE: walk the codes to the end-of-bitmap marker (00 01); a plain search could find it in data.
  size_t i = b.offset;
  while (i + 2 <= n) {
    const int count = d[i], code = d[i + 1];
    i += 2;
    if (count > 0) continue;  // a run
    if (code == 1) {
      set_end(h, i, n);
      return;
    }
    if (code == 0) continue;  // end of line
    if (code == 2) {          // delta
      i += 2;
      continue;
    }
    const size_t bytes = b.compression == 1 ? size_t(code) : (size_t(code) + 1) / 2;
    i += bytes + (bytes & 1);  // absolute run, padded to 16 bits
  }
  set_truncated(h, "no RLE end-of-bitmap marker");
  h.rle_end = i <= n;  // cut between codes: the marker completes it
}

// --- PNM ------------------------------------------------------------------------------------

struct PnmInfo {
  int kind = 0;  // 1..6
  uint64_t maxval = 1;
  size_t data = 0;  // offset of the first sample
};

PnmInfo pnm_header(const std::string& name, ImageHeader& h, const uint8_t* p, size_t n) {
  PnmInfo info;
  info.kind = p[1] - '0';
  size_t i = 2;
  auto number = [&](const char* what) -> uint64_t {
    for (;;) {  // whitespace and comments
      while (i < n && std::isspace(p[i])) ++i;
      if (i < n && p[i] == '#') {
        while (i < n && p[i] != '\n' && p[i] != '\r') ++i;
        continue;
      }
      break;
    }
    if (i >= n || !std::isdigit(p[i]))
      bad(name, std::string("malformed PNM header (no ") + what + ")");
    uint64_t v = 0;
    int digits = 0;
    while (i < n && std::isdigit(p[i])) {
      v = v * 10 + uint64_t(p[i++] - '0');
      if (++digits > 10) bad(name, std::string("malformed PNM header (") + what + " too large)");
    }
    return v;
  };
  h.width = (long long)number("width");
  h.height = (long long)number("height");
  if (info.kind != 1 && info.kind != 4) {
    info.maxval = number("maxval");
    if (info.maxval == 0 || info.maxval > 65535)
      bad(name, "malformed PNM header (maxval " + std::to_string(info.maxval) + ")");
  }
  if (i >= n || !std::isspace(p[i])) bad(name, "malformed PNM header (no space after it)");
  info.data = i + 1;  // one whitespace byte, then the samples
  h.channels = info.kind == 3 || info.kind == 6 ? 3 : 1;
  h.bits = info.maxval > 255 ? 16 : info.maxval == 1 ? 1 : 8;
  h.ascii = info.kind <= 3;
  return info;
}

void pnm_body(const std::string& name, ImageHeader& h, const uint8_t* d, size_t n) {
  const PnmInfo info = pnm_header(name, h, d, n);
  const uint64_t samples = uint64_t(h.width) * uint64_t(h.height) * uint64_t(h.channels);
  if (!h.ascii) {
    const uint64_t row = info.kind == 4 ? (uint64_t(h.width) + 7) / 8
                                        : uint64_t(h.width) * h.channels * (h.bits > 8 ? 2 : 1);
    const uint64_t need = info.data + row * uint64_t(h.height);
    if (need > n) {
      set_truncated(h, "its samples need " + std::to_string(need) + " bytes, the file has " +
                           std::to_string(n));
      h.missing_bytes = need - n;
      return;
    }
    set_end(h, need, n);
    return;
  }
  // Decimal samples; in P1 a digit is a sample, spaces optional.
  uint64_t found = 0;
  size_t i = info.data;
  while (i < n && found < samples) {
    const unsigned char c = d[i];
    if (std::isspace(c)) {
      ++i;
    } else if (c == '#') {
      while (i < n && d[i] != '\n' && d[i] != '\r') ++i;
    } else if (std::isdigit(c)) {
      ++found;
      ++i;
      if (info.kind != 1)
        while (i < n && std::isdigit(d[i])) ++i;
    } else {
      bad(name, "corrupt PNM (a sample that is not a number at byte " + std::to_string(i) + ")");
    }
  }
  if (found < samples) {
    set_truncated(
        h, "it has " + std::to_string(found) + " of its " + std::to_string(samples) + " samples");
    h.missing_samples = samples - found;
    return;
  }
  while (i < n && std::isspace(d[i])) ++i;  // the writer's final newline is not trailing data
  set_end(h, i, n);
}

// --- TIFF -----------------------------------------------------------------------------------

void tiff_header(const std::string& name, ImageHeader& h, const ReadAt& at, uint64_t size) {
  uint8_t b[12];
  if (at(0, b, 8) < 8) bad(name, "malformed TIFF (too short)");
  const bool le = b[0] == 'I';
  auto u16 = [&](const uint8_t* p) { return le ? le16(p) : be16(p); };
  auto u32 = [&](const uint8_t* p) { return le ? le32(p) : be32(p); };
  const uint64_t ifd = u32(b + 4);
  if (ifd < 8 || ifd + 2 > size) bad(name, "malformed TIFF (first IFD outside the file)");
  if (at(ifd, b, 2) < 2) bad(name, "malformed TIFF (unreadable IFD)");
  const uint32_t count = u16(b);
  if (count == 0 || ifd + 2 + 12 * uint64_t(count) > size)
    bad(name, "malformed TIFF (IFD of " + std::to_string(count) + " entries)");
  long long w = -1, ht = -1;
  for (uint32_t k = 0; k < count; ++k) {
    if (at(ifd + 2 + 12 * uint64_t(k), b, 12) < 12) bad(name, "malformed TIFF (unreadable IFD)");
    const uint32_t tag = u16(b), type = u16(b + 2), n = u32(b + 4);
    if (tag != 256 && tag != 257 && tag != 258 && tag != 277) continue;
    // One value, inline: SHORT or LONG (a count of several puts an offset in its place).
    if ((type != 3 && type != 4) || n != 1) {
      if (tag == 256 || tag == 257)
        bad(name, "malformed TIFF (tag " + std::to_string(tag) + " of type " +
                      std::to_string(type) + ", count " + std::to_string(n) + ")");
      continue;
    }
    const long long v = type == 3 ? u16(b + 8) : u32(b + 8);
    if (tag == 256) w = v;
    if (tag == 257) ht = v;
    if (tag == 258) h.bits = int(std::min(v, 64LL));
    if (tag == 277) h.channels = int(std::min(v, 64LL));
  }
  if (w < 0 || ht < 0) bad(name, "malformed TIFF (no ImageWidth/ImageLength in its first IFD)");
  h.width = w;
  h.height = ht;
}

// --- WebP -----------------------------------------------------------------------------------

void webp_header(const std::string& name, ImageHeader& h, const uint8_t* p, size_t n) {
  if (n < 20) bad(name, "malformed WebP (too short)");
  const std::string chunk(reinterpret_cast<const char*>(p + 12), 4);
  const size_t need = chunk == "VP8L" ? 25 : 30;
  if (n < need) bad(name, "malformed WebP (too short)");
  if (chunk == "VP8 ") {
    if (p[23] != 0x9d || p[24] != 0x01 || p[25] != 0x2a)
      bad(name, "malformed WebP (no VP8 start code)");
    h.width = le16(p + 26) & 0x3fff;
    h.height = le16(p + 28) & 0x3fff;
    h.channels = 3;
  } else if (chunk == "VP8L") {
    if (p[20] != 0x2f) bad(name, "malformed WebP (no VP8L signature)");
    const uint32_t bits = le32(p + 21);
    h.width = (bits & 0x3fff) + 1;
    h.height = ((bits >> 14) & 0x3fff) + 1;
    h.channels = (bits >> 28) & 1 ? 4 : 3;
  } else if (chunk == "VP8X") {
    h.width = le24(p + 24) + 1;
    h.height = le24(p + 27) + 1;
    h.channels = p[20] & 0x10 ? 4 : 3;
  } else {
    bad(name, "malformed WebP (first chunk '" + fourcc(p + 12) + "')");
  }
  h.bits = 8;
}

void webp_body(const std::string& name, ImageHeader& h, const uint8_t* d, size_t n) {
  webp_header(name, h, d, n);
  const uint64_t end = uint64_t(le32(d + 4)) + 8;
  if (end > n) {
    set_truncated(h, "its RIFF size " + std::to_string(end) + " runs past the end of the file");
    return;
  }
  set_end(h, end, n);
}

}  // namespace

uint32_t crc32(const uint8_t* data, size_t size, uint32_t crc) {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  crc = ~crc;
  for (size_t i = 0; i < size; ++i) crc = table[(crc ^ data[i]) & 0xff] ^ (crc >> 8);
  return ~crc;
}

ImageHeader read_image_header(const std::string& name, const ReadAt& at, uint64_t file_size) {
  std::vector<uint8_t> head(size_t(std::min<uint64_t>(file_size, kHead)));
  head.resize(at(0, head.data(), head.size()));
  ImageHeader h;
  h.format = sniff_image_format(head.data(), head.size());
  const uint8_t* p = head.data();
  const size_t n = head.size();
  switch (h.format) {
    case ImageFormat::Png:
      png_header(name, h, p, n);
      break;
    case ImageFormat::Jpeg:
      jpeg_header(name, h, at, file_size);
      break;
    case ImageFormat::Bmp:
      bmp_header(name, h, p, n);
      break;
    case ImageFormat::Pnm:
      pnm_header(name, h, p, n);
      break;
    case ImageFormat::Tiff:
      tiff_header(name, h, at, file_size);
      break;
    case ImageFormat::WebP:
      webp_header(name, h, p, n);
      break;
    case ImageFormat::Unknown:
      bad(name, "not an image the lab reads");
  }
  return h;
}

void check_image_body(const std::string& name, ImageHeader& h, const uint8_t* data, size_t size) {
  h.truncated = false;
  h.why.clear();
  h.end = size;
  h.trailing = 0;
  switch (h.format) {
    case ImageFormat::Png:
      png_body(name, h, data, size);
      break;
    case ImageFormat::Jpeg:
      jpeg_body(name, h, data, size);
      break;
    case ImageFormat::Bmp:
      bmp_body(name, h, data, size);
      break;
    case ImageFormat::Pnm:
      pnm_body(name, h, data, size);
      break;
    case ImageFormat::WebP:
      webp_body(name, h, data, size);
      break;
    case ImageFormat::Tiff:  // strips are libtiff's to check
    case ImageFormat::Unknown:
      break;
  }
}

ImageHeader read_image_header(const std::string& name, const uint8_t* data, size_t size) {
  const ReadAt at = [&](uint64_t off, uint8_t* dst, size_t n) -> size_t {
    if (off >= size) return 0;
    const size_t k = std::min<uint64_t>(n, size - off);
    std::memcpy(dst, data + off, k);
    return k;
  };
  return read_image_header(name, at, size);
}

ImageHeader inspect_image(const std::string& name, const uint8_t* data, size_t size) {
  ImageHeader h = read_image_header(name, data, size);
  check_image_body(name, h, data, size);
  return h;
}

uint64_t plausible_file_bytes(const ImageHeader& h) {
  const double samples = double(h.width) * double(h.height) * double(h.channels ? h.channels : 4);
  const double per = h.ascii ? 6.0 : h.bits <= 0 ? 4.0 : double((h.bits + 7) / 8);
  const double bytes = 2.0 * samples * per + double(uint64_t(64) << 20);
  return bytes >= 1.8e19 ? UINT64_MAX : uint64_t(bytes);
}

}  // namespace lab::io
