// qmv_affine_rd: the launcher, its `supports` rule and the dispatch over dtype x bits x group.
// Kernel and rationale: qmv_affine_rd.cuh. Instances: qmv_affine_rd_b*.cu.
#include <cstdlib>
#include <string>

#include "cuda/checks.hpp"
#include "cuda/families.hpp"
#include "cuda/qmv_affine_rd.cuh"
#include "cuda/runtime.cuh"

namespace quanta::cuda {

// clang-format off
// Instantiated in qmv_affine_rd_b*.cu (bf16 has no 8-bit instance: see supports).
extern template void launch_qmv_affine_rd<__half, 2, 32>(const RdArgs&, int, cudaStream_t);
extern template void launch_qmv_affine_rd<__half, 2, 64>(const RdArgs&, int, cudaStream_t);
extern template void launch_qmv_affine_rd<__half, 2, 128>(const RdArgs&, int, cudaStream_t);
extern template void launch_qmv_affine_rd<__nv_bfloat16, 2, 32>(const RdArgs&, int, cudaStream_t);
extern template void launch_qmv_affine_rd<__nv_bfloat16, 2, 64>(const RdArgs&, int, cudaStream_t);
extern template void launch_qmv_affine_rd<__nv_bfloat16, 2, 128>(const RdArgs&, int, cudaStream_t);
extern template void launch_qmv_affine_rd<__half, 3, 32>(const RdArgs&, int, cudaStream_t);
extern template void launch_qmv_affine_rd<__half, 3, 64>(const RdArgs&, int, cudaStream_t);
extern template void launch_qmv_affine_rd<__half, 3, 128>(const RdArgs&, int, cudaStream_t);
extern template void launch_qmv_affine_rd<__nv_bfloat16, 3, 32>(const RdArgs&, int, cudaStream_t);
extern template void launch_qmv_affine_rd<__nv_bfloat16, 3, 64>(const RdArgs&, int, cudaStream_t);
extern template void launch_qmv_affine_rd<__nv_bfloat16, 3, 128>(const RdArgs&, int, cudaStream_t);
extern template void launch_qmv_affine_rd<__half, 4, 32>(const RdArgs&, int, cudaStream_t);
extern template void launch_qmv_affine_rd<__half, 4, 64>(const RdArgs&, int, cudaStream_t);
extern template void launch_qmv_affine_rd<__half, 4, 128>(const RdArgs&, int, cudaStream_t);
extern template void launch_qmv_affine_rd<__nv_bfloat16, 4, 32>(const RdArgs&, int, cudaStream_t);
extern template void launch_qmv_affine_rd<__nv_bfloat16, 4, 64>(const RdArgs&, int, cudaStream_t);
extern template void launch_qmv_affine_rd<__nv_bfloat16, 4, 128>(const RdArgs&, int, cudaStream_t);
extern template void launch_qmv_affine_rd<__half, 5, 32>(const RdArgs&, int, cudaStream_t);
extern template void launch_qmv_affine_rd<__half, 5, 64>(const RdArgs&, int, cudaStream_t);
extern template void launch_qmv_affine_rd<__half, 5, 128>(const RdArgs&, int, cudaStream_t);
extern template void launch_qmv_affine_rd<__nv_bfloat16, 5, 32>(const RdArgs&, int, cudaStream_t);
extern template void launch_qmv_affine_rd<__nv_bfloat16, 5, 64>(const RdArgs&, int, cudaStream_t);
extern template void launch_qmv_affine_rd<__nv_bfloat16, 5, 128>(const RdArgs&, int, cudaStream_t);
extern template void launch_qmv_affine_rd<__half, 6, 32>(const RdArgs&, int, cudaStream_t);
extern template void launch_qmv_affine_rd<__half, 6, 64>(const RdArgs&, int, cudaStream_t);
extern template void launch_qmv_affine_rd<__half, 6, 128>(const RdArgs&, int, cudaStream_t);
extern template void launch_qmv_affine_rd<__nv_bfloat16, 6, 32>(const RdArgs&, int, cudaStream_t);
extern template void launch_qmv_affine_rd<__nv_bfloat16, 6, 64>(const RdArgs&, int, cudaStream_t);
extern template void launch_qmv_affine_rd<__nv_bfloat16, 6, 128>(const RdArgs&, int, cudaStream_t);
extern template void launch_qmv_affine_rd<__half, 8, 32>(const RdArgs&, int, cudaStream_t);
extern template void launch_qmv_affine_rd<__half, 8, 64>(const RdArgs&, int, cudaStream_t);
extern template void launch_qmv_affine_rd<__half, 8, 128>(const RdArgs&, int, cudaStream_t);
// clang-format on

std::string qmv_affine_rd_supports(const Problem& p) {
  if (p.format.scheme != Scheme::affine) return "affine only";
  if (p.layout != Layout::nk) return "the [N, K] layout only";
  if (p.dtype == DType::f32) return "f16/bf16 activations only (tensor cores)";
  if (p.batch != 1) return "one matrix (no expert stack)";
  if (p.k % kRdStepK != 0) return "needs K % 128 == 0";
  if (rd_smem_bytes(static_cast<int>(p.k), p.format.group_size, 2) > 200 * 1024)
    return "K too long for the shared-memory copy of x and scales";
  // Codes enter the mma as offset + q in T: bf16's 7 mantissa bits cannot hold 8-bit codes.
  if (p.dtype == DType::bf16 && p.format.bits == 8) return "bf16 cannot hold 8-bit codes exactly";
  if (p.compute_capability != 0 && p.compute_capability < 80) return "needs sm_80+ (mma.sync)";
  return {};
}

namespace {

// Warps per block (they split K); QUANTA_QMV_RD_WARPS overrides it for tuning runs.
int warps_for(int steps) {
  int w = 4;
  if (const char* e = std::getenv("QUANTA_QMV_RD_WARPS")) w = std::atoi(e);
  if (w < 1 || w > kRdMaxWarps) w = 4;
  return std::max(1, std::min(w, steps));
}

}  // namespace

void qmv_affine_rd(ConstMatrixView x, const QuantizedMatrix& w, const int32_t*, MatrixView y,
                   const Context& ctx) {
  constexpr std::string_view kName = "qmv_affine_rd", kOp = "matmul";
  require_device_operands(x, w, nullptr, y, kOp);
  if (!alignment_ok(x.data, 16, ctx, kName, kOp, "x") ||
      !alignment_ok(w.codes, 16, ctx, kName, kOp, "w.codes"))
    return matmul_generic(x, w, nullptr, y, ctx);
  RdArgs a{};
  a.codes = reinterpret_cast<const uint8_t*>(w.codes);
  a.scales = w.scales;
  a.biases = w.biases;
  a.x = x.data;
  a.y = y.data;
  a.n = static_cast<int32_t>(w.n);
  a.k = static_cast<int32_t>(w.k);
  a.row_bytes = w.k * w.format.bits / 8;
  const int warps = warps_for(a.k / kRdStepK);
  const cudaStream_t stream = stream_of(ctx);
  dispatch_half_dtype(x.dtype, [&]<class T>() {
    dispatch_value<kAffineBitsList>(w.format.bits, [&]<int BITS>() {
      if constexpr (!(BITS == 8 && std::is_same_v<T, __nv_bfloat16>)) {
        switch (w.format.group_size) {
          case 32:
            launch_qmv_affine_rd<T, BITS, 32>(a, warps, stream);
            break;
          case 64:
            launch_qmv_affine_rd<T, BITS, 64>(a, warps, stream);
            break;
          default:
            launch_qmv_affine_rd<T, BITS, 128>(a, warps, stream);
            break;
        }
      }
    });
  });
  QUANTA_CUDA_CHECK_LAUNCH();
}

}  // namespace quanta::cuda
