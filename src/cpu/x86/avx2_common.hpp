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

// Two planes' sum p0·2^7 + p1 is 2^7 less than three planes' p0·2^14 + p1·2^7 + p2: the scales
// that carry x's 2^e take this with them (vnni::kPlaneUnit).
template <int P>
inline constexpr float kPlaneUnit = P == 2 ? 128.0f : 1.0f;

}  // namespace quanta::cpu::avx2_common
