#!/usr/bin/env bash
# CI's second build (called by .ci/run after the test command): the host C++ under
# AddressSanitizer and UndefinedBehaviorSanitizer, built with clang (preset "sanitize",
# build-sanitize/), its CPU suite (any report, and any leak, fails it), then a short
# deterministic run of every fuzz target (scripts/fuzz.sh ci: a fixed number of inputs each).
# Installs clang and its sanitizer runtime where they are missing.
set -euo pipefail
cd "$(dirname "$0")/.."
export LAB_SETUP_SANITIZERS=1
source scripts/env.sh
cmake --preset sanitize -DLAB_WITH_GUI="$LAB_WITH_GUI"
cmake --build --preset sanitize
ctest --preset sanitize "$@"
exec ./scripts/fuzz.sh "${LAB_FUZZ_SECONDS:-ci}"
