#!/usr/bin/env bash
# Runs on the GPU machine from a carried bundle (scripts/build-gpu-bundle.sh): the GPU tests,
# `check` for every stage x variant x block x math, compute-sanitizer on `check` over inputs
# that reach every code path (gray, BGR, BGRA, 1x1, odd sizes), and, unless LAB_PROOF_BENCH=0,
# `bench` at 1280x736 and 3840x2160, and the PyTorch comparison (scripts/torch_pipeline.py)
# where python3 has torch; then the playgrounds: check, racecheck and `bench --lab` at the issue's
# sizes; then live kernels: copies of built-in kernels timed against them, compile-to-running in
# the GUI, a bad kernel under compute-sanitizer; "measure": the GUI's timings against bench's on
# one input, the first launch without the queue-ahead delay, hardware counters against ncu
# (scripts/compare_counters.py). LAB_PROOF_SECTIONS picks sections (default:
# "tests gui sanitizer bench topk torch upload labs live trial measure toy"; "gputests" runs the
# GPU suite alone, "assets" renders every picture in assets/ into $OUT/assets). "topk": the exact top-K on real images, checked, sanitized and timed. "trial": live kernels that fault, hang or pass and fault later, against the
# trial child and the GUI's recovery, timed.
# Logs go to $OUT (or ./out).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-$here/out}
mkdir -p "$out"
# The binaries travel compressed; the test data, examples and corpus are the repository's.
[ -d "$here/bin" ] || tar -xJf "$here/bin.tar.xz" -C "$here"
repo=$(cd "$here/.." && pwd)
# The lab finds its test images beside itself (<bin>/../tests/data): bench's default input.
ln -sfn "$repo/tests" "$here/tests"
export LAB_DATA_DIR=$repo/tests/data LAB_CLI=$here/bin/kernel-lab
export LAB_EXAMPLES_DIR=$repo/examples/kernels LAB_FUZZ_CORPUS=$repo/tests/fuzz/corpus
# The GUI's libraries (bundle/lib) and the GL loader packages carried in .gl (shared/GPU.md).
# cuBLAS (the matmul playground's ceiling) and NVRTC (live kernels) from the CUDA toolkit.
export LD_LIBRARY_PATH=$here/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
if ls "$here"/../.gl/*.deb >/dev/null 2>&1; then
  for f in "$here"/../.gl/*.deb; do dpkg -x "$f" /; done
  ldconfig
  for v in /usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json /usr/share/glvnd/egl_vendor.d/10_nvidia.json; do
    [ -f "$v" ] && export __EGL_VENDOR_LIBRARY_FILENAMES=$v && break
  done
fi
lab=$here/bin/kernel-lab
san=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
step() {
  local t0=$SECONDS
  echo "=== $*"
  "$@"
  echo "=== exit $? ($((SECONDS - t0)) s)"
}
sections=" ${LAB_PROOF_SECTIONS:-tests gui sanitizer bench topk torch upload labs live trial measure toy} "
uname -r  # Firecracker (-fc-...-gpu): counters and compute-sanitizer work; gVisor (4.4.0): not
want() { [[ $sections == *" $1 "* ]]; }
[ "${LAB_PROOF_BENCH:-1}" = 0 ] && sections=${sections/ bench / }
want tests && {
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
  step "$here/bin/lab_tests" --test-suite=gpu
  step "$here/bin/lab_tests" --test-suite=cpu
  step "$lab" check
  step "$lab" check --input "$LAB_DATA_DIR/chessboard.png" --size 3840x2160
} 2>&1 | tee "$out/tests.log"
want toy && {  # adding an op is one file and one line: the toy op, checked and benched on the GPU
  step "$here/toy_op_test.sh" "$here/bin/kernel-lab-toy"
  step "$here/bin/kernel-lab-toy" check --lab toy --size 1000
} 2>&1 | tee "$out/toy.log"
want teach && {  # the teaching views (issue 17): screenshots and scripted figures, GUI first
  step "$lab" gui --headless --frames 40 --window 1600x900 --lab matmul --size 2048x2048x2048 --ladder matmul --screenshot "$out/teach-ladder.png"
  step "$lab" gui --headless --frames 40 --window 1600x900 --lab matmul --size 1024x1024x1024 --ladder matmul --counters --ladder-view roofline --screenshot "$out/teach-roofline.png"
  step "$lab" gui --headless --frames 40 --window 1280x720 --input "$LAB_DATA_DIR/box_in_scene.png" --ladder blur --counters --ladder-view table
  step "$lab" gui --headless --frames 40 --window 1600x900 --lab branch --size 2^22 --ab branch=fast
  step "$lab" gui --headless --frames 40 --window 1600x900 --input "$LAB_DATA_DIR/box_in_scene.png" --ab harris=fast --screenshot "$out/teach-ab.png"
  step "$lab" gui --headless --frames 40 --window 1600x900 --lab math --ladder math --ladder-view chart --screenshot "$out/teach-math.png"
  step "$lab" gui --headless --frames 40 --window 1280x720 --input "$LAB_DATA_DIR/box_in_scene.png" --screenshot "$out/teach-1280x720.png"
  step "$lab" bench --lab math --sweep-math --reps 50
  step "$lab" bench --lab math --size 2^22 --reps 50
  step "$lab" check --lab math
  step "$san" --tool memcheck --error-exitcode 99 "$lab" check --lab math --size 4099 --quick
  step "$san" --tool initcheck --error-exitcode 99 "$lab" check --lab math --size 4099 --quick
  step "$lab" gui --headless --frames 200 --window 1600x900 --lab math --variant math=v1_double_literal --code math:sass --screenshot "$out/teach-sass.png"
  step "$lab" gui --headless --frames 60 --window 1600x900 --lab branch --code branch --variant branch=v1_divergent --screenshot "$out/teach-ptx.png"
  step "$lab" asm math=v1_double_literal --sass --mix
  step "$lab" asm math=v2_float_literal --sass --mix
  step "$lab" asm math=v3_libm --sass --diff --mix
  step "$lab" asm branch=v1_divergent --sass --diff --mix
} 2>&1 | tee "$out/teach.log"
want assets && {  # every picture in assets/, from this build (benchmarks/run.sh runs this section)
  a=$out/assets img=$LAB_DATA_DIR/box_in_scene.png ex=$LAB_EXAMPLES_DIR
  mkdir -p "$a"
  shot() { local name=$1; shift; step timeout 120 "$lab" gui --headless --window 1600x900 "$@" --screenshot "$a/$name.png"; }
  shot screenshot-gpu --frames 120 --preset "$repo/examples/presets/fastest.json" --input "$img"
  shot screenshot-cpu --frames 5 --device cpu --input "$img"
  shot screenshot-counters --frames 40 --input "$img" --counters
  shot screenshot-ladder --frames 40 --lab matmul --size 2048x2048x2048 --ladder matmul
  shot screenshot-roofline --frames 40 --lab matmul --size 1024x1024x1024 --ladder matmul --counters --ladder-view roofline
  shot screenshot-ab --frames 40 --input "$img" --ab harris=fast
  shot screenshot-sass --frames 200 --lab math --variant math=v1_double_literal --code math:sass
  shot screenshot-tiles --frames 20 --lab matmul --size 2048x2048x2048 --variant matmul=v7_warptile
  shot screenshot-live --frames 60 --pipeline harris --kernel-file "$ex/blur_smem.cu" --replace blur
  shot screenshot-host-fault --frames 60 --pipeline harris --input "$LAB_DATA_DIR/dock.jpg" --kernel-file "$ex/fault_later.cu" --replace blur
  shot screenshot-why --frames 60 --input "$LAB_DATA_DIR/dock.jpg" --ladder blur --ladder-view why
  shot screenshot-exercise --frames 20 --input "$LAB_DATA_DIR/dock.jpg" --exercise "$repo/examples/exercises/blur.lab"
  # A submission that fails one pixel past a block (its last column unwritten), then the exercise
  # reopened: the planes at the size that failed, the error in the Viewport.
  x=$(mktemp -d) && mkdir -p "$x/kernel-lab/kernels" && k=$x/kernel-lab/kernels/exercise-blur.cu
  python3 - "$ex/blur_smem.cu" >"$k" <<'PY'
import sys
guard = "  if (!inside(out[0], x, y)) return;"
print(open(sys.argv[1]).read().replace(guard, "  if (!inside(out[0], x, y) ||\n"
      "      (out[0].width > 1 && out[0].width % LAB_BLOCK_X == 1 && x == out[0].width - 1))\n"
      "    return;"))
PY
  step "$lab" exercise submit "$repo/examples/exercises/blur.lab" "$k" --reps 20 --no-counters -o "$k.result.json"
  XDG_DATA_HOME=$x shot screenshot-exercise-failed --frames 60 --input "$LAB_DATA_DIR/dock.jpg" --exercise "$repo/examples/exercises/blur.lab"
} 2>&1 | tee "$out/assets.log" | grep -E "^===|gui: frame|error"
want gputests && {  # the GPU suite alone (the tests section runs it with the rest)
  step "$here/bin/lab_tests" --test-suite=gpu
} 2>&1 | tee "$out/gputests.log" | grep -E "^===|test cases|assertions|ERROR|FAILED"
want gui && {  # the GUI headless on the GPU (EGL + interop): a screenshot, and the whole-frame timings
  step "$lab" gui --headless --frames 300 --window 1600x900 --input synthetic:1920x1080@1000 --screenshot "$out/gui-gpu.png"
  step "$lab" gui --headless --frames 300 --window 1600x900 --graph --input synthetic:1920x1080@1000
  step "$lab" gui --headless --frames 300 --window 1600x900 --input "$LAB_DATA_DIR/box_in_scene.png"
  step "$lab" gui --headless --frames 3000 --free-run --window 1600x900 --input synthetic:1920x1080@1000
  step "$lab" gui --headless --frames 3000 --free-run --graph --window 1600x900 --input synthetic:1920x1080@1000
} 2>&1 | tee "$out/gui.log"
want sanitizer && {
  inputs=("synthetic:640x480 --size 320x184" "synthetic:1x1 --size 1x1" "synthetic:17x13 --size 17x13"
          "$LAB_DATA_DIR/brick.png --size 257x131" "$LAB_DATA_DIR/chessboard.png --size 333x211")
  for tool in memcheck initcheck; do
    for in in "${inputs[@]}"; do
      # shellcheck disable=SC2086
      step "$san" --tool $tool --error-exitcode 99 "$lab" check --input $in
    done
  done
  step "$san" --tool racecheck --error-exitcode 99 "$lab" check --input synthetic:640x480 --size 320x184
  step "$san" --tool racecheck --error-exitcode 99 "$lab" check --input "$LAB_DATA_DIR/brick.png" --size 257x131 --stage nms --stage topk --stage sample --stage l2norm
  step "$san" --tool synccheck --error-exitcode 99 "$lab" check --input "$LAB_DATA_DIR/brick.png" --size 257x131 --stage topk --stage l2norm
  step "$san" --tool memcheck --error-exitcode 99 "$lab" run --graph --frames 3 --input "$LAB_DATA_DIR/brick.png" --size 257x131
} 2>&1 | tee "$out/sanitizer.log" | grep -E "^===|ERROR SUMMARY|RACECHECK SUMMARY|configurations"
want bench && {  # real images first (bench's default is box_in_scene.png), the synthetic scene beside
  step "$lab" bench --reps 200
  for img in graf1.png astronaut.png coffee.png; do
    step "$lab" bench --input "$LAB_DATA_DIR/$img" --size 1280x736 --reps 200
  done
  step "$lab" bench --input synthetic:1920x1080 --size 1280x736 --reps 200
  for img in graf1.png chessboard.png; do
    step "$lab" bench --input "$LAB_DATA_DIR/$img" --size 3840x2160 --reps 200
  done
  step "$lab" bench --input synthetic:3840x2160 --size 3840x2160 --reps 200
  step "$lab" bench --stage topk --sweep-variants --input "$LAB_DATA_DIR/graf1.png" --size 1280x736 --reps 200
  step "$lab" bench --stage topk --sweep-variants --input synthetic:1920x1080 --size 1280x736 --reps 200
  step "$lab" bench --sweep-variants --sweep-blocks --sweep-math --input "$LAB_DATA_DIR/graf1.png" --size 1280x736 --csv --out "$out/sweep-1280x736.csv"
  step "$lab" bench --sweep-variants --sweep-blocks --input "$LAB_DATA_DIR/graf1.png" --size 3840x2160 --reps 50 --csv --out "$out/sweep-3840x2160.csv"
} 2>&1 | tee "$out/bench.log"
want topk && {  # the exact top-K (topk from the map, detect from the fused front) on real images: checked, under every sanitizer tool, timed
  for img in box_in_scene.png graf1.png chessboard.png astronaut.png; do
    step "$lab" check --input "$LAB_DATA_DIR/$img" --stage topk --stage detect
  done
  step "$lab" check --input "$LAB_DATA_DIR/graf1.png" --size 3840x2160 --stage topk --stage detect --quick
  for tool in memcheck racecheck initcheck synccheck; do
    step "$san" --tool $tool --error-exitcode 99 "$lab" check --input "$LAB_DATA_DIR/graf1.png" --size 640x368 --stage topk --stage detect --quick
  done
  # the select's refinement (plateaus, ties over its buffer) and K past its cap
  step "$san" --tool memcheck --error-exitcode 99 "$here/bin/lab_tests" --test-suite=gpu -tc="topk at scale*"
  for v in topk=v4_compact_select topk=v5_in_flight topk=v6_shared_select detect=v1_listed detect=v2_counted_rank detect=v3_selected_once detect=v4_split_overlapped; do
    step "$san" --tool memcheck --error-exitcode 99 "$lab" run --graph --frames 3 --input "$LAB_DATA_DIR/brick.png" --variant $v
  done
  step "$san" --tool memcheck --error-exitcode 99 "$lab" run --frames 2 --input "$LAB_DATA_DIR/graf1.png" --size 3833x2157 --variant nms=v6_front_pairs
  # detect v3's candidates selected once past the cap (the 4K photo's 32,140 survivors); topk v6
  # on the same map
  for tool in memcheck racecheck synccheck initcheck; do
    step "$san" --tool $tool --error-exitcode 99 "$lab" run --graph --frames 2 --input "$LAB_DATA_DIR/pier_4k.jpg" --size 3840x2160 --variant detect=v3_selected_once
    step "$san" --tool $tool --error-exitcode 99 "$lab" run --graph --frames 2 --input "$LAB_DATA_DIR/pier_4k.jpg" --size 3840x2160 --variant topk=v6_shared_select
  done
  # detect v4's interior and ring (a programmatic edge in the graph), odd sizes moving the ring;
  # with l2norm v5 (every launch from the counters' zeroing to the descriptors programmatic)
  for tool in memcheck racecheck synccheck initcheck; do
    step "$san" --tool $tool --error-exitcode 99 "$lab" run --graph --frames 2 --preset "$repo/examples/presets/fastest.json" --input "$LAB_DATA_DIR/pier_4k.jpg" --size 3847x2177
  done
  for img in box_in_scene.png graf1.png astronaut.png coffee.png; do
    step "$lab" bench --stage topk --stage detect --sweep-variants --input "$LAB_DATA_DIR/$img" --size 1280x736 --reps 200
  done
  # many survivors (NMS threshold 0: 11,400 at 1280x736, 97,153 at 4K on graf1): topk v6's case
  step "$lab" bench --stage topk --stage detect --sweep-variants --input "$LAB_DATA_DIR/graf1.png" --param nms.threshold=0 --reps 200
  step "$lab" bench --stage topk --stage detect --sweep-variants --input "$LAB_DATA_DIR/graf1.png" --size 3840x2160 --param nms.threshold=0 --reps 200
} 2>&1 | tee "$out/topk.log"
if want torch && python3 -c "import torch" 2>/dev/null; then
  step python3 "$here/torch_pipeline.py" --lab "$lab" --topk-input "$LAB_DATA_DIR/graf1.png" 2>&1 | tee "$out/torch.log"
fi
want upload && {  # the upload modes against the frame already on the GPU (1080p BGR)
  step "$lab" bench --stage letterbox --input synthetic:1920x1080 --reps 300
} 2>&1 | tee "$out/upload.log" | grep -E "^===|pipeline \("
want labs && {  # the playgrounds: every variant checked, shared-memory races, the story measured
  for l in matmul reduce scan sort transpose access branch; do step "$lab" check --lab $l --quick; done
  step "$lab" gui --headless --frames 60 --window 1600x900 --lab matmul --size 2048x2048x2048 --screenshot "$out/gui-matmul.png"
  step "$san" --tool racecheck --error-exitcode 99 "$lab" check --lab matmul --size 67x45x37 --quick
  step "$san" --tool racecheck --error-exitcode 99 "$lab" check --lab transpose --size 100x77 --quick
  for l in reduce scan sort; do
    step "$san" --tool racecheck --error-exitcode 99 "$lab" check --lab $l --size 5000 --quick
  done
  step "$san" --tool memcheck --error-exitcode 99 "$lab" check --lab matmul --size 67x45x37 --quick
  step "$san" --tool memcheck --error-exitcode 99 "$lab" check --lab sort --size 5000 --quick
  step "$lab" bench --lab matmul --size 4096x4096x4096 --warmup 3 --reps 20
  step "$lab" bench --lab reduce --size 2^28 --warmup 5 --reps 50
  step "$lab" bench --lab transpose --size 16384x16384 --warmup 5 --reps 50
  step "$lab" bench --lab scan --size 2^26 --warmup 5 --reps 50
  step "$lab" bench --lab sort --size 2^24 --warmup 3 --reps 20
  step "$lab" bench --lab access --size 2^26 --param access.stride=1 --reps 50
  step "$lab" bench --lab access --size 2^26 --param access.stride=8 --reps 50
  step "$lab" bench --lab access --size 2^26 --param access.stride=32 --reps 50
  step "$lab" bench --lab branch --size 2^24 --sweep-math --reps 50
  step "$lab" bench --lab transpose --size 4096x4096 --sweep-blocks --reps 50 --csv --out "$out/transpose-blocks.csv"
} 2>&1 | tee "$out/labs.log" | grep -E "^===|ERROR SUMMARY|RACECHECK SUMMARY|configurations|measured|expect|^[a-z]+: "
want live && {  # live kernels: copies against the kernels that ship, compile to running
  t=$(mktemp -d)
  step "$lab" copy blur=v6_rows16_shfl -o "$t/blur_v6.cu"
  step "$lab" copy harris=v3_rows -o "$t/harris_v3.cu"
  step "$lab" check --pipeline harris --input synthetic:3840x2160 --size 3840x2160 --stage blur --kernel-file "$t/blur_v6.cu" --replace blur --quick
  step "$lab" bench --pipeline harris --input synthetic:3840x2160 --size 3840x2160 --stage blur --sweep-variants --kernel-file "$t/blur_v6.cu" --replace blur --reps 200
  step "$lab" bench --pipeline harris --input synthetic:3840x2160 --size 3840x2160 --stage harris --sweep-variants --kernel-file "$t/harris_v3.cu" --replace harris --reps 200
  step "$lab" check --pipeline harris --stage blur --kernel-file "$LAB_EXAMPLES_DIR/blur_smem.cu" --replace blur
  step "$lab" gui --headless --frames 60 --window 1600x900 --pipeline harris --kernel-file "$LAB_EXAMPLES_DIR/blur_smem.cu" --replace blur --screenshot "$out/gui-live.png"
  printf '__global__ void user_kernel(Inputs in, Outputs out, Params p) {\n  const int x = lab_x(), y = lab_y();\n  if (!inside(out[0], x, y)) return;\n  out[0].at(x, y) = in[0].at(x, y + 3);\n}\n' > "$t/oob.cu"
  step "$san" --tool memcheck --error-exitcode 99 "$lab" check --pipeline harris --input synthetic:64x48 --size 64x48 --stage blur --kernel-file "$t/oob.cu" --replace blur --quick
  rm -rf "$t"
} 2>&1 | tee "$out/live.log" | grep -E "^===|ERROR SUMMARY|configurations|kernel:|user|gui: live"
want trial && {  # kernels that cannot take the lab down: trial runs, recovery, hangs (issue 14)
  img=$LAB_DATA_DIR/box_in_scene.png
  t=$(mktemp -d)
  ex=$LAB_EXAMPLES_DIR
  step "$lab" gui --headless --frames 80 --window 1600x900 --input "$img" --kernel-file "$ex/blur_smem.cu" --replace blur --live-recompile 10
  step "$lab" gui --headless --frames 40 --window 1600x900 --input "$img" --kernel-file "$ex/blur_smem.cu" --replace blur --live-recompile 10 --trial-memcheck
  step "$lab" gui --headless --frames 60 --window 1600x900 --input "$img" --kernel-file "$ex/fault_later.cu" --replace blur --screenshot "$out/gui-recovered.png"
  step "$lab" check --input "$img" --stage blur --quick --kernel-file "$ex/endless_loop.cu" --replace blur --trial-timeout 1
  printf '__global__ void user_kernel(Inputs in, Outputs out, Params p) {\n  const int x = lab_x(), y = lab_y();\n  if (x == 3 && y == 0) reinterpret_cast<volatile float*>(8)[0] = 1.0f;\n  if (!inside(out[0], x, y)) return;\n  out[0].at(x, y) = in[0].at(x, y);\n}\n' > "$t/null_write.cu"
  step "$lab" check --input "$img" --stage blur --quick --kernel-file "$t/null_write.cu" --replace blur --trial-memcheck
  # Can a process with no OpenGL context reset the device after a fault? (the GUI's could not)
  LAB_TRIAL_TRY_RESET=1 step "$lab" check --input "$img" --stage blur --quick --kernel-file "$t/null_write.cu" --replace blur
  sed 's/reinterpret_cast<volatile float\*>(8)\[0\] = 1.0f;/while (clock64() >= 0) {}/' "$ex/fault_later.cu" > "$t/hang_later.cu"
  LAB_HANG_REPORT_S=2 step timeout -s INT 150 "$lab" gui --headless --frames 10 --window 1600x900 --input "$img" --kernel-file "$t/hang_later.cu" --replace blur --screenshot "$out/gui-hang.png"
  rm -rf "$t"
} 2>&1 | tee "$out/trial.log" | grep -E "^===|gui: |kernel|trial|memcheck|error"
want measure && {  # one way to measure: the GUI against bench, counters against ncu
  img=$LAB_DATA_DIR/box_in_scene.png
  step "$lab" bench --input "$img" --reps 300
  step "$lab" gui --headless --frames 300 --window 1600x900 --input "$img" --screenshot "$out/gui-timings.png"
  step "$lab" gui --headless --frames 300 --window 1600x900 --input "$img" --graph
  step "$lab" gui --headless --frames 300 --window 1600x900 --input "$img" --queue-ahead 0
  step "$lab" gui --headless --frames 120 --window 1600x900 --input "$img" --counters --screenshot "$out/gui-counters.png"
  step "$lab" bench --input "$img" --counters --sweep-variants --stage blur --stage harris
  step "$lab" bench --print-ncu
  for size in 1280x736 3840x2160; do
    step python3 "$here/compare_counters.py" --lab "$lab" -- --input "$LAB_DATA_DIR/graf1.png" --size $size
  done
} 2>&1 | tee "$out/measure.log"
exit 0
