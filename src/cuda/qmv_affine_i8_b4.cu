// qmv_affine_i8 instances for 4-bit codes (one file per width keeps CI's compile parallel).
#include "cuda/qmv_affine_i8.cuh"

namespace quanta::cuda {
template cudaError_t launch_qmv_affine_i8<__half, 4, 32>(const I8Args&, int, cudaStream_t);
template cudaError_t launch_qmv_affine_i8<__half, 4, 64>(const I8Args&, int, cudaStream_t);
template cudaError_t launch_qmv_affine_i8<__half, 4, 128>(const I8Args&, int, cudaStream_t);
template cudaError_t launch_qmv_affine_i8<__nv_bfloat16, 4, 32>(const I8Args&, int, cudaStream_t);
template cudaError_t launch_qmv_affine_i8<__nv_bfloat16, 4, 64>(const I8Args&, int, cudaStream_t);
template cudaError_t launch_qmv_affine_i8<__nv_bfloat16, 4, 128>(const I8Args&, int, cudaStream_t);
}  // namespace quanta::cuda
