// qmv_affine_i8 instances for 2-bit codes (one file per width keeps CI's compile parallel).
#include "cuda/qmv_affine_i8.cuh"

namespace quanta::cuda {
template cudaError_t launch_qmv_affine_i8<__half, 2, 32>(const I8Args&, int, cudaStream_t);
template cudaError_t launch_qmv_affine_i8<__half, 2, 64>(const I8Args&, int, cudaStream_t);
template cudaError_t launch_qmv_affine_i8<__half, 2, 128>(const I8Args&, int, cudaStream_t);
template cudaError_t launch_qmv_affine_i8<__nv_bfloat16, 2, 32>(const I8Args&, int, cudaStream_t);
template cudaError_t launch_qmv_affine_i8<__nv_bfloat16, 2, 64>(const I8Args&, int, cudaStream_t);
template cudaError_t launch_qmv_affine_i8<__nv_bfloat16, 2, 128>(const I8Args&, int, cudaStream_t);
}  // namespace quanta::cuda
