// Input images: files decoded to 8-bit BGR(A)/gray, and a built-in synthetic scene.
//
// Every failure is a lab::Error whose kind maps onto a sysexits code (see check.h), with a
// one-line message that names the file and the problem.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "image.h"

namespace lab::io {

// 100 Mpx: large enough for any photo, small enough that a hostile header cannot make us
// allocate gigabytes before the first pixel is checked.
constexpr size_t kDefaultMaxPixels = 100'000'000;

struct LoadOptions {
  size_t max_pixels = kDefaultMaxPixels;
  // A file that ends before its end marker or its pixel data (PNG without IEND, JPEG without
  // EOI or with a scan libjpeg finds cut short, BMP/PNM data short, RLE BMP without its end
  // marker) is an error (Data) unless this is set; then it decodes (a BMP's or PNM's missing
  // part zeros, a JPEG's as libjpeg fills it) with one warning on stderr that names the file.
  // Corruption (a PNG chunk failing its CRC) is an error either way.
  bool accept_truncated = false;
};

// The formats the lab reads, told by their first bytes before any decoder sees them (a decoder
// handed a format the lab does not document, such as a Radiance HDR, could loop: CVE-2021-42715).
enum class ImageFormat { Png, Jpeg, Bmp, Pnm, Tiff, WebP, Unknown };
ImageFormat sniff_image_format(const uint8_t* data, size_t size);
const char* image_format_name(ImageFormat f);
// Whether the image ends before its end marker or pixel data (image_header.h says how each
// format is checked); false for a corrupt or unknown one.
bool image_truncated(ImageFormat f, const uint8_t* data, size_t size);

// Decodes an image file to PixelType::U8 with 1 (gray), 3 (BGR) or 4 (BGRA) channels. Only the
// header is read first (image_header.h): the pixel cap and a file size that fits the
// dimensions are checked before the rest of the file is read or any decoder runs.
// Uses OpenCV when built with LAB_WITH_OPENCV, stb_image otherwise; PNGs decode to the same
// pixels either way. Throws Error: NoInput (missing path or a directory), Io (unreadable),
// Data (empty, not one of the formats above, truncated, corrupt, zero size, or over
// opt.max_pixels).
HostImage load_image(const std::string& path, const LoadOptions& opt = {});
// The same from bytes in memory (what load_image does after reading the file; the fuzz target
// calls it). `name` is only used in error messages.
HostImage decode_image(const std::string& name, const uint8_t* data, size_t size,
                       const LoadOptions& opt = {});

// A deterministic BGR U8 test scene (gradient, checkerboard, rectangles, discs, rings,
// triangles, lines) with no files. Shapes are placed from `seed` and move a few pixels per
// `frame`, wrapping around the edges. Byte-identical on every machine (integer math only).
// Throws Error(Usage) for a width or height outside 1..16384.
HostImage synthetic_frame(int width, int height, uint64_t seed = 1, int frame = 0);

namespace detail {
// The stb_image decoder, always compiled so tests can compare it with OpenCV. `name` is only
// used in error messages. Returns U8 gray, BGR or BGRA, as load_image does.
HostImage decode_with_stb(const std::string& name, const uint8_t* data, size_t size);
}  // namespace detail

}  // namespace lab::io
