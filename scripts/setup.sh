#!/usr/bin/env bash
# Installs what Kernel Lab needs from the distribution's packages (only what is missing) and
# finds the CUDA toolkit. Knows Debian 12 and Ubuntu 22.04 (JetPack 6 on Jetson Orin), on x86-64
# and aarch64; the package names are the same on both. Safe to run again: it does nothing when
# all is there. Where a package the GUI needs is not packaged for this system (Dear ImGui is
# newer than some releases), it says so in one line and the build is the headless lab (list,
# check, bench, run) instead of failing.
#
# Prints on stdout, for scripts/env.sh, two lines: "nvcc_dir=DIR" (empty when nvcc is on PATH)
# and "gui=ON|OFF"; everything else goes to stderr.
set -euo pipefail
exec 3>&1 1>&2

os="unknown"
if [ -r /etc/os-release ]; then
  # shellcheck disable=SC1091
  os=$(. /etc/os-release && echo "${ID:-?} ${VERSION_ID:-?}")
fi
arch=$(uname -m)
jetson=$([ -e /etc/nv_tegra_release ] && echo 1 || echo 0)
case "$os" in
  "debian 12" | "ubuntu 22.04" | "ubuntu 24.04") ;;
  *) echo "kernel-lab setup: $os is untested (Debian 12 and Ubuntu 22.04 are); trying the same packages" ;;
esac
case "$arch" in
  x86_64 | aarch64) ;;
  *) echo "kernel-lab setup: $arch is untested (x86-64 and aarch64 are)" ;;
esac

core=(
  cmake ninja-build g++ pkg-config  # build
  libcli11-dev nlohmann-json3-dev   # command line, JSON
  libssl-dev                        # SHA-256 of exercises and results (libcrypto)
  libstb-dev                        # image files without OpenCV
  libopencv-dev                     # image, video and camera input; test peer
  gstreamer1.0-plugins-base         # gst: input (appsink, videoconvert; videotestsrc in tests)
  doctest-dev                       # tests
)
gui=(libimgui-dev libglfw3-dev libepoxy-dev libegl-dev)  # the GUI: without one, no GUI
extra=(
  fonts-dejavu-core  # the GUI's font on high-DPI screens
  xvfb xauth         # the windowed GUI test, with no display
)
# The sanitizer build and the fuzzers (scripts/sanitize.sh sets LAB_SETUP_SANITIZERS=1): clang
# and its runtimes (Debian packages them apart; Ubuntu 22.04 ships them with clang).
if [ "${LAB_SETUP_SANITIZERS:-0}" = 1 ]; then
  extra+=(clang)
  [ "${os%% *}" = debian ] && extra+=(libclang-rt-14-dev)
fi
# OpenGL without an NVIDIA driver (Mesa): the build machines' headless GUI. A Jetson has the
# NVIDIA driver's GL (L4T), which these would only shadow.
[ "$jetson" = 1 ] || extra+=(libegl-mesa0 libgl1-mesa-dri libglx-mesa0)

# The output is taken whole before it is matched: with pipefail, `cmd | grep -q` fails when grep
# exits at the first match and cmd then dies of SIGPIPE (a fresh machine's set-up saw that).
installed() { [[ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" == *"install ok installed"* ]]; }
# A candidate version in the package lists: the package exists for this system.
packaged() { [[ "$(apt-cache policy "$1" 2>/dev/null)" =~ Candidate:\ [^\(] ]]; }

sudo=""
if [ "$(id -u)" != 0 ]; then sudo=sudo; fi
need_root() {
  if [ -n "$sudo" ] && ! command -v sudo >/dev/null; then
    echo "kernel-lab setup: need root (or sudo) to install: $*" >&2
    exit 77
  fi
}

missing=()
for p in "${core[@]}" "${gui[@]}" "${extra[@]}"; do installed "$p" || missing+=("$p"); done
with_gui=ON
if ((${#missing[@]})); then
  need_root "${missing[@]}"
  $sudo apt-get update -q
  install=()
  for p in "${missing[@]}"; do
    if packaged "$p"; then
      install+=("$p")
      continue
    fi
    kind=core
    for g in "${gui[@]}"; do [ "$g" = "$p" ] && kind=gui; done
    for g in "${extra[@]}"; do [ "$g" = "$p" ] && kind=extra; done
    case $kind in
      core)
        echo "kernel-lab setup: $p is not packaged for $os ($arch); the lab cannot be built without it" >&2
        exit 69
        ;;
      gui)
        echo "kernel-lab setup: $p is not packaged for $os ($arch): building the headless lab (list, check, bench, run), without the GUI"
        with_gui=OFF
        ;;
      extra) echo "kernel-lab setup: $p is not packaged for $os ($arch): skipped (optional)" ;;
    esac
  done
  if ((${#install[@]})); then
    echo "kernel-lab setup: installing ${install[*]}"
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${install[@]}"
  fi
fi
for p in "${gui[@]}"; do installed "$p" || with_gui=OFF; done

# The CUDA toolkit (nvcc) is not a distribution package in the version we need: NVIDIA's
# installer, or JetPack (/usr/local/cuda-12.x on a Jetson), puts it in /usr/local.
nvcc_dir=""
if ! command -v nvcc >/dev/null; then
  for d in /usr/local/cuda/bin /usr/local/cuda-*/bin; do
    if [ -x "$d/nvcc" ]; then
      nvcc_dir=$d
      break
    fi
  done
  if [ -z "$nvcc_dir" ]; then
    echo "setup: nvcc not found. Install the CUDA toolkit (12.2 or newer) from NVIDIA (on a Jetson: JetPack's nvidia-jetpack or cuda-toolkit-12-x), or put it on PATH." >&2
    exit 69
  fi
fi
echo "nvcc_dir=$nvcc_dir" >&3
echo "gui=$with_gui" >&3
