// qmv_affine_i8 instances for 3-bit codes (one file per width keeps CI's compile parallel).
#include "cuda/qmv_affine_i8.cuh"

namespace quanta::cuda {
// clang-format off
template cudaError_t launch_qmv_affine_i8<__half, 3, 32, 1>(const I8Args&, int, cudaStream_t);
template cudaError_t launch_qmv_affine_i8<__half, 3, 32, 2>(const I8Args&, int, cudaStream_t);
template cudaError_t launch_qmv_affine_i8<__half, 3, 64, 1>(const I8Args&, int, cudaStream_t);
template cudaError_t launch_qmv_affine_i8<__half, 3, 64, 2>(const I8Args&, int, cudaStream_t);
template cudaError_t launch_qmv_affine_i8<__half, 3, 128, 1>(const I8Args&, int, cudaStream_t);
template cudaError_t launch_qmv_affine_i8<__half, 3, 128, 2>(const I8Args&, int, cudaStream_t);
template cudaError_t launch_qmv_affine_i8<__nv_bfloat16, 3, 32, 1>(const I8Args&, int, cudaStream_t);
template cudaError_t launch_qmv_affine_i8<__nv_bfloat16, 3, 32, 2>(const I8Args&, int, cudaStream_t);
template cudaError_t launch_qmv_affine_i8<__nv_bfloat16, 3, 64, 1>(const I8Args&, int, cudaStream_t);
template cudaError_t launch_qmv_affine_i8<__nv_bfloat16, 3, 64, 2>(const I8Args&, int, cudaStream_t);
template cudaError_t launch_qmv_affine_i8<__nv_bfloat16, 3, 128, 1>(const I8Args&, int, cudaStream_t);
template cudaError_t launch_qmv_affine_i8<__nv_bfloat16, 3, 128, 2>(const I8Args&, int, cudaStream_t);
// clang-format on
}  // namespace quanta::cuda
