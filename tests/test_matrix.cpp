// QuantizedMatrix geometry: sizes per family, the shape rules, wrap() buffer checks.
#include <gtest/gtest.h>

#include <limits>

#include "quanta/error.hpp"
#include "quanta/matrix.hpp"
#include "test_util.hpp"

namespace quanta {
namespace {

using test::expect_error;

TEST(Footprint, SizesPerFamily) {
  auto fp = footprint(Format::affine(4, 64), 4096, 4096, Layout::nk, DType::f16);
  EXPECT_EQ(fp.code_bytes, 4096u * 4096 / 2);
  EXPECT_EQ(fp.scale_count, 4096u * 64);
  EXPECT_EQ(fp.scale_bytes, 4096u * 64 * 2);
  EXPECT_EQ(fp.bias_bytes, fp.scale_bytes);
  fp = footprint(Format::affine(3, 32), 8, 96, Layout::nk, DType::f32);
  EXPECT_EQ(fp.code_bytes, 8u * 96 * 3 / 8);  // 36 bytes per row: 12 per group of 32
  fp = footprint(Format::mxfp4(), 16, 64, Layout::nk, DType::f32);
  EXPECT_EQ(fp.code_bytes, 16u * 32);
  EXPECT_EQ(fp.scale_bytes, 16u * 2);
  EXPECT_EQ(fp.bias_bytes, 0u);
  fp = footprint(Format::nvfp4(), 16, 64, Layout::nk, DType::f32);
  EXPECT_EQ(fp.scale_bytes, 16u * 4);
  fp = footprint(Format::fp8_e4m3(Granularity::channel), 16, 64, Layout::nk, DType::f32);
  EXPECT_EQ(fp.code_bytes, 16u * 64);
  EXPECT_EQ(fp.scale_bytes, 16u * 4);
  fp = footprint(Format::fp8_e5m2(Granularity::tensor), 16, 64, Layout::nk, DType::f32);
  EXPECT_EQ(fp.scale_bytes, 4u);
  fp = footprint(Format::gguf(Scheme::q4_K), 3, 512, Layout::nk, DType::f32);
  EXPECT_EQ(fp.code_bytes, 3u * 2 * 144);
  EXPECT_EQ(fp.scale_bytes, 0u);
  fp = footprint(Format::affine(4, 64), 64, 128, Layout::kn, DType::bf16);
  EXPECT_EQ(fp.code_bytes, 128u * 64 / 2);
  EXPECT_EQ(fp.scale_count, 2u * 64);
}

TEST(Footprint, ShapeRules) {
  expect_error([] { footprint(Format::affine(4, 64), 8, 4100, Layout::nk, DType::f16, "matmul"); },
               "[quanta::matmul] w: K = 4100 is not a multiple of group_size = 64 (affine-4b-g64)");
  expect_error([] { footprint(Format::affine(4, 64), 0, 64, Layout::nk, DType::f16); },
               "N = 0 must be in");
  expect_error([] { footprint(Format::affine(4, 64), 8, -64, Layout::nk, DType::f16); }, "K = -64");
  expect_error([] { footprint(Format::gguf(Scheme::q4_K), 8, 128, Layout::nk, DType::f16); },
               "K = 128 is not a multiple of group_size = 256");
  expect_error([] { footprint(Format::gguf(Scheme::q4_0), 8, 64, Layout::kn, DType::f16); },
               "the [K, N] layout is not available for q4_0");
  expect_error([] { footprint(Format::affine(3, 32), 8, 64, Layout::kn, DType::f16); },
               "N * bits % 32 == 0");
  expect_error([] { footprint(Format::affine(4, 48), 8, 96, Layout::nk, DType::f16); },
               "group_size = 48");
  const int64_t big = std::numeric_limits<int64_t>::max();
  expect_error([&] { footprint(Format::affine(4, 64), big, 64, Layout::nk, DType::f16); },
               "must be in [1,");
}

TEST(Footprint, OverflowIsAnError) {
  // Both dims are legal on their own; the stack size overflows size_t.
  const int64_t d = int64_t{1} << 30;
  EXPECT_NO_THROW(footprint(Format::affine(8, 128), d, d, Layout::nk, DType::f32));
  expect_error(
      [&] {
        QuantizedMatrix::allocate_host(Format::affine(8, 128), d, d, DType::f32, Layout::nk, d);
      },
      "overflows");
}

TEST(Wrap, ChecksEveryBuffer) {
  std::vector<std::byte> codes(32), scales(4), biases(4);
  const Format f = Format::affine(4, 64);
  // 1 x 64 codes = 32 bytes, one f16 scale and bias = 2 bytes each.
  EXPECT_NO_THROW(QuantizedMatrix::wrap(f, 1, 64, DType::f16, Layout::nk, Location::host, codes,
                                        scales, biases));
  expect_error(
      [&] {
        QuantizedMatrix::wrap(f, 2, 64, DType::f16, Layout::nk, Location::host, codes, scales,
                              biases);
      },
      "codes: buffer of 32 bytes is too short");
  expect_error(
      [&] {
        QuantizedMatrix::wrap(f, 1, 64, DType::f16, Layout::nk, Location::host, codes, {}, biases);
      },
      "scales: null buffer");
  expect_error(
      [&] {
        QuantizedMatrix::wrap(f, 1, 64, DType::f32, Layout::nk, Location::host, codes, scales,
                              std::span<std::byte>(biases).first(2));
      },
      "biases: buffer of 2 bytes is too short");
  expect_error(
      [&] {
        QuantizedMatrix::wrap(f, 1, 64, DType::f16, Layout::nk, Location::host, codes, scales,
                              biases, 1, 2.0f);
      },
      "global_scale: affine-4b-g64 has no global scale");
  expect_error(
      [&] {
        QuantizedMatrix::wrap(f, 1, 64, DType::f16, Layout::nk, Location::host, codes, scales,
                              biases, 0);
      },
      "batch = 0");
}

TEST(Matrix, ExpertViewsAndValidation) {
  auto m = QuantizedMatrix::allocate_host(Format::mxfp4(), 4, 64, DType::f32, Layout::nk, 3);
  const auto fp = m.footprint();
  EXPECT_EQ(m.expert(2).codes, m.codes + 2 * fp.code_bytes);
  EXPECT_EQ(m.expert(2).scales, m.scales + 2 * fp.scale_bytes);
  EXPECT_EQ(m.expert(1).batch, 1);
  expect_error([&] { m.expert(3); }, "e = 3 is outside the stack of 3");
  QuantizedMatrix broken = m;
  broken.scales = nullptr;
  expect_error([&] { broken.validate("matmul"); }, "[quanta::matmul] w: scales buffer is null");
  EXPECT_EQ(m.describe(), "mxfp4 [4 x 64] nk host x3 experts");
}

}  // namespace
}  // namespace quanta
