// The tile kernels (M > 1) of the portable level, and its kernel table.
#include "cpu/simd/scalar.hpp"
#define QUANTA_ISA scalar
#define QUANTA_ISA_TABLE kScalarKernels
#include "cpu/engine/entry_tile.inc"
