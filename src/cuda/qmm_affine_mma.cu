// qmm_affine_mma host side: the supports rules, the split-K choice, the expert grouping for
// gather_matmul and the dispatch to the instantiations in qmm_affine_mma_w*.cu.
#include <algorithm>
#include <bit>
#include <string>

#include "cuda/checks.hpp"
#include "cuda/expert_passes.hpp"
#include "cuda/families.hpp"
#include "cuda/qmm_affine_mma.cuh"
#include "cuda/weights.cuh"  // make_desc
#include "cuda/workspace.hpp"

namespace quanta::cuda {

QUANTA_MMA_WIDTH(extern, 2)
QUANTA_MMA_WIDTH(extern, 3)
QUANTA_MMA_WIDTH(extern, 4)
QUANTA_MMA_WIDTH(extern, 5)
QUANTA_MMA_WIDTH(extern, 6)
QUANTA_MMA_WIDTH(extern, 8)

namespace {

// The rules both ops share.
std::string affine_mma_supports(const Problem& p) {
  if (p.format.scheme != Scheme::affine) return "needs the affine format";
  if (p.layout != Layout::nk) return "needs the [N, K] layout";
  if (p.dtype == DType::f32) return "needs f16 or bf16 activations (tensor cores)";
  if (p.compute_capability < 80) return "needs sm_80 or newer (bf16 mma.sync)";
  if ((p.k * p.format.bits) % 128 != 0)
    return "needs K * bits % 128 == 0 (16-byte code rows), K = " + std::to_string(p.k);
  if (p.n > INT32_MAX || p.k > INT32_MAX || p.m > INT32_MAX) return "needs M, N and K in int32";
  return {};
}

// Expert stacks: the rows of x grouped by expert on the device (no host sync, graph-safe), then
// one grid row per pass of up to 128 rows of one expert; K is not split.
template <class T>
void launch_gather(MmaArgs a, const QuantizedMatrix& w, const int32_t* ids, DType y_dtype,
                   int* flag, cudaStream_t stream) {
  const WeightDesc d = make_desc(w);
  a.code_stride = d.code_stride;
  a.scale_stride = d.scale_stride;
  a.bias_stride = d.bias_stride;
  const dim3 grid = prepare_gather(a, d.batch, ids, y_dtype, flag, stream, "gather_qmm_affine_mma");
  dispatch_value<kAffineBitsList>(
      w.format.bits, [&]<int BITS>() { launch_qmm_affine_mma<T, BITS, true>(a, grid, stream); });
}

}  // namespace

std::string qmm_affine_mma_supports(const Problem& p) {
  if (p.op != Op::matmul || p.batch != 1) return "one matrix (a stack runs gather_qmm_affine_mma)";
  return affine_mma_supports(p);
}

std::string gather_qmm_affine_mma_supports(const Problem& p) {
  if (p.op != Op::gather_matmul) return "expert stacks (gather_matmul) only";
  if (p.batch > kMaxGroupedExperts)
    return "at most " + std::to_string(kMaxGroupedExperts) + " experts (grouped on the device)";
  return affine_mma_supports(p);
}

// A pass costs about the same from 1 to 128 rows (the dequantized 128 x 128 tiles are the work),
// while gather_qmv_affine_i8 costs its expert's bytes per pass of two rows, so this kernel is
// selected from the rows an expert where it overtakes that (tile_rows_an_expert). H100 bf16, this
// kernel against the pairs at 6 to 16 rows an expert (docs/PERF.md), the crossings: 8 experts of
// 14336 x 4096: g64 2-bit 9.2, 3-bit 9.4, 4-bit 10, 5-bit 7.4, 6-bit 6.9, 8-bit 7.5; g32 2-bit
// 7.1, 3-bit 6.3, 4-bit 6.7, 5/6/8-bit < 6; g128 2-bit 12.6, 3-bit 12.4, 4-bit 9.8, 5-bit 6.3,
// 6-bit 6.2, 8-bit 6.9; 128 of 768 x 2048: g64 2-bit 10.2, 4-bit 12.3, 5-bit < 8, 6-bit 9.8, 8-bit
// 8.8; g32 2/3/4-bit < 8, 5-bit < 6, 6-bit 6.6, 8-bit 8.6; g128 2-bit 11.1, 3-bit 10.8, 4-bit 12.6,
// 5-bit 6.6, 6-bit 9.6, 8-bit 8.6. Where the two shapes disagree, the rows between them go to the
// side that loses less.
// Against gather_qmv_affine, where the i8 kernel declines, from four (0.41-0.68x at one row an
// expert, 1.56-2.67x at four).
static int64_t tile_rows_an_expert(int bits, int group) {
  if (bits >= 5 || group == 32) return 8;
  if (group == 128) return 12;
  return bits == 4 ? 11 : 10;
}

std::string gather_qmm_affine_mma_ahead_supports(const Problem& p) {
  const bool i8 = gather_qmv_affine_i8_supports(p).empty();
  const int64_t rows = !i8 ? 4 : tile_rows_an_expert(p.format.bits, p.format.group_size);
  if (std::string why =
          too_few_rows_an_expert(p, rows, i8 ? "gather_qmv_affine_i8" : "gather_qmv_affine");
      !why.empty())
    return why;
  return gather_qmm_affine_mma_supports(p);
}

void qmm_affine_mma(ConstMatrixView x, const QuantizedMatrix& w, const int32_t* expert_ids,
                    MatrixView y, const Context& ctx) {
  const std::string_view kName = expert_ids ? "gather_qmm_affine_mma" : "qmm_affine_mma";
  const std::string_view kOp = expert_ids ? "gather_matmul" : "matmul";
  require_device_operands(x, w, expert_ids, y, kOp);
  if (!alignment_ok(x.data, 16, ctx, kName, kOp, "x") ||
      !alignment_ok(w.codes, 16, ctx, kName, kOp, "w.codes"))
    return matmul_generic(x, w, expert_ids, y, ctx);
  MmaArgs a{};
  set_affine_operands(a, x, w, y);
  if (expert_ids) {
    const ExpertFlag flag = expert_flag_begin(ctx);
    dispatch_half_dtype(x.dtype, [&]<class T>() {  // f16 / bf16: gather_qmm_affine_mma_supports
      launch_gather<T>(a, w, expert_ids, y.dtype, flag.device, stream_of(ctx));
    });
    expert_flag_end(flag, ctx, w.batch, kOp);
    return;
  }
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
        w.format.bits, [&]<int BITS>() { launch_qmm_affine_mma<T, BITS, false>(a, grid, stream); });
  });
}

}  // namespace quanta::cuda
