// CPU kernel families (entry points listed in src/cpu/kernels.cpp). Arguments arrive
// validated by the op layer.
#pragma once

#include "core/kernel.hpp"
#include "cpu/isa.hpp"

namespace quanta::cpu {

// generic.cpp: decode a stored row to f32, multiply-accumulate in f32. Every format, layout,
// M and expert stack; the fallback that always accepts.
void matmul_generic(ConstMatrixView x, const QuantizedMatrix& w, const int32_t* expert_ids,
                    MatrixView y, const Context& ctx);
void dequantize_generic(const QuantizedMatrix& w, MatrixView out, const Context& ctx);

// fast.cpp: the SIMD engine (src/cpu/engine) at one ISA level, multithreaded over
// Context::threads. Every format, layout, M and expert stack.
//   Path::gemv  M <= fused_max_rows streams the packed weights through registers (fused GEMV,
//               once per four rows of x); other M run the tiled path.
//   Path::tiled decodes tiles of W to f32 in cache and reuses them across the M rows.
//   Path::amx   bf16/f16 x with amx_active(): the tiles as bf16 planes on AMX tile products
//               (src/cpu/x86/amx_gemm.hpp); f32 x where amx_codes_pays (the codes path);
//               any other problem runs as Path::tiled.
//               Path::gemv takes it too for M >= kAmxMinRows (the grouped experts' rows).
enum class Path : uint8_t { gemv, tiled, amx };
inline constexpr int64_t kGemvMaxRows = 8;
// M from which the AMX tile products (Path::amx) run where the CPU has them: bf16 x at M = 16
// ran 0.71-1.07x the AVX-512 tiled path, at M = 32 1.09-1.63x (docs/perf-cpu.md).
inline constexpr int64_t kAmxMinRows = 32;
// The AMX codes path (amx_gemm.hpp kCodeXPlanes: exact weight values in one bf16 plane, x in 1
// (bf16) or 3 (f32) planes, a C tile per group) where it measured faster than the alternative,
// W [N, K] (Emerald Rapids VM, 4096 x 14336; docs/perf-cpu.md):
//   f32 x, M <= kAmxCodesMaxRowsF32: affine groups of 32, 64 or 128 (and mxfp4 before it took one
//     plane with its scales, amx_one_plane_w), and the GGUF blocks of 32 (q4_1, q5_0, q5_1, q4_K,
//     q5_K: 1.05-1.24x at M = 32..512, q4_0 / q8_0 1.02-1.19x; q3_K from kAmxQ3KMinRows: its
//     16-element scales go into the codes, 1.02-1.06x at M = 128, 1.10x at 512..1024, but
//     0.8-0.95x at M = 33..48 and a tie at 64..96), against the AVX-512
//     tiled path: M = 32..256 1.0-1.4x, M = 512 1.15-1.45x and M = 1024 1.1-1.3x once 4/8-bit
//     codes went into the tiles straight from storage (before that M = 512 ran 0.73-1.14x);
//     groups of 32, a C tile every step, 0.85-0.95x at first, 1.0-1.45x since (every width,
//     M = 32..1024);
//   bf16 x, M <= kAmxCodesMaxRowsBf16: affine groups of 64 or 128 (one product a step against the
//     two-plane W's two: 8 of 10 pairs faster at M = 32..256, up to 1.9x; M = 512 1.0-1.1x,
//     M = 1024 mixed); groups of 32 lost (affine 0.8-0.9x, mxfp4 0.7-0.9x). f16 x (2 products
//     against 3) measured mixed and stays on two planes, as do the formats whose values are not
//     exact.
inline constexpr int64_t kAmxCodesMaxRowsF32 = 1024;
inline constexpr int64_t kAmxCodesMaxRowsBf16 = 512;
inline constexpr int64_t kAmxQ3KMinRows = 128;
inline bool amx_codes_pays(Scheme s, int group, Layout layout, int64_t m, DType x) {
  if (layout != Layout::nk) return false;
  // The GGUF blocks of 32 (d · q + m, or d · (q - 8|16)) and the K-quants' sub-blocks of 32
  // (d · sc · q - dmin · m; q3_K d · (sc · q), its 16-element scales in the codes): affine in
  // groups of 32.
  const bool gguf = s == Scheme::q4_0 || s == Scheme::q4_1 || s == Scheme::q5_0 ||
                    s == Scheme::q5_1 || s == Scheme::q8_0 || s == Scheme::q3_K ||
                    s == Scheme::q4_K || s == Scheme::q5_K;
  if (s == Scheme::q3_K && m < kAmxQ3KMinRows) return false;
  if (x == DType::f32) return m <= kAmxCodesMaxRowsF32 && (s == Scheme::affine || gguf);
  if (s != Scheme::affine) return false;
  return x == DType::bf16 && m <= kAmxCodesMaxRowsBf16 && (group == 64 || group == 128);
}
// Weights whose values one bf16 plane holds exactly: mxfp4 and mxfp8 (a significand of at most 4
// bits times 2^E, scale included), nvfp4 (E2M1 times an E4M3 scale: 6 bits; the global scale
// taken on the sums), e4m3 and e5m2 (the row or tensor scale taken on the sums). The AMX path
// takes them in one plane (amx_gemm.hpp split_w; a task with a value it cannot hold runs the f32
// path), with every x dtype (f32 in three planes, W [N, K]); mxfp4 no longer takes the codes
// path, which stores a C tile at each of its groups of 32.
inline bool amx_one_plane_w(Scheme s) {
  return s == Scheme::mxfp4 || s == Scheme::mxfp8 || s == Scheme::nvfp4 || s == Scheme::fp8_e4m3 ||
         s == Scheme::fp8_e5m2;
}
// The most rows of x the fused path takes for this problem at ISA level `isa`: 8 for W [K, N];
// for W [N, K] 4, or 8 for q3_K, q5_K and q6_K, whose tiles cost the most to decode (M = 5 and
// 8, 4096 x 14336: fused 4.6-5.9 ms, tiled 7.8-9.0 ms), and for the formats whose GEMV takes x
// as integer planes (affine, q4_0 .. q8_0, mxfp4, nvfp4; K % 128 == 0) where the VNNI
// kernels run (two passes 1.2-2.0x the tiled path); the tiled path wins from M = 5 for the rest
// (docs/perf-cpu.md).
int64_t fused_max_rows(const Format& f, Layout layout, int64_t k, Isa isa);
// M from which the tiled path packs W [N, K] tiles K-major for the outer-product micro-kernel
// (INT64_MAX: never, as at the scalar level and for W [K, N]). The transpose costs about what
// the dot form's lane reductions do near M = 32; formats whose decode into a large tile is
// slow (q3_K, q5_K, q6_K, fp8) gain at once, the E2M1 ones only later (docs/perf-cpu.md).
int64_t packed_min_rows(const Format& f, Layout layout, Isa isa);
void matmul_simd(ConstMatrixView x, const QuantizedMatrix& w, const int32_t* expert_ids,
                 MatrixView y, const Context& ctx, Isa isa, Path path);
// W [N, K] of the packed formats and of the GGUF blocks in dequantize_simd_exact: bit-exact
// with dequantize_generic.
void dequantize_simd(const QuantizedMatrix& w, MatrixView out, const Context& ctx, Isa isa);
// The GGUF blocks whose SIMD decode equals the codec bit for bit: q4_0 and q5_0 as the codec's
// (q - 8) · d and (q - 16) · d; the others' products d · q (d · sc · q) are exact in f32, so the
// tile decoder's one FMA (d · q - m) rounds once as the codec does. Not q6_K and q3_K (products
// of 25+ bits, rounded in a different order).
inline bool dequantize_simd_exact(Scheme s) {
  return s == Scheme::q4_0 || s == Scheme::q5_0 || s == Scheme::q4_1 || s == Scheme::q5_1 ||
         s == Scheme::q8_0 || s == Scheme::q2_K || s == Scheme::q4_K || s == Scheme::q5_K;
}

struct IsaKernels;
const IsaKernels& isa_kernels(Isa isa);

}  // namespace quanta::cpu
