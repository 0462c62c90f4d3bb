// The 6-bit instantiations of qmm_affine_tc (f16, bf16 x 1, 2, 4 column tiles), one file per
// width so a small build machine compiles them in parallel.
#include "cuda/qmm_affine_tc.cuh"

namespace quanta::cuda {
QUANTA_TC_INSTANTIATE(6)
}  // namespace quanta::cuda
