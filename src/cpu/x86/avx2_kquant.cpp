// The avx2 level's K-quant GEMV on vpmaddubsw / vpmaddwd (see avx2_kquant.hpp). Everything but
// the two entry points has internal linkage, and no std:: inline function is used: this file is
// built with -mavx2 and must not hand the linker an AVX2 copy of a shared inline function (those
// of avx2_common.hpp are included only by files built with the same flags).
#include "cpu/x86/avx2_kquant.hpp"

#include <immintrin.h>

#include <cstdint>

#include "cpu/x86/avx2_common.hpp"

namespace quanta::cpu::avx2_kquant {

namespace {

using namespace avx2_common;

constexpr int64_t kBlockElems = 256;
constexpr int64_t kPlaneBytes = 256;              // one plane of a block, element order
constexpr int64_t kPlaneBlock = 3 * kPlaneBytes;  // a block's planes
constexpr int64_t kQuadHalf = 3 * 128;            // a half's planes in quad order
constexpr int kRows = 4;                          // rows of W a pass for one row of x

float half_to_float(const uint8_t* p) {
  uint16_t h;
  __builtin_memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

uint32_t load32(const uint8_t* p) {
  uint32_t v;
  __builtin_memcpy(&v, p, 4);
  return v;
}

__m256i load256(const uint8_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

// Storage row r (rows near the end of the buffer come from the padded tail copy; the quad pack
// has kRowOverread bytes of zeros after its last row).
const uint8_t* row_at(const WeightPlan& w, int64_t r) {
  if (w.kquant_quad != nullptr) return w.kquant_quad + r * w.row_bytes;
  return r < w.tail_row ? w.codes + r * w.row_bytes : w.tail_codes + (r - w.tail_row) * w.row_bytes;
}

// Scales per int16 lane of a code vector: the 32 codes of sub-block v of 32 (q4_K, q5_K) from
// s8x2 (its 8 scales as int16 in both 128-bit lanes).
__m256i scales32(__m256i s8x2, int v) {
  return _mm256_shuffle_epi8(s8x2, _mm256_set1_epi16(static_cast<int16_t>(0x0100 + 0x0202 * v)));
}

// The same for sub-blocks of 16 (q2_K, q3_K, q6_K): code vector v's first 16 codes take scale
// 2v, the next 16 scale 2v + 1, from s16 (the 16 scales as int16).
__m256i scales16(__m256i s16, int v) {
  const __m256i half =
      v < 4 ? _mm256_permute4x64_epi64(s16, 0x44) : _mm256_permute4x64_epi64(s16, 0xEE);
  const int lo = (2 * v) % 8, hi = (2 * v + 1) % 8;
  return _mm256_shuffle_epi8(
      half, _mm256_set_m128i(_mm_set1_epi16(static_cast<int16_t>(0x0100 + 0x0202 * hi)),
                             _mm_set1_epi16(static_cast<int16_t>(0x0100 + 0x0202 * lo))));
}

// acc - Σ_j f·s_j·xs_j over the block's 16 sub-blocks (s: 16 signed bytes).
__m256 sub16_terms(__m256 acc, __m128i s, __m256 f, const float* xs) {
  auto eight = [&](__m128i b) {
    return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b)), f);
  };
  acc = _mm256_fnmadd_ps(eight(s), _mm256_loadu_ps(xs), acc);
  return _mm256_fnmadd_ps(eight(_mm_srli_si128(s, 8)), _mm256_loadu_ps(xs + 8), acc);
}

// Eight bytes as f32.
__m256 bytes_u8(const uint8_t* p) {
  return _mm256_cvtepi32_ps(
      _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}

// Each format: kBytes per block, d (the factor of the code term), codes(v): the 32 unsigned codes
// of elements 32v .. 32v + 31 and their scales per int16 lane, and offsets(acc, xs): the f32 terms
// on x's sub-block sums xs (this block's), subtracted from acc.

// q2_K's codes come scaled: q · s (<= 3·15) is a byte, so vpmaddubsw takes it whole (pairs
// <= 2·45·127), two code vectors' pairs add in int16, and one vpmaddwd against ones per two
// vectors and plane replaces one against the scales per vector (kScaled).
struct Q2K {
  static constexpr int64_t kBytes = 84;
  static constexpr bool kScaled = true;
  const uint8_t* blk;
  __m256i prod[2], qs[2];
  float d;
  explicit Q2K(const uint8_t* b) : blk(b), d(half_to_float(b + 80)) {
    // prod[n], 16-byte lane l, bytes 4i .. 4i + 3: q · s for q = 0..3, s the 4-bit scale of
    // sub-block 8n + 2i + l (code vector v = 4n + i: its first 16 codes in lane 0, the next in 1).
    const __m128i sc = _mm_shuffle_epi8(
        _mm_and_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b)), _mm_set1_epi8(0x0F)),
        _mm_setr_epi8(0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15));
    const __m256i times = _mm256_set1_epi32(0x03020100);
    prod[0] = _mm256_mullo_epi32(_mm256_cvtepu8_epi32(sc), times);
    prod[1] = _mm256_mullo_epi32(_mm256_cvtepu8_epi32(_mm_srli_si128(sc, 8)), times);
    qs[0] = load256(b + 16);
    qs[1] = load256(b + 48);
  }
  // Element 128n + 32j + l: (qs[32n + l] >> 2j) & 3 times scale 8n + 2j + l / 16.
  __m256i codes(int v) const {
    const int n = v / 4, j = v % 4;
    const __m256i q = _mm256_and_si256(_mm256_srli_epi16(qs[n], 2 * j), _mm256_set1_epi8(3));
    return _mm256_shuffle_epi8(prod[n],
                               _mm256_or_si256(q, _mm256_set1_epi8(static_cast<char>(4 * j))));
  }
  __m256 offsets(__m256 acc, const float* xs) const {  // dmin · m_j · Σx_j
    const __m256 dmin = _mm256_set1_ps(half_to_float(blk + 82));
    const __m128i sc = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk));
    return sub16_terms(acc, _mm_and_si128(_mm_srli_epi16(sc, 4), _mm_set1_epi8(0x0F)), dmin, xs);
  }
};

struct Q3K {
  static constexpr int64_t kBytes = 110;
  const uint8_t* blk;
  __m128i sc8;  // the 16 signed scales
  __m256i s16, hm, qs[2];
  float d;
  explicit Q3K(const uint8_t* b) : blk(b), d(half_to_float(b + 108)) {
    // dequantize_row_q3_K's unpacking of the 6-bit scales (stored + 32).
    constexpr uint32_t k2 = 0x03030303, k4 = 0x0f0f0f0f;
    const uint32_t a0 = load32(b + 96), a1 = load32(b + 100), t = load32(b + 104);
    const uint32_t u0 = (a0 & k4) | (((t >> 0) & k2) << 4);
    const uint32_t u1 = (a1 & k4) | (((t >> 2) & k2) << 4);
    const uint32_t u2 = ((a0 >> 4) & k4) | (((t >> 4) & k2) << 4);
    const uint32_t u3 = ((a1 >> 4) & k4) | (((t >> 6) & k2) << 4);
    sc8 = _mm_sub_epi8(_mm_setr_epi32(static_cast<int>(u0), static_cast<int>(u1),
                                      static_cast<int>(u2), static_cast<int>(u3)),
                       _mm_set1_epi8(32));
    s16 = _mm256_cvtepi8_epi16(sc8);
    hm = load256(b);
    qs[0] = load256(b + 32);
    qs[1] = load256(b + 64);
  }
  // Element 128n + 32j + l: ((qs[32n + l] >> 2j) & 3) + 4 · (bit 4n + j of hmask[l]) - 4.
  void codes(int v, __m256i& q, __m256i& s) const {
    const int n = v / 4, j = v % 4;
    const __m256i lo = _mm256_and_si256(_mm256_srli_epi16(qs[n], 2 * j), _mm256_set1_epi8(3));
    const __m256i hb = _mm256_and_si256(_mm256_srli_epi16(hm, v), _mm256_set1_epi8(1));
    q = _mm256_or_si256(lo, _mm256_slli_epi16(hb, 2));
    s = scales16(s16, v);
  }
  __m256 offsets(__m256 acc, const float* xs) const {  // 4 · d · s_j · Σx_j
    return sub16_terms(acc, sc8, _mm256_set1_ps(4.0f * d), xs);
  }
};

// q4_K and q5_K: qs[32c + l] holds element 64c + l (low nibble) and 64c + 32 + l (high), so
// code vector v is nibble v % 2 of qs[32 (v / 2) ..]; q5_K's fifth bit of element 32v + l is bit
// v of qh[l].
template <bool kFive>
struct Q45K {
  static constexpr int64_t kBytes = kFive ? 176 : 144;
  static constexpr int64_t kQs = kFive ? 48 : 16;
  const uint8_t* blk;
  uint32_t sm[4];  // bytes 0-7: the 6-bit scales, 8-15: the mins
  __m256i s8x2, qh;
  float d;
  explicit Q45K(const uint8_t* b) : blk(b), d(half_to_float(b)) {
    // get_scale_min_k4 for all eight at once (as ggml's AVX2 kernels unpack them).
    constexpr uint32_t k1 = 0x3f3f3f3f, k2 = 0x0f0f0f0f, k3 = 0x03030303;
    const uint32_t u0 = load32(b + 4), u1 = load32(b + 8), u2 = load32(b + 12);
    sm[0] = u0 & k1;
    sm[1] = (u2 & k2) | (((u0 >> 6) & k3) << 4);
    sm[2] = u1 & k1;
    sm[3] = ((u2 >> 4) & k2) | (((u1 >> 6) & k3) << 4);
    s8x2 = _mm256_broadcastsi128_si256(
        _mm_cvtepu8_epi16(_mm_setr_epi32(static_cast<int>(sm[0]), static_cast<int>(sm[1]), 0, 0)));
    if constexpr (kFive) qh = load256(b + 16);
  }
  void codes(int v, __m256i& q, __m256i& s) const {
    const __m256i raw = load256(blk + kQs + 32 * (v / 2));
    q = _mm256_and_si256(v % 2 ? _mm256_srli_epi16(raw, 4) : raw, _mm256_set1_epi8(0x0F));
    if constexpr (kFive) {
      const __m256i hb = _mm256_and_si256(_mm256_srli_epi16(qh, v), _mm256_set1_epi8(1));
      q = _mm256_or_si256(q, _mm256_slli_epi16(hb, 4));
    }
    s = scales32(s8x2, v);
  }
  __m256 offsets(__m256 acc, const float* xs) const {  // dmin · m_j · Σx_j
    const __m256 mins = _mm256_mul_ps(bytes_u8(reinterpret_cast<const uint8_t*>(sm) + 8),
                                      _mm256_set1_ps(half_to_float(blk + 2)));
    return _mm256_fnmadd_ps(mins, _mm256_loadu_ps(xs), acc);
  }
};

// q6_K: element 128n + 32j + l is the nibble j / 2 of ql[64n + 32 (j % 2) + l] with bits 2j, 2j + 1
// of qh[32n + l] above it, minus 32; scale 8n + 2j + l / 16 (signed).
struct Q6K {
  static constexpr int64_t kBytes = 210;
  const uint8_t* blk;
  __m128i sc8;
  __m256i s16;
  float d;
  explicit Q6K(const uint8_t* b) : blk(b), d(half_to_float(b + 208)) {
    sc8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 192));
    s16 = _mm256_cvtepi8_epi16(sc8);
  }
  void codes(int v, __m256i& q, __m256i& s) const {
    const int n = v / 4, j = v % 4;
    const __m256i l = load256(blk + 64 * n + 32 * (j % 2));
    const __m256i h = load256(blk + 128 + 32 * n);
    const __m256i lo =
        _mm256_and_si256(j / 2 ? _mm256_srli_epi16(l, 4) : l, _mm256_set1_epi8(0x0F));
    const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(h, 2 * j), _mm256_set1_epi8(3));
    q = _mm256_or_si256(lo, _mm256_slli_epi16(hi, 4));
    s = scales16(s16, v);
  }
  __m256 offsets(__m256 acc, const float* xs) const {  // 32 · d · s_j · Σx_j
    return sub16_terms(acc, sc8, _mm256_set1_ps(32.0f * d), xs);
  }
};

// The avx2 level's K-quant pack (cpu/pack.hpp; pack.cpp kquant_block) keeps every byte of a
// block where GGUF does but the codes, which it lays out per half n of 128 in quad order. Each
// format's quad struct adds to the GGUF-order one quad(n, q), the half's four code vectors (q[j]
// byte i = code 4i + j of the half), and quad_scales(n), the scale of each int32 lane's sub-block
// (elements 16u .. 16u + 15 of the half) in both of its int16 lanes; kSix: codes up to 63, so two
// vectors' pairs a vpmaddwd (q6_K).

// Half n of 16 sub-block scales (bytes; q2_K's, q3_K's and q6_K's sub-blocks of 16) as int16, each
// twice: lanes 2u, 2u + 1 = scale 8n + u.
__m256i twice16(__m128i s8, int n) {
  return _mm256_cvtepi8_epi16(n == 0 ? _mm_unpacklo_epi8(s8, s8) : _mm_unpackhi_epi8(s8, s8));
}

struct Q2KQuad : Q2K {
  static constexpr bool kSix = false;
  using Q2K::Q2K;
  void quad(int n, __m256i (&q)[4]) const { quad_codes(blk + 16 + 32 * n, q); }
  __m256i quad_scales(int n) const {
    return twice16(
        _mm_and_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk)), _mm_set1_epi8(0x0F)),
        n);
  }
};

struct Q3KQuad : Q3K {
  static constexpr bool kSix = false;
  using Q3K::Q3K;
  void quad(int n, __m256i (&q)[4]) const { quad3_codes(blk + 48 * n, q); }
  __m256i quad_scales(int n) const { return twice16(sc8, n); }
};

template <bool kFive>
struct Q45KQuad : Q45K<kFive> {
  static constexpr bool kSix = false;
  using Q45K<kFive>::Q45K;
  void quad(int n, __m256i (&q)[4]) const {
    if constexpr (kFive)
      quad5_codes(this->blk + 16 + 80 * n, q);
    else
      quad4_codes(this->blk + 16 + 64 * n, q);
  }
  // Sub-blocks of 32: lanes 2u, 2u + 1 = scale 4n + u / 2 (the eight 6-bit scales in sm's first
  // eight bytes).
  __m256i quad_scales(int n) const {
    const __m128i s = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(this->sm));
    const __m128i two = _mm_unpacklo_epi8(s, s);
    return _mm256_cvtepu8_epi16(n == 0 ? _mm_unpacklo_epi16(two, two)
                                       : _mm_unpackhi_epi16(two, two));
  }
};

struct Q6KQuad : Q6K {
  static constexpr bool kSix = true;
  using Q6K::Q6K;
  void quad(int n, __m256i (&q)[4]) const { quad6_codes(blk + 96 * n, q); }
  __m256i quad_scales(int n) const { return twice16(sc8, n); }
};

// One block of one row of W against M rows of x: pb[m] its planes, pw[m] its 2^e, xs[m] its
// sub-block sums. Bounds: a code <= 63 (q6_K) times a digit <= 127, two a lane: |.| <= 16002 in
// int16; times a scale <= 128, two a lane, eight vectors: < 2^26 in int32.
template <class F, int M, int P>
void block(const uint8_t* blk, const uint8_t* const* pb, const float* pw, const float* const* xs,
           __m256 (&acc)[M]) {
  const F f(blk);
  __m256i a[M][P];
  for (int m = 0; m < M; ++m)
    for (int p = 0; p < P; ++p) a[m][p] = _mm256_setzero_si256();
  auto x_at = [&](int m, int p, int v) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pb[m] + p * kPlaneBytes + 32 * v));
  };
  if constexpr (requires { F::kSix; }) {
    // Quad order: plane p of half n at pb + kQuadHalf·n + 128p. Bounds: four vectors' pairs of
    // codes <= 31 (two of q6_K's <= 63): |.| <= 4·2·31·127 < 2^15 in int16; times a scale <= 128,
    // two a lane, four times: < 2^24 in int32.
#pragma GCC unroll 2
    for (int n = 0; n < 2; ++n) {
      __m256i q[4];
      f.quad(n, q);
      const __m256i s = f.quad_scales(n);
#pragma GCC unroll 2
      for (int m = 0; m < M; ++m)
#pragma GCC unroll 3
        for (int p = 0; p < P; ++p) {
          const uint8_t* xb = pb[m] + kQuadHalf * n + 128 * p;
          auto pair = [&](int j) {
            return _mm256_add_epi16(
                _mm256_maddubs_epi16(
                    q[j], _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb + 32 * j))),
                _mm256_maddubs_epi16(q[j + 1], _mm256_loadu_si256(reinterpret_cast<const __m256i*>(
                                                   xb + 32 * j + 32))));
          };
          if constexpr (F::kSix)
            a[m][p] = _mm256_add_epi32(a[m][p], _mm256_add_epi32(_mm256_madd_epi16(pair(0), s),
                                                                 _mm256_madd_epi16(pair(2), s)));
          else
            a[m][p] =
                _mm256_add_epi32(a[m][p], _mm256_madd_epi16(_mm256_add_epi16(pair(0), pair(2)), s));
        }
    }
  } else if constexpr (requires { F::kScaled; }) {
#pragma GCC unroll 4
    for (int v = 0; v < 8; v += 2) {
      const __m256i q0 = f.codes(v), q1 = f.codes(v + 1);
#pragma GCC unroll 2
      for (int m = 0; m < M; ++m)
#pragma GCC unroll 3
        for (int p = 0; p < P; ++p) {
          const __m256i pairs = _mm256_add_epi16(_mm256_maddubs_epi16(q0, x_at(m, p, v)),
                                                 _mm256_maddubs_epi16(q1, x_at(m, p, v + 1)));
          a[m][p] = _mm256_add_epi32(a[m][p], _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
        }
    }
  } else {
#pragma GCC unroll 8
    for (int v = 0; v < 8; ++v) {
      __m256i q, s;
      f.codes(v, q, s);
#pragma GCC unroll 2
      for (int m = 0; m < M; ++m)
#pragma GCC unroll 3
        for (int p = 0; p < P; ++p)
          a[m][p] = _mm256_add_epi32(a[m][p],
                                     _mm256_madd_epi16(_mm256_maddubs_epi16(q, x_at(m, p, v)), s));
    }
  }
  for (int m = 0; m < M; ++m) {
    __m256 sum = _mm256_cvtepi32_ps(a[m][0]);
    for (int p = 1; p < P; ++p)
      sum = _mm256_fmadd_ps(sum, _mm256_set1_ps(128.0f), _mm256_cvtepi32_ps(a[m][p]));
    acc[m] = _mm256_fmadd_ps(_mm256_set1_ps(f.d * pw[m] * kPlaneUnit<P>), sum, acc[m]);
    acc[m] = f.offsets(acc[m], xs[m]);
  }
}

// block on AVX-VNNI for the quad formats (where cpu::avx_vnni_active()): per half and row of x the
// planes' sums in one vpdpbusd chain (avx2_common.hpp quad_dot_vnni: an int32 lane is one sub-block
// of 16 or half of one of 32, exact), converted once and scaled by its sub-block's scale in f32.
template <class F, int M, int P>
void block_vnni(const uint8_t* blk, const uint8_t* const* pb, const float* pw,
                const float* const* xs, __m256 (&acc)[M]) {
  const F f(blk);
  __m256 sum[M];
  for (int m = 0; m < M; ++m) sum[m] = _mm256_setzero_ps();
#pragma GCC unroll 2
  for (int n = 0; n < 2; ++n) {
    __m256i q[4];
    f.quad(n, q);
    // Each lane's scale sits in both of its int16 halves: times (1, 0) is the scale.
    const __m256 s = _mm256_cvtepi32_ps(_mm256_madd_epi16(f.quad_scales(n), _mm256_set1_epi32(1)));
#pragma GCC unroll 2
    for (int m = 0; m < M; ++m)
      sum[m] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(quad_dot_vnni<P>(q, pb[m] + kQuadHalf * n)), s,
                               sum[m]);
  }
  for (int m = 0; m < M; ++m) {
    acc[m] = _mm256_fmadd_ps(_mm256_set1_ps(f.d * pw[m] * kPlaneUnit<P>), sum[m], acc[m]);
    acc[m] = f.offsets(acc[m], xs[m]);
  }
}

// A block into L2 or L1 (WeightPlan::prefetch_l2, a run-time flag: a predictable branch in place
// of a second instantiation of every kernel).
void prefetch_block(const uint8_t* p, int64_t bytes, bool l2) {
  for (int64_t o = 0; o < bytes; o += 64)
    if (l2)
      _mm_prefetch(reinterpret_cast<const char*>(p + o), _MM_HINT_T1);
    else
      _mm_prefetch(reinterpret_cast<const char*>(p + o), _MM_HINT_T0);
}

// R rows of W (rp[r]) over every block against M rows of x, the rows' next blocks prefetched
// (next[r]); y[m·ldy + r] = row r's dot product with row m of x.
template <class F, int R, int M, int P, bool kVnni>
void rows(const uint8_t* const* rp, const uint8_t* const* next, int64_t blocks, int64_t sub,
          bool l2, const vnni::MultiPlanes& mp, float* y, int64_t ldy) {
  __m256 acc[R][M];
  for (int r = 0; r < R; ++r)
    for (int m = 0; m < M; ++m) acc[r][m] = _mm256_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
    for (int r = 0; r < R; ++r) prefetch_block(next[r] + b * F::kBytes, F::kBytes, l2);
    const uint8_t* pb[M];
    const float* xs[M];
    float pw[M];
    for (int m = 0; m < M; ++m) {
      pb[m] = mp.planes[m] + b * kPlaneBlock;
      xs[m] = mp.xs[m] + b * sub;
      pw[m] = mp.pow2[m][b];
    }
    for (int r = 0; r < R; ++r) {
      if constexpr (kVnni)
        block_vnni<F, M, P>(rp[r] + b * F::kBytes, pb, pw, xs, acc[r]);
      else
        block<F, M, P>(rp[r] + b * F::kBytes, pb, pw, xs, acc[r]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int m = 0; m < M; ++m) y[m * ldy + r] = hsum(acc[r][m]);
}

// The block's planes at 2^e for the quad pack: half n's three at pb + kQuadHalf·n (quad_planes).
void block_quad_digits(const float* xb, uint8_t* pb, int e) {
  quad_planes(xb, pb, e);
  quad_planes(xb + 128, pb + kQuadHalf, e);
}

// The block's planes at 2^e: plane p's byte i is digit p of element i.
void block_digits(const float* xb, uint8_t* pb, int e) {
  for (int q = 0; q < 8; ++q) {
    __m256i c[3][4];
    digits32(xb + 32 * q, e, c);
    for (int p = 0; p < 3; ++p)
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(pb + p * kPlaneBytes + 32 * q),
                          pack_digits(c[p]));
  }
}

}  // namespace

bool prep(const float* x, int64_t k, bool quad, uint8_t* planes, float* pow2_out) {
  // (With the first digit only in [-64, 64], 2^-20 of the largest |x|, q6_K's outlier case of
  // PlaneExtremes missed the f32 bound: rel-L2 1.37e-5; plane_exponent keeps it in [-127, 127].)
  return split_blocks<kBlockElems, kPlaneBlock>(x, k / kBlockElems, planes, pow2_out,
                                                quad ? block_quad_digits : block_digits);
}

void gemv_multi(const WeightPlan& w, const vnni::MultiPlanes& mp, int64_t n0, int64_t n1, float* y,
                int64_t ldy) {
  const int64_t blocks = w.k / kBlockElems;
  const int64_t sub = w.scheme == Scheme::q4_K || w.scheme == Scheme::q5_K ? 8 : 16;
  const bool l2 = w.prefetch_l2;
  auto run = [&]<class F, int M, int P, bool kVnni = false>() {
    // Passes of R rows of W (4 for one row of x, 2 for two: registers), then the rest one at a
    // time.
    constexpr int R = M == 1 ? kRows : kRows / 2;
    int64_t n = n0;
    for (; n + R <= n1; n += R) {
      const uint8_t* rp[R];
      const uint8_t* next[R];
      for (int r = 0; r < R; ++r) {
        rp[r] = row_at(w, n + r);
        next[r] = row_at(w, n + R + r < w.n ? n + R + r : w.n - 1);
      }
      rows<F, R, M, P, kVnni>(rp, next, blocks, sub, l2, mp, y + n, ldy);
    }
    for (; n < n1; ++n) {
      const uint8_t* rp = row_at(w, n);
      rows<F, 1, M, P, kVnni>(&rp, &rp, blocks, sub, l2, mp, y + n, ldy);
    }
  };
  auto quad = [&]<int M, int P, bool kVnni>() {
    switch (w.scheme) {
      case Scheme::q2_K:
        return run.template operator()<Q2KQuad, M, P, kVnni>();
      case Scheme::q3_K:
        return run.template operator()<Q3KQuad, M, P, kVnni>();
      case Scheme::q4_K:
        return run.template operator()<Q45KQuad<false>, M, P, kVnni>();
      case Scheme::q5_K:
        return run.template operator()<Q45KQuad<true>, M, P, kVnni>();
      default:
        return run.template operator()<Q6KQuad, M, P, kVnni>();
    }
  };
  auto with_format = [&]<int M, int P>() {
    if (w.kquant_quad != nullptr) {
      if (w.avx_vnni) return quad.template operator()<M, P, true>();
      return quad.template operator()<M, P, false>();
    }
    switch (w.scheme) {
      case Scheme::q2_K:
        return run.template operator()<Q2K, M, P>();
      case Scheme::q3_K:
        return run.template operator()<Q3K, M, P>();
      case Scheme::q4_K:
        return run.template operator()<Q45K<false>, M, P>();
      case Scheme::q5_K:
        return run.template operator()<Q45K<true>, M, P>();
      default:
        return run.template operator()<Q6K, M, P>();
    }
  };
  auto with_m = [&]<int P>() {
    if (mp.m == 1)
      with_format.template operator()<1, P>();
    else
      with_format.template operator()<2, P>();
  };
  if (w.x_bf16)
    with_m.template operator()<2>();
  else
    with_m.template operator()<3>();
}

}  // namespace quanta::cpu::avx2_kquant
