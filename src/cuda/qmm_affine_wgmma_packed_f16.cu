// qmm_affine_wgmma on a device pack (reordered codes): f16 activations, 4-bit codes, 256-token
// tiles (clusters of 1 and 2), and the reorder itself.
#include "cuda/qmm_affine_wgmma_impl.cuh"

namespace quanta::cuda {
// clang-format off
template std::size_t qmm_affine_wgmma_workspace_packed<__half, 4, 256, 1>(const WgmmaArgs&);
template std::size_t qmm_affine_wgmma_workspace_packed<__half, 4, 256, 2>(const WgmmaArgs&);
template const char* launch_qmm_affine_wgmma_packed<__half, 4, 256, 1>(const WgmmaArgs&, void*, cudaStream_t);
template const char* launch_qmm_affine_wgmma_packed<__half, 4, 256, 2>(const WgmmaArgs&, void*, cudaStream_t);
template void reorder_codes<__half, 4>(const void*, void*, int, int, cudaStream_t);
// clang-format on
}  // namespace quanta::cuda
