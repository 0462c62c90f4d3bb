// qmm_affine_wgmma on a device pack (reordered codes): f16 activations, 4-bit codes, 64- and
// 128-token tiles (M <= 384; the 256-token ones are in qmm_affine_wgmma_packed_f16.cu).
#include "cuda/qmm_affine_wgmma_impl.cuh"

namespace quanta::cuda {
// clang-format off
template std::size_t qmm_affine_wgmma_workspace_packed<__half, 4, 64, 1>(const WgmmaArgs&);
template std::size_t qmm_affine_wgmma_workspace_packed<__half, 4, 128, 1>(const WgmmaArgs&);
template const char* launch_qmm_affine_wgmma_packed<__half, 4, 64, 1>(const WgmmaArgs&, void*, cudaStream_t);
template const char* launch_qmm_affine_wgmma_packed<__half, 4, 128, 1>(const WgmmaArgs&, void*, cudaStream_t);
// clang-format on
}  // namespace quanta::cuda
