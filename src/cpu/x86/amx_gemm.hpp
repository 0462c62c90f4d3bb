// M > 1, W [N, K] or [K, N], bf16 or f16 activations, on AMX tiles (TDPBF16PS: 16 x 16 f32 += 16 x
// 32 bf16 · 32 x 16 bf16; one every 16 cycles per core, 1024 flops a cycle against AVX-512's 64,
// though with random data this CPU measured it at half that), where the CPU has AMX-BF16 and
// AVX512-BF16 and Linux granted the tile state (amx_active()).
//
// Precision: each decoded weight w is two bf16 planes, w0 = w truncated to bf16 (sign and
// exponent kept, so w - w0 is exact) and w1 = w - w0 rounded to bf16: w0 + w1 holds w to 2^-16
// of |w|. bf16 x is one plane, f16 x two (exactly: 11 significand bits). The tiles' f32
// accumulators sum w0·x0 + w1·x0 (+ w0·x1 for f16): rel-L2 ~4e-6 against the fp64 oracle, far
// below the bf16 / f16 output's own rounding (2^-9 / 2^-11). f32 x would need three planes each
// and six products for an f32-accurate sum; that measured 0.9-0.95x the AVX-512 tiled path, so
// f32 activations do not come here (docs/perf-cpu.md).
// A non-finite value keeps its class in plane 0 (NaN stays NaN) and a NaN remainder, so the
// caller is told: prep_x_block and split_w report non-finite values and the caller runs the f32
// path for them instead (an infinity would otherwise meet zero planes: inf · 0 = NaN where the
// oracle has inf).
//
// Layouts (uint16_t bf16 bits), each tile 16 rows of 64 bytes in 1 KB (consecutive tiles fall
// in different L1 sets; rows 2 KB apart put a whole tile in two sets and thrashed L1 at a third
// of the tile rate):
//   x: tiles [b][s][p] for row block b (rows 16b..16b+15, zero past M), K step s (K padded with
//     zeros to a multiple of 32), plane p: row kk holds [x[r][32s + 2kk], x[r][32s + 2kk + 1]]
//     for r = 0..15 (the B operand's pairs).
//   W tile (per task and K block): tiles [nb][s][p], row r of the tile = row 16nb + r of W,
//     elements 32s..32s+31 of the block.
//   C: ct[n][m] f32 (the tiles' natural orientation: rows of W x rows of x).
//   W [K, N] (the tile the other way round, so that nothing is transposed): x's tiles hold rows
//   of x (row r = x[16b + r][32s..32s+31], the A operand); W tile [nb][s][p] row kk holds the
//   pairs (W[32s + 2kk][n], W[32s + 2kk + 1][n]) of columns n = 16nb..16nb+15 (the B operand);
//   C: ct[m][n].
// Compiled with the AMX and AVX512-BF16 flags (src/CMakeLists.txt); called only when
// amx_active().
#pragma once

#include <cstdint>

#include "quanta/dtype.hpp"

namespace quanta::cpu::amx {

inline constexpr int64_t kBlock = 16;             // rows of x or W per tile
inline constexpr int64_t kStep = 32;              // K per tile product
inline constexpr int64_t kTile = kBlock * kStep;  // elements of a tile
inline constexpr int kWPlanes = 2;

// Planes of x for its dtype: 1 (bf16), 2 (f16), 0 for a dtype this path does not take.
int x_planes_for(DType x);

// f32 x (the codes path): the formats whose weights are exact small values times a scale per
// group of >= 32 (affine q·s + b, mxfp4's E2M1 · 2^E) come in as one bf16 plane of those values,
// exact, and x as three bf16 planes (x0 = x truncated, x1 = the remainder truncated, x2 = the
// rest rounded: 24 bits, f32's own), three tile products per step summed per group; each group's
// sums then take the scale, and the bias times x's group sum, on the AVX side (gemm_codes).
// rel-L2 ~1e-7 against the fp64 oracle. Six products on a decoded f32 W (two planes) ran
// 0.9-0.95x the AVX-512 tiled path; three on the codes are what pays (docs/perf-cpu.md).
inline constexpr int kCodeXPlanes = 3;

// Elements of x's tiles: round_up(m, 16) x round_up(k, 32) x planes.
int64_t x_elems(int64_t m, int64_t k, int planes);

// Row block b of x (m rows of k floats, stride ldx) into its tiles: B-operand pairs for W
// [N, K], A-operand rows for W [K, N] (kn); planes 1, 2 or kCodeXPlanes. True
// if a value was not finite.
bool prep_x_block(const float* x, int64_t ldx, int64_t m, int64_t k, int64_t b, int planes, bool kn,
                  uint16_t* xp);

// Row block nb of a W tile kcs steps wide, steps [s0, s0 + cols_pad / 32), from 16 rows of an
// f32 tile t (ld floats apart, the first `rows` of them valid, zero past the valid columns up to
// cols_pad); rows past `rows` become zeros. planes: kWPlanes, or 1 for weights whose values are
// exact in bf16 (mxfp4, mxfp8: a small significand times a power of two). True if a value was
// not finite, or (one plane) not exact in bf16 or outside [2^-65, 2^66] in magnitude (so that its
// products with x's planes stay within f32's normal range, which the tile unit keeps).
bool split_w(const float* t, int64_t ld, int64_t rows, int64_t cols_pad, uint16_t* wp, int64_t kcs,
             int64_t nb, int64_t s0, int planes);

// W [K, N]: step s of a W tile kcs steps wide, from 32 rows along K of an f32 tile t (ld floats
// apart, the first `rows` valid; columns up to cols_pad, a multiple of 32, zero past N): for
// each 16-column block, tile row kk holds the bf16 pairs (t[2kk][n], t[2kk + 1][n]) of the
// plane (the B operand). True if a value was not finite.
bool split_w_kn(const float* t, int64_t ld, int64_t rows, int64_t cols_pad, uint16_t* wp,
                int64_t kcs, int64_t s, int planes);

// The codes path's W tile: row block nb of a tile kcs steps wide, steps [s0, s0 + cols_pad /
// 32), one bf16 plane (the values are exact in bf16), from 16 rows of an f32 tile t as split_w.
// True if a value was not finite (an fp8 NaN code).
bool codes_w(const float* t, int64_t ld, int64_t rows, int64_t cols_pad, uint16_t* wp, int64_t kcs,
             int64_t nb, int64_t s0);

// The codes whose values codes_w_direct reads straight from storage (no f32 tile between):
// affine 4-bit and 8-bit codes q, and the GGUF blocks' codes per 32 elements: q4_0 / q4_1
// nibbles (0..15), q5_0 / q5_1 with their fifth bit (0..31), q8_0's int8, and the q4_K / q5_K
// sub-blocks of 32 (the caller takes each group's scale and bias from the blocks: q4_0 d and
// -8d, q5_0 d and -16d, q4_1 / q5_1 d and m, q8_0 d, q4_K / q5_K d·sc and -dmin·m), and q3_K's
// sub-blocks of 32 as sc·q with their two 16-element scales inside (|sc·q| <= 128: exact in
// bf16; the group's scale is the super-block's d, its bias zero).
enum class DirectCodes { none, u4, u8, q4_0, q4_1, q5_0, q5_1, q8_0, q3_K, q4_K, q5_K };

// The codes path's W tile as codes_w, read from the codes themselves: rows rows (<= 16) of
// row_bytes bytes each from `codes` (element k0 of each row first, k0 a multiple of 32 and of
// 8 / bits; GGUF: of 32), cols_pad codes a row (a multiple of 32, all within the rows);
// rows past `rows` become zeros. Every such value is finite and exact in bf16. ~0.15 cycles a
// weight against ~1.5 for the engine's decode to f32 and codes_w (docs/perf-cpu.md).
void codes_w_direct(DirectCodes kind, const uint8_t* codes, int64_t row_bytes, int64_t rows,
                    int64_t k0, int64_t cols_pad, uint16_t* wp, int64_t kcs, int64_t nb,
                    int64_t s0);

// One plane of mxfp4 W [N, K] as split_w makes it (values with their scale), read from storage:
// rows rows of row_bytes bytes of E2M1 nibbles from `codes` and their E8M0 scales (ld_scales a
// row), from element k0 (a multiple of 32), cols_pad a multiple of 32 within the rows. True if a
// scale puts a value outside split_w's range for one plane (E < 63 or > 190: the task runs the f32
// path).
bool mxfp4_w_direct(const uint8_t* codes, int64_t row_bytes, const uint8_t* scales,
                    int64_t ld_scales, int64_t rows, int64_t k0, int64_t cols_pad, uint16_t* wp,
                    int64_t kcs, int64_t nb, int64_t s0);

// One plane of e4m3 (e5m2) W [N, K] without its row scale, read from storage: rows rows of
// row_bytes codes from `codes`, the first `valid` of cols_pad (a multiple of 32) from element k0,
// zeros past them; with e8m0 (mxfp8: E8M0 scales, ld_e8m0 a row) each group of 32 times its
// 2^(E - 127). True if a code is not finite or a scale puts values outside split_w's range for
// one plane (E < 71 or > 184): the task runs the f32 path.
bool fp8_w_direct(bool e5m2, const uint8_t* codes, int64_t row_bytes, const uint8_t* e8m0,
                  int64_t ld_e8m0, int64_t rows, int64_t valid, int64_t k0, int64_t cols_pad,
                  uint16_t* wp, int64_t kcs, int64_t nb, int64_t s0);

// One plane of nvfp4 W [N, K] without its global scale, read from storage: E2M1 nibbles times
// their block's E4M3 scale (ld_e4m3 a row), rows rows from element k0 (a multiple of 32),
// cols_pad a multiple of 32 within the rows. True if a scale is NaN (the task runs the f32 path).
bool nvfp4_w_direct(const uint8_t* codes, int64_t row_bytes, const uint8_t* e4m3, int64_t ld_e4m3,
                    int64_t rows, int64_t k0, int64_t cols_pad, uint16_t* wp, int64_t kcs,
                    int64_t nb, int64_t s0);

// The codes path, W [N, K]: over the kcs steps of a one-plane W tile (w_pad rows, a multiple of
// 32) against x's planes (1 bf16, 2 f16, kCodeXPlanes f32) at steps [s0, s0 + kcs), a group
// (gsteps steps) at a time: ct[n][m] += sc[n][g] · Σ_{k in g} W[n][k] · x[m][k] + bi[n][g] ·
// xsum[g][m], g the block's groups (sc, bi: w_pad rows of ldsb floats, zero past the valid rows;
// xsum: the block's groups, mp floats each). ct is blocked by pairs of x blocks: columns 32q..32q +
// 31 of row n at ct + (q · ldct + n) · 32 (ldct >= w_pad rows per block).
void gemm_codes(const uint16_t* wp, int64_t kcs, int64_t w_pad, const uint16_t* xp, int x_planes,
                int64_t ks, int64_t mp, int64_t s0, int64_t gsteps, const float* sc,
                const float* bi, int64_t ldsb, const float* xsum, float* ct, int64_t ldct);

// Over the kcs steps of a W tile (w_pad rows or columns of W, a multiple of 32) against x's steps
// [s0, s0 + kcs) (ks steps per row block of x, mp rows, a multiple of 16):
//   W [N, K]: ct[n][m] (+)= Σ_k W[n][k] · x[m][k]   (C tiles are rows of W x rows of x);
//   W [K, N]: ct[m][n] (+)= Σ_k x[m][k] · W[k][n]   (kn; rows of x x columns of W).
// W in w_planes planes (kWPlanes, or 1 as split_w); x in 1 or 2 planes, or kCodeXPlanes with one
// plane of W.
void gemm(const uint16_t* wp, int w_planes, int64_t kcs, int64_t w_pad, const uint16_t* xp,
          int x_planes, bool kn, int64_t ks, int64_t mp, int64_t s0, float* ct, int64_t ldct,
          bool accumulate);

}  // namespace quanta::cpu::amx
