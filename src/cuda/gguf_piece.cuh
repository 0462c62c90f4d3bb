// GGUF blocks as 32-element pieces (qmv_gguf.cu, dequantize_gguf.cu): a warp takes a row's
// segment of 1024 elements (32 legacy blocks or 4 super-blocks), parks its bytes in shared memory
// as aligned words, and lane l decodes piece l: the segment's elements [32l, 32l + 32) (a legacy
// block, or sub-block l % 8 of a super-block) as bytes q + offset and a scale and min per
// 16-element half, so that element i is scale·(byte_i − offset) − min, the codec's value
// (format/gguf.hpp: each product is exact, the one rounding is the min's subtraction).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <cuda_fp16.h>

#include "format/gguf.hpp"
#include "quanta/error.hpp"
#include "quanta/format.hpp"

namespace quanta::cuda {

namespace gg = codec::gguf;

inline constexpr int kPieces = 32;              // pieces of 32 elements per segment: one per lane
inline constexpr int kSegElems = kPieces * 32;  // elements of a row per segment

// The codec's block, its bytes and elements, the offset that makes every stored value
// q + offset >= 0, and whether the weights carry a min (w = scale·q − min: then each half's Σx is
// needed too).
template <Scheme S>
struct Gguf;
template <>
struct Gguf<Scheme::q4_0> {
  using Block = gg::block_q4_0;
  static constexpr int kBytes = sizeof(Block), kElems = gg::kQK, kOffset = 8;
  static constexpr bool kMin = false;
};
template <>
struct Gguf<Scheme::q4_1> {
  using Block = gg::block_q4_1;
  static constexpr int kBytes = sizeof(Block), kElems = gg::kQK, kOffset = 0;
  static constexpr bool kMin = true;
};
template <>
struct Gguf<Scheme::q5_0> {
  using Block = gg::block_q5_0;
  static constexpr int kBytes = sizeof(Block), kElems = gg::kQK, kOffset = 16;
  static constexpr bool kMin = false;
};
template <>
struct Gguf<Scheme::q5_1> {
  using Block = gg::block_q5_1;
  static constexpr int kBytes = sizeof(Block), kElems = gg::kQK, kOffset = 0;
  static constexpr bool kMin = true;
};
template <>
struct Gguf<Scheme::q8_0> {
  using Block = gg::block_q8_0;
  static constexpr int kBytes = sizeof(Block), kElems = gg::kQK, kOffset = 128;
  static constexpr bool kMin = false;
};
template <>
struct Gguf<Scheme::q2_K> {
  using Block = gg::block_q2_K;
  static constexpr int kBytes = sizeof(Block), kElems = gg::kQK_K, kOffset = 0;
  static constexpr bool kMin = true;
};
template <>
struct Gguf<Scheme::q3_K> {
  using Block = gg::block_q3_K;
  static constexpr int kBytes = sizeof(Block), kElems = gg::kQK_K, kOffset = 4;
  static constexpr bool kMin = false;
};
template <>
struct Gguf<Scheme::q4_K> {
  using Block = gg::block_q4_K;
  static constexpr int kBytes = sizeof(Block), kElems = gg::kQK_K, kOffset = 0;
  static constexpr bool kMin = true;
};
template <>
struct Gguf<Scheme::q5_K> {
  using Block = gg::block_q5_K;
  static constexpr int kBytes = sizeof(Block), kElems = gg::kQK_K, kOffset = 0;
  static constexpr bool kMin = true;
};
template <>
struct Gguf<Scheme::q6_K> {
  using Block = gg::block_q6_K;
  static constexpr int kBytes = sizeof(Block), kElems = gg::kQK_K, kOffset = 32;
  static constexpr bool kMin = false;
};

// The field offsets decode_piece reads, as the codec lays the blocks out.
static_assert(offsetof(gg::block_q4_1, qs) == 4 && offsetof(gg::block_q5_0, qs) == 6 &&
              offsetof(gg::block_q5_1, qh) == 4 && offsetof(gg::block_q5_1, qs) == 8 &&
              offsetof(gg::block_q8_0, qs) == 2);
static_assert(offsetof(gg::block_q2_K, qs) == 16 && offsetof(gg::block_q2_K, d) == 80 &&
              offsetof(gg::block_q3_K, qs) == 32 && offsetof(gg::block_q3_K, scales) == 96 &&
              offsetof(gg::block_q3_K, d) == 108);
static_assert(offsetof(gg::block_q4_K, scales) == 4 && offsetof(gg::block_q4_K, qs) == 16 &&
              offsetof(gg::block_q5_K, qh) == 16 && offsetof(gg::block_q5_K, qs) == 48);
static_assert(offsetof(gg::block_q6_K, qh) == 128 && offsetof(gg::block_q6_K, scales) == 192 &&
              offsetof(gg::block_q6_K, d) == 208);

// Segment bytes, and the 4-byte words a lane loads per row: the segment may start 2 bytes into
// its first word.
template <Scheme S>
constexpr int seg_bytes() {
  return kSegElems / Gguf<S>::kElems * Gguf<S>::kBytes;
}
template <Scheme S>
constexpr int lane_words() {
  return (seg_bytes<S>() / 4 + 1 + 31) / 32;
}

// W words of a row's segment parked in shared memory, from byte offset `at` (even): funnel shifts
// of W + 1 aligned words (the buffer has a spare word at its end).
template <int W>
__device__ __forceinline__ void words_at(const uint32_t* s, int at, uint32_t (&w)[W]) {
  const int i0 = at >> 2;
  const uint32_t sh = (at & 3) * 8;
  uint32_t lo = s[i0];
#pragma unroll
  for (int i = 0; i < W; ++i) {
    const uint32_t hi = s[i0 + i + 1];
    w[i] = __funnelshift_r(lo, hi, sh);
    lo = hi;
  }
}
__device__ __forceinline__ uint32_t u16_at(const uint32_t* s, int at) {
  return reinterpret_cast<const uint16_t*>(s)[at >> 1];
}
__device__ __forceinline__ uint32_t u8_at(const uint32_t* s, int at) {
  return reinterpret_cast<const uint8_t*>(s)[at];
}
__device__ __forceinline__ float f16_at(const uint32_t* s, int at) {
  return __half2float(__ushort_as_half(static_cast<unsigned short>(u16_at(s, at))));
}
// Bits 0..3 of n as bit 0 of bytes 0..3.
__device__ __forceinline__ uint32_t spread4(uint32_t n) {
  return ((n & 0xFu) * 0x00204081u) & 0x01010101u;
}

// Piece p of the segment parked at byte `base` of s: its 32 stored values as bytes q + offset
// (element i in byte i % 4 of word i / 4), and the scale and min of each 16-element half.
template <Scheme S>
__device__ __forceinline__ void decode_piece(const uint32_t* s, int base, int p, uint32_t (&qb)[8],
                                             float (&sc)[2], float (&mn)[2]) {
  using G = Gguf<S>;
  if constexpr (G::kElems == 32) {
    const int o = base + p * G::kBytes;
    const float d = f16_at(s, o);
    sc[0] = sc[1] = d;
    mn[0] = mn[1] = 0.0f;
    if constexpr (S == Scheme::q8_0) {
      uint32_t w[8];
      words_at(s, o + 2, w);
#pragma unroll
      for (int i = 0; i < 8; ++i) qb[i] = w[i] ^ 0x80808080u;  // int8 + 128
    } else {
      constexpr bool kMin = G::kMin;
      constexpr bool kHigh = S == Scheme::q5_0 || S == Scheme::q5_1;
      constexpr int kQs = 2 + (kMin ? 2 : 0) + (kHigh ? 4 : 0);
      if constexpr (kMin) mn[0] = mn[1] = -f16_at(s, o + 2);  // w = d·q + m
      uint32_t w[4];
      words_at(s, o + kQs, w);
#pragma unroll
      for (int i = 0; i < 4; ++i) {  // elements j and j + 16 share byte j
        qb[i] = w[i] & 0x0F0F0F0Fu;
        qb[i + 4] = (w[i] >> 4) & 0x0F0F0F0Fu;
      }
      if constexpr (kHigh) {  // bit e of qh is element e's bit 4
        uint32_t qh[1];
        words_at(s, o + kQs - 4, qh);
#pragma unroll
        for (int i = 0; i < 8; ++i) qb[i] |= spread4(qh[0] >> (4 * i)) << 4;
      }
    }
  } else {
    const int o = base + (p >> 3) * G::kBytes, j = p & 7;
    if constexpr (S == Scheme::q4_K || S == Scheme::q5_K) {
      // Sub-block j: nibble j % 2 of qs[32(j / 2) + l]; q5_K's bit 4 is bit j of qh[l].
      const float d = f16_at(s, o), dmin = f16_at(s, o + 2);
      const uint8_t* scales = reinterpret_cast<const uint8_t*>(s) + o + 4;
      uint8_t sc6, m6;
      gg::get_scale_min_k4(j, scales, &sc6, &m6);
      sc[0] = sc[1] = d * static_cast<float>(sc6);
      mn[0] = mn[1] = dmin * static_cast<float>(m6);
      constexpr int kQs = S == Scheme::q4_K ? 16 : 48;
      uint32_t w[8];
      words_at(s, o + kQs + 32 * (j >> 1), w);
#pragma unroll
      for (int i = 0; i < 8; ++i) qb[i] = (w[i] >> (4 * (j & 1))) & 0x0F0F0F0Fu;
      if constexpr (S == Scheme::q5_K) {
        words_at(s, o + 16, w);
#pragma unroll
        for (int i = 0; i < 8; ++i) qb[i] |= ((w[i] >> j) & 0x01010101u) << 4;
      }
    } else {
      // q2_K, q3_K, q6_K: elements 128h + 32jj + l, scales per 16 (index 8h + 2jj + l / 16).
      const int h = j >> 2, jj = j & 3;
      uint32_t w[8];
      if constexpr (S == Scheme::q2_K) {  // scales[16] | qs[64] | d | dmin; bits 2jj of qs[32h + l]
        const float d = f16_at(s, o + 80), dmin = f16_at(s, o + 82);
#pragma unroll
        for (int hf = 0; hf < 2; ++hf) {
          const uint32_t b = u8_at(s, o + 8 * h + 2 * jj + hf);
          sc[hf] = d * static_cast<float>(b & 0xF);
          mn[hf] = dmin * static_cast<float>(b >> 4);
        }
        words_at(s, o + 16 + 32 * h, w);
#pragma unroll
        for (int i = 0; i < 8; ++i) qb[i] = (w[i] >> (2 * jj)) & 0x03030303u;
      } else if constexpr (S == Scheme::q3_K) {
        // hmask[32] | qs[64] | scales[12] | d; q = bits 2jj of qs[32h + l] - 4 unless bit 4h + jj
        // of hmask[l] is set: stored as (2 bits | hmask bit << 2) with offset 4.
        const float d = f16_at(s, o + 108);
        const uint8_t* scales = reinterpret_cast<const uint8_t*>(s) + o + 96;
#pragma unroll
        for (int hf = 0; hf < 2; ++hf) {
          sc[hf] = d * static_cast<float>(gg::q3_K_scale(scales, 8 * h + 2 * jj + hf));
          mn[hf] = 0.0f;
        }
        words_at(s, o + 32 + 32 * h, w);
#pragma unroll
        for (int i = 0; i < 8; ++i) qb[i] = (w[i] >> (2 * jj)) & 0x03030303u;
        words_at(s, o, w);
#pragma unroll
        for (int i = 0; i < 8; ++i) qb[i] |= ((w[i] >> (4 * h + jj)) & 0x01010101u) << 2;
      } else {  // q6_K: ql[128] | qh[64] | scales[16] (int8) | d
        // Low nibble jj / 2 of ql[64h + 32(jj % 2) + l], bits 2jj of qh[32h + l] above them.
        const float d = f16_at(s, o + 208);
#pragma unroll
        for (int hf = 0; hf < 2; ++hf) {
          const int8_t b = static_cast<int8_t>(u8_at(s, o + 192 + 8 * h + 2 * jj + hf));
          sc[hf] = d * static_cast<float>(b);
          mn[hf] = 0.0f;
        }
        words_at(s, o + 64 * h + 32 * (jj & 1), w);
#pragma unroll
        for (int i = 0; i < 8; ++i) qb[i] = (w[i] >> (4 * (jj >> 1))) & 0x0F0F0F0Fu;
        words_at(s, o + 128 + 32 * h, w);
#pragma unroll
        for (int i = 0; i < 8; ++i) qb[i] |= ((w[i] >> (2 * jj)) & 0x03030303u) << 4;
      }
    }
  }
}

// f.template operator()<S>() for the GGUF scheme s; `who` prefixes the error for any other.
template <class F>
void dispatch_gguf_scheme(Scheme s, std::string_view who, F&& f) {
  switch (s) {
    case Scheme::q4_0:
      return f.template operator()<Scheme::q4_0>();
    case Scheme::q4_1:
      return f.template operator()<Scheme::q4_1>();
    case Scheme::q5_0:
      return f.template operator()<Scheme::q5_0>();
    case Scheme::q5_1:
      return f.template operator()<Scheme::q5_1>();
    case Scheme::q8_0:
      return f.template operator()<Scheme::q8_0>();
    case Scheme::q2_K:
      return f.template operator()<Scheme::q2_K>();
    case Scheme::q3_K:
      return f.template operator()<Scheme::q3_K>();
    case Scheme::q4_K:
      return f.template operator()<Scheme::q4_K>();
    case Scheme::q5_K:
      return f.template operator()<Scheme::q5_K>();
    case Scheme::q6_K:
      return f.template operator()<Scheme::q6_K>();
    default:
      throw Error(std::string(who) + ": w: not a GGUF block format");
  }
}

}  // namespace quanta::cuda
