// Where the integer-mma kernels (qmv_affine_i8, qmm_affine_i8) put each code in their u8x4 mma
// registers, and the unpacks that put them there. Shared by the kernels, by the x pre-passes
// that write x's int8 planes in the same order, and by a host test (no CUDA needed).
//
// Any order of codes over (register, byte) is correct as long as x's planes follow it, so each
// width takes the order its unpack makes cheapest. A unit is the words that unpack together:
//   2/4/8 bits: one word; register j holds codes j, j + 8/BITS, ... (one AND and a shift each).
//   3 bits: 3 words = 4 triples of bytes (8 codes each, code p at bit 3p of its triple);
//   5 bits: 5 words = 4 quintets (8 codes each, code p at bit 5p);
//   6 bits: 3 words = 4 triples (4 codes each, code p at bit 6p).
// For 3/5/6 bits, byte b of the four triples (quintets) is gathered into one word by byte
// permutes, so byte t of every gathered word belongs to triple t; register p then holds code p
// of each triple, cut out of one or two gathered words by shifts and per-byte masks.
// In every case register j of a unit holds in byte t the unit's code j + kRegs * t.
#pragma once

#include <cstdint>

#include "quanta/numeric.hpp"

namespace quanta::cuda {

template <int BITS>
struct I8Unit {
  static_assert(BITS == 2 || BITS == 3 || BITS == 4 || BITS == 5 || BITS == 6 || BITS == 8);
  static constexpr int kWords = BITS == 3 || BITS == 5 ? BITS : BITS == 6 ? 3 : 1;
  static constexpr int kCodes = kWords * 32 / BITS;
  static constexpr int kRegs = kCodes / 4;  // u8x4 registers a unit makes
};

// I8Unit<bits>::kCodes for a runtime width (the host's supports rules).
QUANTA_HD constexpr int i8_unit_codes(int bits) {
  return bits == 3 || bits == 5 ? 32 : bits == 6 ? 16 : 32 / bits;
}
static_assert(i8_unit_codes(3) == I8Unit<3>::kCodes && i8_unit_codes(5) == I8Unit<5>::kCodes &&
              i8_unit_codes(6) == I8Unit<6>::kCodes && i8_unit_codes(2) == I8Unit<2>::kCodes &&
              i8_unit_codes(8) == I8Unit<8>::kCodes);

// Code register r (counted over consecutive units) holds, in byte t, the code at position
// i8_pos(r, t) counted from the first unit's first code.
template <int BITS>
QUANTA_HD constexpr int i8_pos(int r, int t) {
  using U = I8Unit<BITS>;
  return (r / U::kRegs) * U::kCodes + (r % U::kRegs) + U::kRegs * t;
}

// __byte_perm (PRMT): byte i of the result is byte sel[4i+2 : 4i] of the pair {a, b} (b high).
QUANTA_HD QUANTA_FORCEINLINE uint32_t i8_prmt(uint32_t a, uint32_t b, uint32_t sel) {
#if defined(__CUDA_ARCH__)
  return __byte_perm(a, b, sel);
#else
  const uint64_t v = a | static_cast<uint64_t>(b) << 32;
  uint32_t out = 0;
  for (int i = 0; i < 4; ++i)
    out |= static_cast<uint32_t>((v >> (8 * ((sel >> (4 * i)) & 7))) & 0xffu) << (8 * i);
  return out;
#endif
}

// Per byte: bits [s, 8) of lo's bytes, then the low bits of hi's bytes above them, BITS in all
// (a code that straddles two bytes of its triple or quintet).
template <int BITS, int S>
QUANTA_HD QUANTA_FORCEINLINE uint32_t i8_join(uint32_t lo, uint32_t hi) {
  constexpr uint32_t kLo = ((1u << (8 - S)) - 1u) * 0x01010101u;
  constexpr uint32_t kAll = ((1u << BITS) - 1u) * 0x01010101u;
  return ((lo >> S) & kLo) | ((hi << (8 - S)) & (kAll & ~kLo));
}
template <int BITS, int S>
QUANTA_HD QUANTA_FORCEINLINE uint32_t i8_cut(uint32_t g) {
  return (g >> S) & (((1u << BITS) - 1u) * 0x01010101u);
}

// Bytes 0, 3, 6, 9 / 1, 4, 7, 10 / 2, 5, 8, 11 of three words: byte b of triples 0..3.
QUANTA_HD QUANTA_FORCEINLINE void i8_gather_triples(const uint32_t* w, uint32_t (&g)[3]) {
  g[0] = i8_prmt(i8_prmt(w[0], w[1], 0x0630), w[2], 0x5210);
  g[1] = i8_prmt(i8_prmt(w[0], w[1], 0x0741), w[2], 0x6210);
  g[2] = i8_prmt(i8_prmt(w[0], w[1], 0x0052), w[2], 0x7410);
}

#if defined(__CUDA_ARCH__)
#define QUANTA_I8_UNROLL _Pragma("unroll")
#else
#define QUANTA_I8_UNROLL
#endif

// 2/4/8 bits: code register r of the words w (register j of word r / (8/BITS)).
template <int BITS, int WORDS>
QUANTA_HD QUANTA_FORCEINLINE uint32_t i8_code_reg(const uint32_t (&w)[WORDS], int r) {
  constexpr int kRegsPerWord = 8 / BITS;
  constexpr uint32_t kMask = ((1u << BITS) - 1u) * 0x01010101u;
  if constexpr (BITS == 8) {
    return w[r];
  } else {
    return (w[r / kRegsPerWord] >> (BITS * (r % kRegsPerWord))) & kMask;
  }
}

// 3/5/6 bits: the I8Unit<BITS>::kRegs registers of one unit (I8Unit<BITS>::kWords words at w).
template <int BITS>
QUANTA_HD QUANTA_FORCEINLINE void i8_unpack_unit(const uint32_t* w, uint32_t* a) {
  if constexpr (BITS == 3) {  // code p of a triple: bits 3p .. 3p+2 of its 24
    uint32_t g[3];
    i8_gather_triples(w, g);
    a[0] = i8_cut<3, 0>(g[0]);
    a[1] = i8_cut<3, 3>(g[0]);
    a[2] = i8_join<3, 6>(g[0], g[1]);
    a[3] = i8_cut<3, 1>(g[1]);
    a[4] = i8_cut<3, 4>(g[1]);
    a[5] = i8_join<3, 7>(g[1], g[2]);
    a[6] = i8_cut<3, 2>(g[2]);
    a[7] = i8_cut<3, 5>(g[2]);
  } else if constexpr (BITS == 6) {  // code p of a triple: bits 6p .. 6p+5 of its 24
    uint32_t g[3];
    i8_gather_triples(w, g);
    a[0] = i8_cut<6, 0>(g[0]);
    a[1] = i8_join<6, 6>(g[0], g[1]);
    a[2] = i8_join<6, 4>(g[1], g[2]);
    a[3] = i8_cut<6, 2>(g[2]);
  } else {  // 5 bits, code p of a quintet: bits 5p .. 5p+4 of its 40
    // Byte b of quintets 0..3: bytes b, b+5, b+10, b+15 of the five words.
    const uint32_t g0 = i8_prmt(i8_prmt(w[0], w[1], 0x0050), i8_prmt(w[2], w[3], 0x7200), 0x7610);
    const uint32_t g1 = i8_prmt(i8_prmt(w[0], w[1], 0x0061), i8_prmt(w[2], w[4], 0x4300), 0x7610);
    const uint32_t g2 = i8_prmt(i8_prmt(w[0], w[1], 0x0072), i8_prmt(w[3], w[4], 0x5000), 0x7610);
    const uint32_t g3 = i8_prmt(i8_prmt(w[0], w[2], 0x0043), i8_prmt(w[3], w[4], 0x6100), 0x7610);
    const uint32_t g4 = i8_prmt(i8_prmt(w[1], w[2], 0x0050), i8_prmt(w[3], w[4], 0x7200), 0x7610);
    a[0] = i8_cut<5, 0>(g0);
    a[1] = i8_join<5, 5>(g0, g1);
    a[2] = i8_cut<5, 2>(g1);
    a[3] = i8_join<5, 7>(g1, g2);
    a[4] = i8_join<5, 4>(g2, g3);
    a[5] = i8_cut<5, 1>(g3);
    a[6] = i8_join<5, 6>(g3, g4);
    a[7] = i8_cut<5, 3>(g4);
  }
}

// Every code register of WORDS words (whole units), in i8_pos order.
template <int BITS, int WORDS>
QUANTA_HD QUANTA_FORCEINLINE void i8_unpack(const uint32_t (&w)[WORDS],
                                            uint32_t (&a)[WORDS * 32 / BITS / 4]) {
  using U = I8Unit<BITS>;
  static_assert(WORDS % U::kWords == 0, "whole units only");
  if constexpr (U::kWords == 1) {
    QUANTA_I8_UNROLL
    for (int r = 0; r < WORDS * 8 / BITS; ++r) a[r] = i8_code_reg<BITS, WORDS>(w, r);
  } else {
    QUANTA_I8_UNROLL
    for (int u = 0; u < WORDS / U::kWords; ++u)
      i8_unpack_unit<BITS>(w + u * U::kWords, a + u * U::kRegs);
  }
}

}  // namespace quanta::cuda
