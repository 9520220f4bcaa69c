#!/usr/bin/env bash
# Runs every libFuzzer target of the sanitizer build (build-sanitize/tests/fuzz_*) from a fixed
# seed on a copy of its corpus (tests/fuzz/corpus/<target>/: the seeds and the reproducers).
#   fuzz.sh ci          a fixed number of inputs per target (about 7 s each here): the same
#                       inputs on every machine, so CI fails only where a developer's run fails
#                       too (a time budget made CI's run differ from every run before it)
#   fuzz.sh SECONDS     SECONDS in all, shared evenly: exploration, different on every machine
# A finding leaves its
# reproducer in build-sanitize/fuzz-findings/<target>/ and fails the run; add it to the corpus
# (the suite replays it from then on) once it is fixed. New inputs the fuzzer finds stay in the
# build folder; `./scripts/fuzz.sh 600 --merge` folds the interesting ones into the corpus.
set -euo pipefail
cd "$(dirname "$0")/.."
budget=${1:-ci}
merge=${2:-}
build=build-sanitize
targets=(image image_header npy preset live_options nvrtc_log source_spec trial_wire memcheck_log
  output_writer exercise)
# Inputs per target for `ci`, from each target's speed in the sanitizer build on 2 cores.
declare -A ci_runs=([image]=5000 [image_header]=20000 [npy]=150000 [preset]=40000
  [live_options]=100000 [nvrtc_log]=50000 [source_spec]=300000 [trial_wire]=150000
  [memcheck_log]=40000 [output_writer]=2000 [exercise]=40000)
if [ "$budget" != ci ]; then
  each=$((budget / ${#targets[@]}))
  ((each >= 1)) || each=1
fi
status=0
for t in "${targets[@]}"; do
  exe=$build/tests/fuzz_$t
  if [ ! -x "$exe" ]; then
    echo "fuzz: $exe is missing: build the preset 'sanitize' first (scripts/sanitize.sh)" >&2
    exit 69
  fi
  work=$build/fuzz-work/$t
  findings=$build/fuzz-findings/$t
  mkdir -p "$work" "$findings"
  cp -n tests/fuzz/corpus/$t/* "$work"/ 2>/dev/null || true
  # -seed: the same mutations every run; -timeout: an input that takes 10 s is a hang;
  # -rss_limit_mb: a header that makes us allocate gigabytes is a finding.
  if [ "$budget" = ci ]; then limit=(-runs="${ci_runs[$t]}"); else limit=(-max_total_time="$each"); fi
  if ! "$exe" -seed=1 "${limit[@]}" -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="$findings/" -print_final_stats=1 "$work" 2>"$build/fuzz-$t.log"; then
    echo "fuzz: $t found a problem; its reproducer is in $findings/ (log: $build/fuzz-$t.log):" >&2
    grep -E "ERROR|fuzz target|SUMMARY|Test unit written" "$build/fuzz-$t.log" | head -20 >&2
    status=1
    continue
  fi
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$build/fuzz-$t.log")
  echo "fuzz: $t: ${runs:-?} inputs, no finding"
  if [ "$merge" = --merge ]; then
    "$exe" -merge=1 tests/fuzz/corpus/$t "$work" 2>>"$build/fuzz-$t.log"
  fi
done
exit $status
