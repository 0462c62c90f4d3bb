// qmv_affine_i8 instances for 6-bit codes (one file per width keeps CI's compile parallel).
#include "cuda/qmv_affine_i8.cuh"

namespace quanta::cuda {
// clang-format off
template cudaError_t launch_qmv_affine_i8<__half, 6, 32, 1>(const I8Args&, int, cudaStream_t);
template cudaError_t launch_qmv_affine_i8<__half, 6, 32, 2>(const I8Args&, int, cudaStream_t);
template cudaError_t launch_qmv_affine_i8<__half, 6, 64, 1>(const I8Args&, int, cudaStream_t);
template cudaError_t launch_qmv_affine_i8<__half, 6, 64, 2>(const I8Args&, int, cudaStream_t);
template cudaError_t launch_qmv_affine_i8<__half, 6, 128, 1>(const I8Args&, int, cudaStream_t);
template cudaError_t launch_qmv_affine_i8<__half, 6, 128, 2>(const I8Args&, int, cudaStream_t);
template cudaError_t launch_qmv_affine_i8<__nv_bfloat16, 6, 32, 1>(const I8Args&, int, cudaStream_t);
template cudaError_t launch_qmv_affine_i8<__nv_bfloat16, 6, 32, 2>(const I8Args&, int, cudaStream_t);
template cudaError_t launch_qmv_affine_i8<__nv_bfloat16, 6, 64, 1>(const I8Args&, int, cudaStream_t);
template cudaError_t launch_qmv_affine_i8<__nv_bfloat16, 6, 64, 2>(const I8Args&, int, cudaStream_t);
template cudaError_t launch_qmv_affine_i8<__nv_bfloat16, 6, 128, 1>(const I8Args&, int, cudaStream_t);
template cudaError_t launch_qmv_affine_i8<__nv_bfloat16, 6, 128, 2>(const I8Args&, int, cudaStream_t);
// clang-format on
}  // namespace quanta::cuda
