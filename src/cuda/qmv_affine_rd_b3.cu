// qmv_affine_rd instances for 3-bit codes (one file per width keeps CI's compile parallel).
#include "cuda/qmv_affine_rd.cuh"

namespace quanta::cuda {
template void launch_qmv_affine_rd<__half, 3, 32>(const RdArgs&, int, cudaStream_t);
template void launch_qmv_affine_rd<__half, 3, 64>(const RdArgs&, int, cudaStream_t);
template void launch_qmv_affine_rd<__half, 3, 128>(const RdArgs&, int, cudaStream_t);
template void launch_qmv_affine_rd<__nv_bfloat16, 3, 32>(const RdArgs&, int, cudaStream_t);
template void launch_qmv_affine_rd<__nv_bfloat16, 3, 64>(const RdArgs&, int, cudaStream_t);
template void launch_qmv_affine_rd<__nv_bfloat16, 3, 128>(const RdArgs&, int, cudaStream_t);
}  // namespace quanta::cuda
