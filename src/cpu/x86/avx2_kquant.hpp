// The q2_K-q6_K GEMV of the avx2 level on integer dot products (M = 1 or 2 rows of x a pass,
// W [N, K] as GGUF stores it, or its quad pack: see below). Without it that level decodes every
// weight to f32 and multiplies with FMAs: 10-35% of the DRAM roof on a Zen 3 VM (docs/PERF.md, "an
// AVX2-only VM").
//
// x, once per call, becomes three int8 planes per 256-element block, in element order:
//   x[i] = 2^e · (c0·2^14 + c1·2^7 + c2),  c0 in [-127, 127], c1, c2 in [-64, 64]
// (2^e from the block's largest |x|, every step an exact f32 operation: x held to 2^-21 of that
// largest |x|, as avx2_int8.hpp's planes; two planes when x arrived as bf16). Every K-quant code
// is below 64, so vpmaddubsw's two products a lane stay under 2^15.
// Per 32 codes of a block (one vector, each 16 of them under one sub-block scale) and plane:
// vpmaddubsw of the unsigned codes (q2_K 0..3, q3_K q + 4 = 0..7, q4_K 0..15, q5_K 0..31, q6_K
// q + 32 = 0..63) against the plane, then vpmaddwd against the sub-block scales (q3_K's and
// q6_K's signed) sums them into int32 lanes over the block (q2_K: its codes times their 4-bit
// scales are bytes, so two vectors' pairs add in int16 before one vpmaddwd against ones). The three
// plane sums meet in f32 once per block and row, times d·2^e; the mins (q2_K, q4_K, q5_K) and the
// code offsets (q3_K -4, q6_K -32) are f32 terms on x's sub-block sums. Compiled with the avx2
// flags (src/CMakeLists.txt: cpu/x86/avx2_*.cpp); called only at that level, where
// cpu::avx2_int8_active().
//
// With quanta::prepack's pack (WeightPlan::kquant_quad; cpu/pack.hpp) each half of a block's codes
// is four vectors in quad order (byte i of vector j = element 4i + j of the half), and x's planes
// likewise: an int32 lane of vpmaddwd then holds one sub-block of 16, so the four vectors' int16
// pairs add before one vpmaddwd against the sub-block scales (q6_K: two vectors'), where GGUF's
// order takes one per vector. One core, 1024 x 14336 hot: q2_K 1.27-1.42 -> 0.91-0.99 ms, q6_K
// 1.81-1.82 -> 1.27-1.31 ms (docs/PERF.md, eighteenth session). With AVX-VNNI
// (WeightPlan::avx_vnni, opt-in for now) the pack's halves take vpdpbusd instead: per half and row
// of x one chain over the planes (avx2_common.hpp quad_dot_vnni), converted once and scaled by each
// lane's sub-block scale in f32.
#pragma once

#include <cstdint>

#include "cpu/plan.hpp"
#include "cpu/x86/vnni_rows.hpp"

namespace quanta::cpu::avx2_kquant {

// x [k] (k a multiple of 256) -> its planes (768 bytes per block: they fit the K floats of the
// GEMV's xp buffer) and pow2[k / 256] (2^e per block); quad: for w.kquant_quad, the planes of
// each half of a block in quad order (avx2_common.hpp quad_planes). Returns false, writing nothing
// useful, when a block holds a non-finite value or its largest |x| is nonzero and below 2^-96: the
// caller then runs the float kernel.
bool prep(const float* x, int64_t k, bool quad, uint8_t* planes, float* pow2);

// y[i·ldy + n] for the rows i < mp.m (1 or 2) of x and n in [n0, n1), for w a K-quant; mp.xs: each
// row's sums over each sub-block (16 elements, 32 for q4_K and q5_K).
void gemv_multi(const WeightPlan& w, const vnni::MultiPlanes& mp, int64_t n0, int64_t n1, float* y,
                int64_t ldy);

}  // namespace quanta::cpu::avx2_kquant
