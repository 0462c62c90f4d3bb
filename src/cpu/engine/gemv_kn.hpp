// Fused GEMV for W stored [K, N] (the vecmat layout): y[n] += Σ_{k∈[k0,k1)} x[k] · w[k, n].
// Blocks of K-rows share one scale row (affine: a whole group, or its part in [k0, k1); the other
// formats: 16 rows); per block the codes are summed against x first and the scales applied once:
//   y[n] += s[g, n] · Σ_k x[k]·q[k, n] + b[g, n] · Σ_k x[k]
// A task owns a panel of columns; it reads each K-row's run across its panel in address order
// into sums held in L1. Sums in registers for a strip of columns over the rows of a block lost
// (64 columns x 16 rows: 7.5 vs 5.7 ms; 256 columns x 16-64 rows, each row's run prefetched a
// few strips ahead: 8.6-11 vs 5.3-7.6 ms): 16+ interleaved streams, and so did two K-rows per
// pass (docs/perf-cpu.md).
// Codes unpack in "byte lanes" where that is cheaper: 2- and 4-bit affine codes and E2M1 take
// 16 bytes zero-extended to one byte per lane (W bytes), and vector j of a chunk holds code j
// of every byte (P = 8 / B vectors, lane t of vector j is column P·t + j); the other formats
// take two vectors in natural order. The partial y keeps the chunk's lane order until
// gemv_kn_finish restores it (with the fp8 scales and the nvfp4 global scale).
#pragma once

#include <utility>

#include "cpu/engine/common.hpp"

namespace quanta::cpu::QUANTA_ISA {

// The 2-bit code in bits 0-1 and in bits 2-3 of a 4-bit index, as f32.
alignas(64) inline constexpr float kCode2Lo[16] = {0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3};
alignas(64) inline constexpr float kCode2Hi[16] = {0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3};

template <Val kVal, int B>
struct KnChunk {
  // Byte-lane order (see top) or natural order.
  static constexpr bool kLanes = (B == 2 && kVal == Val::uint) || B == 4;
  static constexpr int P = kLanes ? 8 / B : 2;  // vectors per chunk
  static constexpr int kCols = P * W;           // columns per chunk
  // Columns [n, n + kCols) of a K-row (n a multiple of kCols), in lane order.
  static void load(const uint8_t* row, int64_t n, F* q) {
    if constexpr (kVal == Val::e2m1) {
      I lo, hi;
      V::nib2(row + n / 2, lo, hi);
      const auto t = V::tbl(kE2M1);
      q[0] = V::lut(t, lo);
      q[1] = V::lut(t, hi);
    } else if constexpr (kLanes && B == 2 && W == 16) {
      // One vpermps per vector: a byte's low nibble indexes code 0 (table i & 3) or code 1
      // (i >> 2), its high nibble codes 2 and 3; no masks, one shift per chunk.
      const I raw = V::u8(row + n / 4), hi = V::template shr<4>(raw);
      const auto lo2 = V::tbl(kCode2Lo), hi2 = V::tbl(kCode2Hi);
      q[0] = V::lut(lo2, raw);
      q[1] = V::lut(hi2, raw);
      q[2] = V::lut(lo2, hi);
      q[3] = V::lut(hi2, hi);
    } else if constexpr (kLanes && B == 4 && W == 16) {
      const I raw = V::u8(row + n / 2);
      q[0] = V::template ucvt<4>(raw);  // a vpermps, the mask included
      q[1] = V::template ucvt<4>(V::template shr<4>(raw));
    } else if constexpr (kLanes) {
      const I raw = V::u8(row + n * B / 8);
      const I m = V::seti((1 << B) - 1);
      [&]<int... J>(std::integer_sequence<int, J...>) {
        ((q[J] = V::cvt(J == P - 1 ? V::template shr<B * J>(raw)
                                   : V::and_(V::template shr<B * J>(raw), m))),
         ...);
      }
      (std::make_integer_sequence<int, P>{});
    } else {
      q[0] = natural<kVal, B>(row, n);
      q[1] = natural<kVal, B>(row, n + W);
    }
  }
};

// P natural vectors (columns [n, n + P·W)) to the chunk's lane order, and back.
template <int P>
inline void kn_to_lanes(F* v) {
  if constexpr (P == 2) {
    V::deinterleave(v[0], v[1], v[0], v[1]);
  } else {
    F e0, o0, e1, o1;
    V::deinterleave(v[0], v[1], e0, o0);
    V::deinterleave(v[2], v[3], e1, o1);
    V::deinterleave(e0, e1, v[0], v[2]);
    V::deinterleave(o0, o1, v[1], v[3]);
  }
}
template <int P>
inline void kn_from_lanes(F* v) {
  if constexpr (P == 2) {
    V::interleave(v[0], v[1], v[0], v[1]);
  } else {
    F e0, o0, e1, o1;
    V::interleave(v[0], v[2], e0, e1);
    V::interleave(v[1], v[3], o0, o1);
    V::interleave(e0, o0, v[0], v[1]);
    V::interleave(e1, o1, v[2], v[3]);
  }
}

// The scale and bias vectors of scale row g for the chunk at column n (cnt <= P·W real
// columns), in the chunk's lane order.
template <Val kVal, int B, Sc kSc>
inline void kn_chunk_scales(const WeightPlan& w, int64_t g, int64_t n, int cnt, F* s, F* b) {
  using C = KnChunk<kVal, B>;
  constexpr int P = C::P;
  auto vecs = [&](auto load1, F* v) {
    for (int j = 0; j < P; ++j) {
      const int c = cnt - j * W;
      v[j] = c >= W ? load1(n + j * W, W) : (c > 0 ? load1(n + j * W, c) : V::zero());
    }
    if constexpr (C::kLanes) kn_to_lanes<P>(v);
  };
  for (int j = 0; j < P; ++j) b[j] = V::zero();
  if constexpr (kSc == Sc::affine) {
    const int sz = sd_size(w.scale_dtype);
    auto from = [&](const uint8_t* base) {
      return [&, base](int64_t at, int c) {
        const uint8_t* p = base + (g * w.n + at) * sz;
        return c == W ? V::load_sd(p, w.scale_dtype) : V::load_sd_n(p, w.scale_dtype, c);
      };
    };
    vecs(from(w.scales), s);
    vecs(from(w.biases), b);
  } else if constexpr (kSc == Sc::e8m0 || kSc == Sc::e4m3) {
    vecs(
        [&](int64_t at, int c) {
          const uint8_t* p = w.scales + g * w.n + at;
          alignas(64) uint8_t buf[64] = {};
          if (c < W) {
            std::memcpy(buf, p, static_cast<std::size_t>(c));
            p = buf;
          }
          return kSc == Sc::e8m0 ? V::e8m0(p) : V::e4m3(p);
        },
        s);
  } else {
    for (int j = 0; j < P; ++j) s[j] = V::set1(1.0f);
  }
}

// Rows ahead of the L2 prefetch of a row's run.
inline constexpr int kKnRows = 16;

// Rows per block but for affine, whose blocks are whole groups (32-128 rows: the scale pass,
// with its bias term, runs 2-8x less often; 1.0-1.6x faster on Zen 4, docs/perf-cpu.md). The
// microscaled formats measured inside the noise with group blocks and keep 16 rows.
inline constexpr int64_t kKnBlock = 16;

// K-rows per pass over a panel: each load and store of the running sums serves that many rows
// (against one: 7-20% faster for <= 4-bit codes, 5-13% above; 8 rows no better than 4; 2 rows
// above 4 bits 2-10% slower than 4; docs/perf-cpu.md).
inline constexpr int kKnPassRows = 4;

// Most columns of one task (a panel): 8192 f32 running sums (32 KB) read 4 KB runs per row of a
// 4-bit W: 3-15% faster than 4096 on a 48 KB L1 (Zen 5), 1.1-1.4x on a 32 KB one (Zen 4), where
// 16384 (64 KB of sums) tied; it lost on Zen 5 (docs/perf-cpu.md).
inline constexpr int64_t kKnPanel = 8192;

// 2-bit byte lanes, two K-rows per table lookup: a 4-bit index holds the code of row k (bits
// 0-1) and of row k + 1 (bits 2-3) for one column, and a 16-entry table of
// (i & 3)·x[k] + (i >> 2)·x[k + 1] turns it into both rows' products at once: per 16 columns
// and two rows one vpermps and one add instead of two vpermps and two FMAs (the indices cost
// two shifts and two bit-selects per 64 columns and pair).
template <class C, int R>
inline constexpr bool kPairLanes = W == 16 && C::P == 4 && R % 2 == 0 && C::kLanes;

template <int R>
inline void kn_pairs2(const WeightPlan& w, const uint8_t* const* row, const float* x, float* acc,
                      int64_t c0, int64_t c1, bool first) {
  constexpr int kPairs = R / 2;
  constexpr int64_t kCols = 4 * W, kCB = kCols / 4;
  V::Tbl t[kPairs];
  for (int p = 0; p < kPairs; ++p) {
    alignas(64) float v[16];
    for (int i = 0; i < 16; ++i)
      v[i] = static_cast<float>(i & 3) * x[2 * p] + static_cast<float>(i >> 2) * x[2 * p + 1];
    t[p] = V::tbl(v);
  }
  const I m33 = V::seti(0x33), mcc = V::seti(0xCC);
  for (int64_t c = c0; c < c1; ++c) {
    F q[4];
    for (int p = 0; p < kPairs; ++p) {
      const I r0 = V::u8(row[2 * p] + c * kCB), r1 = V::u8(row[2 * p + 1] + c * kCB);
      // codes 0 and 2 (low and high nibble), codes 1 and 3, of both rows
      const I a = V::or_(V::and_(r0, m33), V::and_(V::template shl<2>(r1), mcc));
      const I b = V::or_(V::and_(V::template shr<2>(r0), m33), V::and_(r1, mcc));
      const F v0 = V::lut(t[p], a), v1 = V::lut(t[p], b);
      const F v2 = V::lut(t[p], V::template shr<4>(a)), v3 = V::lut(t[p], V::template shr<4>(b));
      if (p == 0) {
        q[0] = v0, q[1] = v1, q[2] = v2, q[3] = v3;
      } else {
        q[0] = V::add(q[0], v0), q[1] = V::add(q[1], v1);
        q[2] = V::add(q[2], v2), q[3] = V::add(q[3], v3);
      }
    }
    for (int r = 0; r < R; ++r) V::prefetch(row[r] + c * kCB + R * w.row_bytes);  // next pass
    if ((c & 1) == 0) V::prefetch_l2(row[0] + c * kCB + kKnRows * w.row_bytes);   // 16 rows on
    float* a = acc + (c - c0) * kCols;
    for (int j = 0; j < 4; ++j)
      V::store(a + j * W, first ? q[j] : V::add(V::load(a + j * W), q[j]));
  }
}

// y[n0, n1) (lane order) += Σ_{k ∈ [k0, k1)} x[k] · w[k, n] for a panel [n0, n1) (n0 a multiple
// of the chunk's kCols: 64 columns for 2-bit affine on AVX-512, 32 otherwise). Each K-row's run
// across the panel is read once, in address order, into sums held in L1; every block the
// scales are applied once.
template <Val kVal, int B, Sc kSc, int MR>
inline void kn_rows(const WeightPlan& w, const float* x, int64_t ldx, float* y, int64_t ldy,
                    int64_t n0, int64_t n1, int64_t k0, int64_t k1) {
  using C = KnChunk<kVal, B>;
  constexpr int P = C::P;
  constexpr int64_t kCols = C::kCols, kCB = kCols * B / 8;  // columns, code bytes per chunk
  // K-rows per pass: fewer with more rows of x, whose broadcasts share the registers.
  constexpr int kPass = MR <= 2 ? kKnPassRows : kKnPassRows / 2;
  const int64_t N = w.n, G = w.group;
  const int64_t c0 = n0 / kCols, c1 = (n1 + kCols - 1) / kCols;
  const int64_t ps = (c1 - c0) * kCols;  // sums of one row of x
  alignas(64) float acc[kKnPanel + kKnMaxRows * 128];
  const int64_t span = kSc == Sc::affine ? G : kKnBlock;
  for (int64_t kb = k0, rows = 0; kb < k1; kb += rows) {
    rows = imin(span - kb % span, k1 - kb);  // to the end of kb's group
    const int64_t g = G ? kb / G : 0;
    float xsum[MR] = {};
    for (int m = 0; m < MR; ++m)
      for (int i = 0; i < rows; ++i) xsum[m] += x[m * ldx + kb + i];
    // R rows per pass over the panel: one load and store of the sums serve R rows.
    auto pass = [&]<int R>(int i) {
      const uint8_t* row[R];
      F xb[MR][R];
      for (int r = 0; r < R; ++r) {
        row[r] = row_ptr(w, kb + i + r);
        for (int m = 0; m < MR; ++m) xb[m][r] = V::set1(x[m * ldx + kb + i + r]);
      }
      if constexpr (MR == 1 && kPairLanes<C, R>)
        return kn_pairs2<R>(w, row, x + kb + i, acc, c0, c1, i == 0);
      for (int64_t c = c0; c < c1; ++c) {
        for (int r = 0; r < R; ++r) {
          const uint8_t* p = row[r] + c * kCB;
          V::prefetch(p + R * w.row_bytes);  // this row's run in the next pass
          if ((c & 1) == 0 && r == 0) V::prefetch_l2(p + kKnRows * w.row_bytes);  // 16 rows on
        }
        F q[R][P];
        for (int r = 0; r < R; ++r) C::load(row[r], c * kCols, q[r]);
        for (int m = 0; m < MR; ++m) {
          float* a = acc + m * ps + (c - c0) * kCols;
          for (int j = 0; j < P; ++j) {
            F v =
                i == 0 ? V::mul(xb[m][0], q[0][j]) : V::fma(xb[m][0], q[0][j], V::load(a + j * W));
            for (int r = 1; r < R; ++r) v = V::fma(xb[m][r], q[r][j], v);
            V::store(a + j * W, v);
          }
        }
      }
    };
    int i = 0;
    for (; i + kPass <= rows; i += kPass) pass.template operator()<kPass>(i);
    for (; i < rows; ++i) pass.template operator()<1>(i);
    for (int64_t c = c0; c < c1; ++c) {
      const int64_t n = c * kCols;
      F s[P], b[P];
      kn_chunk_scales<kVal, B, kSc>(w, g, n, static_cast<int>(imin(kCols, N - n)), s, b);
      for (int m = 0; m < MR; ++m) {
        const float* a = acc + m * ps + (c - c0) * kCols;
        float* yp = y + m * ldy + n;
        for (int j = 0; j < P; ++j) {
          F v = V::fma(s[j], V::load(a + j * W), V::load(yp + j * W));
          if constexpr (kSc == Sc::affine) v = V::fma(b[j], V::set1(xsum[m]), v);
          V::store(yp + j * W, v);
        }
      }
    }
  }
}

template <int MR>
inline void gemv_kn_rows(const WeightPlan& w, const float* x, int64_t ldx, float* y, int64_t ldy,
                         int64_t n0, int64_t n1, int64_t k0, int64_t k1) {
  with_packed(w, [&]<Val kVal, int B, Sc kSc>() {  // GGUF has no [K, N] layout
    kn_rows<kVal, B, kSc, MR>(w, x, ldx, y, ldy, n0, n1, k0, k1);
  });
}

// m (1..kKnMaxRows) rows of x (leading dimension ldx) into m partial rows of y (ldy apart);
// n1 - n0 at most kKnPanel / m (the sums of every row stay in L1).
inline void gemv_kn(const WeightPlan& w, const float* x, int64_t ldx, int64_t m, float* y,
                    int64_t ldy, int64_t n0, int64_t n1, int64_t k0, int64_t k1) {
  switch (m) {
    case 1:
      return gemv_kn_rows<1>(w, x, ldx, y, ldy, n0, n1, k0, k1);
    case 2:
      return gemv_kn_rows<2>(w, x, ldx, y, ldy, n0, n1, k0, k1);
    case 3:
      return gemv_kn_rows<3>(w, x, ldx, y, ldy, n0, n1, k0, k1);
    default:
      return gemv_kn_rows<4>(w, x, ldx, y, ldy, n0, n1, k0, k1);
  }
}

// Vectors per chunk of w's lane order (1: natural order).
inline int kn_lanes(const WeightPlan& w) {
  if (w.bits == 4) return 2;
  if (w.bits == 2 && w.scheme == Scheme::affine) return 4;
  return 1;
}

// Floats a partial y of gemv_kn needs: whole chunks.
inline int64_t gemv_kn_ylen(const WeightPlan& w) {
  return (w.n + 4 * W - 1) / (4 * W) * (4 * W);
}

// y[n] (natural order) from the summed partial sums (lane order), with the scales that apply
// to whole columns: fp8 per channel or tensor, the nvfp4 global scale.
inline void gemv_kn_finish(const WeightPlan& w, const float* sum, float* y) {
  const int P = kn_lanes(w);
  const int64_t cols = P > 1 ? P * W : W;
  alignas(64) float tmp[4 * W];
  for (int64_t n = 0; n < w.n; n += cols) {
    const float* src = sum + n;
    if (P > 1) {
      F v[4];
      for (int j = 0; j < P; ++j) v[j] = V::load(sum + n + j * W);
      if (P == 2)
        kn_from_lanes<2>(v);
      else
        kn_from_lanes<4>(v);
      for (int j = 0; j < P; ++j) V::store(tmp + j * W, v[j]);
      src = tmp;
    }
    const int64_t cnt = imin(cols, w.n - n);
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
