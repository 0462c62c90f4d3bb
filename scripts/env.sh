# Sourced by the scripts: picks the CMake that setup.sh installed from PyPI (>= 3.28) and
# a build directory. Override with CMAKE=... or BUILD_DIR=...
CMAKE=${CMAKE:-$(python3 -c 'import cmake, os; print(os.path.join(cmake.CMAKE_BIN_DIR, "cmake"))' 2>/dev/null || command -v cmake)}
CTEST=${CTEST:-$(dirname "$CMAKE")/ctest}
BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-$(nproc)}
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/ccache}
