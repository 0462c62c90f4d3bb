// Element and scale codecs for the small floating-point types: E2M1 (fp4), E4M3FN and
// E5M2 (fp8, OCP), E8M0 (OCP MX scale). Shared by the oracle, the CPU and CUDA kernels.
#pragma once

#include <cstdint>

#include "quanta/numeric.hpp"

namespace quanta::codec {

inline constexpr float kE2M1Max = 6.0f;
inline constexpr float kE4M3Max = 448.0f;  // OCP E4M3FN: S.1111.110
inline constexpr float kE5M2Max = 57344.0f;
inline constexpr uint8_t kE4M3MaxCode = 0x7e;
inline constexpr uint8_t kE4M3NaN = 0x7f;  // OCP: S.1111.111 is NaN, there is no Inf
inline constexpr uint8_t kE5M2MaxCode = 0x7b;

// ---- E2M1: bit 3 sign, 2 exponent bits (bias 1), 1 mantissa bit -------------------------
// Magnitudes of codes 0..7 (OCP MX v1.0 table; MLX FP4_LUT; ggml kvalues_fp4 = 2x these).
QUANTA_HD inline float e2m1_to_float(uint8_t code) {
  // value * 2 is an integer: 0,1,2,3,4,6,8,12
  const uint32_t mag = code & 7u;
  const uint32_t e = mag >> 1, m = mag & 1u;
  const uint32_t twice = e == 0 ? m : (2u + m) << (e - 1);
  const float v = 0.5f * static_cast<float>(twice);
  return (code & 8u) ? -v : v;
}

// MLX quantize: argmin |x - LUT| over the table in code order, so a tie goes to the
// smaller magnitude (0.75 -> 0.5, 1.75 -> 1.5, 3.5 -> 3) and anything that rounds to zero
// becomes +0 (code 0, listed before -0). Large values saturate to +-6.
QUANTA_HD inline uint8_t float_to_e2m1_mlx(float x) {
  const float a = x < 0 ? -x : x;
  uint8_t mag;
  if (a <= 0.25f)
    return 0;  // includes -0 and NaN-free ties at 0.25
  else if (a <= 0.75f)
    mag = 1;
  else if (a <= 1.25f)
    mag = 2;
  else if (a <= 1.75f)
    mag = 3;
  else if (a <= 2.5f)
    mag = 4;
  else if (a <= 3.5f)
    mag = 5;
  else if (a <= 5.0f)
    mag = 6;
  else
    mag = 7;
  return static_cast<uint8_t>(x < 0 ? (mag | 8u) : mag);
}

// ---- generic sign/exponent/mantissa rounding ----------------------------------------------
// Round |f| (finite, f32) to a minifloat with EBITS/MBITS/BIAS, nearest-even, and return the
// unsigned code; the caller handles sign, NaN, Inf and saturation (the code may exceed the
// format's largest finite code when |f| is too large).
template <int EBITS, int MBITS, int BIAS>
QUANTA_HD inline uint32_t round_to_minifloat_code(float f) {
  const uint32_t a = float_bits(f) & 0x7fffffffu;
  const int e = static_cast<int>(a >> 23) - 127;
  constexpr int kMinExp = 1 - BIAS;
  if (a == 0 || e < kMinExp - MBITS - 2) return 0;  // far below half the smallest subnormal
  const uint32_t m24 = (a & 0x7fffffu) | 0x800000u;
  if (e < kMinExp) {
    // subnormal target: code = round(|f| / 2^(kMinExp - MBITS)); shift is 24..
    const int shift = 23 + kMinExp - MBITS - e;
    uint32_t r = m24 >> shift;
    const uint32_t rem = m24 & ((1u << shift) - 1u);
    const uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1u))) ++r;
    return r;  // r == 2^MBITS is the smallest normal, which is the right code
  }
  constexpr int kShift = 23 - MBITS;
  uint32_t r = (a & 0x7fffffu) >> kShift;
  const uint32_t rem = a & ((1u << kShift) - 1u);
  constexpr uint32_t kHalf = 1u << (kShift - 1);
  uint32_t code = (static_cast<uint32_t>(e + BIAS) << MBITS) | r;
  if (rem > kHalf || (rem == kHalf && (r & 1u))) ++code;  // carry into the exponent is right
  return code;
}

// ---- E4M3FN (OCP): bias 7, max 448, NaN 0x7F/0xFF, no Inf ---------------------------------
QUANTA_HD inline float e4m3_to_float(uint8_t b) {
  const uint32_t e = (b >> 3) & 0xfu, m = b & 7u;
  float v;
  if ((b & 0x7fu) == 0x7fu) {
    v = bits_float(0x7fc00000u);
  } else if (e == 0) {
    v = static_cast<float>(m) * 0.001953125f;  // m * 2^-9
  } else {
    v = bits_float(((e + 120u) << 23) | (m << 20));
  }
  return (b & 0x80u) ? -v : v;
}

// Round to nearest even, saturating: |x| > 448 (Inf included) becomes +-448; NaN stays NaN.
// This is MLX's ToFP8 for finite input and OCP's "saturating" conversion mode.
QUANTA_HD inline uint8_t float_to_e4m3(float x) {
  const uint32_t bits = float_bits(x);
  const uint8_t sign = static_cast<uint8_t>((bits >> 24) & 0x80u);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint8_t>(sign | kE4M3NaN);
  if ((bits & 0x7fffffffu) >= 0x7f800000u) return static_cast<uint8_t>(sign | kE4M3MaxCode);
  uint32_t code = round_to_minifloat_code<4, 3, 7>(x);
  if (code > kE4M3MaxCode) code = kE4M3MaxCode;
  return static_cast<uint8_t>(sign | code);
}

// ---- E5M2 (OCP): bias 15, max 57344, IEEE-like Inf/NaN -----------------------------------
QUANTA_HD inline float e5m2_to_float(uint8_t b) {
  // E5M2 is the top byte of an IEEE binary16.
  return f16_bits_to_f32(static_cast<uint16_t>(b) << 8);
}

// Round to nearest even, saturating finite overflow and +-Inf to +-57344; NaN stays NaN.
QUANTA_HD inline uint8_t float_to_e5m2(float x) {
  const uint32_t bits = float_bits(x);
  const uint8_t sign = static_cast<uint8_t>((bits >> 24) & 0x80u);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint8_t>(sign | 0x7eu);
  if ((bits & 0x7fffffffu) >= 0x7f800000u) return static_cast<uint8_t>(sign | kE5M2MaxCode);
  uint32_t code = round_to_minifloat_code<5, 2, 15>(x);
  if (code > kE5M2MaxCode) code = kE5M2MaxCode;
  return static_cast<uint8_t>(sign | code);
}

// ---- E8M0 (OCP MX scale): 2^(b - 127), 0xFF is NaN ----------------------------------------
QUANTA_HD inline float e8m0_to_float(uint8_t b) {
  if (b == 0xffu) return bits_float(0x7fc00000u);
  if (b == 0) return bits_float(0x00400000u);  // 2^-127 is an f32 subnormal
  return bits_float(static_cast<uint32_t>(b) << 23);
}

// MLX (>= 0.30) chooses the scale exponent by rounding UP: e = ceil(log2(s)), so that
// |w| / 2^e never exceeds the element maximum. s = 0 gives e = 0; clamp to [-127, 127];
// non-finite s gives 0xFF. Computed exactly from the bits (no log2 rounding).
QUANTA_HD inline uint8_t float_to_e8m0_ceil(float s) {
  const uint32_t a = float_bits(s);
  if ((a & 0x7f800000u) == 0x7f800000u) return 0xffu;
  if (s <= 0.0f) return 127;  // zero group (and, defensively, negative input)
  uint32_t b = a;
  int bias = 127;
  if ((a >> 23) == 0) {  // f32 subnormal: scale by 2^64 (exact) to read its exponent
    b = float_bits(s * 18446744073709551616.0f);
    bias += 64;
  }
  int e = static_cast<int>(b >> 23) - bias + ((b & 0x7fffffu) ? 1 : 0);
  if (e < -127) e = -127;
  if (e > 127) e = 127;
  return static_cast<uint8_t>(e + 127);
}

// 2^e as a float for e in [-127, 127] (the element divisor for E8M0 scales).
QUANTA_HD inline float exp2_int(int e) {
  return e >= -126 ? bits_float(static_cast<uint32_t>(e + 127) << 23) : bits_float(0x00400000u);
}

}  // namespace quanta::codec
