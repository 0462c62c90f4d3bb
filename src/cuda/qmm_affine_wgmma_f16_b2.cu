// qmm_affine_wgmma instances: f16 activations, 2-bit codes.
#include "cuda/qmm_affine_wgmma_impl.cuh"

namespace quanta::cuda {
QUANTA_WGMMA_INSTANCES(, __half, 2)
}  // namespace quanta::cuda
