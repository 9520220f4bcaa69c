// Fuzz targets: the lab's readers of outside data, each a function of a byte string, so that
// libFuzzer (tests/fuzz/fuzz_main.cpp, clang's -fsanitize=fuzzer) and the plain test suite
// (tests/test_fuzz.cpp replays tests/fuzz/corpus/) call the same code.
//
// A target returns normally for any input, valid or not: refusing bad input with lab::Error is
// the expected outcome. It throws FuzzFailure when the code under test broke a promise (a decoded
// image of a shape it cannot have, a round trip that changes the data); anything else that
// escapes (another exception, a crash, a sanitizer report, a hang) is a finding too.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace lab::fuzz {

struct FuzzFailure : std::logic_error {
  using std::logic_error::logic_error;
};

// io::decode_image (PNG, JPEG, BMP, PNM, TIFF, WebP told by signature), capped at 4 Mpx.
void image(const uint8_t* data, size_t size);
// io::inspect_image (the header and structure checks run before any decoder), and for a small
// image it accepts whole, io::decode_image: both must agree on the size.
void image_header(const uint8_t* data, size_t size);
// io::decode_npy, and for what it accepts, npy_header + data decoded again (the writer).
void npy(const uint8_t* data, size_t size);
// preset_from_json, and for a preset it uses as it is, the JSON it writes read back.
void preset(const uint8_t* data, size_t size);
// read_live_options (the `// @lab` line), and what it accepts written and read back.
void live_options(const uint8_t* data, size_t size);
// parse_nvrtc_log.
void nvrtc_log(const uint8_t* data, size_t size);
// io::parse_source_spec (synthetic:WxH@FPS, camera:N:WxH@FPS, gst:...).
void source_spec(const uint8_t* data, size_t size);
// The trial protocol's decoders (trial.h: a child's report, the lab's request; the first byte
// picks which), and for what decodes, its encoding decoded again.
void trial_wire(const uint8_t* data, size_t size);
// parse_memcheck_log (compute-sanitizer's report).
void memcheck_log(const uint8_t* data, size_t size);
// The output writer (output_file.h): the bytes written as one file or as a set of files (the
// first byte picks), in pieces the data chooses, into a scratch folder; what lands there must be
// exactly what was written, with no temporary left, and a set either whole or absent.
void output_writer(const uint8_t* data, size_t size);

// parse_exercise (an exercise file), and for what it accepts, exercise_text parsed again to the
// same exercise; the first byte 'F' feeds the rest to facts_from_json (explain's recorded facts)
// instead, and every pair it accepts is explained without throwing.
void exercise(const uint8_t* data, size_t size);

struct Target {
  const char* name;  // also the corpus folder: tests/fuzz/corpus/<name>/
  void (*run)(const uint8_t*, size_t);
};
// All of the above, in this order.
const Target* targets(size_t* count);

}  // namespace lab::fuzz
