// The flat description of a weight matrix that the per-ISA kernel files read, and the table of
// entry points each of them exports. Those files are compiled with -mavx2 / -mavx512*: they
// see only these plain structs and raw pointers, never a std:: or quanta:: inline function
// (the linker could otherwise keep a copy built for AVX-512 and run it on any CPU).
#pragma once

#include <cstdint>

#include "quanta/dtype.hpp"
#include "quanta/format.hpp"
#include "quanta/matrix.hpp"

namespace quanta::cpu {

// Bytes any decoder may read past the last byte of a storage row (whole-vector loads of
// packed codes). Rows that end closer than this to the end of the codes buffer are served
// from a padded copy (WeightPlan::tail_*).
inline constexpr int64_t kRowOverread = 64;

struct WeightPlan {
  Scheme scheme = Scheme::affine;
  Layout layout = Layout::nk;
  Granularity granularity = Granularity::group;
  DType scale_dtype = DType::f32;  // affine scales and biases
  int bits = 0;
  int group = 0;  // elements along K per scale (GGUF: block), 0 for fp8
  int64_t n = 0, k = 0;
  int64_t row_bytes = 0;  // bytes per storage row (an N-row for nk, a K-row for kn)
  const uint8_t* codes = nullptr;
  int64_t tail_row = 0;  // storage rows >= tail_row are read from tail_codes
  const uint8_t* tail_codes = nullptr;
  const uint8_t* scales = nullptr;  // affine: [rows, K/G] (nk) or [K/G, N] (kn) of scale_dtype
  const uint8_t* biases = nullptr;
  float global = 1.0f;  // nvfp4 global scale, 1 when absent
  // M = 1 GEMV only: 2-bit affine groups of half a quad-order chunk are read in pairs
  // (gemv.hpp kQuadHalf); the several-rows-of-x path measured faster in the natural order.
  bool quad_pairs = false;
  // GEMV only, decided once per call (int8_active()): the K-quants, affine (every width), GGUF
  // q4_0 .. q8_0, mxfp4 and nvfp4 take x as integer planes
  // (x86/vnni_kquant.hpp, x86/vnni_affine.hpp) on the avx512 level, the packed 2-6-bit formats
  // (x86/avx2_int8.hpp) and the K-quants (x86/avx2_kquant.hpp) on the avx2 level.
  bool int8_x = false;
  // With int8_x, how the next pass of rows is prefetched (gemv_prefetch()): into L2 instead of
  // L1, and per row at the current offset instead of as one run.
  bool prefetch_l2 = false;
  bool prefetch_rows = false;
  // With int8_x at the avx2 level: the packed GEMVs' dot products on AVX-VNNI's vpdpbusd
  // (avx_vnni_active(), opt-in for now; x86/avx2_int8.hpp, x86/avx2_kquant.hpp).
  bool avx_vnni = false;
  // x arrived as bf16 (8 significant bits): the VNNI GEMVs take two of x's three int8 planes, x
  // rounded to 14 bits below each block's largest |x| (the third plane's dot products skipped),
  // and q6_K one of its two int16 planes (15 bits).
  bool x_bf16 = false;
  // The rows as quanta::prepack packed them (cpu/pack.hpp), or null: with int8_x, the affine
  // GEMV at M = 1..4 reads these instead of codes, scales and biases.
  const uint8_t* pack = nullptr;
  int64_t pack_tile_bytes = 0;  // four rows
  int pack_steps = 0;           // blocks of 128 weights per full chunk
  // mxfp4 / nvfp4 packed: codes are E2M1 (the kernel maps each to 2·value + 12, 0..24) and the
  // chunks hold only the scale bytes: E8M0, taken as 2^(E - 128), or (pack_e4m3) E4M3, taken at
  // half its value with the sum times `global` at the end; each group's bias is -12 times its
  // scale.
  bool pack_e2m1 = false;
  bool pack_e4m3 = false;
  // q2_K-q6_K rows from the avx2 level's pack (cpu/pack.hpp: the rows as stored, each block's
  // codes in quad order), or null: read by the K-quant GEMV of that level only
  // (x86/avx2_kquant.hpp); the other kernels read codes.
  const uint8_t* kquant_quad = nullptr;
};

// Whether the affine-family VNNI GEMV (x86/vnni_affine.hpp) serves a matrix of this scheme: affine
// (every width, packed or not), GGUF q4_0 .. q8_0, mxfp4 and nvfp4, K a multiple of its
// 128-element block. One rule for the engine's choice (gemv_int8_x) and the
// selector's fused range (fused_max_rows); defined in fast.cpp (generic code, not an inline
// function the ISA files would each compile).
bool affine_planes_gemv(Scheme s, int64_t k);

// q2_K-q6_K: their integer GEMVs (x86/vnni_kquant.hpp, x86/avx2_kquant.hpp) read the rows as
// stored, or the avx2 level's pack of them. Defined in fast.cpp, as affine_planes_gemv.
bool kquant_scheme(Scheme s);

// The formats the avx2 level packs and its packed GEMV (x86/avx2_int8.hpp) serves: codes of 2 to
// 6 bits (affine 2-6-bit, GGUF q4_0 .. q5_1, mxfp4, nvfp4); avx2_int8_gemv: w is one with
// its pack. Defined in fast.cpp, as affine_planes_gemv.
bool avx2_int8_format(Scheme s, int bits);
bool avx2_int8_gemv(const WeightPlan& w);

// Activations and results of one call: x is f32 [m, k] with row stride ldx; y is f32 [m, n].
struct Rows {
  const float* x = nullptr;
  int64_t ldx = 0;
  int64_t m = 0;
  float* y = nullptr;
  int64_t ldy = 0;
};

// Entry points of one ISA level. Ranges are half-open; everything is already validated.
struct IsaKernels {
  // GEMV, W [N, K]: x f32 [K] -> xp (the format's lane order, kGemvXPad floats of slack) and
  // per-group sums xs (gemv_xs_count entries). Then y[n] = the sum over k in [k0, k1) for n in
  // [n0, n1); k0 and k1 are multiples of gemv_k_align (k1 may be K).
  int64_t (*gemv_xs_count)(const WeightPlan& w);
  void (*gemv_prep)(const WeightPlan& w, const float* x, float* xp, float* xs);
  void (*gemv_nk)(const WeightPlan& w, const float* xp, const float* xs, float* y, int64_t n0,
                  int64_t n1, int64_t k0, int64_t k1);
  // The same for up to four rows of x at once (xp[i], xs[i] prepared as above; rows past m
  // point at a zero row): y[i * ldy + n] for i < m.
  void (*gemv_nk_multi)(const WeightPlan& w, const float* const* xp, const float* const* xs, int m,
                        float* y, int64_t ldy, int64_t n0, int64_t n1);
  // GEMV, W [K, N]: y[n0, n1) += sum over k in [k0, k1) of x[k] * W[k, n], partial sums in the
  // format's lane order (n0 a multiple of 32, n1 of 32 or N, k0 of 16; y has gemv_kn_ylen
  // floats); gemv_kn_finish turns their sum into y[0, N) (natural order, with the scales of
  // whole columns: fp8, the nvfp4 global scale). kKnPanelCols bounds n1 - n0.
  // The same for m (1..kKnMaxRows) rows of x at once, ldx apart, into m partial rows ldy apart
  // (n1 - n0 at most kKnPanelCols / m).
  int64_t (*gemv_kn_ylen)(const WeightPlan& w);
  void (*gemv_kn)(const WeightPlan& w, const float* x, int64_t ldx, int64_t m, float* y,
                  int64_t ldy, int64_t n0, int64_t n1, int64_t k0, int64_t k1);
  void (*gemv_kn_finish)(const WeightPlan& w, const float* sum, float* y);
  // Tiles: decoded weights in f32, natural order, scales applied.
  //   nk: tile[r][0, kc) = W[n0 + r][k0, k0 + kc) for r < rows, zero in [kc, ld); k0 and kc
  //       are multiples of the group (GGUF: block), kc may end at K.
  //   kn: tile[r][0, nc) = W[k0 + r][n0, n0 + nc) for r < rows (storage rows), zero in
  //       [nc, ld). In both, ld is a multiple of the vector width and >= kc or nc.
  void (*decode_nk)(const WeightPlan& w, int64_t n0, int64_t rows, int64_t k0, int64_t kc,
                    float* tile, int64_t ld);
  void (*decode_kn)(const WeightPlan& w, int64_t k0, int64_t rows, int64_t n0, int64_t nc,
                    float* tile, int64_t ld);
  // C[i][j] (+)= sum_k X[i][k] * T[j][k] for i < m, j < nt, k < kc: dot form for nk tiles
  // (T is [nt][ld], zero-padded).
  void (*gemm_nk)(const float* x, int64_t ldx, int64_t m, const float* t, int64_t ld, int64_t nt,
                  int64_t kc, float* c, int64_t ldc, bool accumulate);
  // C[i][j] (+)= sum_k X[i][k] * T[k][j] for i < m, j < nt, k < kc: outer-product form for
  // kn tiles (T is [kc][ld], zero-padded).
  void (*gemm_kn)(const float* x, int64_t ldx, int64_t m, const float* t, int64_t ld, int64_t nt,
                  int64_t kc, float* c, int64_t ldc, bool accumulate);
  // nk tiles packed K-major for the outer-product form (large M): panel p holds, for k < kc,
  // the pack_cols rows n0 + p·pack_cols.. of W at k0 + k, contiguous (kc·pack_cols floats,
  // rows past `rows` zero); scratch has vector_width x pack_chunk floats. gemm_packed then
  // computes what gemm_nk does (nt <= rows).
  void (*pack_nk)(const WeightPlan& w, int64_t n0, int64_t rows, int64_t k0, int64_t kc,
                  float* scratch, float* packed);
  void (*gemm_packed)(const float* x, int64_t ldx, int64_t m, const float* p, int64_t nt,
                      int64_t kc, float* c, int64_t ldc, bool accumulate);
  // Dequantize, W [N, K] (packed formats, GGUF blocks of cpu::dequantize_simd_exact): storage
  // rows [n0, n0 + rows) into out (dt, row stride K), bit-exact with the codec
  // (engine/dequant.hpp).
  void (*dequantize_nk)(const WeightPlan& w, int64_t n0, int64_t rows, void* out, DType dt);
  int vector_width;                                  // floats per vector (tile padding)
  int pack_cols;                                     // rows of W per packed panel
  int64_t pack_chunk;                                // K elements pack_nk decodes per step
  int64_t pack_min_rows;                             // M from which nk tiles are packed (0: never)
  int64_t pack_min_rows_mxfp4, pack_min_rows_nvfp4;  // the same for fp4 (V::kPackMinRowsMxfp4)
};

inline constexpr int64_t kGemvXPad = 64;
inline constexpr int kGemvMultiRows = 4;       // rows of x per pass of gemv_nk_multi
inline constexpr int64_t kKnPanelCols = 8192;  // most columns x rows of x per gemv_kn call
inline constexpr int kKnMaxRows = 4;           // rows of x per gemv_kn call

// The kernels of each level (scalar is portable; the others exist in x86 builds).
extern const IsaKernels kScalarKernels;
#if defined(QUANTA_CPU_X86)
extern const IsaKernels kAvx2Kernels;
extern const IsaKernels kAvx512Kernels;
#endif

}  // namespace quanta::cpu
