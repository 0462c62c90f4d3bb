// MLX "affine" codec: w = scale * q + bias, q unsigned with `bits` bits, one (scale, bias)
// per group of G elements along a row. Shared by the oracle, CPU and CUDA code.
//
// Packing (MLX, "from the lower to upper bits"): a row is one LSB-first bit stream; code i
// sits at stream bits [i*bits, (i+1)*bits). For bits 2/4/8 this is exactly "element i of a
// little-endian uint32 at bits [i*b, (i+1)*b)"; for 3/5/6 bits MLX writes 8 (3, 5 bits) or 4
// (6 bits) codes into 3, 5 or 3 bytes, which is the same stream. So one extractor serves all.
#pragma once

#include <cmath>
#include <cstdint>

#include "quanta/numeric.hpp"

namespace quanta::codec {

inline constexpr float kAffineEps = 1e-7f;  // MLX: smallest |scale|

// Code i of a packed row of `n_codes` codes.
QUANTA_HD inline uint32_t affine_code(const uint8_t* row, int64_t i, int bits, int64_t n_codes) {
  const int64_t bit = i * bits;
  const int64_t byte = bit >> 3;
  const int shift = static_cast<int>(bit & 7);
  uint32_t v = row[byte];
  // A code straddles into the next byte only when shift + bits > 8; never read past the row.
  if (shift + bits > 8 && (byte + 1) * 8 < n_codes * bits)
    v |= static_cast<uint32_t>(row[byte + 1]) << 8;
  return (v >> shift) & ((1u << bits) - 1u);
}

// ORs code q into a zero-initialised packed row.
inline void affine_put_code(uint8_t* row, int64_t i, int bits, uint32_t q) {
  const int64_t bit = i * bits;
  const int64_t byte = bit >> 3;
  const int shift = static_cast<int>(bit & 7);
  const uint32_t v = q << shift;
  row[byte] |= static_cast<uint8_t>(v & 0xffu);
  if (shift + bits > 8) row[byte + 1] |= static_cast<uint8_t>(v >> 8);
}

struct AffineParams {
  float scale;
  float bias;
};

// MLX's quantize rule (mlx/backend/cpu/quantized.cpp `quantize`, f32 math): the edge with the
// larger magnitude becomes the bias and is stored exactly (code 0); the scale is negative
// when |max| >= |min|; 0.0 is then exactly representable (code -q0).
QUANTA_HD inline AffineParams affine_params_mlx(float w_min, float w_max, int bits) {
  const float n_bins = static_cast<float>((1 << bits) - 1);
  const bool min_is_edge = fabsf(w_min) > fabsf(w_max);
  float scale = fmaxf((w_max - w_min) / n_bins, kAffineEps);
  scale = min_is_edge ? scale : -scale;
  const float edge = min_is_edge ? w_min : w_max;
  const float q0 = rintf(edge / scale);
  float bias = 0.0f;
  if (q0 != 0.0f) {
    scale = edge / q0;
    bias = edge;
  }
  return {scale, bias};
}

// MLX: codes use the f32 scale and bias (before they are rounded to the storage dtype).
QUANTA_HD inline uint32_t affine_encode_mlx(float w, AffineParams p, int bits) {
  const float n_bins = static_cast<float>((1 << bits) - 1);
  float q = rintf((w - p.bias) / p.scale);
  q = fminf(fmaxf(q, 0.0f), n_bins);
  return static_cast<uint32_t>(q);
}

}  // namespace quanta::codec
