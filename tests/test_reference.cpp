// The oracle on hand-computed cases, and the comparison rules every check relies on.
#include <gtest/gtest.h>

#include <cmath>

#include "format/affine.hpp"
#include "quanta/ops.hpp"
#include "quanta/reference.hpp"
#include "test_util.hpp"

namespace quanta {
namespace {

TEST(Compare, NanNeverPasses) {
  const std::vector<double> want = {1, 2, 3};
  EXPECT_TRUE(ref::compare(std::vector<double>{1, 2, 3}, want, 1e-12).pass);
  const auto c = ref::compare(std::vector<double>{1, NAN, 3}, want, 1.0);
  EXPECT_FALSE(c.pass);
  EXPECT_EQ(c.nonfinite, 1);
  EXPECT_FALSE(ref::compare(std::vector<double>{1, INFINITY, 3}, want, 1.0).pass);
}

TEST(Compare, Metrics) {
  const std::vector<double> want = {3, 4}, got = {3, 4.5};
  const auto c = ref::compare(got, want, 0.2);
  EXPECT_DOUBLE_EQ(c.max_abs, 0.5);
  EXPECT_DOUBLE_EQ(c.rel_l2, 0.5 / 5.0);
  EXPECT_NEAR(c.cosine, (9 + 18) / (5.0 * std::sqrt(9 + 20.25)), 1e-12);
  EXPECT_TRUE(c.pass);
  EXPECT_FALSE(ref::compare(got, want, 0.05).pass);
}

// A 1 x 64 affine-4b matrix built by hand: value = scale * q + bias.
TEST(Oracle, HandBuiltAffine) {
  QuantizedMatrix w = QuantizedMatrix::allocate_host(Format::affine(4, 32), 1, 64, DType::f32);
  auto* codes = reinterpret_cast<uint8_t*>(w.codes);
  for (int i = 0; i < 64; ++i) codec::affine_put_code(codes, i, 4, static_cast<uint32_t>(i % 16));
  const float s[2] = {0.5f, -0.25f}, b[2] = {1.0f, 2.0f};
  std::memcpy(w.scales, s, sizeof s);
  std::memcpy(w.biases, b, sizeof b);
  const auto d = ref::dequantize(w);
  for (int i = 0; i < 64; ++i) EXPECT_DOUBLE_EQ(d[i], s[i / 32] * (i % 16) + b[i / 32]) << i;
  // x = ones: y = sum of the row.
  std::vector<float> x(64, 1.0f);
  const auto y = ref::matmul(ConstMatrixView{x.data(), DType::f32, 1, 64}, w);
  double sum = 0;
  for (double v : d) sum += v;
  EXPECT_DOUBLE_EQ(y[0], sum);
}

// The same logical W quantized in both layouts decodes to the same values.
TEST(Oracle, LayoutsAgree) {
  const test::Dense w = test::random_dense(DType::f32, 64, 128, 3);  // [N=64, K=128]
  test::Dense wt(DType::f32, 128, 64);                               // its transpose [K, N]
  for (int64_t n = 0; n < 64; ++n)
    for (int64_t k = 0; k < 128; ++k) wt.set(k * 64 + n, w.at(n * 128 + k));
  for (const Format& f :
       {Format::affine(3, 32), Format::mxfp4(), Format::nvfp4(), Format::fp8_e4m3()}) {
    const auto a = ref::dequantize(quantize(w.view(), f));
    const auto b = ref::dequantize(quantize(wt.view(), f, {Layout::kn, std::nullopt}));
    EXPECT_EQ(a, b) << f.name();
  }
}

TEST(Oracle, GatherPicksEachRowsExpert) {
  QuantizedMatrix stack =
      QuantizedMatrix::allocate_host(Format::fp8_e4m3(), 2, 32, DType::f32, Layout::nk, 2);
  const auto fp = stack.footprint();
  for (int e = 0; e < 2; ++e) {
    std::memset(stack.expert(e).codes, 0x38, fp.code_bytes);  // E4M3 0x38 = 1.0
    const float scales[2] = {static_cast<float>(e + 1), static_cast<float>(10 * (e + 1))};
    std::memcpy(stack.expert(e).scales, scales, sizeof scales);
  }
  std::vector<float> x(2 * 32, 1.0f);
  const std::vector<int32_t> ids = {1, 0};
  const auto y = ref::gather_matmul(ConstMatrixView{x.data(), DType::f32, 2, 32}, stack, ids);
  EXPECT_DOUBLE_EQ(y[0], 32 * 2.0);  // row 0 uses expert 1: scales 2, 20
  EXPECT_DOUBLE_EQ(y[1], 32 * 20.0);
  EXPECT_DOUBLE_EQ(y[2], 32 * 1.0);  // row 1 uses expert 0: scales 1, 10
  EXPECT_DOUBLE_EQ(y[3], 32 * 10.0);
}

}  // namespace
}  // namespace quanta
