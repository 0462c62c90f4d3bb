// The tile kernels (M > 1) built for avx512, and its kernel table.
#include "cpu/simd/avx512.hpp"
#define QUANTA_ISA avx512
#define QUANTA_ISA_TABLE kAvx512Kernels
#include "cpu/engine/entry_tile.inc"
