// qmm_affine_wgmma on a device pack (reordered codes): f16 activations, 2-bit codes, every token
// tile (256 in clusters of 1 and 2), and the reorder itself.
#include "cuda/qmm_affine_wgmma_impl.cuh"

namespace quanta::cuda {
// clang-format off
template std::size_t qmm_affine_wgmma_workspace_packed<__half, 2, 64, 1>(const WgmmaArgs&);
template std::size_t qmm_affine_wgmma_workspace_packed<__half, 2, 128, 1>(const WgmmaArgs&);
template std::size_t qmm_affine_wgmma_workspace_packed<__half, 2, 256, 1>(const WgmmaArgs&);
template std::size_t qmm_affine_wgmma_workspace_packed<__half, 2, 256, 2>(const WgmmaArgs&);
template const char* launch_qmm_affine_wgmma_packed<__half, 2, 64, 1>(const WgmmaArgs&, void*, cudaStream_t);
template const char* launch_qmm_affine_wgmma_packed<__half, 2, 128, 1>(const WgmmaArgs&, void*, cudaStream_t);
template const char* launch_qmm_affine_wgmma_packed<__half, 2, 256, 1>(const WgmmaArgs&, void*, cudaStream_t);
template const char* launch_qmm_affine_wgmma_packed<__half, 2, 256, 2>(const WgmmaArgs&, void*, cudaStream_t);
template void reorder_codes<__half, 2>(const void*, void*, int, int, cudaStream_t);
// clang-format on
}  // namespace quanta::cuda
