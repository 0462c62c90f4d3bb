// fp8 weights: quanta's scale rule with the owner's (ml_dtypes) element conversion.
#include <gtest/gtest.h>

#include <cstring>

#include "golden_io.hpp"
#include "quanta/ops.hpp"

namespace quanta {
namespace {

TEST(Fp8Golden, QuantizeMatchesMlDtypes) {
  const auto m = test::read_manifest("ml_dtypes");
  int cases = 0;
  for (const auto& [key, c] : m["fp8_weights"].items()) {
    const int64_t n = c["n"], k = c["k"];
    const auto w = test::read_array<float>("ml_dtypes/" + c["input"].get<std::string>());
    const auto codes = test::read_bytes("ml_dtypes/" + c["codes"].get<std::string>());
    const auto scales = test::read_bytes("ml_dtypes/" + c["scales"].get<std::string>());
    const Format f = *parse_format(key.substr(0, 4) + "-" + key.substr(5));
    const QuantizedMatrix q = quantize(ConstMatrixView{w.data(), DType::f32, n, k}, f);
    const Footprint fp = q.footprint();
    ASSERT_EQ(codes.size(), fp.code_bytes) << key;
    ASSERT_EQ(scales.size(), fp.scale_bytes) << key;
    EXPECT_EQ(std::memcmp(codes.data(), q.codes, codes.size()), 0) << key;
    EXPECT_EQ(std::memcmp(scales.data(), q.scales, scales.size()), 0) << key;
    ++cases;
  }
  EXPECT_EQ(cases, 4);
}

}  // namespace
}  // namespace quanta
