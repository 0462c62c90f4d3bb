// qmm_affine_wgmma instances: bf16 activations, 2-bit codes.
#include "cuda/qmm_affine_wgmma_impl.cuh"

namespace quanta::cuda {
QUANTA_WGMMA_INSTANCES(, __nv_bfloat16, 2)
}  // namespace quanta::cuda
