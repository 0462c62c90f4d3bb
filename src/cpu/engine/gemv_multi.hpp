// Fused GEMV for a few rows of x at once (M = 2..4, instantiated for two and four rows): each chunk
// of weights is decoded in registers once and multiplied by up to four rows of x, so the weights
// stream once per pass instead of once per row, with none of the tiled path's tile stores and
// lane reductions (which cost 4x at M = 2). Same formulas as gemv.hpp and gguf_dot.hpp; rows
// of x beyond the pass's count are zero rows, their results dropped.
#pragma once

#include "cpu/engine/gemv.hpp"
#include "cpu/engine/gguf.hpp"

namespace quanta::cpu::QUANTA_ISA {

inline constexpr int kMultiRows = 4;

// Rows of prepared x (each the lane order of gemv_prep) and their sums, for one pass.
struct MultiX {
  const float* xp[kMultiRows];
  const float* xs[kMultiRows];
  int m;  // rows of x that are real (1..4); the rest point at a zero row
};

template <Val kVal, int B, Sc kSc, int kG, int M>
inline void grouped_rows_multi(const WeightPlan& w, const MultiX& mx, const Span& sp, float* y,
                               int64_t ldy) {
  using C = Chunk<kVal, B>;
  constexpr int64_t G = kG, kGroupBytes = G * B / 8;
  const int64_t ga = sp.k0 / G, gb = sp.k1 / G;
  float post = kVal == Val::e4m3 ? 256.0f : 1.0f;
  if constexpr (kSc == Sc::e4m3) post *= w.global;
  alignas(64) float sc[kGroupBlock + 4];
  for (int64_t n = sp.n0; n < sp.n1; ++n) {
    const uint8_t* row = row_ptr(w, n);
    F acc[M], acc2[M], bacc[M];  // acc2: mxfp8's second group of a line
    for (int i = 0; i < M; ++i) acc[i] = acc2[i] = bacc[i] = V::zero();
    uint32_t nan = 0;
    for (int64_t g0 = ga; g0 < gb; g0 += kGroupBlock) {
      const int cnt = static_cast<int>(imin(kGroupBlock, gb - g0));
      if (n + kScaleRowsAhead < w.n) prefetch_scales<kSc>(w, n + kScaleRowsAhead, g0, g0 + cnt);
      group_scales<kSc>(w, n, g0, cnt, sc);
      sc[cnt] = sc[cnt + 1] = sc[cnt + 2] = 0.0f;
      if constexpr (kSc == Sc::affine)
        for (int i = 0; i < M; ++i)
          bacc[i] = V::add(bacc[i], bias_dot(w, n, g0, cnt, mx.xs[i] + g0));
      const uint8_t* p = row + g0 * kGroupBytes;
      if constexpr (G < 2 * W) {
        // nvfp4 in 16-lane vectors: a chunk covers two groups.
        const int64_t chunks = (cnt * G + 2 * W - 1) / (2 * W);
        for (int64_t c = 0; c < chunks; ++c) {
          if ((c & 3) == 0) prefetch_stream(p + c * W);
          F q0, q1;
          C::load(p, c, q0, q1, nan);
          const F s = V::split2(sc + c * 2 * W / G);
          const int64_t e = g0 * G + c * 2 * W;
          for (int i = 0; i < M; ++i) {
            const F d = V::fma(V::load(mx.xp[i] + e + W), q1, V::mul(V::load(mx.xp[i] + e), q0));
            acc[i] = V::fma(s, d, acc[i]);
          }
        }
      } else {
        int g = 0;
        if constexpr (kVal == Val::e4m3 && G == 2 * W) {
          // mxfp8: two groups are one cache line, so one prefetch and one NaN check a line (as
          // grouped_rows).
          for (; g + 2 <= cnt; g += 2) {
            const uint8_t* gp = p + g * kGroupBytes;
            const int64_t e0 = (g0 + g) * G;
            prefetch_stream(gp);
            if (V::e4m3_nan4(gp)) nan = 1;
            F q[4];
            V::e4m3v2(gp, q[0], q[1]);
            V::e4m3v2(gp + 2 * W, q[2], q[3]);
            const F s0 = V::set1(sc[g]), s1 = V::set1(sc[g + 1]);
            for (int i = 0; i < M; ++i) {
              const float* xe = mx.xp[i] + e0;
              const F d0 = V::fma(V::load(xe + W), q[1], V::mul(V::load(xe), q[0]));
              const F d1 = V::fma(V::load(xe + 3 * W), q[3], V::mul(V::load(xe + 2 * W), q[2]));
              acc[i] = V::fma(s0, d0, acc[i]);
              acc2[i] = V::fma(s1, d1, acc2[i]);
            }
          }
        }
        for (; g < cnt; ++g) {
          const uint8_t* gp = p + g * kGroupBytes;
          const int64_t e0 = (g0 + g) * G;
          F d[M];
          for (int i = 0; i < M; ++i) d[i] = V::zero();
          if constexpr (kQuadOrder<B, kG>) {
            for (int64_t c = 0; c < G / (4 * W); ++c) {
              prefetch_stream(gp + c * W);
              F q[4];
              quad2_load(gp, c, q);
              for (int i = 0; i < M; ++i)
                for (int j = 0; j < 4; ++j)
                  d[i] = V::fma(V::load(mx.xp[i] + e0 + c * 4 * W + j * W), q[j], d[i]);
            }
          } else {
            for (int64_t c = 0; c < G / (2 * W); ++c) {
              // Once a line, as gemv.hpp's grouped rows.
              if ((c * W * B / 4) % 64 == 0) prefetch_stream(gp + c * W * B / 4);
              F q0, q1;
              C::load(gp, c, q0, q1, nan);
              for (int i = 0; i < M; ++i) {
                d[i] = V::fma(V::load(mx.xp[i] + e0 + c * 2 * W), q0, d[i]);
                d[i] = V::fma(V::load(mx.xp[i] + e0 + c * 2 * W + W), q1, d[i]);
              }
            }
          }
          const F s = V::set1(sc[g]);
          for (int i = 0; i < M; ++i) acc[i] = V::fma(s, d[i], acc[i]);
        }
      }
    }
    for (int i = 0; i < mx.m; ++i) {
      const float v = V::hsum(V::add(acc[i], acc2[i])) * post + V::hsum(bacc[i]);
      y[i * ldy + n] = nan ? __builtin_nanf("") : v;
    }
  }
}

template <Val kVal, int M>
inline void fp8_rows_multi(const WeightPlan& w, const MultiX& mx, const Span& sp, float* y,
                           int64_t ldy) {
  const float post = kVal == Val::e4m3 ? 256.0f : 1.0f;
  for (int64_t n = sp.n0; n < sp.n1; ++n) {
    const uint8_t* row = row_ptr(w, n);
    F acc[M][4];  // four chains a row: one FMA of latency a line
    for (int i = 0; i < M; ++i)
      for (int j = 0; j < 4; ++j) acc[i][j] = V::zero();
    uint32_t nan = 0;
    auto step = [&](const uint8_t* p, int64_t e) {
      F q0, q1;
      if constexpr (kVal == Val::e4m3) {
        q0 = V::e4m3s(p, nan);
        q1 = V::e4m3s(p + W, nan);
      } else {
        q0 = V::e5m2(p);
        q1 = V::e5m2(p + W);
      }
      for (int i = 0; i < M; ++i) {
        acc[i][0] = V::fma(V::load(mx.xp[i] + e), q0, acc[i][0]);
        acc[i][1] = V::fma(V::load(mx.xp[i] + e + W), q1, acc[i][1]);
      }
    };
    int64_t e = sp.k0;
    if constexpr (kVal == Val::e4m3) {  // a line (4W codes) a step: one NaN check and prefetch
      for (; e + 4 * W <= sp.k1; e += 4 * W) {
        prefetch_stream(row + e);
        if (V::e4m3_nan4(row + e)) nan = 1;
        F q[4];
        V::e4m3v2(row + e, q[0], q[1]);
        V::e4m3v2(row + e + 2 * W, q[2], q[3]);
        for (int i = 0; i < M; ++i)
          for (int j = 0; j < 4; ++j)
            acc[i][j] = V::fma(V::load(mx.xp[i] + e + j * W), q[j], acc[i][j]);
      }
    }
    for (; e + 2 * W <= sp.k1; e += 2 * W) {
      prefetch_stream(row + e);
      step(row + e, e);
    }
    if (e < sp.k1) {
      alignas(64) uint8_t tail[2 * W] = {};
      std::memcpy(tail, row + e, static_cast<std::size_t>(sp.k1 - e));
      step(tail, e);
    }
    float s;
    std::memcpy(&s, w.scales + (w.granularity == Granularity::channel ? n * 4 : 0), 4);
    for (int i = 0; i < mx.m; ++i) {
      const F a = V::add(V::add(acc[i][0], acc[i][1]), V::add(acc[i][2], acc[i][3]));
      const float v = V::hsum(a) * post * s;
      y[i * ldy + n] = nan ? __builtin_nanf("") : v;
    }
  }
}

// GGUF: the block's weights decoded once per vector (visitor), then one FMA per row of x.
template <class T, int M>
inline void gguf_rows_multi(const WeightPlan& w, const MultiX& mx, const Span& sp, float* y,
                            int64_t ldy) {
  const int64_t b0 = sp.k0 / T::kElems, b1 = sp.k1 / T::kElems;
  for (int64_t n = sp.n0; n < sp.n1; ++n) {
    const uint8_t* row = row_ptr(w, n);
    F acc[M];
    for (int i = 0; i < M; ++i) acc[i] = V::zero();
    for (int64_t blk = b0; blk < b1; ++blk) {
      const uint8_t* bp = row + blk * T::kBytes;
      for (int64_t b = 0; b < T::kBytes; b += 64) prefetch_stream(bp + b);
      const int64_t e0 = blk * T::kElems;
      T::visit(bp, [&](int off, F q, float s, float m) {
        const F wv = V::fma(q, V::set1(s), V::set1(-m));
        for (int i = 0; i < M; ++i) acc[i] = V::fma(V::load(mx.xp[i] + e0 + off), wv, acc[i]);
      });
    }
    for (int i = 0; i < mx.m; ++i) y[i * ldy + n] = V::hsum(acc[i]);
  }
}

}  // namespace quanta::cpu::QUANTA_ISA
