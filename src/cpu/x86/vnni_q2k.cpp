// q2_K GEMV on AVX512-VNNI dot products (see vnni_q2k.hpp). Built with the avx512 flags plus
// VNNI and VBMI (src/CMakeLists.txt).
#include "cpu/x86/vnni_q2k.hpp"

// GCC 12's AVX-512 headers build masked builtins on _mm512_undefined_*, which
// -Wmaybe-uninitialized reports at every inlined call site (a false positive).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <cmath>
#include <cstring>

namespace quanta::cpu::vnni {

namespace {

constexpr int64_t kBlockElems = 256, kBlockBytes = 84;  // ggml block_q2_K
constexpr int64_t kPlaneBlock = 4 * 4 * 64;             // bytes of planes per block
constexpr int kRows = 4;  // rows per pass: each block's planes are read from L1 four times

// Byte p of code vector j (p = 32h + l: element 128h + 32j + l of the block) belongs to
// sub-block 8h + 2j + (l >= 16).
struct Ctl {
  alignas(64) uint8_t sub[4][64] = {};
  alignas(64) uint8_t qs[64] = {};  // index (s << 2 | q) -> q · s
  constexpr Ctl() {
    for (int j = 0; j < 4; ++j)
      for (int p = 0; p < 64; ++p)
        sub[j][p] = static_cast<uint8_t>(8 * (p / 32) + 2 * j + (p % 32 >= 16));
    for (int i = 0; i < 64; ++i) qs[i] = static_cast<uint8_t>((i & 3) * (i >> 2));
  }
};
alignas(64) constexpr Ctl kCtl{};

float half_to_float(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

const uint8_t* row_at(const WeightPlan& w, int64_t r) {
  return r < w.tail_row ? w.codes + r * w.row_bytes : w.tail_codes + (r - w.tail_row) * w.row_bytes;
}

// R rows (rp[r]) over every block; acc[r] collects the lanes of y[r].
template <int R>
void rows(const uint8_t* const* rp, const uint8_t* const* next, int64_t blocks,
          const uint8_t* planes, const float* pow2, const float* xs, float* y) {
  const __m512i mask3 = _mm512_set1_epi8(3);
  const __m512i table = _mm512_load_si512(kCtl.qs);
  __m512 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
    for (int r = 0; r < R; ++r) {
      _mm_prefetch(reinterpret_cast<const char*>(next[r] + b * kBlockBytes), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(next[r] + b * kBlockBytes + 64), _MM_HINT_T0);
    }
    const uint8_t* pb = planes + b * kPlaneBlock;
    for (int r = 0; r < R; ++r) {
      const uint8_t* blk = rp[r] + b * kBlockBytes;
      const __m128i sc = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk));
      // Scale nibble of every sub-block at bits 2-5 of its bytes (bits 0-1 take the code).
      const __m512i sc2 = _mm512_slli_epi16(_mm512_broadcast_i32x4(sc), 2);
      const __m512i qs = _mm512_loadu_si512(blk + 16);
      __m512i a[4] = {_mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512(),
                      _mm512_setzero_si512()};
      for (int j = 0; j < 4; ++j) {
        const __m512i codes = j == 0 ? qs : _mm512_srl_epi16(qs, _mm_cvtsi32_si128(2 * j));
        const __m512i s = _mm512_permutexvar_epi8(_mm512_load_si512(kCtl.sub[j]), sc2);
        const __m512i idx = _mm512_ternarylogic_epi32(mask3, codes, s, 0xCA);
        const __m512i q = _mm512_permutexvar_epi8(idx, table);  // q · s, unsigned
        for (int p = 0; p < 4; ++p)
          a[p] = _mm512_dpbusd_epi32(a[p], q, _mm512_load_si512(pb + p * 256 + j * 64));
      }
      __m512 v = _mm512_cvtepi32_ps(a[0]);
      v = _mm512_fmadd_ps(v, _mm512_set1_ps(128.0f), _mm512_cvtepi32_ps(a[1]));
      v = _mm512_fmadd_ps(v, _mm512_set1_ps(128.0f), _mm512_cvtepi32_ps(a[2]));
      v = _mm512_fmadd_ps(v, _mm512_set1_ps(128.0f), _mm512_cvtepi32_ps(a[3]));
      acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(half_to_float(blk + 80) * pow2[b]), v, acc[r]);
      // min term: dmin · Σ_j m_j · xs_j (m_j the high nibble of scale byte j)
      const __m512 m = _mm512_cvtepi32_ps(_mm512_srli_epi32(_mm512_cvtepu8_epi32(sc), 4));
      acc[r] = _mm512_fnmadd_ps(_mm512_mul_ps(m, _mm512_set1_ps(half_to_float(blk + 82))),
                                _mm512_loadu_ps(xs + b * 16), acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) y[r] = _mm512_reduce_add_ps(acc[r]);
}

}  // namespace

bool q2k_prep(const float* x, int64_t k, uint8_t* planes, float* pow2) {
  const int64_t blocks = k / kBlockElems;
  const __m512 sign = _mm512_set1_ps(-0.0f);
  // First every block's largest |x| (writing nothing until all are usable).
  for (int64_t b = 0; b < blocks; ++b) {
    const float* xb = x + b * kBlockElems;
    __m512 mx = _mm512_setzero_ps();
    for (int v = 0; v < 16; ++v) {
      const __m512 xv = _mm512_loadu_ps(xb + 16 * v);
      if (_mm512_cmp_ps_mask(xv, xv, _CMP_UNORD_Q) != 0) return false;  // NaN
      mx = _mm512_max_ps(mx, _mm512_andnot_ps(sign, xv));
    }
    const float big = _mm512_reduce_max_ps(mx);
    if (!std::isfinite(big) || (big != 0.0f && big < 0x1p-100f)) return false;
    pow2[b] = big;
  }
  for (int64_t b = 0; b < blocks; ++b) {
    const float* xb = x + b * kBlockElems;
    uint8_t* pb = planes + b * kPlaneBlock;
    const float big = pow2[b];
    if (big == 0.0f) {
      std::memset(pb, 0, kPlaneBlock);
      continue;
    }
    // 2^e with big / 2^(e + 21) < 64, so every digit lies in [-64, 64]; each step below is an
    // exact f32 operation (products by powers of two, remainders of at most 24 bits).
    const int e = std::ilogb(big) - 26;
    pow2[b] = std::ldexp(1.0f, e);
    const float up[4] = {std::ldexp(1.0f, -(e + 21)), std::ldexp(1.0f, -(e + 14)),
                         std::ldexp(1.0f, -(e + 7)), std::ldexp(1.0f, -e)};
    const float down[3] = {std::ldexp(1.0f, e + 21), std::ldexp(1.0f, e + 14),
                           std::ldexp(1.0f, e + 7)};
    for (int v = 0; v < 16; ++v) {
      // Elements 16v .. 16v + 15: code j = (v % 8) / 2 of bytes 32 (v / 8) + 16 (v % 2) ...
      const int pos = 32 * (v / 8) + 16 * (v % 2), j = (v % 8) / 2;
      __m512 r = _mm512_loadu_ps(xb + 16 * v);
      for (int p = 0; p < 4; ++p) {
        const __m512 c = _mm512_roundscale_ps(_mm512_mul_ps(r, _mm512_set1_ps(up[p])),
                                              _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        if (p < 3) r = _mm512_fnmadd_ps(c, _mm512_set1_ps(down[p]), r);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(pb + p * 256 + j * 64 + pos),
                         _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(c)));
      }
    }
  }
  return true;
}

void q2k_gemv(const WeightPlan& w, const uint8_t* planes, const float* pow2, const float* xs,
              int64_t n0, int64_t n1, float* y) {
  const int64_t blocks = w.k / kBlockElems;
  int64_t n = n0;
  for (; n + kRows <= n1; n += kRows) {
    const uint8_t* rp[kRows];
    const uint8_t* next[kRows];
    for (int r = 0; r < kRows; ++r) {
      rp[r] = row_at(w, n + r);
      next[r] = row_at(w, n + kRows + r < w.n ? n + kRows + r : w.n - 1);
    }
    rows<kRows>(rp, next, blocks, planes, pow2, xs, y + n);
  }
  for (; n < n1; ++n) {
    const uint8_t* rp = row_at(w, n);
    rows<1>(&rp, &rp, blocks, planes, pow2, xs, y + n);
  }
}

}  // namespace quanta::cpu::vnni
