// The ops on host buffers against the fp64 oracle: every format, dtype and layout, M in
// {1, 2, 3, 8, 33}, ragged N, every CPU kernel that accepts the problem; and bad input.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <random>

#include "core/kernel.hpp"
#include "format/gguf.hpp"
#include "quanta/error.hpp"
#include "quanta/ops.hpp"
#include "quanta/reference.hpp"
#include "test_util.hpp"

namespace quanta {
namespace {

using test::expect_error;

using test::Dense;

}  // namespace

void PrintTo(const Format& f, std::ostream* os) {
  *os << f.name();
}

namespace {
using test::random_dense;

std::vector<const KernelEntry*> host_kernels(Op op) {
  std::vector<const KernelEntry*> v;
  for (const KernelEntry* e : all_kernels())
    if (e->op == op && e->device == Location::host) v.push_back(e);
  return v;
}

void check_matmul(const Format& f, DType t, Layout layout, int64_t m, int64_t n, int64_t k) {
  const QuantizedMatrix w =
      test::host_weights(f, t, n, k, layout, static_cast<uint32_t>(m * 131 + n));
  const Dense x = random_dense(t, m, k, static_cast<uint32_t>(m + 7), 1.0f, false);
  const auto want = ref::matmul(x.view(), w);
  int ran = 0;
  for (const KernelEntry* e : host_kernels(Op::matmul)) {
    if (!decline_reason(*e, matmul_problem(Op::matmul, x.view(), w)).empty()) continue;
    Dense y(t, m, n);
    y.poison();
    Context ctx;
    ctx.kernel = e->name;
    matmul(x.view(), w, y.mut(), ctx);
    const auto c = ref::compare(y.view(), want, t);
    EXPECT_TRUE(c.pass) << e->name << " " << w.describe() << " " << dtype_name(t) << " M=" << m
                        << " rel_l2=" << c.rel_l2 << " nonfinite=" << c.nonfinite;
    ++ran;
  }
  EXPECT_GT(ran, 0) << "no CPU kernel accepted " << w.describe();
}

class OpsEveryFormat : public ::testing::TestWithParam<Format> {};

TEST_P(OpsEveryFormat, MatmulMatchesOracle) {
  const Format f = GetParam();
  const int64_t k = f.group_size > 0 && f.group_size > 128 ? 512 : 256;
  for (DType t : kAllDTypes)
    for (int64_t m : {1, 2, 3, 8, 33}) check_matmul(f, t, Layout::nk, m, 40, k);
  if (f.info().kn_layout)
    for (DType t : kAllDTypes)
      for (int64_t m : {1, 3}) check_matmul(f, t, Layout::kn, m, 64, k);
}

TEST_P(OpsEveryFormat, DequantizeMatchesOracle) {
  const Format f = GetParam();
  for (Layout layout : {Layout::nk, Layout::kn}) {
    if (layout == Layout::kn && !f.info().kn_layout) continue;
    for (DType t : kAllDTypes) {
      const QuantizedMatrix w = test::host_weights(f, t, 64, 512, layout, 5);
      const auto want = ref::dequantize(w);  // logical [N][K]
      Dense out(t, layout == Layout::nk ? 64 : 512, layout == Layout::nk ? 512 : 64);
      out.poison();
      dequantize(w, out.mut());
      std::vector<double> got(want.size());
      for (int64_t nn = 0; nn < 64; ++nn)
        for (int64_t kk = 0; kk < 512; ++kk)
          got[static_cast<size_t>(nn * 512 + kk)] =
              out.at(layout == Layout::nk ? nn * 512 + kk : kk * 64 + nn);
      // One rounding to the output dtype per element.
      const auto c = ref::compare(got, want,
                                  t == DType::f32   ? 1e-6
                                  : t == DType::f16 ? 1e-3
                                                    : 8e-3);
      EXPECT_TRUE(c.pass) << w.describe() << " -> " << dtype_name(t) << " rel_l2 " << c.rel_l2;
    }
  }
}

// A stack of experts: each expert's rows equal that expert dequantized alone, whatever the
// thread count (rows are split over the pool).
TEST_P(OpsEveryFormat, DequantizeStackEqualsEachExpert) {
  const Format f = GetParam();
  for (DType t : kAllDTypes) {
    const QuantizedMatrix w = test::host_weights(f, t, 24, 256, Layout::nk, 6, /*batch=*/3);
    const std::size_t expert_bytes = static_cast<std::size_t>(24 * 256) * dtype_size(t);
    for (int threads : {1, 2, 3}) {
      Context ctx;
      ctx.threads = threads;
      Dense all(t, 3 * 24, 256);
      all.poison();
      dequantize(w, all.mut(), ctx);
      for (int64_t e = 0; e < 3; ++e) {
        Dense one(t, 24, 256);
        one.poison();
        dequantize(w.expert(e), one.mut());
        EXPECT_EQ(0,
                  std::memcmp(all.bytes.data() + e * expert_bytes, one.bytes.data(), expert_bytes))
            << w.describe() << " -> " << dtype_name(t) << ": expert " << e << ", " << threads
            << " threads";
      }
    }
  }
}

TEST_P(OpsEveryFormat, GatherMatmulMatchesOracle) {
  const Format f = GetParam();
  const int64_t k = f.group_size > 128 ? 512 : 256;
  const QuantizedMatrix w = test::host_weights(f, DType::f32, 24, k, Layout::nk, 9, /*batch=*/3);
  const Dense x = random_dense(DType::f32, 7, k, 11, 1.0f, false);
  const std::vector<int32_t> ids = {2, 0, 2, 1, 1, 0, 2};
  Dense y(DType::f32, 7, 24);
  y.poison();
  gather_matmul(x.view(), w, ids.data(), y.mut());
  const auto c = ref::compare(y.view(), ref::gather_matmul(x.view(), w, ids), DType::f32);
  EXPECT_TRUE(c.pass) << w.describe() << " rel_l2 " << c.rel_l2;
}

INSTANTIATE_TEST_SUITE_P(All, OpsEveryFormat,
                         ::testing::ValuesIn(all_formats().begin(), all_formats().end()),
                         [](const auto& p) {
                           std::string s = p.param.name();
                           for (char& ch : s)
                             if (ch == '-') ch = '_';
                           return s;
                         });

// ---- bad input --------------------------------------------------------------------------

TEST(OpsErrors, MatmulArguments) {
  const Dense wd = random_dense(DType::f32, 16, 128, 1);
  const QuantizedMatrix w = quantize(wd.view(), Format::affine(4, 64));
  Dense x(DType::f32, 2, 128), y(DType::f32, 2, 16);
  expect_error([&] { matmul(Dense(DType::f32, 2, 64).view(), w, y.mut()); },
               "[quanta::matmul] x: K = 64 (columns of x) must equal K = 128 of w");
  expect_error([&] { matmul(x.view(), w, Dense(DType::f32, 3, 16).mut()); },
               "y: M = 3 rows must equal M = 2");
  expect_error([&] { matmul(x.view(), w, Dense(DType::f32, 2, 15).mut()); },
               "y: N = 15 columns must equal N = 16");
  expect_error([&] { matmul(x.view(), w, Dense(DType::f16, 2, 16).mut()); },
               "y: dtype f16 must be f32");
  expect_error(
      [&] { matmul(Dense(DType::bf16, 2, 128).view(), w, Dense(DType::bf16, 2, 16).mut()); },
      "w.scales: dtype f32 must be bf16 (affine scales share x's dtype, as in MLX)");
  expect_error(
      [&] {
        matmul(ConstMatrixView{nullptr, DType::f32, 2, 128}, w, y.mut());
      },
      "x: data pointer is null");
  expect_error(
      [&] {
        matmul(ConstMatrixView{x.bytes.data(), DType::f32, 0, 128}, w, y.mut());
      },
      "x: shape [0 x 128]");
  expect_error(
      [&] {
        matmul(ConstMatrixView{x.bytes.data(), DType::f32, 2, 128, Location::device}, w, y.mut());
      },
      "x: buffer is in device memory but must be in host memory");
  QuantizedMatrix dev = w;
  dev.location = Location::device;
  expect_error([&] { matmul(x.view(), dev, y.mut()); },
               "x: buffer is in host memory but must be in device memory");
  Context ctx;
  ctx.kernel = "no_such_kernel";
  expect_error([&] { matmul(x.view(), w, y.mut(), ctx); },
               "kernel: no kernel is named 'no_such_kernel'");
}

TEST(OpsErrors, GatherArguments) {
  QuantizedMatrix w =
      test::host_weights(Format::affine(4, 64), DType::f32, 8, 64, Layout::nk, 1, 2);
  Dense x(DType::f32, 3, 64), y(DType::f32, 3, 8);
  const std::vector<int32_t> bad = {0, 2, 1};
  expect_error([&] { gather_matmul(x.view(), w, bad.data(), y.mut()); },
               "[quanta::gather_matmul] expert_ids[1] = 2 must be in [0, 2)");
  expect_error([&] { gather_matmul(x.view(), w, nullptr, y.mut()); }, "expert_ids: null pointer");
  expect_error([&] { matmul(x.view(), w, y.mut()); }, "a stack of 2 matrices needs gather_matmul");
}

TEST(OpsErrors, QuantizeAndDequantizeArguments) {
  const Dense w = random_dense(DType::f32, 8, 96, 1);
  expect_error([&] { quantize(w.view(), Format::affine(4, 64)); },
               "[quanta::quantize] w: K = 96 is not a multiple of group_size = 64");
  expect_error(
      [&] {
        quantize(random_dense(DType::f32, 64, 8, 1).view(), Format::affine(3, 32),
                 {Layout::kn, std::nullopt});
      },
      "[quanta::quantize] w: N = 8 must make whole 32-bit words");
  try {
    quantize(random_dense(DType::f32, 2, 256, 1).view(), Format::gguf(Scheme::q4_K));
    ADD_FAILURE() << "K-quant encode should be NotSupported";
  } catch (const NotSupported& e) {
    EXPECT_NE(std::string(e.what()).find("encoding to q4_K is not implemented yet"),
              std::string::npos);
  }
  QuantizeOptions o;
  o.nvfp4_tensor_amax = 2.0f;
  expect_error([&] { quantize(random_dense(DType::f32, 2, 64, 1).view(), Format::mxfp4(), o); },
               "nvfp4_tensor_amax: only nvfp4 takes a global scale");
  o.nvfp4_tensor_amax = -1.0f;
  expect_error([&] { quantize(random_dense(DType::f32, 2, 64, 1).view(), Format::nvfp4(), o); },
               "must be finite and > 0");
  const QuantizedMatrix q = quantize(random_dense(DType::f32, 4, 64, 1).view(), Format::mxfp8());
  expect_error([&] { dequantize(q, Dense(DType::f32, 64, 4).mut()); },
               "out: shape [64 x 4] must be [4 x 64]");
}

// Without CUDA in this build (or without a GPU) device requests fail with a named error.
TEST(OpsErrors, DeviceCopiesNeedCuda) {
  if (cuda_available()) GTEST_SKIP() << "a GPU is present";
  const QuantizedMatrix q = quantize(random_dense(DType::f32, 4, 64, 1).view(), Format::mxfp8());
  EXPECT_THROW(to_device(q), Error);
}

}  // namespace
}  // namespace quanta
