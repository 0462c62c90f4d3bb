// The 8-bit instantiations of qmm_scaled_rf (mxfp8 with bf16 x, e4m3 and e5m2 with f16 and bf16
// x; 1, 2 and 4 column tiles).
#include "cuda/qmm_affine_rf.cuh"

namespace quanta::cuda {
QUANTA_SRF_FP8()
}  // namespace quanta::cuda
