// The 6-bit instantiations of qmm_affine_rf (f16 and bf16, 1, 2 and 4 column tiles).
#include "cuda/qmm_affine_rf.cuh"

namespace quanta::cuda {
QUANTA_RF_WIDTH(, 6)
}  // namespace quanta::cuda
