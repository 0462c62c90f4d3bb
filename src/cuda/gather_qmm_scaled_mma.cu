// gather_qmm_scaled_mma: gather_matmul for the microscaled (mxfp4, nvfp4, mxfp8) and fp8 (e4m3,
// e5m2) [N, K] expert stacks with f16 / bf16 x, on qmm_affine_mma's tile kernel: the rows of x
// grouped by expert on the device (expert_passes.cu), then one grid row per pass of up to 128 rows
// of one expert, its codes dequantized once a CTA into an exact v·s tile (qmm_affine_mma.cuh).
// gpt-oss ships its experts as mxfp4: before this, a prefill ran gather_qmv_scaled, one row of x
// a pass over its expert's matrix.
#include <string>
#include <type_traits>

#include "cuda/checks.hpp"
#include "cuda/expert_passes.hpp"
#include "cuda/families.hpp"
#include "cuda/qmm_affine_mma.cuh"
#include "cuda/scaled_decode.cuh"
#include "cuda/scaled_rules.cuh"
#include "cuda/weights.cuh"  // make_desc

namespace quanta::cuda {

namespace {

template <class T, Scheme S>
void launch(MmaArgs a, const WeightDesc& d, const int32_t* ids, DType y_dtype, int* flag,
            cudaStream_t stream) {
  const dim3 grid = prepare_gather(a, d.batch, ids, y_dtype, flag, stream, "gather_qmm_scaled_mma");
  constexpr int kBits = ScaledTraits<S>::kCodes == 32 ? 4 : 8;
  launch_qmm_affine_mma<T, kBits, true, S>(a, grid, stream);
}

}  // namespace

std::string gather_qmm_scaled_mma_supports(const Problem& p) {
  if (std::string why = scaled_mma_reason(p); !why.empty()) return why;
  if (p.op != Op::gather_matmul) return "expert stacks (gather_matmul) only";
  if (p.batch > kMaxGroupedExperts)
    return "at most " + std::to_string(kMaxGroupedExperts) + " experts (grouped on the device)";
  return {};
}

// A pass costs about the same from 1 to 128 rows, and gather_qmv_scaled's one-row passes are
// quick, so the grouping is selected from eight rows an expert on average for the 4-bit codes and
// four for the 8-bit ones (H100, 8 and 32 experts: fp4 0.76-0.89x at four an expert, 2.9-3.5x at
// 16; fp8 0.54-0.62x at two, 1.07-1.21x at four, 4.1-4.8x at 16; docs/PERF.md).
std::string gather_qmm_scaled_mma_ahead_supports(const Problem& p) {
  const int64_t rows = p.format.bits == 4 ? 8 : 4;
  if (std::string why = too_few_rows_an_expert(p, rows, "gather_qmv_scaled"); !why.empty())
    return why;
  return gather_qmm_scaled_mma_supports(p);
}

void gather_qmm_scaled_mma(ConstMatrixView x, const QuantizedMatrix& w, const int32_t* expert_ids,
                           MatrixView y, const Context& ctx) {
  constexpr std::string_view kName = "gather_qmm_scaled_mma", kOp = "gather_matmul";
  require_device_operands(x, w, expert_ids, y, kOp);
  if (expert_ids == nullptr || !scaled_operands_aligned(x, w, ctx, kName, kOp))
    return matmul_generic(x, w, expert_ids, y, ctx);
  const WeightDesc d = make_desc(w);
  MmaArgs a{};
  a.codes = d.codes;
  a.scales = d.scales;
  a.x = x.data;
  a.y = y.data;
  a.m = static_cast<int32_t>(x.rows);
  a.n = d.n;
  a.k = d.k;
  a.code_stride = d.code_stride;
  a.scale_stride = d.scale_stride;
  a.global = d.global;
  a.per_row = d.granularity == Granularity::channel ? 1 : 0;
  const ExpertFlag flag = expert_flag_begin(ctx);
  const cudaStream_t stream = stream_of(ctx);
  dispatch_half_dtype(x.dtype, [&]<class T>() {
    dispatch_scaled_scheme(w, "[quanta::gather_matmul] gather_qmm_scaled_mma", [&]<Scheme S>() {
      if constexpr (e8m0_scaled(S) && std::is_same_v<T, __half>)
        throw Error(
            "[quanta::gather_matmul] gather_qmm_scaled_mma: x: E8M0-scaled codes need "
            "bf16 activations, got f16");
      else
        launch<T, S>(a, d, expert_ids, y.dtype, flag.device, stream);
    });
  });
  expert_flag_end(flag, ctx, w.batch, kOp);
}

}  // namespace quanta::cuda
