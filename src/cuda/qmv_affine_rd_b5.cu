// qmv_affine_rd instances for 5-bit codes (one file per width keeps CI's compile parallel).
#include "cuda/qmv_affine_rd.cuh"

namespace quanta::cuda {
template void launch_qmv_affine_rd<__half, 5, 32>(const RdArgs&, int, cudaStream_t);
template void launch_qmv_affine_rd<__half, 5, 64>(const RdArgs&, int, cudaStream_t);
template void launch_qmv_affine_rd<__half, 5, 128>(const RdArgs&, int, cudaStream_t);
template void launch_qmv_affine_rd<__nv_bfloat16, 5, 32>(const RdArgs&, int, cudaStream_t);
template void launch_qmv_affine_rd<__nv_bfloat16, 5, 64>(const RdArgs&, int, cudaStream_t);
template void launch_qmv_affine_rd<__nv_bfloat16, 5, 128>(const RdArgs&, int, cudaStream_t);
}  // namespace quanta::cuda
