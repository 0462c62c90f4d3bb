// Affine 4-bit GEMV (M = 1, W [N, K]) on integer dot products, inside the avx512 level where
// the CPU has AVX512-VNNI and VBMI (vnni_active()). The float kernel (engine/gemv.hpp) spends a
// nibble unpack, a convert and an FMA per 16 codes and reads 4 bytes of x from L2 per weight.
// Measured (docs/perf-cpu.md): with the weights in L3 this kernel runs 1.5-1.75x the float
// one; from DRAM on the 2-core VM both sit at ~40 GB/s whenever the VM's memory reads at
// ~50 GB/s (there the separate scale and bias streams cost: q4_K, one stream, reaches 45).
//
//   x, once per call, becomes three int8 planes per 128-element block:
//     x[i] = 2^e · (c0·2^14 + c1·2^7 + c2),  |c0| <= 127, |c1|, |c2| <= 64,
//   2^e from the block's largest |x| (every step an exact f32 operation, so x is held to
//   2^-21 of that largest |x|, below the f32 rounding of the result); a 64-byte vector of codes
//   (128 weights) masked to its low and high nibbles is two u8 operands of vpdpbusd against
//   the planes' even and odd elements: 6 dot products, one int32 combine and one FMA with the
//   group scales per 128 weights, and 3 bytes of x per weight. The bias term stays in f32
//   (Σ_g b·Σx, the group sums of x made once per call).
// Compiled with the VNNI/VBMI flags (src/CMakeLists.txt); called only when vnni_active().
#pragma once

#include <cstdint>

#include "cpu/plan.hpp"

namespace quanta::cpu::vnni {

// Elements of x per power of two (one vector of 4-bit codes); K must be a multiple of it.
inline constexpr int64_t kAffineBlock = 128;

// x [w.k] -> its planes (3 bytes per element, so they fit the K floats of the GEMV's xp buffer)
// and group_pow2[g] = 2^e of the block holding group g. Returns false, writing nothing to
// `planes`, when a block holds a non-finite value or its largest |x| is nonzero and below
// 2^-96: the caller then runs the float kernel.
bool affine_prep(const WeightPlan& w, const float* x, uint8_t* planes, float* group_pow2);

// y[n] for n in [n0, n1) over all of K, for w affine 4-bit with K % kAffineBlock == 0; xs: the
// group sums of x.
void affine_gemv(const WeightPlan& w, const uint8_t* planes, const float* group_pow2,
                 const float* xs, int64_t n0, int64_t n1, float* y);

}  // namespace quanta::cpu::vnni
