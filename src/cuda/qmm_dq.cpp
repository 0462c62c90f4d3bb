// Large-M matmul as dequantize + cuBLAS: slabs of W's rows are dequantized into a per-stream
// dense buffer of x's dtype and multiplied with cublasGemmEx (f32 accumulation), slab after slab
// on the caller's stream. Two entries share it:
// - qmm_affine_dq: affine, with dequantize_affine (bit-exact with the host decode): f16/bf16
//   from M = 512 for the widths and groups qmm_affine_wgmma does not serve (the fused mma.sync
//   kernel, qmm_affine_mma, reaches 0.3-0.4x cuBLAS from M = 64 up, this 0.6-0.9x from
//   M = 512), and f32 activations from M = 9 (an f32 GEMM without TF32).
// - qmm_generic_dq: every other format in the [N, K] layout at any M, with dequantize_generic,
//   where the only other device kernel is matmul_generic's per-element decode (1-3% of the
//   roof; slower than dequantize + GEMM even at M = 1).
// The weights are rounded to x's dtype once, as MLX's dequantize does.
#include <cublas_v2.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "cuda/checks.hpp"
#include "cuda/families.hpp"
#include "cuda/runtime.cuh"
#include "cuda/workspace.hpp"

namespace quanta::cuda {

namespace {

constexpr std::size_t kSlabBytes = std::size_t{64} << 20;  // dense rows per slab: <= 64 MB
constexpr std::size_t kCublasWorkspace = std::size_t{32} << 20;

void check_cublas(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw Error(fmt::format("[quanta::matmul] dequantize + cuBLAS: {} failed: {} ({})", what,
                            cublasGetStatusName(s), cublasGetStatusString(s)));
}

// One handle per host thread and device (a handle must not be used by two threads at once).
cublasHandle_t handle_for_this_thread() {
  int device = 0;
  QUANTA_CUDA_CHECK(cudaGetDevice(&device));
  struct Handles {
    std::vector<cublasHandle_t> by_device;
    ~Handles() {
      for (cublasHandle_t h : by_device)
        if (h) cublasDestroy(h);
    }
  };
  thread_local Handles handles;
  if (handles.by_device.size() <= static_cast<std::size_t>(device))
    handles.by_device.resize(static_cast<std::size_t>(device) + 1, nullptr);
  cublasHandle_t& h = handles.by_device[static_cast<std::size_t>(device)];
  if (!h) check_cublas(cublasCreate(&h), "cublasCreate");
  return h;
}

// Rows [r0, r0 + rows) of an [N, K] matrix: every format stores a row's codes (and its scales,
// unless one scale serves the whole tensor) contiguously, row after row.
QuantizedMatrix rows_of(const QuantizedMatrix& w, int64_t r0, int64_t rows) {
  const Footprint fp = w.footprint();
  const auto n = static_cast<std::size_t>(w.n), r = static_cast<std::size_t>(r0);
  QuantizedMatrix part = w;
  part.n = rows;
  part.codes = w.codes + r * (fp.code_bytes / n);
  if (w.scales && fp.scale_count > 1) part.scales = w.scales + r * (fp.scale_bytes / n);
  if (w.biases) part.biases = w.biases + r * (fp.bias_bytes / n);
  return part;
}

std::string dq_shape_rule(const Problem& p) {
  if (p.layout != Layout::nk) return "the [N, K] layout only";
  if (p.batch != 1) return "one matrix (no expert stack)";
  if (p.k * static_cast<int64_t>(dtype_size(p.dtype)) * 128 > static_cast<int64_t>(kSlabBytes))
    return "K too long for a slab of 128 dense rows";
  return {};
}

using SlabDequantize = void (*)(const QuantizedMatrix&, MatrixView, const Context&);

void dequantize_and_multiply(ConstMatrixView x, const QuantizedMatrix& w, MatrixView y,
                             const Context& ctx, SlabDequantize dequantize,
                             std::string_view dequantize_name) {
  const auto stream = static_cast<cudaStream_t>(ctx.cuda_stream);
  // Slabs of equal size (a multiple of 128 rows) within the budget; QUANTA_QMM_DQ_SLAB_MB
  // lowers the budget (tests, tuning).
  std::size_t budget = kSlabBytes;
  if (const char* e = std::getenv("QUANTA_QMM_DQ_SLAB_MB"); e && std::atoi(e) > 0)
    budget = std::min(budget, static_cast<std::size_t>(std::atoi(e)) << 20);
  const int64_t row_bytes = w.k * static_cast<int64_t>(dtype_size(x.dtype));
  const int64_t max_rows =
      std::max<int64_t>(128, static_cast<int64_t>(budget) / row_bytes / 128 * 128);
  const int64_t slabs = (w.n + max_rows - 1) / max_rows;
  const int64_t slab_rows = std::min(w.n, ((w.n + slabs - 1) / slabs + 127) / 128 * 128);
  void* slab =
      stream_scratch(stream, Scratch::dense_slab, static_cast<std::size_t>(slab_rows * row_bytes));
  void* workspace = stream_scratch(stream, Scratch::cublas, kCublasWorkspace);
  cublasHandle_t h = handle_for_this_thread();
  check_cublas(cublasSetStream(h, stream), "cublasSetStream");
  check_cublas(cublasSetWorkspace(h, workspace, kCublasWorkspace), "cublasSetWorkspace");
  const cudaDataType_t type = x.dtype == DType::f16    ? CUDA_R_16F
                              : x.dtype == DType::bf16 ? CUDA_R_16BF
                                                       : CUDA_R_32F;
  const float alpha = 1.0f, beta = 0.0f;
  for (int64_t r0 = 0; r0 < w.n; r0 += slab_rows) {
    const int64_t rows = std::min(slab_rows, w.n - r0);
    Context dq = ctx;
    dq.kernel = dequantize_name;
    dequantize(rows_of(w, r0, rows), MatrixView{slab, x.dtype, rows, w.k, Location::device}, dq);
    // Row-major y[M, N] is column-major yᵀ (N x M): y[:, r0 : r0 + rows]ᵀ = W_slab · xᵀ, with the
    // row-major slab [rows, K] read as column-major K x rows, transposed.
    check_cublas(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(rows),
                              static_cast<int>(x.rows), static_cast<int>(w.k), &alpha, slab, type,
                              static_cast<int>(w.k), x.data, type, static_cast<int>(w.k), &beta,
                              static_cast<std::byte*>(y.data) + r0 * dtype_size(y.dtype), type,
                              static_cast<int>(w.n), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                 "cublasGemmEx");
  }
}

}  // namespace

std::string qmm_affine_dq_supports(const Problem& p) {
  if (p.format.scheme != Scheme::affine) return "affine only";
  if (p.dtype != DType::f32 && p.m < 512)
    return "f16/bf16 from M = 512 (below it the fused tensor-core kernels are faster)";
  if (p.k % 32 != 0) return "needs K % 32 == 0 (dequantize_affine's 32-code chunks)";
  return dq_shape_rule(p);
}

void qmm_affine_dq(ConstMatrixView x, const QuantizedMatrix& w, const int32_t*, MatrixView y,
                   const Context& ctx) {
  require_device_operands(x, w, nullptr, y, "matmul");
  if (!alignment_ok(w.codes, 16, ctx, "qmm_affine_dq", "matmul", "w.codes"))
    return matmul_generic(x, w, nullptr, y, ctx);
  dequantize_and_multiply(x, w, y, ctx, dequantize_affine, "dequantize_affine");
}

std::string qmm_generic_dq_supports(const Problem& p) {
  if (p.format.scheme == Scheme::affine) return "not affine (qmm_affine_dq)";
  return dq_shape_rule(p);
}

void qmm_generic_dq(ConstMatrixView x, const QuantizedMatrix& w, const int32_t*, MatrixView y,
                    const Context& ctx) {
  require_device_operands(x, w, nullptr, y, "matmul");
  dequantize_and_multiply(x, w, y, ctx, dequantize_generic, "dequantize_generic");
}

}  // namespace quanta::cuda
