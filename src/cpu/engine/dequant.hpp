// Dequantize, W [N, K]: storage rows [n0, n0 + rows) as dense weights of dtype kDt (row stride
// K), with the arithmetic of the format's owner as the codec (src/format/decode.cpp) does it:
//   affine       scale · q rounded to kDt, plus bias, rounded to kDt (MLX)
//   microscaled  q · scale rounded to kDt, times nvfp4's global scale
//   fp8          q · scale
// then stored in kDt; the GGUF blocks of cpu::dequantize_simd_exact as the codec decodes them
// (below). A multiply feeding an add is kept opaque, so no FMA merges their two roundings into
// one: the results equal dequantize_generic's bit for bit (tests/test_cpu_kernels.cpp).
#pragma once

#include <type_traits>

#include "cpu/engine/gguf_dot.hpp"  // nib_minus16
#include "cpu/engine/tile.hpp"

namespace quanta::cpu::QUANTA_ISA {

template <DType kDt>
inline F round_to(F v) {
  if constexpr (kDt == DType::f16)
    return V::round_f16(v);
  else if constexpr (kDt == DType::bf16)
    return V::round_bf16(v);
  else
    return v;
}

template <DType kDt>
inline void store_dense(void* out, int64_t i, F v) {
  if constexpr (kDt == DType::f32)
    V::store(static_cast<float*>(out) + i, v);
  else if constexpr (kDt == DType::f16)
    V::store_f16(static_cast<uint16_t*>(out) + i, v);
  else
    V::store_bf16(static_cast<uint16_t*>(out) + i, v);
}

// The first cnt (< W) lanes only: fp8 rows end anywhere.
template <DType kDt>
inline void store_dense_n(void* out, int64_t i, F v, int cnt) {
  if constexpr (kDt == DType::f32) {
    V::store_n(static_cast<float*>(out) + i, v, cnt);
  } else {
    alignas(64) uint16_t h[W];
    store_dense<kDt>(h, 0, v);
    std::memcpy(static_cast<uint16_t*>(out) + i, h, static_cast<std::size_t>(cnt) * 2);
  }
}

template <Val kVal, int B, Sc kSc, DType kDt>
inline void dequantize_nk_rows(const WeightPlan& w, int64_t n0, int64_t rows, void* out) {
  const int64_t K = w.k;
  for (int64_t n = n0; n < n0 + rows; ++n) {
    const uint8_t* row = row_ptr(w, n);
    const int64_t base = n * K;
    if constexpr (kSc == Sc::f32) {
      float s;
      std::memcpy(&s, w.scales + (w.granularity == Granularity::channel ? n * 4 : 0), 4);
      const F sv = V::set1(s);
      int64_t e = 0;
      for (; e + W <= K; e += W)
        store_dense<kDt>(out, base + e, V::mul(natural<kVal, B>(row, e), sv));
      if (e < K)
        store_dense_n<kDt>(out, base + e, V::mul(natural<kVal, B>(row, e), sv),
                           static_cast<int>(K - e));
      continue;
    }
    const int64_t G = w.group;
    const F global = V::set1(w.global);
    const int64_t row_groups = n * (K / G);
    for (int64_t g = 0; g < K / G; ++g) {
      float sg, bg;
      group_scale<kSc>(w, row_groups + g, sg, bg);
      const F s = V::set1(sg), b = V::set1(bg);
      for (int64_t e = g * G; e < (g + 1) * G; e += W) {
        F t = V::mul(natural<kVal, B>(row, e), s);
        V::opaque(t);
        t = round_to<kDt>(t);
        if constexpr (kSc == Sc::affine)
          t = round_to<kDt>(V::add(t, b));
        else
          t = V::mul(t, global);
        store_dense<kDt>(out, base + e, t);
      }
    }
  }
}

// q4_0 / q5_0 blocks as the codec computes them, (q - 8) · d and (q - 16) · d: one product, so
// an infinite d gives the infinity where the tile decoder's FMA form (q · d - 8d) gives NaN.
template <bool kFive>
inline void decode_q40_q50_block(const uint8_t* b, float* out) {
  const F d = V::half_bcast(b);
  const uint32_t qh = kFive ? gguf::u32_at(b + 2) : 0;  // q5_0: d, qh[4], qs[16]; q4_0: d, qs[16]
  const F sixteen = V::set1(16.0f);
  for (int j = 0; j < 16; j += W) {
    const I raw = V::u8(b + (kFive ? 6 : 2) + j);
    F lo, hi;
    if constexpr (kFive) {
      lo = V::add(gguf::nib_minus16(raw), V::select_bits(qh >> j, sixteen));
      hi = V::add(gguf::nib_minus16(V::template shr<4>(raw)),
                  V::select_bits(qh >> (16 + j), sixteen));
    } else {
      lo = gguf::nib_minus8(raw);
      hi = gguf::nib_minus8(V::template shr<4>(raw));
    }
    V::store(out + j, V::mul(lo, d));
    V::store(out + 16 + j, V::mul(hi, d));
  }
}

// GGUF blocks: q4_0 / q5_0 as above; the others the tile decoder's values (gguf.hpp, d · q - m
// as one FMA, which for the block types routed here equals the codec's single rounding:
// cpu::dequantize_simd_exact). Then stored in kDt.
template <class T, DType kDt>
inline void dequantize_gguf_rows(const WeightPlan& w, int64_t n0, int64_t rows, void* out) {
  constexpr int64_t kChunk = 1024;  // a multiple of every block (32, 256)
  constexpr bool kQ40 = std::is_same_v<T, gguf::Q4_0>, kQ50 = std::is_same_v<T, gguf::Q5<false>>;
  alignas(64) float buf[kChunk];
  for (int64_t n = n0; n < n0 + rows; ++n) {
    for (int64_t k0 = 0; k0 < w.k; k0 += kChunk) {
      const int64_t kc = imin(kChunk, w.k - k0);
      float* dst = kDt == DType::f32 ? static_cast<float*>(out) + n * w.k + k0 : buf;
      if constexpr (kQ40 || kQ50) {
        const uint8_t* row = row_ptr(w, n);
        for (int64_t blk = k0 / T::kElems; blk < (k0 + kc) / T::kElems; ++blk)
          decode_q40_q50_block<kQ50>(row + blk * T::kBytes, dst + blk * T::kElems - k0);
      } else {
        gguf::decode_row<T>(w, n, k0, kc, dst);
      }
      if constexpr (kDt != DType::f32)
        for (int64_t e = 0; e < kc; e += W)
          store_dense<kDt>(out, n * w.k + k0 + e, V::load(buf + e));
    }
  }
}

// fn.template operator()<kDt>() for the run-time dtype.
template <class Fn>
inline void with_dtype(DType dt, Fn&& fn) {
  switch (dt) {
    case DType::f32:
      return fn.template operator()<DType::f32>();
    case DType::f16:
      return fn.template operator()<DType::f16>();
    case DType::bf16:
      return fn.template operator()<DType::bf16>();
  }
}

inline void dequantize_nk(const WeightPlan& w, int64_t n0, int64_t rows, void* out, DType dt) {
  if (is_gguf(w.scheme)) {
    gguf::with_block(w.scheme, [&]<class T>() {
      with_dtype(dt, [&]<DType kDt>() { dequantize_gguf_rows<T, kDt>(w, n0, rows, out); });
    });
    return;
  }
  with_packed(w, [&]<Val kVal, int B, Sc kSc>() {
    with_dtype(dt, [&]<DType kDt>() { dequantize_nk_rows<kVal, B, kSc, kDt>(w, n0, rows, out); });
  });
}

}  // namespace quanta::cpu::QUANTA_ISA
