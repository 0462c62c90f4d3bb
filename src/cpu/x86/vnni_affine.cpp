// The affine (2-8 bits), mxfp4, nvfp4 and GGUF q4_0 .. q8_0 GEMV on AVX512-VNNI dot products
// (see vnni_affine.hpp). Built with the avx512 flags plus VNNI, VBMI and GFNI (src/CMakeLists.txt).
#include "cpu/x86/vnni_affine.hpp"

#include <cmath>
#include <cstring>

#include "cpu/x86/vnni_common.hpp"
#include "quanta/numeric.hpp"

namespace quanta::cpu::vnni {

namespace {

constexpr int64_t kBlock = kAffineBlock;
constexpr int64_t kPlaneBytes = 3 * 2 * 64;  // per block: 3 planes x 2 vectors (Ctl's order)
constexpr int kGroupBlock = 64;              // groups whose scales are made f32 per pass
// Rows of W per pass at M = 1, the next pass's rows prefetched as one run (next_run; per row on
// Intel, gemv_prefetch). 1 row (prefetching 2-6 KB ahead) and 2 rows were slower for g64 and
// g32, prefetching 2-6 KB ahead with 4 rows too (docs/perf-cpu.md).
constexpr int kRows = 4;

struct Ctl {
  // The two 64-byte vectors of a block's codes, as plane positions: 4-bit, the low and high
  // nibbles, so vector v byte i is element 2i + v; every other width, 8-code chunk 2q + v in
  // qword q, so vector v byte 8q + b is element 16q + 8v + b. Either way int32 lane t of both
  // vectors covers elements [8t, 8t + 8) or [16(t/2), 16(t/2) + 16): one group (>= 32).
  alignas(64) uint8_t nibble[2][64] = {};
  alignas(64) uint8_t chunk[2][64] = {};
  // 2-bit codes: the block's 32 bytes broadcast to both halves; byte 8q + b of vector v is code
  // j = 2v + q / 4 of raw byte 8(q % 4) + b (one GF(2) affine per vector cuts it out), element
  // 32(q % 4) + 4b + 2v + q / 4; int32 lane t of both covers part of elements
  // [32((t / 2) % 4), + 32): one group.
  alignas(64) uint8_t quarter[2][64] = {};
  alignas(64) uint64_t gf2[2][8] = {};  // qword q of vector v: bits 2j, 2j + 1 -> bits 0, 1
  alignas(64) int32_t g32q[16] = {};    // lane t -> its group, quarter order
  alignas(64) int32_t g64q[16] = {};
  // GGUF's 32-element blocks (q4_0 .. q8_0): vector v byte 16b + i is element 32b + 16v + i (the
  // low nibbles of block b's 16 bytes, then their high nibbles).
  alignas(64) uint8_t block32[2][64] = {};
  // The pack's 8-bit codes: vector v byte 4t + j is element 8t + 4v + j.
  alignas(64) uint8_t quad[2][64] = {};
  alignas(64) int32_t g16[16] = {};  // lane t of a 128-weight vector -> its group (8t / G)
  alignas(64) int32_t g32[16] = {};
  alignas(64) int32_t g64[16] = {};
  constexpr Ctl() {
    for (int v = 0; v < 2; ++v)
      for (int i = 0; i < 64; ++i) {
        nibble[v][i] = static_cast<uint8_t>(2 * i + v);
        chunk[v][i] = static_cast<uint8_t>(16 * (i / 8) + 8 * v + i % 8);
        block32[v][i] = static_cast<uint8_t>(32 * (i / 16) + 16 * v + i % 16);
        quad[v][i] = static_cast<uint8_t>(8 * (i / 4) + 4 * v + i % 4);
        const int q = i / 8, b = i % 8;
        quarter[v][i] = static_cast<uint8_t>(32 * (q % 4) + 4 * b + 2 * v + q / 4);
      }
    // GF2P8AFFINEQB: result bit i = parity(matrix byte 7 - i & source byte).
    for (int v = 0; v < 2; ++v)
      for (int q = 0; q < 8; ++q) {
        const int j = 2 * v + q / 4;
        gf2[v][q] = uint64_t{1u << (2 * j)} << 56 | uint64_t{1u << (2 * j + 1)} << 48;
      }
    for (int t = 0; t < 16; ++t) {
      g16[t] = t / 2;
      g32[t] = t / 4;
      g64[t] = t / 8;
      g32q[t] = (t / 2) % 4;
      g64q[t] = (t / 2) % 4 / 2;
    }
  }
};
alignas(64) constexpr Ctl kCtl{};

// The group of each int32 lane of a block's code vectors, in the order of the width's codes.
template <int BITS, int G>
inline __m512i lane_groups() {
  if constexpr (G == 128) return _mm512_setzero_si512();
  if constexpr (G == 16) return _mm512_load_si512(kCtl.g16);
  if constexpr (BITS == 2) return _mm512_load_si512(G == 32 ? kCtl.g32q : kCtl.g64q);
  return _mm512_load_si512(G == 32 ? kCtl.g32 : kCtl.g64);
}

// The block's planes at 2^e: plane p's two vectors in Ctl's order for the width (4-bit: the
// even elements, then the odd ones, as the low and high nibbles). Each step is exact: products by
// powers of two, and remainders smaller than the value they come from, on a grid x already lies on.
void block_digits(const float* xb, uint8_t* pb, int e, const uint8_t (*order)[64]) {
  alignas(64) int8_t digit[3][kBlock];
  const __m512 up0 = _mm512_set1_ps(pow2f(-(e + 14)));
  const __m512 down0 = _mm512_set1_ps(pow2f(e + 14));
  const __m512 up1 = _mm512_set1_ps(pow2f(-(e + 7)));
  const __m512 down1 = _mm512_set1_ps(pow2f(e + 7));
  const __m512 up2 = _mm512_set1_ps(pow2f(-e));
  for (int v = 0; v < kBlock / 16; ++v) {
    const __m512 xv = _mm512_loadu_ps(xb + 16 * v);
    const __m512 c0 = round_even(_mm512_mul_ps(xv, up0));
    const __m512 r1 = _mm512_fnmadd_ps(c0, down0, xv);
    const __m512 c1 = round_even(_mm512_mul_ps(r1, up1));
    const __m512 c2 = round_even(_mm512_mul_ps(_mm512_fnmadd_ps(c1, down1, r1), up2));
    const __m512 c[3] = {c0, c1, c2};
    for (int p = 0; p < 3; ++p)
      _mm_store_si128(reinterpret_cast<__m128i*>(digit[p] + 16 * v),
                      _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(c[p])));
  }
  for (int p = 0; p < 3; ++p) {
    const __m512i lo = _mm512_load_si512(digit[p]), hi = _mm512_load_si512(digit[p] + 64);
    for (int v = 0; v < 2; ++v)
      _mm512_storeu_si512(pb + p * 128 + v * 64,
                          _mm512_permutex2var_epi8(lo, _mm512_load_si512(order[v]), hi));
  }
}

// The codes of one block (128 weights, 16·BITS bytes at p) as the two u8 vectors of Ctl's
// order. 3-bit: a byte permute puts each 8-code chunk's BITS bytes in a qword, one
// multishift cuts the 8 codes out at bit offsets 0, BITS, .., 7·BITS, one AND masks them. 5 and 6
// bits the same way with two-source permutes (load_stream_codes): on the Zen 5 VM, where the float
// kernels streamed at 85-100% of a slower roof, they ran 0-30% slower and were not routed; on Zen
// 4 they run 2.0-2.3x the float kernels hot and now are (docs/perf-cpu.md).
template <int BITS>
struct Codes {
  static constexpr int64_t kBytes = 16 * BITS;
  alignas(64) uint8_t src[2][64] = {};  // vector v byte 8q + b <- chunk (2q + v) byte b
  alignas(64) uint8_t shift[64] = {};   // multishift: byte b of a qword from bit b·BITS
  constexpr Codes() {
    for (int v = 0; v < 2; ++v)
      for (int i = 0; i < 64; ++i) {
        const int q = i / 8, b = i % 8 < BITS ? i % 8 : 0;
        src[v][i] = static_cast<uint8_t>((2 * q + v) * BITS + b);
      }
    for (int i = 0; i < 64; ++i) shift[i] = static_cast<uint8_t>((i % 8) * BITS);
  }
};
template <int BITS>
alignas(64) constexpr Codes<BITS> kCodes{};

// MLX's 5- and 6-bit codes (a little-endian bit stream: 8 codes in BITS bytes) in Ctl::chunk
// order, as load_codes<3> but with a two-source byte permute, the block being 80 or 96 bytes: the
// loads reach 128 - 16·BITS bytes (48 or 32) past it, inside kRowOverread.
template <int BITS>
inline void load_stream_codes(const uint8_t* p, __m512i& c0, __m512i& c1) {
  static_assert(BITS == 5 || BITS == 6);
  constexpr const Codes<BITS>& k = kCodes<BITS>;
  const __m512i lo = _mm512_loadu_si512(p), hi = _mm512_loadu_si512(p + 64);
  const __m512i sh = _mm512_load_si512(k.shift), m = _mm512_set1_epi8((1 << BITS) - 1);
  c0 = _mm512_and_si512(_mm512_multishift_epi64_epi8(
                            sh, _mm512_permutex2var_epi8(lo, _mm512_load_si512(k.src[0]), hi)),
                        m);
  c1 = _mm512_and_si512(_mm512_multishift_epi64_epi8(
                            sh, _mm512_permutex2var_epi8(lo, _mm512_load_si512(k.src[1]), hi)),
                        m);
}

// The high nibble of every byte, in its low bits (one GF(2) affine: bits 4-7 -> 0-3; a shift
// and an AND before).
inline __m512i high_nibbles(__m512i v) {
  // Result bit i = parity(matrix byte 7 - i & source byte): bytes 7..4 select bits 4..7.
  constexpr uint64_t kHigh =
      uint64_t{0x10} << 56 | uint64_t{0x20} << 48 | uint64_t{0x40} << 40 | uint64_t{0x80} << 32;
  return _mm512_gf2p8affine_epi64_epi8(v, _mm512_set1_epi64(static_cast<long long>(kHigh)), 0);
}

// A 64-bit mask from 8 bytes at p.
inline __mmask64 load_mask(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return _cvtu64_mask64(v);
}

// 3-bit loads read 16 bytes past the block (kRowOverread allows 64); 2-bit reads its 32. 5/6-bit:
// only the pack's layout (cpu/pack.hpp): the 4-bit nibbles, then masks of each code's fifth (and
// sixth) bit added in; codes up to 63 keep plane_dot's int32 sums below 2^31 (8·63·127·2^14 <
// 2^30).
template <int BITS>
inline void load_codes(const uint8_t* p, __m512i& c0, __m512i& c1) {
  static_assert(BITS >= 2 && BITS <= 8 && BITS != 7);
  if constexpr (BITS == 8) {  // the pack's order (Ctl::quad): the bytes are the operands
    c0 = _mm512_loadu_si512(p);
    c1 = _mm512_loadu_si512(p + 64);
  } else if constexpr (BITS >= 4) {
    const __m512i mask4 = _mm512_set1_epi8(0x0F), raw = _mm512_loadu_si512(p);
    c0 = _mm512_and_si512(raw, mask4);
    c1 = high_nibbles(raw);
    if constexpr (BITS >= 5) {
      const __m512i b4 = _mm512_set1_epi8(16);
      c0 = _mm512_mask_add_epi8(c0, load_mask(p + 64), c0, b4);
      c1 = _mm512_mask_add_epi8(c1, load_mask(p + 72), c1, b4);
    }
    if constexpr (BITS == 6) {
      const __m512i b5 = _mm512_set1_epi8(32);
      c0 = _mm512_mask_add_epi8(c0, load_mask(p + 80), c0, b5);
      c1 = _mm512_mask_add_epi8(c1, load_mask(p + 88), c1, b5);
    }
  } else if constexpr (BITS == 2) {  // Ctl::quarter order: one GF(2) affine per vector
    const __m512i a =
        _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    c0 = _mm512_gf2p8affine_epi64_epi8(a, _mm512_load_si512(kCtl.gf2[0]), 0);
    c1 = _mm512_gf2p8affine_epi64_epi8(a, _mm512_load_si512(kCtl.gf2[1]), 0);
  } else {
    constexpr const Codes<BITS>& k = kCodes<BITS>;
    const __m512i a = _mm512_loadu_si512(p);
    const __m512i sh = _mm512_load_si512(k.shift), m = _mm512_set1_epi8((1 << BITS) - 1);
    c0 = _mm512_and_si512(
        _mm512_multishift_epi64_epi8(sh, _mm512_permutexvar_epi8(_mm512_load_si512(k.src[0]), a)),
        m);
    c1 = _mm512_and_si512(
        _mm512_multishift_epi64_epi8(sh, _mm512_permutexvar_epi8(_mm512_load_si512(k.src[1]), a)),
        m);
  }
}

// The block's dot products per int32 lane: both code vectors against x's three planes, combined
// as p0·2^14 + p1·2^7 + p2, as f32 (one chain: 1.02-1.08x over three sums and two adds on Zen 4,
// docs/perf-cpu.md). In int32 for codes up to 63 (|.| <= 8·63·127·2^14 < 2^30:
// exact); 8-bit codes (8·255·127·2^14 would pass 2^31) take the last combine in f32.
// With P = 2 planes (x from bf16, WeightPlan::x_bf16) plane_dot's sum is p0·2^7 + p1, 2^7 less
// than the three-plane one: the scales that take x's per-group 2^e take kPlaneUnit<P> with it.
template <int BITS = 4, int P = 3>
inline __m512 plane_dot(__m512i c0, __m512i c1, const __m512i (&xv)[6]) {
  if constexpr (P == 2) {
    // Planes 0 and 1 only: p0·2^7 + p1, |.| <= 8·255·128·2^7 + 8·255·128 < 2^31 for any width.
    const __m512i a =
        _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), c0, xv[0]), c1, xv[1]);
    return _mm512_cvtepi32_ps(
        _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_slli_epi32(a, 7), c0, xv[2]), c1, xv[3]));
  } else if constexpr (BITS == 8) {
    __m512i a[3];
    for (int p = 0; p < 3; ++p)
      a[p] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), c0, xv[2 * p]), c1,
                                 xv[2 * p + 1]);
    const __m512i hi = _mm512_add_epi32(_mm512_slli_epi32(a[0], 7), a[1]);
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(hi), _mm512_set1_ps(128.0f),
                           _mm512_cvtepi32_ps(a[2]));
  }
  // One chain: each plane's sum lands on the previous ones shifted by 7 (no adds).
  __m512i a =
      _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), c0, xv[0]), c1, xv[1]);
  for (int p = 1; p < 3; ++p)
    a = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_slli_epi32(a, 7), c0, xv[2 * p]), c1,
                            xv[2 * p + 1]);
  return _mm512_cvtepi32_ps(a);
}

// `cnt` (<= 16) scales or biases of dtype t from p, as f32 (zeros past cnt).
__m512 load_sd(const uint8_t* p, DType t, int cnt) {
  const __mmask16 m = cnt >= 16 ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << cnt) - 1u);
  if (t == DType::f32) return _mm512_maskz_loadu_ps(m, p);
  const __m256i h = _mm256_maskz_loadu_epi16(m, p);
  if (t == DType::f16) return _mm512_cvtph_ps(h);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));  // bf16
}

// E2M1 code -> 2·value + 12 (u8, 0..24), in every 16-byte lane for a byte shuffle: mxfp4 as
// affine with scale 2^(E - 128) and bias -12·scale.
alignas(64) constexpr uint8_t kE2M1Unsigned[64] = {
    12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9,  8,  6,  4,  0,  12, 13, 14, 15, 16, 18,
    20, 24, 12, 11, 10, 9,  8,  6,  4,  0,  12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9,
    8,  6,  4,  0,  12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9,  8,  6,  4,  0};

// cnt (<= 16, mask k) group scales from `at` as f32: of dtype sd, or with kE2M1 (codes mapped
// to 2·value + 12, so the scales halved) mxfp4's E8M0 bytes or (kE4M3) nvfp4's E4M3 bytes.
template <bool kE2M1, bool kE4M3>
inline __m512 group_scales(const uint8_t* at, DType sd, int cnt, __mmask16 k) {
  if constexpr (kE2M1 && !kE4M3) {
    // mxfp4's E8M0 bytes: 2^(E - 128) is E in f32's exponent field, halved (E = 1: the
    // subnormal 2^-127); E = 0 (2^-128) and 255 (NaN) set apart.
    const __m512i e = _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(k, at));
    const __m512 v =
        _mm512_mul_ps(_mm512_castsi512_ps(_mm512_slli_epi32(e, 23)), _mm512_set1_ps(0.5f));
    const __mmask16 zero = _mm512_cmpeq_epi32_mask(e, _mm512_setzero_si512());
    const __mmask16 nan = _mm512_cmpeq_epi32_mask(e, _mm512_set1_epi32(255));
    return _mm512_mask_mov_ps(_mm512_mask_mov_ps(v, zero, _mm512_set1_ps(0x1p-128f)), nan,
                              _mm512_set1_ps(__builtin_nanf("")));
  } else if constexpr (kE4M3) {
    // nvfp4's E4M3 bytes, halved: the exponent and mantissa bits moved to f32's (a normal E4M3
    // becomes 2^(e - 127)·(1 + m/8), a subnormal the f32 subnormal m·2^-129), times 2^119
    // (exact); then the sign, and NaN for 0x7F.
    const __m512i b = _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(k, at));
    const __m512i em = _mm512_and_si512(b, _mm512_set1_epi32(0x7F));
    __m512 v =
        _mm512_mul_ps(_mm512_castsi512_ps(_mm512_slli_epi32(em, 20)), _mm512_set1_ps(0x1p119f));
    v = _mm512_castsi512_ps(
        _mm512_or_si512(_mm512_castps_si512(v),
                        _mm512_slli_epi32(_mm512_and_si512(b, _mm512_set1_epi32(0x80)), 24)));
    const __mmask16 nan = _mm512_cmpeq_epi32_mask(em, _mm512_set1_epi32(0x7F));
    return _mm512_mask_mov_ps(v, nan, _mm512_set1_ps(__builtin_nanf("")));
  } else {
    return load_sd(at, sd, cnt);
  }
}

// One block's codes of one row (p: as stored) as the two u8 vectors of Ctl's order for the
// width: MLX's 5/6-bit bit stream unpacked (load_stream_codes) or the pack's (load_codes); E2M1
// codes then as 2·value + 12.
template <int BITS, bool kE2M1, bool kStream>
inline void block_codes(const uint8_t* p, __m512i& c0, __m512i& c1) {
  if constexpr (kStream && (BITS == 5 || BITS == 6)) {
    load_stream_codes<BITS>(p, c0, c1);
  } else if constexpr (kStream && BITS == 8) {
    // MLX's 8-bit codes as stored (one byte each), into Ctl::chunk order by one two-source byte
    // permute per vector (the pack's order, Ctl::quad, needs none).
    const __m512i lo = _mm512_loadu_si512(p), hi = _mm512_loadu_si512(p + 64);
    c0 = _mm512_permutex2var_epi8(lo, _mm512_load_si512(kCtl.chunk[0]), hi);
    c1 = _mm512_permutex2var_epi8(lo, _mm512_load_si512(kCtl.chunk[1]), hi);
  } else {
    load_codes<BITS>(p, c0, c1);
  }
  if constexpr (kE2M1) {
    const __m512i lut = _mm512_load_si512(kE2M1Unsigned);
    c0 = _mm512_shuffle_epi8(lut, c0);
    c1 = _mm512_shuffle_epi8(lut, c1);
  }
}

// A line of the next pass (rows ahead), into L2 (kL2) or L1; the hot loops take the hint as a
// template argument (WeightPlan::prefetch_l2 chosen once per pass), packed_tile per step.
template <bool kL2>
inline void prefetch(const uint8_t* p) {
  _mm_prefetch(reinterpret_cast<const char*>(p), kL2 ? _MM_HINT_T1 : _MM_HINT_T0);
}
void prefetch(const uint8_t* p, bool l2) {
  if (l2)
    prefetch<true>(p);
  else
    prefetch<false>(p);
}

// The next pass's R rows as one run of bytes when they are consecutive in memory, else `current`
// (the pass's own rows: prefetching them is harmless, and only the last rows see it), so that the
// block loops hold no branch on it:
// prefetching that run in address order, R·(a block's bytes) per step, reads as one stream,
// where a request per row at the current offset is R interleaved streams (on the 2-core Zen 5
// VM a plain read of four interleaved 7 KB rows per thread ran 35 GB/s, one stream 42-48,
// and the same four rows with the next four prefetched as one run 44-46: docs/perf-cpu.md). On
// the Emerald Rapids VM the per-row prefetch into L2 read faster (gemv_prefetch).
template <int R>
const uint8_t* next_run(const WeightPlan& w, const int64_t* next, const uint8_t* current) {
  const uint8_t* first = row_at(w, next[0]);
  for (int r = 1; r < R; ++r)
    if (next[r] != next[0] + r || row_at(w, next[r]) != first + r * w.row_bytes) return current;
  return first;
}

// R rows of W per pass, as the K-quant kernels, times M (1..4) rows of x: each row's block of
// codes is unpacked once and serves every row of x, each vector of planes is loaded once and
// serves the R rows; the next pass's rows are prefetched a line per request, as one run in
// address order where they are consecutive (next_run), else (and with w.prefetch_rows) each at
// the current offset. Per block of 128 weights, row of W and row of x: 6 dot products, c0·2^14 +
// c1·2^7 + c2 in int32 (|.| < 2^28: exact), and one FMA with the scales of the block's groups
// (times that row of x's 2^e for the block). kE2M1: mxfp4 (E8M0 scales) or, with kE4M3, nvfp4
// (E4M3 scales, the sums times the global scale), codes as 2·value + 12 and no biases stored:
// each group's bias is -12 times its scale.
template <int BITS, int G, int R, int M, int P, bool kE2M1 = false, bool kE4M3 = false>
void affine_pass(const WeightPlan& w, const int64_t* rows, const int64_t* next,
                 const MultiPlanes& mp, float* y, int64_t ldy) {
  constexpr int64_t kGroupBytes = G * BITS / 8, kBlockBytes = kBlock * BITS / 8;
  constexpr int64_t kGroupsPerVec = kBlock / G;
  const int64_t ng = w.k / G;
  const int sz = kE2M1 ? 1 : w.scale_dtype == DType::f32 ? 4 : 2;
  const __m512i lane_group = lane_groups<BITS, G>();
  alignas(64) float sc[R][M][kGroupBlock + 16];
  const uint8_t* rp[R];
  __m512 acc[R][M], bacc[R][M];
  for (int r = 0; r < R; ++r) {
    rp[r] = row_at(w, rows[r]);
    for (int m = 0; m < M; ++m) acc[r][m] = bacc[r][m] = _mm512_setzero_ps();
  }
  // The next pass's codes, a line per row and block: as one run (next_run) or, with
  // w.prefetch_rows, each next row at the current offset; chosen here so the loop has no branch.
  const uint8_t* const seq = next_run<R>(w, next, rp[0]);
  const uint8_t* pf_row[R];
  for (int r = 0; r < R; ++r)
    pf_row[r] = w.prefetch_rows ? row_at(w, next[r]) : seq + r * kBlockBytes;
  const int64_t pf_step = w.prefetch_rows ? 1 : R;
  for (int64_t g0 = 0; g0 < ng; g0 += kGroupBlock) {
    const int cnt = static_cast<int>(ng - g0 < kGroupBlock ? ng - g0 : kGroupBlock);
    for (int r = 0; r < R; ++r) {
      const uint8_t* sp = w.scales + (rows[r] * ng + g0) * sz;
      const uint8_t* bp = kE2M1 ? nullptr : w.biases + (rows[r] * ng + g0) * sz;
      for (int i = 0; i < cnt; i += 16) {
        const int c = cnt - i < 16 ? cnt - i : 16;
        const __mmask16 k = c == 16 ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << c) - 1u);
        const __m512 s = group_scales<kE2M1, kE4M3>(sp + i * sz, w.scale_dtype, c, k);
        const __m512 b = kE2M1 ? _mm512_mul_ps(s, _mm512_set1_ps(-12.0f))
                               : load_sd(bp + i * sz, w.scale_dtype, c);
        for (int m = 0; m < M; ++m) {
          const __m512 p2 = _mm512_mul_ps(_mm512_maskz_loadu_ps(k, mp.pow2[m] + g0 + i),
                                          _mm512_set1_ps(kPlaneUnit<P>));
          _mm512_store_ps(sc[r][m] + i, _mm512_mul_ps(s, p2));
          bacc[r][m] = _mm512_fmadd_ps(b, _mm512_maskz_loadu_ps(k, mp.xs[m] + g0 + i), bacc[r][m]);
        }
      }
    }
    const int64_t vecs = cnt * G / kBlock, off0 = g0 * kGroupBytes;
    const int64_t pb0 = g0 * G / kBlock * kPlaneBytes;
    // The next pass's scales and biases (short bursts the hardware prefetchers miss), a line
    // per block: all at once, they overflowed the L1's miss buffers and were dropped.
    const int64_t sc_lines = (cnt * sz + 63) / 64;
    // The prefetch hint is a template argument of the block loop: a branch on it per row and
    // block made the compiler split the loop and spill the accumulators.
    auto blocks = [&]<bool kL2>() {
      // The sums in a local array (registers): the outer one, which the lambda only references,
      // was stored back to the stack after every FMA.
      __m512 sum[R][M];
      for (int r = 0; r < R; ++r)
        for (int m = 0; m < M; ++m) sum[r][m] = acc[r][m];
      for (int64_t c = 0; c < vecs; ++c) {
        if (c < sc_lines)
          for (int r = 0; r < R; ++r) {
            const int64_t ahead = (next[r] * ng + g0) * sz + c * 64;
            prefetch<kL2>(w.scales + ahead);
            if constexpr (!kE2M1) prefetch<kL2>(w.biases + ahead);
          }
        const int64_t off = off0 + c * kBlockBytes;
        auto planes = [&](int m, __m512i(&xv)[6]) {
          const uint8_t* xb = mp.planes[m] + pb0 + c * kPlaneBytes;
          for (int i = 0; i < 2 * P; ++i) xv[i] = _mm512_load_si512(xb + 64 * i);
        };
        auto codes = [&](int r, __m512i& c0, __m512i& c1) {
          const uint8_t* pf = pf_row[r] + pf_step * off;
          for (int64_t l = 0; l < kBlockBytes; l += 64) prefetch<kL2>(pf + l);
          block_codes<BITS, kE2M1, true>(rp[r] + off, c0, c1);
        };
        auto dot = [&](int r, int m, __m512i c0, __m512i c1, const __m512i(&xv)[6]) {
          const __m512 v = plane_dot<BITS, P>(c0, c1, xv);
          const __m512 s = G == 128
                               ? _mm512_set1_ps(sc[r][m][c])
                               : _mm512_permutexvar_ps(
                                     lane_group, _mm512_loadu_ps(sc[r][m] + c * kGroupsPerVec));
          sum[r][m] = _mm512_fmadd_ps(s, v, sum[r][m]);
        };
        if constexpr (M == 1) {
          // The planes first, then each row's codes as it is dotted: from DRAM this order ran
          // g64 3.5-3.7 ms against 4.2 with every row's codes loaded first (docs/perf-cpu.md).
          __m512i xv[6];
          planes(0, xv);
#pragma GCC unroll 4
          for (int r = 0; r < R; ++r) {
            __m512i c0, c1;
            codes(r, c0, c1);
            dot(r, 0, c0, c1, xv);
          }
        } else {
          __m512i c0[R], c1[R];
#pragma GCC unroll 4
          for (int r = 0; r < R; ++r) codes(r, c0[r], c1[r]);
#pragma GCC unroll 4
          for (int m = 0; m < M; ++m) {
            __m512i xv[6];
            planes(m, xv);
#pragma GCC unroll 4
            for (int r = 0; r < R; ++r) dot(r, m, c0[r], c1[r], xv);
          }
        }
      }
      for (int r = 0; r < R; ++r)
        for (int m = 0; m < M; ++m) acc[r][m] = sum[r][m];
    };
    if (w.prefetch_l2)
      blocks.template operator()<true>();
    else
      blocks.template operator()<false>();
  }
  const float global = kE4M3 ? w.global : 1.0f;
  for (int r = 0; r < R; ++r)
    for (int m = 0; m < M; ++m)
      y[m * ldy + r] =
          (_mm512_reduce_add_ps(acc[r][m]) + _mm512_reduce_add_ps(bacc[r][m])) * global;
}

// Rows [n0, n1) of W in passes of R (4 for one or two rows of x, 2 for three or four, so the
// accumulators, codes and planes of a pass stay in registers), the rest one at a time:
// pass.template operator()<R>(rows, next, y + first row).
template <int M, class Pass>
void row_passes(const WeightPlan& w, int64_t n0, int64_t n1, float* y, Pass&& pass) {
  constexpr int R = M <= 2 ? kRows : kRows / 2;
  int64_t n = n0;
  for (; n + R <= n1; n += R) {
    int64_t rows[R], next[R];
    for (int r = 0; r < R; ++r) {
      rows[r] = n + r;
      next[r] = n + R + r < w.n ? n + R + r : w.n - 1;
    }
    pass.template operator()<R>(rows, next, y + n);
  }
  for (; n < n1; ++n) pass.template operator()<1>(&n, &n, y + n);
}

template <int BITS, int G, int M, int P, bool kE2M1 = false, bool kE4M3 = false>
void affine_rows(const WeightPlan& w, const MultiPlanes& mp, int64_t n0, int64_t n1, float* y,
                 int64_t ldy) {
  row_passes<M>(w, n0, n1, y, [&]<int R>(const int64_t* rows, const int64_t* next, float* out) {
    affine_pass<BITS, G, R, M, P, kE2M1, kE4M3>(w, rows, next, mp, out, ldy);
  });
}

// One tile of the pack (four rows of W, layout in cpu/pack.hpp) times M rows of x, into
// out[m][r]. Per chunk: each row's scales times x's per-group 2^e go to a stack buffer, and its
// biases times the group sums of x join the accumulators' lanes at once (they are summed in the
// end anyway). Per step, as affine_pass: 6 dot products per row of W and row of x (P = 2, x from
// bf16: 4, the scales times 2^7 more), one FMA with the step's group scales. The next tile's same
// chunk is prefetched a line at a time, spread over the chunk's steps: one stream per thread, in
// address order. kBias != 0: the pack stores no biases and the bias is kBias times the scale (fp4
// -12, GGUF q4_0 -8, q5_0 -16).
template <int BITS, int G, int M, int P, bool kE2M1, bool kE4M3 = false,
          int kBias = kE2M1 ? -12 : 0>
void packed_tile(const WeightPlan& w, const uint8_t* p, const uint8_t* pf, const MultiPlanes& mp,
                 float (&out)[M][kRows]) {
  constexpr int R = kRows;              // rows per tile: cpu/pack.hpp kPackRows
  constexpr int64_t kCode = 16 * BITS;  // one row's block of 128 codes, as stored
  constexpr int kGpv = static_cast<int>(kBlock / G);
  const int sz = kE2M1 ? 1 : w.scale_dtype == DType::f32 ? 4 : 2;
  const int64_t steps = w.k / kBlock;
  const __m512i lane_group = lane_groups<BITS, G>();
  alignas(64) float sc[R][M][16];
  __m512 acc[R][M];
  for (int r = 0; r < R; ++r)
    for (int m = 0; m < M; ++m) acc[r][m] = _mm512_setzero_ps();
  for (int64_t s0 = 0; s0 < steps; s0 += w.pack_steps) {
    const int ns = static_cast<int>(steps - s0 < w.pack_steps ? steps - s0 : w.pack_steps);
    const int cnt = ns * kGpv;  // groups per row in this chunk (<= 16)
    const int64_t code_bytes = R * ns * kCode;
    constexpr int kRuns = kBias != 0 ? 1 : 2;  // scales (and biases)
    const int64_t bytes = (code_bytes + kRuns * R * cnt * sz + 63) / 64 * 64;
    const __mmask16 k = static_cast<__mmask16>((1u << cnt) - 1u);
    const uint8_t* sp = p + code_bytes;
    const uint8_t* bp = sp + R * cnt * sz;
    const int64_t g0 = s0 * kGpv;
    for (int r = 0; r < R; ++r) {
      const __m512 s = group_scales<kE2M1, kE4M3>(sp + r * cnt * sz, w.scale_dtype, cnt, k);
      const __m512 b = kBias != 0 ? _mm512_mul_ps(s, _mm512_set1_ps(static_cast<float>(kBias)))
                                  : load_sd(bp + r * cnt * sz, w.scale_dtype, cnt);
      for (int m = 0; m < M; ++m) {
        const __m512 p2 =
            _mm512_mul_ps(_mm512_maskz_loadu_ps(k, mp.pow2[m] + g0), _mm512_set1_ps(kPlaneUnit<P>));
        _mm512_store_ps(sc[r][m], _mm512_mul_ps(s, p2));
        acc[r][m] = _mm512_fmadd_ps(b, _mm512_maskz_loadu_ps(k, mp.xs[m] + g0), acc[r][m]);
      }
    }
    const uint8_t* pf_end = pf + bytes;
    const int64_t per_step = (bytes / 64 + ns - 1) / ns;
    for (int s = 0; s < ns; ++s) {
      for (int64_t l = 0; l < per_step && pf < pf_end; ++l, pf += 64) prefetch(pf, w.prefetch_l2);
      const __m512i idx = _mm512_add_epi32(lane_group, _mm512_set1_epi32(s * kGpv));
      const uint8_t* cp = p + s * R * kCode;
      auto codes = [&](const uint8_t* c, __m512i& c0, __m512i& c1) {
        block_codes<BITS, kE2M1, false>(c, c0, c1);
      };
      auto planes = [&](int m, __m512i(&xv)[6]) {
        const uint8_t* xb = mp.planes[m] + (s0 + s) * kPlaneBytes;
        for (int i = 0; i < 2 * P; ++i) xv[i] = _mm512_load_si512(xb + 64 * i);
      };
      auto dot = [&](int r, int m, __m512i c0, __m512i c1, const __m512i(&xv)[6]) {
        const __m512 v = plane_dot<BITS, P>(c0, c1, xv);
        // Groups of 128: one scale a step, broadcast from memory (no lane permute).
        const __m512 sv = G == 128 ? _mm512_set1_ps(sc[r][m][s])
                                   : _mm512_permutexvar_ps(idx, _mm512_load_ps(sc[r][m]));
        acc[r][m] = _mm512_fmadd_ps(sv, v, acc[r][m]);
      };
      if constexpr (M == 1) {
        __m512i xv[6];
        planes(0, xv);
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
          __m512i c0, c1;
          codes(cp + r * kCode, c0, c1);
          dot(r, 0, c0, c1, xv);
        }
      } else {
        // Each row's codes unpacked once for the M rows of x, whose planes come from L1 again
        // per row of W (the accumulators of 4 x M then stay in registers).
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
          __m512i c0, c1;
          codes(cp + r * kCode, c0, c1);
#pragma GCC unroll 4
          for (int m = 0; m < M; ++m) {
            __m512i xv[6];
            planes(m, xv);
            dot(r, m, c0, c1, xv);
          }
        }
      }
    }
    p += bytes;
    pf = pf_end;
  }
  const float global = kE4M3 ? w.global : 1.0f;
  for (int r = 0; r < R; ++r)
    for (int m = 0; m < M; ++m) out[m][r] = _mm512_reduce_add_ps(acc[r][m]) * global;
}

template <int BITS, int G, int M, int P, bool kE2M1 = false, bool kE4M3 = false,
          int kBias = kE2M1 ? -12 : 0>
void packed_rows(const WeightPlan& w, const MultiPlanes& mp, int64_t n0, int64_t n1, float* y,
                 int64_t ldy) {
  const int64_t tiles = (w.n + kRows - 1) / kRows;
  for (int64_t t = n0 / kRows; t * kRows < n1; ++t) {
    const uint8_t* p = w.pack + t * w.pack_tile_bytes;
    float out[M][kRows];
    packed_tile<BITS, G, M, P, kE2M1, kE4M3, kBias>(w, p, t + 1 < tiles ? p + w.pack_tile_bytes : p,
                                                    mp, out);
    for (int r = 0; r < kRows; ++r) {
      const int64_t n = t * kRows + r;
      if (n < n0 || n >= n1) continue;
      for (int m = 0; m < M; ++m) y[m * ldy + n] = out[m][r];
    }
  }
}

// GGUF's 32-element blocks with 4-, 5- or 8-bit codes, as affine groups of 32 whose scale d (and
// min m) live in the block: w = d·q + b with b = -8d (q4_0), m (q4_1), -16d (q5_0), m (q5_1),
// and q8_0's int8 q as the u8 q + 128 with b = -128d. Four blocks (128 weights) at a time: a
// two-source byte permute gathers their 64 bytes of nibbles (q5: a mask from qh sets each fifth
// bit; q8_0: two such permutes, the second over a window 16 bytes on, for its 128 codes), word
// permutes their d and m.
// Routed for q5_1 (from DRAM, 16384 x 14336: 6.25-6.39 -> 4.11-4.71 ms) and, since the next
// pass's rows are prefetched as one run, q4_1 and q5_0 (Zen 5 VM, Dec 3, four alternating pairs
// from DRAM: q4_1 5.5-6.3 -> 4.7-5.4 ms, q5_0 7.4-11.9 -> 5.4-5.7; one core from L2 1.1-1.5x).
// q4_0 (a tie from L2 until the bias joined the dot product and d went straight into its lanes):
// one core from L2 19.2-19.6 -> 27.2-27.4 GB/s, from DRAM 3.76-3.80 -> 3.05-3.39 ms
// (docs/perf-cpu.md).
template <int BYTES, int QS, int QH, int MIN, int OFF>
struct Legacy {
  static constexpr int kBytes = BYTES;
  static constexpr bool kFive = QH >= 0, kMin = MIN >= 0;
  // q8_0: 32 int8 codes a block, read as u8 q + 128 (so b = -128d) and dotted as 8-bit codes.
  static constexpr bool kEight = BYTES == 34;
  static constexpr float kOff = OFF;  // b = kOff · d when there is no min
  alignas(64) uint8_t qs[64] = {};    // byte 16b + i <- block b's qs[i]
  // Bytes 2b, 2b + 1 <- block b's qh[0], qh[1] (the fifth bits of its elements 0..15), bytes 8 +
  // 2b, 9 + 2b <- qh[2], qh[3] (elements 16..31): the low qword is c0's mask, the high c1's.
  alignas(64) uint8_t qh[64] = {};
  alignas(64) uint16_t d[32] = {};  // word t < 16 <- the d of block t / 4 (lane t's block)
  alignas(64) uint16_t m[32] = {};  // word b <- block b's m
  constexpr Legacy() {
    for (int i = 0; i < 64; ++i) {
      qs[i] = static_cast<uint8_t>((i / 16) * BYTES + QS + i % 16);
      qh[i] = static_cast<uint8_t>(
          i < 16 ? (i % 8) / 2 * BYTES + (QH > 0 ? QH : 0) + 2 * (i / 8) + i % 2 : 0);
    }
    for (int i = 0; i < 32; ++i) {
      d[i] = static_cast<uint16_t>(i < 16 ? (i / 4) * BYTES / 2 : 0);
      m[i] = static_cast<uint16_t>(i < 4 ? (i * BYTES + (MIN > 0 ? MIN : 0)) / 2 : 0);
    }
  }
};
using LegacyQ4_0 = Legacy<18, 2, -1, -1, -8>;
using LegacyQ4_1 = Legacy<20, 4, -1, 2, 0>;
using LegacyQ5_0 = Legacy<22, 6, 2, -1, -16>;
using LegacyQ5_1 = Legacy<24, 8, 4, 2, 0>;
using LegacyQ8_0 = Legacy<34, 2, -1, -1, -128>;
template <class L>
alignas(64) constexpr L kLegacy{};

// R rows of W times M rows of x, as affine_pass (planes in Ctl::block32 order). Lane t of a
// block's int32 dot products belongs to GGUF block t / 4, so its d is widened straight into lane
// t. Without a min the bias kOff·d·Σx joins the dot product before the scale, one FMA per row:
// d·(2^e·v + kOff·Σx), kOff·Σx (made once per vector, shared by the R rows) in lanes 0, 4, 8, 12.
// kL2: the prefetch hint (WeightPlan::prefetch_l2) as a template argument, as in affine_pass.
template <class L, int R, int M, int P, bool kL2>
void legacy_pass(const WeightPlan& w, const int64_t* rows, const int64_t* next,
                 const MultiPlanes& mp, float* y, int64_t ldy) {
  constexpr const L& k = kLegacy<L>;
  // <= 96 bytes (two lines; loads reach 32-56 past) or q8_0's 136 (three; loads reach 8 past).
  constexpr int64_t kVecBytes = 4 * L::kBytes;
  constexpr int kCodeBits = L::kEight ? 8 : 4;  // plane_dot's combine (5-bit codes: the int32 one)
  const int64_t vecs = w.k / kBlock;
  const __m512i mask4 = _mm512_set1_epi8(0x0F);
  const __m512i spread = _mm512_set_epi32(0, 0, 0, 3, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 0);
  const uint8_t* rp[R];
  __m512 acc[R][M], bacc[R][M];
  for (int r = 0; r < R; ++r) {
    rp[r] = row_at(w, rows[r]);
    for (int m = 0; m < M; ++m) acc[r][m] = bacc[r][m] = _mm512_setzero_ps();
  }
  // The next pass's blocks, two lines per row and vector (pf_a, pf_b + pf_step · off), three for
  // q8_0's 136-byte vectors (pf_c): in one run (next_run), lines r, r + R (and r + 2R) of each
  // vector's kLines (r again past them); with w.prefetch_rows, the first and last line of the next
  // row's vector (and the one between).
  constexpr int kLines = (R * kVecBytes + 63) / 64;
  constexpr bool kThree = kVecBytes > 128;
  const uint8_t* const seq = next_run<R>(w, next, rp[0]);
  const uint8_t *pf_a[R], *pf_b[R], *pf_c[R];
  for (int r = 0; r < R; ++r) {
    pf_a[r] = w.prefetch_rows ? row_at(w, next[r]) : seq + 64 * r;
    pf_b[r] = w.prefetch_rows ? pf_a[r] + kVecBytes - 1 : seq + 64 * (r + R < kLines ? r + R : r);
    pf_c[r] = w.prefetch_rows ? pf_a[r] + 64 : seq + 64 * (r + 2 * R < kLines ? r + 2 * R : r);
  }
  const int64_t pf_step = w.prefetch_rows ? 1 : R;
  for (int64_t c = 0; c < vecs; ++c) {
    const int64_t off = c * kVecBytes;
    __m512i c0[R], c1[R];
    __m512 dv[R], mv[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      prefetch<kL2>(pf_a[r] + pf_step * off);
      prefetch<kL2>(pf_b[r] + pf_step * off);
      if constexpr (kThree) prefetch<kL2>(pf_c[r] + pf_step * off);
      const __m512i a = _mm512_loadu_si512(rp[r] + off), b = _mm512_loadu_si512(rp[r] + off + 64);
      const __m512i q = _mm512_permutex2var_epi8(a, _mm512_load_si512(k.qs), b);
      if constexpr (L::kEight) {
        // Block b's codes 16..31 sit at 34b + 18..33: the same table over bytes 16..143.
        const __m512i q_hi =
            _mm512_permutex2var_epi8(_mm512_loadu_si512(rp[r] + off + 16), _mm512_load_si512(k.qs),
                                     _mm512_loadu_si512(rp[r] + off + 80));
        const __m512i sign = _mm512_set1_epi8(static_cast<char>(0x80));
        c0[r] = _mm512_xor_si512(q, sign);
        c1[r] = _mm512_xor_si512(q_hi, sign);
      } else {
        c0[r] = _mm512_and_si512(q, mask4);
        c1[r] = high_nibbles(q);
      }
      if constexpr (L::kFive) {
        const __m128i qh =
            _mm512_castsi512_si128(_mm512_permutex2var_epi8(a, _mm512_load_si512(k.qh), b));
        const __m512i five = _mm512_set1_epi8(0x10);
        const auto lo = _cvtu64_mask64(static_cast<uint64_t>(_mm_cvtsi128_si64(qh)));
        const auto hi = _cvtu64_mask64(static_cast<uint64_t>(_mm_extract_epi64(qh, 1)));
        c0[r] = _mm512_mask_add_epi8(c0[r], lo, c0[r], five);  // bit 4 is clear: add = or
        c1[r] = _mm512_mask_add_epi8(c1[r], hi, c1[r], five);
      }
      dv[r] = _mm512_cvtph_ps(
          _mm512_castsi512_si256(_mm512_permutex2var_epi16(a, _mm512_load_si512(k.d), b)));
      if constexpr (L::kMin)
        mv[r] = _mm512_maskz_mov_ps(0x000F,
                                    _mm512_cvtph_ps(_mm512_castsi512_si256(
                                        _mm512_permutex2var_epi16(a, _mm512_load_si512(k.m), b))));
    }
#pragma GCC unroll 4
    for (int m = 0; m < M; ++m) {
      const uint8_t* xb = mp.planes[m] + c * kPlaneBytes;
      __m512i xv[6];
      for (int i = 0; i < 2 * P; ++i) xv[i] = _mm512_load_si512(xb + 64 * i);
      const __m512 p2 = _mm512_set1_ps(mp.pow2[m][4 * c] * kPlaneUnit<P>);
      const __m512 xs = _mm512_maskz_loadu_ps(0x000F, mp.xs[m] + 4 * c);
      __m512 corr = _mm512_setzero_ps();
      if constexpr (!L::kMin)
        corr =
            _mm512_mul_ps(_mm512_maskz_permutexvar_ps(0x1111, spread, xs), _mm512_set1_ps(L::kOff));
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const __m512 v = plane_dot<kCodeBits, P>(c0[r], c1[r], xv);
        if constexpr (L::kMin) {
          acc[r][m] = _mm512_fmadd_ps(dv[r], _mm512_mul_ps(v, p2), acc[r][m]);
          bacc[r][m] = _mm512_fmadd_ps(mv[r], xs, bacc[r][m]);
        } else {
          acc[r][m] = _mm512_fmadd_ps(dv[r], _mm512_fmadd_ps(v, p2, corr), acc[r][m]);
        }
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int m = 0; m < M; ++m)
      y[m * ldy + r] = _mm512_reduce_add_ps(acc[r][m]) + _mm512_reduce_add_ps(bacc[r][m]);
}

template <class L, int M, int P>
void legacy_rows(const WeightPlan& w, const MultiPlanes& mp, int64_t n0, int64_t n1, float* y,
                 int64_t ldy) {
  row_passes<M>(w, n0, n1, y, [&]<int R>(const int64_t* rows, const int64_t* next, float* out) {
    if (w.prefetch_l2)
      legacy_pass<L, R, M, P, true>(w, rows, next, mp, out, ldy);
    else
      legacy_pass<L, R, M, P, false>(w, rows, next, mp, out, ldy);
  });
}

// fn.template operator()<M>() for the pass's rows of x (1..4).
template <class Fn>
void with_rows(int m, Fn&& fn) {
  switch (m) {
    case 1:
      return fn.template operator()<1>();
    case 2:
      return fn.template operator()<2>();
    case 3:
      return fn.template operator()<3>();
    default:
      return fn.template operator()<4>();
  }
}

}  // namespace

bool affine_prep(const WeightPlan& w, const float* x, uint8_t* planes, float* group_pow2) {
  const int64_t blocks = w.k / kBlock, per_block = kBlock / w.group;
  // Nothing is written to the planes until every block is usable (the caller keeps xp as f32).
  float* big = group_pow2;  // blocks <= groups: the block maxima first, spread out at the end
  const bool mlx = w.scheme == Scheme::affine || w.scheme == Scheme::mxfp4 ||
                   w.scheme == Scheme::nvfp4;  // MLX's code order
  // 4-bit codes, and the pack's 5/6-bit ones (nibbles plus high bits), in nibble order; the
  // pack's 8-bit codes in fours.
  const bool nibbles = w.bits == 4 || (w.pack != nullptr && (w.bits == 5 || w.bits == 6));
  const uint8_t(*order)[64] = !mlx                               ? kCtl.block32
                              : nibbles                          ? kCtl.nibble
                              : w.pack != nullptr && w.bits == 8 ? kCtl.quad
                              : w.bits == 2                      ? kCtl.quarter
                                                                 : kCtl.chunk;
  if (!block_max<kBlock>(x, blocks, big)) return false;
  for (int64_t b = 0; b < blocks; ++b) {
    uint8_t* pb = planes + b * kPlaneBytes;
    if (big[b] == 0.0f) {
      for (int64_t i = 0; i < kPlaneBytes; i += 64)
        _mm512_storeu_si512(pb + i, _mm512_setzero_si512());
      big[b] = 1.0f;
      continue;
    }
    // The largest |x| / 2^(e + 14) in [64, 128), or [32, 64) where it would round to 128.
    int e = std::ilogb(big[b]) - 20;
    if (std::nearbyint(std::ldexp(big[b], -(e + 14))) > 127.0f) ++e;
    block_digits(x + b * kBlock, pb, e, order);
    big[b] = pow2f(e);
  }
  // Every group takes its block's 2^e; from the last block down, as big[] is read in place.
  for (int64_t b = blocks - 1; b >= 0; --b) {
    const float p = big[b];
    for (int64_t j = per_block - 1; j >= 0; --j) group_pow2[b * per_block + j] = p;
  }
  return true;
}

void affine_gemv_multi(const WeightPlan& w, const MultiPlanes& mp, int64_t n0, int64_t n1, float* y,
                       int64_t ldy) {
  if (w.scheme == Scheme::mxfp4 || w.scheme == Scheme::nvfp4) {
    return with_planes(w, [&]<int P>() {
      with_rows(mp.m, [&]<int M>() {
        if (w.scheme == Scheme::nvfp4)
          affine_rows<4, 16, M, P, true, true>(w, mp, n0, n1, y, ldy);
        else
          affine_rows<4, 32, M, P, true, false>(w, mp, n0, n1, y, ldy);
      });
    });
  }
  if (w.scheme != Scheme::affine) {
    auto legacy = [&]<class L>() {
      with_rows(mp.m, [&]<int M>() {
        with_planes(w, [&]<int P>() { legacy_rows<L, M, P>(w, mp, n0, n1, y, ldy); });
      });
    };
    switch (w.scheme) {
      case Scheme::q4_0:
        return legacy.template operator()<LegacyQ4_0>();
      case Scheme::q4_1:
        return legacy.template operator()<LegacyQ4_1>();
      case Scheme::q5_0:
        return legacy.template operator()<LegacyQ5_0>();
      case Scheme::q8_0:
        return legacy.template operator()<LegacyQ8_0>();
      default:
        return legacy.template operator()<LegacyQ5_1>();
    }
  }
  auto by_group = [&]<int BITS, int P>() {
    with_rows(mp.m, [&]<int M>() {
      switch (w.group) {
        case 32:
          return affine_rows<BITS, 32, M, P>(w, mp, n0, n1, y, ldy);
        case 64:
          return affine_rows<BITS, 64, M, P>(w, mp, n0, n1, y, ldy);
        default:
          return affine_rows<BITS, 128, M, P>(w, mp, n0, n1, y, ldy);
      }
    });
  };
  auto by_bits = [&]<int P>() {
    switch (w.bits) {
      case 2:
        return by_group.template operator()<2, P>();
      case 3:
        return by_group.template operator()<3, P>();
      case 5:
        return by_group.template operator()<5, P>();
      case 6:
        return by_group.template operator()<6, P>();
      case 8:
        return by_group.template operator()<8, P>();
      default:
        return by_group.template operator()<4, P>();
    }
  };
  with_planes(w, by_bits);
}

void affine_packed_multi(const WeightPlan& w, const MultiPlanes& mp, int64_t n0, int64_t n1,
                         float* y, int64_t ldy) {
  auto rows = [&] < int BITS, int G, bool kE2M1, bool kE4M3, int kBias = kE2M1 ? -12 : 0 > () {
    with_rows(mp.m, [&]<int M>() {
      with_planes(w, [&]<int P>() {
        packed_rows<BITS, G, M, P, kE2M1, kE4M3, kBias>(w, mp, n0, n1, y, ldy);
      });
    });
  };
  if (w.pack_e4m3) return rows.template operator()<4, 16, true, true>();   // nvfp4
  if (w.pack_e2m1) return rows.template operator()<4, 32, true, false>();  // mxfp4
  if (w.scheme == Scheme::q4_0) return rows.template operator()<4, 32, false, false, -8>();
  if (w.scheme == Scheme::q5_0) return rows.template operator()<5, 32, false, false, -16>();
  auto by_group = [&]<int BITS>() {
    switch (w.group) {
      case 32:
        return rows.template operator()<BITS, 32, false, false>();
      case 64:
        return rows.template operator()<BITS, 64, false, false>();
      default:
        return rows.template operator()<BITS, 128, false, false>();
    }
  };
  switch (w.bits) {
    case 2:
      return by_group.template operator()<2>();
    case 3:
      return by_group.template operator()<3>();
    case 5:
      return by_group.template operator()<5>();
    case 6:
      return by_group.template operator()<6>();
    case 8:
      return by_group.template operator()<8>();
    default:
      return by_group.template operator()<4>();
  }
}

}  // namespace quanta::cpu::vnni
