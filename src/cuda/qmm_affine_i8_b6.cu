// qmm_affine_i8 instances for 6-bit codes (one file per width keeps CI's compile parallel).
// Groups of 64 and 128 only: a lane's quarter of a group is whole 16-code unpack units.
#include "cuda/qmm_affine_i8.cuh"

namespace quanta::cuda {
// clang-format off
template cudaError_t launch_qmm_affine_i8<__half, 6, 64, 1>(const XcArgs&, int, bool, cudaStream_t);
template cudaError_t launch_qmm_affine_i8<__half, 6, 64, 2>(const XcArgs&, int, bool, cudaStream_t);
template cudaError_t launch_qmm_affine_i8<__half, 6, 128, 1>(const XcArgs&, int, bool, cudaStream_t);
template cudaError_t launch_qmm_affine_i8<__half, 6, 128, 2>(const XcArgs&, int, bool, cudaStream_t);
template cudaError_t launch_qmm_affine_i8<__nv_bfloat16, 6, 64, 1>(const XcArgs&, int, bool, cudaStream_t);
template cudaError_t launch_qmm_affine_i8<__nv_bfloat16, 6, 64, 2>(const XcArgs&, int, bool, cudaStream_t);
template cudaError_t launch_qmm_affine_i8<__nv_bfloat16, 6, 128, 1>(const XcArgs&, int, bool, cudaStream_t);
template cudaError_t launch_qmm_affine_i8<__nv_bfloat16, 6, 128, 2>(const XcArgs&, int, bool, cudaStream_t);
// clang-format on
}  // namespace quanta::cuda
