// The vector vocabulary of the CPU engine with one lane of plain C++: the portable path, run
// on any CPU (and by the tests everywhere, so the engine's logic is checked without SIMD).
#pragma once

#include <cstdint>
#include <cstring>

#include "quanta/dtype.hpp"
#include "quanta/numeric.hpp"

namespace quanta::cpu::scalar {

struct V {
  static constexpr int W = 1;
  static constexpr int kDotMR = 4, kDotNR = 4;
  static constexpr int kOutMR = 4, kOutNV = 4;
  static constexpr int kPackMR = 4, kPackNV = 4;  // packed nk tiles: unused here
  static constexpr int64_t kPackMinRows = 0;      // 0: the dot form at every M
  static constexpr int64_t kPackMinRowsMxfp4 = 0, kPackMinRowsNvfp4 = 0;
  using F = float;
  using I = uint32_t;
  using Tbl = const float*;

  static void prefetch(const void* p) { __builtin_prefetch(p); }
  static void prefetch_l2(const void* p) { __builtin_prefetch(p, 0, 2); }
  static void prefetch_nta(const void* p) { __builtin_prefetch(p, 0, 0); }
  static F zero() { return 0.0f; }
  static F set1(float v) { return v; }
  static F load(const float* p) { return *p; }
  static F load_n(const float* p, int n) { return n > 0 ? *p : 0.0f; }
  static void store(float* p, F v) { *p = v; }
  // 16-bit results (dequantize), as numeric.hpp rounds them.
  static F round_bf16(F v) { return bf16_bits_to_f32(f32_to_bf16_bits(v)); }
  static F round_f16(F v) { return f16_bits_to_f32(f32_to_f16_bits(v)); }
  static void store_f16(uint16_t* p, F v) { *p = f32_to_f16_bits(v); }
  static void store_bf16(uint16_t* p, F v) { *p = f32_to_bf16_bits(v); }
  // Keeps a multiply and a later add from being fused into one FMA (a volatile round trip: this
  // level also builds where there is no x86 register constraint).
  static void opaque(F& v) {
    volatile float t = v;
    v = t;
  }
  static void store_n(float* p, F v, int n) {
    if (n > 0) *p = v;
  }
  static F fma(F a, F b, F c) { return a * b + c; }
  static F fnma(F a, F b, F c) { return c - a * b; }
  static F mul(F a, F b) { return a * b; }
  static F add(F a, F b) { return a + b; }
  static F sub(F a, F b) { return a - b; }
  static float hsum(F v) { return v; }
  static void hsum4_add(F a, F b, F c, F d, float* out) {
    out[0] += a;
    out[1] += b;
    out[2] += c;
    out[3] += d;
  }
  static void hsum4_store(F a, F b, F c, F d, float* out) {
    out[0] = a;
    out[1] = b;
    out[2] = c;
    out[3] = d;
  }

  static void transpose(F*) {}  // a 1 x 1 block

  static I u8(const uint8_t* p) { return *p; }
  static I s8(const uint8_t* p) {
    return static_cast<I>(static_cast<int32_t>(static_cast<int8_t>(*p)));
  }
  static I gather16(const uint8_t* p, const uint8_t* ctl) {
    I v = 0;
    for (int k = 0; k < 4; ++k)
      if (ctl[k] < 16) v |= static_cast<I>(p[ctl[k]]) << (8 * k);
    return v;
  }
  static I shrv(I v, const uint32_t* sh) { return v >> *sh; }
  static I andv(I v, const uint32_t* m) { return v & *m; }
  static I seti(int v) { return static_cast<I>(v); }
  template <int N>
  static I shr(I v) {
    return v >> N;
  }
  template <int N>
  static I shl(I v) {
    return v << N;
  }
  static I shr_var(I v, int n) { return v >> n; }
  static I and_(I a, I b) { return a & b; }
  static I or_(I a, I b) { return a | b; }
  static F cvt(I v) { return static_cast<float>(static_cast<int32_t>(v)); }
  static F lane(F v, int) { return v; }
  static F u8_words(const uint32_t* u, int i) {
    return static_cast<float>((u[i / 4] >> (8 * (i % 4))) & 0xffu);
  }
  static F load_upper8(const float* p) { return *p; }  // (16-lane only)
  static F add_where(F q, I v, uint32_t bit, F x) { return (v & bit) ? q + x : q; }
  static F select_lanes(I v, uint32_t bit, F x) { return (v & bit) ? x : 0.0f; }
  static F half_bcast(const uint8_t* p) { return half1(p); }
  static void deinterleave(F a, F b, F& even, F& odd) {
    even = a;
    odd = b;
  }
  static void interleave(F even, F odd, F& a, F& b) {
    a = even;
    b = odd;
  }
  static Tbl tbl(const float* t16) { return t16; }
  static F lut(Tbl t, I idx) { return t[idx & 15u]; }
  template <int B>
  static F ucvt(I raw) {
    return static_cast<float>(raw & ((1u << B) - 1u));
  }
  template <int B>
  static I codes(const uint8_t* row, int64_t i0) {
    const int64_t bit = i0 * B;
    if constexpr (B == 8) {
      return row[i0];
    } else {
      // The second byte may lie past the row: kRowOverread covers it.
      const uint32_t v = row[bit >> 3] | static_cast<uint32_t>(row[(bit >> 3) + 1]) << 8;
      return v >> (bit & 7);
    }
  }
  static void nib2(const uint8_t* p, I& lo, I& hi) {
    lo = *p;
    hi = static_cast<I>(*p >> 4);
  }

  static F split2(const float* s) { return s[0]; }  // only 16-lane vectors span two groups

  static F load_sd(const uint8_t* p, DType t) {
    switch (t) {
      case DType::f32: {
        float v;
        std::memcpy(&v, p, 4);
        return v;
      }
      case DType::f16:
        return half1(p);
      case DType::bf16: {
        uint16_t h;
        std::memcpy(&h, p, 2);
        return bf16_bits_to_f32(h);
      }
    }
    return 0.0f;
  }
  static F load_sd_n(const uint8_t* p, DType t, int n) { return n > 0 ? load_sd(p, t) : 0.0f; }
  static float half1(const uint8_t* p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return f16_bits_to_f32(h);
  }

  static F e4m3s(const uint8_t* p, uint32_t& nan) {
    const uint8_t b = *p;
    if ((b & 0x7f) == 0x7f) nan |= 1;
    const uint16_t h = static_cast<uint16_t>((b & 0x80) << 8 | (b & 0x7f) << 7);
    return f16_bits_to_f32(h);
  }
  static F e4m3v(const uint8_t* p) {
    uint32_t nan = 0;
    return e4m3s(p, nan);
  }
  static void e4m3v2(const uint8_t* p, F& a, F& b) {  // e4m3v of the 2W codes at p
    a = e4m3v(p);
    b = e4m3v(p + W);
  }
  static bool e4m3_nan4(const uint8_t* p) {
    for (int i = 0; i < 4 * W; ++i)
      if ((p[i] & 0x7f) == 0x7f) return true;
    return false;
  }
  static F e4m3(const uint8_t* p) {
    uint32_t nan = 0;
    const float v = e4m3s(p, nan) * 256.0f;
    return nan ? __builtin_nanf("") : v;
  }
  static F e5m2(const uint8_t* p) { return f16_bits_to_f32(static_cast<uint16_t>(*p << 8)); }
  static F e8m0(const uint8_t* p) {
    const uint8_t b = *p;
    if (b == 0xff) return __builtin_nanf("");
    return bits_float(b == 0 ? 0x00400000u : static_cast<uint32_t>(b) << 23);
  }
  static F select_bits(uint32_t bits, F x) { return (bits & 1u) ? x : 0.0f; }
  static F select_bytes(const uint8_t* p, uint8_t m, F x) { return (*p & m) ? x : 0.0f; }
};

}  // namespace quanta::cpu::scalar
