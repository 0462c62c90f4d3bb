// quanta against MLX's own quantize / dequantize / quantized_matmul (goldens made by
// scripts/golden/make_mlx_goldens.py with mlx[cpu]; see tests/golden/mlx/MANIFEST.json).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "format/dense.hpp"
#include "golden_io.hpp"
#include "quanta/ops.hpp"
#include "quanta/reference.hpp"

namespace quanta {
namespace {

using nlohmann::json;
using test::read_array;
using test::read_bytes;

Format format_of(const json& c) {
  const std::string mode = c["mode"];
  if (mode == "affine") return Format::affine(c["bits"], c["group"]);
  if (mode == "mxfp4") return Format::mxfp4();
  if (mode == "mxfp8") return Format::mxfp8();
  return Format::nvfp4();
}

json load_case(const std::string& name) {
  static const json manifest = test::read_manifest("mlx");
  for (const auto& c : manifest["cases"])
    if (c["name"] == name) return c;
  throw std::runtime_error("no golden case " + name);
}

class MlxGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(MlxGolden, QuantizeIsBitExactAndMatmulAgrees) {
  const json c = load_case(GetParam());
  const std::string dir = "mlx/";
  const DType dt = *parse_dtype(c["dtype"].get<std::string>());
  const int64_t n = c["n"], k = c["k"];
  const auto w = read_bytes(dir + c["input"].get<std::string>());
  ASSERT_EQ(w.size(), static_cast<size_t>(n * k) * dtype_size(dt));
  QuantizeOptions opts;
  if (c.contains("global_amax")) opts.nvfp4_tensor_amax = c["global_amax"].get<float>();
  const QuantizedMatrix q = quantize(ConstMatrixView{w.data(), dt, n, k}, format_of(c), opts);
  const Footprint fp = q.footprint();

  const auto codes = read_bytes(dir + c["codes"].get<std::string>());
  ASSERT_EQ(codes.size(), fp.code_bytes);
  EXPECT_EQ(std::memcmp(codes.data(), q.codes, codes.size()), 0) << "codes differ";
  for (size_t i = 0; i < codes.size(); ++i)
    if (codes[i] != static_cast<unsigned char>(q.codes[i])) {
      ADD_FAILURE() << "first differing code byte " << i << ": mlx " << int(codes[i]) << " quanta "
                    << int(static_cast<unsigned char>(q.codes[i]));
      break;
    }
  const auto scales = read_bytes(dir + c["scales"].get<std::string>());
  ASSERT_EQ(scales.size(), fp.scale_bytes);
  EXPECT_EQ(std::memcmp(scales.data(), q.scales, scales.size()), 0) << "scales differ";
  if (c.contains("biases")) {
    const auto biases = read_bytes(dir + c["biases"].get<std::string>());
    ASSERT_EQ(biases.size(), fp.bias_bytes);
    EXPECT_EQ(std::memcmp(biases.data(), q.biases, biases.size()), 0) << "biases differ";
  }

  // Dequantize: MLX multiplies then adds (affine) or multiplies by the scale in the output
  // dtype; quanta computes in f32 and rounds once, so f16/bf16 may differ by one ulp.
  const auto dq = read_bytes(dir + c["dequant"].get<std::string>());
  std::vector<unsigned char> ours(dq.size());
  dequantize(q, MatrixView{ours.data(), dt, n, k});
  double worst_ulps = 0;
  for (int64_t i = 0; i < n * k; ++i) {
    const float a = dense::load(ours.data(), dt, static_cast<size_t>(i));
    const float b = dense::load(dq.data(), dt, static_cast<size_t>(i));
    const float ulp = std::fabs(b) * (dt == DType::f32   ? 0x1p-23f
                                      : dt == DType::f16 ? 0x1p-10f
                                                         : 0x1p-7f);
    if (a != b)
      worst_ulps =
          std::max(worst_ulps, static_cast<double>(std::fabs(a - b) / std::max(ulp, 1e-30f)));
  }
  EXPECT_LE(worst_ulps, dt == DType::f32 ? 1.0 : 1.0) << "dequantize differs from MLX";

  if (!c.contains("y")) return;
  const int64_t m = c["m"];
  const auto x = read_array<float>(dir + c["x"].get<std::string>());
  auto y_mlx = read_array<float>(dir + c["y"].get<std::string>());
  // MLX's quantized_matmul takes no global scale: its y is x · (e2m1 · e4m3)ᵀ.
  std::vector<double> want(y_mlx.begin(), y_mlx.end());
  if (q.global_scale)
    for (double& v : want) v *= *q.global_scale;
  const ConstMatrixView xv{x.data(), DType::f32, m, k};
  std::vector<float> y(static_cast<size_t>(m * n), NAN);
  matmul(xv, q, MatrixView{y.data(), DType::f32, m, n});
  const auto cmp = ref::compare(ConstMatrixView{y.data(), DType::f32, m, n}, want, DType::f32);
  EXPECT_TRUE(cmp.pass) << "matmul vs MLX rel_l2 " << cmp.rel_l2;
  const auto oracle = ref::matmul(xv, q);
  const auto cmp2 = ref::compare(std::span<const double>(oracle), want, 1e-5);
  EXPECT_TRUE(cmp2.pass) << "oracle vs MLX rel_l2 " << cmp2.rel_l2;
}

std::vector<std::string> cases() {
  std::vector<std::string> v;
  const json manifest = test::read_manifest("mlx");
  for (const auto& c : manifest["cases"]) v.push_back(c["name"]);
  return v;
}

INSTANTIATE_TEST_SUITE_P(Cases, MlxGolden, ::testing::ValuesIn(cases()),
                         [](const auto& p) { return p.param; });

}  // namespace
}  // namespace quanta
