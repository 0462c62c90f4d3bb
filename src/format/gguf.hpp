// GGUF / ggml block codecs: the block layouts of ggml-common.h and decoders that are
// bit-exact with ggml's dequantize_row_* (ggml/src/ggml-quants.c) and gguf-py 0.19's
// dequantize. Decoders are QUANTA_HD so CUDA kernels and the CPU reference share them.
//
// Why the f32 decoders are exact on every compiler and on the device: each product below is
// an f16 value (11 significant bits) times integers whose product is at most 2^12 in
// magnitude (Q6_K: |scale| <= 128, |q| <= 32), so it fits f32's 24 bits exactly. The only
// rounding step is the final add of m (Q4_1, Q5_1) or subtraction of dmin*m (K-quants), so
// FMA contraction (nvcc's default, GCC's -ffp-contract=fast) cannot change a result, and
// ggml's and gguf-py's operation orders give the same bits.
#pragma once

#include <cstdint>

#include "quanta/format.hpp"
#include "quanta/numeric.hpp"

namespace quanta::codec::gguf {

inline constexpr int kQK = 32;          // QK4_0 = QK4_1 = QK5_0 = QK5_1 = QK8_0 (ggml-common.h)
inline constexpr int kQK_K = 256;       // QK_K: K-quant super-block
inline constexpr int kKScaleSize = 12;  // K_SCALE_SIZE: 8 packed 6-bit scales + 8 6-bit mins

// ---- block layouts (ggml-common.h; f16 fields held as their bits) -------------------------

// Q4_0: 2 + 32/2 = 18 bytes: 4.5 bpw
struct block_q4_0 {
  uint16_t d;
  uint8_t qs[kQK / 2];  // element j in the low nibble of qs[j], element j+16 in the high one
};
static_assert(sizeof(block_q4_0) == 18);

// Q4_1: 2*2 + 32/2 = 20 bytes: 5.0 bpw
struct block_q4_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qs[kQK / 2];
};
static_assert(sizeof(block_q4_1) == 20);

// Q5_0: 2 + 4 + 32/2 = 22 bytes: 5.5 bpw
struct block_q5_0 {
  uint16_t d;
  uint8_t qh[4];  // bit j of the little-endian u32 is bit 4 of element j
  uint8_t qs[kQK / 2];
};
static_assert(sizeof(block_q5_0) == 22);

// Q5_1: 2*2 + 4 + 32/2 = 24 bytes: 6.0 bpw
struct block_q5_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};
static_assert(sizeof(block_q5_1) == 24);

// Q8_0: 2 + 32 = 34 bytes: 8.5 bpw
struct block_q8_0 {
  uint16_t d;
  int8_t qs[kQK];
};
static_assert(sizeof(block_q8_0) == 34);

// Q2_K: 256/16 + 256/4 + 2*2 = 84 bytes: 2.625 bpw
struct block_q2_K {
  uint8_t scales[kQK_K / 16];  // per 16 elements: low nibble scale, high nibble min
  uint8_t qs[kQK_K / 4];
  uint16_t d;
  uint16_t dmin;
};
static_assert(sizeof(block_q2_K) == 84);

// Q3_K: 256/8 + 256/4 + 12 + 2 = 110 bytes: 3.4375 bpw
struct block_q3_K {
  uint8_t hmask[kQK_K / 8];
  uint8_t qs[kQK_K / 4];
  uint8_t scales[12];  // 16 6-bit scales, stored +32
  uint16_t d;
};
static_assert(sizeof(block_q3_K) == 110);

// Q4_K: 2*2 + 12 + 256/2 = 144 bytes: 4.5 bpw
struct block_q4_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleSize];
  uint8_t qs[kQK_K / 2];
};
static_assert(sizeof(block_q4_K) == 144);

// Q5_K: 2*2 + 12 + 256/8 + 256/2 = 176 bytes: 5.5 bpw
struct block_q5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleSize];
  uint8_t qh[kQK_K / 8];
  uint8_t qs[kQK_K / 2];
};
static_assert(sizeof(block_q5_K) == 176);

// Q6_K: 256/2 + 256/4 + 256/16 + 2 = 210 bytes: 6.5625 bpw
struct block_q6_K {
  uint8_t ql[kQK_K / 2];
  uint8_t qh[kQK_K / 4];
  int8_t scales[kQK_K / 16];
  uint16_t d;
};
static_assert(sizeof(block_q6_K) == 210);

// ---- decoders ------------------------------------------------------------------------------
// Each writes 32 or 256 values. T = float reproduces ggml's f32 arithmetic; T = double gives
// the same formula in double (the fp64 oracle). The f16 fields convert exactly either way.

template <class T>
QUANTA_HD inline T f16_field(uint16_t bits) {
  return static_cast<T>(f16_bits_to_f32(bits));
}

// ggml-quants.c dequantize_row_q4_0: y = (nibble - 8) * d.
template <class T>
QUANTA_HD inline void dequantize_block_q4_0(const block_q4_0& b, T* y) {
  const T d = f16_field<T>(b.d);
  for (int j = 0; j < kQK / 2; ++j) {
    const int x0 = (b.qs[j] & 0x0F) - 8;
    const int x1 = (b.qs[j] >> 4) - 8;
    y[j] = static_cast<T>(x0) * d;
    y[j + kQK / 2] = static_cast<T>(x1) * d;
  }
}

// dequantize_row_q4_1: y = nibble * d + m.
template <class T>
QUANTA_HD inline void dequantize_block_q4_1(const block_q4_1& b, T* y) {
  const T d = f16_field<T>(b.d);
  const T m = f16_field<T>(b.m);
  for (int j = 0; j < kQK / 2; ++j) {
    const int x0 = b.qs[j] & 0x0F;
    const int x1 = b.qs[j] >> 4;
    y[j] = static_cast<T>(x0) * d + m;
    y[j + kQK / 2] = static_cast<T>(x1) * d + m;
  }
}

// qh as ggml reads it: memcpy into a u32 on a little-endian host; assembled byte-wise here.
QUANTA_HD inline uint32_t load_qh(const uint8_t* qh) {
  return static_cast<uint32_t>(qh[0]) | static_cast<uint32_t>(qh[1]) << 8 |
         static_cast<uint32_t>(qh[2]) << 16 | static_cast<uint32_t>(qh[3]) << 24;
}

// dequantize_row_q5_0: y = ((nibble | qh bit << 4) - 16) * d.
template <class T>
QUANTA_HD inline void dequantize_block_q5_0(const block_q5_0& b, T* y) {
  const T d = f16_field<T>(b.d);
  const uint32_t qh = load_qh(b.qh);
  for (int j = 0; j < kQK / 2; ++j) {
    const int xh0 = ((qh >> j) << 4) & 0x10;
    const int xh1 = (qh >> (j + 12)) & 0x10;
    const int x0 = ((b.qs[j] & 0x0F) | xh0) - 16;
    const int x1 = ((b.qs[j] >> 4) | xh1) - 16;
    y[j] = static_cast<T>(x0) * d;
    y[j + kQK / 2] = static_cast<T>(x1) * d;
  }
}

// dequantize_row_q5_1: y = (nibble | qh bit << 4) * d + m.
template <class T>
QUANTA_HD inline void dequantize_block_q5_1(const block_q5_1& b, T* y) {
  const T d = f16_field<T>(b.d);
  const T m = f16_field<T>(b.m);
  const uint32_t qh = load_qh(b.qh);
  for (int j = 0; j < kQK / 2; ++j) {
    const int xh0 = ((qh >> j) << 4) & 0x10;
    const int xh1 = (qh >> (j + 12)) & 0x10;
    const int x0 = (b.qs[j] & 0x0F) | xh0;
    const int x1 = (b.qs[j] >> 4) | xh1;
    y[j] = static_cast<T>(x0) * d + m;
    y[j + kQK / 2] = static_cast<T>(x1) * d + m;
  }
}

// dequantize_row_q8_0: y = qs * d.
template <class T>
QUANTA_HD inline void dequantize_block_q8_0(const block_q8_0& b, T* y) {
  const T d = f16_field<T>(b.d);
  for (int j = 0; j < kQK; ++j) y[j] = static_cast<T>(b.qs[j]) * d;
}

// dequantize_row_q2_K: 16 groups of 16; element 128h + 32j + l takes bits 2j..2j+1 of
// qs[32h + l] and scale byte i/16. y = (d * sc) * q - dmin * m.
template <class T>
QUANTA_HD inline void dequantize_block_q2_K(const block_q2_K& b, T* y) {
  const T d = f16_field<T>(b.d);
  const T min = f16_field<T>(b.dmin);
  const uint8_t* q = b.qs;
  int is = 0;
  for (int n = 0; n < kQK_K; n += 128) {
    for (int shift = 0; shift < 8; shift += 2) {
      for (int half = 0; half < 2; ++half) {
        const uint8_t sc = b.scales[is++];
        const T dl = d * static_cast<T>(sc & 0xF);
        const T ml = min * static_cast<T>(sc >> 4);
        for (int l = 0; l < 16; ++l) {
          *y++ = dl * static_cast<T>((q[l + 16 * half] >> shift) & 3) - ml;
        }
      }
    }
    q += 32;
  }
}

// The 16 6-bit Q3_K scales (already -32): low nibbles in scales[0..7] (low then high
// nibble), top 2 bits in scales[8..11]. Written as quantize_row_q3_K_ref packs them; equal to
// dequantize_row_q3_K's kmask shuffle.
QUANTA_HD inline int q3_K_scale(const uint8_t* scales, int s) {
  const int lo = s < 8 ? scales[s] & 0xF : scales[s - 8] >> 4;
  const int hi = (scales[8 + s % 4] >> (2 * (s / 4))) & 3;
  return (lo | hi << 4) - 32;
}

// dequantize_row_q3_K: element 128h + 32j + l takes bits 2j..2j+1 of qs[32h + l] and
// subtracts 4 unless bit 4h + j of hmask[l] is set. y = (d * sc) * q.
template <class T>
QUANTA_HD inline void dequantize_block_q3_K(const block_q3_K& b, T* y) {
  const T d_all = f16_field<T>(b.d);
  const uint8_t* q = b.qs;
  uint8_t m = 1;
  int is = 0;
  for (int n = 0; n < kQK_K; n += 128) {
    for (int shift = 0; shift < 8; shift += 2) {
      for (int half = 0; half < 2; ++half) {
        const T dl = d_all * static_cast<T>(q3_K_scale(b.scales, is++));
        for (int l = 16 * half; l < 16 * half + 16; ++l) {
          const int v = ((q[l] >> shift) & 3) - ((b.hmask[l] & m) ? 0 : 4);
          *y++ = dl * static_cast<T>(v);
        }
      }
      m = static_cast<uint8_t>(m << 1);
    }
    q += 32;
  }
}

// get_scale_min_k4 (ggml-quants.c): 6-bit scale and min of sub-block j (0..7) of Q4_K/Q5_K.
QUANTA_HD inline void get_scale_min_k4(int j, const uint8_t* q, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = static_cast<uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    *m = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

// dequantize_row_q4_K: 4 chunks of 64; qs[32c + l] holds element 64c + l (low nibble) and
// 64c + 32 + l (high nibble). y = (d * sc) * q - (dmin * m).
template <class T>
QUANTA_HD inline void dequantize_block_q4_K(const block_q4_K& b, T* y) {
  const T d = f16_field<T>(b.d);
  const T min = f16_field<T>(b.dmin);
  const uint8_t* q = b.qs;
  for (int is = 0; is < 8; is += 2) {
    uint8_t sc, m;
    get_scale_min_k4(is + 0, b.scales, &sc, &m);
    const T d1 = d * static_cast<T>(sc);
    const T m1 = min * static_cast<T>(m);
    get_scale_min_k4(is + 1, b.scales, &sc, &m);
    const T d2 = d * static_cast<T>(sc);
    const T m2 = min * static_cast<T>(m);
    for (int l = 0; l < 32; ++l) *y++ = d1 * static_cast<T>(q[l] & 0xF) - m1;
    for (int l = 0; l < 32; ++l) *y++ = d2 * static_cast<T>(q[l] >> 4) - m2;
    q += 32;
  }
}

// dequantize_row_q5_K: Q4_K plus a 5th bit; qh[l] bit 2c is element 64c + l's, bit 2c + 1 is
// element 64c + 32 + l's.
template <class T>
QUANTA_HD inline void dequantize_block_q5_K(const block_q5_K& b, T* y) {
  const T d = f16_field<T>(b.d);
  const T min = f16_field<T>(b.dmin);
  const uint8_t* ql = b.qs;
  uint8_t u1 = 1, u2 = 2;
  for (int is = 0; is < 8; is += 2) {
    uint8_t sc, m;
    get_scale_min_k4(is + 0, b.scales, &sc, &m);
    const T d1 = d * static_cast<T>(sc);
    const T m1 = min * static_cast<T>(m);
    get_scale_min_k4(is + 1, b.scales, &sc, &m);
    const T d2 = d * static_cast<T>(sc);
    const T m2 = min * static_cast<T>(m);
    for (int l = 0; l < 32; ++l) {
      *y++ = d1 * static_cast<T>((ql[l] & 0xF) + ((b.qh[l] & u1) ? 16 : 0)) - m1;
    }
    for (int l = 0; l < 32; ++l) {
      *y++ = d2 * static_cast<T>((ql[l] >> 4) + ((b.qh[l] & u2) ? 16 : 0)) - m2;
    }
    ql += 32;
    u1 = static_cast<uint8_t>(u1 << 2);
    u2 = static_cast<uint8_t>(u2 << 2);
  }
}

// dequantize_row_q6_K: per 128-element half, ql[l] / ql[l+32] hold the low nibbles of
// elements l, l+32 (low) and l+64, l+96 (high); qh[l] their top 2 bits at shifts 0,2,4,6.
// Element i uses scales[i/16]. y = (d * sc) * (q - 32).
template <class T>
QUANTA_HD inline void dequantize_block_q6_K(const block_q6_K& b, T* y) {
  const T d = f16_field<T>(b.d);
  const uint8_t* ql = b.ql;
  const uint8_t* qh = b.qh;
  const int8_t* sc = b.scales;
  for (int n = 0; n < kQK_K; n += 128) {
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      const int q1 = ((ql[l + 0] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
      const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
      const int q3 = ((ql[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      y[l + 0] = d * static_cast<T>(sc[is + 0]) * static_cast<T>(q1);
      y[l + 32] = d * static_cast<T>(sc[is + 2]) * static_cast<T>(q2);
      y[l + 64] = d * static_cast<T>(sc[is + 4]) * static_cast<T>(q3);
      y[l + 96] = d * static_cast<T>(sc[is + 6]) * static_cast<T>(q4);
    }
    y += 128;
    ql += 64;
    qh += 32;
    sc += 8;
  }
}

// ---- runtime dispatch (host; gguf.cpp) ---------------------------------------------------
// `block` needs no alignment. Throws quanta::Error if `s` is not a GGUF block scheme.
// Writes scheme_info(s).block_elems values.
void decode_block(Scheme s, const void* block, float* out);
void decode_block_f64(Scheme s, const void* block, double* out);

// Quantizes k floats (a multiple of the block size) into k / block_elems blocks, bit-exact
// with gguf-py 0.19 quantize() (= ggml quantize_row_*_ref) for finite input. Q4_0, Q4_1,
// Q5_0, Q5_1, Q8_0 only; K-quants throw quanta::Error (decode-only for now).
void encode_row(Scheme s, const float* x, int64_t k, uint8_t* out);

}  // namespace quanta::codec::gguf
