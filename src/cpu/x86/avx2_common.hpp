// Pieces the avx2 level's integer GEMVs (avx2_int8.cpp, avx2_kquant.cpp) share. Included only by
// those files, which are built with the same avx2 flags (src/CMakeLists.txt), so these inline
// functions have one meaning.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace quanta::cpu::avx2_common {

inline float pow2(int e) {
  return __builtin_ldexpf(1.0f, e);
}

// acc + the four-byte dot products of u8 codes and s8 digits (32 bytes at `digits`) per int32
// lane: AVX-VNNI's vpdpbusd (VEX). Inline assembly, so the files keep the avx2 flags and the
// instruction sits only in the instances run where cpu::avx_vnni_active(); `{vex}` picks the
// AVX-VNNI encoding.
// QUANTA_EMULATE_AVX_VNNI (a CI build): the same sums on AVX2, exact for these operands (codes
// below 64, digits in [-127, 127]: a pair of products stays under 2^15).
[[gnu::always_inline]] inline __m256i dpbusd(__m256i acc, __m256i codes, const uint8_t* digits) {
#if defined(QUANTA_EMULATE_AVX_VNNI)
  const __m256i d = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(digits));
  return _mm256_add_epi32(acc,
                          _mm256_madd_epi16(_mm256_maddubs_epi16(codes, d), _mm256_set1_epi16(1)));
#else
  asm("%{vex%} vpdpbusd %2, %1, %0"
      : "+x"(acc)
      : "x"(codes), "m"(*reinterpret_cast<const __m256i*>(digits)));
  return acc;
#endif
}

// Σ_p 2^(7·(P - 1 - p))·Σ_j q_j·x(p, j) per int32 lane on vpdpbusd: a step's four code vectors in
// quad order against P planes of x in quad order at xb (plane p, vector j at xb + 128p + 32j). A
// chain of four per plane, then the planes shifted by 7 and added, in place of one chain through
// every plane (12 long for three planes, at vpdpbusd's ~5 cycles each). A lane is 16 consecutive
// elements; a plane adds 16 products to it, |.| <= 16·63·128 for codes up to 6 bits, so the sum
// stays under 16·63·128·(2^14 + 2^7 + 1) < 2^31: exact.
template <int P>
[[gnu::always_inline]] inline __m256i quad_dot_vnni(const __m256i (&q)[4], const uint8_t* xb) {
  __m256i a[P];
  for (int p = 0; p < P; ++p) {
    a[p] = _mm256_setzero_si256();
    for (int j = 0; j < 4; ++j) a[p] = dpbusd(a[p], q[j], xb + p * 128 + 32 * j);
  }
  __m256i sum = a[0];
  for (int p = 1; p < P; ++p) sum = _mm256_add_epi32(_mm256_slli_epi32(sum, 7), a[p]);
  return sum;
}

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline float hmax(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// The largest |x| of every block of ELEMS into big[b]; false for a NaN, an infinity, or a nonzero
// largest |x| below 2^-96 (its 2^e would leave the normal range), as vnni::block_max.
template <int64_t ELEMS>
bool block_max(const float* x, int64_t blocks, float* big) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  for (int64_t b = 0; b < blocks; ++b) {
    __m256 mx = _mm256_setzero_ps();
    for (int64_t v = 0; v < ELEMS / 8; ++v) {
      const __m256 xv = _mm256_loadu_ps(x + b * ELEMS + 8 * v);
      if (_mm256_movemask_ps(_mm256_cmp_ps(xv, xv, _CMP_UNORD_Q)) != 0) return false;
      mx = _mm256_max_ps(mx, _mm256_andnot_ps(sign, xv));
    }
    big[b] = hmax(mx);
    if (big[b] > 0x1.fffffep127f || (big[b] != 0.0f && big[b] < 0x1p-96f)) return false;
  }
  return true;
}

// 32 int32 lanes (four vectors, in element order) -> 32 int8 in element order.
inline __m256i pack_digits(const __m256i (&c)[4]) {
  const __m256i ab = _mm256_packs_epi32(c[0], c[1]);  // a0-3 b0-3 | a4-7 b4-7
  const __m256i cd = _mm256_packs_epi32(c[2], c[3]);
  const __m256i all = _mm256_packs_epi16(ab, cd);  // dwords a_lo b_lo c_lo d_lo | a_hi ..
  return _mm256_permutevar8x32_epi32(all, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// Digits 0..2 of 32 elements at 2^e (x = 2^e (c0·2^14 + c1·2^7 + c2)), each step an exact f32
// operation: c[p] their int32 lanes, in element order.
inline void digits32(const float* x, int e, __m256i (&c)[3][4]) {
  const __m256 up0 = _mm256_set1_ps(pow2(-(e + 14))), down0 = _mm256_set1_ps(pow2(e + 14));
  const __m256 up1 = _mm256_set1_ps(pow2(-(e + 7))), down1 = _mm256_set1_ps(pow2(e + 7));
  const __m256 up2 = _mm256_set1_ps(pow2(-e));
  constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  for (int v = 0; v < 4; ++v) {
    const __m256 xv = _mm256_loadu_ps(x + 8 * v);
    const __m256 c0 = _mm256_round_ps(_mm256_mul_ps(xv, up0), kRound);
    const __m256 r1 = _mm256_fnmadd_ps(c0, down0, xv);
    const __m256 c1 = _mm256_round_ps(_mm256_mul_ps(r1, up1), kRound);
    const __m256 c2 = _mm256_round_ps(_mm256_mul_ps(_mm256_fnmadd_ps(c1, down1, r1), up2), kRound);
    c[0][v] = _mm256_cvtps_epi32(c0);
    c[1][v] = _mm256_cvtps_epi32(c1);
    c[2][v] = _mm256_cvtps_epi32(c2);
  }
}

// The block's 2^e for the planes: its largest |x| / 2^(e + 14) in [64, 128), or [32, 64) where
// it would round to 128; so the first digit is in [-127, 127], the others in [-64, 64].
inline int plane_exponent(float big) {
  int e = __builtin_ilogbf(big) - 20;
  if (__builtin_nearbyintf(__builtin_ldexpf(big, -(e + 14))) > 127.0f) ++e;
  return e;
}

// x [blocks · ELEMS] as planes, BYTES per block: per block its largest |x| (block_max), its 2^e
// (plane_exponent) into block_pow2[b] and digits(xb, pb, e) to write the block's planes; a block
// of zeros gets zero planes and 2^0. False, as block_max, when a block cannot be split.
template <int64_t ELEMS, int64_t BYTES, class Digits>
bool split_blocks(const float* x, int64_t blocks, uint8_t* planes, float* block_pow2,
                  Digits&& digits) {
  if (!block_max<ELEMS>(x, blocks, block_pow2)) return false;
  for (int64_t b = 0; b < blocks; ++b) {
    uint8_t* pb = planes + b * BYTES;
    if (block_pow2[b] == 0.0f) {
      for (int64_t i = 0; i < BYTES; i += 32)
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(pb + i), _mm256_setzero_si256());
      block_pow2[b] = 1.0f;
      continue;
    }
    const int e = plane_exponent(block_pow2[b]);
    digits(x + b * ELEMS, pb, e);
    block_pow2[b] = pow2(e);
  }
  return true;
}

// The three planes of 128 elements at 2^e in quad order: plane p (128 bytes at pb + 128p) as four
// vectors, vector j byte i = digit p of element 4i + j. Every step is exact, as in digits32.
inline void quad_planes(const float* xb, uint8_t* pb, int e) {
  // Within each 16-byte lane: dword j holds bytes j, j + 4, j + 8, j + 12.
  const __m256i by4 = _mm256_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15, 0, 4,
                                       8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  __m256i d[3][4];  // plane p, elements 32q .. 32q + 31, qword j: elements 4i + j, i = 0..7
  for (int q = 0; q < 4; ++q) {
    __m256i c[3][4];
    digits32(xb + 32 * q, e, c);
    for (int p = 0; p < 3; ++p)
      d[p][q] = _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8(pack_digits(c[p]), by4),
                                            _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  }
  for (int p = 0; p < 3; ++p) {  // vector j: qword j of d[p][0..3]
    const __m256i a = _mm256_unpacklo_epi64(d[p][0], d[p][1]);
    const __m256i b = _mm256_unpackhi_epi64(d[p][0], d[p][1]);
    const __m256i c = _mm256_unpacklo_epi64(d[p][2], d[p][3]);
    const __m256i f = _mm256_unpackhi_epi64(d[p][2], d[p][3]);
    const __m256i v[4] = {
        _mm256_permute2x128_si256(a, c, 0x20), _mm256_permute2x128_si256(b, f, 0x20),
        _mm256_permute2x128_si256(a, c, 0x31), _mm256_permute2x128_si256(b, f, 0x31)};
    for (int j = 0; j < 4; ++j)
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(pb + p * 128 + 32 * j), v[j]);
  }
}

// Blocks of 128 codes in the layouts of the avx2 level's packs (pack.cpp avx2_block) as four
// vectors in the planes' quad order, q[j] byte i = code 4i + j.

// A block of 2-bit codes (32 bytes, MLX's order: byte i holds codes 4i .. 4i + 3) as four
// vectors, c[j] byte i = code 4i + j (the planes' quad order).
[[gnu::always_inline]] inline void quad_codes(const uint8_t* c, __m256i (&q)[4]) {
  const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(c));
  const __m256i mask = _mm256_set1_epi8(3);
  q[0] = _mm256_and_si256(raw, mask);
  q[1] = _mm256_and_si256(_mm256_srli_epi16(raw, 2), mask);
  q[2] = _mm256_and_si256(_mm256_srli_epi16(raw, 4), mask);
  q[3] = _mm256_and_si256(_mm256_srli_epi16(raw, 6), mask);
}

// A block of 3-bit codes in this level's pack layout (48 bytes, pack.cpp avx2_block) as
// quad_codes gives 2-bit ones: bytes A_i, B_i, C_i (at i, 16 + i, 32 + i) hold column i's eight
// codes, A = c0 | c1 << 3 | c6 << 6, B = c2 | c3 << 3 | c6 >> 2 << 6 | c7 << 7, C = c4 | c5 << 3 |
// c7 >> 1 << 6, where c0, c1, c4, c6 are codes 4i .. 4i + 3 and c2, c3, c5, c7 codes 64 + 4i ..
// 64 + 4i + 3. Two 32-byte loads ([A | B], [B | C]) and a broadcast of C give q[0] = [c0 | c2],
// q[1] = [c1 | c3], q[2] = [c4 | c5], q[3] = [c6 | c7] in ten operations, where MLX's bit stream
// took ~45 per block to spread to bytes.
[[gnu::always_inline]] inline void quad3_codes(const uint8_t* c, __m256i (&q)[4]) {
  const __m256i ab = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(c));
  const __m256i bc = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(c + 16));
  const __m256i cc =
      _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(c + 32)));
  const __m256i seven = _mm256_set1_epi8(7);
  q[0] = _mm256_and_si256(ab, seven);
  q[1] = _mm256_and_si256(_mm256_srli_epi16(ab, 3), seven);
  q[2] = _mm256_and_si256(_mm256_srlv_epi32(cc, _mm256_setr_epi32(0, 0, 0, 0, 3, 3, 3, 3)), seven);
  // c6 = A >> 6 | (B >> 6 & 1) << 2, c7 = B >> 7 | C >> 6 << 1; the dword shifts' bits from the
  // next byte fall outside the masks.
  const __m256i lo =
      _mm256_and_si256(_mm256_srlv_epi32(ab, _mm256_setr_epi32(6, 6, 6, 6, 7, 7, 7, 7)),
                       _mm256_setr_epi32(0x03030303, 0x03030303, 0x03030303, 0x03030303, 0x01010101,
                                         0x01010101, 0x01010101, 0x01010101));
  const __m256i hi =
      _mm256_and_si256(_mm256_srlv_epi32(bc, _mm256_setr_epi32(4, 4, 4, 4, 5, 5, 5, 5)),
                       _mm256_setr_epi32(0x04040404, 0x04040404, 0x04040404, 0x04040404, 0x06060606,
                                         0x06060606, 0x06060606, 0x06060606));
  q[3] = _mm256_or_si256(lo, hi);
}

// A block of 5-bit codes in this level's pack layout (80 bytes, pack.cpp avx2_block) as
// quad_codes gives 2-bit ones: bytes A_i, B_i (at i, 32 + i) and a nibble of byte 64 + i % 16 hold
// column i's codes c0 .. c3 = 4i .. 4i + 3 as A = c0 | (c2 & 7) << 5, B = c1 | (c2 >> 3) << 5 |
// (c3 & 1) << 7, nibble = c3 >> 1 (low for i < 16, high above).
[[gnu::always_inline]] inline void quad5_codes(const uint8_t* c, __m256i (&q)[4]) {
  const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(c));
  const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(c + 32));
  const __m256i n =
      _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(c + 64)));
  const __m256i low5 = _mm256_set1_epi8(31);
  q[0] = _mm256_and_si256(a, low5);
  q[1] = _mm256_and_si256(b, low5);
  // The shifts' bits from the next byte fall outside the masks.
  q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(a, 5), _mm256_set1_epi8(7)),
                         _mm256_and_si256(_mm256_srli_epi16(b, 2), _mm256_set1_epi8(24)));
  const __m256i nib = _mm256_and_si256(
      _mm256_srlv_epi32(n, _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4)), _mm256_set1_epi8(15));
  q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(b, 7), _mm256_set1_epi8(1)),
                         _mm256_add_epi8(nib, nib));
}

// A block of 6-bit codes in this level's pack layout (96 bytes, pack.cpp avx2_block) as
// quad_codes gives 2-bit ones: vector j's byte i (j < 3, at 32j + i) holds code 4i + j in its low
// six bits and two bits of code 4i + 3 (bits 2j, 2j + 1) in its top two.
[[gnu::always_inline]] inline void quad6_codes(const uint8_t* c, __m256i (&q)[4]) {
  const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(c));
  const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(c + 32));
  const __m256i d = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(c + 64));
  const __m256i low6 = _mm256_set1_epi8(63);
  q[0] = _mm256_and_si256(a, low6);
  q[1] = _mm256_and_si256(b, low6);
  q[2] = _mm256_and_si256(d, low6);
  // The 16-bit shifts' bits from the next byte fall outside the masks.
  q[3] = _mm256_or_si256(
      _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(a, 6), _mm256_set1_epi8(3)),
                      _mm256_and_si256(_mm256_srli_epi16(b, 4), _mm256_set1_epi8(12))),
      _mm256_and_si256(_mm256_srli_epi16(d, 2), _mm256_set1_epi8(48)));
}

// A block of 4-bit codes in this level's pack layout (64 bytes, pack.cpp avx2_block; the 4-bit
// packs and q4_K's): byte i holds codes 4i (low nibble) and 4i + 2, byte 32 + i codes 4i + 1 and
// 4i + 3.
[[gnu::always_inline]] inline void quad4_codes(const uint8_t* c, __m256i (&q)[4]) {
  const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(c));
  const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(c + 32));
  const __m256i mask = _mm256_set1_epi8(0x0F);
  q[0] = _mm256_and_si256(a, mask);
  q[1] = _mm256_and_si256(b, mask);
  q[2] = _mm256_and_si256(_mm256_srli_epi16(a, 4), mask);
  q[3] = _mm256_and_si256(_mm256_srli_epi16(b, 4), mask);
}

// Two planes' sum p0·2^7 + p1 is 2^7 less than three planes' p0·2^14 + p1·2^7 + p2: the scales
// that carry x's 2^e take this with them (vnni::kPlaneUnit).
template <int P>
inline constexpr float kPlaneUnit = P == 2 ? 128.0f : 1.0f;

}  // namespace quanta::cpu::avx2_common
