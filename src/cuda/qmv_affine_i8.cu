// qmv_affine_i8: the launcher, its `supports` rule and the dispatch over dtype x bits x group.
// Kernels and rationale: qmv_affine_i8.cuh. Instances: qmv_affine_i8_b*.cu.
#include <algorithm>
#include <cstdlib>
#include <iterator>
#include <string>

#include "cuda/checks.hpp"
#include "cuda/families.hpp"
#include "cuda/qmv_affine_i8.cuh"
#include "cuda/runtime.cuh"
#include "cuda/workspace.hpp"

namespace quanta::cuda {

// clang-format off
extern template cudaError_t launch_qmv_affine_i8<__half, 2, 32, 1>(const I8Args&, int, cudaStream_t);
extern template cudaError_t launch_qmv_affine_i8<__half, 2, 32, 2>(const I8Args&, int, cudaStream_t);
extern template cudaError_t launch_qmv_affine_i8<__half, 2, 64, 1>(const I8Args&, int, cudaStream_t);
extern template cudaError_t launch_qmv_affine_i8<__half, 2, 64, 2>(const I8Args&, int, cudaStream_t);
extern template cudaError_t launch_qmv_affine_i8<__half, 2, 128, 1>(const I8Args&, int, cudaStream_t);
extern template cudaError_t launch_qmv_affine_i8<__half, 2, 128, 2>(const I8Args&, int, cudaStream_t);
extern template cudaError_t launch_qmv_affine_i8<__nv_bfloat16, 2, 32, 1>(const I8Args&, int, cudaStream_t);
extern template cudaError_t launch_qmv_affine_i8<__nv_bfloat16, 2, 32, 2>(const I8Args&, int, cudaStream_t);
extern template cudaError_t launch_qmv_affine_i8<__nv_bfloat16, 2, 64, 1>(const I8Args&, int, cudaStream_t);
extern template cudaError_t launch_qmv_affine_i8<__nv_bfloat16, 2, 64, 2>(const I8Args&, int, cudaStream_t);
extern template cudaError_t launch_qmv_affine_i8<__nv_bfloat16, 2, 128, 1>(const I8Args&, int, cudaStream_t);
extern template cudaError_t launch_qmv_affine_i8<__nv_bfloat16, 2, 128, 2>(const I8Args&, int, cudaStream_t);
extern template cudaError_t launch_qmv_affine_i8<__half, 3, 32, 1>(const I8Args&, int, cudaStream_t);
extern template cudaError_t launch_qmv_affine_i8<__half, 3, 32, 2>(const I8Args&, int, cudaStream_t);
extern template cudaError_t launch_qmv_affine_i8<__half, 3, 64, 1>(const I8Args&, int, cudaStream_t);
extern template cudaError_t launch_qmv_affine_i8<__half, 3, 64, 2>(const I8Args&, int, cudaStream_t);
extern template cudaError_t launch_qmv_affine_i8<__half, 3, 128, 1>(const I8Args&, int, cudaStream_t);
extern template cudaError_t launch_qmv_affine_i8<__half, 3, 128, 2>(const I8Args&, int, cudaStream_t);
extern template cudaError_t launch_qmv_affine_i8<__nv_bfloat16, 3, 32, 1>(const I8Args&, int, cudaStream_t);
extern template cudaError_t launch_qmv_affine_i8<__nv_bfloat16, 3, 32, 2>(const I8Args&, int, cudaStream_t);
extern template cudaError_t launch_qmv_affine_i8<__nv_bfloat16, 3, 64, 1>(const I8Args&, int, cudaStream_t);
extern template cudaError_t launch_qmv_affine_i8<__nv_bfloat16, 3, 64, 2>(const I8Args&, int, cudaStream_t);
extern template cudaError_t launch_qmv_affine_i8<__nv_bfloat16, 3, 128, 1>(const I8Args&, int, cudaStream_t);
extern template cudaError_t launch_qmv_affine_i8<__nv_bfloat16, 3, 128, 2>(const I8Args&, int, cudaStream_t);
extern template cudaError_t launch_qmv_affine_i8<__half, 4, 32, 1>(const I8Args&, int, cudaStream_t);
extern template cudaError_t launch_qmv_affine_i8<__half, 4, 32, 2>(const I8Args&, int, cudaStream_t);
extern template cudaError_t launch_qmv_affine_i8<__half, 4, 64, 1>(const I8Args&, int, cudaStream_t);
extern template cudaError_t launch_qmv_affine_i8<__half, 4, 64, 2>(const I8Args&, int, cudaStream_t);
extern template cudaError_t launch_qmv_affine_i8<__half, 4, 128, 1>(const I8Args&, int, cudaStream_t);
extern template cudaError_t launch_qmv_affine_i8<__half, 4, 128, 2>(const I8Args&, int, cudaStream_t);
extern template cudaError_t launch_qmv_affine_i8<__nv_bfloat16, 4, 32, 1>(const I8Args&, int, cudaStream_t);
extern template cudaError_t launch_qmv_affine_i8<__nv_bfloat16, 4, 32, 2>(const I8Args&, int, cudaStream_t);
extern template cudaError_t launch_qmv_affine_i8<__nv_bfloat16, 4, 64, 1>(const I8Args&, int, cudaStream_t);
extern template cudaError_t launch_qmv_affine_i8<__nv_bfloat16, 4, 64, 2>(const I8Args&, int, cudaStream_t);
extern template cudaError_t launch_qmv_affine_i8<__nv_bfloat16, 4, 128, 1>(const I8Args&, int, cudaStream_t);
extern template cudaError_t launch_qmv_affine_i8<__nv_bfloat16, 4, 128, 2>(const I8Args&, int, cudaStream_t);
extern template cudaError_t launch_qmv_affine_i8<__half, 5, 32, 1>(const I8Args&, int, cudaStream_t);
extern template cudaError_t launch_qmv_affine_i8<__half, 5, 32, 2>(const I8Args&, int, cudaStream_t);
extern template cudaError_t launch_qmv_affine_i8<__half, 5, 64, 1>(const I8Args&, int, cudaStream_t);
extern template cudaError_t launch_qmv_affine_i8<__half, 5, 64, 2>(const I8Args&, int, cudaStream_t);
extern template cudaError_t launch_qmv_affine_i8<__half, 5, 128, 1>(const I8Args&, int, cudaStream_t);
extern template cudaError_t launch_qmv_affine_i8<__half, 5, 128, 2>(const I8Args&, int, cudaStream_t);
extern template cudaError_t launch_qmv_affine_i8<__nv_bfloat16, 5, 32, 1>(const I8Args&, int, cudaStream_t);
extern template cudaError_t launch_qmv_affine_i8<__nv_bfloat16, 5, 32, 2>(const I8Args&, int, cudaStream_t);
extern template cudaError_t launch_qmv_affine_i8<__nv_bfloat16, 5, 64, 1>(const I8Args&, int, cudaStream_t);
extern template cudaError_t launch_qmv_affine_i8<__nv_bfloat16, 5, 64, 2>(const I8Args&, int, cudaStream_t);
extern template cudaError_t launch_qmv_affine_i8<__nv_bfloat16, 5, 128, 1>(const I8Args&, int, cudaStream_t);
extern template cudaError_t launch_qmv_affine_i8<__nv_bfloat16, 5, 128, 2>(const I8Args&, int, cudaStream_t);
extern template cudaError_t launch_qmv_affine_i8<__half, 6, 32, 1>(const I8Args&, int, cudaStream_t);
extern template cudaError_t launch_qmv_affine_i8<__half, 6, 32, 2>(const I8Args&, int, cudaStream_t);
extern template cudaError_t launch_qmv_affine_i8<__half, 6, 64, 1>(const I8Args&, int, cudaStream_t);
extern template cudaError_t launch_qmv_affine_i8<__half, 6, 64, 2>(const I8Args&, int, cudaStream_t);
extern template cudaError_t launch_qmv_affine_i8<__half, 6, 128, 1>(const I8Args&, int, cudaStream_t);
extern template cudaError_t launch_qmv_affine_i8<__half, 6, 128, 2>(const I8Args&, int, cudaStream_t);
extern template cudaError_t launch_qmv_affine_i8<__nv_bfloat16, 6, 32, 1>(const I8Args&, int, cudaStream_t);
extern template cudaError_t launch_qmv_affine_i8<__nv_bfloat16, 6, 32, 2>(const I8Args&, int, cudaStream_t);
extern template cudaError_t launch_qmv_affine_i8<__nv_bfloat16, 6, 64, 1>(const I8Args&, int, cudaStream_t);
extern template cudaError_t launch_qmv_affine_i8<__nv_bfloat16, 6, 64, 2>(const I8Args&, int, cudaStream_t);
extern template cudaError_t launch_qmv_affine_i8<__nv_bfloat16, 6, 128, 1>(const I8Args&, int, cudaStream_t);
extern template cudaError_t launch_qmv_affine_i8<__nv_bfloat16, 6, 128, 2>(const I8Args&, int, cudaStream_t);
extern template cudaError_t launch_qmv_affine_i8<__half, 8, 32, 1>(const I8Args&, int, cudaStream_t);
extern template cudaError_t launch_qmv_affine_i8<__half, 8, 32, 2>(const I8Args&, int, cudaStream_t);
extern template cudaError_t launch_qmv_affine_i8<__half, 8, 64, 1>(const I8Args&, int, cudaStream_t);
extern template cudaError_t launch_qmv_affine_i8<__half, 8, 64, 2>(const I8Args&, int, cudaStream_t);
extern template cudaError_t launch_qmv_affine_i8<__half, 8, 128, 1>(const I8Args&, int, cudaStream_t);
extern template cudaError_t launch_qmv_affine_i8<__half, 8, 128, 2>(const I8Args&, int, cudaStream_t);
extern template cudaError_t launch_qmv_affine_i8<__nv_bfloat16, 8, 32, 1>(const I8Args&, int, cudaStream_t);
extern template cudaError_t launch_qmv_affine_i8<__nv_bfloat16, 8, 32, 2>(const I8Args&, int, cudaStream_t);
extern template cudaError_t launch_qmv_affine_i8<__nv_bfloat16, 8, 64, 1>(const I8Args&, int, cudaStream_t);
extern template cudaError_t launch_qmv_affine_i8<__nv_bfloat16, 8, 64, 2>(const I8Args&, int, cudaStream_t);
extern template cudaError_t launch_qmv_affine_i8<__nv_bfloat16, 8, 128, 1>(const I8Args&, int, cudaStream_t);
extern template cudaError_t launch_qmv_affine_i8<__nv_bfloat16, 8, 128, 2>(const I8Args&, int, cudaStream_t);
// clang-format on

namespace {

constexpr int64_t kMaxGridRows = 65535;  // gridDim.y: a gather's rows of x

// The rules the one-matrix and the gather entries share.
std::string i8_reason(const Problem& p) {
  if (p.format.scheme != Scheme::affine) return "affine only";
  if (std::ranges::find(kI8Bits, p.format.bits) == std::end(kI8Bits)) return "2-6 or 8-bit codes";
  if (p.layout != Layout::nk) return "the [N, K] layout only";
  if (p.dtype == DType::f32) return "f16/bf16 activations only (x as two int8 planes)";
  // Also makes K % 128 == 0: rows of every width are whole 16-byte units, as the loads need.
  if (p.k % (4 * p.format.group_size) != 0) return "needs K % (4 * group_size) == 0";
  if (p.n > INT32_MAX || p.k > INT32_MAX || p.m > INT32_MAX) return "needs M, N and K in int32";
  if (p.compute_capability != 0 && p.compute_capability < 90)
    return "needs sm_90 (programmatic dependent launch)";
  return {};
}

}  // namespace

std::string qmv_affine_i8_supports(const Problem& p) {
  if (std::string r = i8_reason(p); !r.empty()) return r;
  if (p.batch != 1) return "one matrix (no expert stack)";
  if (p.m > 2) return "M <= 2 (two rows of x share the code registers)";
  return {};
}

std::string gather_qmv_affine_i8_supports(const Problem& p) {
  if (std::string r = i8_reason(p); !r.empty()) return r;
  if (p.m > kMaxGridRows) return "M <= 65535 (a grid row per row of x)";
  if (p.batch > INT32_MAX) return "needs the experts in int32";
  return {};
}

void qmv_affine_i8(ConstMatrixView x, const QuantizedMatrix& w, const int32_t* expert_ids,
                   MatrixView y, const Context& ctx) {
  const std::string_view kName = expert_ids ? "gather_qmv_affine_i8" : "qmv_affine_i8";
  const std::string_view kOp = expert_ids ? "gather_matmul" : "matmul";
  require_device_operands(x, w, expert_ids, y, kOp);
  if (!alignment_ok(x.data, 16, ctx, kName, kOp, "x") ||
      !alignment_ok(w.codes, 16, ctx, kName, kOp, "w.codes"))
    return matmul_generic(x, w, expert_ids, y, ctx);
  const cudaStream_t stream = stream_of(ctx);
  const int groups = static_cast<int>(w.k / w.format.group_size);
  // A gather from 1.5 rows an expert on average runs passes of two rows of one expert on the
  // M = 2 instance, which reads the expert once for both: H100 bf16, 3/4/8-bit g64, 8 experts of
  // 14336 x 4096 / 4096 x 14336 and 128 of 768 x 2048 / 2048 x 768, against a row a pass: at one
  // row an expert 0.76-1.05x, at 1.5 1.06-1.46x, at two 1.24-1.87x, at four 1.62-2.57x
  // (docs/PERF.md).
  // Slots of x's planes: a row of x each, or two a pass (qmv_x_planes_kernel, whose grid has a
  // row per slot).
  const int64_t pair_slots = 2 * max_expert_passes(x.rows, w.batch, 2);
  const bool pairs = expert_ids && 2 * x.rows >= 3 * w.batch && w.batch <= kMaxGroupedExperts &&
                     pair_slots <= kMaxGridRows;
  const int64_t slots = pairs ? pair_slots : x.rows;
  // x's planes, then (d, X) per group of the geometry that runs (i8_run_group: K / 32 at most).
  auto* scratch = static_cast<uint8_t*>(
      stream_scratch(stream, Scratch::x_planes,
                     static_cast<std::size_t>(slots) *
                         (i8_planes_bytes(static_cast<int>(w.k)) + sizeof(float2) * (w.k / 32))));
  I8Args a{};
  a.codes = reinterpret_cast<const uint8_t*>(w.codes);
  a.scales = w.scales;
  a.biases = w.biases;
  a.x = x.data;
  a.y = y.data;
  a.planes = reinterpret_cast<uint32_t*>(scratch);
  a.gx = reinterpret_cast<float2*>(scratch + slots * i8_planes_bytes(static_cast<int>(w.k)));
  a.m = static_cast<int32_t>(x.rows);
  a.n = static_cast<int32_t>(w.n);
  a.k = static_cast<int32_t>(w.k);
  a.row_bytes = w.k * w.format.bits / 8;
  ExpertFlag flag;
  if (expert_ids) {  // a grid row per row of x or per pass; the expert's matrix a stride further
    flag = expert_flag_begin(ctx);
    a.ids = expert_ids;
    a.flag = flag.device;
    a.code_stride = a.row_bytes * w.n;
    a.sb_stride = w.n * groups;
    a.batch = static_cast<int32_t>(w.batch);
    if (pairs)
      a.passes = group_rows_by_expert(expert_ids, a.m, a.batch, 2, y.data, y.dtype, a.n,
                                      flag.device, stream);
  }
  // QUANTA_QMV_I8_CONTIG=0/1 forces interleaved / contiguous steps per warp (tuning runs).
  if (const char* e = std::getenv("QUANTA_QMV_I8_CONTIG")) a.contiguous = std::atoi(e) != 0;
  // Warps per block: 0, the launcher picks from the instance's occupancy (i8_one_wave_warps),
  // unless QUANTA_QMV_I8_WARPS says. Against the doubling rule (i8_warps_for) that was 0.98-1.39x
  // for 2/4/8 bits at M = 2 (median 1.10x) and 0.97-1.23x for 3/5/6 bits at M = 1 and 2 (1.05-1.23x
  // on 5120 x 14336; docs/PERF.md).
  const bool whole_bytes = w.format.bits == 2 || w.format.bits == 4 || w.format.bits == 8;
  const int warps = std::getenv("QUANTA_QMV_I8_WARPS")
                        ? i8_warps_for((a.n + kI8Rows - 1) / kI8Rows, groups / 4,
                                       whole_bytes ? 2 : 1, "QUANTA_QMV_I8_WARPS")
                        : 0;
  cudaError_t status = cudaSuccess;
  bool served = false;
  dispatch_half_dtype(x.dtype, [&]<class T>() {
    served = dispatch_i8_width(w.format.bits, w.format.group_size, [&]<int BITS, int G>() {
      const bool one_row = expert_ids ? !pairs : a.m == 1;
      status = one_row ? launch_qmv_affine_i8<T, BITS, G, 1>(a, warps, stream)
                       : launch_qmv_affine_i8<T, BITS, G, 2>(a, warps, stream);
    });
  });
  if (!served) throw i8_width_error(kName, w.format.bits, w.format.group_size);
  QUANTA_CUDA_CHECK(status);
  QUANTA_CUDA_CHECK_LAUNCH();
  if (expert_ids) expert_flag_end(flag, ctx, w.batch, kOp);
}

}  // namespace quanta::cuda
