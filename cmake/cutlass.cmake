# CUTLASS headers for qmm_affine_wgmma (Hopper's mixed-input wgmma GEMM). CUTLASS is
# header-only; it is taken from NVIDIA's own PyPI wheel, pinned by hash, because every machine
# that builds quanta already reaches PyPI (scripts/setup.sh). Set QUANTA_CUTLASS_DIR to a CUTLASS
# checkout (the folder holding include/ and tools/util/include/) to build offline.
set(QUANTA_CUTLASS_DIR "" CACHE PATH "A CUTLASS 4.x source tree (default: downloaded)")
set(_cutlass_version 4.2.0.0)
set(_cutlass_url "https://files.pythonhosted.org/packages/21/6b/e86fc2fd536dd4b8bd2209aa31d7002610c501b0802337787eac9c9b328c/nvidia_cutlass-${_cutlass_version}-py3-none-any.whl")
set(_cutlass_sha256 f9599ada45c7bcb6bf53f7d3f0a7d154183e53451c01bfa59eecd37dd4a693f6)

if(QUANTA_CUTLASS_DIR)
  set(_cutlass_root "${QUANTA_CUTLASS_DIR}")
else()
  set(_cutlass_root "${CMAKE_BINARY_DIR}/_deps/cutlass-${_cutlass_version}/cutlass_library/source")
  if(NOT EXISTS "${_cutlass_root}/include/cutlass/cutlass.h")
    set(_wheel "${CMAKE_BINARY_DIR}/_deps/nvidia_cutlass-${_cutlass_version}.whl")
    message(STATUS "quanta: downloading CUTLASS ${_cutlass_version} headers (PyPI wheel)")
    file(DOWNLOAD "${_cutlass_url}" "${_wheel}" EXPECTED_HASH SHA256=${_cutlass_sha256}
         STATUS _status TLS_VERIFY ON)
    list(GET _status 0 _code)
    if(NOT _code EQUAL 0)
      message(FATAL_ERROR "CUTLASS download failed (${_status}); set QUANTA_CUTLASS_DIR to a "
                          "CUTLASS source tree to build offline")
    endif()
    file(ARCHIVE_EXTRACT INPUT "${_wheel}" DESTINATION "${CMAKE_BINARY_DIR}/_deps/cutlass-${_cutlass_version}"
         PATTERNS "cutlass_library/source/include/*" "cutlass_library/source/tools/util/include/*")
    file(REMOVE "${_wheel}")
  endif()
endif()
if(NOT EXISTS "${_cutlass_root}/include/cute/tensor.hpp")
  message(FATAL_ERROR "No CUTLASS headers under ${_cutlass_root}/include")
endif()
set(QUANTA_CUTLASS_INCLUDE_DIRS "${_cutlass_root}/include" "${_cutlass_root}/tools/util/include")
