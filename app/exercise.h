// Exercises a teacher hands out (the file: exercise_file.h):
//
//   exercise make STAGE --start V --target V|N%   a file from the built-in ladder
//   exercise submit FILE.lab KERNEL.cu           checks at every size class, times, places,
//   explains exercise grade FILE.lab RESULT.json...       one table; results of another exercise
//   refused
//
// The checks cannot be gamed from the kernel's side: sizes and pixel values are drawn at submit
// time from the salt and a fresh nonce (written into the result, so a teacher can replay them),
// outputs are poisoned before every run, NaN and Inf count as errors unless the reference holds
// them too, the timed runs' own output is checked, and the time is the lab's (CUDA events around
// the launch, by the lab's launch recorder in the kernel host, where the kernel runs). Each size
// runs first as a trial in the host's child, so a kernel that faults at 1x1 is a failed check,
// not a crash; one that fails on a later run is a failed check too.
#pragma once

#include <string>
#include <vector>

#include "exercise_file.h"

namespace lab::app {

struct ExerciseMakeOptions {
  std::string stage, start, target, title, lesson, out;
};
struct ExerciseSubmitOptions {
  std::string exercise, kernel, out;  // out: the result file (JSON); empty: <kernel>.result.json
  int reps = 100;
  bool counters = true;
  std::string nonce;  // replay a result's draw (hex); empty: a fresh one
};
struct ExerciseGradeOptions {
  std::string exercise;
  std::vector<std::string> results;
  bool csv = false;
  std::string out;
};

int cmd_exercise_make(const ExerciseMakeOptions& o);
int cmd_exercise_submit(const ExerciseSubmitOptions& o);
int cmd_exercise_grade(const ExerciseGradeOptions& o);

}  // namespace lab::app
