#!/usr/bin/env bash
# Regenerates BENCHMARKS.md's tables on the GPU machine, in one call (well inside its 10 minutes):
# every stage's ladder on real photos (box_in_scene.png at 1280x736, pier_4k.jpg at 3840x2160)
# and on the synthetic scene beside them, the whole frame per topk and detect step with the fastest
# preset (detect removed for the topk steps), the same pipeline in PyTorch as the peer,
# letterbox's steps and the frame at every scale on six photos beside NPP's front, and every
# playground's ladder. Each `bench` CSV carries the device state (clocks, temperature,
# power, throttle reasons) at its start and end. Output, in a folder git ignores:
#   OUT/results.csv  every row (the frame per step too), with the table, input, size, commit
#   OUT/tables.md    one markdown table per stage and playground (benchmarks/tables.py)
#   OUT/assets/      every picture in assets/ (scripts/gpu-proof.sh's assets section)
# Commit OUT/results.csv as benchmarks/results/<gpu>.csv, paste OUT/tables.md's tables into
# BENCHMARKS.md and copy OUT/assets/*.png to assets/, so tables, CSV and pictures are one build's.
# Usage: benchmarks/run.sh [OUT]   (from the bundle of scripts/build-gpu-bundle.sh; LAB overrides
# the binary, LAB_BENCH_REPS the timed runs of the stage sweeps, LAB_RUN_PARTS picks parts of
# "stages frames peers scales playgrounds assets"; after a run of some parts, `tables.py OUT
# COMMIT --keep benchmarks/results/<gpu>.csv` keeps the committed rows of the others)
set -euo pipefail
cd "$(dirname "$0")/.."
proof=bundle/gpu-proof.sh
[ -d bundle/bin ] || tar -xJf bundle/bin.tar.xz -C bundle
lab=${LAB:-bundle/bin/kernel-lab}
out=${1:-benchmarks/out}
reps=${LAB_BENCH_REPS:-200}
data=${LAB_DATA_DIR:-tests/data}
commit=${LAB_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
parts=" ${LAB_RUN_PARTS:-stages frames peers scales playgrounds assets} "
part() { [[ $parts == *" $1 "* ]]; }
mkdir -p "$out/csv" "$out/json"
rm -f "$out"/csv/*.csv "$out"/json/*.json

bench() {  # bench TABLE[@PART] INPUT SIZE ARGS...: one CSV, named by its table, input and size
  local table=$1 input=$2 size=$3
  shift 3
  local f="$out/csv/${table%%@*}@$(basename "$input")@$size${table#"${table%%@*}"}.csv"
  timeout 120 "$lab" bench --input "$input" --size "$size" --reps "$reps" --csv -o "$f" "$@" ||
    echo "run.sh: $table on $input at $size failed (exit $?)" >&2
}

# The stages: each one's ladder, every variant at its default block, precise math.
part stages && for spec in "$data/box_in_scene.png 1280x736" "$data/pier_4k.jpg 3840x2160" \
  "synthetic:1280x736 1280x736" "synthetic:3840x2160 3840x2160"; do
  set -- $spec
  bench stages "$1" "$2" --sweep-variants
  bench stages@detect "$1" "$2" --sweep-variants --stage detect  # on demand: added by --stage
done
# The whole frame per topk and detect step, the fastest preset otherwise (JSON: the frame figures
# and state); a topk step runs with detect removed from the preset (else detect skips it).
part frames && python3 -c '
import json, sys
p = json.load(open("examples/presets/fastest.json"))
p["pipeline"] = [s for s in p["pipeline"] if s["op"] != "detect"]
json.dump(p, open(sys.argv[1], "w"), indent=2)' "$out/fastest-staged.json"
steps=$("$lab" list --json | python3 -c '
import json, sys
print(" ".join(o["name"] + "=" + v["name"] for o in json.load(sys.stdin)
               if o["name"] in ("topk", "detect") for v in o["variants"]))')
part frames && for spec in "$data/box_in_scene.png 1280x736" "$data/pier_4k.jpg 3840x2160"; do
  set -- $spec
  for v in $steps; do
    preset=examples/presets/fastest.json
    [ "${v%%=*}" = topk ] && preset=$out/fastest-staged.json
    timeout 120 "$lab" bench --input "$1" --size "$2" --reps 200 --json \
      -o "$out/json/frame@$(basename "$1")@$2@$v.json" --preset "$preset" --variant "$v" ||
      echo "run.sh: the frame with $v on $1 failed (exit $?)" >&2
  done
done
# The peer: the same pipeline in PyTorch operators, eager and as a CUDA graph, in the same run as
# the lab's fastest preset (scripts/torch_pipeline.py).
part peers && for spec in "$data/box_in_scene.png 1280x736" "$data/pier_4k.jpg 3840x2160"; do
  set -- $spec
  timeout 240 python3 scripts/torch_pipeline.py --lab "$lab" --input "$1" --size "$2" --reps 200 \
    --preset examples/presets/fastest.json --json "$out/json/peer@$(basename "$1")@$2@torch.json" \
    >"$out/torch@$(basename "$1")@$2.txt" || echo "run.sh: the PyTorch peer on $1 failed (exit $?)" >&2
done
# Every scale: real photos enlarged, shrunk and at scale 1 into both planes: letterbox's steps,
# and the whole frame beside NVIDIA NPP's front (benchmarks/npp_front.sh, which builds the peer
# once where NPP is installed and measures the lab alone where it is not).
export LAB=$lab NPP_FRONT_BIN=$out/npp_front
rm -f "$NPP_FRONT_BIN" "$out/npp.txt"
part scales && for photo in box_in_scene.png graf1.png dock.jpg lantern.jpg pier_4k.jpg pier_5k.jpg; do
  for size in 1280x736 3840x2160; do
    bench scales "$data/$photo" "$size" --sweep-variants --stage letterbox
    timeout 120 benchmarks/npp_front.sh "$data/$photo" "$size" "$reps" \
      "$out/json/scale@$photo@$size@npp.json" >>"$out/npp.txt" ||
      echo "run.sh: the frame and NPP's front on $photo at $size failed (exit $?)" >&2
  done
done
# The playgrounds: each ladder at BENCHMARKS.md's size, 3 untimed runs and 20 timed (a naive
# step takes up to half a second a run at these sizes).
part playgrounds && for spec in "matmul 4096x4096x4096" "reduce 2^28" "transpose 16384x16384" "scan 2^26" "sort 2^24" \
  "access 2^26" "branch 2^24" "math 2^22"; do
  set -- $spec
  timeout 150 "$lab" bench --lab "$1" --size "$2" --sweep-variants --warmup 3 --reps 20 --csv \
    -o "$out/csv/$1@synthetic@$2.csv" || echo "run.sh: the $1 playground failed (exit $?)" >&2
done

# The pictures, from the same binaries.
part assets && { LAB_PROOF_SECTIONS=assets OUT="$out" bash "$proof" || echo "run.sh: pictures failed" >&2; }

"$lab" list --json >"$out/list.json"
python3 benchmarks/tables.py "$out" "$commit"
echo "run.sh: $out/results.csv and $out/tables.md (commit $commit)"
