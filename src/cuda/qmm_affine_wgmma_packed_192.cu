// qmm_affine_wgmma on a device pack: 4-bit codes, 192-token tiles (M in (256, 384]: two tiles
// instead of three 128-token ones, so W is dequantized twice per call instead of three times).
#include "cuda/qmm_affine_wgmma_impl.cuh"

namespace quanta::cuda {
// clang-format off
template std::size_t qmm_affine_wgmma_workspace_packed<__half, 4, 192, 1>(const WgmmaArgs&);
template std::size_t qmm_affine_wgmma_workspace_packed<__nv_bfloat16, 4, 192, 1>(const WgmmaArgs&);
template const char* launch_qmm_affine_wgmma_packed<__half, 4, 192, 1>(const WgmmaArgs&, void*, cudaStream_t);
template const char* launch_qmm_affine_wgmma_packed<__nv_bfloat16, 4, 192, 1>(const WgmmaArgs&, void*, cudaStream_t);
// clang-format on
}  // namespace quanta::cuda
