// qmm_affine_mma instantiations for 2, 3 and 4 bits (f16, bf16).
#include "cuda/qmm_affine_mma.cuh"

namespace quanta::cuda {
QUANTA_MMA_WIDTH(, 2)
QUANTA_MMA_WIDTH(, 3)
QUANTA_MMA_WIDTH(, 4)
}  // namespace quanta::cuda
