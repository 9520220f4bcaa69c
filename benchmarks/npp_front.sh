#!/usr/bin/env bash
# NVIDIA NPP's keypoint front (benchmarks/peers/npp_front.cu) beside the lab's pipeline, in one
# run on one GPU: NPP's gray, resize, Gaussian 5x5, Harris and 5x5 maximum as a CUDA graph, and
# `kernel-lab bench --preset examples/presets/fastest.json` (the whole pipeline as a graph, and
# its stages from the letterbox to the keypoints) on the same frame. Builds the peer with the
# toolkit's nvcc where NPP is installed (once: NPP_FRONT_BIN keeps the binary); where it is not,
# says so and measures the lab alone.
# Usage: benchmarks/npp_front.sh INPUT SIZE [REPS] [OUT.json]   (LAB: the kernel-lab binary;
# LAB_PRESET: the lab's preset, examples/presets/fastest.json unless set)
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { echo "usage: benchmarks/npp_front.sh INPUT SIZE [REPS] [OUT.json]" >&2; exit 64; }
input=$1 size=$2 reps=${3:-200} json=${4:-}
[ -d bundle/bin ] || [ ! -f bundle/bin.tar.xz ] || tar -xJf bundle/bin.tar.xz -C bundle
lab=${LAB:-bundle/bin/kernel-lab}
cuda=${CUDA_HOME:-/usr/local/cuda}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo '{}' >"$tmp/npp.json"
"$lab" run --input "$input" --size "$size" --frames 1 --dump "$tmp/dump" >/dev/null
if [ ! -f "$cuda/include/nppi.h" ]; then
  echo "npp_front: NPP is not installed here (no $cuda/include/nppi.h): the lab alone is measured"
else
  bin=${NPP_FRONT_BIN:-$tmp/npp_front}
  [ -x "$bin" ] || "$cuda/bin/nvcc" -O2 -std=c++17 -o "$bin" benchmarks/peers/npp_front.cu \
    -lnppc -lnppicc -lnppidei -lnppif -lnppig
  "$bin" "$tmp/dump/input.npy" "$size" "$reps" >"$tmp/npp.json"
fi
"$lab" bench --input "$input" --size "$size" --reps "$reps" --json -o "$tmp/lab.json" \
  --preset "${LAB_PRESET:-examples/presets/fastest.json}" >/dev/null
python3 - "$tmp/npp.json" "$tmp/lab.json" "$input" "$size" "$json" "$tmp/dump/input.npy" <<'PY'
import json, re, sys
npp = json.load(open(sys.argv[1]))
lab = json.load(open(sys.argv[2]))
shape = re.search(rb"'shape': \((\d+), (\d+)", open(sys.argv[6], "rb").read(256))
h, w = int(shape[1]), int(shape[2])
ow, oh = map(int, sys.argv[4].split("x"))
scale = min(ow / w, oh / h)  # the letterbox's: above 1 enlarges
stages = {}  # a stage's time: its total row where it has several launches, else its launch
for l in lab["launches"]:
    stages.setdefault(l["stage"], []).append(l)
us = {s: next((l["median_us"] for l in ls if l["total"]), sum(l["median_us"] for l in ls))
      for s, ls in stages.items()}
front = sum(v for s, v in us.items() if s in ("letterbox", "blur", "sobel", "harris", "nms", "detect"))
row = {"input": sys.argv[3], "size": sys.argv[4], "source": [w, h], "scale": scale,
       "npp_front_graph_us": npp.get("graph_us"),
       "npp_front_eager_us": npp.get("eager_us"), "npp_version": npp.get("npp"),
       "lab_frame_graph_us": lab["frame_graph_median_us"], "lab_to_keypoints_us": front,
       "lab_letterbox_us": us.get("letterbox"), "lab_state": lab.get("frame_graph_state")}
print(f"{sys.argv[3]} ({w}x{h}) -> {sys.argv[4]}, scale {scale:.3f}, medians of {lab['launches'][0]['reps']} runs:")
if npp:
    print(f"  NPP {npp['npp']} front (gray, resize, Gaussian, Harris, 5x5 max), a graph  {npp['graph_us']:9.1f} us")
    print(f"  NPP front, eager                                              {npp['eager_us']:9.1f} us")
print(f"  kernel-lab whole pipeline (fastest preset), a graph           {lab['frame_graph_median_us']:9.1f} us")
print(f"  kernel-lab letterbox to keypoints, its stages each timed alone {front:9.1f} us")
if sys.argv[5]:
    json.dump(row, open(sys.argv[5], "w"), indent=1)
PY
