// f32 <-> f16 / bf16 conversions: round to nearest even, NaN/Inf preserved. Checked against
// the compiler's own _Float16 (an independent implementation) and a double-based bf16 rounding.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "quanta/numeric.hpp"

namespace quanta {
namespace {

uint16_t bits_of(_Float16 h) {
  uint16_t b;
  std::memcpy(&b, &h, 2);
  return b;
}

TEST(Numeric, F16DecodeMatchesCompilerForEveryPattern) {
  for (uint32_t b = 0; b < 65536; ++b) {
    _Float16 h;
    const uint16_t bits = static_cast<uint16_t>(b);
    std::memcpy(&h, &bits, 2);
    const float want = static_cast<float>(h);
    const float got = f16_bits_to_f32(bits);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << b;
    } else {
      EXPECT_EQ(float_bits(got), float_bits(want)) << "pattern " << b;
    }
  }
}

TEST(Numeric, F16EncodeRoundsToNearestEven) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> any;
  int checked = 0;
  for (int i = 0; i < 2000000; ++i) {
    const float f = bits_float(any(rng));
    if (std::isnan(f)) continue;
    ASSERT_EQ(f32_to_f16_bits(f), bits_of(static_cast<_Float16>(f))) << f;
    ++checked;
  }
  // Every f16 value and every midpoint between neighbours (the ties).
  for (uint32_t b = 0; b < 0x7c00; ++b) {
    const float v = f16_bits_to_f32(static_cast<uint16_t>(b));
    const float next = f16_bits_to_f32(static_cast<uint16_t>(b + 1));
    const float mid = static_cast<float>((static_cast<double>(v) + next) / 2);
    for (float f : {v, -v, mid, -mid})
      ASSERT_EQ(f32_to_f16_bits(f), bits_of(static_cast<_Float16>(f))) << f;
  }
  EXPECT_GT(checked, 1000000);
}

TEST(Numeric, F16SpecialValues) {
  EXPECT_EQ(f32_to_f16_bits(INFINITY), 0x7c00);
  EXPECT_EQ(f32_to_f16_bits(-INFINITY), 0xfc00);
  EXPECT_EQ(f32_to_f16_bits(65504.0f), 0x7bff);
  EXPECT_EQ(f32_to_f16_bits(65519.996f), 0x7bff);
  EXPECT_EQ(f32_to_f16_bits(65520.0f), 0x7c00);  // the tie rounds to even = Inf
  EXPECT_TRUE(std::isnan(f16_bits_to_f32(f32_to_f16_bits(NAN))));
  EXPECT_EQ(f32_to_f16_bits(-0.0f), 0x8000);
}

float bf16_reference(float f) {
  // Round the f32 to 8 significant bits, nearest even, through double arithmetic.
  if (std::isnan(f) || std::isinf(f) || f == 0) return f;
  int e;
  const double m = std::frexp(static_cast<double>(f), &e);  // f = m * 2^e, 0.5 <= |m| < 1
  const double scaled = std::ldexp(m, 8);
  double r = std::nearbyint(scaled);  // default FE_TONEAREST: ties to even
  return static_cast<float>(std::ldexp(r, e - 8));
}

TEST(Numeric, Bf16EncodeRoundsToNearestEven) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<uint32_t> any;
  for (int i = 0; i < 2000000; ++i) {
    const uint32_t u = any(rng);
    const float f = bits_float(u);
    if (std::isnan(f) || std::fabs(f) < 1e-37f || std::fabs(f) > 3e38f) continue;
    ASSERT_EQ(float_bits(bf16_bits_to_f32(f32_to_bf16_bits(f))), float_bits(bf16_reference(f)))
        << u;
  }
  EXPECT_EQ(f32_to_bf16_bits(INFINITY), 0x7f80);
  EXPECT_TRUE(std::isnan(bf16_bits_to_f32(f32_to_bf16_bits(NAN))));
  EXPECT_EQ(f32_to_bf16_bits(bits_float(0x3f808000u)), 0x3f80);  // tie to even (down)
  EXPECT_EQ(f32_to_bf16_bits(bits_float(0x3f818000u)), 0x3f82);  // tie to even (up)
}

TEST(Numeric, Pow2fIsLdexpOfOne) {
  for (int k = -400; k <= 400; ++k)
    ASSERT_EQ(float_bits(pow2f(k)), float_bits(std::ldexp(1.0f, k))) << k;
}

}  // namespace
}  // namespace quanta
