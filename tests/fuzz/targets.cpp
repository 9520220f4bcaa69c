#include "targets.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "check.h"
#include "exercise_file.h"
#include "explain.h"
#include "frame_source.h"
#include "image_header.h"
#include "image_source.h"
#include "live.h"
#include "memcheck_report.h"
#include "npy.h"
#include "output_file.h"
#include "presets.h"
#include "kernel_host.h"

namespace lab::fuzz {
namespace {

void require(bool ok, const std::string& what) {
  if (!ok) throw FuzzFailure(what);
}

// Refusing bad input is the expected outcome; `kinds` are the ones a reader documents. Its
// message must still be one line (the CLI prints it as one).
template <class F>
void refuses_cleanly(F&& f, std::initializer_list<ErrorKind> kinds) {
  try {
    f();
  } catch (const Error& e) {
    bool documented = false;
    for (ErrorKind k : kinds) documented |= e.kind() == k;
    require(documented, std::string("undocumented error kind for: ") + e.what());
    require(std::strchr(e.what(), '\n') == nullptr, std::string("multi-line error: ") + e.what());
  }
}

std::string text(const uint8_t* data, size_t size) {
  return std::string(reinterpret_cast<const char*>(data), size);
}

}  // namespace

void image(const uint8_t* data, size_t size) {
  io::LoadOptions opt;
  opt.max_pixels = 4'000'000;  // enough for every seed; keeps each run fast
  opt.accept_truncated = size % 2 == 1;
  refuses_cleanly(
      [&] {
        const HostImage img = io::decode_image("fuzz", data, size, opt);
        const ImageDesc& d = img.desc();
        require(d.type == PixelType::U8, "decoded image is not U8");
        require(d.channels == 1 || d.channels == 3 || d.channels == 4,
                "decoded image has " + std::to_string(d.channels) + " channels");
        require(d.width > 0 && d.height > 0 && size_t(d.width) * size_t(d.height) <= opt.max_pixels,
                "decoded image is " + d.str() + ", outside the cap");
      },
      {ErrorKind::Data, ErrorKind::Unavailable});
}

void image_header(const uint8_t* data, size_t size) {
  refuses_cleanly(
      [&] {
        const io::ImageHeader h = io::inspect_image("fuzz", data, size);
        require(h.format != io::ImageFormat::Unknown, "unknown format accepted");
        require(h.width >= 0 && h.height >= 0, "negative size in a header");
        require(h.truncated || (h.end <= size && h.end + h.trailing == size),
                "end marker outside the data");
        // Decoding is the expensive part: only small, whole images, and both must agree.
        if (h.truncated || uint64_t(h.width) * uint64_t(h.height) > 65536) return;
        io::LoadOptions opt;
        opt.max_pixels = 65536;
        HostImage img;
        try {
          img = io::decode_image("fuzz", data, size, opt);
        } catch (const Error& e) {
          // A decoder may refuse what the header reader let through, but not over its size.
          require(std::strstr(e.what(), "but its header says") == nullptr, e.what());
          return;
        }
        require(img.desc().width == h.width && img.desc().height == h.height,
                "header says " + std::to_string(h.width) + "x" + std::to_string(h.height) +
                    ", decoder gives " + img.desc().str());
      },
      {ErrorKind::Data, ErrorKind::Unavailable});
}

void npy(const uint8_t* data, size_t size) {
  refuses_cleanly(
      [&] {
        const HostImage img = io::decode_npy("fuzz", data, size);
        // The writer: its header and the same data must read back as the same image.
        std::string file = io::npy_header(img.desc());
        require(file.size() % 64 == 0, "npy header not padded to 64 bytes");
        const size_t bytes = img.desc().bytes();  // 0 for a (0, W) array: no data pointer
        if (bytes) file.append(reinterpret_cast<const char*>(img.bytes()), bytes);
        const HostImage back =
            io::decode_npy("fuzz", reinterpret_cast<const uint8_t*>(file.data()), file.size());
        require(back.desc() == img.desc(), "npy round trip changed the shape");
        require(bytes == 0 || std::memcmp(back.bytes(), img.bytes(), bytes) == 0,
                "npy round trip changed the data");
      },
      {ErrorKind::Data});
}

void preset(const uint8_t* data, size_t size) {
  // preset_from_json never throws: anything it cannot use is a warning and the fallback.
  const PresetLoad first = preset_from_json(text(data, size));
  require(first.warning.find('\n') == std::string::npos, "multi-line warning: " + first.warning);
  if (!first.warning.empty()) return;
  const std::string json = preset_to_json(first.pipeline);
  const PresetLoad again = preset_from_json(json);
  require(again.warning.empty(), "a preset the lab wrote is refused: " + again.warning);
  require(preset_to_json(again.pipeline) == json, "preset round trip changed the pipeline");
}

void live_options(const uint8_t* data, size_t size) {
  refuses_cleanly(
      [&] {
        const std::string source = text(data, size);
        const LiveOptions o = read_live_options(source, LiveOptions{});
        require(o.block.x >= 1 && o.block.y >= 1 && o.block.threads() <= 1024,
                "accepted block " + o.block.str());
        const LiveOptions back = read_live_options(with_live_options(source, o), LiveOptions{});
        require(back.block == o.block && back.px == o.px && back.rows == o.rows &&
                    back.fast_math == o.fast_math && back.max_regs == o.max_regs &&
                    back.line_info == o.line_info,
                "@lab line round trip changed the options");
      },
      {ErrorKind::Data});
}

void nvrtc_log(const uint8_t* data, size_t size) {
  const std::string log = text(data, size);
  for (const LiveDiagnostic& d : parse_nvrtc_log(log)) {
    require(d.line >= 0, "diagnostic at line " + std::to_string(d.line));
    require(d.message.find('\n') == std::string::npos, "diagnostic spans lines");
    // printable() writes a control byte as \xNN: at most four characters a byte of the log.
    require(d.message.size() <= 4 * log.size() + 32, "diagnostic longer than the log");
  }
}

void source_spec(const uint8_t* data, size_t size) {
  refuses_cleanly(
      [&] {
        const io::SourceSpec s = io::parse_source_spec(text(data, size));
        switch (s.kind) {
          case io::SourceSpec::Synthetic:
            require(s.width >= 1 && s.height >= 1 && s.width <= 16384 && s.height <= 16384,
                    "synthetic size " + std::to_string(s.width) + "x" + std::to_string(s.height));
            require(s.fps > 0 && s.fps <= 1000, "synthetic fps " + std::to_string(s.fps));
            break;
          case io::SourceSpec::Camera:
            require(s.camera >= 0 && s.camera <= 255, "camera " + std::to_string(s.camera));
            require(s.fps >= 0 && s.fps <= 1000 && !std::isnan(s.fps), "camera fps");
            require(s.width >= 0 && s.height >= 0, "camera size");
            break;
          case io::SourceSpec::GStreamer:
          case io::SourceSpec::Path:
            require(!s.text.empty(), "empty pipeline or path accepted");
            break;
        }
      },
      {ErrorKind::Usage});
}

void trial_wire(const uint8_t* data, size_t size) {
  if (size == 0) return;
  const std::string payload = text(data + 1, size - 1);
  refuses_cleanly(
      [&] {
        if (data[0] & 1) {
          const TrialReport r = decode_trial_report(payload);
          const TrialReport back = decode_trial_report(encode_trial_report(r));
          require(back.outcome == r.outcome && back.message == r.message &&
                      back.unwritten == r.unwritten && back.memcheck.size() == r.memcheck.size(),
                  "report round trip changed it");
        } else {
          const TrialRequest q = decode_trial_request(payload);
          require(q.frame.desc().empty() || q.frame.desc().bytes() <= payload.size(),
                  "a frame larger than its message");
          const TrialRequest back = decode_trial_request(encode_trial_request(q));
          require(back.build.source == q.build.source && back.pipeline == q.pipeline &&
                      back.frame.desc() == q.frame.desc() && back.lab_seed == q.lab_seed,
                  "request round trip changed it");
        }
      },
      {ErrorKind::Data});
}

void memcheck_log(const uint8_t* data, size_t size) {
  const std::string log = text(data, size);
  const auto findings = parse_memcheck_log(log);
  require(findings.size() <= 10, "more findings than the limit");
  for (const MemcheckFinding& f : findings) {
    require(f.line >= 0, "finding at line " + std::to_string(f.line));
    require(f.text.find('\n') == std::string::npos, "finding spans lines");
    require(f.text.size() <= 4 * 240 + 3, "finding longer than its cut");
  }
}

void output_writer(const uint8_t* data, size_t size) {
  namespace fs = std::filesystem;
  static const fs::path root = [] {
    const fs::path d = fs::temp_directory_path() / ("lab_fuzz_out_" + std::to_string(::getpid()));
    fs::create_directories(d);
    return d;
  }();
  const fs::path dir = root / "w";
  std::error_code ec;
  fs::remove_all(dir, ec);
  fs::create_directories(dir);
  auto read = [](const fs::path& p) {
    std::ifstream f(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), {});
  };
  auto entries = [](const fs::path& d) {
    size_t n = 0;
    for (fs::directory_iterator it(d), end; it != end; ++it) ++n;
    return n;
  };
  if (size == 0) return;
  const bool as_set = data[0] & 1;
  const size_t pieces = 1 + data[0] % 7;
  // The body split into `pieces` writes (or files) at places the data picks.
  std::vector<std::string> parts;
  size_t pos = 1;
  for (size_t k = 0; k < pieces && pos <= size; ++k) {
    const size_t len = k + 1 == pieces ? size - pos : std::min(size - pos, size_t(data[pos - 1]));
    parts.push_back(text(data + pos, len));
    pos += len;
  }
  if (!as_set) {
    const fs::path out = dir / "out.bin";
    OutputFile f(out.string());
    std::string all;
    for (const std::string& p : parts) f.write(p), all += p;
    f.commit();
    require(read(out) == all, "a written file differs from its bytes");
    require(entries(dir) == 1, "a temporary was left beside the file");
    return;
  }
  // A set; a part that starts with '!' makes its member's name collide with a folder, so the
  // set must fail whole.
  const fs::path folder = dir / "set";
  bool fails = false;
  try {
    OutputSet set(folder.string());
    for (size_t k = 0; k < parts.size(); ++k) {
      const std::string name = "m" + std::to_string(k) + ".npy";
      if (!parts[k].empty() && parts[k][0] == '!') {
        fails = true;
        fs::create_directories(dir / "blocker");
        set.add("../blocker").write(parts[k]);  // not a plain file name: refused
      }
      set.add(name).write(parts[k]);
    }
    set.commit();
  } catch (const Error&) {
    require(fails, "a set that should succeed failed");
    require(!fs::exists(folder), "a failed set left its folder");
    require(entries(dir) == 1, "a failed set left a temporary");  // the blocker only
    return;
  }
  require(!fails, "a set with an invalid member succeeded");
  for (size_t k = 0; k < parts.size(); ++k)
    require(read(folder / ("m" + std::to_string(k) + ".npy")) == parts[k],
            "a member of a set differs from its bytes");
  require(entries(folder) == parts.size(), "a set holds more files than it wrote");
  require(entries(dir) == 1, "a temporary was left beside the set");
}

void exercise(const uint8_t* data, size_t size) {
  if (size > 0 && data[0] == 'F') {
    refuses_cleanly(
        [&] {
          for (const auto& [a, b] : facts_from_json(text(data + 1, size - 1))) {
            const Explanation e = explain(a, b);
            (void)explanation_text(e);
            require(explanation_json({e}).size() > 2, "an explanation wrote no JSON");
          }
        },
        {ErrorKind::Data});
    return;
  }
  refuses_cleanly(
      [&] {
        const Exercise e = parse_exercise(text(data, size), "fuzz.lab");
        const Exercise again = parse_exercise(exercise_text(e), "again.lab");
        require(exercise_text(again) == exercise_text(e), "exercise round trip changed it");
      },
      {ErrorKind::Data});
}

const Target* targets(size_t* count) {
  static const Target all[] = {
      {"image", image},
      {"image_header", image_header},
      {"npy", npy},
      {"preset", preset},
      {"live_options", live_options},
      {"nvrtc_log", nvrtc_log},
      {"source_spec", source_spec},
      {"trial_wire", trial_wire},
      {"memcheck_log", memcheck_log},
      {"output_writer", output_writer},
      {"exercise", exercise},
  };
  *count = sizeof(all) / sizeof(all[0]);
  return all;
}

}  // namespace lab::fuzz
