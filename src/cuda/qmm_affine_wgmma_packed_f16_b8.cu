// qmm_affine_wgmma on a device pack (reordered codes): f16 activations, 8-bit codes.
#include "cuda/qmm_affine_wgmma_packed.cuh"

namespace quanta::cuda {
QUANTA_WGMMA_PACKED_INSTANCES(__half, 8)
}  // namespace quanta::cuda
