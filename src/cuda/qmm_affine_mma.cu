// qmm_affine_mma host side: the supports rule, the split-K choice and the dispatch to the
// instantiations in qmm_affine_mma_w*.cu.
#include <algorithm>
#include <bit>
#include <string>

#include "cuda/checks.hpp"
#include "cuda/families.hpp"
#include "cuda/qmm_affine_mma.cuh"
#include "cuda/workspace.hpp"

namespace quanta::cuda {

QUANTA_MMA_WIDTH(extern, 2)
QUANTA_MMA_WIDTH(extern, 3)
QUANTA_MMA_WIDTH(extern, 4)
QUANTA_MMA_WIDTH(extern, 5)
QUANTA_MMA_WIDTH(extern, 6)
QUANTA_MMA_WIDTH(extern, 8)

std::string qmm_affine_mma_supports(const Problem& p) {
  if (p.format.scheme != Scheme::affine) return "needs the affine format";
  if (p.layout != Layout::nk) return "needs the [N, K] layout";
  if (p.dtype == DType::f32) return "needs f16 or bf16 activations (tensor cores)";
  if (p.compute_capability < 80) return "needs sm_80 or newer (bf16 mma.sync)";
  if ((p.k * p.format.bits) % 128 != 0)
    return "needs K * bits % 128 == 0 (16-byte code rows), K = " + std::to_string(p.k);
  return {};
}

void qmm_affine_mma(ConstMatrixView x, const QuantizedMatrix& w, const int32_t*, MatrixView y,
                    const Context& ctx) {
  constexpr std::string_view kName = "qmm_affine_mma", kOp = "matmul";
  require_device_operands(x, w, nullptr, y, kOp);
  if (!alignment_ok(x.data, 16, ctx, kName, kOp, "x") ||
      !alignment_ok(w.codes, 16, ctx, kName, kOp, "w.codes"))
    return matmul_generic(x, w, nullptr, y, ctx);
  MmaArgs a{};
  set_affine_operands(a, x, w, y);
  const int n_tiles = (a.n + kMmaBN - 1) / kMmaBN, m_tiles = (a.m + kMmaBM - 1) / kMmaBM;
  // One CTA per multiprocessor (shared memory): split K until about every one has work.
  const int sms = multiprocessor_count();
  const int stages_total = (a.k + kMmaBK - 1) / kMmaBK;
  int splits = 1;
  if (n_tiles * m_tiles < sms)
    splits = std::clamp(sms / (n_tiles * m_tiles), 1, std::max(1, stages_total / 4));
  const int per = (stages_total + splits - 1) / splits;
  a.kslice = per * kMmaBK;
  splits = (a.k + a.kslice - 1) / a.kslice;
  const cudaStream_t stream = stream_of(ctx);
  a.split = split_tile(splits, a.m, a.n, n_tiles * m_tiles, stream);
  const dim3 grid(static_cast<unsigned>(n_tiles), static_cast<unsigned>(m_tiles),
                  static_cast<unsigned>(splits));
  dispatch_half_dtype(x.dtype, [&]<class T>() {
    dispatch_value<kAffineBitsList>(
        w.format.bits, [&]<int BITS>() { launch_qmm_affine_mma<T, BITS>(a, grid, stream); });
  });
}

}  // namespace quanta::cuda
