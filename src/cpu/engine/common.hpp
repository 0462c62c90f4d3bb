// The CPU engine's shared vocabulary, written once over a vector type V and compiled once per
// ISA: a file includes its level's src/cpu/simd/<isa>.hpp, defines QUANTA_ISA to that
// namespace, then includes the engine. Everything lands in quanta::cpu::<isa>, so no inline
// function is shared between files built with different instruction sets.
#pragma once

#include <cstdint>
#include <cstring>
#include <utility>

#include "cpu/plan.hpp"

#ifndef QUANTA_ISA
#error "define QUANTA_ISA (scalar, avx2, avx512) and include its simd header first"
#endif

namespace quanta::cpu::QUANTA_ISA {

using F = V::F;
using I = V::I;
inline constexpr int W = V::W;

// Element decoders of the grouped formats.
enum class Val : uint8_t { uint, e2m1, e4m3, e5m2 };
// Scale encodings: affine (scale and bias in scale_dtype), E8M0, E4M3 (nvfp4, x global),
// per-channel/tensor f32 (fp8).
enum class Sc : uint8_t { affine, e8m0, e4m3, f32 };

// E2M1 magnitudes (OCP MX v1.0), sign in bit 3.
alignas(64) inline constexpr float kE2M1[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,
                                                4.0f,  6.0f,  -0.0f, -0.5f, -1.0f, -1.5f,
                                                -2.0f, -3.0f, -4.0f, -6.0f};

// The GEMV's software prefetch. A task reads whole rows, which lie back to back, so its codes
// are one stream; the hardware prefetchers alone leave the 2-core EPYC at 5-12 GB/s.
// Prefetching 2, 4 and 6 KB ahead into L1, once per vector-chunk of codes (several requests
// per line: the L1 drops a prefetch when its miss buffers are full), measured best of the
// variants tried (1-16 KB, L1 or L2 hint, one or several distances, one request per line or
// per chunk): 36 GB/s against 24 with one 4 KB prefetch per line (docs/perf-cpu.md). One more
// request, to L2 at 12 KB, carries the 8-bit formats through slower memory (1.3-1.6x on a VM
// reading 22-34 GB/s; 4-bit formats within the spread). Past the last row of a task it touches
// the next task's rows or the scales: harmless.
inline void prefetch_stream(const uint8_t* q) {
  V::prefetch(q + 2048);
  V::prefetch(q + 4096);
  V::prefetch(q + 6144);
  V::prefetch_l2(q + 12288);
}

// GGUF block schemes (Scheme ids are stable; the GGUF ones follow fp8).
inline bool is_gguf(Scheme s) {
  return static_cast<int>(s) >= static_cast<int>(Scheme::q4_0);
}

// Makes the compiler forget what v holds, so later reads load it from memory: a scale read
// back as a broadcast operand of an FMA instead of a lane permute from a register.
template <class T>
inline void from_memory(T& v) {
  asm volatile("" : "+m"(v));
}

inline int64_t imin(int64_t a, int64_t b) {
  return a < b ? a : b;
}

inline float f32_of_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Storage row r: rows near the end of the buffer come from the padded copy, so whole-vector
// loads never leave the caller's allocation.
inline const uint8_t* row_ptr(const WeightPlan& w, int64_t r) {
  return r < w.tail_row ? w.codes + r * w.row_bytes : w.tail_codes + (r - w.tail_row) * w.row_bytes;
}

inline int sd_size(DType t) {
  return t == DType::f32 ? 4 : 2;
}

// ---- scalar decoders (scales; private copies of src/format codecs, see common.hpp top) ----
inline float e8m0_1(uint8_t b) {
  if (b == 0xff) return __builtin_nanf("");
  return f32_of_bits(b == 0 ? 0x00400000u : static_cast<uint32_t>(b) << 23);
}

// E4M3FN byte -> f32 (NaN for 0x7f / 0xff), from a table made at compile time: one load where
// the tile decode takes nvfp4's scale per 16 weights (a branchy decode there made nvfp4's tiles
// the slowest to decode).
struct E4m3Table {
  float v[256];
};
consteval E4m3Table make_e4m3_table() {
  E4m3Table t{};
  for (int b = 0; b < 256; ++b) {
    const int e = (b >> 3) & 15, m = b & 7;
    float v = 0.0f;
    if ((b & 0x7f) == 0x7f) {
      v = __builtin_nanf("");
    } else if (e == 0) {
      v = static_cast<float>(m) * 0.001953125f;  // m * 2^-9
    } else {
      v = 1.0f + static_cast<float>(m) / 8.0f;  // (1 + m/8) * 2^(e - 7), exact
      for (int i = 7; i < e; ++i) v *= 2.0f;
      for (int i = e; i < 7; ++i) v *= 0.5f;
    }
    t.v[b] = (b & 0x80) ? -v : v;
  }
  return t;
}
inline constexpr E4m3Table kE4m3Table = make_e4m3_table();
inline float e4m3_1(uint8_t b) {
  return kE4m3Table.v[b];
}

inline float sd_1(const uint8_t* p, DType t) {
  if (t == DType::f32) {
    float v;
    std::memcpy(&v, p, 4);
    return v;
  }
  if (t == DType::f16) return V::half1(p);
  uint16_t h;
  std::memcpy(&h, p, 2);
  return f32_of_bits(static_cast<uint32_t>(h) << 16);
}

// Code j (bits 2j, 2j + 1) of each lane's byte as c · 4^j, exactly the value of the code
// masked in place. On AVX-512 one vpermps per code: the low nibble (raw) or the high one
// (hi = raw >> 4) indexes a table of its low or high code (no masks, no converts); elsewhere
// a mask and a convert.
struct QuadTables {
  alignas(64) float t[4][16] = {};
  constexpr QuadTables() {
    for (int j = 0; j < 4; ++j)
      for (int i = 0; i < 16; ++i)
        t[j][i] = static_cast<float>((j % 2 ? i >> 2 : i & 3) << (2 * j));
  }
};
alignas(64) inline constexpr QuadTables kQuadTables{};
template <int J>
inline F quad_code(I raw, I hi) {
  if constexpr (W == 16)
    return V::lut(V::tbl(kQuadTables.t[J]), J < 2 ? raw : hi);
  else
    return V::cvt(V::and_(raw, V::seti(3 << (2 * J))));
}

// Codes e0 .. e0 + W - 1 of a packed row as floats. 8-bit codes arrive zero-extended, so they
// skip ucvt's mask (16 of the ~70 vector operations per 128 codes in the avx2 8-bit GEMV).
template <int B>
inline F code_floats(const uint8_t* row, int64_t e0) {
  if constexpr (B == 8)
    return V::cvt(V::template codes<8>(row, e0));
  else
    return V::template ucvt<B>(V::template codes<B>(row, e0));
}

// W elements from e0 (a multiple of W) of a packed storage row, natural order, unscaled.
template <Val kVal, int B>
inline F natural(const uint8_t* row, int64_t e0) {
  if constexpr (kVal == Val::e2m1)
    return V::lut(V::tbl(kE2M1), V::template codes<4>(row, e0));
  else if constexpr (kVal == Val::e4m3)
    return V::e4m3(row + e0);
  else if constexpr (kVal == Val::e5m2)
    return V::e5m2(row + e0);
  else
    return code_floats<B>(row, e0);
}

// Calls fn.template operator()<kVal, B, kSc>() for a packed (non-GGUF) scheme.
template <class Fn>
inline void with_packed(const WeightPlan& w, Fn&& fn) {
  switch (w.scheme) {
    case Scheme::affine:
      switch (w.bits) {
        case 2:
          return fn.template operator()<Val::uint, 2, Sc::affine>();
        case 3:
          return fn.template operator()<Val::uint, 3, Sc::affine>();
        case 4:
          return fn.template operator()<Val::uint, 4, Sc::affine>();
        case 5:
          return fn.template operator()<Val::uint, 5, Sc::affine>();
        case 6:
          return fn.template operator()<Val::uint, 6, Sc::affine>();
        default:
          return fn.template operator()<Val::uint, 8, Sc::affine>();
      }
    case Scheme::mxfp4:
      return fn.template operator()<Val::e2m1, 4, Sc::e8m0>();
    case Scheme::mxfp8:
      return fn.template operator()<Val::e4m3, 8, Sc::e8m0>();
    case Scheme::nvfp4:
      return fn.template operator()<Val::e2m1, 4, Sc::e4m3>();
    case Scheme::fp8_e4m3:
      return fn.template operator()<Val::e4m3, 8, Sc::f32>();
    case Scheme::fp8_e5m2:
      return fn.template operator()<Val::e5m2, 8, Sc::f32>();
    default:
      return;
  }
}

}  // namespace quanta::cpu::QUANTA_ISA
