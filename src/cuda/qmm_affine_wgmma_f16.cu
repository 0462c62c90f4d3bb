// qmm_affine_wgmma instances for f16 activations (one file per dtype: nvcc runs them in parallel).
#include "cuda/qmm_affine_wgmma_impl.cuh"

namespace quanta::cuda {
QUANTA_WGMMA_INSTANCES(__half)
}  // namespace quanta::cuda
