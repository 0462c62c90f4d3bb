// The vector vocabulary of the CPU engine on AVX2 + FMA + F16C: 8 f32 lanes. Only files
// compiled with those flags include this (src/cpu/x86/avx2_*.cpp).
#pragma once

// GCC 12 reports the _mm*_undefined_* placeholders inside the intrinsic headers as
// uninitialised once they are inlined; the rest of this (per-ISA) file inherits the pragma.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "quanta/dtype.hpp"

namespace quanta::cpu::avx2 {

namespace vdetail {
// pshufb control and shifts that put code j of a run of 8 B-bit codes (an LSB-first bit
// stream of B bytes, broadcast to every 64-bit lane) into the low bits of dword lane j.
template <int B>
struct CodeCtl {
  alignas(32) uint8_t shuf[32] = {};
  alignas(32) uint32_t shift[8] = {};
  constexpr CodeCtl() {
    for (int j = 0; j < 8; ++j) {
      const int byte = j * B / 8;
      const int at = 16 * (j / 4) + 4 * (j % 4);
      shuf[at + 0] = static_cast<uint8_t>(byte);
      shuf[at + 1] = static_cast<uint8_t>(byte + 1);
      shuf[at + 2] = 0x80;
      shuf[at + 3] = 0x80;
      shift[j] = static_cast<uint32_t>(j * B % 8);
    }
  }
};
template <int B>
inline constexpr CodeCtl<B> kCodeCtl{};

alignas(32) inline constexpr uint32_t kBit[8] = {1, 2, 4, 8, 16, 32, 64, 128};
}  // namespace vdetail

struct V {
  static constexpr int W = 8;
  static constexpr int kDotMR = 3, kDotNR = 4;
  static constexpr int kOutMR = 6, kOutNV = 2;
  static constexpr int kPackMR = 6, kPackNV = 2;  // packed nk tiles (see avx512.hpp)
  static constexpr int64_t kPackMinRows = 32;
  // fp4 too: the packed tiles ran 1.1-1.3x the row tiles from 32 rows (Zen 3 VM, docs/PERF.md).
  static constexpr int64_t kPackMinRowsMxfp4 = 32, kPackMinRowsNvfp4 = 32;
  using F = __m256;
  using I = __m256i;
  struct Tbl {
    __m256 lo, hi;
  };

  static void prefetch(const void* p) { _mm_prefetch(static_cast<const char*>(p), _MM_HINT_T0); }
  static void prefetch_l2(const void* p) { _mm_prefetch(static_cast<const char*>(p), _MM_HINT_T1); }
  static void prefetch_nta(const void* p) {
    _mm_prefetch(static_cast<const char*>(p), _MM_HINT_NTA);
  }
  static F zero() { return _mm256_setzero_ps(); }
  static F set1(float v) { return _mm256_set1_ps(v); }
  static F load(const float* p) { return _mm256_loadu_ps(p); }
  static __m256i mask(int n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  static F load_n(const float* p, int n) { return _mm256_maskload_ps(p, mask(n)); }
  static void store(float* p, F v) { _mm256_storeu_ps(p, v); }
  static void store_n(float* p, F v, int n) { _mm256_maskstore_ps(p, mask(n), v); }
  // ---- 16-bit results (dequantize): round to nearest even, NaN kept quiet, as numeric.hpp ----
  static I bf16_bits_hi(F v) {  // the bf16 nearest each lane, in the lane's high half
    const I x = _mm256_castps_si256(v);
    const I odd = _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1));
    const I r =
        _mm256_and_si256(_mm256_add_epi32(x, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), odd)),
                         _mm256_set1_epi32(static_cast<int>(0xffff0000u)));
    const I nan = _mm256_cmpgt_epi32(_mm256_and_si256(x, _mm256_set1_epi32(0x7fffffff)),
                                     _mm256_set1_epi32(0x7f800000));
    const I q =
        _mm256_slli_epi32(_mm256_or_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(0x40)), 16);
    return _mm256_blendv_epi8(r, q, nan);
  }
  static F round_bf16(F v) { return _mm256_castsi256_ps(bf16_bits_hi(v)); }
  static F round_f16(F v) { return _mm256_cvtph_ps(_mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT)); }
  static void store_f16(uint16_t* p, F v) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
  }
  static void store_bf16(uint16_t* p, F v) {
    const I b = _mm256_srli_epi32(bf16_bits_hi(v), 16);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p),
                     _mm_packus_epi32(_mm256_castsi256_si128(b), _mm256_extracti128_si256(b, 1)));
  }
  // Keeps a multiply and a later add from being fused into one FMA (see avx512.hpp).
  static void opaque(F& v) { asm volatile("" : "+x"(v)); }
  static F fma(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
  static F fnma(F a, F b, F c) { return _mm256_fnmadd_ps(a, b, c); }  // c - a·b
  static F mul(F a, F b) { return _mm256_mul_ps(a, b); }
  static F add(F a, F b) { return _mm256_add_ps(a, b); }
  static F sub(F a, F b) { return _mm256_sub_ps(a, b); }
  static float hsum(F v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  static __m128 hsum4(F a, F b, F c, F d) {
    const F ab = _mm256_hadd_ps(a, b);  // [a01 a23 b01 b23 | a45 a67 b45 b67]
    const F cd = _mm256_hadd_ps(c, d);
    const F s = _mm256_hadd_ps(ab, cd);  // [a b c d | a b c d] partial
    return _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
  }
  static void hsum4_add(F a, F b, F c, F d, float* out) {
    _mm_storeu_ps(out, _mm_add_ps(_mm_loadu_ps(out), hsum4(a, b, c, d)));
  }
  static void hsum4_store(F a, F b, F c, F d, float* out) { _mm_storeu_ps(out, hsum4(a, b, c, d)); }

  // Transposes the 8 x 8 block r[i][j] in place.
  static void transpose(F* r) {
    F t[8];
    for (int i = 0; i < 8; i += 2) {
      t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
      t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
    // r[4i + j], 128-bit lane L: column 4L + j of rows 4i..4i+3
    for (int i = 0; i < 8; i += 4) {
      r[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
      r[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xee);
      r[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
      r[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xee);
    }
    for (int j = 0; j < 4; ++j) {
      t[j] = _mm256_permute2f128_ps(r[j], r[4 + j], 0x20);
      t[4 + j] = _mm256_permute2f128_ps(r[j], r[4 + j], 0x31);
    }
    for (int j = 0; j < 8; ++j) r[j] = t[j];
  }

  // ---- integer lanes ----
  static I u8(const uint8_t* p) {  // 8 bytes, zero-extended
    return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  }
  static I s8(const uint8_t* p) {
    return _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  }
  static I gather16(const uint8_t* p, const uint8_t* ctl) {
    const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(raw),
                               _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ctl)));
  }
  static I shrv(I v, const uint32_t* sh) {
    return _mm256_srlv_epi32(v, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(sh)));
  }
  static I andv(I v, const uint32_t* m) {
    return _mm256_and_si256(v, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(m)));
  }
  static I seti(int v) { return _mm256_set1_epi32(v); }
  template <int N>
  static I shr(I v) {
    return _mm256_srli_epi32(v, N);
  }
  template <int N>
  static I shl(I v) {
    return _mm256_slli_epi32(v, N);
  }
  static I shr_var(I v, int n) { return _mm256_srl_epi32(v, _mm_cvtsi32_si128(n)); }
  static I and_(I a, I b) { return _mm256_and_si256(a, b); }
  static I or_(I a, I b) { return _mm256_or_si256(a, b); }
  static F cvt(I v) { return _mm256_cvtepi32_ps(v); }
  static F lane(F v, int j) { return _mm256_permutevar8x32_ps(v, _mm256_set1_epi32(j)); }
  // Bytes [i, i + 8) (i is 0 or 8) of the 16-byte little-endian array u, as floats.
  static F u8_words(const uint32_t* u, int i) {
    const uint32_t* w = u + i / 4;
    return _mm256_cvtepi32_ps(
        _mm256_cvtepu8_epi32(_mm_set_epi32(0, 0, static_cast<int>(w[1]), static_cast<int>(w[0]))));
  }
  static F load_upper8(const float* p) { return _mm256_loadu_ps(p); }  // (16-lane only)
  static F add_where(F q, I v, uint32_t bit, F x) {
    return _mm256_add_ps(q, select_lanes(v, bit, x));
  }
  static F select_lanes(I v, uint32_t bit, F x) {
    const I zero_lanes = _mm256_cmpeq_epi32(
        _mm256_and_si256(v, _mm256_set1_epi32(static_cast<int>(bit))), _mm256_setzero_si256());
    return _mm256_andnot_ps(_mm256_castsi256_ps(zero_lanes), x);
  }
  static F half_bcast(const uint8_t* p) {
    int16_t h;
    std::memcpy(&h, p, 2);
    return _mm256_cvtph_ps(_mm_set1_epi16(h));
  }
  static void deinterleave(F a, F b, F& even, F& odd) {
    even = _mm256_castpd_ps(
        _mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0x88)), 0xd8));
    odd = _mm256_castpd_ps(
        _mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0xdd)), 0xd8));
  }
  static void interleave(F even, F odd, F& a, F& b) {
    const F lo = _mm256_unpacklo_ps(even, odd), hi = _mm256_unpackhi_ps(even, odd);
    a = _mm256_permute2f128_ps(lo, hi, 0x20);
    b = _mm256_permute2f128_ps(lo, hi, 0x31);
  }
  static Tbl tbl(const float* t16) { return {_mm256_loadu_ps(t16), _mm256_loadu_ps(t16 + 8)}; }
  static F lut(Tbl t, I idx) {
    const F lo = _mm256_permutevar8x32_ps(t.lo, idx);
    const F hi = _mm256_permutevar8x32_ps(t.hi, idx);
    return _mm256_blendv_ps(lo, hi, _mm256_castsi256_ps(_mm256_slli_epi32(idx, 28)));
  }
  template <int B>
  static F ucvt(I raw) {
    return _mm256_cvtepi32_ps(_mm256_and_si256(raw, _mm256_set1_epi32((1 << B) - 1)));
  }

  // Codes i0 .. i0+7 (i0 a multiple of 8) of a packed row; reads 8 bytes.
  template <int B>
  static I codes(const uint8_t* row, int64_t i0) {
    if constexpr (B == 8) {
      return u8(row + i0);
    } else {
      int64_t q;
      std::memcpy(&q, row + i0 * B / 8, 8);
      const I v = _mm256_shuffle_epi8(
          _mm256_set1_epi64x(q),
          _mm256_load_si256(reinterpret_cast<const __m256i*>(vdetail::kCodeCtl<B>.shuf)));
      return _mm256_srlv_epi32(
          v, _mm256_load_si256(reinterpret_cast<const __m256i*>(vdetail::kCodeCtl<B>.shift)));
    }
  }
  // 16 4-bit codes from 8 bytes: lane j of lo holds code 2j, of hi code 2j+1.
  static void nib2(const uint8_t* p, I& lo, I& hi) {
    lo = u8(p);
    hi = _mm256_srli_epi32(lo, 4);
  }

  static F split2(const float* s) { return _mm256_set1_ps(s[0]); }  // only 16 lanes span two groups

  // ---- dtype loads ----
  static F load_sd(const uint8_t* p, DType t) {
    switch (t) {
      case DType::f32:
        return _mm256_loadu_ps(reinterpret_cast<const float*>(p));
      case DType::f16:
        return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
      case DType::bf16:
        return _mm256_castsi256_ps(_mm256_slli_epi32(
            _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))), 16));
    }
    return zero();
  }
  static F load_sd_n(const uint8_t* p, DType t, int n) {
    alignas(32) uint8_t buf[32] = {};
    std::memcpy(buf, p, static_cast<std::size_t>(n) * (t == DType::f32 ? 4 : 2));
    return load_sd(buf, t);
  }
  static float half1(const uint8_t* p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return _cvtsh_ss(h);
  }

  // ---- minifloats (W codes, one byte each) ----
  // E4M3FN / 256 without the NaN check (loops check 4W codes at once with e4m3_nan4).
  static F e4m3v(const uint8_t* p) {
    const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
    const __m128i h = _mm_and_si128(_mm_slli_epi16(_mm_cvtepi8_epi16(b), 7),
                                    _mm_set1_epi16(static_cast<int16_t>(0xbf80)));
    return _mm256_cvtph_ps(h);
  }
  // e4m3v of the 2W codes at p, as two vectors: one widening, shift and mask for both halves.
  static void e4m3v2(const uint8_t* p, F& a, F& b) {
    const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    const __m256i h = _mm256_and_si256(_mm256_slli_epi16(_mm256_cvtepi8_epi16(raw), 7),
                                       _mm256_set1_epi16(static_cast<int16_t>(0xbf80)));
    a = _mm256_cvtph_ps(_mm256_castsi256_si128(h));
    b = _mm256_cvtph_ps(_mm256_extracti128_si256(h, 1));
  }
  // Whether any of the 4W codes at p is an E4M3FN NaN (0x7f / 0xff).
  static bool e4m3_nan4(const uint8_t* p) {
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    return _mm256_movemask_epi8(_mm256_cmpeq_epi8(_mm256_and_si256(b, _mm256_set1_epi8(0x7f)),
                                                  _mm256_set1_epi8(0x7f))) != 0;
  }
  // e4m3v, with the W codes' NaNs setting bits in `nan`.
  static F e4m3s(const uint8_t* p, uint32_t& nan) {
    const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
    nan |= static_cast<uint32_t>(_mm_movemask_epi8(
               _mm_cmpeq_epi8(_mm_and_si128(b, _mm_set1_epi8(0x7f)), _mm_set1_epi8(0x7f)))) &
           0xffu;
    return e4m3v(p);
  }
  static F e4m3(const uint8_t* p) {
    const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
    const __m128i h = _mm_and_si128(_mm_slli_epi16(_mm_cvtepi8_epi16(b), 7),
                                    _mm_set1_epi16(static_cast<int16_t>(0xbf80)));
    const F v = _mm256_mul_ps(_mm256_cvtph_ps(h), _mm256_set1_ps(256.0f));
    const I code = _mm256_and_si256(_mm256_cvtepu8_epi32(b), _mm256_set1_epi32(0x7f));
    const F isnan = _mm256_castsi256_ps(_mm256_cmpeq_epi32(code, _mm256_set1_epi32(0x7f)));
    return _mm256_blendv_ps(v, _mm256_set1_ps(__builtin_nanf("")), isnan);
  }
  static F e5m2(const uint8_t* p) {
    const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
    return _mm256_cvtph_ps(_mm_slli_epi16(_mm_cvtepu8_epi16(b), 8));
  }
  static F e8m0(const uint8_t* p) {
    const I b = u8(p);
    I bits = _mm256_slli_epi32(b, 23);
    bits = _mm256_blendv_epi8(bits, _mm256_set1_epi32(0x00400000),
                              _mm256_cmpeq_epi32(b, _mm256_setzero_si256()));
    bits = _mm256_blendv_epi8(bits, _mm256_set1_epi32(0x7fc00000),
                              _mm256_cmpeq_epi32(b, _mm256_set1_epi32(0xff)));
    return _mm256_castsi256_ps(bits);
  }

  // ---- lane masks ----
  static F select_bits(uint32_t bits, F x) {
    const I bit = _mm256_load_si256(reinterpret_cast<const __m256i*>(vdetail::kBit));
    const I m =
        _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32(static_cast<int>(bits)), bit), bit);
    return _mm256_and_ps(x, _mm256_castsi256_ps(m));
  }
  static F select_bytes(const uint8_t* p, uint8_t m, F x) {
    const I v = _mm256_and_si256(u8(p), _mm256_set1_epi32(m));
    const I zero_lanes = _mm256_cmpeq_epi32(v, _mm256_setzero_si256());
    return _mm256_andnot_ps(_mm256_castsi256_ps(zero_lanes), x);
  }
};

}  // namespace quanta::cpu::avx2
