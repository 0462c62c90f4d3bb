// The 3-bit instantiations of qmm_affine_rf (f16 and bf16, one column tile: it runs M <= 8 at
// 3 bits, qmm_affine_rf.cu).
#include "cuda/qmm_affine_rf.cuh"

namespace quanta::cuda {
QUANTA_RF_WIDTH_M8(, 3)
}  // namespace quanta::cuda
