// Fused GEMV for W stored [K, N] (the vecmat layout): y[n] += Σ_{k∈[k0,k1)} x[k] · w[k, n],
// w[k, n] = q·s[k/G, n] (+ b[k/G, n]). Sixteen K-rows share one scale row (every group has
// >= 16 rows), so their scale vectors are loaded once per column chunk; the rows are adjacent
// in memory, so each thread streams one contiguous range. fp8 scales and the nvfp4 global
// scale are applied once at the end (gemv_kn_finish).
#pragma once

#include "cpu/engine/common.hpp"

namespace quanta::cpu::QUANTA_ISA {

inline constexpr int kKnRows = 16;

// Scale (and bias) vector of scale row g at columns [n, n + cnt).
template <Sc kSc>
inline void kn_scales(const WeightPlan& w, int64_t g, int64_t n, int cnt, F& s, F& b) {
  if constexpr (kSc == Sc::affine) {
    const int sz = sd_size(w.scale_dtype);
    const int64_t at = (g * w.n + n) * sz;
    if (cnt == W) {
      s = V::load_sd(w.scales + at, w.scale_dtype);
      b = V::load_sd(w.biases + at, w.scale_dtype);
    } else {
      s = V::load_sd_n(w.scales + at, w.scale_dtype, cnt);
      b = V::load_sd_n(w.biases + at, w.scale_dtype, cnt);
    }
  } else if constexpr (kSc == Sc::e8m0 || kSc == Sc::e4m3) {
    const uint8_t* p = w.scales + g * w.n + n;
    alignas(64) uint8_t buf[64];
    if (cnt < W) {
      std::memset(buf, 0, sizeof buf);
      std::memcpy(buf, p, static_cast<std::size_t>(cnt));
      p = buf;
    }
    s = kSc == Sc::e8m0 ? V::e8m0(p) : V::e4m3(p);
    b = V::zero();
  } else {
    s = V::set1(1.0f);
    b = V::zero();
  }
}

template <Val kVal, int B, Sc kSc>
inline void kn_rows(const WeightPlan& w, const float* x, float* y, int64_t k0, int64_t k1) {
  constexpr int NV = V::kOutNV;
  const int64_t N = w.n, G = w.group;
  for (int64_t kb = k0; kb < k1; kb += kKnRows) {
    const int rows = static_cast<int>(imin(kKnRows, k1 - kb));
    const int64_t g = G ? kb / G : 0;
    const uint8_t* rp[kKnRows];
    for (int i = 0; i < rows; ++i) rp[i] = row_ptr(w, kb + i);
    int64_t n = 0;
    for (; n + NV * W <= N; n += NV * W) {
      F acc[NV], s[NV], b[NV];
      for (int v = 0; v < NV; ++v) {
        acc[v] = V::load(y + n + v * W);
        kn_scales<kSc>(w, g, n + v * W, W, s[v], b[v]);
      }
      for (int i = 0; i < rows; ++i) {
        const F xb = V::set1(x[kb + i]);
        for (int v = 0; v < NV; ++v) {
          const F q = natural<kVal, B>(rp[i], n + v * W);
          const F wv = kSc == Sc::affine ? V::fma(q, s[v], b[v]) : kSc == Sc::f32 ? q : V::mul(q, s[v]);
          acc[v] = V::fma(xb, wv, acc[v]);
        }
      }
      for (int v = 0; v < NV; ++v) V::store(y + n + v * W, acc[v]);
    }
    for (; n < N; n += W) {  // the last columns, one vector at a time
      const int cnt = static_cast<int>(imin(W, N - n));
      F acc = V::load_n(y + n, cnt), s, b;
      kn_scales<kSc>(w, g, n, cnt, s, b);
      for (int i = 0; i < rows; ++i) {
        const F q = natural<kVal, B>(rp[i], n);
        const F wv = kSc == Sc::affine ? V::fma(q, s, b) : kSc == Sc::f32 ? q : V::mul(q, s);
        acc = V::fma(V::set1(x[kb + i]), wv, acc);
      }
      V::store_n(y + n, acc, cnt);
    }
  }
}

inline void gemv_kn(const WeightPlan& w, const float* x, float* y, int64_t k0, int64_t k1) {
  switch (w.scheme) {
    case Scheme::affine:
      switch (w.bits) {
        case 2:
          return kn_rows<Val::uint, 2, Sc::affine>(w, x, y, k0, k1);
        case 3:
          return kn_rows<Val::uint, 3, Sc::affine>(w, x, y, k0, k1);
        case 4:
          return kn_rows<Val::uint, 4, Sc::affine>(w, x, y, k0, k1);
        case 5:
          return kn_rows<Val::uint, 5, Sc::affine>(w, x, y, k0, k1);
        case 6:
          return kn_rows<Val::uint, 6, Sc::affine>(w, x, y, k0, k1);
        default:
          return kn_rows<Val::uint, 8, Sc::affine>(w, x, y, k0, k1);
      }
    case Scheme::mxfp4:
      return kn_rows<Val::e2m1, 4, Sc::e8m0>(w, x, y, k0, k1);
    case Scheme::mxfp8:
      return kn_rows<Val::e4m3, 8, Sc::e8m0>(w, x, y, k0, k1);
    case Scheme::nvfp4:
      return kn_rows<Val::e2m1, 4, Sc::e4m3>(w, x, y, k0, k1);
    case Scheme::fp8_e4m3:
      return kn_rows<Val::e4m3, 8, Sc::f32>(w, x, y, k0, k1);
    case Scheme::fp8_e5m2:
      return kn_rows<Val::e5m2, 8, Sc::f32>(w, x, y, k0, k1);
    default:
      return;  // GGUF has no [K, N] layout
  }
}

inline void gemv_kn_finish(const WeightPlan& w, float* y) {
  if (w.scheme == Scheme::fp8_e4m3 || w.scheme == Scheme::fp8_e5m2) {
    const bool channel = w.granularity == Granularity::channel;
    for (int64_t n = 0; n < w.n; ++n) {
      float s;
      std::memcpy(&s, w.scales + (channel ? n * 4 : 0), 4);
      y[n] *= s;
    }
  } else if (w.scheme == Scheme::nvfp4 && w.global != 1.0f) {
    for (int64_t n = 0; n < w.n; ++n) y[n] *= w.global;
  }
}

}  // namespace quanta::cpu::QUANTA_ISA
