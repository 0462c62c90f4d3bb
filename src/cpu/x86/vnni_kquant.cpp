// The K-quant GEMV on AVX512-VNNI dot products (see vnni_kquant.hpp). Built with the avx512
// flags plus VNNI and VBMI (src/CMakeLists.txt).
#include "cpu/x86/vnni_kquant.hpp"

#include <cmath>
#include <cstring>
#include <utility>

#include "cpu/engine/kquant_scales.hpp"
#include "cpu/x86/vnni_common.hpp"
#include "quanta/numeric.hpp"

namespace quanta::cpu::vnni {

namespace {

constexpr int64_t kBlockElems = 256;
constexpr int64_t kQ2Bytes = 84, kQ3Bytes = 110, kQ4Bytes = 144, kQ5Bytes = 176, kQ6Bytes = 210;
constexpr int64_t kPlaneBlock = 1024;  // bytes of planes per block (both layouts)
constexpr int kInt8Planes = 3;         // x's int8 planes, q2_K-q5_K (256 bytes each)
// The kernels take P of them (with_planes: 2 for bf16 x). q6_K's two int16 planes (15 bits
// each) come down to the first alone for bf16 x: 15 bits below the block's largest |x|.
constexpr int kRows = 4;  // rows per pass: each block's planes are read from L1 four times

// Byte p of code vector j (p = 32h + l: element 128h + 32j + l of the block in q2_K and q6_K)
// belongs to sub-block 8h + 2j + (l >= 16).
struct Ctl {
  alignas(64) uint8_t sub[4][64] = {};
  alignas(64) uint8_t sub4[4][64] = {};  // 4 · sub: bits 2-5 of q2_K's index into q · s_k
  alignas(64) uint16_t even[32] = {};    // words 0, 2, .. 62 of two 32-word runs (vpermt2w)
  alignas(64) uint16_t odd[32] = {};
  constexpr Ctl() {
    for (int j = 0; j < 4; ++j)
      for (int p = 0; p < 64; ++p)
        sub[j][p] = static_cast<uint8_t>(8 * (p / 32) + 2 * j + (p % 32 >= 16));
    for (int j = 0; j < 4; ++j)
      for (int p = 0; p < 64; ++p) sub4[j][p] = static_cast<uint8_t>(4 * sub[j][p]);
    for (int i = 0; i < 32; ++i) {
      even[i] = static_cast<uint16_t>(2 * i);
      odd[i] = static_cast<uint16_t>(2 * i + 1);
    }
  }
};
alignas(64) constexpr Ctl kCtl{};

float half_to_float(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

// The next row's block, into L1 or L2 (WeightPlan::prefetch_l2).
void prefetch_block(const uint8_t* p, int64_t bytes, bool l2) {
  for (int64_t o = 0; o < bytes; o += 64)
    if (l2)
      _mm_prefetch(reinterpret_cast<const char*>(p + o), _MM_HINT_T1);
    else
      _mm_prefetch(reinterpret_cast<const char*>(p + o), _MM_HINT_T0);
}

// R rows of W (rp[r], blocks of BYTES) over every block, M rows of x (xr): block(blk, pb, b,
// acc[r]) adds the block to the M accumulators of row r (pb[m]: the block's planes of row m of
// x), the rows' next blocks prefetched (next[r]); y[m·ldy + r] = the lane sum of acc[r][m].
template <int R, int64_t BYTES, int M, class Block>
void block_rows(const uint8_t* const* rp, const uint8_t* const* next, int64_t blocks, bool l2,
                const MultiPlanes& xr, float* y, int64_t ldy, Block&& block) {
  __m512 acc[R][M];
  for (int r = 0; r < R; ++r)
    for (int m = 0; m < M; ++m) acc[r][m] = _mm512_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
    for (int r = 0; r < R; ++r) prefetch_block(next[r] + b * BYTES, BYTES, l2);
    const uint8_t* pb[M];
    for (int m = 0; m < M; ++m) pb[m] = xr.planes[m] + b * kPlaneBlock;
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) block(rp[r] + b * BYTES, pb, b, acc[r]);
  }
  for (int r = 0; r < R; ++r)
    for (int m = 0; m < M; ++m) y[m * ldy + r] = _mm512_reduce_add_ps(acc[r][m]);
}

// a0[m], a1[m] (planes 0, 1 of row m of x) += the unsigned codes q times the signed scale of
// each byte's sub-block (byte i of s8 for sub-block i, `sub` the sub-block of every byte),
// against code vector j's int16 planes (pb[m]: the block's planes of row m; vpmaddubsw pairs
// bytes, so the even and the odd ones go apart). The products are made once for every row.
// With kOne (bf16 x) only plane 0.
template <int M, bool kOne>
inline void dot16(__m512i q, const uint8_t* sub, __m512i s8, const uint8_t* const* pb, int j,
                  __m512i (&a0)[M], __m512i (&a1)[M]) {
  constexpr __mmask64 kEvenBytes = 0x5555555555555555ull;
  const __m512i idx = _mm512_load_si512(sub);
  const __m512i pe = _mm512_maddubs_epi16(q, _mm512_maskz_permutexvar_epi8(kEvenBytes, idx, s8));
  const __m512i po = _mm512_maddubs_epi16(q, _mm512_maskz_permutexvar_epi8(~kEvenBytes, idx, s8));
  for (int m = 0; m < M; ++m) {
    const uint8_t* pj = pb[m] + j * 128;
    a0[m] = _mm512_dpwssd_epi32(a0[m], pe, _mm512_load_si512(pj));
    a0[m] = _mm512_dpwssd_epi32(a0[m], po, _mm512_load_si512(pj + 64));
    if constexpr (kOne) continue;
    a1[m] = _mm512_dpwssd_epi32(a1[m], pe, _mm512_load_si512(pj + 512));
    a1[m] = _mm512_dpwssd_epi32(a1[m], po, _mm512_load_si512(pj + 512 + 64));
  }
}

// The two int16-plane sums of a block as one f32 vector (x = 2^e (c0 2^15 + c1)).
inline __m512 planes16(__m512i a0, __m512i a1) {
  return _mm512_fmadd_ps(_mm512_cvtepi32_ps(a0), _mm512_set1_ps(32768.0f), _mm512_cvtepi32_ps(a1));
}

// The P int8 planes' sums of a lane as one int32: p0·2^14 + p1·2^7 + p2, or p0·2^7 + p1 (exact
// while the caller's bound keeps it below 2^31).
template <int P>
inline __m512i combine_planes(const __m512i (&a)[P]) {
  const __m512i hi = _mm512_add_epi32(_mm512_slli_epi32(a[0], 7), a[1]);
  if constexpr (P == 2)
    return hi;
  else
    return _mm512_add_epi32(_mm512_slli_epi32(hi, 7), a[2]);
}

// q2_K, R rows at a time: the three int8 planes against q · s bytes (vpdpbusd). Per block, byte
// 4k + q of `prod` is q · s_k (sub-block k's 4-bit scale; 3 · 15 fits a byte, so one dword
// multiply by 0x03020100 makes all four); a code byte then indexes it as 4 · sub-block + code,
// the sub-block part a constant per code vector (each 128-bit lane is one sub-block).
template <int R, int M, int P>
void q2k_rows(const uint8_t* const* rp, const uint8_t* const* next, int64_t blocks, bool l2,
              const MultiPlanes& xr, float* y, int64_t ldy) {
  const __m512i mask3 = _mm512_set1_epi8(3);
  block_rows<R, kQ2Bytes, M>(
      rp, next, blocks, l2, xr, y, ldy,
      [&](const uint8_t* blk, const uint8_t* const* pb, int64_t b, __m512(&acc)[M]) {
        const __m512i sc32 =
            _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk)));
        const __m512i prod = _mm512_mullo_epi32(_mm512_and_si512(sc32, _mm512_set1_epi32(0xF)),
                                                _mm512_set1_epi32(0x03020100));
        const __m512i qs = _mm512_loadu_si512(blk + 16);
        __m512i a[M][P];
        for (int m = 0; m < M; ++m)
          for (int p = 0; p < P; ++p) a[m][p] = _mm512_setzero_si512();
#pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) {
          const __m512i codes = j == 0 ? qs : _mm512_srl_epi16(qs, _mm_cvtsi32_si128(2 * j));
          const __m512i idx =
              _mm512_ternarylogic_epi32(mask3, codes, _mm512_load_si512(kCtl.sub4[j]), 0xCA);
          const __m512i q = _mm512_permutexvar_epi8(idx, prod);  // q · s, unsigned
          for (int m = 0; m < M; ++m)
            for (int p = 0; p < P; ++p)
              a[m][p] =
                  _mm512_dpbusd_epi32(a[m][p], q, _mm512_load_si512(pb[m] + p * 256 + j * 64));
        }
        const float d = half_to_float(blk + 80);
        // min term: dmin · Σ_j m_j · xs_j (m_j the high nibble of scale byte j)
        const __m512 mins = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_srli_epi32(sc32, 4)),
                                          _mm512_set1_ps(half_to_float(blk + 82)));
        for (int m = 0; m < M; ++m) {
          __m512 v = _mm512_cvtepi32_ps(a[m][0]);
          for (int p = 1; p < P; ++p)
            v = _mm512_fmadd_ps(v, _mm512_set1_ps(128.0f), _mm512_cvtepi32_ps(a[m][p]));
          acc[m] = _mm512_fmadd_ps(_mm512_set1_ps(d * xr.pow2[m][b] * kPlaneUnit<P>), v, acc[m]);
          acc[m] = _mm512_fnmadd_ps(mins, _mm512_loadu_ps(xr.xs[m] + b * 16), acc[m]);
        }
      });
}

// Where the code vectors' bytes come from in the orders that keep one sub-block per int32 lane
// (q3_K, q4_K, q5_K): multishift offsets of the codes and of their high bits, for code vectors
// t even and odd, and the sub-block of each lane.
struct LaneOrder {
  alignas(64) uint8_t code[2][64] = {};
  alignas(64) uint8_t high[2][64] = {};
  alignas(64) int32_t lane_sub[16] = {};
};

// q3_K's code order: vector t (0..3), int32 lane L = 8h + 4b + j holds the four codes of
// elements 128h + 32j + 16b + 4t + (0..3), all of sub-block 8h + 2j + b, so a lane keeps its
// sub-block over the whole block. Each qword q = 4h + 2b + j/2 of vector t comes from qs qword
// 4h + 2b + t/2 (and hmask qword 2b + t/2): an in-lane qword duplicate puts it in place, one
// multishift cuts the 8 codes out (and the 8 high bits, into bit 2).
constexpr LaneOrder q3_order() {
  LaneOrder o;
  for (int t = 0; t < 2; ++t)
    for (int p = 0; p < 64; ++p) {
      const int q = p / 8, i = p % 8, h = q / 4, j = 2 * (q % 2) + i / 4;
      const int bit = 8 * (4 * t + i % 4);  // the byte of element l % 8 = 4t + i % 4
      o.code[t][p] = static_cast<uint8_t>(bit + 2 * j);
      o.high[t][p] = static_cast<uint8_t>((bit + 4 * h + j - 2) & 63);  // rotates: bit 2
    }
  for (int l = 0; l < 16; ++l) o.lane_sub[l] = 8 * (l / 8) + 2 * (l % 4) + (l % 8) / 4;
  return o;
}
alignas(64) constexpr LaneOrder kQ3Order = q3_order();

// q3_K on its own three int8 planes (kQ3Order): q' = code | hbit << 2 (0..7) against each plane
// (vpdpbusd), every plane summed over the block in its own int32 lanes (|.| <= 16·7·64 per
// plane), combined once per block (< 2^27), then each lane by its sub-block's signed 6-bit
// scale in f32; the -4 of every code is the f32 term -4 · d · Σ_j s_j · xs_j. In q2_K's order
// (four sub-blocks per code vector, so planes combined and lanes scaled per vector) it ran
// 1.15-1.28x slower from DRAM on Zen 4 (docs/perf-cpu.md).
template <int R, int M, int P>
void q3k_rows(const uint8_t* const* rp, const uint8_t* const* next, int64_t blocks, bool l2,
              const MultiPlanes& xr, float* y, int64_t ldy) {
  const __m512i mask3 = _mm512_set1_epi8(3), four = _mm512_set1_epi8(4);
  block_rows<R, kQ3Bytes, M>(
      rp, next, blocks, l2, xr, y, ldy,
      [&](const uint8_t* blk, const uint8_t* const* pb, int64_t b, __m512(&acc)[M]) {
        const __m512i raw = _mm512_shuffle_epi8(
            _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 96))),
            _mm512_load_si512(kquant::kQ3Ctl.ctl));
        const __m512i lo = _mm512_and_si512(
            _mm512_srlv_epi32(raw, _mm512_load_si512(kquant::kQ3Ctl.lo)), _mm512_set1_epi32(0xF));
        const __m512i hi = _mm512_and_si512(
            _mm512_srlv_epi32(raw, _mm512_load_si512(kquant::kQ3Ctl.hi)), _mm512_set1_epi32(0x30));
        const __m512i s32 = _mm512_sub_epi32(_mm512_or_si512(lo, hi), _mm512_set1_epi32(32));
        const float d = half_to_float(blk + 108);
        const __m512 sf = _mm512_cvtepi32_ps(s32);  // sub-block k in lane k
        const __m512 sl = _mm512_permutexvar_ps(_mm512_load_si512(kQ3Order.lane_sub), sf);
        const __m512i qs = _mm512_loadu_si512(blk + 32);
        const __m512i hm =
            _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk)));
        const __m512i src[2] = {_mm512_unpacklo_epi64(qs, qs), _mm512_unpackhi_epi64(qs, qs)};
        const __m512i hsrc[2] = {_mm512_unpacklo_epi64(hm, hm), _mm512_unpackhi_epi64(hm, hm)};
        __m512i a[M][P];
        for (int m = 0; m < M; ++m)
          for (int p = 0; p < P; ++p) a[m][p] = _mm512_setzero_si512();
#pragma GCC unroll 4
        for (int t = 0; t < 4; ++t) {
          const __m512i c = _mm512_and_si512(
              _mm512_multishift_epi64_epi8(_mm512_load_si512(kQ3Order.code[t % 2]), src[t / 2]),
              mask3);
          const __m512i h =
              _mm512_multishift_epi64_epi8(_mm512_load_si512(kQ3Order.high[t % 2]), hsrc[t / 2]);
          const __m512i q = _mm512_ternarylogic_epi32(c, h, four, 0xF8);  // c | (h & 4)
          for (int m = 0; m < M; ++m)
            for (int p = 0; p < P; ++p)
              a[m][p] =
                  _mm512_dpbusd_epi32(a[m][p], q, _mm512_load_si512(pb[m] + p * 256 + t * 64));
        }
        const __m512 s4 = _mm512_mul_ps(sf, _mm512_set1_ps(4.0f * d));
        for (int m = 0; m < M; ++m) {
          const __m512i v = combine_planes(a[m]);
          acc[m] =
              _mm512_fmadd_ps(_mm512_mul_ps(sl, _mm512_set1_ps(d * xr.pow2[m][b] * kPlaneUnit<P>)),
                              _mm512_cvtepi32_ps(v), acc[m]);
          acc[m] = _mm512_fnmadd_ps(s4, _mm512_loadu_ps(xr.xs[m] + b * 16), acc[m]);
        }
      });
}

// q4_K / q5_K's code order: int32 lanes 2q and 2q + 1 of code vector t (h = t / 2) hold the low
// and the high nibbles of qs bytes 32c + l, l = 8(2r + h) + 4(t % 2) + (0..3), with
// c = 2(q % 2) + q / 4 and r = (q / 2) % 2 (q = 4(c % 2) + 2r + c / 2): elements 64c + l of
// sub-block 2c and 64c + 32 + l of sub-block 2c + 1, so lane L keeps its sub-block over the
// whole block. The in-lane qword interleave of qs's two halves (`vpunpck[lh]qdq`, once per pair
// of vectors) puts each qs qword in place, one multishift cuts the 8 nibbles out; q5_K's fifth
// bits come the same way from qh (byte l, bit 2c or 2c + 1), rotated into bit 4.
constexpr int q45_chunk(int q) {
  return 2 * (q % 2) + q / 4;
}
constexpr int q45_pos(int c, int r) {
  return 4 * (c % 2) + 2 * r + c / 2;
}
constexpr LaneOrder q45_order() {
  LaneOrder o;
  for (int u = 0; u < 2; ++u)
    for (int p = 0; p < 64; ++p) {
      const int q = p / 8, i = p % 8, c = q45_chunk(q), hi = i / 4, bit = 8 * (4 * u + i % 4);
      o.code[u][p] = static_cast<uint8_t>(bit + 4 * hi);
      o.high[u][p] = static_cast<uint8_t>((bit + 2 * c + hi - 4) & 63);  // rotates: bit 4
    }
  for (int l = 0; l < 16; ++l) o.lane_sub[l] = 2 * q45_chunk(l / 2) + l % 2;
  return o;
}
alignas(64) constexpr LaneOrder kQ45Order = q45_order();

// q4_K (kFive false) and q5_K on their own three int8 planes (kQ45Order): the bare 4-bit code
// (plus q5_K's fifth bit from qh) against each plane (vpdpbusd), every plane summed over the
// block in its own int32 lanes, combined once per block (|.| <= 16·31·64·(2^14 + 2^7 + 1) <
// 2^30), each lane by its 32-element sub-block's 6-bit scale in f32; the min term dmin · m_j ·
// Σx in f32. In the order with two sub-blocks per code vector (planes combined and lanes scaled
// per vector) it ran 1.10-1.25x slower on one core from L3 and 1.14-1.38x from DRAM on Zen 4;
// placing the qs qwords by a two-source qword permute instead of the interleave, 0.85x
// (docs/perf-cpu.md).
template <bool kFive, int R, int M, int P>
void q45k_rows(const uint8_t* const* rp, const uint8_t* const* next, int64_t blocks, bool l2,
               const MultiPlanes& xr, float* y, int64_t ldy) {
  constexpr int64_t kBytes = kFive ? kQ5Bytes : kQ4Bytes, kQs = kFive ? 48 : 16;
  const __m512i mask4 = _mm512_set1_epi8(0x0F), bit4 = _mm512_set1_epi8(0x10);
  block_rows<R, kBytes, M>(
      rp, next, blocks, l2, xr, y, ldy,
      [&](const uint8_t* blk, const uint8_t* const* pb, int64_t b, __m512(&acc)[M]) {
        // Lanes 0-7: the 6-bit scales, lanes 8-15 the mins (get_scale_min_k4), then as bytes.
        const __m512i raw = _mm512_shuffle_epi8(
            _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 4))),
            _mm512_load_si512(kquant::kQK45Ctl.ctl));
        const __m512i sm = _mm512_or_si512(
            _mm512_and_si512(_mm512_srlv_epi32(raw, _mm512_load_si512(kquant::kQK45Ctl.sh)),
                             _mm512_load_si512(kquant::kQK45Ctl.mask)),
            _mm512_and_si512(_mm512_srli_epi32(raw, 10), _mm512_set1_epi32(0x30)));
        const float d = half_to_float(blk);
        const __m512 sf = _mm512_cvtepi32_ps(sm);
        const __m512 sl = _mm512_permutexvar_ps(_mm512_load_si512(kQ45Order.lane_sub), sf);
        const __m512i q0 = _mm512_loadu_si512(blk + kQs), q1 = _mm512_loadu_si512(blk + kQs + 64);
        const __m512i src[2] = {_mm512_unpacklo_epi64(q0, q1), _mm512_unpackhi_epi64(q0, q1)};
        __m512i hsrc[2] = {};
        if constexpr (kFive) {
          const __m512i qh = _mm512_broadcast_i64x4(
              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 16)));
          hsrc[0] = _mm512_unpacklo_epi64(qh, qh);
          hsrc[1] = _mm512_unpackhi_epi64(qh, qh);
        }
        __m512i a[M][P];
        for (int m = 0; m < M; ++m)
          for (int p = 0; p < P; ++p) a[m][p] = _mm512_setzero_si512();
#pragma GCC unroll 4
        for (int t = 0; t < 4; ++t) {
          __m512i q = _mm512_and_si512(
              _mm512_multishift_epi64_epi8(_mm512_load_si512(kQ45Order.code[t % 2]), src[t / 2]),
              mask4);
          if constexpr (kFive) {
            const __m512i h =
                _mm512_multishift_epi64_epi8(_mm512_load_si512(kQ45Order.high[t % 2]), hsrc[t / 2]);
            q = _mm512_ternarylogic_epi32(q, h, bit4, 0xF8);  // q | (h & 16)
          }
          for (int m = 0; m < M; ++m)
            for (int p = 0; p < P; ++p)
              a[m][p] =
                  _mm512_dpbusd_epi32(a[m][p], q, _mm512_load_si512(pb[m] + p * 256 + t * 64));
        }
        // min term: dmin · Σ_j m_j · xs_j (the mins in lanes 8-15, xs of the 8 sub-blocks there)
        const __m512 mins = _mm512_mul_ps(sf, _mm512_set1_ps(half_to_float(blk + 2)));
        for (int m = 0; m < M; ++m) {
          const __m512i v = combine_planes(a[m]);
          acc[m] =
              _mm512_fmadd_ps(_mm512_mul_ps(sl, _mm512_set1_ps(d * xr.pow2[m][b] * kPlaneUnit<P>)),
                              _mm512_cvtepi32_ps(v), acc[m]);
          acc[m] =
              _mm512_fnmadd_ps(mins, _mm512_maskz_loadu_ps(0xff00, xr.xs[m] + b * 8 - 8), acc[m]);
        }
      });
}

// q6_K: the 6-bit code (low nibble from ql, two high bits from qh) by the signed 8-bit scale,
// whose products (|q·s| <= 63·128) keep the 16 per lane and block within int32; the -32 of
// every code is the f32 term -32 · d · Σ_j s_j · xs_j.
template <int R, int M, int P>
void q6k_rows(const uint8_t* const* rp, const uint8_t* const* next, int64_t blocks, bool l2,
              const MultiPlanes& xr, float* y, int64_t ldy) {
  const __m512i mask4 = _mm512_set1_epi8(0x0F), mask6 = _mm512_set1_epi8(0x3F);
  block_rows<R, kQ6Bytes, M>(
      rp, next, blocks, l2, xr, y, ldy,
      [&](const uint8_t* blk, const uint8_t* const* pb, int64_t b, __m512(&acc)[M]) {
        // Byte 32h + l of code j: ql[64h + l] (j = 0, 2) or ql[64h + 32 + l] (j = 1, 3), low
        // nibble for j < 2; qh[32h + l] bits 2j, 2j + 1.
        const __m512i z0 = _mm512_loadu_si512(blk), z1 = _mm512_loadu_si512(blk + 64);
        const __m512i lo02 = _mm512_shuffle_i64x2(z0, z1, 0x44);
        const __m512i lo13 = _mm512_shuffle_i64x2(z0, z1, 0xEE);
        const __m512i hb = _mm512_loadu_si512(blk + 128);
        const __m128i sc = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 192));
        __m512i a0[M], a1[M];
        for (int m = 0; m < M; ++m) a0[m] = a1[m] = _mm512_setzero_si512();
#pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) {
          const __m512i lo = j == 0   ? lo02
                             : j == 1 ? lo13
                             : j == 2 ? _mm512_srli_epi16(lo02, 4)
                                      : _mm512_srli_epi16(lo13, 4);
          // qh bits 2j, 2j + 1 to bits 4-5
          const __m512i h = j == 0   ? _mm512_slli_epi16(hb, 4)
                            : j == 1 ? _mm512_slli_epi16(hb, 2)
                            : j == 2 ? hb
                                     : _mm512_srli_epi16(hb, 2);
          const __m512i q = _mm512_and_si512(_mm512_ternarylogic_epi32(mask4, lo, h, 0xCA), mask6);
          dot16<M, P == 2>(q, kCtl.sub[j], _mm512_castsi128_si512(sc), pb, j, a0, a1);
        }
        const float d = half_to_float(blk + 208);
        const __m512 s32 =
            _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(sc)), _mm512_set1_ps(32.0f * d));
        for (int m = 0; m < M; ++m) {
          const __m512 v = P == 2 ? _mm512_cvtepi32_ps(a0[m]) : planes16(a0[m], a1[m]);
          acc[m] = _mm512_fmadd_ps(_mm512_set1_ps(d * xr.pow2[m][b] * (P == 2 ? 32768.0f : 1.0f)),
                                   v, acc[m]);
          acc[m] = _mm512_fnmadd_ps(s32, _mm512_loadu_ps(xr.xs[m] + b * 16), acc[m]);
        }
      });
}

// Splits x block by block: pow2[b] = 2^e, e = ilogb(largest |x| of the block) - shift, and
// digits(xb, pb, e) writes the block's planes; a block of zeros gets zero planes.
template <class Digits>
bool split_blocks(const float* x, int64_t k, uint8_t* planes, float* pow2, int shift,
                  Digits&& digits) {
  const int64_t blocks = k / kBlockElems;
  // Nothing is written until every block is usable (the caller then keeps xp as f32).
  if (!block_max<kBlockElems>(x, blocks, pow2)) return false;
  for (int64_t b = 0; b < blocks; ++b) {
    uint8_t* pb = planes + b * kPlaneBlock;
    if (pow2[b] == 0.0f) {
      std::memset(pb, 0, kPlaneBlock);
      continue;
    }
    const int e = std::ilogb(pow2[b]) - shift;
    pow2[b] = pow2f(e);
    digits(x + b * kBlockElems, pb, e);
  }
  return true;
}

// q2_K: three int8 planes. big / 2^(e + 14) < 64, so every digit lies in [-64, 64]; each step is
// an exact f32 operation (products by powers of two, remainders smaller than the value they come
// from); the last digit's rounding leaves at most 2^-20 of the block's largest |x|. Four planes
// (2^-27) ran 1.10-1.4x slower on one core from L3 (docs/perf-cpu.md).
template <class Place>
bool int8_prep(const float* x, int64_t k, uint8_t* planes, float* pow2, Place place) {
  return split_blocks(x, k, planes, pow2, 19, [&](const float* xb, uint8_t* pb, int e) {
    const float up[3] = {pow2f(-(e + 14)), pow2f(-(e + 7)), pow2f(-e)};
    const float down[2] = {pow2f(e + 14), pow2f(e + 7)};
    for (int v = 0; v < 16; ++v) {
      // Elements 16v .. 16v + 15: their four runs of 4 at off, off + stride, off + 2·stride, ..
      // of each plane (stride 4: 16 bytes in a row).
      const auto [off, stride] = place(v);
      __m512 r = _mm512_loadu_ps(xb + 16 * v);
      for (int p = 0; p < kInt8Planes; ++p) {
        const __m512 c = round_even(_mm512_mul_ps(r, _mm512_set1_ps(up[p])));
        if (p + 1 < kInt8Planes) r = _mm512_fnmadd_ps(c, _mm512_set1_ps(down[p]), r);
        const __m128i bytes = _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(c));
        uint8_t* out = pb + p * 256 + off;
        if (stride == 4) {
          _mm_storeu_si128(reinterpret_cast<__m128i*>(out), bytes);
        } else {
          alignas(16) uint32_t run[4];
          _mm_store_si128(reinterpret_cast<__m128i*>(run), bytes);
          for (int i = 0; i < 4; ++i) std::memcpy(out + i * stride, &run[i], 4);
        }
      }
    }
  });
}

// q2_K order: byte 32h + l of code vector j is element 128h + 32j + l.
bool q2k_prep(const float* x, int64_t k, uint8_t* planes, float* pow2) {
  return int8_prep(x, k, planes, pow2, [](int v) {
    return std::pair<int, int>{64 * ((v % 8) / 2) + 32 * (v / 8) + 16 * (v % 2), 4};
  });
}

// q3_K order (kQ3Order): elements 16v + 4t .. + 3 (v = 8h + 2j + b) are bytes 8q + 4 (j % 2) ..
// + 3 of code vector t, q = 4h + 2b + j / 2.
bool q3k_prep(const float* x, int64_t k, uint8_t* planes, float* pow2) {
  return int8_prep(x, k, planes, pow2, [](int v) {
    const int h = v / 8, j = (v % 8) / 2, b = v % 2;
    return std::pair<int, int>{8 * (4 * h + 2 * b + j / 2) + 4 * (j % 2), 64};
  });
}

// q4_K / q5_K order (kQ45Order): elements 16v + 4t .. + 3 (v = 4c + 2·hi + r: 64c + 32·hi +
// 16r + 4t) are bytes 8·q45_pos(c, r) + 4·hi .. + 3 of code vector t.
bool q45k_prep(const float* x, int64_t k, uint8_t* planes, float* pow2) {
  return int8_prep(x, k, planes, pow2, [](int v) {
    return std::pair<int, int>{8 * q45_pos(v / 4, v % 2) + 4 * ((v % 4) / 2), 64};
  });
}

// The int16 planes: big / 2^(e + 15) < 2^14, both digits in [-2^14, 2^14], exact steps as
// above; code vector j's bytes 32h .. 32h + 31 are the 32 elements from 128h + 32j (q6_K).
bool int16_prep(const float* x, int64_t k, uint8_t* planes, float* pow2) {
  return split_blocks(x, k, planes, pow2, 28, [&](const float* xb, uint8_t* pb, int e) {
    alignas(64) int16_t digit[2][kBlockElems];
    const __m512 up0 = _mm512_set1_ps(pow2f(-(e + 15)));
    const __m512 down0 = _mm512_set1_ps(pow2f(e + 15));
    const __m512 up1 = _mm512_set1_ps(pow2f(-e));
    for (int v = 0; v < 16; ++v) {
      const __m512 xv = _mm512_loadu_ps(xb + 16 * v);
      const __m512 c0 = round_even(_mm512_mul_ps(xv, up0));
      const __m512 c1 = round_even(_mm512_mul_ps(_mm512_fnmadd_ps(c0, down0, xv), up1));
      _mm256_store_si256(reinterpret_cast<__m256i*>(digit[0] + 16 * v),
                         _mm512_cvtepi32_epi16(_mm512_cvtps_epi32(c0)));
      _mm256_store_si256(reinterpret_cast<__m256i*>(digit[1] + 16 * v),
                         _mm512_cvtepi32_epi16(_mm512_cvtps_epi32(c1)));
    }
    // Plane p, code j: the even byte positions (words 0, 2, ..) then the odd ones, as
    // vpmaddubsw pairs them.
    for (int p = 0; p < 2; ++p)
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
        const __m512i h0 = _mm512_load_si512(digit[p] + 32 * j);
        const __m512i h1 = _mm512_load_si512(digit[p] + 128 + 32 * j);
        uint8_t* out = pb + p * 512 + j * 128;
        _mm512_store_si512(out, _mm512_permutex2var_epi16(h0, _mm512_load_si512(kCtl.even), h1));
        _mm512_store_si512(out + 64,
                           _mm512_permutex2var_epi16(h0, _mm512_load_si512(kCtl.odd), h1));
      }
  });
}

}  // namespace

bool prep(Scheme scheme, const float* x, int64_t k, uint8_t* planes, float* pow2) {
  switch (scheme) {
    case Scheme::q2_K:
      return q2k_prep(x, k, planes, pow2);
    case Scheme::q3_K:
      return q3k_prep(x, k, planes, pow2);
    case Scheme::q4_K:
    case Scheme::q5_K:
      return q45k_prep(x, k, planes, pow2);
    default:  // q6_K: byte 32h + l of code j is element 128h + 32j + l
      return int16_prep(x, k, planes, pow2);
  }
}

void gemv_multi(const WeightPlan& w, const MultiPlanes& xr, int64_t n0, int64_t n1, float* y,
                int64_t ldy) {
  const int64_t blocks = w.k / kBlockElems;
  // Passes of R rows of W (4 for one row of x, 2 for two: registers), then the rest one at a
  // time.
  auto by_rows = [&]<int M>(auto rows_of) {
    constexpr int R = M == 1 ? kRows : kRows / 2;
    int64_t n = n0;
    for (; n + R <= n1; n += R) {
      const uint8_t* rp[R];
      const uint8_t* next[R];
      for (int r = 0; r < R; ++r) {
        rp[r] = row_at(w, n + r);
        next[r] = row_at(w, n + R + r < w.n ? n + R + r : w.n - 1);
      }
      rows_of.template operator()<R, M>(rp, next, y + n);
    }
    for (; n < n1; ++n) {
      const uint8_t* rp = row_at(w, n);
      rows_of.template operator()<1, M>(&rp, &rp, y + n);
    }
  };
  auto by_scheme = [&]<int M, int P>() {
    switch (w.scheme) {
      case Scheme::q2_K:
        return by_rows.template operator()<M>(
            [&]<int R, int MM>(const uint8_t* const* rp, const uint8_t* const* nx, float* out) {
              q2k_rows<R, MM, P>(rp, nx, blocks, w.prefetch_l2, xr, out, ldy);
            });
      case Scheme::q3_K:
        return by_rows.template operator()<M>(
            [&]<int R, int MM>(const uint8_t* const* rp, const uint8_t* const* nx, float* out) {
              q3k_rows<R, MM, P>(rp, nx, blocks, w.prefetch_l2, xr, out, ldy);
            });
      case Scheme::q4_K:
        return by_rows.template operator()<M>(
            [&]<int R, int MM>(const uint8_t* const* rp, const uint8_t* const* nx, float* out) {
              q45k_rows<false, R, MM, P>(rp, nx, blocks, w.prefetch_l2, xr, out, ldy);
            });
      case Scheme::q5_K:
        return by_rows.template operator()<M>(
            [&]<int R, int MM>(const uint8_t* const* rp, const uint8_t* const* nx, float* out) {
              q45k_rows<true, R, MM, P>(rp, nx, blocks, w.prefetch_l2, xr, out, ldy);
            });
      default:
        return by_rows.template operator()<M>(
            [&]<int R, int MM>(const uint8_t* const* rp, const uint8_t* const* nx, float* out) {
              q6k_rows<R, MM, P>(rp, nx, blocks, w.prefetch_l2, xr, out, ldy);
            });
    }
  };
  with_planes(w, [&]<int P>() {
    if (xr.m == 1)
      by_scheme.template operator()<1, P>();
    else
      by_scheme.template operator()<2, P>();
  });
}

}  // namespace quanta::cpu::vnni
