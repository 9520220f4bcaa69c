#!/usr/bin/env bash
# The main command: installs what is missing, builds, and runs Kernel Lab. Arguments go to
# kernel-lab. With none it opens the GUI on the built-in synthetic input; on a machine with no
# display it runs `check` instead (every kernel, variant, block and math mode against its CPU
# reference, or the references alone without a GPU).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
cmake --preset default -DLAB_WITH_GUI="$LAB_WITH_GUI" >/dev/null
cmake --build --preset default
if [ $# -eq 0 ]; then
  if [ "$LAB_WITH_GUI" = OFF ]; then
    echo "lab.sh: built without the GUI (see above): running 'kernel-lab check'" >&2
    set -- check
  elif [ -n "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ]; then
    set -- gui
  else
    echo "lab.sh: no display: running 'kernel-lab check' (the GUI runs headless with: build/kernel-lab gui --headless --frames 60 --screenshot out.png)" >&2
    set -- check
  fi
fi
exec build/kernel-lab "$@"
