// MLX microscaled modes: mxfp4 (E2M1 x E8M0/32), mxfp8 (E4M3 x E8M0/32), nvfp4
// (E2M1 x E4M3/16, optional f32 global scale). Codes are packed LSB-first: fp4 element i
// of a row in bits [4i, 4i+4) (low nibble = even element), fp8 element i in byte i.
#pragma once

#include <cstdint>

#include "format/minifloat.hpp"

namespace quanta::codec {

// nvfp4 two-level scaling. MLX quantize takes `global_scale` = amax of the tensor and
// encodes block scales as e4m3(block_amax / 6 * 2688 / global_scale); its dequantize
// multiplies by global_scale / 2688. quanta stores that decode multiplier
// (NVIDIA ModelOpt's `weight_scale_2`), so a matrix's value is e2m1 * e4m3 * global.
inline constexpr float kNvfp4GlobalRange = 448.0f * 6.0f;  // 2688

// The element divisor and stored scale byte of one group, given its max |w|.
struct MicroScale {
  uint8_t byte;   // stored scale (E8M0 or E4M3)
  float divisor;  // elements are encoded as w / divisor (then * encode factor for nvfp4)
};

// MLX computes the quantizer in the weights' dtype T (its graph ops keep w.dtype): the raw
// scale amax / elem_max and each w / divisor are rounded to T; the nvfp4 encode factor and the
// final product stay f32. round_to<T> reproduces those roundings (identity for f32).

// mxfp4 / mxfp8 (MLX >= 0.30): e = ceil(log2(amax / elem_max)), elements w / 2^e.
template <class T>
QUANTA_HD inline MicroScale mx_scale_mlx(float amax, float elem_max) {
  const uint8_t b = float_to_e8m0_ceil(round_to<T>(amax / elem_max));
  return {b, b == 0xffu ? bits_float(0x7fc00000u) : exp2_int(static_cast<int>(b) - 127)};
}

// nvfp4: block scale byte = e4m3(T(amax / 6) * encode), encode = 2688 / global_amax or 1.
template <class T>
QUANTA_HD inline MicroScale nv_scale_mlx(float amax, float encode) {
  const uint8_t b = float_to_e4m3(round_to<T>(amax / kE2M1Max) * encode);
  return {b, e4m3_to_float(b)};
}

// fp4 code of w in a group with divisor d: MLX takes T(w / d) * encode; a zero divisor
// (all-zero or underflowed group) gives code 0.
template <class T>
QUANTA_HD inline uint8_t fp4_encode_mlx(float w, float d, float encode) {
  if (d == 0.0f) return 0;
  return float_to_e2m1_mlx(round_to<T>(w / d) * encode);
}

template <class T>
QUANTA_HD inline uint8_t fp8_encode_mlx(float w, float d) {
  if (d == 0.0f) return 0;
  return float_to_e4m3(round_to<T>(w / d));
}

// Decoded scale of a stored byte.
QUANTA_HD inline float e8m0_scale(uint8_t b) {
  return e8m0_to_float(b);
}

}  // namespace quanta::codec
