// Image headers read before any decoder runs: the signature, the dimensions, and whether the file
// holds all the data its header promises. The pixel cap is checked from these numbers, so a
// hostile header costs neither memory nor decode time (issue 42).
//
// Malformed headers throw Error(Data) with a one-line message that starts with `name`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "image_source.h"

namespace lab::io {

struct ImageHeader {
  ImageFormat format = ImageFormat::Unknown;
  long long width = 0, height = 0;
  int channels = 0;    // samples per pixel as stored (a palette PNG: 3); 0 where not told
  int bits = 0;        // bits per sample; 0 where not told
  bool ascii = false;  // PNM P1/P2/P3: samples are decimal text
  // Set by check_image_body.
  bool truncated = false;  // ends before its end marker or before its pixel data does
  std::string why;         // what is missing, for "truncated PNG (why)"
  uint64_t end = 0;        // offset just past the end marker or the pixel data, where known
  uint64_t trailing = 0;   // bytes after `end`: allowed, ignored
  // When truncated, what completes it where that is known: zero bytes to append (BMP, binary
  // PNM), "0" samples to append (ASCII PNM), or the RLE end marker (rle_end).
  uint64_t missing_bytes = 0, missing_samples = 0;
  bool rle_end = false;
};

// Reads `n` bytes at `offset` into `dst`; returns how many it read (fewer at the end of the file).
using ReadAt = std::function<size_t(uint64_t offset, uint8_t* dst, size_t n)>;

// The signature and the header of a file of `file_size` bytes, read through `at`. Bounded work:
// at most the first 64 KiB, a JPEG's marker segments up to its frame header (first 16 MiB), a
// TIFF's first IFD. Throws Data for an unknown signature or a malformed header.
ImageHeader read_image_header(const std::string& name, const ReadAt& at, uint64_t file_size);

// The same from bytes in memory.
ImageHeader read_image_header(const std::string& name, const uint8_t* data, size_t size);

// The checks that need every byte: each PNG chunk's length and CRC up to IEND, a JPEG's scans up
// to EOI, a BMP's or binary PNM's pixel data size, a BMP's RLE end marker, an ASCII PNM's sample
// count. Sets truncated/why/end/trailing; throws Data for corruption (a CRC mismatch).
void check_image_body(const std::string& name, ImageHeader& h, const uint8_t* data, size_t size);

// Both, on bytes in memory.
ImageHeader inspect_image(const std::string& name, const uint8_t* data, size_t size);

// The most bytes a file of this header's dimensions plausibly needs: twice the raw pixel bytes
// (decimal text for an ASCII PNM) plus 64 MiB for metadata.
uint64_t plausible_file_bytes(const ImageHeader& h);

// CRC-32 (ISO-HDLC, as PNG and zlib use it).
uint32_t crc32(const uint8_t* data, size_t size, uint32_t crc = 0);

}  // namespace lab::io
