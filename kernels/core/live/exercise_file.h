// An exercise file (.lab, JSON): the stage a learner's kernel replaces, a starter kernel, the
// lesson, the target (a ladder step to beat, or a percent of the ceiling measured in the same
// run) and a salt for the checks. `kernel-lab exercise` makes, submits and grades them
// (app/exercise.h); the GUI opens one in the Live kernel panel (`gui --exercise FILE`).
#pragma once

#include <cmath>
#include <optional>
#include <string>

namespace lab {

struct Exercise {
  std::string stage;        // the stage the learner's kernel replaces
  std::string title;        // one line
  std::string lesson;       // what to learn, a paragraph (the GUI shows it beside the editor)
  std::string start;        // the built-in step the starter is a copy of
  std::string starter;      // the starter kernel (a live-kernel source)
  std::string target_step;  // a built-in step to beat ...
  double target_pct = NAN;  // ... or a percent of the ceiling to reach
  std::string salt;         // hex; with the nonce, seeds the checks' sizes and values
  std::string bench_input = "default";  // the timed input ("default": bench's real image)
  std::string bench_size = "1280x736";
  // The target in words: "beat v4_rows" or "reach 60 % of the ceiling".
  std::string target_text() const;
};

// The file's JSON; parse_exercise throws Error(Data) for a file that is not an exercise.
std::string exercise_text(const Exercise& e);
Exercise parse_exercise(const std::string& text, const std::string& path);
// An exercise file read and parsed: Error(NoInput) when it cannot be opened, Error(Data) when it
// is over 16 MiB or not an exercise. `bytes` receives the file (its hash names the exercise).
Exercise read_exercise(const std::string& path, std::string* bytes = nullptr);
// A file of at most 16 MiB (an exercise, a result): Error(NoInput) when it cannot be opened,
// Error(Data) past the limit; `what` names it in the message.
std::string read_small_file(const std::string& path, const char* what);
// Why `stage` cannot be an exercise's stage ("" when it can): not an op, no live kernels, or not
// a stage of the keypoint pipeline.
std::string exercise_stage_refusal(const std::string& stage);
// Where a submission failed first, read from its result (the JSON `exercise submit -o` writes):
// the first size class that failed, or the exercise's bench size when only the timed runs did.
// nullopt when the result is correct, is another exercise's or another kernel's (its hashes are
// not `exercise_sha256` and `kernel_sha256`) or is not a result at all. The GUI shows the
// learner's kernel at that size.
struct ExerciseFailure {
  std::string where;  // as the submission printed it: "odd 33x17"
  int width = 0, height = 0;
};
std::optional<ExerciseFailure> first_failure(const std::string& result_text, const Exercise& e,
                                             const std::string& exercise_sha256,
                                             const std::string& kernel_sha256);
// SHA-256 of bytes, lower-case hex (OpenSSL's libcrypto).
std::string sha256_hex(const std::string& bytes);
bool is_hex(const std::string& s);

}  // namespace lab
