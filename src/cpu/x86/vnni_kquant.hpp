// q2_K-q6_K GEMV (M = 1, W [N, K]) on integer dot products, inside the avx512 level where
// the CPU has AVX512-VNNI, VBMI and GFNI (vnni_active()). The float kernels (gguf_dot.hpp) spend a
// convert, a multiply by x and an FMA with the sub-block scale on every 16 weights.
// q2_K:
//   x, once per call, becomes three int8 planes per 256-element block:
//     x[i] = 2^e · (c0·2^14 + c1·2^7 + c2),  c0..c2 in [-64, 64],
//   with 2^e chosen from the block's largest |x| (every step an exact f32 operation, so x is
//   held to 2^-20 of that largest |x|: rel-L2 1e-7..1e-6 against the oracle, the f32 bound is
//   1e-5; a fourth plane, 2^-27, cost a quarter more dot products for nothing the bound sees);
//   a byte permute turns each 2-bit code q into q·s (s the sub-block's 4-bit scale, q·s <= 45),
//   and vpdpbusd sums 64 such products against a plane per instruction;
//   per block and row the three plane sums become one f32 vector, scaled by d·2^e; the min term
//   (dmin · m_j · Σx over sub-block j) stays in f32.
// q3_K: three int8 planes in its own order, where each int32 lane holds one sub-block over the
//   whole block (a multishift cuts the codes and high bits out of qs and hmask). Its signed
//   6-bit scales do not fit a byte product, so vpdpbusd sums the bare 3-bit codes
//   q' = q + 4·hbit (0..7) against each plane; the plane sums are combined in int32 once per
//   block and each lane is scaled by its sub-block's s·d·2^e in f32; the -4 of every code is
//   the f32 term -4·d·s_j·Σx. (Before: q2_K's planes, the lanes scaled per code vector,
//   1.15-1.28x slower; before that two int16 planes and vpdpwssd.)
// q4_K, q5_K: three int8 planes as well, in their own element order, again one sub-block per
//   int32 lane over the block (multishift of interleaved qs qwords); the bare 4-bit code (plus
//   q5_K's fifth bit) by vpdpbusd, each lane by its 32-element sub-block's scale in f32 once per
//   block, the min terms in f32.
// q6_K: two int16 planes (x[i] = 2^e · (c0·2^15 + c1), |c| <= 2^14: 2^-27 of the block's largest
//   |x|), the 6-bit code times the signed 8-bit scale by vpmaddubsw, then vpdpwssd; the -32 of
//   every code in f32.
// Compiled with the VNNI/VBMI/GFNI flags (src/CMakeLists.txt); called only when vnni_active().
#pragma once

#include <cstdint>

#include "cpu/plan.hpp"
#include "cpu/x86/vnni_rows.hpp"

namespace quanta::cpu::vnni {

// x [k] (k a multiple of 256) -> the planes of `scheme` (a K-quant: 4 bytes per element of x,
// so they fit the K floats of the GEMV's xp buffer) and pow2[k / 256] (2^e per
// block). Returns false, writing nothing useful, when a block holds a non-finite value or its
// largest |x| is nonzero and below 2^-96 (2^e would leave the normal range): the caller then
// runs the float kernel.
bool prep(Scheme scheme, const float* x, int64_t k, uint8_t* planes, float* pow2);

// y[i·ldy + n] for the rows i < xr.m (1 or 2) of x and n in [n0, n1), over all of K, for w a
// K-quant (each block decoded once for both rows of x); xr.xs: the sums of each row of x over
// each sub-block (16 elements, 32 for q4_K and q5_K).
void gemv_multi(const WeightPlan& w, const MultiPlanes& xr, int64_t n0, int64_t n1, float* y,
                int64_t ldy);

}  // namespace quanta::cpu::vnni
