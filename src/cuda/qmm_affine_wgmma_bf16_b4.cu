// qmm_affine_wgmma instances: bf16 activations, 4-bit codes.
#include "cuda/qmm_affine_wgmma_impl.cuh"

namespace quanta::cuda {
QUANTA_WGMMA_INSTANCES(, __nv_bfloat16, 4)
}  // namespace quanta::cuda
