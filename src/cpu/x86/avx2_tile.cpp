// The tile kernels (M > 1) built for avx2, and its kernel table.
#include "cpu/simd/avx2.hpp"
#define QUANTA_ISA avx2
#define QUANTA_ISA_TABLE kAvx2Kernels
#include "cpu/engine/entry_tile.inc"
