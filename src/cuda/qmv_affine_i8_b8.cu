// qmv_affine_i8 instances for 8-bit codes (one file per width keeps CI's compile parallel).
#include "cuda/qmv_affine_i8.cuh"

namespace quanta::cuda {
template cudaError_t launch_qmv_affine_i8<__half, 8, 32>(const I8Args&, int, cudaStream_t);
template cudaError_t launch_qmv_affine_i8<__half, 8, 64>(const I8Args&, int, cudaStream_t);
template cudaError_t launch_qmv_affine_i8<__half, 8, 128>(const I8Args&, int, cudaStream_t);
template cudaError_t launch_qmv_affine_i8<__nv_bfloat16, 8, 32>(const I8Args&, int, cudaStream_t);
template cudaError_t launch_qmv_affine_i8<__nv_bfloat16, 8, 64>(const I8Args&, int, cudaStream_t);
template cudaError_t launch_qmv_affine_i8<__nv_bfloat16, 8, 128>(const I8Args&, int, cudaStream_t);
}  // namespace quanta::cuda
