// The vector vocabulary of the CPU engine on AVX-512 (F/BW/VL/DQ, plus F16C and FMA): 16 f32
// lanes. Only files compiled with those flags include this (src/cpu/x86/avx512_*.cpp).
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

namespace quanta::cpu::avx512 {

namespace vdetail {
// pshufb control and shifts that put code j of a run of 16 B-bit codes (an LSB-first bit
// stream, broadcast to every 128-bit lane) into the low bits of dword lane j.
template <int B>
struct CodeCtl {
  alignas(64) uint8_t shuf[64] = {};
  alignas(64) uint32_t shift[16] = {};
  constexpr CodeCtl() {
    for (int j = 0; j < 16; ++j) {
      const int byte = j * B / 8;
      const int lane = j % 4;
      shuf[16 * (j / 4) + 4 * lane + 0] = static_cast<uint8_t>(byte);
      shuf[16 * (j / 4) + 4 * lane + 1] = static_cast<uint8_t>(byte + 1);
      shuf[16 * (j / 4) + 4 * lane + 2] = 0x80;
      shuf[16 * (j / 4) + 4 * lane + 3] = 0x80;
      shift[j] = static_cast<uint32_t>(j * B % 8);
    }
  }
};
template <int B>
inline constexpr CodeCtl<B> kCodeCtl{};

// Float value of each B-bit pattern, repeated to 16 entries (vpermps reads 4 index bits).
template <int B>
struct IotaTbl {
  alignas(64) float v[16] = {};
  constexpr IotaTbl() {
    for (int i = 0; i < 16; ++i) v[i] = static_cast<float>(i & ((1 << B) - 1));
  }
};
template <int B>
inline constexpr IotaTbl<B> kIota{};

alignas(64) inline constexpr int32_t kHalfSplit[16] = {0, 0, 0, 0, 0, 0, 0, 0,
                                                       1, 1, 1, 1, 1, 1, 1, 1};
}  // namespace vdetail

struct V {
  static constexpr int W = 16;
  // Micro-tiles: dot form (nk tiles) MR x NR accumulators, outer form (kn) MR x NV vectors.
  static constexpr int kDotMR = 6, kDotNR = 4;
  static constexpr int kOutMR = 6, kOutNV = 4;
  // Packed nk tiles (outer form, large M): MR rows of x x NV vectors of W rows (6 x 4, 12 x 2
  // and 8 x 3 measured alike), from kPackMinRows rows of x (per format: fast.cpp).
  static constexpr int kPackMR = 6, kPackNV = 4;
  static constexpr int64_t kPackMinRows = 32;
  // fp4's row tiles outran the packed ones below these (its decode per packed weight costs more).
  static constexpr int64_t kPackMinRowsMxfp4 = 64, kPackMinRowsNvfp4 = 128;
  using F = __m512;
  using I = __m512i;
  using Tbl = __m512;

  static void prefetch(const void* p) { _mm_prefetch(static_cast<const char*>(p), _MM_HINT_T0); }
  static void prefetch_l2(const void* p) { _mm_prefetch(static_cast<const char*>(p), _MM_HINT_T1); }
  static void prefetch_nta(const void* p) {
    _mm_prefetch(static_cast<const char*>(p), _MM_HINT_NTA);
  }
  static F zero() { return _mm512_setzero_ps(); }
  static F set1(float v) { return _mm512_set1_ps(v); }
  static F load(const float* p) { return _mm512_loadu_ps(p); }
  static __mmask16 mask(int n) { return static_cast<__mmask16>((1u << n) - 1u); }
  static F load_n(const float* p, int n) { return _mm512_maskz_loadu_ps(mask(n), p); }
  static void store(float* p, F v) { _mm512_storeu_ps(p, v); }
  static void store_n(float* p, F v, int n) { _mm512_mask_storeu_ps(p, mask(n), v); }
  // ---- 16-bit results (dequantize): round to nearest even, NaN kept quiet, as numeric.hpp ----
  // The bf16 nearest each lane, in the lane's high half (low half zero).
  static I bf16_bits_hi(F v) {
    const I x = _mm512_castps_si512(v);
    const I odd = _mm512_and_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(1));
    const I r =
        _mm512_and_si512(_mm512_add_epi32(x, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), odd)),
                         _mm512_set1_epi32(static_cast<int>(0xffff0000u)));
    const __mmask16 nan = _mm512_cmpgt_epi32_mask(
        _mm512_and_si512(x, _mm512_set1_epi32(0x7fffffff)), _mm512_set1_epi32(0x7f800000));
    const I q =
        _mm512_slli_epi32(_mm512_or_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(0x40)), 16);
    return _mm512_mask_blend_epi32(nan, r, q);
  }
  static F round_bf16(F v) { return _mm512_castsi512_ps(bf16_bits_hi(v)); }
  static F round_f16(F v) {
    return _mm512_cvtph_ps(_mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  static void store_f16(uint16_t* p, F v) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p),
                        _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  static void store_bf16(uint16_t* p, F v) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p),
                        _mm512_cvtepi32_epi16(_mm512_srli_epi32(bf16_bits_hi(v), 16)));
  }
  // Hides how v was computed, so a multiply and a later add are not fused into one FMA (whose
  // single rounding would differ from the format owner's two).
  static void opaque(F& v) { asm volatile("" : "+v"(v)); }
  static F fma(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  static F fnma(F a, F b, F c) { return _mm512_fnmadd_ps(a, b, c); }  // c - a·b
  static F mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static F add(F a, F b) { return _mm512_add_ps(a, b); }
  static F sub(F a, F b) { return _mm512_sub_ps(a, b); }
  static float hsum(F v) { return _mm512_reduce_add_ps(v); }

  // out[0..3] += the lane sums of a, b, c, d.
  static void hsum4_add(F a, F b, F c, F d, float* out) {
    const F ab = _mm512_add_ps(_mm512_unpacklo_ps(a, b), _mm512_unpackhi_ps(a, b));
    const F cd = _mm512_add_ps(_mm512_unpacklo_ps(c, d), _mm512_unpackhi_ps(c, d));
    // per 128-bit lane: [a0+a2, b0+b2, a1+a3, b1+b3] and the same for c, d
    const F s = _mm512_add_ps(_mm512_shuffle_ps(ab, cd, 0x44), _mm512_shuffle_ps(ab, cd, 0xee));
    const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(s), _mm512_extractf32x8_ps(s, 1));
    const __m128 q = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    _mm_storeu_ps(out, _mm_add_ps(_mm_loadu_ps(out), q));
  }
  static void hsum4_store(F a, F b, F c, F d, float* out) {
    const F ab = _mm512_add_ps(_mm512_unpacklo_ps(a, b), _mm512_unpackhi_ps(a, b));
    const F cd = _mm512_add_ps(_mm512_unpacklo_ps(c, d), _mm512_unpackhi_ps(c, d));
    const F s = _mm512_add_ps(_mm512_shuffle_ps(ab, cd, 0x44), _mm512_shuffle_ps(ab, cd, 0xee));
    const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(s), _mm512_extractf32x8_ps(s, 1));
    _mm_storeu_ps(out, _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1)));
  }

  // Transposes the 16 x 16 block r[i][j] in place (r[j] then holds the old lane j of each).
  static void transpose(F* r) {
    F t[16];
    for (int i = 0; i < 16; i += 2) {
      t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
      t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    // r[4i + j], 128-bit lane L: column 4L + j of rows 4i..4i+3
    for (int i = 0; i < 16; i += 4) {
      r[i] = _mm512_shuffle_ps(t[i], t[i + 2], 0x44);
      r[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], 0xee);
      r[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0x44);
      r[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0xee);
    }
    for (int j = 0; j < 4; ++j) {
      t[j] = _mm512_shuffle_f32x4(r[j], r[4 + j], 0x88);
      t[4 + j] = _mm512_shuffle_f32x4(r[j], r[4 + j], 0xdd);
      t[8 + j] = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0x88);
      t[12 + j] = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0xdd);
    }
    for (int j = 0; j < 4; ++j) {
      r[j] = _mm512_shuffle_f32x4(t[j], t[8 + j], 0x88);
      r[8 + j] = _mm512_shuffle_f32x4(t[j], t[8 + j], 0xdd);
      r[4 + j] = _mm512_shuffle_f32x4(t[4 + j], t[12 + j], 0x88);
      r[12 + j] = _mm512_shuffle_f32x4(t[4 + j], t[12 + j], 0xdd);
    }
  }

  // ---- integer lanes ----
  static I u8(const uint8_t* p) {  // 16 bytes, zero-extended
    return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static I s8(const uint8_t* p) {
    return _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  // Lane j: the bytes p[ctl[4j + k]] (k = 0..3, little-endian; 0x80 gives 0) of the 16 bytes
  // at p, for lanes j of this vector (ctl holds 4 bytes per lane).
  static I gather16(const uint8_t* p, const uint8_t* ctl) {
    const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm512_shuffle_epi8(_mm512_broadcast_i32x4(raw), _mm512_loadu_si512(ctl));
  }
  // Lane j shifted right by sh[j].
  static I shrv(I v, const uint32_t* sh) { return _mm512_srlv_epi32(v, _mm512_loadu_si512(sh)); }
  static I andv(I v, const uint32_t* m) { return _mm512_and_si512(v, _mm512_loadu_si512(m)); }
  static I seti(int v) { return _mm512_set1_epi32(v); }
  template <int N>
  static I shr(I v) {
    return _mm512_srli_epi32(v, N);
  }
  template <int N>
  static I shl(I v) {
    return _mm512_slli_epi32(v, N);
  }
  static I shr_var(I v, int n) { return _mm512_srl_epi32(v, _mm_cvtsi32_si128(n)); }
  static I and_(I a, I b) { return _mm512_and_si512(a, b); }
  static I or_(I a, I b) { return _mm512_or_si512(a, b); }
  static F cvt(I v) { return _mm512_cvtepi32_ps(v); }
  // Lane j of v in every lane.
  static F lane(F v, int j) { return _mm512_permutexvar_ps(_mm512_set1_epi32(j), v); }
  // Bytes [i, i + 16) of the 16-byte little-endian array u, as floats (i is 0).
  static F u8_words(const uint32_t* u, int) {
    return _mm512_cvtepi32_ps(
        _mm512_cvtepu8_epi32(_mm_set_epi32(static_cast<int>(u[3]), static_cast<int>(u[2]),
                                           static_cast<int>(u[1]), static_cast<int>(u[0]))));
  }
  // Lanes 8-15 from p[0, 8), lanes 0-7 zero.
  static F load_upper8(const float* p) { return _mm512_maskz_loadu_ps(0xff00, p - 8); }
  // x in lanes whose integer lane of v has a bit of `bit` set, 0 elsewhere.
  // q + x in lanes whose integer lane of v has a bit of `bit` set (one masked add).
  static F add_where(F q, I v, uint32_t bit, F x) {
    return _mm512_mask_add_ps(
        q, _mm512_test_epi32_mask(v, _mm512_set1_epi32(static_cast<int>(bit))), q, x);
  }
  static F select_lanes(I v, uint32_t bit, F x) {
    return _mm512_maskz_mov_ps(_mm512_test_epi32_mask(v, _mm512_set1_epi32(static_cast<int>(bit))),
                               x);
  }
  // The binary16 at p, converted, in every lane.
  static F half_bcast(const uint8_t* p) {
    int16_t h;
    std::memcpy(&h, p, 2);
    return _mm512_cvtph_ps(_mm256_set1_epi16(h));
  }
  // Even and odd lanes of the 2W-lane sequence (a, b), and back.
  static void deinterleave(F a, F b, F& even, F& odd) {
    even = _mm512_permutex2var_ps(
        a, _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30), b);
    odd = _mm512_permutex2var_ps(
        a, _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31), b);
  }
  static void interleave(F even, F odd, F& a, F& b) {
    a = _mm512_permutex2var_ps(
        even, _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23), odd);
    b = _mm512_permutex2var_ps(
        even, _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31), odd);
  }
  static Tbl tbl(const float* t16) { return _mm512_loadu_ps(t16); }
  static F lut(Tbl t, I idx) { return _mm512_permutexvar_ps(idx, t); }

  // Float of the low B bits of each lane (upper bits ignored).
  template <int B>
  static F ucvt(I raw) {
    if constexpr (B <= 4)
      return _mm512_permutexvar_ps(raw, _mm512_load_ps(vdetail::kIota<B>.v));
    else if constexpr (B == 8)
      return _mm512_cvtepi32_ps(_mm512_and_si512(raw, _mm512_set1_epi32(0xff)));
    else
      return _mm512_cvtepi32_ps(_mm512_and_si512(raw, _mm512_set1_epi32((1 << B) - 1)));
  }

  // Codes i0 .. i0+15 (i0 a multiple of 16) of a packed LSB-first row, code j in the low B
  // bits of lane j. Reads up to 16 bytes from the first one.
  template <int B>
  static I codes(const uint8_t* row, int64_t i0) {
    if constexpr (B == 8) {
      return u8(row + i0);
    } else {
      const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + i0 * B / 8));
      const I v = _mm512_shuffle_epi8(_mm512_broadcast_i32x4(raw),
                                      _mm512_load_si512(vdetail::kCodeCtl<B>.shuf));
      return _mm512_srlv_epi32(v, _mm512_load_si512(vdetail::kCodeCtl<B>.shift));
    }
  }
  // 32 4-bit codes from 16 bytes: lane j of lo holds code 2j, of hi code 2j+1.
  static void nib2(const uint8_t* p, I& lo, I& hi) {
    lo = u8(p);
    hi = _mm512_srli_epi32(lo, 4);
  }
  // Scale vector for a nib2 chunk of 32 codes split in two groups of 16: lanes 0-7 take s[0],
  // lanes 8-15 s[1].
  static F split2(const float* s) {
    const __m128 pair = _mm_castsi128_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(s)));
    return _mm512_permutexvar_ps(_mm512_load_si512(vdetail::kHalfSplit),
                                 _mm512_castps128_ps512(pair));
  }

  // ---- dtype loads ----
  static F load_sd(const uint8_t* p, DType t) {
    switch (t) {
      case DType::f32:
        return _mm512_loadu_ps(p);
      case DType::f16:
        return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
      case DType::bf16:
        return _mm512_castsi512_ps(_mm512_slli_epi32(
            _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))), 16));
    }
    return zero();
  }
  static F load_sd_n(const uint8_t* p, DType t, int n) {
    switch (t) {
      case DType::f32:
        return _mm512_maskz_loadu_ps(mask(n), p);
      case DType::f16:
        return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mask(n), p));
      case DType::bf16:
        return _mm512_castsi512_ps(
            _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(mask(n), p)), 16));
    }
    return zero();
  }
  static float half1(const uint8_t* p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return _cvtsh_ss(h);
  }

  // ---- minifloats (W codes, one byte each) ----
  // E4M3FN / 256, exact for every code except NaN (0x7f/0xff), which is not detected here (loops
  // check 4W codes at once with e4m3_nan4, or use e4m3s).
  static F e4m3v(const uint8_t* p) {
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    // sign-extended byte << 7 is s.s.eeee.mmm.0000000; clearing bit 14 leaves the binary16
    // s.0eeee.mmm0000000 = value / 2^8 (E4M3 bias 7 vs binary16 bias 15)
    const __m256i h = _mm256_and_si256(_mm256_slli_epi16(_mm256_cvtepi8_epi16(b), 7),
                                       _mm256_set1_epi16(static_cast<int16_t>(0xbf80)));
    return _mm512_cvtph_ps(h);
  }
  // e4m3v of the 2W codes at p, as two vectors (one widening and one shift for both halves).
  static void e4m3v2(const uint8_t* p, F& a, F& b) {
    const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    const __m512i h = _mm512_and_si512(_mm512_slli_epi16(_mm512_cvtepi8_epi16(raw), 7),
                                       _mm512_set1_epi16(static_cast<int16_t>(0xbf80)));
    a = _mm512_cvtph_ps(_mm512_castsi512_si256(h));
    b = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(h, 1));
  }
  // Whether any of the 4W codes at p is an E4M3FN NaN (0x7f / 0xff).
  static bool e4m3_nan4(const uint8_t* p) {
    const __m512i b = _mm512_loadu_si512(p);
    return _mm512_cmpeq_epi8_mask(_mm512_and_si512(b, _mm512_set1_epi8(0x7f)),
                                  _mm512_set1_epi8(0x7f)) != 0;
  }
  // e4m3v, with the W codes' NaNs setting bits in `nan`.
  static F e4m3s(const uint8_t* p, uint32_t& nan) {
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    nan |= _mm_cmpeq_epi8_mask(_mm_and_si128(b, _mm_set1_epi8(0x7f)), _mm_set1_epi8(0x7f));
    return e4m3v(p);
  }
  // E4M3FN exactly, NaN codes give NaN.
  static F e4m3(const uint8_t* p) {
    uint32_t nan = 0;
    const F v = _mm512_mul_ps(e4m3s(p, nan), _mm512_set1_ps(256.0f));
    return _mm512_mask_blend_ps(static_cast<__mmask16>(nan), v, _mm512_set1_ps(__builtin_nanf("")));
  }
  // E5M2 is the top byte of a binary16.
  static F e5m2(const uint8_t* p) {
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm512_cvtph_ps(_mm256_slli_epi16(_mm256_cvtepu8_epi16(b), 8));
  }
  // E8M0: 2^(b-127); 0 is the f32 subnormal 2^-127, 0xff is NaN.
  static F e8m0(const uint8_t* p) {
    const I b = u8(p);
    I bits = _mm512_slli_epi32(b, 23);
    bits = _mm512_mask_mov_epi32(bits, _mm512_cmpeq_epi32_mask(b, _mm512_setzero_si512()),
                                 _mm512_set1_epi32(0x00400000));
    bits = _mm512_mask_mov_epi32(bits, _mm512_cmpeq_epi32_mask(b, _mm512_set1_epi32(0xff)),
                                 _mm512_set1_epi32(0x7fc00000));
    return _mm512_castsi512_ps(bits);
  }

  // ---- lane masks ----
  // x in lanes whose bit of `bits` is set, 0 elsewhere.
  static F select_bits(uint32_t bits, F x) {
    return _mm512_maskz_mov_ps(static_cast<__mmask16>(bits), x);
  }
  // x in lanes j whose byte p[j] has a bit of `m` set, 0 elsewhere.
  static F select_bytes(const uint8_t* p, uint8_t m, F x) {
    const __mmask16 k = _mm_test_epi8_mask(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)),
                                           _mm_set1_epi8(static_cast<char>(m)));
    return _mm512_maskz_mov_ps(k, x);
  }
};

}  // namespace quanta::cpu::avx512
