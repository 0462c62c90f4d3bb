// The GEMV kernels built for avx512 (this file is compiled with the avx512 flags; see
// src/CMakeLists.txt and src/cpu/engine/common.hpp).
#include "cpu/simd/avx512.hpp"
#define QUANTA_ISA avx512
#include "cpu/engine/entry_gemv.inc"
