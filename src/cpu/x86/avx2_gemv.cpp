// The GEMV kernels built for avx2 (this file is compiled with the avx2 flags; see
// src/CMakeLists.txt and src/cpu/engine/common.hpp).
#include "cpu/simd/avx2.hpp"
#define QUANTA_ISA avx2
#include "cpu/engine/entry_gemv.inc"
