#!/usr/bin/env bash
# Runs on the GPU machine from a carried bundle (scripts/build-gpu-bundle.sh): the GPU tests,
# `check` for every stage x variant x block x math, compute-sanitizer on `check` over inputs
# that reach every code path (gray, BGR, BGRA, 1x1, odd sizes), and, unless LAB_PROOF_BENCH=0,
# `bench` at 1280x736 and 3840x2160, and the PyTorch comparison (scripts/torch_pipeline.py)
# where python3 has torch. Logs go to $OUT (or ./out).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-$here/out}
mkdir -p "$out"
export LAB_DATA_DIR=$here/data LAB_CLI=$here/bin/kernel-lab
# The GUI's libraries (bundle/lib) and the GL loader packages carried in .gl (shared/GPU.md).
export LD_LIBRARY_PATH=$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
if ls "$here"/../.gl/*.deb >/dev/null 2>&1; then
  for f in "$here"/../.gl/*.deb; do dpkg -x "$f" /; done
  ldconfig
  for v in /usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json /usr/share/glvnd/egl_vendor.d/10_nvidia.json; do
    [ -f "$v" ] && export __EGL_VENDOR_LIBRARY_FILENAMES=$v && break
  done
fi
lab=$here/bin/kernel-lab
san=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
step() { echo "=== $*"; "$@"; echo "=== exit $?"; }
{
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
  step "$here/bin/lab_tests" --test-suite=gpu
  step "$here/bin/lab_tests" --test-suite=cpu
  step "$lab" check
  step "$lab" check --input "$here/data/chessboard.png" --size 3840x2160
} 2>&1 | tee "$out/tests.log"
{  # the GUI headless on the GPU (EGL + interop): a screenshot, and the whole-frame timings
  step "$lab" gui --headless --frames 300 --window 1600x900 --input synthetic:1920x1080@1000 --screenshot "$out/gui-gpu.png"
  step "$lab" gui --headless --frames 300 --window 1600x900 --graph --input synthetic:1920x1080@1000
  step "$lab" gui --headless --frames 300 --window 1600x900 --input "$here/data/box_in_scene.png"
  step "$lab" gui --headless --frames 3000 --free-run --window 1600x900 --input synthetic:1920x1080@1000
  step "$lab" gui --headless --frames 3000 --free-run --graph --window 1600x900 --input synthetic:1920x1080@1000
} 2>&1 | tee "$out/gui.log"
{
  inputs=("synthetic:640x480 --size 320x184" "synthetic:1x1 --size 1x1" "synthetic:17x13 --size 17x13"
          "$here/data/brick.png --size 257x131" "$here/data/chessboard.png --size 333x211")
  for tool in memcheck initcheck; do
    for in in "${inputs[@]}"; do
      # shellcheck disable=SC2086
      step "$san" --tool $tool --error-exitcode 99 "$lab" check --input $in
    done
  done
  step "$san" --tool racecheck --error-exitcode 99 "$lab" check --input synthetic:640x480 --size 320x184
  step "$san" --tool racecheck --error-exitcode 99 "$lab" check --input "$here/data/brick.png" --size 257x131 --stage nms --stage topk --stage sample --stage l2norm
  step "$san" --tool synccheck --error-exitcode 99 "$lab" check --input "$here/data/brick.png" --size 257x131 --stage topk --stage l2norm
  step "$san" --tool memcheck --error-exitcode 99 "$lab" run --graph --frames 3 --input "$here/data/brick.png" --size 257x131
} 2>&1 | tee "$out/sanitizer.log" | grep -E "^===|ERROR SUMMARY|RACECHECK SUMMARY|configurations"
[ "${LAB_PROOF_BENCH:-1}" = 0 ] && exit 0
{
  step "$lab" bench --sweep-variants --input synthetic:1920x1080 --size 1280x736 --reps 200
  step "$lab" bench --sweep-variants --input synthetic:3840x2160 --size 3840x2160 --reps 200
  step "$lab" bench --stage letterbox --sweep-variants --input synthetic:3840x2160 --reps 200
  step "$lab" bench --sweep-variants --sweep-blocks --sweep-math --input synthetic:1920x1080 --size 1280x736 --csv --out "$out/sweep-1280x736.csv"
  step "$lab" bench --sweep-variants --sweep-blocks --input synthetic:3840x2160 --size 3840x2160 --reps 50 --csv --out "$out/sweep-3840x2160.csv"
} 2>&1 | tee "$out/bench.log"
if python3 -c "import torch" 2>/dev/null; then
  step python3 "$here/torch_pipeline.py" --lab "$lab" --topk-input "$here/data/graf1.png" 2>&1 | tee "$out/torch.log"
fi
