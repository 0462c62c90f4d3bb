// qmm_affine_wgmma instances for bf16 activations.
#include "cuda/qmm_affine_wgmma_impl.cuh"

namespace quanta::cuda {
QUANTA_WGMMA_INSTANCES(__nv_bfloat16)
}  // namespace quanta::cuda
