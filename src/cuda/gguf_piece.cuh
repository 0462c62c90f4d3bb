// GGUF blocks as 32-element pieces (qmv_gguf.cu, dequantize_gguf.cu, qmm_gguf_mma.cu): a row's
// bytes parked in shared memory as aligned words are read back as pieces, the elements
// [32p, 32p + 32) of a segment (a legacy block, or sub-block p % 8 of a super-block): their values
// as bytes q + offset and a scale and min per 16-element half, so that element i is
// scale·(byte_i − offset) − min, the codec's value (format/gguf.hpp: each product is exact, the
// one rounding is the min's subtraction). qmv_gguf and dequantize_gguf park a warp's segment of
// 1024 elements (32 legacy blocks or 4 super-blocks) and lane l decodes piece l whole
// (decode_piece); qmm_gguf_mma parks 256 elements of 128 rows and a lane decodes two words of a
// piece of each of its rows (piece_word).
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
// Word i of the words from byte offset `at` (even) as words_at reads them: word i's aligned load
// is word i - 1's upper one, so consecutive words share their loads.
__device__ __forceinline__ uint32_t word_at(const uint32_t* s, int at, int i) {
  const int i0 = (at >> 2) + i;
  return __funnelshift_r(s[i0], s[i0 + 1], (at & 3) * 8);
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

// A lane's share of a segment of `bytes` bytes at p (2-byte aligned): words lane + 32i counted
// from the aligned word holding p's first byte, zero past the segment, and the stack's last word
// (partly past `end`) assembled from its bytes. Parked, the segment starts at byte p % 4.
template <int W>
__device__ __forceinline__ void load_segment(const uint8_t* p, int bytes, const uint8_t* end,
                                             int lane, uint32_t (&out)[W]) {
  const int phase = static_cast<int>(reinterpret_cast<uintptr_t>(p) & 3);
  const uint32_t* w0 = reinterpret_cast<const uint32_t*>(p - phase);
  const int words = (phase + bytes + 3) / 4;
  // Every row but the stack's last ends inside it: then a predicated load a word, with no
  // per-word bounds branch (those, with the byte loop beside each load, made up ~40% of
  // qmv_gguf's loop in SASS; without them it ran 1.04-1.43x faster, docs/PERF.md).
  if (reinterpret_cast<const uint8_t*>(w0 + words) <= end) {
    const uint32_t* src = w0 + lane;
#pragma unroll
    for (int i = 0; i < W; ++i) out[i] = lane + 32 * i < words ? __ldcs(src + 32 * i) : 0u;
    return;
  }
#pragma unroll
  for (int i = 0; i < W; ++i) {
    const int wi = lane + 32 * i;
    out[i] = 0;
    if (wi >= words) continue;
    const uint32_t* src = w0 + wi;
    if (reinterpret_cast<const uint8_t*>(src + 1) <= end) {
      out[i] = __ldcs(src);  // streamed: read once
    } else {
      const uint8_t* b = reinterpret_cast<const uint8_t*>(src);
      uint32_t v = 0;
      for (int c = 0; b + c < end; ++c) v |= static_cast<uint32_t>(b[c]) << (8 * c);
      out[i] = v;
    }
  }
}

// The scale and min of each 16-element half of piece p of the segment parked at byte `base` of s
// (element i of the piece is sc[i / 16]·(byte_i − offset) − mn[i / 16]).
template <Scheme S>
__device__ __forceinline__ void piece_scales(const uint32_t* s, int base, int p, float (&sc)[2],
                                             float (&mn)[2]) {
  using G = Gguf<S>;
  if constexpr (G::kElems == 32) {
    const int o = base + p * G::kBytes;
    sc[0] = sc[1] = f16_at(s, o);
    mn[0] = mn[1] = G::kMin ? -f16_at(s, o + 2) : 0.0f;  // q4_1, q5_1: w = d·q + m
  } else {
    const int o = base + (p >> 3) * G::kBytes, j = p & 7;
    const int h = j >> 2, jj = j & 3;  // q2_K, q3_K, q6_K: scales per 16, index 8h + 2jj + half
    if constexpr (S == Scheme::q4_K || S == Scheme::q5_K) {
      const float d = f16_at(s, o), dmin = f16_at(s, o + 2);
      uint8_t sc6, m6;
      gg::get_scale_min_k4(j, reinterpret_cast<const uint8_t*>(s) + o + 4, &sc6, &m6);
      sc[0] = sc[1] = d * static_cast<float>(sc6);
      mn[0] = mn[1] = dmin * static_cast<float>(m6);
    } else if constexpr (S == Scheme::q2_K) {  // scales[16] | qs[64] | d | dmin
      const float d = f16_at(s, o + 80), dmin = f16_at(s, o + 82);
#pragma unroll
      for (int hf = 0; hf < 2; ++hf) {
        const uint32_t b = u8_at(s, o + 8 * h + 2 * jj + hf);
        sc[hf] = d * static_cast<float>(b & 0xF);
        mn[hf] = dmin * static_cast<float>(b >> 4);
      }
    } else if constexpr (S == Scheme::q3_K) {  // hmask[32] | qs[64] | scales[12] | d
      const float d = f16_at(s, o + 108);
      const uint8_t* scales = reinterpret_cast<const uint8_t*>(s) + o + 96;
#pragma unroll
      for (int hf = 0; hf < 2; ++hf) {
        sc[hf] = d * static_cast<float>(gg::q3_K_scale(scales, 8 * h + 2 * jj + hf));
        mn[hf] = 0.0f;
      }
    } else {  // q6_K: ql[128] | qh[64] | scales[16] (int8) | d
      const float d = f16_at(s, o + 208);
#pragma unroll
      for (int hf = 0; hf < 2; ++hf) {
        const int8_t b = static_cast<int8_t>(u8_at(s, o + 192 + 8 * h + 2 * jj + hf));
        sc[hf] = d * static_cast<float>(b);
        mn[hf] = 0.0f;
      }
    }
  }
}

// Word i (0..7) of piece p: its elements 4i..4i+3 as bytes q + offset (element 4i + c in byte c).
template <Scheme S>
__device__ __forceinline__ uint32_t piece_word(const uint32_t* s, int base, int p, int i) {
  using G = Gguf<S>;
  if constexpr (G::kElems == 32) {
    const int o = base + p * G::kBytes;
    if constexpr (S == Scheme::q8_0) {
      return word_at(s, o + 2, i) ^ 0x80808080u;  // int8 + 128
    } else {
      constexpr bool kHigh = S == Scheme::q5_0 || S == Scheme::q5_1;
      constexpr int kQs = 2 + (G::kMin ? 2 : 0) + (kHigh ? 4 : 0);
      // Elements j and j + 16 share byte j.
      uint32_t q = (word_at(s, o + kQs, i % 4) >> (4 * (i / 4))) & 0x0F0F0F0Fu;
      if constexpr (kHigh) {  // bit e of qh is element e's bit 4
        q |= spread4(word_at(s, o + kQs - 4, 0) >> (4 * i)) << 4;
      }
      return q;
    }
  } else {
    const int o = base + (p >> 3) * G::kBytes, j = p & 7;
    const int h = j >> 2, jj = j & 3;  // q2_K, q3_K, q6_K: elements 128h + 32jj + l
    uint32_t q;
    if constexpr (S == Scheme::q4_K || S == Scheme::q5_K) {
      // Sub-block j: nibble j % 2 of qs[32(j / 2) + l]; q5_K's bit 4 is bit j of qh[l].
      constexpr int kQs = S == Scheme::q4_K ? 16 : 48;
      q = (word_at(s, o + kQs + 32 * (j >> 1), i) >> (4 * (j & 1))) & 0x0F0F0F0Fu;
      if constexpr (S == Scheme::q5_K) {
        q |= ((word_at(s, o + 16, i) >> j) & 0x01010101u) << 4;
      }
    } else if constexpr (S == Scheme::q2_K) {  // bits 2jj of qs[32h + l]
      q = (word_at(s, o + 16 + 32 * h, i) >> (2 * jj)) & 0x03030303u;
    } else if constexpr (S == Scheme::q3_K) {
      // q = bits 2jj of qs[32h + l] - 4 unless bit 4h + jj of hmask[l] is set: stored as
      // (2 bits | hmask bit << 2) with offset 4.
      q = (word_at(s, o + 32 + 32 * h, i) >> (2 * jj)) & 0x03030303u;
      q |= ((word_at(s, o, i) >> (4 * h + jj)) & 0x01010101u) << 2;
    } else {  // q6_K: low nibble jj / 2 of ql[64h + 32(jj % 2) + l], bits 2jj of qh[32h + l] above
      q = (word_at(s, o + 64 * h + 32 * (jj & 1), i) >> (4 * (jj >> 1))) & 0x0F0F0F0Fu;
      q |= ((word_at(s, o + 128 + 32 * h, i) >> (2 * jj)) & 0x03030303u) << 4;
    }
    return q;
  }
}

// Piece p whole: its 32 stored values as bytes q + offset (element i in byte i % 4 of word i / 4),
// and the scale and min of each half. The same words as piece_word, read as runs of consecutive
// words (words_at): piece_word's loads, one funnel pair a word, did not merge between neighbours
// (twice the shared-memory loads in qmv_gguf's PTX).
template <Scheme S>
__device__ __forceinline__ void decode_piece(const uint32_t* s, int base, int p, uint32_t (&qb)[8],
                                             float (&sc)[2], float (&mn)[2]) {
  using G = Gguf<S>;
  piece_scales<S>(s, base, p, sc, mn);
  uint32_t w[8];
  if constexpr (G::kElems == 32) {
    const int o = base + p * G::kBytes;
    if constexpr (S == Scheme::q8_0) {
      words_at(s, o + 2, w);
#pragma unroll
      for (int i = 0; i < 8; ++i) qb[i] = w[i] ^ 0x80808080u;  // int8 + 128
    } else {
      constexpr bool kHigh = S == Scheme::q5_0 || S == Scheme::q5_1;
      constexpr int kQs = 2 + (G::kMin ? 2 : 0) + (kHigh ? 4 : 0);
      uint32_t w4[4];
      words_at(s, o + kQs, w4);
#pragma unroll
      for (int i = 0; i < 4; ++i) {  // elements j and j + 16 share byte j
        qb[i] = w4[i] & 0x0F0F0F0Fu;
        qb[i + 4] = (w4[i] >> 4) & 0x0F0F0F0Fu;
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
    const int h = j >> 2, jj = j & 3;
    if constexpr (S == Scheme::q4_K || S == Scheme::q5_K) {
      words_at(s, o + (S == Scheme::q4_K ? 16 : 48) + 32 * (j >> 1), w);
#pragma unroll
      for (int i = 0; i < 8; ++i) qb[i] = (w[i] >> (4 * (j & 1))) & 0x0F0F0F0Fu;
      if constexpr (S == Scheme::q5_K) {
        words_at(s, o + 16, w);
#pragma unroll
        for (int i = 0; i < 8; ++i) qb[i] |= ((w[i] >> j) & 0x01010101u) << 4;
      }
    } else if constexpr (S == Scheme::q2_K) {
      words_at(s, o + 16 + 32 * h, w);
#pragma unroll
      for (int i = 0; i < 8; ++i) qb[i] = (w[i] >> (2 * jj)) & 0x03030303u;
    } else if constexpr (S == Scheme::q3_K) {
      words_at(s, o + 32 + 32 * h, w);
#pragma unroll
      for (int i = 0; i < 8; ++i) qb[i] = (w[i] >> (2 * jj)) & 0x03030303u;
      words_at(s, o, w);
#pragma unroll
      for (int i = 0; i < 8; ++i) qb[i] |= ((w[i] >> (4 * h + jj)) & 0x01010101u) << 2;
    } else {  // q6_K
      words_at(s, o + 64 * h + 32 * (jj & 1), w);
#pragma unroll
      for (int i = 0; i < 8; ++i) qb[i] = (w[i] >> (4 * (jj >> 1))) & 0x0F0F0F0Fu;
      words_at(s, o + 128 + 32 * h, w);
#pragma unroll
      for (int i = 0; i < 8; ++i) qb[i] |= ((w[i] >> (2 * jj)) & 0x03030303u) << 4;
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
