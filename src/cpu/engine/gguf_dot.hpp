// GGUF GEMV: one block's contribution to y[n] = Σ_k x[k] · w[n, k], with each (sub-)block
// scale applied once to a product vector instead of to every weight:
//   Q4_0, Q8_0, Q5_0   d · Σ x·q                    (q already offset: nibble - 8, ...)
//   Q4_1, Q5_1         d · Σ x·q + m · Σ x
//   K-quants           Σ_j (d·sc_j) · (x ⊙ q)_j − Σ_j (dmin·m_j) · xs_j
// where xs_j are the sums of x over sub-block j (16 or 32 elements; gemv_prep computes them
// once per call) and the K-quant scales are unpacked for all sub-blocks of a super-block at
// once, so the per-vector work is: unpack, convert, multiply by x, FMA. q2_K-q5_K do it in two
// passes over four rows at a time (scales to an L1 buffer, then codes: see gemv_rows).
#pragma once

#include "cpu/engine/gguf.hpp"
#include "cpu/engine/kquant_scales.hpp"

namespace quanta::cpu::QUANTA_ISA::gguf {

// Elements per entry of the x sums a block type's dot reads (0: none).
template <class T>
inline constexpr int kXsElems = 0;
template <>
inline constexpr int kXsElems<Q2_K> = 16;
template <>
inline constexpr int kXsElems<Q3_K> = 16;
template <>
inline constexpr int kXsElems<Q6_K> = 16;
template <>
inline constexpr int kXsElems<QK45<false>> = 32;
template <>
inline constexpr int kXsElems<QK45<true>> = 32;
template <>
inline constexpr int kXsElems<Q4_1> = 32;
template <>
inline constexpr int kXsElems<Q4_0> = W == 16 ? 0 : 32;  // below W = 16: the -8 · Σx term
template <>
inline constexpr int kXsElems<Q5<true>> = 32;
template <>
inline constexpr int kXsElems<Q5<false>> = W == 16 ? 0 : 32;  // as q4_0: the -16 · Σx term

alignas(64) inline constexpr float kQ5Minus16[16] = {-16, -15, -14, -13, -12, -11, -10, -9,
                                                     -8,  -7,  -6,  -5,  -4,  -3,  -2,  -1};

// The float of the low nibble of each lane, minus 16 (one vpermps on 16 lanes).
inline F nib_minus16(I raw) {
  if constexpr (W == 16)
    return V::lut(V::tbl(kQ5Minus16), raw);
  else
    return V::add(V::template ucvt<4>(raw), V::set1(-16.0f));
}

// Sixteen sub-block scales held in registers (16 / W vectors); bcast(j) puts scale j in every
// lane. Scales never go through memory: a scalar reload of a vector store stalls the
// store-to-load forwarding on every block.
struct Lanes16 {
  F v[16 / W];
  F bcast(int j) const { return V::lane(v[j / W], j % W); }
};

template <class T>
struct Dot;

template <>
struct Dot<Q4_0> {
  static void dot(const uint8_t* b, const float* x, const float* xs, F& acc) {
    Q4_0::dot(b, x, W < 16 ? xs[0] : 0.0f, acc);  // xs: per block below 16 lanes (kXsElems)
  }
};

template <>
struct Dot<Q8_0> {
  static void dot(const uint8_t* b, const float* x, const float*, F& acc) { Q8_0::dot(b, x, acc); }
};

// Q4_1 and Q5_1 take the block's Σx from xs (made once per call by gemv_prep) into lane 0 of
// the accumulator (its lanes are summed at the end): summing x per block and row cost two adds
// per 16 weights.
template <>
struct Dot<Q4_1> {
  static void dot(const uint8_t* b, const float* x, const float* xs, F& acc) {
    F s0 = V::zero(), s1 = V::zero();
    for (int j = 0; j < 16; j += W) {
      const I raw = V::u8(b + 4 + j);
      s0 = V::fma(V::load(x + j), V::template ucvt<4>(raw), s0);
      s1 = V::fma(V::load(x + 16 + j), V::template ucvt<4>(V::template shr<4>(raw)), s1);
    }
    acc = V::fma(V::half_bcast(b), V::add(s0, s1),
                 V::fma(V::half_bcast(b + 2), V::load_n(xs, 1), acc));
  }
};

template <bool kMin>
struct Dot<Q5<kMin>> {
  static void dot(const uint8_t* b, const float* x, const float* xs, F& acc) {
    const int at = kMin ? 4 : 2;
    const uint32_t qh = u32_at(b + at);
    const F sixteen = V::set1(16.0f);
    // q5_0 below 16 lanes: -16·Σx once per block (as q4_0), not an add per vector.
    constexpr bool kFold = !kMin && W < 16;
    F s0 = kFold ? V::set1(xs[0] * (-16.0f / W)) : V::zero(), s1 = V::zero();
    for (int j = 0; j < 16; j += W) {
      const I raw = V::u8(b + at + 4 + j);
      const F x0 = V::load(x + j), x1 = V::load(x + 16 + j);
      // q5_0: (nibble | hbit << 4) - 16; q5_1: nibble | hbit << 4
      const F lo = kMin || kFold ? V::template ucvt<4>(raw) : nib_minus16(raw);
      const F hi = kMin || kFold ? V::template ucvt<4>(V::template shr<4>(raw))
                                 : nib_minus16(V::template shr<4>(raw));
      s0 = V::fma(x0, V::add(lo, V::select_bits(qh >> j, sixteen)), s0);
      s1 = V::fma(x1, V::add(hi, V::select_bits(qh >> (16 + j), sixteen)), s1);
    }
    const F d = V::half_bcast(b);
    if constexpr (kMin)
      acc = V::fma(d, V::add(s0, s1), V::fma(V::half_bcast(b + 2), V::load_n(xs, 1), acc));
    else
      acc = V::fma(d, V::add(s0, s1), acc);
  }
};

// Q2_K: code j of byte qs[32h + l] is masked in place (c << 2j, no shift) and converted as is;
// the 4^-j goes into the sub-block scale, which is read back from memory as a broadcast
// operand of the FMA (no lane permute: permutes and FMAs share ports on Zen 5).
alignas(64) inline constexpr float kQ2Pow4[16] = {
    1, 1, 0.25f, 0.25f, 0.0625f, 0.0625f, 0.015625f, 0.015625f,
    1, 1, 0.25f, 0.25f, 0.0625f, 0.0625f, 0.015625f, 0.015625f};
template <>
struct Dot<Q2_K> {
  // Pass 1 over a block: its 16 sub-block scales (times 4^-j, see kQ2Pow4) into sc; the min
  // term into acc.
  static void scales(const uint8_t* b, const float* xs, float* sc, F& acc) {
    const F d = V::set1(V::half1(b + 80)), dmin = V::set1(V::half1(b + 82));
    for (int i = 0; i < 16; i += W) {  // low nibble: scale, high nibble: min
      const I raw = V::u8(b + i);
      V::store(sc + i, V::mul(V::cvt(V::and_(raw, V::seti(0xF))), V::mul(d, V::load(kQ2Pow4 + i))));
      acc = V::fnma(V::mul(V::cvt(V::template shr<4>(raw)), dmin), V::load(xs + i), acc);
    }
  }
  // Pass 2: R rows at once (b[r], sc[r], acc[r]) against the same x.
  template <int R>
  static void codes(const uint8_t* const* b, const float* x, const float* const* sc, F (*acc)[2]) {
    F a[R][4];  // four chains per row, in registers (an array indexed through memory spills)
    for (int r = 0; r < R; ++r)
      a[r][0] = acc[r][0], a[r][1] = acc[r][1], a[r][2] = a[r][3] = V::zero();
#pragma GCC unroll 64
    for (int i = 0; i < 64; i += W) {
      const int h = i / 32, l = i % 32, off = 128 * h + l, is = off / 16;
      I raw[R], hi[R];
      for (int r = 0; r < R; ++r) {
        raw[r] = V::u8(b[r] + 16 + i);
        hi[r] = V::template shr<4>(raw[r]);
      }
      auto code = [&]<int J>() {
        const F xv = V::load(x + off + 32 * J);
        for (int r = 0; r < R; ++r) {
          const F q = quad_code<J>(raw[r], hi[r]);
          a[r][J] = V::fma(V::set1(sc[r][is + 2 * J]), V::mul(xv, q), a[r][J]);
        }
      };
      code.template operator()<0>();
      code.template operator()<1>();
      code.template operator()<2>();
      code.template operator()<3>();
    }
    for (int r = 0; r < R; ++r)
      acc[r][0] = V::add(a[r][0], a[r][2]), acc[r][1] = V::add(a[r][1], a[r][3]);
  }
};

using kquant::kQ3Ctl;

// Q3_K: as Q2_K, plus the high bit (hmask[l] bit 4h + j) added in place as 4 · 4^j by a
// masked add; the -4 of every element goes into the min term (-4 · scale · Σ x).
template <>
struct Dot<Q3_K> {
  static void scales(const uint8_t* b, const float* xs, float* sc, F& acc) {
    const F d = V::set1(V::half1(b + 108));
    for (int i = 0; i < 16; i += W) {
      // Scale i: low 4 bits from byte i % 8 (>> 4 for i >= 8), high 2 bits from byte
      // 8 + i % 4 (>> 2 (i / 4)); one byte shuffle brings both bytes to the lane.
      const I v = V::gather16(b + 96, kQ3Ctl.ctl + 4 * i);
      const I lo = V::and_(V::shrv(v, kQ3Ctl.lo + i), V::seti(0xF));
      const I hi = V::and_(V::shrv(v, kQ3Ctl.hi + i), V::seti(0x30));
      const F s = V::mul(V::add(V::cvt(V::or_(lo, hi)), V::set1(-32.0f)), d);
      V::store(sc + i, V::mul(s, V::load(kQ2Pow4 + i)));
      acc = V::fnma(V::mul(s, V::set1(4.0f)), V::load(xs + i), acc);
    }
  }
  template <int R>
  static void codes(const uint8_t* const* b, const float* x, const float* const* sc, F (*acc)[2]) {
    F a[R][4];
    for (int r = 0; r < R; ++r)
      a[r][0] = acc[r][0], a[r][1] = acc[r][1], a[r][2] = a[r][3] = V::zero();
#pragma GCC unroll 64
    for (int i = 0; i < 64; i += W) {
      const int h = i / 32, l = i % 32, off = 128 * h + l, is = off / 16;
      I raw[R], hb[R];
      for (int r = 0; r < R; ++r) raw[r] = V::u8(b[r] + 32 + i), hb[r] = V::u8(b[r] + l);
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
        const F xv = V::load(x + off + 32 * j);
        for (int r = 0; r < R; ++r) {
          const F q = V::add_where(V::cvt(V::and_(raw[r], V::seti(3 << (2 * j)))), hb[r],
                                   1u << (4 * h + j), V::set1(static_cast<float>(4 << (2 * j))));
          a[r][j] = V::fma(V::set1(sc[r][is + 2 * j]), V::mul(xv, q), a[r][j]);
        }
      }
    }
    for (int r = 0; r < R; ++r)
      acc[r][0] = V::add(a[r][0], a[r][2]), acc[r][1] = V::add(a[r][1], a[r][3]);
  }
};

using kquant::kQK45Ctl;

template <bool kFive>
struct Dot<QK45<kFive>> {
  // Pass 1: d · scale of the 8 sub-blocks into sc[0, 8) (1/16 on the odd ones); the min term
  // into acc.
  static void scales(const uint8_t* b, const float* xs, float* sc, F& acc) {
    const float d = V::half1(b), dmin = V::half1(b + 2);
    for (int i = 0; i < 16; i += W) {
      const I v = V::gather16(b + 4, kQK45Ctl.ctl + 4 * i);
      const I lo = V::andv(V::shrv(v, kQK45Ctl.sh + i), kQK45Ctl.mask + i);
      const I hi = V::and_(V::template shr<10>(v), V::seti(0x30));  // byte 2's bits 6-7 to 4-5
      F dd;
      if constexpr (W == 16) {
        const float pair[2] = {d, dmin};
        dd = V::split2(pair);
      } else {
        dd = V::set1(i < 8 ? d : dmin);
      }
      const F s = V::mul(V::cvt(V::or_(lo, hi)), V::mul(dd, V::load(kQK45Ctl.mul + i)));
      if constexpr (W == 16) {
        V::store(sc, s);
        acc = V::fnma(s, V::load_upper8(xs), acc);
      } else if (i < 8) {
        V::store(sc + i, s);
      } else {
        acc = V::fnma(s, V::load(xs + i - 8), acc);
      }
    }
  }
  // Pass 2: the 32 codes of a sub-block summed against x, then one FMA with its scale.
  template <int R>
  static void codes(const uint8_t* const* b, const float* x, const float* const* sc, F (*acc)[2]) {
    F a[R][2];
    for (int r = 0; r < R; ++r) a[r][0] = acc[r][0], a[r][1] = acc[r][1];
    const F sixteen = V::set1(16.0f), two56 = V::set1(256.0f);
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      F tl[R], th[R];
#pragma GCC unroll 32
      for (int l = 0; l < 32; l += W) {
        const F x0 = V::load(x + 64 * c + l), x1 = V::load(x + 64 * c + 32 + l);
        for (int r = 0; r < R; ++r) {
          const I raw = V::u8(b[r] + (kFive ? 48 : 16) + 32 * c + l);
          F lo = V::cvt(V::and_(raw, V::seti(0x0F)));
          F hi = V::cvt(V::and_(raw, V::seti(0xF0)));
          if constexpr (kFive) {
            const I qh = V::u8(b[r] + 16 + l);
            lo = V::add_where(lo, qh, 1u << (2 * c), sixteen);
            hi = V::add_where(hi, qh, 2u << (2 * c), two56);
          }
          tl[r] = l == 0 ? V::mul(x0, lo) : V::fma(x0, lo, tl[r]);
          th[r] = l == 0 ? V::mul(x1, hi) : V::fma(x1, hi, th[r]);
        }
      }
      for (int r = 0; r < R; ++r) {
        a[r][0] = V::fma(V::set1(sc[r][2 * c]), tl[r], a[r][0]);
        a[r][1] = V::fma(V::set1(sc[r][2 * c + 1]), th[r], a[r][1]);
      }
    }
    for (int r = 0; r < R; ++r) acc[r][0] = a[r][0], acc[r][1] = a[r][1];
  }
};

template <>
struct Dot<Q6_K> {
  static void dot(const uint8_t* b, const float* x, const float* xs, F& acc) {
    const F d = V::set1(V::half1(b + 208));
    Lanes16 sc;
    F a = acc;
    for (int i = 0; i < 16; i += W) {
      sc.v[i / W] = V::mul(V::cvt(V::s8(b + 192 + i)), d);
      a = V::sub(a, V::mul(V::mul(sc.v[i / W], V::set1(32.0f)), V::load(xs + i)));  // the q - 32
    }
    const I m4 = V::seti(0xF), m2 = V::seti(3);
    F a2 = V::zero();
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = b + 64 * h;
      const uint8_t* qh = b + 128 + 32 * h;
      const float* xh = x + 128 * h;
      for (int l = 0; l < 32; l += W) {
        const int is = 8 * h + l / 16;
        const I p = V::u8(ql + l), c = V::u8(ql + 32 + l), hq = V::u8(qh + l);
        const I q1 = V::or_(V::and_(p, m4), V::template shl<4>(V::and_(hq, m2)));
        const I q2 =
            V::or_(V::and_(c, m4), V::template shl<4>(V::and_(V::template shr<2>(hq), m2)));
        const I q3 =
            V::or_(V::template shr<4>(p), V::template shl<4>(V::and_(V::template shr<4>(hq), m2)));
        const I q4 = V::or_(V::template shr<4>(c), V::template shl<4>(V::template shr<6>(hq)));
        a = V::fma(sc.bcast(is), V::mul(V::load(xh + l), V::cvt(q1)), a);
        a2 = V::fma(sc.bcast(is + 2), V::mul(V::load(xh + 32 + l), V::cvt(q2)), a2);
        a = V::fma(sc.bcast(is + 4), V::mul(V::load(xh + 64 + l), V::cvt(q3)), a);
        a2 = V::fma(sc.bcast(is + 6), V::mul(V::load(xh + 96 + l), V::cvt(q4)), a2);
      }
    }
    acc = V::add(a, a2);
  }
};

// Rows per pass of the two-pass block types: they share each load of x (57 KB at K = 14336,
// streamed from L2). Four measured 10-15% faster than two for q2_K and q4_K from DRAM, even for
// q3_K and q5_K (docs/perf-cpu.md).
inline constexpr int kPassRows = 4;

// y[n] for n in [n0, n1) over blocks of elements [k0, k1), one row at a time (one stream).
// Four blocks are in flight, each summing into its own register: one chain would wait on the
// FMA latency (4 cycles per vector) instead of the loads.
template <class T>
inline void gemv_rows(const WeightPlan& w, const float* x, const float* xs, int64_t n0, int64_t n1,
                      int64_t k0, int64_t k1, float* y) {
  constexpr int kXs = kXsElems<T> ? T::kElems / kXsElems<T> : 0;  // x sums per block
  const int64_t b0 = k0 / T::kElems, b1 = k1 / T::kElems;
  int64_t n = n0;
  if constexpr (requires { &Dot<T>::template codes<2>; }) {
    // kPassRows rows at a time, in two passes over their blocks: the sub-block scales (and the
    // min terms) into an L1 buffer, then the codes, each scale read back as the broadcast
    // operand of an FMA. While a pass is summed, the next pass's rows are fetched (software
    // prefetch; the scale pass would otherwise stall on every first touch). A last pass of
    // fewer rows runs them one at a time.
    constexpr int kMaxBlocks = 64, P = kPassRows;
    alignas(64) float sc[P][kMaxBlocks * 16];
    for (; n < n1;) {
      const int rows = static_cast<int>(imin(P, n1 - n));
      const uint8_t* rp[P];
      const uint8_t* next[P];
      for (int r = 0; r < P; ++r) {
        rp[r] = row_ptr(w, n + imin(r, rows - 1));
        next[r] = row_ptr(w, imin(n + P + r, w.n - 1));
      }
      F acc[P][2];
      for (int r = 0; r < P; ++r) acc[r][0] = acc[r][1] = V::zero();
      for (int64_t c0 = b0; c0 < b1; c0 += kMaxBlocks) {
        const int64_t c1 = imin(b1, c0 + kMaxBlocks);
        for (int r = 0; r < rows; ++r) {
          F m0 = V::zero(), m1 = V::zero();  // two chains, in registers
          int64_t blk = c0;
          for (; blk + 2 <= c1; blk += 2) {
            Dot<T>::scales(rp[r] + blk * T::kBytes, xs + blk * kXs, sc[r] + (blk - c0) * 16, m0);
            Dot<T>::scales(rp[r] + (blk + 1) * T::kBytes, xs + (blk + 1) * kXs,
                           sc[r] + (blk + 1 - c0) * 16, m1);
          }
          if (blk < c1)
            Dot<T>::scales(rp[r] + blk * T::kBytes, xs + blk * kXs, sc[r] + (blk - c0) * 16, m0);
          acc[r][0] = V::add(acc[r][0], V::add(m0, m1));
        }
        from_memory(sc);
        for (int64_t blk = c0; blk < c1; ++blk) {
          for (int64_t o = 0; o < T::kBytes + 63; o += 64)
            for (int r = 0; r < P; ++r) V::prefetch(next[r] + blk * T::kBytes + o);
          const uint8_t* bp[P];
          const float* sp[P];
          for (int r = 0; r < P; ++r) {
            bp[r] = rp[r] + blk * T::kBytes;
            sp[r] = sc[r] + (blk - c0) * 16;
          }
          if (rows == P) {
            Dot<T>::template codes<P>(bp, x + blk * T::kElems, sp, acc);
          } else {
            for (int r = 0; r < rows; ++r)
              Dot<T>::template codes<1>(bp + r, x + blk * T::kElems, sp + r, acc + r);
          }
        }
      }
      for (int r = 0; r < rows; ++r) y[n + r] = V::hsum(V::add(acc[r][0], acc[r][1]));
      n += rows;
    }
  } else {
    for (; n < n1; ++n) {
      const uint8_t* row = row_ptr(w, n);
      auto block = [&](int64_t blk, F& a) {
        Dot<T>::dot(row + blk * T::kBytes, x + blk * T::kElems, xs + blk * kXs, a);
      };
      F a0 = V::zero(), a1 = V::zero(), a2 = V::zero(), a3 = V::zero();
      int64_t blk = b0;
      for (; blk + 4 <= b1; blk += 4) {
        for (int64_t b = 0; b < 4 * T::kBytes; b += 64) prefetch_stream(row + blk * T::kBytes + b);
        block(blk, a0);
        block(blk + 1, a1);
        block(blk + 2, a2);
        block(blk + 3, a3);
      }
      for (; blk < b1; ++blk) {
        prefetch_stream(row + blk * T::kBytes);
        block(blk, a0);
      }
      y[n] = V::hsum(V::add(V::add(a0, a1), V::add(a2, a3)));
    }
  }
}

}  // namespace quanta::cpu::QUANTA_ISA::gguf
