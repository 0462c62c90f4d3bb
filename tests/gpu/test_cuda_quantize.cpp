// Device quantize against the host quantizer: the same bytes (codes, scales, biases) for every
// encodable format and dtype; the [K, N] layout and nvfp4's global scale go through the host
// path and must match too.
#include <gtest/gtest.h>

#include <cstring>

#include "gpu/gpu_util.hpp"

namespace quanta {
namespace {

using gpu_test::DeviceDense;

class CudaQuantize : public ::testing::TestWithParam<Format> {
 protected:
  void SetUp() override {
    if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  }
};

void expect_same(const QuantizedMatrix& want, const QuantizedMatrix& got_device,
                 const std::string& what) {
  const QuantizedMatrix got = to_host(got_device);
  const Footprint fp = want.footprint();
  ASSERT_EQ(got.footprint().total(), fp.total()) << what;
  EXPECT_EQ(std::memcmp(got.codes, want.codes, fp.code_bytes), 0) << what << ": codes differ";
  if (fp.scale_bytes) {
    EXPECT_EQ(std::memcmp(got.scales, want.scales, fp.scale_bytes), 0) << what << ": scales differ";
  }
  if (fp.bias_bytes) {
    EXPECT_EQ(std::memcmp(got.biases, want.biases, fp.bias_bytes), 0) << what << ": biases differ";
  }
  EXPECT_EQ(got.global_scale.has_value(), want.global_scale.has_value()) << what;
  if (got.global_scale && want.global_scale) {
    EXPECT_EQ(*got.global_scale, *want.global_scale) << what;
  }
}

TEST_P(CudaQuantize, BytesEqualTheHostQuantizer) {
  const Format f = GetParam();
  if (!f.info().encode) GTEST_SKIP() << f.name() << " has no encoder";
  const int64_t k = f.group_size > 128 ? 512 : 384;
  for (DType t : kAllDTypes) {
    for (Layout layout : {Layout::nk, Layout::kn}) {
      if (layout == Layout::kn && !f.info().kn_layout) continue;
      const int64_t n = 64;
      DeviceDense w(layout == Layout::nk ? test::random_dense(t, n, k, 3)
                                         : test::random_dense(t, k, n, 3));
      QuantizeOptions o;
      o.layout = layout;
      const std::string what =
          f.name() + " " + std::string(dtype_name(t)) + (layout == Layout::nk ? " nk" : " kn");
      expect_same(quantize(w.host.view(), f, o), quantize(w.view(), f, o), what);
      if (f.scheme == Scheme::nvfp4) {
        o.nvfp4_tensor_amax = 6.0f;
        expect_same(quantize(w.host.view(), f, o), quantize(w.view(), f, o), what + " amax");
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(All, CudaQuantize,
                         ::testing::ValuesIn(all_formats().begin(), all_formats().end()),
                         [](const auto& p) {
                           std::string s = p.param.name();
                           for (char& ch : s)
                             if (ch == '-') ch = '_';
                           return s;
                         });

TEST(CudaQuantizeErrors, HostMemoryMarkedDeviceIsRefused) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  const test::Dense w = test::random_dense(DType::f32, 4, 64, 1);
  test::expect_error(
      [&] {
        quantize(ConstMatrixView{w.bytes.data(), DType::f32, 4, 64, Location::device},
                 Format::affine(4, 64));
      },
      "[quanta::quantize] w: pointer");
}

}  // namespace
}  // namespace quanta
