#!/usr/bin/env bash
# Builds a self-contained bundle for a headless GPU server (the H200 test host: sm_90, no
# OpenCV, no X): bundle/bin.tar.xz (kernel-lab, lab_tests, kernel-lab-toy, stripped and
# compressed: the device tool carries 64 MiB with the working tree) and bundle/gpu-proof.sh, which
# unpacks them and reads the test images, examples and fuzz corpus from the repository copy the
# bundle sits in. cuBLAS and NVRTC come from the host's CUDA toolkit
# (/usr/local/cuda/lib64). With the GUI (LAB_BUNDLE_GUI=0 leaves it out), bundle/lib holds the
# shared libraries the host lacks (Dear ImGui, GLFW, libepoxy, stb); carry `.gl` too (the GL
# loader packages, shared/GPU.md). Build here, carry `bundle` and `.gl`, run there.
set -euo pipefail
cd "$(dirname "$0")/.."
arch=${LAB_BUNDLE_ARCH:-90}
gui=$([ "${LAB_BUNDLE_GUI:-1}" = 0 ] && echo OFF || echo ON)
# LAB_BUNDLE_SM87=0 skips the sm_87 resource table (a second ptxas pass over every op; the Orin
# estimate then uses the running GPU's register counts).
sm87=$([ "${LAB_BUNDLE_SM87:-1}" = 0 ] && echo OFF || echo ON)
cmake --preset gpu-server -DCMAKE_CUDA_ARCHITECTURES="$arch" -DLAB_WITH_GUI="$gui" \
  -DLAB_SM87_TABLE="$sm87" >/dev/null
cmake --build --preset gpu-server
rm -rf bundle && mkdir -p bundle/bin bundle/lib
cp build-gpu/kernel-lab build-gpu/tests/lab_tests build-gpu/tests/kernel-lab-toy bundle/bin/
cp scripts/gpu-proof.sh scripts/torch_pipeline.py scripts/compare_counters.py \
  tests/toy/toy_op_test.sh bundle/
# The libraries a stock Ubuntu host lacks: the GUI stack from Debian's packages.
ldd bundle/bin/kernel-lab bundle/bin/lab_tests | awk '/=> \//{print $3}' | sort -u |
  { grep -E 'libimgui|libglfw|libepoxy|libstb' || true; } | xargs -r -I{} cp -L {} bundle/lib/
ldd bundle/bin/kernel-lab | grep -v -E "linux-vdso|ld-linux" || true
strip bundle/bin/*
tar -cJf bundle/bin.tar.xz -C bundle bin && rm -rf bundle/bin
echo "bundle: $(du -sb bundle | cut -f1) bytes"
