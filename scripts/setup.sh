#!/usr/bin/env bash
# Installs what Kernel Lab needs from Debian 12's packages (only what is missing) and checks
# for the CUDA toolkit. Safe to run again: it does nothing when all is there.
# Prints, on stdout, only the folder holding nvcc when nvcc is not on PATH; all else on stderr.
set -euo pipefail
exec 3>&1 1>&2

packages=(
  cmake ninja-build g++ pkg-config  # build
  libcli11-dev nlohmann-json3-dev   # command line, JSON
  libstb-dev                        # image files without OpenCV
  libopencv-dev                     # image, video and camera input; test peer
  doctest-dev                       # tests
  libimgui-dev libglfw3-dev libepoxy-dev libegl-dev  # the GUI
  fonts-dejavu-core                                  # the GUI's font on high-DPI screens
  libegl-mesa0 libgl1-mesa-dri libglx-mesa0          # OpenGL without an NVIDIA driver (Mesa)
  xvfb xauth                                         # the windowed GUI test, with no display
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "kernel-lab setup: installing ${missing[*]}"
  sudo=""
  if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null || { echo "setup: need root (or sudo) to install: ${missing[*]}" >&2; exit 77; }
    sudo=sudo
  fi
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# The CUDA toolkit (nvcc) is not a Debian 12 package in the version we need: it must be there.
if ! command -v nvcc >/dev/null; then
  for d in /usr/local/cuda/bin /usr/local/cuda-*/bin; do
    [ -x "$d/nvcc" ] && { echo "$d" >&3; exit 0; }
  done
  echo "setup: nvcc not found. Install the CUDA toolkit (12.2 or newer) from NVIDIA, or put it on PATH." >&2
  exit 69
fi
