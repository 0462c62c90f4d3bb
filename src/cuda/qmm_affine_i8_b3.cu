// qmm_affine_i8 instances for 3-bit codes (one file per width keeps CI's compile parallel).
// Groups of 128 only: a lane's quarter of a group is one 32-code unpack unit.
#include "cuda/qmm_affine_i8.cuh"

namespace quanta::cuda {
// clang-format off
template cudaError_t launch_qmm_affine_i8<__half, 3, 128, 1>(const XcArgs&, int, bool, cudaStream_t);
template cudaError_t launch_qmm_affine_i8<__half, 3, 128, 2>(const XcArgs&, int, bool, cudaStream_t);
template cudaError_t launch_qmm_affine_i8<__nv_bfloat16, 3, 128, 1>(const XcArgs&, int, bool, cudaStream_t);
template cudaError_t launch_qmm_affine_i8<__nv_bfloat16, 3, 128, 2>(const XcArgs&, int, bool, cudaStream_t);
// clang-format on
}  // namespace quanta::cuda
