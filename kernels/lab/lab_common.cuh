// Helpers shared by the playground files (kernels/lab/): size specs, deterministic inputs, 1-D
// arrays as one-row images, and Thrust's temporary memory taken from the stage's scratch.
#pragma once

#include <cuda_runtime_api.h>

#include <climits>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "op_util.h"
#include "launch.cuh"

namespace lab::ops {

// "268435456" or "2^28": a positive element count of at most `max`; throws Error(Usage).
inline long long parse_count(const std::string& spec, const char* what, long long max) {
  const std::string form = std::string(what) + ": size '" + spec +
                           "' is not a count (N or 2^k, 1 to " + std::to_string(max) + ")";
  if (spec.empty() || spec.size() > 20) throw Error(ErrorKind::Usage, form);
  long long n = 0;
  if (spec.size() > 2 && spec[0] == '2' && spec[1] == '^') {
    const std::string e = spec.substr(2);
    if (e.empty() || e.size() > 2 || e.find_first_not_of("0123456789") != std::string::npos)
      throw Error(ErrorKind::Usage, form);
    const int k = std::atoi(e.c_str());
    if (k > 62) throw Error(ErrorKind::Usage, form);
    n = 1LL << k;
  } else {
    if (spec.find_first_not_of("0123456789") != std::string::npos || spec.size() > 18)
      throw Error(ErrorKind::Usage, form);
    n = std::atoll(spec.c_str());
  }
  if (n < 1 || n > max) throw Error(ErrorKind::Usage, form);
  return n;
}

// "AxBxC" (or "AxB" when count is 2) into positive dims of at most `max` each; throws
// Error(Usage) with `form` (what the dims mean).
inline std::vector<int> parse_dims(const std::string& spec, size_t count, int max,
                                   const std::string& form) {
  std::vector<int> dims;
  size_t start = 0;
  const std::string why =
      "size '" + spec + "': expected " + form + ", each 1 to " + std::to_string(max);
  while (start <= spec.size()) {
    const size_t x = spec.find('x', start);
    const std::string part = spec.substr(start, x == std::string::npos ? x : x - start);
    if (part.empty() || part.size() > 9 ||
        part.find_first_not_of("0123456789") != std::string::npos)
      throw Error(ErrorKind::Usage, why);
    const long long v = std::atoll(part.c_str());
    if (v < 1 || v > max) throw Error(ErrorKind::Usage, why);
    dims.push_back(int(v));
    if (x == std::string::npos) break;
    start = x + 1;
  }
  if (dims.size() != count) throw Error(ErrorKind::Usage, why);
  return dims;
}

// A 1-D array of n elements as a one-row image (contiguous on the device too).
inline ImageDesc array_desc(long long n, PixelType t) {
  if (n < 1 || n > INT_MAX)
    throw Error(ErrorKind::Usage,
                "array of " + std::to_string(n) + " elements: 1 to 2^31-1 allowed");
  return ImageDesc{int(n), 1, 1, t};
}
inline long long array_len(const ImageDesc& d) {
  return (long long)d.width * d.height;
}

// Counter-based random numbers (splitmix64 of seed and index): the same inputs for a seed on
// every machine, in any fill order.
inline uint64_t mix64(uint64_t seed, uint64_t i) {
  uint64_t z = seed * 0x9E3779B97F4A7C15ull + i + 0x632BE59BD9B4E019ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
// Uniform in [-1, 1), a multiple of 2^-23 (exact in float).
inline float uniform_pm1(uint64_t seed, uint64_t i) {
  return float(int32_t(mix64(seed, i) >> 40) - (1 << 23)) * (1.0f / float(1 << 23));
}
// Uniform in [0, 1), a multiple of 2^-24.
inline float uniform01(uint64_t seed, uint64_t i) {
  return float(mix64(seed, i) >> 40) * (1.0f / float(1 << 24));
}

// Thrust's temporary allocations served from the stage's scratch memory (kept across runs), so
// a timed Thrust call pays no cudaMalloc/cudaFree, like the CUB calls given preallocated
// storage. Live allocations are nested (Thrust frees in reverse order): each takes its own
// scratch slot from `first_slot` up.
struct ThrustScratch {
  using value_type = char;
  LaunchContext* ctx = nullptr;
  int first_slot = 8;
  int live = 0;
  char* allocate(std::ptrdiff_t n) {
    return static_cast<char*>(ctx->scratch(size_t(n > 0 ? n : 1), first_slot + live++));
  }
  void deallocate(char*, size_t) { --live; }
};

// A playground over one array (access, branch, reduce, scan, sort; the tests' toy op): its input
// slot, n elements of `type` from --size (at most `max`), and the check of what it reads.
inline LabSlots array_inputs(const std::string& size, const char* op, long long max,
                             PixelType type) {
  return {{"input", array_desc(parse_count(size, op, max), type)}};
}
inline ImageDesc require_array(const char* op, const ImageDesc& d, PixelType type, long long max) {
  if (d.type != type || d.channels != 1 || d.height != 1 || d.empty() || array_len(d) > max) {
    int log2 = 0;
    while ((1LL << log2) < max) ++log2;
    throw Error(ErrorKind::Data, std::string(op) + ": expected a 1-row " +
                                     (type == PixelType::F32 ? "float" : "u32") +
                                     " array of 1 to 2^" + std::to_string(log2) +
                                     " elements, got " + d.str());
  }
  return d;
}
// The input array filled with uniform floats in [-1, 1), by index.
inline void fill_uniform_pm1(uint64_t seed, std::vector<HostImage>& imgs) {
  float* x = imgs[0].view<float>().row(0);
  const long long n = array_len(imgs[0].desc());
  for (long long i = 0; i < n; ++i) x[i] = uniform_pm1(seed, uint64_t(i));
}

}  // namespace lab::ops
