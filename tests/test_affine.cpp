// The affine codec on its own: MLX's quantize rule, the bit-stream packing of every width.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "format/affine.hpp"

namespace quanta::codec {
namespace {

// formats-and-cpu.md §1.1 worked example (same algorithm as MLX's CPU quantize).
TEST(Affine, MlxRuleLargerMagnitudeEdgeIsTheBias) {
  const float w[8] = {-0.3f, 0.1f, 0.9f, 0.0f, 0.45f, -0.2f, 0.7f, 0.2f};
  const AffineParams p = affine_params_mlx(-0.3f, 0.9f, 4);
  EXPECT_FLOAT_EQ(p.bias, 0.9f);
  EXPECT_NEAR(p.scale, 0.9f / -11.0f, 1e-7f);  // negative: the max is the edge
  const uint32_t want[8] = {15, 10, 0, 11, 6, 13, 2, 9};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(affine_encode_mlx(w[i], p, 4), want[i]) << i;
  EXPECT_EQ(p.scale * 11 + p.bias, 0.0f);  // code 11 is exactly zero
}

// The Metal seed's rule (bias = min, round half up) is older than MLX's: a test names the case.
TEST(Affine, OwnerWinsBiasIsNotTheGroupMinimum) {
  const AffineParams p = affine_params_mlx(-0.3f, 0.9f, 4);
  EXPECT_NE(p.bias, -0.3f);
  const AffineParams q = affine_params_mlx(-2.0f, 0.5f, 4);  // |min| > |max|: min is the edge
  EXPECT_FLOAT_EQ(q.bias, -2.0f);
  EXPECT_GT(q.scale, 0.0f);
}

TEST(Affine, FlatGroupUsesEps) {
  const AffineParams p = affine_params_mlx(0.37f, 0.37f, 4);
  EXPECT_FLOAT_EQ(p.bias, 0.37f);
  EXPECT_EQ(affine_encode_mlx(0.37f, p, 4), 0u);
  const AffineParams z = affine_params_mlx(0.0f, 0.0f, 4);
  EXPECT_EQ(z.bias, 0.0f);
  EXPECT_EQ(affine_encode_mlx(0.0f, z, 4), 0u);
}

// MLX's byte-level decode of 3/5/6-bit packs (mlx/backend/cpu/quantized.cpp extract_bits),
// restated independently, must agree with the bit-stream extractor.
uint32_t mlx_extract(const uint8_t* b, int bits, int i) {
  if (bits == 3) {
    switch (i) {
      case 0:
        return b[0] & 7;
      case 1:
        return (b[0] >> 3) & 7;
      case 2:
        return (b[0] >> 6) | ((b[1] & 1) << 2);
      case 3:
        return (b[1] >> 1) & 7;
      case 4:
        return (b[1] >> 4) & 7;
      case 5:
        return (b[1] >> 7) | ((b[2] & 3) << 1);
      case 6:
        return (b[2] >> 2) & 7;
      default:
        return b[2] >> 5;
    }
  }
  if (bits == 5) {
    switch (i) {
      case 0:
        return b[0] & 31;
      case 1:
        return (b[0] >> 5) | ((b[1] & 3) << 3);
      case 2:
        return (b[1] >> 2) & 31;
      case 3:
        return (b[1] >> 7) | ((b[2] & 15) << 1);
      case 4:
        return (b[2] >> 4) | ((b[3] & 1) << 4);
      case 5:
        return (b[3] >> 1) & 31;
      case 6:
        return (b[3] >> 6) | ((b[4] & 7) << 2);
      default:
        return b[4] >> 3;
    }
  }
  switch (i) {  // 6 bits: 4 codes in 3 bytes
    case 0:
      return b[0] & 63;
    case 1:
      return (b[0] >> 6) | ((b[1] & 15) << 2);
    case 2:
      return (b[1] >> 4) | ((b[2] & 3) << 4);
    default:
      return b[2] >> 2;
  }
}

TEST(Affine, BitStreamMatchesMlxBytePacks) {
  std::mt19937 rng(3);
  for (int bits : {3, 5, 6}) {
    const int per_pack = bits == 6 ? 4 : 8, pack_bytes = bits == 5 ? 5 : 3;
    for (int trial = 0; trial < 200; ++trial) {
      uint8_t row[5 * 4] = {};
      uint32_t codes[32];
      const int n = per_pack * 4;
      for (int i = 0; i < n; ++i) {
        codes[i] = rng() & ((1u << bits) - 1);
        affine_put_code(row, i, bits, codes[i]);
      }
      for (int i = 0; i < n; ++i) {
        EXPECT_EQ(affine_code(row, i, bits, n), codes[i]);
        EXPECT_EQ(mlx_extract(row + (i / per_pack) * pack_bytes, bits, i % per_pack), codes[i]);
      }
    }
  }
}

TEST(Affine, PowerOfTwoWidthsAreLittleEndianWords) {
  for (int bits : {2, 4, 8}) {
    uint8_t row[8] = {};
    const int n = 64 / bits;
    for (int i = 0; i < n; ++i)
      affine_put_code(row, i, bits, static_cast<uint32_t>(i) & ((1u << bits) - 1));
    uint32_t w0;
    std::memcpy(&w0, row, 4);
    for (int i = 0; i < 32 / bits; ++i)
      EXPECT_EQ((w0 >> (i * bits)) & ((1u << bits) - 1),
                static_cast<uint32_t>(i) & ((1u << bits) - 1));
  }
}

}  // namespace
}  // namespace quanta::codec
