#!/usr/bin/env bash
# The test command: installs what is missing, builds, runs every test (ctest). GPU tests report
# "Skipped" on a machine without a CUDA device.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
cmake --preset default -DLAB_WITH_GUI="$LAB_WITH_GUI"
cmake --build --preset default
ctest --preset default "$@"
