// qmm_scaled_rf host side: qmm_affine_rf's register-fed mma.sync kernel (qmm_affine_rf.cuh) on
// the microscaled (mxfp4, nvfp4, mxfp8) and fp8 (e4m3, e5m2) formats in the [N, K] layout: each
// code pair becomes an exact f16/bf16 pair of v·s (fp8: v, its row or tensor scale applied to the
// f32 sums, as nvfp4's tensor scale), so the rows of x are the mma's columns and one pass over W
// serves up to 32 of them. The supports rule, the stream-K grid and the dispatch to the
// instances in qmm_scaled_rf_fp4.cu and qmm_scaled_rf_fp8.cu.
#include <algorithm>
#include <string>

#include "cuda/checks.hpp"
#include "cuda/families.hpp"
#include "cuda/qmm_affine_rf.cuh"
#include "cuda/scaled_rules.cuh"
#include "cuda/stream_k.hpp"
#include "quanta/error.hpp"

namespace quanta::cuda {

QUANTA_SRF_FP4(extern)
QUANTA_SRF_FP8(extern)

std::string qmm_scaled_rf_supports(const Problem& p) {
  if (std::string why = scaled_mma_reason(p); !why.empty()) return why;
  if (p.op != Op::matmul || p.batch != 1) return "one matrix (a stack runs gather_qmv_scaled)";
  return {};
}

std::string qmm_scaled_rf_ahead_supports(const Problem& p) {
  if (std::string why = qmm_scaled_rf_supports(p); !why.empty()) return why;
  if (p.m < 3 && p.format.scheme != Scheme::nvfp4)
    return "ahead of qmv_scaled_mma from M = 3 (nvfp4 from M = 2), where it measured faster";
  return {};
}

void qmm_scaled_rf(ConstMatrixView x, const QuantizedMatrix& w, const int32_t*, MatrixView y,
                   const Context& ctx) {
  constexpr std::string_view kName = "qmm_scaled_rf", kOp = "matmul";
  require_device_operands(x, w, nullptr, y, kOp);
  const Scheme s = w.format.scheme;
  if (!scaled_operands_aligned(x, w, ctx, kName, kOp)) return matmul_generic(x, w, nullptr, y, ctx);
  TcArgs a{};
  a.codes = reinterpret_cast<const uint8_t*>(w.codes);
  a.scales = reinterpret_cast<const uint8_t*>(w.scales);
  a.x = x.data;
  a.y = y.data;
  a.m = static_cast<int32_t>(x.rows);
  a.n = static_cast<int32_t>(w.n);
  a.k = static_cast<int32_t>(w.k);
  a.log2_group = w.format.group_size == 32 ? 5 : w.format.group_size == 16 ? 4 : 0;
  a.global = w.global_scale ? *w.global_scale : 1.0f;
  a.per_row = w.format.granularity == Granularity::channel ? 1 : 0;
  const cudaStream_t stream = stream_of(ctx);
  // Past 32 rows of x, passes of up to 32 (each reads W once more; at M = 33..64 two passes beat
  // dequantize_scaled + cuBLAS, docs/PERF.md).
  const int32_t m_all = a.m;
  auto run = [&]<class T, Scheme SCH>() {
    for (int32_t r0 = 0; r0 < m_all; r0 += 8 * kRfMaxMT) {
      TcArgs pass = a;
      pass.m = std::min<int32_t>(8 * kRfMaxMT, m_all - r0);
      pass.x = static_cast<const T*>(a.x) + static_cast<int64_t>(r0) * a.k;
      pass.y = static_cast<T*>(a.y) + static_cast<int64_t>(r0) * a.n;
      auto tiles = [&]<int MT>() {
        const int ctas = choose_stream_k_grid(pass, occupancy_qmm_scaled_rf<T, SCH, MT>());
        stream_k_scratch(pass, stream);
        launch_qmm_scaled_rf<T, SCH, MT>(pass, dim3(static_cast<unsigned>(ctas)), stream);
      };
      if (pass.m <= 8)
        tiles.template operator()<1>();
      else if (pass.m <= 16)
        tiles.template operator()<2>();
      else
        tiles.template operator()<4>();
    }
  };
  const bool bf16 = x.dtype == DType::bf16;
  if (x.dtype != DType::f16 && !bf16)
    throw Error("[quanta::matmul] qmm_scaled_rf: x must be f16 or bf16");
  switch (s) {
    case Scheme::mxfp4:
      if (bf16) return run.template operator()<__nv_bfloat16, Scheme::mxfp4>();
      break;
    case Scheme::mxfp8:
      if (bf16) return run.template operator()<__nv_bfloat16, Scheme::mxfp8>();
      break;
    case Scheme::nvfp4:
      return bf16 ? run.template operator()<__nv_bfloat16, Scheme::nvfp4>()
                  : run.template operator()<__half, Scheme::nvfp4>();
    case Scheme::fp8_e4m3:
      return bf16 ? run.template operator()<__nv_bfloat16, Scheme::fp8_e4m3>()
                  : run.template operator()<__half, Scheme::fp8_e4m3>();
    case Scheme::fp8_e5m2:
      return bf16 ? run.template operator()<__nv_bfloat16, Scheme::fp8_e5m2>()
                  : run.template operator()<__half, Scheme::fp8_e5m2>();
    default:
      break;
  }
  throw Error("[quanta::matmul] qmm_scaled_rf: " + std::string(w.format.info().name) + " with " +
              std::string(dtype_name(x.dtype)) + " x is not served");
}

}  // namespace quanta::cuda
