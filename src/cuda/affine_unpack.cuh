// Affine codes to tensor-core operands, in registers. A lane owns "chunks" of 32 consecutive
// codes of one row (4·bits bytes, always inside one group since groups are >= 32 and aligned).
// A chunk becomes 16 half2 pairs; pair i holds the codes at positions (pair_lo(i), pair_hi(i))
// of the chunk. The positions are chosen per width so that one shift (or one byte permute)
// places both codes of a pair under a half2 magic number; the activations are permuted the same
// way (x_pairs), and since a dot product may sum in any order, A and B stay consistent.
#pragma once

#include <cstdint>

#include "cuda/common.cuh"
#include "cuda/mma.cuh"

namespace quanta::cuda {

// Code positions of pair i (0..15) of a 32-code chunk.
template <int BITS>
__host__ __device__ constexpr int pair_lo(int i) {
  if constexpr (BITS == 4 || BITS == 6) return 8 * (i / 4) + i % 4;  // (c, c + 4)
  if constexpr (BITS == 8) return 4 * (i / 2) + i % 2;               // (c, c + 2)
  return 16 * (i / 8) + i % 8;                                       // 2, 3, 5: (c, c + 8)
}
template <int BITS>
__host__ __device__ constexpr int pair_hi(int i) {
  if constexpr (BITS == 4 || BITS == 6) return pair_lo<BITS>(i) + 4;
  if constexpr (BITS == 8) return pair_lo<BITS>(i) + 2;
  return pair_lo<BITS>(i) + 8;
}

// magic | q_lo | (q_hi << 16) for every pair: reads as (offset + q_lo, offset + q_hi).
// `magic` is the half2 bit pattern of the offset (Magic<T>::kBits2). 8-bit codes need
// 10 mantissa bits (f16 only; bf16 8-bit goes through f32, see dequant_chunk).
// (a & mask) | magic in one LOP3: with both constants as immediates the compiler emits two
// (SASS LOP3 takes one immediate), so the magic number is passed in a register.
template <uint32_t kMask>
__device__ __forceinline__ uint32_t and_or(uint32_t a, uint32_t magic_reg) {
  uint32_t d;
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;\n" : "=r"(d) : "r"(a), "n"(kMask), "r"(magic_reg));
  return d;
}

// Pair i of a chunk: magic | q_lo | (q_hi << 16), reading as (offset + q_lo, offset + q_hi).
template <int BITS>
__device__ __forceinline__ uint32_t unpack_pair(const uint32_t (&w)[BITS], int i,
                                                uint32_t magic_reg) {
  constexpr uint32_t kMask = (1u << BITS) - 1u;
  constexpr uint32_t kMask2 = kMask | (kMask << 16);
  if constexpr (BITS == 4) {
    return and_or<kMask2>(w[i / 4] >> (4 * (i % 4)), magic_reg);  // nibbles c, c+4 of a word
  } else if constexpr (BITS == 2) {
    return and_or<kMask2>(w[i / 8] >> (2 * (i % 8)), magic_reg);  // crumbs c, c+8 of a word
  } else if constexpr (BITS == 8) {
    // bytes c and c+2 under 0x64: PRMT picks (byte, 0x64, byte, 0x64).
    return __byte_perm(w[i / 2], 0x64646464u, (i % 2) ? 0x4341 : 0x4240);
  } else if constexpr (BITS == 3 || BITS == 6) {
    // Codes lo and hi = lo + 24 bits sit at the same bit offset s inside bytes b..b+1 and
    // b+3..b+4: one byte permute brings both pairs of bytes together, one shift aligns them.
    constexpr int kStride = BITS == 3 ? 8 : 4;  // codes per 24 bits
    static_assert(kStride * BITS == 24);
    const int lo = pair_lo<BITS>(i);
    const int bit = lo * BITS, byte = bit / 8, s = bit % 8;
    const int wi = byte / 4, bo = byte % 4;
    const int wj = wi + 1 < BITS ? wi + 1 : BITS - 1;  // never needed past the chunk
    const uint32_t sel = static_cast<uint32_t>(bo | (bo + 1) << 4 | (bo + 3) << 8 | (bo + 4) << 12);
    return and_or<kMask2>(__byte_perm(w[wi], w[wj], sel) >> s, magic_reg);
  } else {
    static_assert(BITS == 5, "affine widths are 2, 3, 4, 5, 6, 8");
    // lo and hi = lo + 40 bits: two funnel shifts put lo at bit 0 and hi at bit 16.
    const int lo = pair_lo<BITS>(i);
    const int b0 = lo * 5, b1 = lo * 5 + 40 - 16;
    const int w0 = b0 / 32, w1 = b1 / 32;
    const uint32_t t0 = __funnelshift_r(w[w0], w[w0 + 1 < 5 ? w0 + 1 : 4], b0 % 32);
    const uint32_t t1 = __funnelshift_r(w[w1], w[w1 + 1 < 5 ? w1 + 1 : 4], b1 % 32);
    return and_or<kMask2>(__byte_perm(t0, t1, 0x7610), magic_reg);
  }
}

// The magic number in a register (see and_or).
__device__ __forceinline__ uint32_t magic_register(uint32_t magic) {
  uint32_t r;
  asm volatile("mov.b32 %0, %1;\n" : "=r"(r) : "r"(magic));
  return r;
}

template <int BITS>
__device__ __forceinline__ void unpack_chunk(const uint32_t (&w)[BITS], uint32_t (&p)[16],
                                             uint32_t magic) {
  const uint32_t magic_reg = magic_register(magic);
#pragma unroll
  for (int i = 0; i < 16; ++i) p[i] = unpack_pair<BITS>(w, i, magic_reg);
}

// Pairs [FIRST, FIRST + COUNT) of a chunk, dequantized as dequant_chunk does for the widths the
// magic number holds (all but bf16 8-bit): HSUB2 removes the offset exactly, HFMA2 applies scale
// and bias, rounded once to T. magic_reg: magic_register(Magic<T>::kBits2), which a caller may
// hoist out of its loop. qmm_affine_wgrf dequantizes a chunk in two halves this way.
template <class T, int BITS, int FIRST, int COUNT>
__device__ __forceinline__ void dequant_pairs(const uint32_t (&w)[BITS], T s, T b,
                                              uint32_t magic_reg, uint32_t (&a)[16]) {
  using V = typename Vec2<T>::type;
  static_assert(FIRST >= 0 && COUNT > 0 && FIRST + COUNT <= 16);
  uint32_t p[COUNT];
#pragma unroll
  for (int i = 0; i < COUNT; ++i) p[i] = unpack_pair<BITS>(w, FIRST + i, magic_reg);
  const V off = Magic<T>::offset2();
  V s2, b2;
  s2.x = s;
  s2.y = s;
  b2.x = b;
  b2.y = b;
#pragma unroll
  for (int i = 0; i < COUNT; ++i)
    a[FIRST + i] = as_u32(__hfma2(__hsub2(as_vec2<T>(p[i]), off), s2, b2));
}

// The chunk's 16 A pairs, dequantized: s·q + b rounded once to T (HSUB2 removes the magic
// offset exactly, HFMA2 applies scale and bias).
template <class T, int BITS>
__device__ __forceinline__ void dequant_chunk(const uint32_t (&w)[BITS], T s, T b,
                                              uint32_t (&a)[16]) {
  using V = typename Vec2<T>::type;
  if constexpr (BITS == 8 && sizeof(T) == 2 && Magic<T>::kMantissa < 8) {
    // bf16 has 7 mantissa bits: decode bytes through f32 (0x4B000000 | q = 2^23 + q).
    const float sf = to_f32(s), bf = to_f32(b);
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      const uint32_t c = static_cast<uint32_t>(i % 2);
      const float lo = __uint_as_float(__byte_perm(w[i / 2], 0x4B000000u, 0x7440 | c)) - 8388608.0f;
      const float hi =
          __uint_as_float(__byte_perm(w[i / 2], 0x4B000000u, 0x7440 | (c + 2))) - 8388608.0f;
      a[i] = as_u32(__floats2bfloat162_rn(fmaf(lo, sf, bf), fmaf(hi, sf, bf)));
    }
  } else {
    dequant_pairs<T, BITS, 0, 16>(w, s, b, magic_register(Magic<T>::kBits2), a);
  }
}

// The B pairs matching the A pairs: (x[lo], x[hi]) from the chunk's 32 activations held as
// 16 words xw[j] = (x[2j], x[2j+1]).
template <int BITS>
__device__ __forceinline__ void x_pairs(const uint32_t (&xw)[16], uint32_t (&bp)[16]) {
#pragma unroll
  for (int i = 0; i < 16; ++i) {
    const int lo = pair_lo<BITS>(i), hi = pair_hi<BITS>(i);
    const uint32_t l = static_cast<uint32_t>(lo % 2), h = static_cast<uint32_t>(hi % 2);
    const uint32_t sel = (2 * l) | (2 * l + 1) << 4 | (4 + 2 * h) << 8 | (5 + 2 * h) << 12;
    bp[i] = __byte_perm(xw[lo / 2], xw[hi / 2], sel);
  }
}

}  // namespace quanta::cuda
