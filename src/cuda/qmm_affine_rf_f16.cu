// The 4-bit f16 instantiations of qmm_affine_rf (1, 2 and 4 column tiles), one file per dtype so a
// small build machine compiles them in parallel.
#include "cuda/qmm_affine_rf.cuh"

namespace quanta::cuda {
QUANTA_RF_DTYPE(, __half, 4)
}  // namespace quanta::cuda
