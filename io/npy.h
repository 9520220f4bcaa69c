// NumPy .npy files: the exchange format for images the kernels read and write, so results
// can be inspected with numpy.load and references can be made in Python.
#pragma once

#include <string>

#include "image.h"

namespace lab::io {

// Writes a version 1.0 .npy: F32 as '<f4', U8 as '|u1'; shape (H, W) for one channel,
// (H, W, C) otherwise; C order. Throws Error(CantCreate) if the file cannot be created,
// Error(Io) if a write fails.
void write_npy(const std::string& path, const HostImage& img);

// Reads a version 1.0 or 2.0 .npy of '<f4' or '|u1', C order, with 2 or 3 dimensions.
// Throws Error(NoInput) for a missing file, Error(Io) for an unreadable one, Error(Data) for
// anything else it cannot represent.
HostImage read_npy(const std::string& path);

}  // namespace lab::io
