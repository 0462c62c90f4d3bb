// qmm_affine_mma instantiations for 5, 6 and 8 bits (f16, bf16).
#include "cuda/qmm_affine_mma.cuh"

namespace quanta::cuda {
QUANTA_MMA_WIDTH(, 5)
QUANTA_MMA_WIDTH(, 6)
QUANTA_MMA_WIDTH(, 8)
}  // namespace quanta::cuda
