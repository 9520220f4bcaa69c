#!/usr/bin/env bash
# ctest "install": installs the build into a temporary prefix, then runs the installed lab from
# there, away from the source and build trees: `list`, `check` on a generated input, and, with
# the GUI, a headless screenshot. Usage: install_test.sh BUILD_DIR WITH_GUI
set -euo pipefail
build=$1
gui=$2
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
lab=$prefix/bin/kernel-lab
test -x "$lab"
test -f "$prefix/share/kernel-lab/examples/blur_smem.cu"
test -f "$prefix/share/doc/kernel_lab/README.md"
cd "$prefix"  # nothing relative to the source tree
"$lab" list >list.txt  # (not piped into grep -q: its early exit would fail the pipe)
grep -q "^blur: " list.txt
grep -q "live-kernel examples: $prefix/share/kernel-lab/examples" list.txt
grep -q "test images (bench's default input): $prefix/share/kernel-lab/data" list.txt
test -f "$prefix/share/kernel-lab/data/box_in_scene.png"
"$lab" check --device cpu --input synthetic:64x48 --size 64x48 >/dev/null
if [ "$gui" = ON ]; then
  "$lab" gui --headless --device cpu --frames 3 --window 320x240 --screenshot "$prefix/shot.png" >/dev/null
  test -s "$prefix/shot.png"
fi
echo "install: ok ($prefix)"
