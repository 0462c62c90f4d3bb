// The packed GEMV of the avx2 level on integer dot products: W from quanta::prepack (cpu/pack.hpp)
// with codes of 2 to 6 bits, i.e. affine 2- to 6-bit (every group), GGUF q4_0, q4_1, q5_0
// and q5_1, mxfp4 and nvfp4, times M = 1..4 rows of x as int8 planes. Without it the avx2 level
// decodes every code to f32 and multiplies with FMAs, which read 4-bit rows at 40-50% of the DRAM
// roof on a Zen 3 VM (docs/PERF.md, "an AVX2-only VM").
//
// x takes planes as the VNNI kernels do (x86/vnni_affine.hpp): per 128-element block three int8
// digits of x / 2^e (two when x arrived as bf16, WeightPlan::x_bf16, as on the VNNI level), and
// one vpmaddwd against 2^14, 2^7 or 1 widens each plane's int16 pairs to int32 with its weight:
// p0·2^14 + p1·2^7 + p2, exact. With AVX-VNNI (WeightPlan::avx_vnni: cpu::avx_vnni_active(),
// opt-in for now) the same planes meet the codes in vpdpbusd instead, one per code vector and
// plane, the planes' sums then shifted and added (avx2_int8_vnni.cpp). The planes are in this
// level's own quad
// order (vector j byte i is element 4i + j), and so are the codes: a shift cuts 2-bit codes j out
// of MLX's bytes, and the pack lays the other widths out for it (cpu/pack.cpp avx2_block; a pack
// made at the VNNI level is not read here), so a block's codes are four vectors after a few shifts
// and masks (E2M1's then mapped to 2·value + 12 by a vpshufb). Their vpmaddubsw pairs (u8 codes
// times s8 digits) are added in int16 (four vectors' up to 5 bits, <= 4·2·31·127; two vectors'
// for 6 bits) before each vpmaddwd, and an int32 lane is then 16 consecutive elements.
// Compiled with the avx2 flags (src/CMakeLists.txt: cpu/x86/avx2_*.cpp); called only at that level,
// where cpu::avx2_int8_active().
#pragma once

#include <cstdint>

#include "cpu/plan.hpp"
#include "cpu/x86/vnni_rows.hpp"

namespace quanta::cpu::avx2_int8 {

// x [w.k] -> its planes in quad order and group_pow2[g] (as vnni::affine_prep).
// Returns false, writing nothing to `planes`, when a block holds a non-finite value or its
// largest |x| is nonzero and below 2^-96: the caller then runs the float kernel.
bool prep(const WeightPlan& w, const float* x, uint8_t* planes, float* group_pow2);

// y[i·ldy + n] for the rows i < mp.m (1..4) of x and n in [n0, n1), from w.pack, for a w of
// which avx2_int8_gemv(w) holds.
void packed_multi(const WeightPlan& w, const vnni::MultiPlanes& mp, int64_t n0, int64_t n1,
                  float* y, int64_t ldy);

// packed_multi on AVX-VNNI's vpdpbusd, for a w with avx_vnni set (packed_multi calls it).
void packed_multi_vnni(const WeightPlan& w, const vnni::MultiPlanes& mp, int64_t n0, int64_t n1,
                       float* y, int64_t ldy);

}  // namespace quanta::cpu::avx2_int8
