# Sourced by the build scripts: installs what is missing (scripts/setup.sh), puts nvcc on PATH
# and sets LAB_WITH_GUI (OFF where a GUI package is not packaged for this system).
_lab_setup=$("$(dirname "${BASH_SOURCE[0]}")/setup.sh") || exit $?
_lab_nvcc_dir=$(sed -n 's/^nvcc_dir=//p' <<<"$_lab_setup")
if [ -n "$_lab_nvcc_dir" ]; then export PATH="$_lab_nvcc_dir:$PATH"; fi
LAB_WITH_GUI=$(sed -n 's/^gui=//p' <<<"$_lab_setup")
export LAB_WITH_GUI=${LAB_WITH_GUI:-ON}
