# Sourced by the build scripts: installs what is missing and puts nvcc on PATH.
_lab_nvcc_dir=$("$(dirname "${BASH_SOURCE[0]}")/setup.sh") || exit $?
if [ -n "$_lab_nvcc_dir" ]; then export PATH="$_lab_nvcc_dir:$PATH"; fi
