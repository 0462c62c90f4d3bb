// qmm_affine_dq: large-M affine matmul as dequantize + cuBLAS. Slabs of W's rows are
// dequantized into a per-stream f16/bf16 buffer (dequantize_affine: bit-exact with the host
// decode) and multiplied with cublasGemmEx (f32 accumulation), slab after slab on the caller's
// stream.
//
// Why: the fused mma.sync kernel (qmm_affine_mma) dequantizes each tile into shared memory
// between barriers and reaches ~250 TFLOP/s, 0.3-0.4x cuBLAS from M = 64 up; dequantizing the
// whole of W costs about one read of the codes plus one write and read of the dense slab, small
// next to the GEMM once M is in the tens. A fused wgmma kernel is the way past this.
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
    throw Error(fmt::format("[quanta::matmul] qmm_affine_dq: {} failed: {} ({})", what,
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

}  // namespace

std::string qmm_affine_dq_supports(const Problem& p) {
  if (p.format.scheme != Scheme::affine) return "affine only";
  if (p.layout != Layout::nk) return "the [N, K] layout only";
  if (p.dtype == DType::f32) return "f16/bf16 activations only (a dense f16/bf16 GEMM)";
  if (p.batch != 1) return "one matrix (no expert stack)";
  if (p.k % 32 != 0) return "needs K % 32 == 0 (dequantize_affine's 32-code chunks)";
  if (p.k * 2 * 128 > static_cast<int64_t>(kSlabBytes))
    return "K too long for a slab of 128 dense rows";
  return {};
}

void qmm_affine_dq(ConstMatrixView x, const QuantizedMatrix& w, const int32_t*, MatrixView y,
                   const Context& ctx) {
  constexpr std::string_view kName = "qmm_affine_dq", kOp = "matmul";
  require_device_operands(x, w, nullptr, y, kOp);
  if (!alignment_ok(w.codes, 16, ctx, kName, kOp, "w.codes"))
    return matmul_generic(x, w, nullptr, y, ctx);
  const auto stream = static_cast<cudaStream_t>(ctx.cuda_stream);
  // Slabs of equal size (a multiple of 128 rows) within the budget; QUANTA_QMM_DQ_SLAB_MB
  // lowers the budget (tests, tuning).
  std::size_t budget = kSlabBytes;
  if (const char* e = std::getenv("QUANTA_QMM_DQ_SLAB_MB"); e && std::atoi(e) > 0)
    budget = std::min(budget, static_cast<std::size_t>(std::atoi(e)) << 20);
  const int64_t row_bytes = w.k * 2;
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
  const cudaDataType_t type = x.dtype == DType::f16 ? CUDA_R_16F : CUDA_R_16BF;
  const int64_t code_row = w.k * w.format.bits / 8;
  const int64_t scale_row =
      w.k / w.format.group_size * static_cast<int64_t>(dtype_size(w.scale_dtype));
  const float alpha = 1.0f, beta = 0.0f;
  for (int64_t r0 = 0; r0 < w.n; r0 += slab_rows) {
    const int64_t rows = std::min(slab_rows, w.n - r0);
    QuantizedMatrix part = w;
    part.n = rows;
    part.codes = w.codes + r0 * code_row;
    part.scales = w.scales + r0 * scale_row;
    part.biases = w.biases + r0 * scale_row;
    Context dq = ctx;
    dq.kernel = "dequantize_affine";
    dequantize_affine(part, MatrixView{slab, x.dtype, rows, w.k, Location::device}, dq);
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

}  // namespace quanta::cuda
