// The CPU kernel table, in order of preference (first that accepts wins).
//
// The SIMD engine is one family compiled at three ISA levels; a level's entries accept only
// when the CPU runs it and no cap (cpu::force_isa, QUANTA_CPU_ISA) is below it, so the best
// level wins and a test can run each level in turn. Within a level, M = 1 takes the fused
// GEMV and M > 1 the tiled path. matmul_generic stays last as the portable fallback (reachable
// by name; the scalar level accepts everything before it).
#include <fmt/format.h>

#include <limits>

#include "cpu/backend.hpp"

namespace quanta::cpu {

namespace {
constexpr int64_t kAnyM = std::numeric_limits<int32_t>::max();
constexpr int64_t kFusedM = kGemvMaxRows;

template <Isa kIsa>
std::string supports_isa(const Problem&) {
  if (!isa_supported(kIsa))
    return fmt::format("needs {} (this CPU: {})", isa_name(kIsa), cpu_features().describe());
  if (static_cast<int>(active_isa()) < static_cast<int>(kIsa))
    return fmt::format("ISA capped at {} (cpu::force_isa or QUANTA_CPU_ISA)",
                       isa_name(active_isa()));
  return {};
}

// The fused path's rule: the ISA, and M within what it does better than the tiled path.
template <Isa kIsa>
std::string supports_fused(const Problem& p) {
  std::string why = supports_isa<kIsa>(p);
  if (why.empty() && p.op == Op::matmul)
    if (const int64_t most = fused_max_rows(p.format, p.layout, p.k, kIsa); p.m > most)
      why = fmt::format("M = {} > {} for {} {} (the tiled path is faster)", p.m, most,
                        p.format.name(), p.layout == Layout::nk ? "[N, K]" : "[K, N]");
  return why;
}

// AMX tile products: avx512 level with amx_active(), M from kAmxMinRows; bf16 or f16 x, or f32 x
// where the codes path pays (amx_codes_pays) or W takes one plane (amx_one_plane_w).
std::string supports_amx(const Problem& p) {
  std::string why = supports_isa<Isa::avx512>(p);
  if (why.empty() && !amx_active())
    why = cpu_features().amx_bf16 && cpu_features().avx512bf16
              ? "AMX off (QUANTA_CPU_AMX=0 or cpu::disable_amx)"
              : fmt::format("needs AMX-BF16 and AVX512-BF16 (this CPU: {})",
                            cpu_features().describe());
  if (why.empty() && p.dtype == DType::f32 &&
      !amx_codes_pays(p.format.scheme, p.format.group_size, p.layout, p.m, DType::f32) &&
      !amx_one_plane_w(p.format.scheme))
    why = fmt::format(
        "f32 activations: affine and the GGUF blocks of 32 (q4_0, q4_1, q5_0, q5_1, q8_0, q4_K, "
        "q5_K; q3_K from M = {}) in [N, K] (M <= {}), and mxfp4, mxfp8, nvfp4, e4m3 and e5m2, "
        "only (their values are exact in one bf16 plane: three tile products a step; other "
        "weights would need six, which ran 0.9-0.95x the AVX-512 tiled path)",
        kAmxQ3KMinRows, kAmxCodesMaxRowsF32);
  return why;
}

template <Isa kIsa, Path kPath>
void simd(ConstMatrixView x, const QuantizedMatrix& w, const int32_t* ids, MatrixView y,
          const Context& ctx) {
  matmul_simd(x, w, ids, y, ctx, kIsa, kPath);
}

// The SIMD dequantize: W [N, K], the packed formats and the GGUF blocks of
// dequantize_simd_exact (q3_K, q6_K and [K, N] stay on dequantize_generic).
template <Isa kIsa>
std::string supports_dequantize(const Problem& p) {
  std::string why = supports_isa<kIsa>(p);
  if (why.empty() && p.layout != Layout::nk) why = "the [N, K] layout only";
  if (why.empty() && p.format.info().family == Family::gguf &&
      !dequantize_simd_exact(p.format.scheme))
    why = "q3_K, q6_K: their SIMD decode is not bit-exact (dequantize_simd_exact)";
  return why;
}

template <Isa kIsa>
void dequantize_isa(const QuantizedMatrix& w, MatrixView out, const Context& ctx) {
  dequantize_simd(w, out, ctx, kIsa);
}

constexpr Isa kA512 = Isa::avx512, kA2 = Isa::avx2, kSc = Isa::scalar;
constexpr Path kGemv = Path::gemv, kTiled = Path::tiled, kAmx = Path::amx;

// clang-format off
const KernelEntry kTable[] = {
  // name                      op                  device          M range      supports             matmul              dequantize          why
  {"qmv_fused_avx512",         Op::matmul,         Location::host, 1, kFusedM,  supports_fused<kA512>, simd<kA512, kGemv>,  nullptr,            "M <= 4 (8 for q3_K/q5_K/q6_K, [K, N], and on VNNI CPUs the formats taking x as integer planes): packed weights stream once per 4 rows of x through registers, 16 lanes, threads over N (nk) or column panels (kn); the K-quants at M = 1 on VNNI dot products where the CPU has them; a matrix from quanta::prepack (VNNI CPUs; [K, N] packed as its transpose) on the packed VNNI GEMV ([N, K] on Intel from M = 3: cpu::pack_for_rows)"},
  {"qmm_amx_avx512",           Op::matmul,         Location::host, kAmxMinRows, kAnyM, supports_amx, simd<kA512, kAmx>, nullptr,            "M >= 32, AMX-BF16 CPUs. bf16/f16 x: the tile decoded to f32 in L1 and cut into two bf16 planes (w to 2^-16; W [K, N] in the B operand's pairs, x in the A operand), AMX tile products with f32 sums; bf16 x 1.1-1.6x the AVX-512 tiled path at M = 32, 2.0-3.3x at M = 128..512 ([K, N] 2.0-3.0x at 256..512); f16 x 1.3-2.3x at M = 128..512. W exact in one plane (mxfp4, mxfp8, nvfp4, e4m3, e5m2; the codes read from storage, fp8's row and nvfp4's global scale on the sums): one product per plane of x, f32 x in three planes ([N, K]): f32 x 1.1-1.5x the tiled path, bf16 x up to 1.9x the two-plane W. Affine g64/g128 [N, K] (f32 x to M = 1024, bf16 x to 512): the codes in one plane, a C tile per group scaled on the AVX side; f32 x 1.0-1.45x the tiled path (docs/perf-cpu.md)"},
  {"qmm_tiled_avx512",         Op::matmul,         Location::host, 1, kAnyM,    supports_isa<kA512>, simd<kA512, kTiled>, nullptr,            "larger M: decode a tile to f32 in L2 once, 6x4 (nk) / 6x64 (kn) micro-kernel over the M rows; 1.3-2x OpenBLAS sgemm on the dequantized weights"},
  {"gather_qmm_avx512",        Op::gather_matmul,  Location::host, 1, kAnyM,    supports_isa<kA512>, simd<kA512, kGemv>,  nullptr,            "rows grouped by expert, then the fused GEMV or tiled path per expert (an expert's rows on AMX where qmm_amx_avx512 would take them)"},
  {"qmv_fused_avx2",           Op::matmul,         Location::host, 1, kFusedM,  supports_fused<kA2>,   simd<kA2, kGemv>,    nullptr,            "fused GEMV on AVX2 (8 lanes); a matrix from quanta::prepack with codes of 2 to 6 bits (affine 2-6-bit, q4_0 .. q5_1, mxfp4, nvfp4; x86/avx2_int8.hpp) and q2_K-q6_K, packed (codes in quad order) or not (x86/avx2_kquant.hpp), on vpmaddubsw dot products with x as int8 planes"},
  {"qmm_tiled_avx2",           Op::matmul,         Location::host, 1, kAnyM,    supports_isa<kA2>,   simd<kA2, kTiled>,   nullptr,            "tiled on AVX2"},
  {"gather_qmm_avx2",          Op::gather_matmul,  Location::host, 1, kAnyM,    supports_isa<kA2>,   simd<kA2, kGemv>,    nullptr,            "MoE on AVX2"},
  {"qmv_fused_scalar",         Op::matmul,         Location::host, 1, kFusedM,  supports_fused<kSc>,   simd<kSc, kGemv>,    nullptr,            "fused GEMV, portable one-lane engine (any CPU)"},
  {"qmm_tiled_scalar",         Op::matmul,         Location::host, 1, kAnyM,    supports_isa<kSc>,   simd<kSc, kTiled>,   nullptr,            "tiled, portable one-lane engine"},
  {"gather_qmm_scalar",        Op::gather_matmul,  Location::host, 1, kAnyM,    supports_isa<kSc>,   simd<kSc, kGemv>,    nullptr,            "MoE, portable one-lane engine"},
  {"matmul_generic",           Op::matmul,         Location::host, 1, kAnyM,    nullptr,             matmul_generic,      nullptr,            "portable fallback: every format and layout"},
  {"gather_matmul_generic",    Op::gather_matmul,  Location::host, 1, kAnyM,    nullptr,             matmul_generic,      nullptr,            "portable fallback: rows grouped by expert"},
  {"dequantize_avx512",        Op::dequantize,     Location::host, 0, 0,        supports_dequantize<kA512>, nullptr,     dequantize_isa<kA512>, "[N, K], packed formats and the GGUF blocks of dequantize_simd_exact: a group's codes in 16 lanes, scale * q and + bias each rounded to the output dtype as the codec does (no FMA), threads over rows; bit-exact with dequantize_generic"},
  {"dequantize_avx2",          Op::dequantize,     Location::host, 0, 0,        supports_dequantize<kA2>,   nullptr,     dequantize_isa<kA2>,   "the same on AVX2 (8 lanes)"},
  {"dequantize_scalar",        Op::dequantize,     Location::host, 0, 0,        supports_dequantize<kSc>,   nullptr,     dequantize_isa<kSc>,   "the same, portable one-lane engine"},
  {"dequantize_generic",       Op::dequantize,     Location::host, 0, 0,        nullptr,             nullptr,             dequantize_generic, "decode rows with the owner's rounding (the codec); q3_K, q6_K, [K, N] and the fallback"},
};
// clang-format on
}  // namespace

std::span<const KernelEntry> kernels() {
  return kTable;
}

}  // namespace quanta::cpu
