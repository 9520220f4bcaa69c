#!/usr/bin/env bash
# Builds the Debian package: build/kernel-lab_<version>_<arch>.deb, installable with
# `sudo apt install ./build/kernel-lab_*.deb` (its Debian dependencies declared by
# dpkg-shlibdeps; the CUDA toolkit, no Debian package, must be installed from NVIDIA).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
cmake --preset default -DLAB_WITH_GUI="$LAB_WITH_GUI" -DCMAKE_INSTALL_PREFIX=/usr >/dev/null
cmake --build --preset default --target kernel-lab
(cd build && cpack -G DEB)
ls build/kernel-lab_*.deb
