// GGUF blocks (ggml-common.h layouts, see src/format/gguf.hpp). Each block type has one visitor
// that walks its elements W at a time in natural order and calls
//     sink(off, q, scale, minus)   meaning   w[off + j] = q[j] · scale − minus,
// with q small integers held exactly in f32 and scale, minus the block's (sub-)scale and
// offset, exactly as ggml's dequantize_row_* forms them (d·sc and dmin·m are exact in f32, so
// one FMA gives ggml's value rounded once). The GEMV sink multiplies by x; the tile sink stores.
// Loads stay inside the block.
#pragma once

#include "cpu/engine/common.hpp"

namespace quanta::cpu::QUANTA_ISA::gguf {

inline uint32_t u32_at(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// get_scale_min_k4 of ggml-quants.c: 6-bit scale and min of sub-block j of Q4_K/Q5_K.
inline void scale_min_k4(int j, const uint8_t* q, int& sc, int& m) {
  if (j < 4) {
    sc = q[j] & 63;
    m = q[j + 4] & 63;
  } else {
    sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// The 16 signed 6-bit Q3_K scales (already minus 32).
inline int q3k_scale(const uint8_t* s, int i) {
  const int lo = i < 8 ? s[i] & 0xF : s[i - 8] >> 4;
  const int hi = (s[8 + i % 4] >> (2 * (i / 4))) & 3;
  return (lo | hi << 4) - 32;
}

// Nibble - 8 as f32 (Q4_0 elements).
alignas(64) inline constexpr float kQ4Minus8[16] = {-8, -7, -6, -5, -4, -3, -2, -1,
                                                    0,  1,  2,  3,  4,  5,  6,  7};
inline F nib_minus8(I raw) {
  if constexpr (W == 16)
    return V::lut(V::tbl(kQ4Minus8), raw);  // one vpermps, the mask included
  else
    return V::add(V::template ucvt<4>(raw), V::set1(-8.0f));
}

struct Q4_0 {
  static constexpr int kElems = 32, kBytes = 18;
  // acc += x · w over the block, the scale applied once: d · Σ x (q - 8). With 16 lanes one
  // vpermps makes q - 8 (nib_minus8); with fewer, Σ x·q - 8·xsum (xsum: the block's Σ x) saves an
  // add per vector, each lane starting at -8·xsum / W (a power of two: exact).
  static void dot(const uint8_t* b, const float* x, float xsum, F& acc) {
    constexpr bool kFold = W < 16;
    const auto q = [](I raw) { return kFold ? V::template ucvt<4>(raw) : nib_minus8(raw); };
    I raw = V::u8(b + 2);
    F s = kFold ? V::fma(V::load(x), q(raw), V::set1(xsum * (-8.0f / W)))
                : V::mul(V::load(x), q(raw));
    s = V::fma(V::load(x + 16), q(V::template shr<4>(raw)), s);
    for (int j = W; j < 16; j += W) {
      raw = V::u8(b + 2 + j);
      s = V::fma(V::load(x + j), q(raw), s);
      s = V::fma(V::load(x + 16 + j), q(V::template shr<4>(raw)), s);
    }
    acc = V::fma(V::half_bcast(b), s, acc);
  }
  template <class S>
  static void visit(const uint8_t* b, S&& sink) {
    const float d = V::half1(b);
    for (int j = 0; j < 16; j += W) {
      const I raw = V::u8(b + 2 + j);
      sink(j, V::template ucvt<4>(raw), d, 8.0f * d);
      sink(16 + j, V::template ucvt<4>(V::template shr<4>(raw)), d, 8.0f * d);
    }
  }
};

struct Q4_1 {
  static constexpr int kElems = 32, kBytes = 20;
  template <class S>
  static void visit(const uint8_t* b, S&& sink) {
    const float d = V::half1(b), m = V::half1(b + 2);
    for (int j = 0; j < 16; j += W) {
      const I raw = V::u8(b + 4 + j);
      sink(j, V::template ucvt<4>(raw), d, -m);
      sink(16 + j, V::template ucvt<4>(V::template shr<4>(raw)), d, -m);
    }
  }
};

// Q5_0 / Q5_1: bit j of qh is bit 4 of element j.
template <bool kMin>
struct Q5 {
  static constexpr int kElems = 32, kBytes = kMin ? 24 : 22;
  template <class S>
  static void visit(const uint8_t* b, S&& sink) {
    const float d = V::half1(b);
    const float minus = kMin ? -V::half1(b + 2) : 16.0f * d;
    const int at = kMin ? 4 : 2;
    const uint32_t qh = u32_at(b + at);
    const F sixteen = V::set1(16.0f);
    for (int j = 0; j < 16; j += W) {
      const I raw = V::u8(b + at + 4 + j);
      sink(j, V::add(V::template ucvt<4>(raw), V::select_bits(qh >> j, sixteen)), d, minus);
      sink(16 + j,
           V::add(V::template ucvt<4>(V::template shr<4>(raw)),
                  V::select_bits(qh >> (16 + j), sixteen)),
           d, minus);
    }
  }
};

struct Q8_0 {
  static constexpr int kElems = 32, kBytes = 34;
  static void dot(const uint8_t* b, const float* x, F& acc) {
    F s = V::mul(V::load(x), V::cvt(V::s8(b + 2)));
    for (int j = W; j < 32; j += W) s = V::fma(V::load(x + j), V::cvt(V::s8(b + 2 + j)), s);
    acc = V::fma(V::half_bcast(b), s, acc);
  }
  template <class S>
  static void visit(const uint8_t* b, S&& sink) {
    const float d = V::half1(b);
    for (int j = 0; j < 32; j += W) sink(j, V::cvt(V::s8(b + 2 + j)), d, 0.0f);
  }
};

// Q2_K: element 128h + 32j + l is bits 2j..2j+1 of qs[32h + l]; scale byte (element / 16):
// low nibble scale, high nibble min.
struct Q2_K {
  static constexpr int kElems = 256, kBytes = 84;
  template <class S>
  static void visit(const uint8_t* b, S&& sink) {
    const uint8_t* sc = b;
    const uint8_t* qs = b + 16;
    const float d = V::half1(b + 80), dmin = V::half1(b + 82);
    for (int h = 0; h < 2; ++h)
      for (int j = 0; j < 4; ++j)
        for (int l = 0; l < 32; l += W) {
          const int is = 8 * h + 2 * j + l / 16;
          const F q = V::template ucvt<2>(V::shr_var(V::u8(qs + 32 * h + l), 2 * j));
          sink(128 * h + 32 * j + l, q, d * static_cast<float>(sc[is] & 0xF),
               dmin * static_cast<float>(sc[is] >> 4));
        }
  }
};

// Q3_K: as Q2_K for the low 2 bits; the element is q - 4 unless bit 4h + j of hmask[l] is set.
struct Q3_K {
  static constexpr int kElems = 256, kBytes = 110;
  template <class S>
  static void visit(const uint8_t* b, S&& sink) {
    const uint8_t* hm = b;
    const uint8_t* qs = b + 32;
    const uint8_t* scales = b + 96;
    const float d = V::half1(b + 108);
    const F four = V::set1(4.0f);
    for (int h = 0; h < 2; ++h)
      for (int j = 0; j < 4; ++j)
        for (int l = 0; l < 32; l += W) {
          const float dl = d * static_cast<float>(q3k_scale(scales, 8 * h + 2 * j + l / 16));
          const F q2 = V::template ucvt<2>(V::shr_var(V::u8(qs + 32 * h + l), 2 * j));
          const F q =
              V::add(q2, V::select_bytes(hm + l, static_cast<uint8_t>(1u << (4 * h + j)), four));
          sink(128 * h + 32 * j + l, q, dl, 4.0f * dl);
        }
  }
};

// Q4_K / Q5_K: four chunks of 64; qs[32c + l] holds element 64c + l (low nibble) and
// 64c + 32 + l (high); Q5_K's qh[l] bit 2c / 2c + 1 adds 16.
template <bool kFive>
struct QK45 {
  static constexpr int kElems = 256, kBytes = kFive ? 176 : 144;
  template <class S>
  static void visit(const uint8_t* b, S&& sink) {
    const float d = V::half1(b), dmin = V::half1(b + 2);
    const uint8_t* scales = b + 4;
    const uint8_t* qh = b + 16;
    const uint8_t* qs = b + (kFive ? 48 : 16);
    const F sixteen = V::set1(16.0f);
    for (int c = 0; c < 4; ++c) {
      int s1, m1, s2, m2;
      scale_min_k4(2 * c, scales, s1, m1);
      scale_min_k4(2 * c + 1, scales, s2, m2);
      const float d1 = d * static_cast<float>(s1), n1 = dmin * static_cast<float>(m1);
      const float d2 = d * static_cast<float>(s2), n2 = dmin * static_cast<float>(m2);
      for (int l = 0; l < 32; l += W) {
        const I raw = V::u8(qs + 32 * c + l);
        F lo = V::template ucvt<4>(raw);
        F hi = V::template ucvt<4>(V::template shr<4>(raw));
        if constexpr (kFive) {
          lo = V::add(lo, V::select_bytes(qh + l, static_cast<uint8_t>(1u << (2 * c)), sixteen));
          hi = V::add(hi, V::select_bytes(qh + l, static_cast<uint8_t>(2u << (2 * c)), sixteen));
        }
        sink(64 * c + l, lo, d1, n1);
        sink(64 * c + 32 + l, hi, d2, n2);
      }
    }
  }
};

// Q6_K: per 128-element half, ql[l] / ql[l+32] hold the low nibbles of elements l, l+32 (low)
// and l+64, l+96 (high); qh[l] their top two bits; element i uses scales[i / 16]; q - 32.
struct Q6_K {
  static constexpr int kElems = 256, kBytes = 210;
  template <class S>
  static void visit(const uint8_t* b, S&& sink) {
    const float d = V::half1(b + 208);
    const auto* scales = reinterpret_cast<const int8_t*>(b + 192);
    const I m4 = V::seti(0xF), m2 = V::seti(3);
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = b + 64 * h;
      const uint8_t* qh = b + 128 + 32 * h;
      const int8_t* sc = scales + 8 * h;
      for (int l = 0; l < 32; l += W) {
        const int is = l / 16;
        const I a = V::u8(ql + l), c = V::u8(ql + 32 + l), hq = V::u8(qh + l);
        const I q1 = V::or_(V::and_(a, m4), V::template shl<4>(V::and_(hq, m2)));
        const I q2 =
            V::or_(V::and_(c, m4), V::template shl<4>(V::and_(V::template shr<2>(hq), m2)));
        const I q3 =
            V::or_(V::template shr<4>(a), V::template shl<4>(V::and_(V::template shr<4>(hq), m2)));
        const I q4 = V::or_(V::template shr<4>(c), V::template shl<4>(V::template shr<6>(hq)));
        const float d1 = d * static_cast<float>(sc[is]), d2 = d * static_cast<float>(sc[is + 2]);
        const float d3 = d * static_cast<float>(sc[is + 4]),
                    d4 = d * static_cast<float>(sc[is + 6]);
        sink(128 * h + l, V::cvt(q1), d1, 32.0f * d1);
        sink(128 * h + 32 + l, V::cvt(q2), d2, 32.0f * d2);
        sink(128 * h + 64 + l, V::cvt(q3), d3, 32.0f * d3);
        sink(128 * h + 96 + l, V::cvt(q4), d4, 32.0f * d4);
      }
    }
  }
};

// Calls fn.template operator()<BlockType>() for the scheme's block type.
template <class Fn>
inline void with_block(Scheme s, Fn&& fn) {
  switch (s) {
    case Scheme::q4_0:
      return fn.template operator()<Q4_0>();
    case Scheme::q4_1:
      return fn.template operator()<Q4_1>();
    case Scheme::q5_0:
      return fn.template operator()<Q5<false>>();
    case Scheme::q5_1:
      return fn.template operator()<Q5<true>>();
    case Scheme::q8_0:
      return fn.template operator()<Q8_0>();
    case Scheme::q2_K:
      return fn.template operator()<Q2_K>();
    case Scheme::q3_K:
      return fn.template operator()<Q3_K>();
    case Scheme::q4_K:
      return fn.template operator()<QK45<false>>();
    case Scheme::q5_K:
      return fn.template operator()<QK45<true>>();
    case Scheme::q6_K:
      return fn.template operator()<Q6_K>();
    default:
      return;
  }
}

// Decodes elements [k0, k0 + kc) of storage row r into out (f32, natural order).
template <class T>
inline void decode_row(const WeightPlan& w, int64_t r, int64_t k0, int64_t kc, float* out) {
  const uint8_t* row = row_ptr(w, r);
  for (int64_t blk = k0 / T::kElems; blk < (k0 + kc) / T::kElems; ++blk) {
    float* o = out + blk * T::kElems - k0;
    T::visit(row + blk * T::kBytes, [&](int off, F q, float s, float m) {
      V::store(o + off, V::fma(q, V::set1(s), V::set1(-m)));
    });
  }
}

}  // namespace quanta::cpu::QUANTA_ISA::gguf
