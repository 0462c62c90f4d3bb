// qmm_affine_wgmma instances: f16 activations, 4-bit codes.
#include "cuda/qmm_affine_wgmma_impl.cuh"

namespace quanta::cuda {
QUANTA_WGMMA_INSTANCES(, __half, 4)
}  // namespace quanta::cuda
