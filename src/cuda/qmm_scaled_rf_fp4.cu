// The E2M1 instantiations of qmm_scaled_rf (mxfp4 with bf16 x, nvfp4 with f16 and bf16 x; 1, 2
// and 4 column tiles), apart from the 8-bit ones so a small build machine compiles them in
// parallel.
#include "cuda/qmm_affine_rf.cuh"

namespace quanta::cuda {
QUANTA_SRF_FP4()
}  // namespace quanta::cuda
