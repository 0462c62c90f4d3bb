// The avx2 level's packed GEMV kernels (see avx2_int8.hpp), included by avx2_int8.cpp (the
// vpmaddubsw instances) and avx2_int8_vnni.cpp (the AVX-VNNI ones), which split the instances
// between two files built in parallel. Both are built with the avx2 flags: everything here has
// internal linkage, and no std:: inline function is used, so the linker is handed no AVX2 copy of
// a shared inline function (those of avx2_common.hpp are included only by files built with the
// same flags).
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "cpu/x86/avx2_common.hpp"
#include "cpu/x86/avx2_int8.hpp"

namespace quanta::cpu::avx2_int8 {

namespace {

using namespace avx2_common;

constexpr int64_t kBlock = 128;           // weights per step: vnni::kAffineBlock
constexpr int64_t kPlaneBytes = 3 * 128;  // per block: 3 planes in quad order (quad_planes)
constexpr int kRows = 4;                  // rows per tile: cpu/pack.hpp kPackRows

// Lanes [0, cnt) all ones, the rest zero (cnt may be <= 0 or >= 8).
__m256i lanes_below(int cnt) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(cnt), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// Eight scales or biases of dtype sz bytes (4: f32, 2: f16 or, with bf16, bf16) from p as f32.
// The loads may read past the run (the pack's next bytes, or its kRowOverread of zeros at the
// end); the caller masks lanes past the chunk's groups.
__m256 load_sd(const uint8_t* p, int sz, bool bf16) {
  if (sz == 4) return _mm256_loadu_ps(reinterpret_cast<const float*>(p));
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  if (!bf16) return _mm256_cvtph_ps(h);
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

// Eight group scales from `at` as f32: of the pack's dtype, or mxfp4's E8M0 bytes as
// 2^(E - 128) (the codes are mapped to 2·value + 12, so the scales halved; E = 0: 2^-128, E =
// 255: NaN).
template <bool kE2M1>
__m256 group_scales(const uint8_t* at, int sz, bool bf16) {
  if constexpr (kE2M1) {
    const __m256i e = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(at)));
    const __m256 v =
        _mm256_mul_ps(_mm256_castsi256_ps(_mm256_slli_epi32(e, 23)), _mm256_set1_ps(0.5f));
    const __m256 zero = _mm256_castsi256_ps(_mm256_cmpeq_epi32(e, _mm256_setzero_si256()));
    const __m256 nan = _mm256_castsi256_ps(_mm256_cmpeq_epi32(e, _mm256_set1_epi32(255)));
    return _mm256_blendv_ps(_mm256_blendv_ps(v, _mm256_set1_ps(0x1p-128f), zero),
                            _mm256_set1_ps(__builtin_nanf("")), nan);
  } else {
    return load_sd(at, sz, bf16);
  }
}

// A row's chunk of up to sixteen group scales (cnt of them) from `at` as two vectors of f32, as
// group_scales; lanes past the chunk's groups hold whatever follows. nvfp4's E4M3 bytes, at half
// their value (vnni_affine.cpp group_scales), go through f16 sixteen at a time as the engine's
// codes do (simd/avx2.hpp e4m3v: the sign-extended byte shifted by 7 and masked is the f16 of
// 2^-8 times its value, subnormals included); the NaN bytes (0x7F, 0xFF) become all ones, and
// one multiply by 2^7 rescales.
template <bool kE2M1, bool kE4M3>
[[gnu::always_inline]] inline void group_scales2(const uint8_t* at, int cnt, int sz, bool bf16,
                                                 __m256 (&out)[2]) {
  if constexpr (kE4M3) {
    const __m256i b = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(at)));
    const __m256i f =
        _mm256_and_si256(_mm256_slli_epi16(b, 7), _mm256_set1_epi16(static_cast<int16_t>(0xBF80)));
    const __m256i em = _mm256_set1_epi16(0x3F80);
    const __m256i h =
        _mm256_or_si256(f, _mm256_cmpeq_epi16(_mm256_and_si256(f, em), em));  // NaN: all ones
    const __m256 k = _mm256_set1_ps(0x1p7f);
    out[0] = _mm256_mul_ps(_mm256_cvtph_ps(_mm256_castsi256_si128(h)), k);
    out[1] = _mm256_mul_ps(_mm256_cvtph_ps(_mm256_extracti128_si256(h, 1)), k);
  } else {
    out[0] = group_scales<kE2M1>(at, sz, bf16);
    out[1] = cnt > 8 ? group_scales<kE2M1>(at + 8 * sz, sz, bf16) : _mm256_setzero_ps();
  }
}

// E2M1 code -> 2·value + 12 (0..24), per 16-byte lane for vpshufb (vnni_affine.cpp kE2M1Unsigned);
// plain bytes, not a vector constant, which would be made by AVX2 code at load time.
alignas(32) constexpr uint8_t kE2M1Lut[32] = {12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10,
                                              9,  8,  6,  4,  0,  12, 13, 14, 15, 16, 18,
                                              20, 24, 12, 11, 10, 9,  8,  6,  4,  0};

// The per-step helpers below are always inlined: GCC had left the 6-bit codes' split a call with
// its codes returned through memory, and the 6-bit pack ran 2x slower than the 5-bit one on one
// core.

// One row's block of codes (kBits wide, at c: pack.cpp avx2_block's layouts; 2-bit: MLX's own
// bytes) as four vectors in quad order, E2M1 codes mapped to 2·value + 12 (<= 24).
template <int kBits, bool kE2M1>
[[gnu::always_inline]] inline void block_codes(const uint8_t* c, __m256i (&q)[4]) {
  if constexpr (kBits == 2) {
    quad_codes(c, q);
  } else if constexpr (kBits == 3) {
    quad3_codes(c, q);
  } else if constexpr (kBits == 4) {
    quad4_codes(c, q);
    if constexpr (kE2M1) {
      const __m256i lut = _mm256_load_si256(reinterpret_cast<const __m256i*>(kE2M1Lut));
      for (__m256i& v : q) v = _mm256_shuffle_epi8(lut, v);
    }
  } else if constexpr (kBits == 5) {
    quad5_codes(c, q);
  } else {
    quad6_codes(c, q);
  }
}

// Σ_p 2^(7·(P - 1 - p))·plane(p) per int32 lane, plane(p) the int16 pairs of plane p: one
// vpmaddwd against the plane's weight each, exact.
template <int P, class Plane>
[[gnu::always_inline]] inline __m256i weigh_planes(Plane&& plane) {
  if constexpr (P == 2)
    return _mm256_add_epi32(_mm256_madd_epi16(plane(0), _mm256_set1_epi16(128)),
                            _mm256_madd_epi16(plane(1), _mm256_set1_epi16(1)));
  return _mm256_add_epi32(_mm256_add_epi32(_mm256_madd_epi16(plane(0), _mm256_set1_epi16(1 << 14)),
                                           _mm256_madd_epi16(plane(1), _mm256_set1_epi16(128))),
                          _mm256_madd_epi16(plane(2), _mm256_set1_epi16(1)));
}

// The block's dot products per int32 lane (lane t: elements 16t .. 16t + 15, one group) against
// P planes in quad order at xb: the four vectors' int16 pairs added first (|.| <= 4·2·31·127 for
// codes up to 5 bits, E2M1's mapped ones included); 6-bit codes add two vectors' pairs (<=
// 2·2·63·127) before each vpmaddwd.
template <int P, int kBits>
[[gnu::always_inline]] inline __m256i quad_dot(const __m256i (&q)[4], const uint8_t* xb) {
  auto x = [&](int p, int j) {
    return _mm256_load_si256(reinterpret_cast<const __m256i*>(xb + p * 128 + 32 * j));
  };
  auto pair = [&](int p, int j) {
    return _mm256_add_epi16(_mm256_maddubs_epi16(q[j], x(p, j)),
                            _mm256_maddubs_epi16(q[j + 1], x(p, j + 1)));
  };
  if constexpr (kBits == 6)
    return _mm256_add_epi32(weigh_planes<P>([&](int p) { return pair(p, 0); }),
                            weigh_planes<P>([&](int p) { return pair(p, 2); }));
  return weigh_planes<P>([&](int p) { return _mm256_add_epi16(pair(p, 0), pair(p, 2)); });
}

// A step's dot products per int32 lane, on vpmaddubsw or (kVnni) on vpdpbusd.
template <int P, int kBits, bool kVnni>
[[gnu::always_inline]] inline __m256i block_dot(const __m256i (&q)[4], const uint8_t* xb) {
  if constexpr (kVnni)
    return quad_dot_vnni<P>(q, xb);
  else
    return quad_dot<P, kBits>(q, xb);
}

// The scales of the lanes of quad_dot in step s (lane t: group 16t / G) from sc, a row's chunk of
// group scales. Groups of 32 and 64: four scales broadcast to both 16-byte lanes and spread by an
// in-lane permute, in place of a cross-lane vpermps (3-5% for mxfp4 and nvfp4 on one core of
// Zen 3, measured on the earlier nibble order).
template <int G>
[[gnu::always_inline]] inline __m256 quad_scales(const float* sc, int s) {
  constexpr int kGpv = static_cast<int>(kBlock / G);
  if constexpr (G == 128) return _mm256_set1_ps(sc[s]);
  if constexpr (G == 16) return _mm256_load_ps(sc + kGpv * s);
  const __m256 four = _mm256_broadcast_ps(reinterpret_cast<const __m128*>(sc + kGpv * s));
  if constexpr (G == 64)
    return _mm256_permutevar_ps(four, _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1));
  return _mm256_permutevar_ps(four, _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3));  // G = 32
}

// A line into L2 or L1 (WeightPlan::prefetch_l2: a run-time flag, a predictable branch, so the
// kernels are not instantiated twice).
void prefetch(const uint8_t* p, bool l2) {
  if (l2)
    _mm_prefetch(reinterpret_cast<const char*>(p), _MM_HINT_T1);
  else
    _mm_prefetch(reinterpret_cast<const char*>(p), _MM_HINT_T0);
}

// One tile of the pack (four rows of W; cpu/pack.hpp) times M rows of x, into out[m][r], as
// vnni_affine.cpp's packed_tile: per chunk each row's scales times x's per-group 2^e go to a stack
// buffer and its biases times x's group sums join the accumulators; per step a row's codes are
// split once into four vectors in quad order and serve the M rows of x. The next tile's chunk is
// prefetched a line at a time, spread over the steps. Rows of W go RB at a time over a chunk (M =
// 3, 4: two, so the 8-lane accumulators stay within the 16 registers); the chunk's codes come from
// L1 again. kBias != 0: no biases stored, the bias is kBias times the scale (fp4 -12, q4_0 -8, q5_0
// -16).
template <int G, int M, int P, int kBits, bool kE2M1, bool kE4M3, int kBias, bool kVnni>
void packed_tile(const WeightPlan& w, const uint8_t* p, const uint8_t* pf,
                 const vnni::MultiPlanes& mp, float (&out)[M][kRows]) {
  constexpr int R = kRows, RB = M <= 2 ? 4 : 2;
  constexpr int kGpv = static_cast<int>(kBlock / G);
  constexpr int64_t kCodeBytes = 16 * kBits;  // one row's 128 codes
  const int sz = kE2M1 ? 1 : w.scale_dtype == DType::f32 ? 4 : 2;
  const bool bf16 = w.scale_dtype == DType::bf16;
  const int64_t steps = w.k / kBlock;
  alignas(32) float sc[R][M][24];  // 16 groups, and room for quad_scales' 4-float loads
  __m256 acc[R][M];
  for (int r = 0; r < R; ++r)
    for (int m = 0; m < M; ++m) acc[r][m] = _mm256_setzero_ps();
  constexpr int kRuns = kBias != 0 ? 1 : 2;  // scales (and biases)
  auto chunk_bytes = [&](int ns) {
    return (R * ns * kCodeBytes + kRuns * R * ns * kGpv * sz + 63) / 64 * 64;
  };
  // Lines to prefetch per step, for full chunks computed once: a 64-bit division per chunk took
  // ~5% of nvfp4's samples on Zen 3 (perf annotate).
  auto lines_per_step = [&](int ns) { return (chunk_bytes(ns) / 64 + ns - 1) / ns; };
  const int64_t full_lines = lines_per_step(static_cast<int>(w.pack_steps));
  for (int64_t s0 = 0; s0 < steps; s0 += w.pack_steps) {
    const int ns = static_cast<int>(steps - s0 < w.pack_steps ? steps - s0 : w.pack_steps);
    const int cnt = ns * kGpv;  // groups per row in this chunk (<= 16)
    const int64_t code_bytes = R * ns * kCodeBytes;
    const int64_t bytes = chunk_bytes(ns);
    const uint8_t* sp = p + code_bytes;
    const uint8_t* bp = sp + R * cnt * sz;
    const int64_t g0 = s0 * kGpv;
    // x's per-group factors for the chunk, the same for every row of the tile: 2^e times the
    // plane unit, and the group sums (times kBias where the bias is kBias times the scale). A
    // partial chunk's lanes past its groups are zero (a whole half when cnt <= 8: the all-off
    // mask reads nothing, and every half is written so GCC sees the buffers initialised), and
    // so are their scales and biases below.
    alignas(32) float xp2[M][16], xsum[M][16];
    for (int half = 0; half < 2; ++half) {
      const int left = cnt - 8 * half;
      const __m256i live = lanes_below(left);
      for (int m = 0; m < M; ++m) {
        const __m256 p2 = _mm256_maskload_ps(mp.pow2[m] + g0 + 8 * half, live);
        const __m256 xs = _mm256_maskload_ps(mp.xs[m] + g0 + 8 * half, live);
        _mm256_store_ps(xp2[m] + 8 * half, _mm256_mul_ps(p2, _mm256_set1_ps(kPlaneUnit<P>)));
        _mm256_store_ps(
            xsum[m] + 8 * half,
            kBias != 0 ? _mm256_mul_ps(xs, _mm256_set1_ps(static_cast<float>(kBias))) : xs);
      }
    }
    for (int r = 0; r < R; ++r) {
      __m256 s2[2];
      group_scales2<kE2M1, kE4M3>(sp + r * cnt * sz, cnt, sz, bf16, s2);
      for (int half = 0; half < 2; ++half) {  // groups 8·half .. of the chunk
        const int left = cnt - 8 * half;
        if (left <= 0) break;
        const bool full = left >= 8;
        const __m256i live = lanes_below(left);
        auto keep = [&](__m256 v) {
          return full ? v : _mm256_and_ps(v, _mm256_castsi256_ps(live));
        };
        const __m256 s = keep(s2[half]);
        const __m256 b = kBias != 0 ? s : keep(load_sd(bp + (r * cnt + 8 * half) * sz, sz, bf16));
        for (int m = 0; m < M; ++m) {
          _mm256_store_ps(sc[r][m] + 8 * half, _mm256_mul_ps(s, _mm256_load_ps(xp2[m] + 8 * half)));
          acc[r][m] = _mm256_fmadd_ps(b, _mm256_load_ps(xsum[m] + 8 * half), acc[r][m]);
        }
      }
    }
    const uint8_t* pf_end = pf + bytes;
    const int64_t per_step = ns == w.pack_steps ? full_lines : lines_per_step(ns);
    for (int r0 = 0; r0 < R; r0 += RB) {
      for (int s = 0; s < ns; ++s) {
        if (r0 == 0)
          for (int64_t l = 0; l < per_step && pf < pf_end; ++l, pf += 64)
            prefetch(pf, w.prefetch_l2);
        const uint8_t* cp = p + s * R * kCodeBytes;
#pragma GCC unroll 4
        for (int r = r0; r < r0 + RB; ++r) {
          __m256i q[4];
          block_codes<kBits, kE2M1>(cp + r * kCodeBytes, q);
#pragma GCC unroll 4
          for (int m = 0; m < M; ++m) {
            const uint8_t* xb = mp.planes[m] + (s0 + s) * kPlaneBytes;
            // nvfp4, one row of x: GCC kept the step's twelve plane vectors of x across the four
            // rows of W, spilled them and the accumulators, and read them back from the stack (53
            // stack references in the step loop, mxfp4's 13). An opaque copy of the pointer per
            // row makes each row read the planes from x's lines as operands (12 references); one
            // core hot 1.11x best, from DRAM 1.05-1.25x a round (docs/PERF.md).
            if constexpr (M == 1 && kE4M3) asm("" : "+r"(xb));
            const __m256 v = _mm256_cvtepi32_ps(block_dot<P, kBits, kVnni>(q, xb));
            acc[r][m] = _mm256_fmadd_ps(quad_scales<G>(sc[r][m], s), v, acc[r][m]);
          }
        }
      }
    }
    p += bytes;
    pf = pf_end;
  }
  const float global = kE4M3 ? w.global : 1.0f;
  for (int r = 0; r < R; ++r)
    for (int m = 0; m < M; ++m) out[m][r] = hsum(acc[r][m]) * global;
}

template <int G, int M, int P, int kBits, bool kE2M1, bool kE4M3, int kBias, bool kVnni>
void packed_rows(const WeightPlan& w, const vnni::MultiPlanes& mp, int64_t n0, int64_t n1, float* y,
                 int64_t ldy) {
  const int64_t tiles = (w.n + kRows - 1) / kRows;
  for (int64_t t = n0 / kRows; t * kRows < n1; ++t) {
    const uint8_t* p = w.pack + t * w.pack_tile_bytes;
    float out[M][kRows];
    packed_tile<G, M, P, kBits, kE2M1, kE4M3, kBias, kVnni>(
        w, p, t + 1 < tiles ? p + w.pack_tile_bytes : p, mp, out);
    for (int r = 0; r < kRows; ++r) {
      const int64_t n = t * kRows + r;
      if (n < n0 || n >= n1) continue;
      for (int m = 0; m < M; ++m) y[m * ldy + n] = out[m][r];
    }
  }
}

template <bool kVnni>
void packed_multi_on(const WeightPlan& w, const vnni::MultiPlanes& mp, int64_t n0, int64_t n1,
                     float* y, int64_t ldy) {
  auto rows = [&]<int G, int kBits, bool kE2M1, bool kE4M3, int kBias>() {
    auto with_m = [&]<int M>() {
      auto with_p = [&]<int P>() {
        packed_rows<G, M, P, kBits, kE2M1, kE4M3, kBias, kVnni>(w, mp, n0, n1, y, ldy);
      };
      if (w.x_bf16)
        with_p.template operator()<2>();
      else
        with_p.template operator()<3>();
    };
    switch (mp.m) {
      case 1:
        return with_m.template operator()<1>();
      case 2:
        return with_m.template operator()<2>();
      case 3:
        return with_m.template operator()<3>();
      default:
        return with_m.template operator()<4>();
    }
  };
  if (w.pack_e4m3) return rows.template operator()<16, 4, true, true, -12>();   // nvfp4
  if (w.pack_e2m1) return rows.template operator()<32, 4, true, false, -12>();  // mxfp4
  if (w.scheme == Scheme::q4_0) return rows.template operator()<32, 4, false, false, -8>();
  if (w.scheme == Scheme::q5_0) return rows.template operator()<32, 5, false, false, -16>();
  auto affine = [&]<int kBits>() {  // affine; q4_1, q5_1 (g32, biases stored)
    switch (w.group) {
      case 32:
        return rows.template operator()<32, kBits, false, false, 0>();
      case 64:
        return rows.template operator()<64, kBits, false, false, 0>();
      default:
        return rows.template operator()<128, kBits, false, false, 0>();
    }
  };
  const int bits = w.scheme == Scheme::q4_1 ? 4 : w.scheme == Scheme::q5_1 ? 5 : w.bits;
  if (bits == 2) return affine.template operator()<2>();
  if (bits == 3) return affine.template operator()<3>();
  if (bits == 5) return affine.template operator()<5>();
  if (bits == 6) return affine.template operator()<6>();
  affine.template operator()<4>();
}

}  // namespace

}  // namespace quanta::cpu::avx2_int8
