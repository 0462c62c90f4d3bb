// Fused GEMV for W stored [K, N] (the vecmat layout): y[n] += Σ_{k∈[k0,k1)} x[k] · w[k, n].
// Sixteen K-rows form a block that shares one scale row (every group has >= 16 rows); per
// block the codes are summed against x first and the scales applied once:
//   y[n] += s[g, n] · Σ_k x[k]·q[k, n] + b[g, n] · Σ_k x[k]
// A task owns a panel of columns; it reads each K-row's run across its panel in address order
// (reading 64 columns of 16 rows at a time, with the sums in registers, cut the bandwidth in
// half: 16 interleaved streams). 4-bit codes unpack two per byte: a chunk of 2W columns gives the
// even columns in one vector and the odd ones in the other, and the partial y keeps that order
// until gemv_kn_finish restores it (with the fp8 scales and the nvfp4 global scale).
#pragma once

#include "cpu/engine/common.hpp"

namespace quanta::cpu::QUANTA_ISA {

inline constexpr int kKnRows = 16;

template <Val kVal, int B>
struct KnChunk {
  static constexpr bool kNib = (B == 4);
  // Columns [n, n + 2W) of a K-row (n a multiple of 2W), in lane order.
  static void load(const uint8_t* row, int64_t n, F& q0, F& q1) {
    if constexpr (kNib) {
      I lo, hi;
      V::nib2(row + n / 2, lo, hi);
      if constexpr (kVal == Val::e2m1) {
        const auto t = V::tbl(kE2M1);
        q0 = V::lut(t, lo);
        q1 = V::lut(t, hi);
      } else {
        q0 = V::template ucvt<4>(lo);
        q1 = V::template ucvt<4>(hi);
      }
    } else {
      q0 = natural<kVal, B>(row, n);
      q1 = natural<kVal, B>(row, n + W);
    }
  }
};

// The scale and bias vectors of scale row g for the chunk at column n (cnt <= 2W real
// columns), in the chunk's lane order.
template <Val kVal, int B, Sc kSc>
inline void kn_chunk_scales(const WeightPlan& w, int64_t g, int64_t n, int cnt, F& s0, F& s1, F& b0,
                            F& b1) {
  const int c0 = cnt < W ? cnt : W, c1 = cnt - c0;
  auto two = [&](auto load1, F& v0, F& v1) {
    const F a = c0 == W ? load1(n, W) : load1(n, c0);
    const F b = c1 == W ? load1(n + W, W) : (c1 > 0 ? load1(n + W, c1) : V::zero());
    if constexpr (KnChunk<kVal, B>::kNib)
      V::deinterleave(a, b, v0, v1);
    else
      v0 = a, v1 = b;
  };
  b0 = b1 = V::zero();
  if constexpr (kSc == Sc::affine) {
    const int sz = sd_size(w.scale_dtype);
    auto from = [&](const uint8_t* base) {
      return [&, base](int64_t at, int c) {
        const uint8_t* p = base + (g * w.n + at) * sz;
        return c == W ? V::load_sd(p, w.scale_dtype) : V::load_sd_n(p, w.scale_dtype, c);
      };
    };
    two(from(w.scales), s0, s1);
    two(from(w.biases), b0, b1);
  } else if constexpr (kSc == Sc::e8m0 || kSc == Sc::e4m3) {
    two(
        [&](int64_t at, int c) {
          const uint8_t* p = w.scales + g * w.n + at;
          alignas(64) uint8_t buf[64] = {};
          if (c < W) {
            std::memcpy(buf, p, static_cast<std::size_t>(c));
            p = buf;
          }
          return kSc == Sc::e8m0 ? V::e8m0(p) : V::e4m3(p);
        },
        s0, s1);
  } else {
    s0 = s1 = V::set1(1.0f);
  }
}

// Columns of one task (a panel), sized so the panel's running sums (f32) stay in L1.
inline constexpr int64_t kKnPanel = 4096;

// y[n0, n1) (lane order) += Σ_{k ∈ [k0, k1)} x[k] · w[k, n] for a panel [n0, n1) (n0 a multiple
// of 2W). Each K-row's run across the panel is read once, in address order, into sums held in
// L1; every 16 rows the scales are applied once.
template <Val kVal, int B, Sc kSc>
inline void kn_rows(const WeightPlan& w, const float* x, float* y, int64_t n0, int64_t n1,
                    int64_t k0, int64_t k1) {
  using C = KnChunk<kVal, B>;
  const int64_t N = w.n, G = w.group;
  const int64_t c0 = n0 / (2 * W), c1 = (n1 + 2 * W - 1) / (2 * W);  // chunks of 2W columns
  alignas(64) float acc[kKnPanel + 2 * 16];
  for (int64_t kb = k0; kb < k1; kb += kKnRows) {
    const int rows = static_cast<int>(imin(kKnRows, k1 - kb));
    const int64_t g = G ? kb / G : 0;
    float xsum = 0;
    for (int i = 0; i < rows; ++i) {
      const uint8_t* row = row_ptr(w, kb + i);
      const float xk = x[kb + i];
      xsum += xk;
      const F xb = V::set1(xk);
      for (int64_t c = c0; c < c1; ++c) {
        const uint8_t* p = row + c * 2 * W * B / 8;
        V::prefetch(p + w.row_bytes);  // the next row's run, read next
        if ((c & 1) == 0) V::prefetch_l2(p + kKnRows * w.row_bytes);  // the next block
        F q0, q1;
        C::load(row, c * 2 * W, q0, q1);
        float* a = acc + (c - c0) * 2 * W;
        if (i == 0) {
          V::store(a, V::mul(xb, q0));
          V::store(a + W, V::mul(xb, q1));
        } else {
          V::store(a, V::fma(xb, q0, V::load(a)));
          V::store(a + W, V::fma(xb, q1, V::load(a + W)));
        }
      }
    }
    for (int64_t c = c0; c < c1; ++c) {
      const int64_t n = c * 2 * W;
      F s0, s1, b0, b1;
      kn_chunk_scales<kVal, B, kSc>(w, g, n, static_cast<int>(imin(2 * W, N - n)), s0, s1, b0, b1);
      const float* a = acc + (c - c0) * 2 * W;
      float* yp = y + n;
      F y0 = V::fma(s0, V::load(a), V::load(yp)), y1 = V::fma(s1, V::load(a + W), V::load(yp + W));
      if constexpr (kSc == Sc::affine) {
        y0 = V::fma(b0, V::set1(xsum), y0);
        y1 = V::fma(b1, V::set1(xsum), y1);
      }
      V::store(yp, y0);
      V::store(yp + W, y1);
    }
  }
}

inline void gemv_kn(const WeightPlan& w, const float* x, float* y, int64_t n0, int64_t n1,
                    int64_t k0, int64_t k1) {
  switch (w.scheme) {
    case Scheme::affine:
      switch (w.bits) {
        case 2:
          return kn_rows<Val::uint, 2, Sc::affine>(w, x, y, n0, n1, k0, k1);
        case 3:
          return kn_rows<Val::uint, 3, Sc::affine>(w, x, y, n0, n1, k0, k1);
        case 4:
          return kn_rows<Val::uint, 4, Sc::affine>(w, x, y, n0, n1, k0, k1);
        case 5:
          return kn_rows<Val::uint, 5, Sc::affine>(w, x, y, n0, n1, k0, k1);
        case 6:
          return kn_rows<Val::uint, 6, Sc::affine>(w, x, y, n0, n1, k0, k1);
        default:
          return kn_rows<Val::uint, 8, Sc::affine>(w, x, y, n0, n1, k0, k1);
      }
    case Scheme::mxfp4:
      return kn_rows<Val::e2m1, 4, Sc::e8m0>(w, x, y, n0, n1, k0, k1);
    case Scheme::mxfp8:
      return kn_rows<Val::e4m3, 8, Sc::e8m0>(w, x, y, n0, n1, k0, k1);
    case Scheme::nvfp4:
      return kn_rows<Val::e2m1, 4, Sc::e4m3>(w, x, y, n0, n1, k0, k1);
    case Scheme::fp8_e4m3:
      return kn_rows<Val::e4m3, 8, Sc::f32>(w, x, y, n0, n1, k0, k1);
    case Scheme::fp8_e5m2:
      return kn_rows<Val::e5m2, 8, Sc::f32>(w, x, y, n0, n1, k0, k1);
    default:
      return;  // GGUF has no [K, N] layout
  }
}

// Floats a partial y of gemv_kn needs: whole chunks of 2W columns.
inline int64_t gemv_kn_ylen(const WeightPlan& w) {
  return (w.n + 2 * W - 1) / (2 * W) * (2 * W);
}

// y[n] (natural order) from the summed partial sums (lane order), with the scales that apply
// to whole columns: fp8 per channel or tensor, the nvfp4 global scale.
inline void gemv_kn_finish(const WeightPlan& w, const float* sum, float* y) {
  const bool nib = w.bits == 4;
  alignas(64) float tmp[2 * W];
  for (int64_t n = 0; n < w.n; n += 2 * W) {
    const float* src = sum + n;
    if (nib) {
      F a, b;
      V::interleave(V::load(sum + n), V::load(sum + n + W), a, b);
      V::store(tmp, a);
      V::store(tmp + W, b);
      src = tmp;
    }
    const int64_t cnt = imin(2 * W, w.n - n);
    for (int64_t j = 0; j < cnt; ++j) y[n + j] = src[j];
  }
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
