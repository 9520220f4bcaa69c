// NumPy .npy files: the exchange format for images the kernels read and write, so results
// can be inspected with numpy.load and references can be made in Python.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "image.h"
#include "output_file.h"

namespace lab::io {

// Writes a version 1.0 .npy: F32 as '<f4', U8 as '|u1'; shape (H, W) for one channel,
// (H, W, C) otherwise; C order. Through the lab's writer (output_file.h): Error(CantCreate)
// if the path cannot be written, Error(Io) if a write fails, and then nothing at the path has
// changed.
void write_npy(const std::string& path, const HostImage& img);
// The same into an open output (a file of a dump's set); the caller commits it.
void write_npy(OutputFile& out, const HostImage& img);

// Reads a version 1.0 or 2.0 .npy of '<f4' or '|u1', C order, with 2 or 3 dimensions.
// Throws Error(NoInput) for a missing file, Error(Io) for an unreadable one, Error(Data) for
// anything else it cannot represent.
HostImage read_npy(const std::string& path);

// The same in memory (the fuzz target's entry): the header write_npy writes for `desc`, and
// an image parsed from a whole file's bytes. `name` is only used in error messages.
std::string npy_header(const ImageDesc& desc);
HostImage decode_npy(const std::string& name, const uint8_t* data, size_t size);

}  // namespace lab::io
