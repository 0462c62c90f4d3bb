// qmm_affine_wgmma instances: f16 activations, 8-bit codes.
#include "cuda/qmm_affine_wgmma_impl.cuh"

namespace quanta::cuda {
QUANTA_WGMMA_INSTANCES(, __half, 8)
}  // namespace quanta::cuda
