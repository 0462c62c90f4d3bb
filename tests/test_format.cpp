// The format table, names, parsing and validation.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "quanta/error.hpp"
#include "quanta/format.hpp"

namespace quanta {
namespace {

TEST(FormatTable, IdsIndexTheTable) {
  for (size_t i = 0; i < std::size(kSchemes); ++i) {
    EXPECT_EQ(static_cast<size_t>(kSchemes[i].scheme), i) << kSchemes[i].name;
    EXPECT_EQ(parse_scheme(kSchemes[i].name), kSchemes[i].scheme);
  }
}

TEST(FormatTable, GgufBlocksMatchGgmlSizes) {
  // ggml-common.h static_asserts: bytes per block.
  EXPECT_EQ(scheme_info(Scheme::q4_0).block_bytes, 18);
  EXPECT_EQ(scheme_info(Scheme::q8_0).block_bytes, 34);
  EXPECT_EQ(scheme_info(Scheme::q4_K).block_bytes, 144);
  EXPECT_EQ(scheme_info(Scheme::q6_K).block_bytes, 210);
  EXPECT_DOUBLE_EQ(Format::gguf(Scheme::q6_K).bits_per_weight(), 6.5625);
  EXPECT_DOUBLE_EQ(Format::gguf(Scheme::q2_K).bits_per_weight(), 2.625);
}

TEST(FormatTable, BitsPerWeight) {
  EXPECT_DOUBLE_EQ(Format::affine(4, 64).bits_per_weight(DType::f16), 4.5);
  EXPECT_DOUBLE_EQ(Format::affine(4, 64).bits_per_weight(DType::f32), 5.0);
  EXPECT_DOUBLE_EQ(Format::affine(3, 32).bits_per_weight(DType::bf16), 4.0);
  EXPECT_DOUBLE_EQ(Format::mxfp4().bits_per_weight(), 4.25);
  EXPECT_DOUBLE_EQ(Format::mxfp8().bits_per_weight(), 8.25);
  EXPECT_DOUBLE_EQ(Format::nvfp4().bits_per_weight(), 4.5);
}

TEST(FormatNames, EveryFormatRoundTrips) {
  EXPECT_EQ(all_formats().size(), 18u + 3u + 4u + 10u);
  for (const Format& f : all_formats()) {
    EXPECT_NO_THROW(validate_format(f, "test", "f")) << f.name();
    const auto back = parse_format(f.name());
    ASSERT_TRUE(back) << f.name();
    EXPECT_EQ(*back, f) << f.name();
  }
  EXPECT_EQ(parse_format("affine:3:32"), Format::affine(3, 32));
  EXPECT_EQ(parse_format("affine"), Format::affine(4, 64));
  EXPECT_EQ(parse_format("e4m3"), Format::fp8_e4m3(Granularity::channel));
  EXPECT_FALSE(parse_format("affine:7:64"));
  EXPECT_FALSE(parse_format("q4_2"));
}

void expect_error(const Format& f, const std::string& fragment) {
  try {
    validate_format(f, "matmul", "w");
    ADD_FAILURE() << "no error for " << fragment;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("[quanta::matmul] w:"), std::string::npos) << e.what();
  }
}

TEST(FormatValidation, NamesTheRuleAndTheAcceptedValues) {
  expect_error(Format::affine(7, 64),
               "bits = 7 is not supported by affine (accepted: 2, 3, 4, 5, 6, 8)");
  expect_error(Format::affine(4, 48),
               "group_size = 48 is not supported by affine (accepted: 32, 64, 128)");
  expect_error(Format{Scheme::mxfp4, 4, 16, Granularity::group}, "group_size = 16");
  expect_error(Format{Scheme::nvfp4, 8, 16, Granularity::group}, "bits = 8");
  expect_error(Format{Scheme::fp8_e4m3, 8, 0, Granularity::group}, "per-channel or per-tensor");
  expect_error(Format{Scheme::affine, 4, 64, Granularity::channel}, "per group");
  expect_error(Format{static_cast<Scheme>(99), 4, 64, Granularity::group}, "unknown scheme id 99");
}

// docs/FORMATS.md carries the generated table verbatim (regenerate with `quanta formats
// --markdown`).
TEST(FormatDocs, FormatsMdHasTheGeneratedTable) {
  std::ifstream f(std::string(QUANTA_GOLDEN_DIR) + "/../../docs/FORMATS.md");
  ASSERT_TRUE(f) << "docs/FORMATS.md is missing";
  std::stringstream ss;
  ss << f.rdbuf();
  EXPECT_NE(ss.str().find(formats_markdown_table()), std::string::npos)
      << "docs/FORMATS.md is out of date; its table must read:\n"
      << formats_markdown_table();
}

}  // namespace
}  // namespace quanta
