// fp4 / fp8 / e8m0 codecs against ml_dtypes (the OCP owners' reference tables) and the cases
// where the owner and the seeds or MLX disagree.
#include <gtest/gtest.h>

#include <cmath>

#include "format/minifloat.hpp"
#include "golden_io.hpp"

namespace quanta::codec {
namespace {

using test::read_array;
using test::read_manifest;

void expect_same(float got, float want, int code) {
  if (std::isnan(want)) {
    EXPECT_TRUE(std::isnan(got)) << "code " << code;
  } else {
    EXPECT_EQ(float_bits(got), float_bits(want))
        << "code " << code << " got " << got << " want " << want;
  }
}

TEST(Minifloat, DecodeTablesMatchMlDtypes) {
  const auto m = read_manifest("ml_dtypes");
  const auto e4m3 = read_array<float>("ml_dtypes/" + m["decode"]["e4m3fn"].get<std::string>());
  const auto e5m2 = read_array<float>("ml_dtypes/" + m["decode"]["e5m2"].get<std::string>());
  const auto e8m0 = read_array<float>("ml_dtypes/" + m["decode"]["e8m0fnu"].get<std::string>());
  const auto e2m1 = read_array<float>("ml_dtypes/" + m["decode"]["e2m1fn"].get<std::string>());
  ASSERT_EQ(e4m3.size(), 256u);
  for (int c = 0; c < 256; ++c) {
    expect_same(e4m3_to_float(static_cast<uint8_t>(c)), e4m3[c], c);
    expect_same(e5m2_to_float(static_cast<uint8_t>(c)), e5m2[c], c);
    expect_same(e8m0_to_float(static_cast<uint8_t>(c)), e8m0[c], c);
  }
  for (int c = 0; c < 16; ++c) expect_same(e2m1_to_float(static_cast<uint8_t>(c)), e2m1[c], c);
}

TEST(Minifloat, EncodeMatchesMlDtypesRoundToNearestEven) {
  const auto m = read_manifest("ml_dtypes");
  for (const char* name : {"e4m3fn", "e5m2"}) {
    const auto& e = m["encode"][name];
    const auto in = read_array<float>("ml_dtypes/" + e["input"].get<std::string>());
    const auto want = read_array<uint8_t>("ml_dtypes/" + e["codes"].get<std::string>());
    ASSERT_EQ(in.size(), want.size());
    const bool is_e4m3 = std::string(name) == "e4m3fn";
    for (size_t i = 0; i < in.size(); ++i) {
      const uint8_t got = is_e4m3 ? float_to_e4m3(in[i]) : float_to_e5m2(in[i]);
      ASSERT_EQ(got, want[i]) << name << " input " << in[i];
    }
  }
}

// The CPU seed decodes E4M3 as IEEE-like with Inf at exponent 15, so its largest finite value
// is 240 and 0x78..0x7E become Inf/NaN. OCP E4M3FN (the owner) has no Inf: max is 448.
TEST(Minifloat, OwnerWinsE4M3MaxIs448Not240) {
  EXPECT_EQ(e4m3_to_float(0x7e), 448.0f);
  EXPECT_EQ(e4m3_to_float(0x78), 256.0f);
  EXPECT_EQ(e4m3_to_float(0xfe), -448.0f);
  EXPECT_TRUE(std::isnan(e4m3_to_float(0x7f)));  // MLX decodes 0x7F as 480; OCP says NaN
  EXPECT_TRUE(std::isnan(e4m3_to_float(0xff)));
}

// Saturating conversion (MLX ToFP8, OCP's saturating mode): ml_dtypes would give NaN for e4m3fn.
TEST(Minifloat, EncodeSaturates) {
  EXPECT_EQ(float_to_e4m3(1e6f), 0x7e);
  EXPECT_EQ(float_to_e4m3(-465.0f), 0xfe);
  EXPECT_EQ(float_to_e4m3(INFINITY), 0x7e);
  EXPECT_EQ(float_to_e4m3(NAN) & 0x7f, 0x7f);
  EXPECT_EQ(float_to_e5m2(1e9f), 0x7b);
  EXPECT_EQ(float_to_e5m2(-INFINITY), 0xfb);
  EXPECT_TRUE(std::isnan(e5m2_to_float(float_to_e5m2(NAN))));
}

// MLX (>= 0.30) rounds the MX scale exponent up; OCP's reference uses floor(log2 amax) - emax.
TEST(Minifloat, E8M0CeilChoice) {
  EXPECT_EQ(float_to_e8m0_ceil(1.0f), 127);
  EXPECT_EQ(float_to_e8m0_ceil(1.0001f), 128);
  EXPECT_EQ(float_to_e8m0_ceil(0.75f), 127);
  EXPECT_EQ(float_to_e8m0_ceil(0.5f), 126);
  EXPECT_EQ(float_to_e8m0_ceil(0.0f), 127);  // MLX: an all-zero group gets 2^0
  EXPECT_EQ(float_to_e8m0_ceil(1e-45f), 0);  // clamped to 2^-127
  EXPECT_EQ(float_to_e8m0_ceil(3e38f), 255 - 1);
  EXPECT_EQ(float_to_e8m0_ceil(INFINITY), 0xff);
  for (int e = -126; e <= 127; ++e) EXPECT_EQ(float_to_e8m0_ceil(std::ldexp(1.0f, e)), e + 127);
  EXPECT_TRUE(std::isnan(e8m0_to_float(0xff)));  // OCP NaN; MLX decodes +Inf
  EXPECT_EQ(e8m0_to_float(0), std::ldexp(1.0f, -127));
}

// MLX's fp4 quantize is argmin over its LUT: ties go to the smaller magnitude.
TEST(Minifloat, E2M1MlxTiesGoDown) {
  EXPECT_EQ(float_to_e2m1_mlx(0.25f), 0);
  EXPECT_EQ(float_to_e2m1_mlx(0.75f), 1);
  EXPECT_EQ(float_to_e2m1_mlx(1.75f), 3);
  EXPECT_EQ(float_to_e2m1_mlx(3.5f), 5);
  EXPECT_EQ(float_to_e2m1_mlx(5.0f), 6);
  EXPECT_EQ(float_to_e2m1_mlx(100.0f), 7);
  EXPECT_EQ(float_to_e2m1_mlx(-0.75f), 9);
  EXPECT_EQ(float_to_e2m1_mlx(-0.1f), 0);  // +0 comes before -0 in the table
  for (uint8_t c = 0; c < 16; ++c) {
    if (c == 8) continue;  // -0 encodes as +0
    EXPECT_EQ(float_to_e2m1_mlx(e2m1_to_float(c)), c);
  }
}

}  // namespace
}  // namespace quanta::codec
