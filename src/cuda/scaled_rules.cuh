// Host rules the microscaled and fp8 kernels share (qmv_scaled, qmv_scaled_mma, qmm_scaled_rf,
// gather_qmm_scaled_mma, dequantize_scaled): which schemes they decode, what their tensor-core
// kernels need of a problem, and the alignment their loads rely on.
#pragma once

#include <climits>
#include <string>
#include <string_view>

#include "core/kernel.hpp"         // Problem
#include "cuda/checks.hpp"         // alignment_ok
#include "cuda/scaled_decode.cuh"  // scale_alignment
#include "quanta/format.hpp"
#include "quanta/matrix.hpp"

namespace quanta::cuda {

// mxfp4 and mxfp8 scale by E8M0 (a power of two): v·2^e is exact in bf16 but can leave f16's
// range, so their tensor-core kernels take bf16 x only.
constexpr bool e8m0_scaled(Scheme s) {
  return s == Scheme::mxfp4 || s == Scheme::mxfp8;
}

// The microscaled and fp8 schemes, the formats these kernels decode.
constexpr bool scaled_scheme(Scheme s) {
  return e8m0_scaled(s) || s == Scheme::nvfp4 || s == Scheme::fp8_e4m3 || s == Scheme::fp8_e5m2;
}

// Why a tensor-core scaled kernel (qmm_scaled_rf, gather_qmm_scaled_mma) cannot take p's shape and
// dtypes, or empty: a scaled scheme [N, K], f16 / bf16 x (bf16 for E8M0 scales), sm_80+, whole
// 32-code chunks, M, N and K in int32. The kernels add their rules on op and experts.
inline std::string scaled_mma_reason(const Problem& p) {
  const Scheme s = p.format.scheme;
  if (!scaled_scheme(s)) return "mxfp4, nvfp4, mxfp8, e4m3 or e5m2 only";
  if (p.layout != Layout::nk) return "the [N, K] layout only";
  if (p.dtype == DType::f32) return "needs f16 or bf16 activations (tensor cores)";
  if (e8m0_scaled(s) && p.dtype != DType::bf16)
    return "E8M0-scaled codes need bf16 x (v·2^e, exact in bf16, can leave f16's range)";
  if (p.compute_capability != 0 && p.compute_capability < 80)
    return "needs sm_80 or newer (bf16 mma.sync)";
  if (p.k % 32 != 0) return "needs K % 32 == 0 (32-code chunks), K = " + std::to_string(p.k);
  if (p.n > INT32_MAX || p.k > INT32_MAX || p.m > INT32_MAX) return "needs M, N and K in int32";
  return {};
}

// The loads every scaled kernel relies on: codes and x in 16 bytes, scales per scale_alignment.
// False when the selector's pick should fall back (alignment_ok: an error when forced).
inline bool scaled_operands_aligned(ConstMatrixView x, const QuantizedMatrix& w, const Context& ctx,
                                    std::string_view kernel, std::string_view op) {
  return alignment_ok(w.codes, 16, ctx, kernel, op, "w.codes") &&
         alignment_ok(x.data, 16, ctx, kernel, op, "x") &&
         alignment_ok(w.scales, scale_alignment(w.format.scheme), ctx, kernel, op, "w.scales");
}

}  // namespace quanta::cuda
