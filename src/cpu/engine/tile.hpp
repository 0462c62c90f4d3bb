// M > 1: decode a tile of W into f32 once (it stays in L2), then reuse it for every row of x
// with a register-blocked micro-kernel.
//   nk tiles T[j][k] (rows of W along K): dot form, an MR x NR block of C accumulates MR x NR
//   vectors of partial sums over K, reduced across lanes at the end of the tile.
//   nk tiles packed K-major (large M): the same rows of W transposed into panels P[k][j] of
//   kPackNV vectors, so an nk tile runs the outer-product form too (no lane reductions).
//   kn tiles T[k][j] (rows of W along N): outer-product form, C[i][j..j+NV·W) += x[i][k] ·
//   T[k][j..] with x broadcast, as a BLAS sgemm micro-kernel.
#pragma once

#include "cpu/engine/common.hpp"
#include "cpu/engine/gguf.hpp"

namespace quanta::cpu::QUANTA_ISA {

// ---- decode ----

// The scale (and, affine, the bias) of group i of W [N, K] counted from row 0 (row n's groups
// start at n · K / G: callers form that once a row, a 64-bit division), as f32; nvfp4's global
// scale is the caller's.
template <Sc kSc>
inline void group_scale(const WeightPlan& w, int64_t i, float& s, float& b) {
  b = 0.0f;
  if constexpr (kSc == Sc::affine) {
    const int sz = sd_size(w.scale_dtype);
    s = sd_1(w.scales + i * sz, w.scale_dtype);
    b = sd_1(w.biases + i * sz, w.scale_dtype);
  } else if constexpr (kSc == Sc::e8m0) {
    s = e8m0_1(w.scales[i]);
  } else {
    s = e4m3_1(w.scales[i]);
  }
}

template <Val kVal, int B, Sc kSc>
inline void decode_nk_rows(const WeightPlan& w, int64_t n0, int64_t rows, int64_t k0, int64_t kc,
                           float* tile, int64_t ld) {
  const int64_t G = w.group;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t n = n0 + r;
    const uint8_t* row = row_ptr(w, n);
    float* out = tile + r * ld;
    if constexpr (kSc == Sc::f32) {
      float s;
      std::memcpy(&s, w.scales + (w.granularity == Granularity::channel ? n * 4 : 0), 4);
      const F sv = V::set1(s);
      int64_t e = 0;
      for (; e + W <= kc; e += W) V::store(out + e, V::mul(natural<kVal, B>(row, k0 + e), sv));
      if (e < kc) {  // fp8 rows end anywhere: decode a full vector, keep its first lanes
        V::store(out + e, V::zero());
        V::store_n(out + e, V::mul(natural<kVal, B>(row, k0 + e), sv), static_cast<int>(kc - e));
        e += W;
      }
      for (; e < ld; e += W) V::store(out + e, V::zero());
    } else {
      const int64_t row_groups = n * (w.k / G);
      for (int64_t g = k0 / G; g < (k0 + kc) / G; ++g) {
        float sg, bg;
        group_scale<kSc>(w, row_groups + g, sg, bg);
        const F s = V::set1(kSc == Sc::e4m3 ? sg * w.global : sg), b = V::set1(bg);
        for (int64_t e = g * G; e < (g + 1) * G; e += W) {
          const F q = natural<kVal, B>(row, e);
          V::store(out + e - k0, kSc == Sc::affine ? V::fma(q, s, b) : V::mul(q, s));
        }
      }
      for (int64_t e = kc; e < ld; e += W) V::store(out + e, V::zero());
    }
  }
}

template <Val kVal, int B, Sc kSc>
inline void decode_kn_rows(const WeightPlan& w, int64_t k0, int64_t rows, int64_t n0, int64_t nc,
                           float* tile, int64_t ld) {
  const int64_t G = w.group;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t k = k0 + r;
    const uint8_t* row = row_ptr(w, k);
    const int64_t g = G ? k / G : 0;
    float* out = tile + r * ld;
    for (int64_t j = 0; j < ld; j += W) {
      const int cnt = static_cast<int>(imin(W, nc - j));
      if (cnt <= 0) {
        V::store(out + j, V::zero());
        continue;
      }
      const int64_t n = n0 + j;
      const F q = natural<kVal, B>(row, n);
      F wv;
      if constexpr (kSc == Sc::affine) {
        const int sz = sd_size(w.scale_dtype);
        const uint8_t* sp = w.scales + (g * w.n + n) * sz;
        const uint8_t* bp = w.biases + (g * w.n + n) * sz;
        const F s = cnt == W ? V::load_sd(sp, w.scale_dtype) : V::load_sd_n(sp, w.scale_dtype, cnt);
        const F b = cnt == W ? V::load_sd(bp, w.scale_dtype) : V::load_sd_n(bp, w.scale_dtype, cnt);
        wv = V::fma(q, s, b);
      } else if constexpr (kSc == Sc::f32) {
        if (w.granularity == Granularity::channel) {
          wv = V::mul(q, V::load_n(reinterpret_cast<const float*>(w.scales) + n, cnt));
        } else {
          float s;
          std::memcpy(&s, w.scales, 4);
          wv = V::mul(q, V::set1(s));
        }
      } else {
        const uint8_t* sp = w.scales + g * w.n + n;
        alignas(64) uint8_t buf[64] = {};
        if (cnt < W) {
          std::memcpy(buf, sp, static_cast<std::size_t>(cnt));
          sp = buf;
        }
        const F s = kSc == Sc::e8m0 ? V::e8m0(sp) : V::mul(V::e4m3(sp), V::set1(w.global));
        wv = V::mul(q, s);
      }
      if (cnt == W) {
        V::store(out + j, wv);
      } else {
        V::store(out + j, V::zero());
        V::store_n(out + j, wv, cnt);
      }
    }
  }
}

inline void decode_nk(const WeightPlan& w, int64_t n0, int64_t rows, int64_t k0, int64_t kc,
                      float* tile, int64_t ld) {
  if (is_gguf(w.scheme)) {
    gguf::with_block(w.scheme, [&]<class T>() {
      for (int64_t r = 0; r < rows; ++r) {
        float* out = tile + r * ld;
        gguf::decode_row<T>(w, n0 + r, k0, kc, out);
        for (int64_t e = kc; e < ld; e += W) V::store(out + e, V::zero());
      }
    });
    return;
  }
  with_packed(w, [&]<Val kVal, int B, Sc kSc>() {
    decode_nk_rows<kVal, B, kSc>(w, n0, rows, k0, kc, tile, ld);
  });
}

inline void decode_kn(const WeightPlan& w, int64_t k0, int64_t rows, int64_t n0, int64_t nc,
                      float* tile, int64_t ld) {
  with_packed(w, [&]<Val kVal, int B, Sc kSc>() {
    decode_kn_rows<kVal, B, kSc>(w, k0, rows, n0, nc, tile, ld);
  });
}

// ---- packed nk tiles ----

inline constexpr int kPackNR = V::kPackNV * W;  // rows of W per panel
// K elements decoded per step: a multiple of every group and GGUF block; W rows of it
// (16 KB on AVX-512) stay in L1 between the decode and the transpose.
inline constexpr int64_t kPackChunk = 256;

// Panel p of `packed` (kc x kPackNR floats at p·kc·kPackNR): P[k][j] = W[n0 + p·kPackNR + j]
// [k0 + k] for k < kc, zero for rows >= `rows`. k0 and kc as for decode_nk; scratch holds
// W x kPackChunk floats.
inline void pack_nk(const WeightPlan& w, int64_t n0, int64_t rows, int64_t k0, int64_t kc,
                    float* scratch, float* packed) {
  const int64_t rows_pad = (rows + kPackNR - 1) / kPackNR * kPackNR;
  for (int64_t r0 = 0; r0 < rows_pad; r0 += W) {
    float* dst = packed + r0 / kPackNR * kc * kPackNR + r0 % kPackNR;
    const int64_t rr = imin(W, rows - r0);
    if (rr <= 0) {
      for (int64_t k = 0; k < kc; ++k) V::store(dst + k * kPackNR, V::zero());
      continue;
    }
    for (int64_t kb = 0; kb < kc; kb += kPackChunk) {
      const int64_t kk = imin(kPackChunk, kc - kb);
      decode_nk(w, n0 + r0, rr, k0 + kb, kk, scratch, kPackChunk);
      for (int64_t r = rr; r < W; ++r)
        for (int64_t e = 0; e < kPackChunk; e += W)
          V::store(scratch + r * kPackChunk + e, V::zero());
      for (int64_t k = 0; k < kk; k += W) {
        F v[W];
        for (int r = 0; r < W; ++r) v[r] = V::load(scratch + r * kPackChunk + k);
        V::transpose(v);
        const int n = static_cast<int>(imin(W, kk - k));
        for (int j = 0; j < n; ++j) V::store(dst + (kb + k + j) * kPackNR, v[j]);
      }
    }
  }
}

// ---- micro-kernels ----

// C[i0 + i][j0 + j] for i < MR, j < nr (<= NR): dot products of x rows and tile rows over kc.
template <int MR>
inline void dot_block(const float* x, int64_t ldx, const float* t, int64_t ld, int nr, int64_t kc,
                      float* c, int64_t ldc, bool accumulate) {
  constexpr int NR = V::kDotNR;
  static_assert(NR == 4, "the lane reduction handles four columns");
  const float* tr[NR];
  for (int j = 0; j < NR; ++j) tr[j] = t + (j < nr ? j : nr - 1) * ld;
  F acc[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) acc[i][j] = V::zero();
  int64_t k = 0;
  for (; k + W <= kc; k += W) {
    F tv[NR];
    for (int j = 0; j < NR; ++j) tv[j] = V::load(tr[j] + k);
    for (int i = 0; i < MR; ++i) {
      const F xv = V::load(x + i * ldx + k);
      for (int j = 0; j < NR; ++j) acc[i][j] = V::fma(xv, tv[j], acc[i][j]);
    }
  }
  if (k < kc) {  // x ends inside the vector; the tile is zero there
    F tv[NR];
    for (int j = 0; j < NR; ++j) tv[j] = V::load(tr[j] + k);
    for (int i = 0; i < MR; ++i) {
      const F xv = V::load_n(x + i * ldx + k, static_cast<int>(kc - k));
      for (int j = 0; j < NR; ++j) acc[i][j] = V::fma(xv, tv[j], acc[i][j]);
    }
  }
  for (int i = 0; i < MR; ++i) {
    float s[NR];
    V::hsum4_store(acc[i][0], acc[i][1], acc[i][2], acc[i][3], s);
    float* ci = c + i * ldc;
    for (int j = 0; j < nr; ++j) ci[j] = accumulate ? ci[j] + s[j] : s[j];
  }
}

inline void gemm_nk(const float* x, int64_t ldx, int64_t m, const float* t, int64_t ld, int64_t nt,
                    int64_t kc, float* c, int64_t ldc, bool accumulate) {
  constexpr int MR = V::kDotMR, NR = V::kDotNR;
  for (int64_t i = 0; i < m; i += MR) {
    const int mr = static_cast<int>(imin(MR, m - i));
    for (int64_t j = 0; j < nt; j += NR) {
      const int nr = static_cast<int>(imin(NR, nt - j));
      const float* xi = x + i * ldx;
      const float* tj = t + j * ld;
      float* cij = c + i * ldc + j;
      [&]<int... Is>(std::integer_sequence<int, Is...>) {
        ((mr == Is + 1 ? dot_block<Is + 1>(xi, ldx, tj, ld, nr, kc, cij, ldc, accumulate) : void()),
         ...);
      }
      (std::make_integer_sequence<int, MR>{});
    }
  }
}

// C[i][j .. j + NVC·W) for i < MR over kc rows of a kn tile; columns >= nt are not written.
template <int MR, int NVC>
inline void outer_block(const float* x, int64_t ldx, const float* t, int64_t ld, int64_t nt,
                        int64_t kc, float* c, int64_t ldc, bool accumulate) {
  F acc[MR][NVC];
  for (int i = 0; i < MR; ++i)
    for (int v = 0; v < NVC; ++v) acc[i][v] = V::zero();
  for (int64_t k = 0; k < kc; ++k) {
    F tv[NVC];
    for (int v = 0; v < NVC; ++v) tv[v] = V::load(t + k * ld + v * W);
    for (int i = 0; i < MR; ++i) {
      const F xb = V::set1(x[i * ldx + k]);
      for (int v = 0; v < NVC; ++v) acc[i][v] = V::fma(xb, tv[v], acc[i][v]);
    }
  }
  for (int i = 0; i < MR; ++i)
    for (int v = 0; v < NVC; ++v) {
      const int cnt = static_cast<int>(imin(W, nt - v * W));
      if (cnt <= 0) continue;
      float* p = c + i * ldc + v * W;
      if (cnt == W)
        V::store(p, accumulate ? V::add(V::load(p), acc[i][v]) : acc[i][v]);
      else
        V::store_n(p, accumulate ? V::add(V::load_n(p, cnt), acc[i][v]) : acc[i][v], cnt);
    }
}

inline void gemm_kn(const float* x, int64_t ldx, int64_t m, const float* t, int64_t ld, int64_t nt,
                    int64_t kc, float* c, int64_t ldc, bool accumulate) {
  constexpr int MR = V::kOutMR, NV = V::kOutNV;
  for (int64_t j = 0; j < nt; j += NV * W) {
    const int nv = static_cast<int>(imin(NV, (nt - j + W - 1) / W));
    for (int64_t i = 0; i < m; i += MR) {
      const int mr = static_cast<int>(imin(MR, m - i));
      const float* xi = x + i * ldx;
      float* cij = c + i * ldc + j;
      [&]<int... Is>(std::integer_sequence<int, Is...>) {
        (
            [&] {
              constexpr int kM = Is / NV + 1, kV = Is % NV + 1;
              if (mr == kM && nv == kV)
                outer_block<kM, kV>(xi, ldx, t + j, ld, nt - j, kc, cij, ldc, accumulate);
            }(),
            ...);
      }
      (std::make_integer_sequence<int, MR * NV>{});
    }
  }
}

// C[i][j] (+)= sum_k x[i][k] · W[n0 + j][k0 + k] for i < m, j < nt over a tile packed by
// pack_nk: each kPackMR-row block of x (kc floats per row, kept in L1) runs over every panel.
inline void gemm_packed(const float* x, int64_t ldx, int64_t m, const float* p, int64_t nt,
                        int64_t kc, float* c, int64_t ldc, bool accumulate) {
  constexpr int MR = V::kPackMR, NV = V::kPackNV;
  for (int64_t i = 0; i < m; i += MR) {
    const int mr = static_cast<int>(imin(MR, m - i));
    for (int64_t j = 0; j < nt; j += kPackNR) {
      const float* xi = x + i * ldx;
      const float* pj = p + j / kPackNR * kc * kPackNR;
      float* cij = c + i * ldc + j;
      [&]<int... Is>(std::integer_sequence<int, Is...>) {
        ((mr == Is + 1
              ? outer_block<Is + 1, NV>(xi, ldx, pj, kPackNR, nt - j, kc, cij, ldc, accumulate)
              : void()),
         ...);
      }
      (std::make_integer_sequence<int, MR>{});
    }
  }
}

}  // namespace quanta::cpu::QUANTA_ISA
