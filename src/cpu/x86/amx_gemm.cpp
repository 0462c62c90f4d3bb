// AMX-BF16 tile products for the tiled path (amx_gemm.hpp says what and why).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC bug 105593 (vnni_common.hpp)
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include "cpu/x86/amx_gemm.hpp"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>

#include "format/gguf.hpp"
#include "format/minifloat.hpp"

namespace quanta::cpu::amx {

namespace {

int64_t round_up(int64_t v, int64_t m) {
  return (v + m - 1) / m * m;
}

// v = p[0] + p[1] with p[0] v truncated to bf16 (sign and exponent kept, so the remainder
// p[1] is exact in f32; pack_bf16 rounds it, exact for an f16 value). Returns the lanes that are
// not finite (their remainders are NaN; the caller does not use the planes then).
// P = 3 (f32 x): p[1] the remainder truncated too, p[2] what is left (at most 8 significant
// bits: exact in bf16), so p[0] + p[1] + p[2] = v.
template <int P>
inline __mmask16 split(__m512 v, __m512 (&p)[P]) {
  static_assert(P >= 1 && P <= 3);
  const __m512i top = _mm512_set1_epi32(static_cast<int>(0xffff0000u));
  p[0] = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(v), top));
  const __m512 r = _mm512_sub_ps(v, p[0]);  // NaN for an infinity or a NaN
  if constexpr (P == 2) p[1] = r;
  if constexpr (P == 3) {
    p[1] = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(r), top));
    p[2] = _mm512_sub_ps(r, p[1]);
  }
  return _mm512_cmp_ps_mask(r, r, _CMP_UNORD_Q);
}

// Two vectors of f32 as 32 bf16 words, rounded to nearest even (exact for the planes that are
// bf16 values already).
inline __m512i pack_bf16(__m512 a, __m512 b) {
  return reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(b, a));
}

// 16 x 16 dwords: r[i] lane j -> r[j] lane i (simd/avx512.hpp's transpose on floats, repeated:
// this file, built with its own flags, defines no inline function of the avx512 level).
inline void transpose16(__m512i (&r)[16]) {
  __m512i t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {
    r[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
    r[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
    r[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
    r[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
  for (int j = 0; j < 4; ++j) {
    t[j] = _mm512_shuffle_i32x4(r[j], r[4 + j], 0x88);
    t[4 + j] = _mm512_shuffle_i32x4(r[j], r[4 + j], 0xdd);
    t[8 + j] = _mm512_shuffle_i32x4(r[8 + j], r[12 + j], 0x88);
    t[12 + j] = _mm512_shuffle_i32x4(r[8 + j], r[12 + j], 0xdd);
  }
  for (int j = 0; j < 4; ++j) {
    r[j] = _mm512_shuffle_i32x4(t[j], t[8 + j], 0x88);
    r[8 + j] = _mm512_shuffle_i32x4(t[j], t[8 + j], 0xdd);
    r[4 + j] = _mm512_shuffle_i32x4(t[4 + j], t[12 + j], 0x88);
    r[12 + j] = _mm512_shuffle_i32x4(t[4 + j], t[12 + j], 0xdd);
  }
}

// 32 floats at p, the first n valid (0 <= n <= 32), the rest zero.
inline void load32(const float* p, int64_t n, __m512& a, __m512& b) {
  if (n >= 32) {
    a = _mm512_loadu_ps(p);
    b = _mm512_loadu_ps(p + 16);
    return;
  }
  const auto mask = [](int64_t c) {
    return c <= 0    ? __mmask16{0}
           : c >= 16 ? __mmask16{0xffff}
                     : static_cast<__mmask16>((1u << c) - 1);
  };
  a = _mm512_maskz_loadu_ps(mask(n), p);
  b = _mm512_maskz_loadu_ps(mask(n - 16), p + 16);
}

// KN: x is the A operand (tile rows = rows of x), else the B operand (the pairs transposed).
template <int P, bool KN>
bool prep_x_block_p(const float* x, int64_t ldx, int64_t m, int64_t k, int64_t b, uint16_t* xp) {
  const int64_t ks = round_up(k, kStep) / kStep;
  __mmask16 bad = 0;
  for (int64_t s = 0; s < ks; ++s) {
    __m512i rows[P][16];
    for (int r = 0; r < 16; ++r) {
      const int64_t i = b * kBlock + r;
      __m512 lo = _mm512_setzero_ps(), hi = _mm512_setzero_ps();
      if (i < m) load32(x + i * ldx + s * kStep, k - s * kStep, lo, hi);
      __m512 pl[P], ph[P];
      bad |= split<P>(lo, pl) | split<P>(hi, ph);
      for (int p = 0; p < P; ++p) rows[p][r] = pack_bf16(pl[p], ph[p]);
    }
    uint16_t* dst = xp + (b * ks + s) * P * kTile;
    for (int p = 0; p < P; ++p) {
      if constexpr (!KN) transpose16(rows[p]);
      for (int kk = 0; kk < 16; ++kk)
        _mm512_storeu_si512(dst + p * kTile + kk * kStep, rows[p][kk]);
    }
  }
  return bad != 0;
}

// The tile registers: A in 4, 5 (operand blocks 0, 1), B in 6, 7, C (A block i, B block j) in
// 2i + j. W [N, K] (KN false): A = W, B = x. W [K, N]: A = x, B = W. W always comes in pairs of
// blocks (rows or columns padded to 32); x in one or two (MB).
struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

void configure() {
  TileConfig c;
  for (int t = 0; t < 8; ++t) {
    c.colsb[t] = 64;
    c.rows[t] = 16;
  }
  _tile_loadconfig(&c);
}

// Whether C tile 2i + j is in use: both W blocks, MB x blocks.
template <int MB, bool KN>
constexpr bool c_used(int i, int j) {
  return (KN ? i : j) < MB;
}

// C tiles over the steps: the products of amx_gemm.hpp for XP planes of x, ordered so that
// consecutive products share a loaded operand. w0 / x0: the first step's tiles of W block 0 / x
// block 0; wnext / xnext: elements to block 1.
template <int WP, int XP, int MB, bool KN>
void block(const uint16_t* w0, int64_t wnext, const uint16_t* x0, int64_t xnext, int64_t steps) {
  // The tile numbers are literal tokens: GCC's tile macros paste them into the assembly.
  for (int64_t s = 0; s < steps; ++s) {
    const uint16_t* w = w0 + s * WP * kTile;
    const uint16_t* x = x0 + s * XP * kTile;
    auto load_w = [&](int plane) {
      const uint16_t* p = w + plane * kTile;
      if constexpr (KN) {
        _tile_loadd(6, p, 64);
        _tile_loadd(7, p + wnext, 64);
      } else {
        _tile_loadd(4, p, 64);
        _tile_loadd(5, p + wnext, 64);
      }
    };
    auto load_x = [&](int plane) {
      const uint16_t* p = x + plane * kTile;
      if constexpr (KN) {
        _tile_loadd(4, p, 64);
        if constexpr (MB == 2) _tile_loadd(5, p + xnext, 64);
      } else {
        _tile_loadd(6, p, 64);
        if constexpr (MB == 2) _tile_loadd(7, p + xnext, 64);
      }
    };
    auto dp = [] {
      _tile_dpbf16ps(0, 4, 6);
      if constexpr (c_used<MB, KN>(0, 1)) _tile_dpbf16ps(1, 4, 7);
      if constexpr (c_used<MB, KN>(1, 0)) _tile_dpbf16ps(2, 5, 6);
      if constexpr (MB == 2) _tile_dpbf16ps(3, 5, 7);
    };
    if constexpr (WP == 1) {  // (0,0) (0,1) ..: W exact in one plane
      load_w(0);
      for (int p = 0; p < XP; ++p) load_x(p), dp();
    } else if constexpr (XP == 1) {  // (0,0) (1,0)
      load_x(0);
      load_w(0), dp();
      load_w(1), dp();
    } else {  // (0,0) (1,0) (0,1)
      load_x(0), load_w(0), dp();
      load_w(1), dp();
      load_x(1), load_w(0), dp();
    }
  }
}

// C tile 2i + j at c + 16 i rows + 16 j columns of ct.
template <int WP, int XP, int MB, bool KN>
void c_block(float* c, int64_t ldct, bool accumulate, const uint16_t* w0, int64_t wnext,
             const uint16_t* x0, int64_t xnext, int64_t steps) {
  const int64_t cstride = ldct * 4;
  float* c1 = c + kBlock * ldct;
  if (accumulate) {
    _tile_loadd(0, c, cstride);
    if constexpr (c_used<MB, KN>(0, 1)) _tile_loadd(1, c + kBlock, cstride);
    if constexpr (c_used<MB, KN>(1, 0)) _tile_loadd(2, c1, cstride);
    if constexpr (MB == 2) _tile_loadd(3, c1 + kBlock, cstride);
  } else {
    _tile_zero(0);
    if constexpr (c_used<MB, KN>(0, 1)) _tile_zero(1);
    if constexpr (c_used<MB, KN>(1, 0)) _tile_zero(2);
    if constexpr (MB == 2) _tile_zero(3);
  }
  block<WP, XP, MB, KN>(w0, wnext, x0, xnext, steps);
  _tile_stored(0, c, cstride);
  if constexpr (c_used<MB, KN>(0, 1)) _tile_stored(1, c + kBlock, cstride);
  if constexpr (c_used<MB, KN>(1, 0)) _tile_stored(2, c1, cstride);
  if constexpr (MB == 2) _tile_stored(3, c1 + kBlock, cstride);
}

template <int WP, int XP, bool KN>
void gemm_xp(const uint16_t* wp, int64_t kcs, int64_t w_pad, const uint16_t* xp, int64_t ks,
             int64_t mp, int64_t s0, float* ct, int64_t ldct, bool accumulate) {
  // Steps per pass: a pair of x blocks over kSub steps (16 KB at two planes) stays in L1 while
  // the W blocks of the tile go by.
  constexpr int64_t kSub = 4;
  const int64_t wnext = kcs * WP * kTile, xnext = ks * XP * kTile;
  const int64_t mblocks = mp / kBlock;
  for (int64_t sub = 0; sub < kcs; sub += kSub) {
    const int64_t n = kcs - sub < kSub ? kcs - sub : kSub;
    const bool acc = accumulate || sub > 0;
    for (int64_t mb = 0; mb < mblocks; mb += 2) {
      const uint16_t* x0 = xp + mb * xnext + (s0 + sub) * XP * kTile;
      for (int64_t nb = 0; nb < w_pad / kBlock; nb += 2) {
        // ct[n][m] for W [N, K], ct[m][n] for W [K, N]
        float* c =
            KN ? ct + mb * kBlock * ldct + nb * kBlock : ct + nb * kBlock * ldct + mb * kBlock;
        const uint16_t* w0 = wp + nb * wnext + sub * WP * kTile;
        if (mb + 1 < mblocks)
          c_block<WP, XP, 2, KN>(c, ldct, acc, w0, wnext, x0, xnext, n);
        else
          c_block<WP, XP, 1, KN>(c, ldct, acc, w0, wnext, x0, xnext, n);
      }
    }
  }
}

// The codes path's products for one group (steps steps) of W blocks nb, nb + 1 (w0, + wnext)
// and x blocks mb (x0) and, for MB = 2, mb + 1 (+ xnext): C tile 2i + j, zeroed first.
template <int XP, int MB>
void codes_group(const uint16_t* w0, int64_t wnext, const uint16_t* x0, int64_t xnext,
                 int64_t steps) {
  _tile_zero(0);
  _tile_zero(2);
  if constexpr (MB == 2) {
    _tile_zero(1);
    _tile_zero(3);
  }
  for (int64_t s = 0; s < steps; ++s) {
    const uint16_t* w = w0 + s * kTile;
    const uint16_t* x = x0 + s * XP * kTile;
    _tile_loadd(4, w, 64);
    _tile_loadd(5, w + wnext, 64);
    for (int p = 0; p < XP; ++p) {
      _tile_loadd(6, x + p * kTile, 64);
      if constexpr (MB == 2) _tile_loadd(7, x + p * kTile + xnext, 64);
      _tile_dpbf16ps(0, 4, 6);
      _tile_dpbf16ps(2, 5, 6);
      if constexpr (MB == 2) {
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(3, 5, 7);
      }
    }
  }
}

// C tiles 2i + j of codes_group into the sums (rows n = 16 (nb + i) + r, columns 16 (mb + j) ..;
// gemm_codes' blocked layout): ct += sc[n] · C + bi[n] · xsum (sc, bi: the group's column of the
// scales and biases).
template <int MB>
void codes_extract(int64_t nb, int64_t mb, const float* sc, const float* bi, int64_t ldsb,
                   const float* xsum, float* ct, int64_t ldct) {
  float* block = ct + mb / 2 * ldct * 2 * kBlock;
  alignas(64) float cb[4][kBlock][kBlock];
  _tile_stored(0, cb[0], 64);
  _tile_stored(2, cb[2], 64);
  if constexpr (MB == 2) {
    _tile_stored(1, cb[1], 64);
    _tile_stored(3, cb[3], 64);
  }
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < MB; ++j) {
      const __m512 xs = _mm512_loadu_ps(xsum + (mb + j) * kBlock);
      for (int64_t r = 0; r < kBlock; ++r) {
        const int64_t n = (nb + i) * kBlock + r;
        float* c = block + n * 2 * kBlock + j * kBlock;
        __m512 a = _mm512_fmadd_ps(_mm512_set1_ps(sc[n * ldsb]), _mm512_load_ps(cb[2 * i + j][r]),
                                   _mm512_loadu_ps(c));
        a = _mm512_fmadd_ps(_mm512_set1_ps(bi[n * ldsb]), xs, a);
        _mm512_storeu_ps(c, a);
      }
    }
}

}  // namespace

int x_planes_for(DType x) {
  return x == DType::bf16 ? 1 : x == DType::f16 ? 2 : 0;
}

int64_t x_elems(int64_t m, int64_t k, int planes) {
  return round_up(m, kBlock) * round_up(k, kStep) * planes;
}

bool prep_x_block(const float* x, int64_t ldx, int64_t m, int64_t k, int64_t b, int planes, bool kn,
                  uint16_t* xp) {
  if (kn)
    return planes == 1   ? prep_x_block_p<1, true>(x, ldx, m, k, b, xp)
           : planes == 2 ? prep_x_block_p<2, true>(x, ldx, m, k, b, xp)
                         : prep_x_block_p<kCodeXPlanes, true>(x, ldx, m, k, b, xp);
  switch (planes) {
    case 1:
      return prep_x_block_p<1, false>(x, ldx, m, k, b, xp);
    case 2:
      return prep_x_block_p<2, false>(x, ldx, m, k, b, xp);
    default:
      return prep_x_block_p<kCodeXPlanes, false>(x, ldx, m, k, b, xp);
  }
}

bool codes_w(const float* t, int64_t ld, int64_t rows, int64_t cols_pad, uint16_t* wp, int64_t kcs,
             int64_t nb, int64_t s0) {
  __mmask16 bad = 0;
  for (int64_t r = 0; r < kBlock; ++r) {
    uint16_t* dst = wp + (nb * kcs + s0) * kTile + r * kStep;
    for (int64_t c = 0; c < cols_pad; c += kStep, dst += kTile) {
      __m512 lo = _mm512_setzero_ps(), hi = _mm512_setzero_ps();
      if (r < rows) load32(t + r * ld + c, ld - c, lo, hi);
      const __m512 dl = _mm512_sub_ps(lo, lo), dh = _mm512_sub_ps(hi, hi);  // NaN if not finite
      bad |= _mm512_cmp_ps_mask(dl, dl, _CMP_UNORD_Q) | _mm512_cmp_ps_mask(dh, dh, _CMP_UNORD_Q);
      _mm512_storeu_si512(dst, pack_bf16(lo, hi));
    }
  }
  return bad != 0;
}

namespace {

// Words j of a 32-entry table: the bf16 of 4-bit code j % 16, as an integer or (e2m1) an E2M1
// value (vpermw reads 5 bits of an index).
__m512i nibble_table(bool e2m1) {
  alignas(64) uint16_t t[32];
  for (int j = 0; j < 32; ++j) {
    const int c = j % 16;
    float v = static_cast<float>(c);
    if (e2m1) {
      static constexpr float kE2M1[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
      v = c < 8 ? kE2M1[c] : -kE2M1[c - 8];
    }
    uint32_t b;
    __builtin_memcpy(&b, &v, 4);
    t[j] = static_cast<uint16_t>(b >> 16);  // exact: at most 4 significant bits
  }
  return _mm512_load_si512(t);
}

// Words i (0..7 for E4M3, 0..3 for E5M2) of a 32-entry table: the bf16 of subnormal code i.
__m512i fp8_subnormal_table(bool e5m2) {
  alignas(64) uint16_t t[32] = {};
  for (int i = 1; i < (e5m2 ? 4 : 8); ++i) {
    const float v = static_cast<float>(i) * (e5m2 ? 0x1p-16f : 0x1p-9f);
    uint32_t b;
    __builtin_memcpy(&b, &v, 4);
    t[i] = static_cast<uint16_t>(b >> 16);  // exact: at most 3 significant bits
  }
  return _mm512_load_si512(t);
}

// The bf16 words of 32 nibbles at p (16 bytes, low nibble first) through `table`: byte b of a
// dword in its low word (index b & 31) and b >> 4 in its high word, so element 2i (the low
// nibble) and 2i + 1 come out in order.
inline __m512i nibble_words(const uint8_t* p, __m512i table) {
  const __m512i d = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm512_permutexvar_epi16(_mm512_or_si512(d, _mm512_slli_epi32(d, 12)), table);
}

// bf16 words v times 2^(E - 127) (an E8M0 scale): E - 127 added to the exponent field of the
// nonzero words (exact while the results stay normal: the callers check E's range).
inline __m512i times_e8m0(__m512i v, int E) {
  return _mm512_mask_add_epi16(v, _mm512_test_epi16_mask(v, _mm512_set1_epi16(0x7fff)), v,
                               _mm512_set1_epi16(static_cast<int16_t>((E - 127) * 128)));
}

// The one-plane W tile's rows from storage: for row r < rows, row(r, dst) writes its steps (dst
// the tile row of step s0, the next step kTile further); rows past `rows` become zeros.
template <class Row>
void plane_rows(uint16_t* wp, int64_t kcs, int64_t nb, int64_t s0, int64_t rows, int64_t cols_pad,
                Row&& row) {
  for (int64_t r = 0; r < kBlock; ++r) {
    uint16_t* dst = wp + (nb * kcs + s0) * kTile + r * kStep;
    if (r < rows) {
      row(r, dst);
      continue;
    }
    for (int64_t c = 0; c < cols_pad; c += kStep, dst += kTile)
      _mm512_storeu_si512(dst, _mm512_setzero_si512());
  }
}

}  // namespace

void codes_w_direct(DirectCodes kind, const uint8_t* codes, int64_t row_bytes, int64_t rows,
                    int64_t k0, int64_t cols_pad, uint16_t* wp, int64_t kcs, int64_t nb,
                    int64_t s0) {
  static const __m512i table = nibble_table(false);
  const auto ints = [](__m128i lo, __m128i hi, bool sign) {  // 32 bytes as 32 bf16 integers
    return pack_bf16(
        _mm512_cvtepi32_ps(sign ? _mm512_cvtepi8_epi32(lo) : _mm512_cvtepu8_epi32(lo)),
        _mm512_cvtepi32_ps(sign ? _mm512_cvtepi8_epi32(hi) : _mm512_cvtepu8_epi32(hi)));
  };
  const auto nibbles = [](__m128i q, bool high) {
    return _mm_and_si128(high ? _mm_srli_epi16(q, 4) : q, _mm_set1_epi8(15));
  };
  const auto load16 = [](const uint8_t* p) {
    return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  };
  const auto plus16 = [](__m128i v, __mmask16 k) {  // the fifth bit where k says
    return _mm_mask_add_epi8(v, k, v, _mm_set1_epi8(16));
  };
  if (kind == DirectCodes::q3_K) {  // a sub-block of 32 a tile row, its scales inside
    // Super-blocks of 256: hmask[32], qs[64], 12 bytes of 6-bit scales, f16 d. Element 128h +
    // 32jj + l (sub-block j = 4h + jj) is bits 2jj of qs[32h + l], minus 4 unless bit j of
    // hmask[l] is set, times scale 8h + 2jj + l / 16 (-32..31): sc·q in [-128, 128].
    namespace gg = codec::gguf;
    constexpr int64_t block = sizeof(gg::block_q3_K);
    plane_rows(wp, kcs, nb, s0, rows, cols_pad, [&](int64_t r, uint16_t* dst) {
      for (int64_t c = 0; c < cols_pad; c += kStep, dst += kTile) {
        const int64_t g = (k0 + c) / kStep;
        const int j = static_cast<int>(g % 8), h = j / 4, jj = j % 4;
        const uint8_t* b = codes + r * row_bytes + g / 8 * block;
        const __m256i qs = _mm256_loadu_si256(
            reinterpret_cast<const __m256i*>(b + offsetof(gg::block_q3_K, qs) + 32 * h));
        const __m256i hm = _mm256_loadu_si256(
            reinterpret_cast<const __m256i*>(b + offsetof(gg::block_q3_K, hmask)));
        __m256i q = _mm256_and_si256(_mm256_srli_epi16(qs, 2 * jj), _mm256_set1_epi8(3));
        const __mmask32 high =
            _mm256_test_epi8_mask(hm, _mm256_set1_epi8(static_cast<char>(1 << j)));
        q = _mm256_mask_sub_epi8(q, static_cast<__mmask32>(~high), q, _mm256_set1_epi8(4));
        const uint8_t* scales = b + offsetof(gg::block_q3_K, scales);
        const __m512i sc = _mm512_mask_blend_epi16(
            0xFFFF0000u,
            _mm512_set1_epi16(static_cast<int16_t>(gg::q3_K_scale(scales, 8 * h + 2 * jj))),
            _mm512_set1_epi16(static_cast<int16_t>(gg::q3_K_scale(scales, 8 * h + 2 * jj + 1))));
        const __m512i p = _mm512_mullo_epi16(_mm512_cvtepi8_epi16(q), sc);
        _mm512_storeu_si512(
            dst,
            pack_bf16(_mm512_cvtepi32_ps(_mm512_cvtepi16_epi32(_mm512_castsi512_si256(p))),
                      _mm512_cvtepi32_ps(_mm512_cvtepi16_epi32(_mm512_extracti64x4_epi64(p, 1)))));
      }
    });
    return;
  }
  if (kind == DirectCodes::q4_K || kind == DirectCodes::q5_K) {  // a sub-block of 32 a tile row
    // Super-blocks of 256: f16 d and dmin, 12 bytes of scales, (q5_K) 32 bytes of fifth bits,
    // then 128 bytes of nibbles: byte 32c + l holds element 64c + l (low) and 64c + 32 + l
    // (high); q5_K's element 64c + l takes bit 2c of qh[l], 64c + 32 + l bit 2c + 1.
    namespace gg = codec::gguf;
    const bool q5 = kind == DirectCodes::q5_K;
    const int64_t block = q5 ? sizeof(gg::block_q5_K) : sizeof(gg::block_q4_K);
    const int64_t qs_at = q5 ? offsetof(gg::block_q5_K, qs) : offsetof(gg::block_q4_K, qs);
    constexpr int64_t qh_at = offsetof(gg::block_q5_K, qh);
    plane_rows(wp, kcs, nb, s0, rows, cols_pad, [&](int64_t r, uint16_t* dst) {
      for (int64_t c = 0; c < cols_pad; c += kStep, dst += kTile) {
        const int64_t g = (k0 + c) / kStep;
        const int j = static_cast<int>(g % 8);
        const uint8_t* b = codes + r * row_bytes + g / 8 * block;
        const uint8_t* q = b + qs_at + 32 * (j / 2);
        __m128i lo = nibbles(load16(q), j % 2 != 0), hi = nibbles(load16(q + 16), j % 2 != 0);
        if (q5) {
          const __m128i bit = _mm_set1_epi8(static_cast<char>(1 << j));
          lo = plus16(lo, _mm_test_epi8_mask(load16(b + qh_at), bit));
          hi = plus16(hi, _mm_test_epi8_mask(load16(b + qh_at + 16), bit));
        }
        _mm512_storeu_si512(dst, ints(lo, hi, false));
      }
    });
    return;
  }
  if (kind != DirectCodes::u4 && kind != DirectCodes::u8) {  // a block of 32 a tile row
    // Blocks: f16 d, (q4_1 / q5_1) f16 m, (q5_0 / q5_1) the fifth bits as a little-endian u32,
    // then 16 bytes of nibbles (element j low in byte j, j + 16 high) or q8_0's 32 int8.
    namespace gg = codec::gguf;
    struct Layout {
      int64_t block, qh_at, qs_at;  // qh_at < 0: no fifth bits
    };
    const Layout lay = [&]() -> Layout {
      switch (kind) {
        case DirectCodes::q4_0:
          return {sizeof(gg::block_q4_0), -1, offsetof(gg::block_q4_0, qs)};
        case DirectCodes::q4_1:
          return {sizeof(gg::block_q4_1), -1, offsetof(gg::block_q4_1, qs)};
        case DirectCodes::q5_0:
          return {sizeof(gg::block_q5_0), offsetof(gg::block_q5_0, qh),
                  offsetof(gg::block_q5_0, qs)};
        case DirectCodes::q5_1:
          return {sizeof(gg::block_q5_1), offsetof(gg::block_q5_1, qh),
                  offsetof(gg::block_q5_1, qs)};
        default:
          return {sizeof(gg::block_q8_0), -1, offsetof(gg::block_q8_0, qs)};
      }
    }();
    const bool q8 = kind == DirectCodes::q8_0, q5 = lay.qh_at >= 0;
    const int64_t block = lay.block, qh_at = lay.qh_at, qs_at = lay.qs_at;
    plane_rows(wp, kcs, nb, s0, rows, cols_pad, [&](int64_t r, uint16_t* dst) {
      const uint8_t* b = codes + r * row_bytes + k0 / kStep * block;
      for (int64_t c = 0; c < cols_pad; c += kStep, dst += kTile, b += block) {
        const __m128i q = load16(b + qs_at);
        if (q8) {
          _mm512_storeu_si512(dst, ints(q, load16(b + qs_at + 16), true));
          continue;
        }
        __m128i lo = nibbles(q, false), hi = nibbles(q, true);
        if (q5) {
          uint32_t qh;
          std::memcpy(&qh, b + qh_at, 4);
          lo = plus16(lo, static_cast<__mmask16>(qh));
          hi = plus16(hi, static_cast<__mmask16>(qh >> 16));
        }
        _mm512_storeu_si512(dst, ints(lo, hi, false));
      }
    });
    return;
  }
  plane_rows(wp, kcs, nb, s0, rows, cols_pad, [&](int64_t r, uint16_t* dst) {
    const uint8_t* src = codes + r * row_bytes + (kind == DirectCodes::u8 ? k0 : k0 / 2);
    for (int64_t c = 0; c < cols_pad; c += kStep, dst += kTile) {
      if (kind == DirectCodes::u8) {
        _mm512_storeu_si512(
            dst, ints(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + c)),
                      _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + c + 16)), false));
      } else {
        _mm512_storeu_si512(dst, nibble_words(src + c / 2, table));
      }
    }
  });
}

bool mxfp4_w_direct(const uint8_t* codes, int64_t row_bytes, const uint8_t* scales,
                    int64_t ld_scales, int64_t rows, int64_t k0, int64_t cols_pad, uint16_t* wp,
                    int64_t kcs, int64_t nb, int64_t s0) {
  static const __m512i table = nibble_table(true);
  bool bad = false;
  plane_rows(wp, kcs, nb, s0, rows, cols_pad, [&](int64_t r, uint16_t* dst) {
    const uint8_t* src = codes + r * row_bytes + k0 / 2;
    const uint8_t* e = scales + r * ld_scales + k0 / kStep;
    for (int64_t c = 0; c < cols_pad; c += kStep, dst += kTile) {
      // 2^(E - 127) times E2M1's 0.5..6 within [2^-65, 2^66], as split_w's one plane.
      const int E = e[c / kStep];
      bad |= E < 63 || E > 190;
      _mm512_storeu_si512(dst, times_e8m0(nibble_words(src + c / 2, table), E));
    }
  });
  return bad;
}

bool fp8_w_direct(bool e5m2, const uint8_t* codes, int64_t row_bytes, const uint8_t* e8m0,
                  int64_t ld_e8m0, int64_t rows, int64_t valid, int64_t k0, int64_t cols_pad,
                  uint16_t* wp, int64_t kcs, int64_t nb, int64_t s0) {
  static const __m512i sub4 = fp8_subnormal_table(false), sub5 = fp8_subnormal_table(true);
  const __m512i sub_table = e5m2 ? sub5 : sub4;
  // Normal codes: the exponent rebiased to bf16's (E4M3 bias 7, E5M2 15) and the mantissa moved
  // up; a zero exponent field is a subnormal (table); an all-ones field (E5M2) or code 0x7f
  // (E4M3) is not finite.
  const __m512i magnitude = _mm512_set1_epi16(0x7f);
  const __m512i exp_field = _mm512_set1_epi16(e5m2 ? 0x7c : 0x78);
  const __m512i bias = _mm512_set1_epi16(static_cast<int16_t>((e5m2 ? 112 : 120) << 7));
  __mmask32 bad = 0;
  bool bad_scale = false;
  plane_rows(wp, kcs, nb, s0, rows, cols_pad, [&](int64_t r, uint16_t* dst) {
    const uint8_t* src = codes + r * row_bytes + k0;
    for (int64_t c = 0; c < cols_pad; c += kStep, dst += kTile) {
      const int64_t n = std::min<int64_t>(std::max<int64_t>(valid - c, 0), kStep);
      const __m256i raw =
          _mm256_maskz_loadu_epi8(static_cast<__mmask32>((uint64_t{1} << n) - 1), src + c);
      const __m512i b = _mm512_cvtepu8_epi16(raw);
      const __m512i mag = _mm512_and_si512(b, magnitude);
      const __m512i normal = _mm512_add_epi16(_mm512_slli_epi16(mag, e5m2 ? 5 : 4), bias);
      const __mmask32 subnormal = _mm512_testn_epi16_mask(mag, exp_field);
      __m512i v = _mm512_mask_permutexvar_epi16(normal, subnormal, mag, sub_table);
      if (e8m0 != nullptr) {  // mxfp8: times 2^(E - 127)
        // 2^-9..448 times it within [2^-65, 2^66] (split_w's one plane) for E in [71, 184].
        const int E = e8m0[r * ld_e8m0 + (k0 + c) / kStep];
        bad_scale |= E < 71 || E > 184;
        v = times_e8m0(v, E);
      }
      v = _mm512_or_si512(v, _mm512_slli_epi16(_mm512_andnot_si512(magnitude, b), 8));  // sign
      bad |=
          e5m2 ? _mm512_cmpge_epu16_mask(mag, exp_field) : _mm512_cmpeq_epi16_mask(mag, magnitude);
      _mm512_storeu_si512(dst, v);
    }
  });
  return bad != 0 || bad_scale;
}

bool nvfp4_w_direct(const uint8_t* codes, int64_t row_bytes, const uint8_t* e4m3, int64_t ld_e4m3,
                    int64_t rows, int64_t k0, int64_t cols_pad, uint16_t* wp, int64_t kcs,
                    int64_t nb, int64_t s0) {
  static const __m512i table = nibble_table(true);
  bool bad = false;
  plane_rows(wp, kcs, nb, s0, rows, cols_pad, [&](int64_t r, uint16_t* dst) {
    const uint8_t* src = codes + r * row_bytes + k0 / 2;
    const uint8_t* sc = e4m3 + r * ld_e4m3 + k0 / 16;
    for (int64_t c = 0; c < cols_pad; c += kStep, dst += kTile) {
      // E2M1 times its block's E4M3 scale: at most 6 significant bits, within [2^-10, 2688].
      const float s_lo = codec::e4m3_to_float(sc[c / 16]);
      const float s_hi = codec::e4m3_to_float(sc[c / 16 + 1]);
      bad |= !std::isfinite(s_lo) || !std::isfinite(s_hi);
      const __m512i v = nibble_words(src + c / 2, table);
      const __m512 lo = _mm512_castsi512_ps(
          _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(v)), 16));
      const __m512 hi = _mm512_castsi512_ps(
          _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(v, 1)), 16));
      _mm512_storeu_si512(dst, pack_bf16(_mm512_mul_ps(lo, _mm512_set1_ps(s_lo)),
                                         _mm512_mul_ps(hi, _mm512_set1_ps(s_hi))));
    }
  });
  return bad;
}

namespace {

template <int XP>
void gemm_codes_xp(const uint16_t* wp, int64_t kcs, int64_t w_pad, const uint16_t* xp, int64_t ks,
                   int64_t mp, int64_t s0, int64_t gsteps, const float* sc, const float* bi,
                   int64_t ldsb, const float* xsum, float* ct, int64_t ldct) {
  const int64_t wnext = kcs * kTile, xnext = ks * XP * kTile;
  const int64_t mblocks = mp / kBlock, groups = kcs / gsteps;
  // The groups innermost: the 32 x 32 block of sums that each group goes to (4 KB, contiguous)
  // stays in L1: 5-35% faster than sweeping the W blocks per group with x's planes held in L1,
  // and the blocked sums 1.1-1.4x over rows of all of x's columns (whose 32 rows of a block fell
  // in a few L1 sets); the groups outermost, to reuse a group's tiles from L1, measured alike.
  for (int64_t nb = 0; nb < w_pad / kBlock; nb += 2)
    for (int64_t mb = 0; mb < mblocks; mb += 2)
      for (int64_t g = 0; g < groups; ++g) {
        const uint16_t* x0 = xp + mb * xnext + (s0 + g * gsteps) * XP * kTile;
        const uint16_t* w0 = wp + nb * wnext + g * gsteps * kTile;
        const float* xs = xsum + g * mp;
        if (mb + 1 < mblocks) {
          codes_group<XP, 2>(w0, wnext, x0, xnext, gsteps);
          codes_extract<2>(nb, mb, sc + g, bi + g, ldsb, xs, ct, ldct);
        } else {
          codes_group<XP, 1>(w0, wnext, x0, xnext, gsteps);
          codes_extract<1>(nb, mb, sc + g, bi + g, ldsb, xs, ct, ldct);
        }
      }
}

}  // namespace

void gemm_codes(const uint16_t* wp, int64_t kcs, int64_t w_pad, const uint16_t* xp, int x_planes,
                int64_t ks, int64_t mp, int64_t s0, int64_t gsteps, const float* sc,
                const float* bi, int64_t ldsb, const float* xsum, float* ct, int64_t ldct) {
  configure();
  switch (x_planes) {
    case 1:
      gemm_codes_xp<1>(wp, kcs, w_pad, xp, ks, mp, s0, gsteps, sc, bi, ldsb, xsum, ct, ldct);
      break;
    case 2:
      gemm_codes_xp<2>(wp, kcs, w_pad, xp, ks, mp, s0, gsteps, sc, bi, ldsb, xsum, ct, ldct);
      break;
    default:
      gemm_codes_xp<kCodeXPlanes>(wp, kcs, w_pad, xp, ks, mp, s0, gsteps, sc, bi, ldsb, xsum, ct,
                                  ldct);
  }
  _tile_release();
}

namespace {

// Lanes of v that one plane does not take: a remainder below the truncated value, not finite, or
// a magnitude outside [2^-65, 2^66] (below it the products with x's smaller planes would fall
// under f32's normal range, which the tile unit flushes to zero).
inline __mmask16 not_one_plane(__m512 v) {
  __m512 p[2];
  const __mmask16 bad = split<2>(v, p);
  const __m512 a = _mm512_abs_ps(v);
  return bad | _mm512_cmp_ps_mask(p[1], _mm512_setzero_ps(), _CMP_NEQ_UQ) |
         _mm512_cmp_ps_mask(a, _mm512_set1_ps(0x1p66f), _CMP_GT_OQ) |
         (_mm512_cmp_ps_mask(a, _mm512_set1_ps(0x1p-65f), _CMP_LT_OQ) &
          _mm512_cmp_ps_mask(a, _mm512_setzero_ps(), _CMP_NEQ_OQ));
}

}  // namespace

bool split_w(const float* t, int64_t ld, int64_t rows, int64_t cols_pad, uint16_t* wp, int64_t kcs,
             int64_t nb, int64_t s0, int planes) {
  __mmask16 bad = 0;
  for (int64_t r = 0; r < kBlock; ++r) {
    uint16_t* dst = wp + (nb * kcs + s0) * planes * kTile + r * kStep;
    for (int64_t c = 0; c < cols_pad; c += kStep, dst += planes * kTile) {
      __m512 lo = _mm512_setzero_ps(), hi = _mm512_setzero_ps();
      if (r < rows) load32(t + r * ld + c, ld - c, lo, hi);
      if (planes == 1) {
        bad |= not_one_plane(lo) | not_one_plane(hi);
        _mm512_storeu_si512(dst, pack_bf16(lo, hi));
        continue;
      }
      __m512 pl[kWPlanes], ph[kWPlanes];
      bad |= split<kWPlanes>(lo, pl) | split<kWPlanes>(hi, ph);
      for (int p = 0; p < kWPlanes; ++p)
        _mm512_storeu_si512(dst + p * kTile, pack_bf16(pl[p], ph[p]));
    }
  }
  return bad != 0;
}

bool split_w_kn(const float* t, int64_t ld, int64_t rows, int64_t cols_pad, uint16_t* wp,
                int64_t kcs, int64_t s, int planes) {
  const __m512i top = _mm512_set1_epi32(static_cast<int>(0xffff0000u));
  __mmask16 bad = 0;
  for (int64_t c = 0; c < cols_pad; c += kBlock) {
    uint16_t* dst = wp + (c / kBlock * kcs + s) * planes * kTile;
    for (int kk = 0; kk < 16; ++kk) {
      const __m512 a = 2 * kk < rows ? _mm512_loadu_ps(t + 2 * kk * ld + c) : _mm512_setzero_ps();
      const __m512 b =
          2 * kk + 1 < rows ? _mm512_loadu_ps(t + (2 * kk + 1) * ld + c) : _mm512_setzero_ps();
      const __m512i ab = _mm512_castps_si512(a), bb = _mm512_castps_si512(b);
      // Plane 0: both values truncated, a's bf16 in the low half of each dword.
      _mm512_storeu_si512(dst + kk * kStep,
                          _mm512_or_si512(_mm512_srli_epi32(ab, 16), _mm512_and_si512(bb, top)));
      if (planes == 1) {
        bad |= not_one_plane(a) | not_one_plane(b);
        continue;
      }
      const __m512 ra = _mm512_sub_ps(a, _mm512_castsi512_ps(_mm512_and_si512(ab, top)));
      const __m512 rb = _mm512_sub_ps(b, _mm512_castsi512_ps(_mm512_and_si512(bb, top)));
      bad |= _mm512_cmp_ps_mask(ra, ra, _CMP_UNORD_Q) | _mm512_cmp_ps_mask(rb, rb, _CMP_UNORD_Q);
      // Plane 1: the remainders rounded to bf16, paired the same way.
      const __m512i lo = _mm512_cvtepu16_epi32(reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(ra)));
      const __m512i hi = _mm512_cvtepu16_epi32(reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(rb)));
      _mm512_storeu_si512(dst + kTile + kk * kStep, _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16)));
    }
  }
  return bad != 0;
}

namespace {

template <int WP>
void gemm_wp(const uint16_t* wp, int64_t kcs, int64_t w_pad, const uint16_t* xp, int x_planes,
             bool kn, int64_t ks, int64_t mp, int64_t s0, float* ct, int64_t ldct,
             bool accumulate) {
  if (kn) {
    if (x_planes == 1)
      gemm_xp<WP, 1, true>(wp, kcs, w_pad, xp, ks, mp, s0, ct, ldct, accumulate);
    else if (x_planes == 2)
      gemm_xp<WP, 2, true>(wp, kcs, w_pad, xp, ks, mp, s0, ct, ldct, accumulate);
    else if constexpr (WP == 1)
      gemm_xp<1, kCodeXPlanes, true>(wp, kcs, w_pad, xp, ks, mp, s0, ct, ldct, accumulate);
  } else if (x_planes == 1) {
    gemm_xp<WP, 1, false>(wp, kcs, w_pad, xp, ks, mp, s0, ct, ldct, accumulate);
  } else if (x_planes == 2) {
    gemm_xp<WP, 2, false>(wp, kcs, w_pad, xp, ks, mp, s0, ct, ldct, accumulate);
  } else if constexpr (WP == 1) {
    gemm_xp<1, kCodeXPlanes, false>(wp, kcs, w_pad, xp, ks, mp, s0, ct, ldct, accumulate);
  }
}

}  // namespace

void gemm(const uint16_t* wp, int w_planes, int64_t kcs, int64_t w_pad, const uint16_t* xp,
          int x_planes, bool kn, int64_t ks, int64_t mp, int64_t s0, float* ct, int64_t ldct,
          bool accumulate) {
  configure();
  if (w_planes == 1)
    gemm_wp<1>(wp, kcs, w_pad, xp, x_planes, kn, ks, mp, s0, ct, ldct, accumulate);
  else
    gemm_wp<2>(wp, kcs, w_pad, xp, x_planes, kn, ks, mp, s0, ct, ldct, accumulate);
  _tile_release();
}

}  // namespace quanta::cpu::amx
