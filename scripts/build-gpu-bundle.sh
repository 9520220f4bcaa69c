#!/usr/bin/env bash
# Builds a self-contained bundle for a headless GPU server (the H200 test host: sm_90, no
# OpenCV, no X): bundle/bin (kernel-lab, lab_tests), bundle/data (the test images), and
# bundle/run-gpu-proof.sh. Build here, carry `bundle`, run there.
set -euo pipefail
cd "$(dirname "$0")/.."
arch=${LAB_BUNDLE_ARCH:-90}
cmake --preset gpu-server -DCMAKE_CUDA_ARCHITECTURES="$arch" >/dev/null
cmake --build --preset gpu-server
rm -rf bundle && mkdir -p bundle/bin bundle/data
cp build-gpu/kernel-lab build-gpu/tests/lab_tests bundle/bin/
cp ../shared/data/*.png ../shared/data/*.jpg bundle/data/
cp scripts/gpu-proof.sh scripts/torch_pipeline.py bundle/
echo "bundle: $(du -sh bundle | cut -f1)"; ldd bundle/bin/kernel-lab | grep -v -E "linux-vdso|ld-linux" || true
