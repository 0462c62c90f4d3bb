// The generic CUDA kernels against the fp64 oracle: every format, dtype and layout, ragged N,
// M in {1, 2, 3, 7, 33}; gather with a stack of experts; dequantize byte-equal to the host.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <span>
#include <vector>

#include "gpu/gpu_util.hpp"

namespace quanta {
namespace {

using gpu_test::DeviceDense;
using gpu_test::host_weights;
using test::Dense;

class CudaGeneric : public ::testing::TestWithParam<Format> {
 protected:
  void SetUp() override {
    if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  }
};

void check(const Format& f, DType t, Layout layout, int64_t m, int64_t n, int64_t k,
           std::string_view kernel) {
  const QuantizedMatrix hw = host_weights(f, t, n, k, layout, static_cast<uint32_t>(m * 31 + n));
  const QuantizedMatrix w = to_device(hw);
  DeviceDense x(test::random_dense(t, m, k, static_cast<uint32_t>(m + 5), 1.0f, false));
  DeviceDense y(t, m, n);
  y.poison();
  Context ctx;
  ctx.kernel = kernel;
  matmul(x.view(), w, y.mut(), ctx);
  y.download();
  const auto c = ref::compare(y.host.view(), ref::matmul(x.host.view(), hw), t);
  EXPECT_TRUE(c.pass) << kernel << " " << gpu_test::describe(hw, t, m) << " rel_l2=" << c.rel_l2
                      << " nonfinite=" << c.nonfinite;
}

TEST_P(CudaGeneric, MatmulMatchesOracle) {
  const Format f = GetParam();
  const int64_t k = f.group_size > 128 ? 512 : 256;
  for (DType t : kAllDTypes)
    for (int64_t m : {1, 2, 3, 7, 33}) check(f, t, Layout::nk, m, 40, k, "matmul_generic");
  if (f.info().kn_layout)
    for (DType t : kAllDTypes)
      for (int64_t m : {1, 3}) check(f, t, Layout::kn, m, 64, k, "matmul_generic");
}

// qmv_scaled's formats and sizes: codes per 16-byte chunk; the smallest valid K (whole chunks and
// groups: mxfp8's group of 32 spans two chunks); a K of 33 or 34 chunks, so lanes get unequal
// shares.
bool scaled_format(const Format& f) {
  return f.info().family == Family::microscaled || f.info().family == Family::fp8;
}
int64_t chunk_codes(const Format& f) {
  return f.bits == 4 ? 32 : 16;
}
int64_t k_unit(const Format& f) {
  return std::max<int64_t>(chunk_codes(f), f.group_size);
}
int64_t ragged_k(const Format& f) {
  return (33 * chunk_codes(f) + k_unit(f) - 1) / k_unit(f) * k_unit(f);
}

// qmv_scaled (microscaled and fp8 [N, K], CUDA cores): M in one pass of up to four rows of x,
// several, and a partial last one; N not a multiple of a warp's 4 rows or a CTA's 16; K of 33-34
// chunks (lanes 0-1 take two, the others one) and of 256 (eight each); every dtype; nvfp4 with and
// without its global scale (odd seeds set one).
TEST_P(CudaGeneric, ScaledGemv) {
  const Format f = GetParam();
  if (!scaled_format(f)) GTEST_SKIP() << "qmv_scaled serves the microscaled and fp8 formats";
  const int64_t chunk = chunk_codes(f), unit = k_unit(f), ragged = ragged_k(f);
  for (DType t : kAllDTypes) {
    for (int64_t m : {1, 2, 3, 4, 5, 8, 13, 16, 29})
      check(f, t, Layout::nk, m, 37, ragged, "qmv_scaled");
    check(f, t, Layout::nk, 2, 100, 256 * chunk, "qmv_scaled");
    check(f, t, Layout::nk, 1, 3, unit, "qmv_scaled");
    if (t == DType::f32) continue;
    // qmv_scaled_mma: K in runs of 128 codes over a CTA's 4 warps (9 runs: 3, 2, 2, 2; one run:
    // three warps idle), 16-row tiles with a partial one, pairs of rows of x with an odd one.
    for (int64_t m : {2, 3, 4, 5, 7, 8, 9, 16})
      check(f, t, Layout::nk, m, 37, 9 * 128, "qmv_scaled_mma");
    check(f, t, Layout::nk, 3, 100, 256 * chunk, "qmv_scaled_mma");
    check(f, t, Layout::nk, 2, 5, 128, "qmv_scaled_mma");
  }
}

// qmm_scaled_rf (qmm_affine_rf's kernel on these codes, f16/bf16 x; E8M0 scales with bf16 only):
// 1, 2 and 4 column tiles with partial ones; N = 37 (one partial row tile) and 300 at K = 4096
// (tiles split across CTAs, summed by the last); K of 33 chunks of 32 (a partial stage of 256)
// and of one chunk; nvfp4 with and without its global scale (odd seeds set one); M past 32 in
// passes of 32 rows of x (a partial last pass too).
TEST_P(CudaGeneric, ScaledRegisterFed) {
  const Format f = GetParam();
  if (!scaled_format(f)) GTEST_SKIP() << "qmm_scaled_rf serves the microscaled and fp8 formats";
  const bool e8m0 = f.info().scale == ScaleEncoding::e8m0;
  for (DType t : {DType::f16, DType::bf16}) {
    if (e8m0 && t == DType::f16) continue;
    for (int64_t m : {1, 3, 8, 9, 16, 17, 31, 32, 33, 41, 64})  // past 32: passes of 32 rows
      check(f, t, Layout::nk, m, 37, 33 * 32, "qmm_scaled_rf");
    check(f, t, Layout::nk, 17, 300, 4096, "qmm_scaled_rf");
    check(f, t, Layout::nk, 48, 300, 4096, "qmm_scaled_rf");
    check(f, t, Layout::nk, 5, 300, 4096, "qmm_scaled_rf");
    check(f, t, Layout::nk, 2, 20, 32, "qmm_scaled_rf");
  }
}

// gather_qmv_scaled: each row of x with its expert (ragged N, K of 33-34 chunks, every dtype),
// and out-of-range ids flagged: those rows NaN, the others right, an error after the launch.
TEST_P(CudaGeneric, ScaledGather) {
  const Format f = GetParam();
  if (!scaled_format(f)) GTEST_SKIP() << "gather_qmv_scaled serves the microscaled and fp8 formats";
  for (DType t : kAllDTypes) {
    const QuantizedMatrix hw = host_weights(f, t, 37, ragged_k(f), Layout::nk, 13, /*batch=*/3);
    gpu_test::check_gather(hw, to_device(hw), t, "gather_qmv_scaled", 14);
  }
}

// gather_qmm_scaled_mma: rows grouped by expert on the device, passes of up to 128 rows of one
// expert on qmm_affine_mma's tile kernel (check_grouped_gather's row sets), f16 and bf16 x (bf16
// only for the E8M0-scaled codes); N = 300 (a partial third column tile), K = 1184 (nine stages
// of 128 and a partial tenth).
TEST_P(CudaGeneric, ScaledGroupedGather) {
  const Format f = GetParam();
  if (!scaled_format(f))
    GTEST_SKIP() << "gather_qmm_scaled_mma serves the microscaled and fp8 formats";
  const bool e8m0 = f.info().scale == ScaleEncoding::e8m0;
  for (DType t : {DType::f16, DType::bf16}) {
    if (e8m0 && t == DType::f16) continue;
    const QuantizedMatrix hw = host_weights(f, t, 300, 1184, Layout::nk, 31, /*batch=*/3);
    gpu_test::check_grouped_gather(hw, to_device(hw), t, "gather_qmm_scaled_mma", 140, 32);
  }
}

// qmv_gguf (GGUF [N, K], CUDA cores): K in segments of 1024 elements, one piece of 32 a lane: a
// K of 2 segments and a partial third (lanes past its pieces idle), of one partial segment, and
// of a single block, and 10 segments over 5 warps; N not a multiple of a CTA's 4 rows (and N = 1);
// M in one pass of up to four rows of x (eight for f16 / bf16 x past M = 4), several, and a partial
// last one; every dtype. With 18-,
// 22-, 34-, 110- and 210-byte blocks the ragged K starts every odd row 2 bytes into a word.
TEST_P(CudaGeneric, GgufGemv) {
  const Format f = GetParam();
  if (f.info().family != Family::gguf) GTEST_SKIP() << "qmv_gguf serves the GGUF formats";
  const int64_t be = f.info().block_elems;
  const int64_t ragged = be == 32 ? 2048 + 9 * 32 : 2048 + 3 * 256;
  for (DType t : kAllDTypes) {
    for (int64_t m : {1, 2, 3, 4, 5, 8, 13, 16}) check(f, t, Layout::nk, m, 37, ragged, "qmv_gguf");
    check(f, t, Layout::nk, 2, 101, 512, "qmv_gguf");
    check(f, t, Layout::nk, 1, 3, be, "qmv_gguf");
    check(f, t, Layout::nk, 4, 1, 1024, "qmv_gguf");
    check(f, t, Layout::nk, 3, 9, 9 * 1024 + 256, "qmv_gguf");  // 5 warps of 2 segments, 2 short
  }
}

// qmm_gguf_mma (GGUF [N, K], f16 / bf16 x on tensor cores): 1, 2 and 4 column tiles with partial
// ones, and M past 32 in passes (a partial last one); N = 37 (one partial row tile, K split over
// CTAs and the partials summed by the second kernel) and 300 at K = 4096; the ragged K (a partial
// last step of 256 for the legacy blocks, where the second K part has no piece; every odd row
// starts 2 bytes into a word) and a K of one block; and 266 row tiles, more than the SMs hold, so
// K is not split and y is stored directly.
TEST_P(CudaGeneric, GgufMma) {
  const Format f = GetParam();
  if (f.info().family != Family::gguf) GTEST_SKIP() << "qmm_gguf_mma serves the GGUF formats";
  const int64_t be = f.info().block_elems;
  const int64_t ragged = be == 32 ? 2048 + 9 * 32 : 2048 + 3 * 256;
  for (DType t : {DType::f16, DType::bf16}) {
    for (int64_t m : {1, 3, 8, 9, 16, 17, 31, 32, 33, 64, 70})
      check(f, t, Layout::nk, m, 37, ragged, "qmm_gguf_mma");
    check(f, t, Layout::nk, 17, 300, 4096, "qmm_gguf_mma");
    check(f, t, Layout::nk, 40, 300, 4096, "qmm_gguf_mma");
    check(f, t, Layout::nk, 5, 3, be, "qmm_gguf_mma");
  }
  check(f, DType::bf16, Layout::nk, 2, 266 * 128 - 5, 512, "qmm_gguf_mma");
}

// qmv_gguf with a NaN in row 0 of x and an infinity in row 1: every output of those rows is
// non-finite (f16 / bf16 x goes through int8 planes, whose block max would drop a NaN), and row 2
// matches the oracle.
TEST_P(CudaGeneric, GgufGemvNonFiniteX) {
  const Format f = GetParam();
  if (f.info().family != Family::gguf) GTEST_SKIP() << "qmv_gguf serves the GGUF formats";
  const int64_t n = 37, k = 2048;
  for (DType t : kAllDTypes) {
    const QuantizedMatrix hw = host_weights(f, t, n, k, Layout::nk, 7);
    const QuantizedMatrix w = to_device(hw);
    Dense xh = test::random_dense(t, 3, k, 11, 1.0f, false);
    xh.set(37, std::numeric_limits<float>::quiet_NaN());       // row 0
    xh.set(k + 1000, std::numeric_limits<float>::infinity());  // row 1
    DeviceDense x(std::move(xh));
    DeviceDense y(t, 3, n);
    y.poison();
    Context ctx;
    ctx.kernel = "qmv_gguf";
    matmul(x.view(), w, y.mut(), ctx);
    y.download();
    for (int64_t r = 0; r < 2; ++r)
      for (int64_t j = 0; j < n; ++j)
        EXPECT_FALSE(std::isfinite(y.host.at(r * n + j)))
            << f.name() << " " << dtype_name(t) << " row " << r << " col " << j;
    const std::vector<double> want = ref::matmul(x.host.view(), hw);
    Dense row2(t, 1, n);
    const std::size_t row = static_cast<std::size_t>(n) * dtype_size(t);
    std::memcpy(row2.bytes.data(), y.host.bytes.data() + 2 * row, row);
    const auto c = ref::compare(
        row2.view(), std::span<const double>(want.data() + 2 * n, static_cast<std::size_t>(n)), t);
    EXPECT_TRUE(c.pass) << f.name() << " " << dtype_name(t) << " rel_l2 " << c.rel_l2;
  }
}

// gather_qmv_gguf: each row of x with its expert (ragged N and K, every dtype), and out-of-range
// ids flagged: those rows NaN, the others right, an error after the launch.
TEST_P(CudaGeneric, GgufGather) {
  const Format f = GetParam();
  if (f.info().family != Family::gguf) GTEST_SKIP() << "gather_qmv_gguf serves the GGUF formats";
  const int64_t k = f.info().block_elems == 32 ? 1024 + 5 * 32 : 1024 + 256;
  for (DType t : kAllDTypes) {
    const QuantizedMatrix hw = host_weights(f, t, 37, k, Layout::nk, 13, /*batch=*/3);
    gpu_test::check_gather(hw, to_device(hw), t, "gather_qmv_gguf", 14);
  }
}

// gather_qmm_gguf_mma: rows grouped by expert on the device, passes of up to 32 rows of one
// expert. check_gather's six rows (repeats, then two bad ids: NaN rows and an error), then 77 rows
// in runs over three experts (44 of expert 2: a full pass and a partial one; 22; 11), a short
// stack of 9 rows with an expert unused, and 70 rows with ids shuffled; ragged N and K.
TEST_P(CudaGeneric, GgufGroupedGather) {
  const Format f = GetParam();
  if (f.info().family != Family::gguf)
    GTEST_SKIP() << "gather_qmm_gguf_mma serves the GGUF formats";
  const int64_t k = f.info().block_elems == 32 ? 1024 + 5 * 32 : 1024 + 256;
  for (DType t : {DType::f16, DType::bf16}) {
    const QuantizedMatrix hw = host_weights(f, t, 37, k, Layout::nk, 13, /*batch=*/3);
    gpu_test::check_grouped_gather(hw, to_device(hw), t, "gather_qmm_gguf_mma", 44, 14);
  }
  // 300 rows of W (three row tiles) over 8 experts of 256 elements.
  const QuantizedMatrix hw = host_weights(f, DType::bf16, 300, 256, Layout::nk, 21, /*batch=*/8);
  std::vector<int32_t> ids(100);
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>((i * 5) % 8);
  gpu_test::check_gather_ids(hw, to_device(hw), DType::bf16, "gather_qmm_gguf_mma", ids, 22);
}

// Dequantize + cuBLAS: qmm_generic_dq for every non-affine format, qmm_affine_dq for affine
// with f32 activations (f16/bf16 affine [N, K] is covered in test_cuda_affine.cpp); several
// slabs (a 1 MB budget: 128-row slabs at K = 2048 in f32), ragged N. [K, N], every dtype: one
// slab, and several (N = 2048: 128 K-rows a slab in f32, 256 in f16/bf16, whose sums stay f32
// until the end).
TEST_P(CudaGeneric, DequantizeThenCublas) {
  const Format f = GetParam();
  const bool affine = f.scheme == Scheme::affine;
  const std::string_view kernel = affine ? "qmm_affine_dq" : "qmm_generic_dq";
  for (DType t : kAllDTypes) {
    if (affine && t != DType::f32) continue;
    for (int64_t m : {16, 33}) check(f, t, Layout::nk, m, 40, 256, kernel);
    for (int64_t m : {1, 2}) {
      if (!affine) check(f, t, Layout::nk, m, 40, 256, kernel);
    }
    if (affine) check(f, t, Layout::nk, 9, 40, 256, kernel);
  }
  if (f.info().kn_layout)
    for (DType t : kAllDTypes) {
      for (int64_t m : {9, 33}) check(f, t, Layout::kn, m, 64, 256, kernel);
      if (!affine) check(f, t, Layout::kn, 1, 64, 256, kernel);
    }
  ::setenv("QUANTA_QMM_DQ_SLAB_MB", "1", 1);
  check(f, DType::f32, Layout::nk, 17, 300, 2048, kernel);
  if (!affine) check(f, DType::bf16, Layout::nk, 17, 300, 2048, kernel);
  if (f.info().kn_layout)
    for (DType t : kAllDTypes) check(f, t, Layout::kn, 17, 2048, 1024, kernel);
  ::unsetenv("QUANTA_QMM_DQ_SLAB_MB");
}

TEST_P(CudaGeneric, GatherMatchesOracle) {
  const Format f = GetParam();
  const int64_t k = f.group_size > 128 ? 512 : 256;
  for (DType t : kAllDTypes) {
    const QuantizedMatrix hw = host_weights(f, t, 24, k, Layout::nk, 9, /*batch=*/3);
    const QuantizedMatrix w = to_device(hw);
    DeviceDense x(test::random_dense(t, 7, k, 11, 1.0f, false));
    const std::vector<int32_t> ids = {2, 0, 2, 1, 1, 0, 2};
    cuda::DeviceBuffer ids_d(ids.size() * sizeof(int32_t));
    QUANTA_CUDA_CHECK(
        cudaMemcpy(ids_d.data(), ids.data(), ids.size() * sizeof(int32_t), cudaMemcpyHostToDevice));
    DeviceDense y(t, 7, 24);
    y.poison();
    gather_matmul(x.view(), w, ids_d.as<int32_t>(), y.mut());
    y.download();
    const auto c = ref::compare(y.host.view(), ref::gather_matmul(x.host.view(), hw, ids), t);
    EXPECT_TRUE(c.pass) << hw.describe() << " " << dtype_name(t) << " rel_l2 " << c.rel_l2;
  }
}

// Device dequantize writes the same bytes as the host's, for every kernel that accepts.
TEST_P(CudaGeneric, DequantizeIsByteEqualToHost) {
  const Format f = GetParam();
  for (Layout layout : {Layout::nk, Layout::kn}) {
    if (layout == Layout::kn && !f.info().kn_layout) continue;
    for (DType t : kAllDTypes) {
      const int64_t n = 64, k = 512;
      const QuantizedMatrix hw = host_weights(f, t, n, k, layout, 5, /*batch=*/2);
      const QuantizedMatrix w = to_device(hw);
      const int64_t rows = (layout == Layout::nk ? n : k) * 2, cols = layout == Layout::nk ? k : n;
      Dense want(t, rows, cols);
      dequantize(hw, want.mut());
      Problem p = matmul_problem(Op::dequantize, ConstMatrixView{nullptr, t, 0, k}, w);
      for (const KernelEntry* e : gpu_test::device_kernels_for(p)) {
        DeviceDense out(t, rows, cols);
        out.poison();
        Context ctx;
        ctx.kernel = e->name;
        dequantize(w, out.mut(), ctx);
        out.download();
        EXPECT_EQ(std::memcmp(out.host.bytes.data(), want.bytes.data(), want.bytes.size()), 0)
            << e->name << " " << hw.describe() << " -> " << dtype_name(t);
      }
    }
  }
}

// dequantize_gguf on rows of several 1024-element segments and a partial last one, with 18-, 22-,
// 34-, 110- and 210-byte blocks starting every odd row 2 bytes into a word, N = 37 rows over a
// stack of 3, every dtype: the host's bytes.
TEST_P(CudaGeneric, GgufDequantizeIsByteEqualToHost) {
  const Format f = GetParam();
  if (f.info().family != Family::gguf) GTEST_SKIP() << "dequantize_gguf serves the GGUF formats";
  const int64_t n = 37, k = f.info().block_elems == 32 ? 2048 + 9 * 32 : 2048 + 3 * 256;
  for (DType t : kAllDTypes) {
    const QuantizedMatrix hw = host_weights(f, t, n, k, Layout::nk, 17, /*batch=*/3);
    const QuantizedMatrix w = to_device(hw);
    Dense want(t, 3 * n, k);
    dequantize(hw, want.mut());
    DeviceDense out(t, 3 * n, k);
    out.poison();
    Context ctx;
    ctx.kernel = "dequantize_gguf";
    dequantize(w, out.mut(), ctx);
    out.download();
    EXPECT_EQ(std::memcmp(out.host.bytes.data(), want.bytes.data(), want.bytes.size()), 0)
        << hw.describe() << " -> " << dtype_name(t);
  }
}

// dequantize_affine's half2 path against the host's f32 arithmetic where double rounding could
// bite if it were possible: scales and biases of random finite bit patterns (subnormal to huge,
// either sign), so s·q and b meet at every exponent gap. Both layouts ([K, N] pairs two columns'
// scales).
TEST(CudaDequantize, ExtremeScalesAreByteEqualToHost) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  for (Layout layout : {Layout::nk, Layout::kn})
    for (DType t : {DType::f16, DType::bf16})
      for (int bits : {2, 3, 4, 5, 6, 8})
        for (int group : {32, 128}) {
          QuantizedMatrix hw = host_weights(Format::affine(bits, group), t, 64, 512, layout, 9);
          const int64_t rows = layout == Layout::nk ? 64 : 512,
                        cols = layout == Layout::nk ? 512 : 64;
          ASSERT_EQ(hw.scale_dtype, t);  // the half2 path needs scales in the output dtype
          uint32_t state = 12345u + static_cast<uint32_t>(bits * 7 + group);
          auto next = [&] {
            state = state * 1664525u + 1013904223u;
            return static_cast<uint16_t>(state >> 16);
          };
          auto finite = [&] {  // a random 16-bit pattern that is not Inf or NaN in t
            for (;;) {
              const uint16_t v = next();
              const uint16_t exp_mask = t == DType::f16 ? 0x7c00 : 0x7f80;
              if ((v & exp_mask) != exp_mask) return v;
            }
          };
          const int64_t entries = 64 * (512 / group);
          auto* sc = reinterpret_cast<uint16_t*>(hw.scales);
          auto* bi = reinterpret_cast<uint16_t*>(hw.biases);
          for (int64_t i = 0; i < entries; ++i) sc[i] = finite(), bi[i] = finite();
          const QuantizedMatrix w = to_device(hw);
          Dense want(t, rows, cols);
          dequantize(hw, want.mut());
          DeviceDense out(t, rows, cols);
          out.poison();
          Context ctx;
          ctx.kernel = "dequantize_affine";
          dequantize(w, out.mut(), ctx);
          out.download();
          EXPECT_EQ(std::memcmp(out.host.bytes.data(), want.bytes.data(), want.bytes.size()), 0)
              << hw.describe() << " -> " << dtype_name(t);
        }
}

// dequantize_scaled against the host where its rounding could differ: every finite scale byte
// (E8M0 2^-127..2^127, E4M3 with either sign), codes of every non-NaN, non-Inf encoding, and an
// nvfp4 global scale that is not a power of two, so v·s over- and underflows each dtype and the
// second rounding of nvfp4 runs at every exponent.
TEST(CudaDequantize, ScaledExtremeScalesAreByteEqualToHost) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  for (const Format& f :
       {Format::mxfp4(), Format::nvfp4(), Format::mxfp8(), Format::fp8_e4m3(Granularity::channel),
        Format::fp8_e5m2(Granularity::tensor)})
    for (DType t : kAllDTypes) {
      const int64_t n = 48, k = 256;
      QuantizedMatrix hw = host_weights(f, t, n, k, Layout::nk, 21);
      uint32_t state = 777u + static_cast<uint32_t>(f.scheme) * 13 + static_cast<uint32_t>(t);
      auto next = [&] {
        state = state * 1664525u + 1013904223u;
        return static_cast<uint8_t>(state >> 24);
      };
      const ElementCode code = f.info().code;
      auto finite_code = [&] {  // a code byte that is neither NaN nor Inf
        for (;;) {
          const uint8_t b = next();
          if (code == ElementCode::e4m3 && (b & 0x7F) == 0x7F) continue;
          if (code == ElementCode::e5m2 && (b & 0x7C) == 0x7C) continue;
          return b;
        }
      };
      const Footprint fp = hw.footprint();
      for (std::size_t i = 0; i < fp.code_bytes; ++i) hw.codes[i] = std::byte{finite_code()};
      if (f.info().family == Family::microscaled) {
        const bool e8m0 = f.info().scale == ScaleEncoding::e8m0;
        for (std::size_t i = 0; i < fp.scale_bytes; ++i) {
          uint8_t b = next();
          while (e8m0 ? b == 0xFF : (b & 0x7F) == 0x7F) b = next();  // not NaN
          hw.scales[i] = std::byte{b};
        }
        if (f.scheme == Scheme::nvfp4) hw.global_scale = 3.7e-3f;
      } else {  // f32 scales from 2^-140 (subnormal) to 2^100, either sign
        auto* s = reinterpret_cast<float*>(hw.scales);
        for (std::size_t i = 0; i < fp.scale_bytes / 4; ++i)
          s[i] = std::ldexp((next() & 1) ? -1.37f : 1.37f, static_cast<int>(next() % 241) - 140);
      }
      const QuantizedMatrix w = to_device(hw);
      Dense want(t, n, k);
      dequantize(hw, want.mut());
      DeviceDense out(t, n, k);
      out.poison();
      Context ctx;
      ctx.kernel = "dequantize_scaled";
      dequantize(w, out.mut(), ctx);
      out.download();
      EXPECT_EQ(std::memcmp(out.host.bytes.data(), want.bytes.data(), want.bytes.size()), 0)
          << hw.describe() << " -> " << dtype_name(t);
    }
}

INSTANTIATE_TEST_SUITE_P(All, CudaGeneric,
                         ::testing::ValuesIn(all_formats().begin(), all_formats().end()),
                         [](const auto& p) {
                           std::string s = p.param.name();
                           for (char& ch : s)
                             if (ch == '-') ch = '_';
                           return s;
                         });

}  // namespace
}  // namespace quanta
