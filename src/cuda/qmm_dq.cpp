// Large-M matmul as dequantize + cuBLAS: slabs of W's stored rows are dequantized into a
// per-stream dense buffer of x's dtype and multiplied with cublasGemmEx (f32 accumulation), slab
// after slab on the caller's stream. [N, K]: a slab is rows of W, its GEMM a band of y's
// columns. [K, N]: a slab is K-rows, every GEMM adds to all of y; with several slabs the sums
// stay in an f32 buffer (f16/bf16 x) and are rounded to x's dtype once at the end. Two entries
// share it:
// - qmm_affine_dq: affine, with dequantize_affine (bit-exact with the host decode): f16/bf16
//   from M = 512 for the widths and groups qmm_affine_wgmma does not serve (the fused mma.sync
//   kernel, qmm_affine_mma, reaches 0.3-0.4x cuBLAS from M = 64 up, this 0.6-0.9x from
//   M = 512), and f32 activations from M = 9 (an f32 GEMM without TF32).
//   It also takes the [K, N] layout, every dtype, from M = 9 (qvm_affine takes M <= 8), where
//   the selection prefers qmm_affine_repack (1.02-1.46x faster on the H200).
// - qmm_generic_dq: every other format at any M, with dequantize_scaled (microscaled and fp8
//   [N, K]), dequantize_gguf (GGUF [N, K]) or dequantize_generic.
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

// Stored rows [r0, r0 + rows) of W: every format stores a row's codes contiguously, row after
// row. [N, K]: a row's scales too (unless one scale serves the whole tensor). [K, N]: r0 and rows
// are multiples of the scale group, whose row of scales (and biases) is contiguous; fp8's
// per-channel or per-tensor scales serve every K-row.
QuantizedMatrix rows_of(const QuantizedMatrix& w, int64_t r0, int64_t rows) {
  const Footprint fp = w.footprint();
  const bool nk = w.layout == Layout::nk;
  const auto stored = static_cast<std::size_t>(nk ? w.n : w.k);
  const auto r = static_cast<std::size_t>(r0);
  QuantizedMatrix part = w;
  (nk ? part.n : part.k) = rows;
  part.codes = w.codes + r * (fp.code_bytes / stored);
  // Scale rows before r0, and bytes per scale row.
  const auto g = static_cast<std::size_t>(w.format.group_size);
  const std::size_t skip = nk ? r : (g > 0 ? r / g : 0),
                    per = nk ? stored : stored / std::max<std::size_t>(g, 1);
  if (w.scales && fp.scale_count > 1 && skip > 0)
    part.scales = w.scales + skip * (fp.scale_bytes / per);
  if (w.biases && skip > 0) part.biases = w.biases + skip * (fp.bias_bytes / per);
  return part;
}

std::string dq_shape_rule(const Problem& p) {
  if (p.batch != 1) return "one matrix (no expert stack)";
  const int64_t row = p.layout == Layout::nk ? p.k : p.n;  // a stored row, dense
  if (row * static_cast<int64_t>(dtype_size(p.dtype)) * 128 > static_cast<int64_t>(kSlabBytes))
    return p.layout == Layout::nk ? "K too long for a slab of 128 dense rows"
                                  : "N too long for a slab of 128 dense K-rows";
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
  const bool nk = w.layout == Layout::nk;
  const int64_t stored_rows = nk ? w.n : w.k, stored_cols = nk ? w.k : w.n;
  const int64_t row_bytes = stored_cols * static_cast<int64_t>(dtype_size(x.dtype));
  const int64_t max_rows =
      std::max<int64_t>(128, static_cast<int64_t>(budget) / row_bytes / 128 * 128);
  const int64_t slabs = (stored_rows + max_rows - 1) / max_rows;
  const int64_t slab_rows =
      std::min(stored_rows, ((stored_rows + slabs - 1) / slabs + 127) / 128 * 128);
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
  if (!nk) {
    // yᵀ (N x M, column-major) += W_slabᵀ · x[:, k0 : k0 + rows]ᵀ: the row-major slab [rows, N]
    // is column-major N x rows, x's columns k0.. start at x + k0 with leading dimension K.
    const std::size_t esize = dtype_size(x.dtype);
    const bool f32_sums = x.dtype != DType::f32 && slab_rows < w.k;
    float* sums = f32_sums ? static_cast<float*>(stream_scratch(
                                 stream, Scratch::dense_sums,
                                 static_cast<std::size_t>(x.rows * w.n) * sizeof(float)))
                           : nullptr;
    for (int64_t k0 = 0; k0 < w.k; k0 += slab_rows) {
      const int64_t rows = std::min(slab_rows, w.k - k0);
      Context dq = ctx;
      dq.kernel = dequantize_name;
      dequantize(rows_of(w, k0, rows), MatrixView{slab, x.dtype, rows, w.n, Location::device}, dq);
      const float add = k0 > 0 ? 1.0f : 0.0f;
      check_cublas(
          cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(w.n), static_cast<int>(x.rows),
                       static_cast<int>(rows), &alpha, slab, type, static_cast<int>(w.n),
                       static_cast<const std::byte*>(x.data) + k0 * esize, type,
                       static_cast<int>(w.k), &add, f32_sums ? sums : y.data,
                       f32_sums ? CUDA_R_32F : type, static_cast<int>(w.n), CUBLAS_COMPUTE_32F,
                       CUBLAS_GEMM_DEFAULT),
          "cublasGemmEx");
    }
    if (f32_sums) store_from_f32(sums, y, ctx);
    return;
  }
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
  if (p.layout == Layout::nk) {
    if (p.dtype != DType::f32 && p.m < 512)
      return "f16/bf16 [N, K] from M = 512 (below it the fused tensor-core kernels are faster)";
    if (p.k % 32 != 0) return "needs K % 32 == 0 (dequantize_affine's 32-code chunks)";
  } else if (p.n % 32 != 0) {
    return "needs N % 32 == 0 in the [K, N] layout (dequantize_affine's 32-code chunks)";
  }
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
  const Family family = w.format.info().family;
  if (family == Family::microscaled ||
      family == Family::fp8)  // dequantize_generic where it declines
    return dequantize_and_multiply(x, w, y, ctx, dequantize_scaled, "dequantize_scaled");
  if (family == Family::gguf && w.layout == Layout::nk && is_aligned(w.codes, 4))
    return dequantize_and_multiply(x, w, y, ctx, dequantize_gguf, "dequantize_gguf");
  dequantize_and_multiply(x, w, y, ctx, dequantize_generic, "dequantize_generic");
}

}  // namespace quanta::cuda
