// The 2-bit instantiations of qmm_affine_rf (f16 and bf16, one column tile: it runs M <= 8 at
// 2 bits, qmm_affine_rf.cu).
#include "cuda/qmm_affine_rf.cuh"

namespace quanta::cuda {
QUANTA_RF_WIDTH_M8(, 2)
}  // namespace quanta::cuda
