// Affine 2- to 8-bit, mxfp4, nvfp4 and GGUF q4_0 .. q8_0 GEMV (M = 1..4 per pass, W [N, K]; also
// from a host pack, which lays 5/6-bit codes out as nibbles plus masks of the high bits and 8-bit
// ones as bytes in fours) on integer dot products, inside the avx512 level where
// the CPU has AVX512-VNNI, VBMI and GFNI (vnni_active()). The float kernel (engine/gemv.hpp)
// spends an unpack (3-bit: across bytes), a convert and an FMA per 16 codes and reads 4 bytes of
// x from L2 per weight.
//
//   x, once per call, becomes three int8 planes per 128-element block:
//     x[i] = 2^e · (c0·2^14 + c1·2^7 + c2),  |c0| <= 127, |c1|, |c2| <= 64,
//   2^e from the block's largest |x| (every step an exact f32 operation, so x is held to
//   2^-21 of that largest |x|, below the f32 rounding of the result). A block's codes become two
//   vectors of 64 u8 operands (4-bit: the low and high nibbles of 64 bytes; 2/3/5/6-bit: a byte
//   permute and a multishift; 8-bit: a two-source byte permute; E2M1: a byte shuffle to
//   2·value + 12), each a vpdpbusd against a
//   plane: 6 dot products, one int32 combine and one FMA with the group scales per 128 weights,
//   3 bytes of x per weight. The bias term stays in f32 (Σ_g b·Σx, the group sums of x made once
//   per call).
// M = 2..4 rows of x share each unpacked block of codes (affine_gemv_multi).
// Measured (docs/perf-cpu.md): 3-bit 1.3-2x the float kernel from DRAM, 2-bit 1.2x, M = 2..4
// 1.4-2.1x; 4-bit 1.2-1.75x from L3 and a tie from DRAM on the 2-core Zen 5 VM (groups of 32 lose
// 8-12% there: fast.cpp keeps them on the float kernel past L3); 5/6-bit 2.0-2.3x and mxfp4 /
// nvfp4 1.5x one core hot on Zen 4; affine 8-bit 1.4-1.7x and q8_0 1.3x one core hot, M = 2..8
// 1.1-2.0x, on the Emerald Rapids VM.
// Compiled with the VNNI/VBMI/GFNI flags (src/CMakeLists.txt); called only when vnni_active().
#pragma once

#include <cstdint>

#include "cpu/plan.hpp"
#include "cpu/x86/vnni_rows.hpp"

namespace quanta::cpu::vnni {

// Elements of x per power of two (one vector of 4-bit codes); K must be a multiple of it.
inline constexpr int64_t kAffineBlock = 128;

// x [w.k] -> its planes (3 bytes per element, so they fit the K floats of the GEMV's xp buffer)
// and group_pow2[g] = 2^e of the block holding group g. Returns false, writing nothing to
// `planes`, when a block holds a non-finite value or its largest |x| is nonzero and below
// 2^-96: the caller then runs the float kernel.
bool affine_prep(const WeightPlan& w, const float* x, uint8_t* planes, float* group_pow2);

// y[i·ldy + n] for the rows i < mp.m (1..4) of x and n in [n0, n1), over all of K, for w affine
// 2- to 8-bit, mxfp4, nvfp4 or GGUF q4_0 .. q8_0 with K % kAffineBlock == 0; mp.xs: the group
// sums of each row of x.
void affine_gemv_multi(const WeightPlan& w, const MultiPlanes& mp, int64_t n0, int64_t n1, float* y,
                       int64_t ldy);

// The same from the rows quanta::prepack packed (w.pack, layout in cpu/pack.hpp): each four rows
// one run of bytes in address order, the next four prefetched a chunk ahead.
void affine_packed_multi(const WeightPlan& w, const MultiPlanes& mp, int64_t n0, int64_t n1,
                         float* y, int64_t ldy);

}  // namespace quanta::cpu::vnni
