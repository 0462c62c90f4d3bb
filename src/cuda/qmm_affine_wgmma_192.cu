// qmm_affine_wgmma on W's own codes (no device pack): 192-token tiles for 2-, 4- and 8-bit codes
// (M = 272..384: two tiles instead of three 128-token ones, so W is dequantized twice per call).
#include "cuda/qmm_affine_wgmma_impl.cuh"

// clang-format off
#define QUANTA_WGMMA_192(T, BITS) \
  template std::size_t qmm_affine_wgmma_workspace<T, BITS, 192, 1>(const WgmmaArgs&); \
  template const char* launch_qmm_affine_wgmma<T, BITS, 192, 1>(const WgmmaArgs&, void*, cudaStream_t);
// clang-format on

namespace quanta::cuda {
QUANTA_WGMMA_192(__half, 2)
QUANTA_WGMMA_192(__half, 4)
QUANTA_WGMMA_192(__half, 8)
QUANTA_WGMMA_192(__nv_bfloat16, 2)
QUANTA_WGMMA_192(__nv_bfloat16, 4)
QUANTA_WGMMA_192(__nv_bfloat16, 8)
}  // namespace quanta::cuda
