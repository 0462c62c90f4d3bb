// qmm_affine_i8 instances for 4-bit codes (one file per width keeps CI's compile parallel).
#include "cuda/qmm_affine_i8.cuh"

namespace quanta::cuda {
// clang-format off
template cudaError_t launch_qmm_affine_i8<__half, 4, 32, 1>(const XcArgs&, int, bool, cudaStream_t);
template cudaError_t launch_qmm_affine_i8<__half, 4, 32, 2>(const XcArgs&, int, bool, cudaStream_t);
template cudaError_t launch_qmm_affine_i8<__half, 4, 64, 1>(const XcArgs&, int, bool, cudaStream_t);
template cudaError_t launch_qmm_affine_i8<__half, 4, 64, 2>(const XcArgs&, int, bool, cudaStream_t);
template cudaError_t launch_qmm_affine_i8<__half, 4, 128, 1>(const XcArgs&, int, bool, cudaStream_t);
template cudaError_t launch_qmm_affine_i8<__half, 4, 128, 2>(const XcArgs&, int, bool, cudaStream_t);
template cudaError_t launch_qmm_affine_i8<__nv_bfloat16, 4, 32, 1>(const XcArgs&, int, bool, cudaStream_t);
template cudaError_t launch_qmm_affine_i8<__nv_bfloat16, 4, 32, 2>(const XcArgs&, int, bool, cudaStream_t);
template cudaError_t launch_qmm_affine_i8<__nv_bfloat16, 4, 64, 1>(const XcArgs&, int, bool, cudaStream_t);
template cudaError_t launch_qmm_affine_i8<__nv_bfloat16, 4, 64, 2>(const XcArgs&, int, bool, cudaStream_t);
template cudaError_t launch_qmm_affine_i8<__nv_bfloat16, 4, 128, 1>(const XcArgs&, int, bool, cudaStream_t);
template cudaError_t launch_qmm_affine_i8<__nv_bfloat16, 4, 128, 2>(const XcArgs&, int, bool, cudaStream_t);
// clang-format on
}  // namespace quanta::cuda
