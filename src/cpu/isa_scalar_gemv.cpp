// The GEMV kernels of the portable level (one lane, plain C++).
#include "cpu/simd/scalar.hpp"
#define QUANTA_ISA scalar
#include "cpu/engine/entry_gemv.inc"
