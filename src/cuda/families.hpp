// The CUDA kernel families' entry points and `supports` rules, as the kernel table
// (src/cuda/kernels.cpp) lists them. Host-only header: no CUDA types, so the table and the
// CPU-side selection tests compile with the host compiler.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "core/kernel.hpp"

namespace quanta::cuda {

// matmul_generic.cu: every format and layout, every M; decode each element with the shared
// codecs, accumulate in f32. The fallback that always accepts.
void matmul_generic(ConstMatrixView x, const QuantizedMatrix& w, const int32_t* expert_ids,
                    MatrixView y, const Context& ctx);
void dequantize_generic(const QuantizedMatrix& w, MatrixView out, const Context& ctx);

// qmm_affine_tc.cuh (+ qmm_affine_tc_b*.cu): affine nk, f16/bf16, M <= 32, tensor cores
// (mma.sync m16n8k16, f32 accumulate) on weights dequantized in registers; split-K.
std::string qmm_affine_tc_supports(const Problem& p);
void qmm_affine_tc(ConstMatrixView x, const QuantizedMatrix& w, const int32_t* expert_ids,
                   MatrixView y, const Context& ctx);

// The same kernel for M = 1 with the scale·Σq·x + bias·Σx split: codes enter the mma
// undequantized, groups are the mma's columns, scales apply per group in f32.
std::string qmv_affine_tc_supports(const Problem& p);
void qmv_affine_tc(ConstMatrixView x, const QuantizedMatrix& w, const int32_t* expert_ids,
                   MatrixView y, const Context& ctx);

// qmv_affine_rd.cu: affine nk, f16/bf16, M = 1; codes streamed straight into registers and
// fed to mma.sync under a magic number, groups as mma columns, scales per group in f32.
std::string qmv_affine_rd_supports(const Problem& p);
void qmv_affine_rd(ConstMatrixView x, const QuantizedMatrix& w, const int32_t* expert_ids,
                   MatrixView y, const Context& ctx);

// qmv_affine_i8.cu: affine nk, f16/bf16, 2-6/8-bit, M <= 2; x as two int8 planes per group
// (a pre-pass), codes as u8 mma operands (m16n8k32), int32 accumulation. With expert ids
// (gather_matmul, any M): a row of x and its expert's matrix a grid row.
std::string qmv_affine_i8_supports(const Problem& p);
std::string gather_qmv_affine_i8_supports(const Problem& p);
void qmv_affine_i8(ConstMatrixView x, const QuantizedMatrix& w, const int32_t* expert_ids,
                   MatrixView y, const Context& ctx);

// qmm_affine_i8.cu: affine nk, f16/bf16, 2/4/8-bit, M <= 8; qmv_affine_i8's integer mma with
// the rows of x as the mma's columns (one mma serves 4 rows of x).
std::string qmm_affine_i8_supports(const Problem& p);
void qmm_affine_i8(ConstMatrixView x, const QuantizedMatrix& w, const int32_t* expert_ids,
                   MatrixView y, const Context& ctx);

// qmm_affine_rf.cu: affine nk, 4-bit, f16/bf16, small and medium M; codes streamed straight into
// registers and dequantized there, x and scales staged once per 128-row block, mma.sync, stream-K.
std::string qmm_affine_rf_supports(const Problem& p);
void qmm_affine_rf(ConstMatrixView x, const QuantizedMatrix& w, const int32_t* expert_ids,
                   MatrixView y, const Context& ctx);

// qmm_affine_ring.cu: affine nk, 4-bit, f16/bf16, M <= 16, sm_90a, forced only; qmm_affine_rf's
// arithmetic with each warp's codes, scales and biases in its own ring of bulk tensor copies.
std::string qmm_affine_ring_supports(const Problem& p);
void qmm_affine_ring(ConstMatrixView x, const QuantizedMatrix& w, const int32_t* expert_ids,
                     MatrixView y, const Context& ctx);

// qmm_affine_repack.cu: affine [K, N]: W transposed into a per-stream [N, K] copy (or the one
// quanta::prepack made), then the [N, K] kernel the selector picks.
std::string qmm_affine_repack_supports(const Problem& p);
std::string qmm_affine_repack_ahead_supports(const Problem& p);   // M = 6..8 ahead of qvm_affine
std::string qmm_affine_repack_packed_supports(const Problem& p);  // a device pack: every M
std::shared_ptr<const DevicePack> make_kn_device_pack(const QuantizedMatrix& w, const Context& ctx);
void qmm_affine_repack(ConstMatrixView x, const QuantizedMatrix& w, const int32_t* expert_ids,
                       MatrixView y, const Context& ctx);

// qmm_dq.cpp: slabs of W dequantized to x's dtype and multiplied by cuBLAS; qmm_affine_dq with
// dequantize_affine ([N, K] larger M; [K, N] from M = 9 when forced), qmm_generic_dq (every other
// format) with dequantize_scaled (microscaled and fp8 [N, K]) or dequantize_generic.
// dense_store.cu: dst = src (f32) in dst's dtype, the [K, N] slabs' f32 sums.
void store_from_f32(const float* src, MatrixView dst, const Context& ctx);
std::string qmm_affine_dq_supports(const Problem& p);
void qmm_affine_dq(ConstMatrixView x, const QuantizedMatrix& w, const int32_t* expert_ids,
                   MatrixView y, const Context& ctx);
std::string qmm_generic_dq_supports(const Problem& p);
void qmm_generic_dq(ConstMatrixView x, const QuantizedMatrix& w, const int32_t* expert_ids,
                    MatrixView y, const Context& ctx);

// qmv_scaled.cu: mxfp4, nvfp4, mxfp8 and fp8 nk, any dtype, small M: CUDA cores, each code read
// once per four rows of x.
std::string qmv_scaled_supports(const Problem& p);
std::string qmv_scaled_ahead_supports(const Problem& p);  // M <= 8 (f32: 16), before the dq path
void qmv_scaled(ConstMatrixView x, const QuantizedMatrix& w, const int32_t* expert_ids,
                MatrixView y, const Context& ctx);
// qmv_gguf.cu: GGUF block formats nk, any dtype, small M: CUDA cores, each row's blocks loaded
// coalesced into shared memory and decoded there, each code read once per four rows of x.
std::string qmv_gguf_supports(const Problem& p);
void qmv_gguf(ConstMatrixView x, const QuantizedMatrix& w, const int32_t* expert_ids, MatrixView y,
              const Context& ctx);
// qmm_gguf_mma.cu: GGUF block formats nk, f16/bf16 x, past qmv_gguf's M: each block's integers
// exact in x's dtype as mma.sync's A, scaled into f32 sums per piece or half.
std::string qmm_gguf_mma_supports(const Problem& p);
void qmm_gguf_mma(ConstMatrixView x, const QuantizedMatrix& w, const int32_t* expert_ids,
                  MatrixView y, const Context& ctx);
// Expert stacks on the same kernel: the rows of x grouped by expert on the device
// (expert_passes.hpp), a pass of up to 32 rows of one expert at a time.
// Experts the device grouping (expert_passes.hpp) counts in shared memory; a stack with more
// takes the per-row kernels.
inline constexpr int64_t kMaxGroupedExperts = 2048;
// The grouped gathers' ahead entries: why M is too few rows an expert on average for grouping to
// pay, with `faster` the one-row kernel that runs instead (empty when grouping pays).
inline std::string too_few_rows_an_expert(const Problem& p, int64_t rows, std::string_view faster) {
  if (p.m >= rows * p.batch) return {};
  return "M = " + std::to_string(p.m) + " rows over " + std::to_string(p.batch) +
         " experts: fewer than " + std::to_string(rows) + " an expert on average (" +
         std::string(faster) + " is faster there)";
}
std::string gather_qmm_gguf_mma_supports(const Problem& p);
std::string gather_qmm_gguf_mma_ahead_supports(const Problem& p);  // M >= 2 rows an expert
// The same on tensor cores (f16/bf16 x, K % 128 == 0): groups as the mma's columns.
std::string qmv_scaled_mma_supports(const Problem& p);
void qmv_scaled_mma(ConstMatrixView x, const QuantizedMatrix& w, const int32_t* expert_ids,
                    MatrixView y, const Context& ctx);

// qmm_scaled_rf.cu: qmm_affine_rf's kernel on microscaled and fp8 [N, K] codes (v·s as the mma's
// A), f16/bf16 x (E8M0 scales: bf16 only), M <= 32.
std::string qmm_scaled_rf_supports(const Problem& p);
std::string qmm_scaled_rf_ahead_supports(const Problem& p);  // M >= 3 (nvfp4: 2), before the mma
void qmm_scaled_rf(ConstMatrixView x, const QuantizedMatrix& w, const int32_t* expert_ids,
                   MatrixView y, const Context& ctx);

// gather_qmv_affine.cu: gather_matmul for affine [N, K] expert stacks, every width and dtype:
// CUDA cores, a row of x and its expert's matrix a pass, ids checked on the device.
std::string gather_qmv_affine_supports(const Problem& p);
void gather_qmv_affine(ConstMatrixView x, const QuantizedMatrix& w, const int32_t* expert_ids,
                       MatrixView y, const Context& ctx);

// qmm_affine_wgmma.cu: affine nk 2/4/8-bit (groups of 64k), f16/bf16, M >= 33, sm_90a; CUTLASS's
// mixed-input wgmma GEMM, codes converted and scaled in registers, stream-K.
std::string qmm_affine_wgmma_supports(const Problem& p);
void qmm_affine_wgmma(ConstMatrixView x, const QuantizedMatrix& w, const int32_t* expert_ids,
                      MatrixView y, const Context& ctx);

// qmm_affine_wgrf.cu: affine nk 4-bit, f16/bf16, sm_90a (selected at M = 33..64, any M forced);
// codes dequantized in registers into wgmma's A (register form), x as B from shared memory (a
// pre-pass writes its swizzled image), K split over CTAs where the row tiles are few.
std::string qmm_affine_wgrf_supports(const Problem& p);
std::string qmm_affine_wgrf_ahead_supports(const Problem& p);  // M = 33..64, large N: selected
void qmm_affine_wgrf(ConstMatrixView x, const QuantizedMatrix& w, const int32_t* expert_ids,
                     MatrixView y, const Context& ctx);

// qmm_affine_mma.cu: affine nk, f16/bf16, larger M; tiles dequantized into shared memory,
// ldmatrix + mma.sync, multi-stage cp.async pipeline.
std::string qmm_affine_mma_supports(const Problem& p);
void qmm_affine_mma(ConstMatrixView x, const QuantizedMatrix& w, const int32_t* expert_ids,
                    MatrixView y, const Context& ctx);
// Expert stacks on the same kernel (gather_matmul): the rows of x grouped by expert on the device
// (expert_passes.hpp), a pass of up to 128 rows of one expert per grid row.
std::string gather_qmm_affine_mma_supports(const Problem& p);
std::string gather_qmm_affine_mma_ahead_supports(const Problem& p);  // 8-11 rows an expert

// gather_qmm_scaled_mma.cu: the same grouping and tile kernel for the microscaled and fp8 [N, K]
// expert stacks (f16/bf16 x; E8M0-scaled codes with bf16 x only).
std::string gather_qmm_scaled_mma_supports(const Problem& p);
std::string gather_qmm_scaled_mma_ahead_supports(const Problem& p);  // 8 (fp4) / 4 rows an expert
void gather_qmm_scaled_mma(ConstMatrixView x, const QuantizedMatrix& w, const int32_t* expert_ids,
                           MatrixView y, const Context& ctx);

// qmv_affine_f32.cu: affine nk, f32 activations, small M, CUDA cores with the
// scale·Σq·x + bias·Σx split.
std::string qmv_affine_f32_supports(const Problem& p);
void qmv_affine_f32(ConstMatrixView x, const QuantizedMatrix& w, const int32_t* expert_ids,
                    MatrixView y, const Context& ctx);

// qvm_affine.cu: affine kn layout (W stored [K, N]), any dtype, small M.
std::string qvm_affine_supports(const Problem& p);
void qvm_affine(ConstMatrixView x, const QuantizedMatrix& w, const int32_t* expert_ids,
                MatrixView y, const Context& ctx);

// dequantize.cu: affine, both layouts, bit-exact with the host codec.
std::string dequantize_affine_supports(const Problem& p);
void dequantize_affine(const QuantizedMatrix& w, MatrixView out, const Context& ctx);
// dequantize.cu: mxfp4, nvfp4, mxfp8 and fp8 [N, K], 32 codes a thread (dequantize_generic where
// its alignment rules fail).
std::string dequantize_scaled_supports(const Problem& p);
void dequantize_scaled(const QuantizedMatrix& w, MatrixView out, const Context& ctx);
// dequantize_gguf.cu: the GGUF block formats [N, K], a warp per 1024-element row segment
// (dequantize_generic where its alignment rules fail).
std::string dequantize_gguf_supports(const Problem& p);
void dequantize_gguf(const QuantizedMatrix& w, MatrixView out, const Context& ctx);

}  // namespace quanta::cuda
