// qmm_affine_wgmma on a device pack (reordered codes): bf16 activations, 8-bit codes.
#include "cuda/qmm_affine_wgmma_packed.cuh"

namespace quanta::cuda {
QUANTA_WGMMA_PACKED_INSTANCES(__nv_bfloat16, 8)
}  // namespace quanta::cuda
