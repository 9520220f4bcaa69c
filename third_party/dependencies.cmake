# Build glue for the third-party dependencies: every one comes from Debian's packages (or the
# CUDA toolkit) and is found here; no third-party source lives in this tree, nothing is
# downloaded. scripts/setup.sh installs the packages named beside each.

find_package(CUDAToolkit REQUIRED)                  # CUDA toolkit: cudart, Thrust/CUB
find_package(Threads REQUIRED)
find_package(CLI11 CONFIG REQUIRED)                 # libcli11-dev
find_package(nlohmann_json CONFIG REQUIRED)         # nlohmann-json3-dev
find_package(PkgConfig REQUIRED)                    # pkg-config

# stb (libstb-dev) links statically, so a bundle for another machine needs no libstb.so.
find_path(STB_INCLUDE_DIR stb/stb_image.h REQUIRED)
find_library(STB_LIBRARY NAMES libstb.a stb REQUIRED)

if(LAB_WITH_OPENCV)                                 # libopencv-dev
  find_package(OpenCV REQUIRED COMPONENTS core imgproc imgcodecs videoio)
endif()

if(LAB_WITH_GUI)                                    # libimgui-dev libglfw3-dev libepoxy-dev
  pkg_check_modules(GUI_DEPS REQUIRED IMPORTED_TARGET imgui glfw3 epoxy)
endif()

if(LAB_BUILD_TESTS)                                 # doctest-dev
  find_package(doctest CONFIG REQUIRED)
endif()
