// Fused GEMV (M = 1) for W [N, K]: the packed weights stream once from memory, one row after
// another in address order, and are decoded in registers, never stored.
//
// Grouped formats (affine, mxfp4, mxfp8, nvfp4), per output row n:
//   y[n] = post · Σ_g s[n,g] · Σ_{k∈g} x[k]·q[n,k]  +  Σ_g b[n,g] · Σ_{k∈g} x[k]
// (q the element value, s its group scale, b the affine bias, post = 256 for E4M3 elements
// decoded as value/256 through binary16, or nvfp4's global scale). The bias term uses the
// group sums of x computed once per call (gemv_prep).
// 4-bit codes are unpacked two per byte (lane j of the two vectors holds codes 2j and 2j+1),
// so x is permuted once per call into that lane order instead of shuffling every weight.
// One row at a time on purpose: rows read side by side (to share the loads of x) are
// interleaved streams, which measured slower on the 2-core EPYC (docs/perf-cpu.md); 2-bit
// codes in the quad order are the exception (compute-bound: quad_rows).
//
// fp8 (e4m3/e5m2, f32 scale per channel or tensor): y[n] = s[n] · Σ_k x[k]·q[n,k].
// GGUF blocks: gguf_dot.hpp; several rows of x: gemv_multi.hpp; W [K, N]: gemv_kn.hpp.
#pragma once

#include "cpu/engine/common.hpp"
#ifdef QUANTA_CPU_X86
#include "cpu/x86/avx2_int8.hpp"
#include "cpu/x86/avx2_kquant.hpp"
#include "cpu/x86/vnni_affine.hpp"
#include "cpu/x86/vnni_kquant.hpp"
#endif

namespace quanta::cpu::QUANTA_ISA {

// GGUF's 32-element blocks, which the affine VNNI kernel serves (vnni_affine.hpp).
inline bool gguf32_int8(Scheme s) {
  return s == Scheme::q4_0 || s == Scheme::q4_1 || s == Scheme::q5_0 || s == Scheme::q5_1 ||
         s == Scheme::q8_0;
}

// Whether the integer planes of w go to the affine VNNI kernel (else to the K-quant one).
inline bool int8_affine_kernel(const WeightPlan& w) {
  return w.scheme == Scheme::affine || gguf32_int8(w.scheme) || w.scheme == Scheme::mxfp4 ||
         w.scheme == Scheme::nvfp4;
}

// Whether this GEMV of w takes x as integer planes (vnni_kquant.hpp, vnni_affine.hpp): the
// K-quants, GGUF q4_0 .. q8_0, affine 2- to 8-bit, mxfp4 and nvfp4 (K a
// multiple of 128) at M = 1..4 on the avx512 level when the driver found VNNI and VBMI
// usable, and on the avx2 level the packed 2-6-bit formats (avx2_int8_gemv, x86/avx2_int8.hpp) and
// the K-quants (x86/avx2_kquant.hpp) (w.int8_x, set once per call so that the prep and every task
// agree). xs then holds, after its sums, gemv_int8_pow2_count powers of two (per 256-element block
// for the K-quants, per group otherwise) and a last entry: 1 if the planes were made, 0 if x could
// not be split (non-finite or tiny values; xp then holds x as f32 and the float kernel runs).
inline bool gemv_int8_x(const WeightPlan& w) {
#ifdef QUANTA_CPU_X86
  if constexpr (W == 16)
    return w.int8_x && (kquant_scheme(w.scheme) || affine_planes_gemv(w.scheme, w.k));
  if constexpr (W == 8) return w.int8_x && (kquant_scheme(w.scheme) || avx2_int8_gemv(w));
#endif
  return false;
}

// The planes' powers of two: per group (affine and GGUF's 32-element blocks) or per 256-element
// block (K-quants).
inline int64_t gemv_int8_pow2_count(const WeightPlan& w) {
  return int8_affine_kernel(w) ? w.k / w.group : w.k / 256;
}

// Groups whose scales are converted to f32 per pass (a stack buffer per row).
inline constexpr int kGroupBlock = 64;

template <Val kVal, int B>
struct Chunk {
  static constexpr bool kNib = (B == 4);  // two codes per byte
  // Chunk c (2W elements) of the codes that start at p (a whole number of bytes): lane j of
  // q0/q1 holds element 2j + v (two codes per byte) or vW + j (otherwise) of the chunk.
  static void load(const uint8_t* p, int64_t c, F& q0, F& q1, uint32_t& nan) {
    if constexpr (kNib) {
      I lo, hi;
      V::nib2(p + c * W, lo, hi);
      if constexpr (kVal == Val::e2m1) {
        const auto t = V::tbl(kE2M1);
        q0 = V::lut(t, lo);
        q1 = V::lut(t, hi);
      } else {
        q0 = V::template ucvt<4>(lo);
        q1 = V::template ucvt<4>(hi);
      }
    } else if constexpr (kVal == Val::e4m3) {
      q0 = V::e4m3s(p + c * 2 * W, nan);
      q1 = V::e4m3s(p + c * 2 * W + W, nan);
    } else if constexpr (kVal == Val::e5m2) {
      q0 = V::e5m2(p + c * 2 * W);
      q1 = V::e5m2(p + c * 2 * W + W);
    } else {
      q0 = code_floats<B>(p, c * 2 * W);
      q1 = code_floats<B>(p, c * 2 * W + W);
    }
  }
};

// 2-bit codes in groups of a multiple of 4W: W bytes (4W codes) widen to one byte per lane and
// code j of every byte is masked in place (c · 4^j, converted exactly), so vector j holds
// elements 4t + j (lane t). x is permuted once per call to match and scaled by 4^-j (exact
// for |x| >= 2^-120), which saves the shifts and lane permutes of the natural-order unpack.
template <int B, int kG>
inline constexpr bool kQuadOrder = B == 2 && kG % (4 * W) == 0;
// 2-bit codes in groups of 2W (groups of 32 in 16-lane vectors): a chunk of 4W codes in the
// quad order spans two groups, lanes [0, W/2) the first and [W/2, W) the second, so a pair of
// groups takes one chunk and a half-and-half scale vector. Used when K is a multiple of 4W
// (whole pairs) in the M = 1 GEMV (WeightPlan::quad_pairs; gemv_quad_order says so at run
// time), else the natural order.
template <int B, int kG>
inline constexpr bool kQuadHalf = B == 2 && 2 * kG == 4 * W;

inline void quad2_load(const uint8_t* p, int64_t c, F (&q)[4]) {
  const I raw = V::u8(p + c * W), hi = V::template shr<4>(raw);
  q[0] = quad_code<0>(raw, hi);
  q[1] = quad_code<1>(raw, hi);
  q[2] = quad_code<2>(raw, hi);
  q[3] = quad_code<3>(raw, hi);
}

// The scales (and biases) of groups [ga, gb) of storage row `row`, fetched ahead (a block of
// groups at a time, spread along the row): they are short bursts between long runs of codes,
// which the hardware prefetchers do not run ahead of.
inline constexpr int kScaleRowsAhead = 2;
template <Sc kSc>
inline void prefetch_scales(const WeightPlan& w, int64_t row, int64_t ga, int64_t gb) {
  const int64_t ng = w.k / w.group;
  const int64_t sz = kSc == Sc::affine ? sd_size(w.scale_dtype) : 1;
  for (int64_t b = (row * ng + ga) * sz; b < (row * ng + gb) * sz; b += 64) {
    V::prefetch(w.scales + b);
    if constexpr (kSc == Sc::affine) V::prefetch(w.biases + b);
  }
}

// Scales of groups [g0, g0 + cnt) of storage row `row` (nk), as f32.
template <Sc kSc>
inline void group_scales(const WeightPlan& w, int64_t row, int64_t g0, int cnt, float* out) {
  const int64_t ng = w.k / w.group;
  if constexpr (kSc == Sc::affine) {
    const int sz = sd_size(w.scale_dtype);
    const uint8_t* p = w.scales + (row * ng + g0) * sz;
    int i = 0;
    for (; i + W <= cnt; i += W) V::store(out + i, V::load_sd(p + i * sz, w.scale_dtype));
    if (i < cnt) V::store_n(out + i, V::load_sd_n(p + i * sz, w.scale_dtype, cnt - i), cnt - i);
  } else {
    const uint8_t* p = w.scales + row * ng + g0;
    int i = 0;
    for (; i + W <= cnt; i += W)
      V::store(out + i, kSc == Sc::e8m0 ? V::e8m0(p + i) : V::e4m3(p + i));
    for (; i < cnt; ++i) out[i] = kSc == Sc::e8m0 ? e8m0_1(p[i]) : e4m3_1(p[i]);
  }
}

// Σ_g b[row, g] · xs[g] over groups [g0, g0 + cnt), as a vector of partial sums.
inline F bias_dot(const WeightPlan& w, int64_t row, int64_t g0, int cnt, const float* xs) {
  const int64_t ng = w.k / w.group;
  const int sz = sd_size(w.scale_dtype);
  const uint8_t* p = w.biases + (row * ng + g0) * sz;
  F acc = V::zero();
  int i = 0;
  for (; i + W <= cnt; i += W)
    acc = V::fma(V::load_sd(p + i * sz, w.scale_dtype), V::load(xs + i), acc);
  if (i < cnt)
    acc = V::fma(V::load_sd_n(p + i * sz, w.scale_dtype, cnt - i), V::load_n(xs + i, cnt - i), acc);
  return acc;
}

// The part of a GEMV one call computes: output rows [n0, n1), reduction range [k0, k1) (k0, k1
// multiples of the group or block; k1 may be K for fp8). The driver passes whole rows (0, K):
// the rows are then one stream, which prefetch_stream assumes.
struct Span {
  int64_t n0, n1, k0, k1;
};

// Affine 2-bit codes in the quad order (kQuadOrder), kQuadRows rows per pass: each load of x
// (57 KB at K = 14336, streamed from L2) serves every row of the pass, so a vector of 16 codes
// costs its unpack and one FMA (from DRAM: 1 row 3.7 ms, 2 rows 2.8, 4 rows 2.6-2.8 for g64).
// The rows' code streams are prefetched side by side. Missing rows of a last short pass repeat
// its last row (summed, not stored).
inline constexpr int kQuadRows = 4;
template <int B, int kG>
inline void quad_rows(const WeightPlan& w, const float* xp, const float* xs, const Span& sp,
                      float* y) {
  constexpr int R = kQuadRows;
  constexpr int64_t G = kG, kGroupBytes = G * B / 8;
  const int64_t ga = sp.k0 / G, gb = sp.k1 / G;
  alignas(64) float sc[R][kGroupBlock];
  for (int64_t n = sp.n0; n < sp.n1; n += R) {
    const int rows = static_cast<int>(imin(R, sp.n1 - n));
    const uint8_t* rp[R];
    F acc[R][2], bacc[R];
    for (int r = 0; r < R; ++r) {
      rp[r] = row_ptr(w, n + imin(r, rows - 1));
      acc[r][0] = acc[r][1] = bacc[r] = V::zero();
    }
    for (int64_t g0 = ga; g0 < gb; g0 += kGroupBlock) {
      const int cnt = static_cast<int>(imin(kGroupBlock, gb - g0));
      for (int r = 0; r < R; ++r) {
        if (n + R + r < w.n) prefetch_scales<Sc::affine>(w, n + R + r, g0, g0 + cnt);
        group_scales<Sc::affine>(w, n + imin(r, rows - 1), g0, cnt, sc[r]);
        bacc[r] = V::add(bacc[r], bias_dot(w, n + imin(r, rows - 1), g0, cnt, xs + g0));
      }
      const float* x = xp + g0 * G;
      auto group = [&](int g, int chain) {
        const float* gx = x + g * G;
        F d[R][2];
        for (int r = 0; r < R; ++r) d[r][0] = d[r][1] = V::zero();
        for (int64_t c = 0; c < G / (4 * W); ++c) {
          const F x0 = V::load(gx + c * 4 * W), x1 = V::load(gx + c * 4 * W + W);
          const F x2 = V::load(gx + c * 4 * W + 2 * W), x3 = V::load(gx + c * 4 * W + 3 * W);
          for (int r = 0; r < R; ++r) {
            const uint8_t* gp = rp[r] + (g0 + g) * kGroupBytes;
            prefetch_stream(gp + c * W);
            F q[4];
            quad2_load(gp, c, q);
            d[r][0] = V::fma(x0, q[0], d[r][0]);
            d[r][1] = V::fma(x1, q[1], d[r][1]);
            d[r][0] = V::fma(x2, q[2], d[r][0]);
            d[r][1] = V::fma(x3, q[3], d[r][1]);
          }
        }
        for (int r = 0; r < R; ++r)
          acc[r][chain] = V::fma(V::set1(sc[r][g]), V::add(d[r][0], d[r][1]), acc[r][chain]);
      };
      if constexpr (kQuadHalf<B, kG>) {
        // Groups g, g + 1 in one chunk (cnt is even: K is a multiple of 4W).
        auto pair = [&](int g, int chain) {
          const float* gx = x + g * G;
          const F x0 = V::load(gx), x1 = V::load(gx + W);
          const F x2 = V::load(gx + 2 * W), x3 = V::load(gx + 3 * W);
          for (int r = 0; r < R; ++r) {
            const uint8_t* gp = rp[r] + (g0 + g) * kGroupBytes;
            if ((g & 7) == 0) prefetch_stream(gp);  // a line per 4 pairs
            F q[4];
            quad2_load(gp, 0, q);
            const F d =
                V::add(V::fma(x2, q[2], V::mul(x0, q[0])), V::fma(x3, q[3], V::mul(x1, q[1])));
            acc[r][chain] = V::fma(V::split2(sc[r] + g), d, acc[r][chain]);
          }
        };
        for (int g = 0; g < cnt; g += 4) {
          pair(g, 0);
          if (g + 2 < cnt) pair(g + 2, 1);
        }
      } else {
        int g = 0;
        for (; g + 2 <= cnt; g += 2) {
          group(g, 0);
          group(g + 1, 1);
        }
        if (g < cnt) group(g, 0);
      }
    }
    for (int r = 0; r < rows; ++r)
      y[n + r] = V::hsum(V::add(acc[r][0], acc[r][1])) + V::hsum(bacc[r]);
  }
}

// y[n] for n in the span, over its K range; kG is the group size.
template <Val kVal, int B, Sc kSc, int kG>
inline void grouped_rows(const WeightPlan& w, const float* xp, const float* xs, const Span& sp,
                         float* y) {
  if constexpr (kQuadOrder<B, kG> && kSc == Sc::affine) {
    quad_rows<B, kG>(w, xp, xs, sp, y);
    return;
  } else if constexpr (kQuadHalf<B, kG> && kSc == Sc::affine) {
    if (w.quad_pairs && w.k % (4 * W) == 0) {
      quad_rows<B, kG>(w, xp, xs, sp, y);
      return;
    }
  }
  using C = Chunk<kVal, B>;
  constexpr int64_t G = kG, kGroupBytes = G * B / 8;
  const int64_t ga = sp.k0 / G, gb = sp.k1 / G;
  float post = kVal == Val::e4m3 ? 256.0f : 1.0f;
  if constexpr (kSc == Sc::e4m3) post *= w.global;
  alignas(64) float sc[kGroupBlock + 4];
  for (int64_t n = sp.n0; n < sp.n1; ++n) {
    const uint8_t* row = row_ptr(w, n);
    F acc = V::zero(), acc2 = V::zero(), bacc = V::zero();
    uint32_t nan = 0;
    for (int64_t g0 = ga; g0 < gb; g0 += kGroupBlock) {
      const int cnt = static_cast<int>(imin(kGroupBlock, gb - g0));
      if (n + kScaleRowsAhead < w.n) prefetch_scales<kSc>(w, n + kScaleRowsAhead, g0, g0 + cnt);
      group_scales<kSc>(w, n, g0, cnt, sc);
      sc[cnt] = sc[cnt + 1] = sc[cnt + 2] = 0.0f;  // chunks may run past an odd last group
      if constexpr (kSc == Sc::affine) bacc = V::add(bacc, bias_dot(w, n, g0, cnt, xs + g0));
      const uint8_t* p = row + g0 * kGroupBytes;
      const float* x = xp + g0 * G;
      if constexpr (G < 2 * W) {
        // nvfp4 (16 codes per scale) in 16-lane vectors: a chunk covers two groups, four
        // chunks one cache line.
        static_assert(B == 4 && W == 16, "four chunks of 16 bytes per cache line");
        const int64_t chunks = (cnt * G + 2 * W - 1) / (2 * W);
        auto chunk = [&](int64_t c, F& a) {
          F q0, q1;
          C::load(p, c, q0, q1, nan);
          const F d = V::fma(V::load(x + c * 2 * W + W), q1, V::mul(V::load(x + c * 2 * W), q0));
          a = V::fma(V::split2(sc + c * 2 * W / G), d, a);
        };
        int64_t c = 0;
        for (; c + 4 <= chunks; c += 4) {
          prefetch_stream(p + c * W);
          prefetch_stream(p + c * W + 32);
          chunk(c, acc);
          chunk(c + 1, acc2);
          chunk(c + 2, acc);
          chunk(c + 3, acc2);
        }
        for (; c < chunks; ++c) chunk(c, acc);
      } else {
        // Two groups in flight, each folding into its own accumulator (FMA latency).
        auto group = [&](int g, F& a) {
          const uint8_t* gp = p + g * kGroupBytes;
          const float* gx = x + g * G;
          if constexpr (kQuadOrder<B, kG>) {
            F q[4], d0 = V::zero(), d1 = V::zero();
            for (int64_t c = 0; c < G / (4 * W); ++c) {
              prefetch_stream(gp + c * W);
              quad2_load(gp, c, q);
              d0 = V::fma(V::load(gx + c * 4 * W), q[0], d0);
              d1 = V::fma(V::load(gx + c * 4 * W + W), q[1], d1);
              d0 = V::fma(V::load(gx + c * 4 * W + 2 * W), q[2], d0);
              d1 = V::fma(V::load(gx + c * 4 * W + 3 * W), q[3], d1);
            }
            a = V::fma(V::set1(sc[g]), V::add(d0, d1), a);
            return;
          }
          F q0, q1;
          prefetch_stream(gp);
          C::load(gp, 0, q0, q1, nan);
          F d0 = V::mul(V::load(gx), q0), d1 = V::mul(V::load(gx + W), q1);
          for (int64_t c = 1; c < G / (2 * W); ++c) {
            // Once a line: per chunk, 8-bit codes at 8 lanes issued 32 prefetches per 128.
            if ((c * W * B / 4) % 64 == 0) prefetch_stream(gp + c * W * B / 4);
            C::load(gp, c, q0, q1, nan);
            d0 = V::fma(V::load(gx + c * 2 * W), q0, d0);
            d1 = V::fma(V::load(gx + c * 2 * W + W), q1, d1);
          }
          a = V::fma(V::set1(sc[g]), V::add(d0, d1), a);
        };
        int g = 0;
        if constexpr (kVal == Val::e4m3 && G == 32) {
          // mxfp8: two groups are one cache line, so one prefetch and one NaN check per line
          // (per 4W codes) instead of per 2W codes (the per-group form issued 4 prefetches and 2
          // NaN checks per 32 codes at 16 lanes, and a NaN check per 8 codes at 8 lanes).
          constexpr int kVecs = G / W;  // 2 or 4 vectors a group
          for (; g + 2 <= cnt; g += 2) {
            const uint8_t* gp = p + g * kGroupBytes;
            const float* gx = x + g * G;
            prefetch_stream(gp);
            bool bad = false;
            for (int i = 0; i < 2 * G; i += 4 * W) bad |= V::e4m3_nan4(gp + i);
            if (bad) nan = 1;
            auto dot = [&](int h) {  // group g + h in two chains
              const uint8_t* q = gp + h * G;
              const float* gxh = gx + h * G;
              F q0, q1;
              V::e4m3v2(q, q0, q1);
              F d0 = V::mul(V::load(gxh), q0), d1 = V::mul(V::load(gxh + W), q1);
              for (int v = 2; v < kVecs; v += 2) {
                V::e4m3v2(q + v * W, q0, q1);
                d0 = V::fma(V::load(gxh + v * W), q0, d0);
                d1 = V::fma(V::load(gxh + v * W + W), q1, d1);
              }
              return V::add(d0, d1);
            };
            acc = V::fma(V::set1(sc[g]), dot(0), acc);
            acc2 = V::fma(V::set1(sc[g + 1]), dot(1), acc2);
          }
        } else {
          for (; g + 2 <= cnt; g += 2) {
            group(g, acc);
            group(g + 1, acc2);
          }
        }
        if (g < cnt) group(g, acc);
      }
    }
    const float v = V::hsum(V::add(acc, acc2)) * post + V::hsum(bacc);
    y[n] = nan ? __builtin_nanf("") : v;
  }
}

// fp8 with per-channel or per-tensor f32 scales; K is any length.
template <Val kVal>
inline void fp8_rows(const WeightPlan& w, const float* xp, const Span& sp, float* y) {
  const float post = kVal == Val::e4m3 ? 256.0f : 1.0f;
  for (int64_t n = sp.n0; n < sp.n1; ++n) {
    const uint8_t* row = row_ptr(w, n);
    // Four accumulators: with two, the FMA latency (two dependent FMAs per 2W codes) capped the
    // loop below what the decode allows.
    F a0 = V::zero(), a1 = V::zero(), a2 = V::zero(), a3 = V::zero();
    uint32_t nan = 0;
    auto step = [&](const uint8_t* p, int64_t e, F& b0, F& b1) {
      F q0, q1;
      if constexpr (kVal == Val::e4m3) {
        q0 = V::e4m3s(p, nan);
        q1 = V::e4m3s(p + W, nan);
      } else {
        q0 = V::e5m2(p);
        q1 = V::e5m2(p + W);
      }
      b0 = V::fma(V::load(xp + e), q0, b0);
      b1 = V::fma(V::load(xp + e + W), q1, b1);
    };
    int64_t e = sp.k0;
    for (; e + 4 * W <= sp.k1; e += 4 * W) {
      prefetch_stream(row + e);
      if constexpr (kVal == Val::e4m3) {  // one NaN check for the 4W codes
        if (V::e4m3_nan4(row + e)) nan = 1;
        F q0, q1, q2, q3;
        V::e4m3v2(row + e, q0, q1);
        V::e4m3v2(row + e + 2 * W, q2, q3);
        a0 = V::fma(V::load(xp + e), q0, a0);
        a1 = V::fma(V::load(xp + e + W), q1, a1);
        a2 = V::fma(V::load(xp + e + 2 * W), q2, a2);
        a3 = V::fma(V::load(xp + e + 3 * W), q3, a3);
      } else {
        step(row + e, e, a0, a1);
        step(row + e + 2 * W, e + 2 * W, a2, a3);
      }
    }
    for (; e + 2 * W <= sp.k1; e += 2 * W) {
      prefetch_stream(row + e);
      step(row + e, e, a0, a1);
    }
    if (e < sp.k1) {
      // The last partial chunk from a zero-padded copy (x is zero past K).
      alignas(64) uint8_t tail[2 * W] = {};
      std::memcpy(tail, row + e, static_cast<std::size_t>(sp.k1 - e));
      step(tail, e, a0, a1);
    }
    float s;
    std::memcpy(&s, w.scales + (w.granularity == Granularity::channel ? n * 4 : 0), 4);
    const float v = V::hsum(V::add(V::add(a0, a1), V::add(a2, a3))) * post * s;
    y[n] = nan ? __builtin_nanf("") : v;
  }
}

// Whether the format's GEMV reads x in the two-nibble lane order.
inline bool gemv_nibble_order(const WeightPlan& w) {
  return (w.scheme == Scheme::affine && w.bits == 4) || w.scheme == Scheme::mxfp4 ||
         w.scheme == Scheme::nvfp4;
}

// Elements per entry of the x sums the GEMV reads: the affine group (bias term) or the
// K-quant sub-block (min terms); 0 when none.
inline int64_t gemv_xs_elems(const WeightPlan& w) {
  switch (w.scheme) {
    case Scheme::affine:
      return w.group;
    case Scheme::mxfp4:  // on x's planes: the VNNI kernel's bias terms, -12·scale per group
    case Scheme::nvfp4:
      return gemv_int8_x(w) ? w.group : 0;
    case Scheme::q2_K:
    case Scheme::q3_K:
    case Scheme::q6_K:
      return 16;
    case Scheme::q4_K:
    case Scheme::q5_K:
      return 32;
    case Scheme::q4_1:  // the min terms
    case Scheme::q5_1:
    case Scheme::q4_0:  // the VNNI kernel's bias terms, -8d and -16d per block
    case Scheme::q5_0:
      return 32;
    case Scheme::q8_0:  // on x's planes: the VNNI kernel's bias terms, -128d per block
      return gemv_int8_x(w) ? 32 : 0;
    default:
      return 0;
  }
}

inline int64_t gemv_xs_count(const WeightPlan& w) {
  const int64_t e = gemv_xs_elems(w);
  return (e ? w.k / e : 0) + (gemv_int8_x(w) ? gemv_int8_pow2_count(w) + 1 : 0);
}

// Whether the format's GEMV reads x in the 2-bit quad order (kQuadOrder).
inline bool gemv_quad_order(const WeightPlan& w) {
  return w.scheme == Scheme::affine && w.bits == 2 &&
         (w.group % (4 * W) == 0 || (w.quad_pairs && 2 * w.group == 4 * W && w.k % (4 * W) == 0));
}

inline void gemv_prep(const WeightPlan& w, const float* x, float* xp, float* xs) {
  const int64_t K = w.k;
  if (const int64_t e = gemv_xs_elems(w)) {
    for (int64_t g = 0; g < K / e; ++g) {
      F s = V::zero();
      for (int64_t i = 0; i < e; i += W) s = V::add(s, V::load(x + g * e + i));
      xs[g] = V::hsum(s);
    }
  }
#ifdef QUANTA_CPU_X86
  // The planes first: where they are made the kernels read only them, so x's f32 copy below (a
  // scalar reorder of K elements: ~15 us of a 14336-wide call, serial before the tasks) is
  // skipped; where x cannot be split it overwrites whatever the planes' prep left.
  if (gemv_int8_x(w)) {
    float* pow2 = xs + K / gemv_xs_elems(w);
    auto* planes = reinterpret_cast<uint8_t*>(xp);
    bool made;
    if constexpr (W == 8)
      made = kquant_scheme(w.scheme)
                 ? avx2_kquant::prep(x, K, w.kquant_quad != nullptr, planes, pow2)
                 : avx2_int8::prep(w, x, planes, pow2);
    else
      made = int8_affine_kernel(w) ? vnni::affine_prep(w, x, planes, pow2)
                                   : vnni::prep(w.scheme, x, K, planes, pow2);
    pow2[gemv_int8_pow2_count(w)] = made ? 1.0f : 0.0f;
    if (made) return;
  }
#endif
  if (gemv_quad_order(w)) {  // K is a multiple of 4W
    constexpr float kPow4[4] = {1.0f, 0.25f, 0.0625f, 0.015625f};
    for (int64_t c = 0; c < K; c += 4 * W)
      for (int j = 0; j < 4; ++j)
        for (int t = 0; t < W; ++t) xp[c + j * W + t] = x[c + 4 * t + j] * kPow4[j];
  } else if (gemv_nibble_order(w)) {
    for (int64_t c = 0; c < K; c += 2 * W)
      for (int v = 0; v < 2; ++v)
        for (int j = 0; j < W; ++j) {
          const int64_t src = c + 2 * j + v;
          xp[c + v * W + j] = src < K ? x[src] : 0.0f;
        }
  } else {
    std::memcpy(xp, x, static_cast<std::size_t>(K) * sizeof(float));
  }
  // The chunked loops may read up to one chunk past K: zeros there.
  const int64_t done = gemv_nibble_order(w) ? (K + 2 * W - 1) / (2 * W) * (2 * W) : K;
  for (int64_t i = done; i < K + kGemvXPad; ++i) xp[i] = 0.0f;
}

#ifdef QUANTA_CPU_X86
// y[i·ldy + n] for the m rows of x whose planes gemv_prep made (xp[i], xs[i]), n in [n0, n1).
inline void gemv_int8_rows(const WeightPlan& w, const float* const* xp, const float* const* xs,
                           int m, float* y, int64_t ldy, int64_t n0, int64_t n1) {
  vnni::MultiPlanes mp;
  mp.m = m;
  for (int i = 0; i < m; ++i) {
    mp.planes[i] = reinterpret_cast<const uint8_t*>(xp[i]);
    mp.xs[i] = xs[i];
    mp.pow2[i] = xs[i] + w.k / gemv_xs_elems(w);
  }
  if constexpr (W == 8) {
    if (kquant_scheme(w.scheme)) return avx2_kquant::gemv_multi(w, mp, n0, n1, y, ldy);
    return avx2_int8::packed_multi(w, mp, n0, n1, y, ldy);
  }
  if (w.pack != nullptr) return vnni::affine_packed_multi(w, mp, n0, n1, y, ldy);
  if (int8_affine_kernel(w)) return vnni::affine_gemv_multi(w, mp, n0, n1, y, ldy);
  vnni::gemv_multi(w, mp, n0, n1, y, ldy);
}
#endif

}  // namespace quanta::cpu::QUANTA_ISA
