// qmm_affine_i8 instances for 8-bit codes (one file per width keeps CI's compile parallel).
#include "cuda/qmm_affine_i8.cuh"

namespace quanta::cuda {
// clang-format off
template cudaError_t launch_qmm_affine_i8<__half, 8, 32, 1>(const XcArgs&, int, bool, cudaStream_t);
template cudaError_t launch_qmm_affine_i8<__half, 8, 32, 2>(const XcArgs&, int, bool, cudaStream_t);
template cudaError_t launch_qmm_affine_i8<__half, 8, 64, 1>(const XcArgs&, int, bool, cudaStream_t);
template cudaError_t launch_qmm_affine_i8<__half, 8, 64, 2>(const XcArgs&, int, bool, cudaStream_t);
template cudaError_t launch_qmm_affine_i8<__half, 8, 64, 4>(const XcArgs&, int, bool, cudaStream_t);
template cudaError_t launch_qmm_affine_i8<__half, 8, 128, 1>(const XcArgs&, int, bool, cudaStream_t);
template cudaError_t launch_qmm_affine_i8<__half, 8, 128, 2>(const XcArgs&, int, bool, cudaStream_t);
template cudaError_t launch_qmm_affine_i8<__nv_bfloat16, 8, 32, 1>(const XcArgs&, int, bool, cudaStream_t);
template cudaError_t launch_qmm_affine_i8<__nv_bfloat16, 8, 32, 2>(const XcArgs&, int, bool, cudaStream_t);
template cudaError_t launch_qmm_affine_i8<__nv_bfloat16, 8, 64, 1>(const XcArgs&, int, bool, cudaStream_t);
template cudaError_t launch_qmm_affine_i8<__nv_bfloat16, 8, 64, 2>(const XcArgs&, int, bool, cudaStream_t);
template cudaError_t launch_qmm_affine_i8<__nv_bfloat16, 8, 64, 4>(const XcArgs&, int, bool, cudaStream_t);
template cudaError_t launch_qmm_affine_i8<__nv_bfloat16, 8, 128, 1>(const XcArgs&, int, bool, cudaStream_t);
template cudaError_t launch_qmm_affine_i8<__nv_bfloat16, 8, 128, 2>(const XcArgs&, int, bool, cudaStream_t);
// clang-format on
}  // namespace quanta::cuda
