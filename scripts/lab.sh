#!/usr/bin/env bash
# The main command: installs what is missing, builds, and runs Kernel Lab. Arguments go to
# kernel-lab; with none it runs `check` on the built-in synthetic input (every kernel, variant,
# block and math mode against its CPU reference, or the references alone without a GPU).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
cmake --preset default >/dev/null
cmake --build --preset default
if [ $# -eq 0 ]; then set -- check; fi
exec build/kernel-lab "$@"
