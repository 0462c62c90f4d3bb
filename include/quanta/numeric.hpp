// Bit-exact scalar conversions shared by host and device code: f32 <-> f16 / bf16
// with round-to-nearest-even, NaN and Inf preserved. No dependencies.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define QUANTA_HD __host__ __device__
#define QUANTA_FORCEINLINE __forceinline__
#else
#define QUANTA_HD
#define QUANTA_FORCEINLINE inline __attribute__((always_inline))
#endif

namespace quanta {

QUANTA_HD QUANTA_FORCEINLINE uint32_t float_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}

QUANTA_HD QUANTA_FORCEINLINE float bits_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}

// 2^k as f32, exactly std::ldexp(1.0f, k): Inf past 2^127, subnormals down to 2^-149, then 0.
// Without libm's call (the CPU GEMV's x planes take several per 128 elements of x).
QUANTA_HD QUANTA_FORCEINLINE float pow2f(int k) {
  if (k > 127) return bits_float(0x7F800000u);
  if (k >= -126) return bits_float(static_cast<uint32_t>(k + 127) << 23);
  if (k >= -149) return bits_float(uint32_t{1} << (k + 149));
  return 0.0f;
}

// IEEE binary16, round to nearest even. Values >= 65520 become Inf; NaN stays a quiet NaN.
QUANTA_HD inline uint16_t f32_to_f16_bits(float f) {
  const uint32_t x = float_bits(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t a = x & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // 65520 ties up to Inf
  if (a < 0x38800000u) {  // below 2^-14: the result is a half subnormal (units of 2^-24)
    const uint32_t e = a >> 23;
    if (e < 102) return static_cast<uint16_t>(sign);  // below 2^-25 rounds to zero
    const uint32_t m = (a & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - e;
    uint32_t r = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1);
    const uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1u))) ++r;
    return static_cast<uint16_t>(sign | r);
  }
  const uint32_t r = a - 0x38000000u;  // rebias the exponent from 127 to 15
  uint32_t h = r >> 13;
  const uint32_t rem = r & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // a carry may reach Inf: correct
  return static_cast<uint16_t>(sign | h);
}

QUANTA_HD inline float f16_bits_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu;
  const uint32_t m = h & 0x3ffu;
  if (e == 0x1f) return bits_float(sign | 0x7f800000u | (m << 13));
  if (e == 0) {
    // subnormal: m * 2^-24, exact in f32
    const float v = static_cast<float>(m) * 5.9604644775390625e-8f;
    return sign ? -v : v;
  }
  return bits_float(sign | ((e + 112u) << 23) | (m << 13));
}

// bfloat16: the top half of an f32, round to nearest even; NaN forced quiet.
QUANTA_HD inline uint16_t f32_to_bf16_bits(float f) {
  const uint32_t x = float_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

QUANTA_HD QUANTA_FORCEINLINE float bf16_bits_to_f32(uint16_t b) {
  return bits_float(static_cast<uint32_t>(b) << 16);
}

// Storage types for 16-bit activations. Plain structs (trivially copyable) so they can
// live in host vectors and device buffers alike; arithmetic always goes through float.
struct f16 {
  uint16_t bits;
  f16() = default;
  QUANTA_HD static f16 from_bits(uint16_t b) {
    f16 v;
    v.bits = b;
    return v;
  }
  QUANTA_HD explicit f16(float f) : bits(f32_to_f16_bits(f)) {}
  QUANTA_HD explicit operator float() const { return f16_bits_to_f32(bits); }
};

struct bf16 {
  uint16_t bits;
  bf16() = default;
  QUANTA_HD static bf16 from_bits(uint16_t b) {
    bf16 v;
    v.bits = b;
    return v;
  }
  QUANTA_HD explicit bf16(float f) : bits(f32_to_bf16_bits(f)) {}
  QUANTA_HD explicit operator float() const { return bf16_bits_to_f32(bits); }
};

static_assert(sizeof(f16) == 2 && sizeof(bf16) == 2);

// Round-trips through the storage type: the value a stored T would hold.
template <class T>
QUANTA_HD inline float round_to(float f) {
  if constexpr (sizeof(T) == 4) {
    return f;
  } else {
    return static_cast<float>(T(f));
  }
}

}  // namespace quanta
