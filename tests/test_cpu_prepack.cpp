// quanta::prepack on the host: the packed GEMV (M = 1..4) against the fp64 oracle for every
// affine width, group and scale dtype it takes and for q4_1, mxfp4 and nvfp4, ragged N and K in
// whole and partial chunks; that
// the pack is what the kernel reads (the original buffers scribbled over after packing); that a
// pack made from other buffers is ignored; and the formats, layouts and machines without a
// packed kernel. Outputs are poisoned first.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "cpu/isa.hpp"
#include "cpu/pack.hpp"
#include "cpu/plan.hpp"
#include "quanta/error.hpp"
#include "quanta/ops.hpp"
#include "quanta/reference.hpp"
#include "test_util.hpp"

namespace quanta {
namespace {

using cpu::Isa;

// Whether this level packs f: the VNNI level every packable format, the avx2 level codes of 2 to 6
// bits.
bool packed_here(const Format& f) {
  return cpu::vnni_active() || (cpu::avx2_int8_active() && cpu::avx2_int8_format(f.scheme, f.bits));
}

// Every case here reads the pack where the CPU has it, also at M <= 2 on CPUs whose GEMV would
// read the plain rows there (cpu::pack_for_rows; CpuPrepackRows below checks that choice).
class CpuPrepack : public ::testing::Test {
 protected:
  void SetUp() override { cpu::prefer_pack(true); }
  void TearDown() override { cpu::prefer_pack(false); }
};

std::string kernel_for(int64_t m) {
  return m <= 4 ? "qmv_fused_" + std::string(cpu::isa_name(cpu::active_isa())) : "auto";
}

// y = x · Wᵀ through `kernel`, y poisoned first; the rel-L2 comparison with `want`.
ref::Comparison run(const test::Dense& x, const QuantizedMatrix& w, const std::vector<double>& want,
                    const std::string& kernel, int threads = 0) {
  test::Dense y(x.dtype, x.rows, w.n);
  y.poison();
  Context ctx;
  ctx.kernel = kernel;
  ctx.threads = threads;
  matmul(x.view(), w, y.mut(), ctx);
  return ref::compare(y.view(), want, x.dtype);
}

// The scale-extremes check: y = x · Wᵀ at M = 1 on the packed kernel (y poisoned first); row
// nan_row must be NaN, every other row finite, within the f32 bound together and row 0 on its
// own (its scales are the tiny ones, its values far below the others').
void expect_scale_extremes(const test::Dense& x, const QuantizedMatrix& p, const QuantizedMatrix& w,
                           int64_t nan_row) {
  test::Dense y(DType::f32, 1, w.n);
  y.poison();
  const std::string kernel = kernel_for(1);
  Context ctx;
  ctx.kernel = kernel;
  matmul(x.view(), p, y.mut(), ctx);
  const std::vector<double> want = ref::matmul(x.view(), w);
  EXPECT_TRUE(std::isnan(y.at(nan_row)));
  double num = 0, den = 0;
  for (int64_t i = 0; i < w.n; ++i) {
    if (i == nan_row) continue;
    ASSERT_TRUE(std::isfinite(y.at(i))) << "n = " << i;
    const double d = y.at(i) - want[static_cast<std::size_t>(i)];
    num += d * d;
    den += want[static_cast<std::size_t>(i)] * want[static_cast<std::size_t>(i)];
  }
  EXPECT_LT(std::sqrt(num / den), 1e-5);
  EXPECT_NE(want[0], 0.0);
  EXPECT_NEAR(y.at(0), want[0], 1e-5 * std::fabs(want[0]));
}

TEST_F(CpuPrepack, MatchesOracle) {
  // K = 1280: 10 steps of 128, so chunks of 2 and 4 steps end in a partial one; K = 384: 3.
  for (int bits : {2, 3, 4, 5, 6, 8})
    for (int group : {32, 64, 128})
      for (DType t : {DType::f32, DType::f16, DType::bf16})
        for (int64_t k : {1280, 384}) {
          const Format f = Format::affine(bits, group);
          const int64_t n = 37;
          const QuantizedMatrix w = test::host_weights(f, t, n, k, Layout::nk, 5);
          const QuantizedMatrix p = prepack(w);
          EXPECT_EQ(p.host_pack != nullptr, packed_here(f)) << f.name();
          EXPECT_EQ(p.codes, w.codes);  // the original buffers are shared
          for (int64_t m : {1, 2, 3, 4, 5}) {
            const test::Dense x = test::random_dense(t, m, k, 60 + static_cast<uint32_t>(m));
            const ref::Comparison cmp = run(x, p, ref::matmul(x.view(), w), kernel_for(m));
            EXPECT_TRUE(cmp.pass) << f.name() << " " << dtype_name(t) << " K=" << k << " M=" << m
                                  << ": rel_l2 " << cmp.rel_l2 << ", non-finite " << cmp.nonfinite;
          }
        }
}

// GGUF q4_1 packs as affine 4-bit g32 with f16 scales d and biases m, mxfp4 as affine with codes
// 2v + 12, bf16 scales 2^(E - 128) and biases -12 times them, nvfp4 the same with its E4M3 scale
// bytes (half their value) in groups of 16 and its tensor scale at the end.
TEST_F(CpuPrepack, TranscodedFormatsMatchOracle) {
  struct Case {
    Format f;
    uint32_t seed;  // nvfp4: odd seeds quantize with a tensor scale (test_util.hpp)
  };
  for (const Case& c :
       {Case{Format::gguf(Scheme::q4_0), 7}, Case{Format::gguf(Scheme::q4_1), 7},
        Case{Format::gguf(Scheme::q5_0), 7}, Case{Format::gguf(Scheme::q5_1), 7},
        Case{Format::mxfp4(), 7}, Case{Format::nvfp4(), 7}, Case{Format::nvfp4(), 8}})
    for (int64_t k : {1280, 384}) {
      const Format& f = c.f;
      const int64_t n = 39;
      QuantizedMatrix w = test::host_weights(f, DType::f32, n, k, Layout::nk, c.seed);
      if (c.seed % 2 && f.scheme == Scheme::nvfp4) {
        EXPECT_TRUE(w.global_scale.has_value());
      }
      const QuantizedMatrix p = prepack(w);
      EXPECT_EQ(p.host_pack != nullptr, packed_here(f)) << f.name();
      std::vector<test::Dense> xs;
      std::vector<std::vector<double>> want;
      for (int64_t m : {1, 2, 3, 4, 5}) {
        xs.push_back(test::random_dense(DType::f32, m, k, 70 + static_cast<uint32_t>(m)));
        want.push_back(ref::matmul(xs.back().view(), w));
      }
      // M = 5 takes the tiled path, which reads the original buffers: checked before they are
      // overwritten; then M = 1..4 must still be right, from the pack alone.
      const ref::Comparison tiled = run(xs[4], p, want[4], "auto");
      EXPECT_TRUE(tiled.pass) << f.name() << " K=" << k << " M=5: rel_l2 " << tiled.rel_l2;
      const Footprint fp = w.footprint();
      if (p.host_pack) {
        std::memset(w.codes, 0x77, fp.code_bytes);
        if (fp.scale_bytes) std::memset(w.scales, 0x70, fp.scale_bytes);
      }
      for (std::size_t i = 0; i < 4; ++i) {
        const ref::Comparison cmp = run(xs[i], p, want[i], kernel_for(xs[i].rows));
        EXPECT_TRUE(cmp.pass) << f.name() << " K=" << k << " M=" << xs[i].rows << ": rel_l2 "
                              << cmp.rel_l2 << ", non-finite " << cmp.nonfinite;
      }
    }
}

// mxfp4 scales at the ends of E8M0: 2^-127 and 2^-126 (subnormal in the pack's bf16 and in f32
// after the factor 1/2) are exact; a NaN scale (255) makes its rows NaN as the float kernel does;
// 2^126 and 2^127 (253, 254) would overflow the packed bias, so such a matrix is not packed.
TEST_F(CpuPrepack, MxFp4ScaleExtremes) {
  const int64_t n = 12, k = 256;
  QuantizedMatrix w = test::host_weights(Format::mxfp4(), DType::f32, n, k, Layout::nk, 9);
  auto* sc = reinterpret_cast<uint8_t*>(w.scales);
  const int64_t groups = k / 32;
  for (int64_t g = 0; g < groups; ++g) sc[0 * groups + g] = static_cast<uint8_t>(g % 2);  // row 0
  sc[1 * groups + 3] = 255;                                                               // row 1
  const QuantizedMatrix p = prepack(w);
  ASSERT_EQ(p.host_pack != nullptr, packed_here(w.format));
  test::Dense x = test::random_dense(DType::f32, 1, k, 10);
  for (int64_t i = 0; i < k; ++i) x.set(i, x.at(i) * 0x1p100f);  // row 0 back to a normal range
  expect_scale_extremes(x, p, w, 1);
  sc[5 * groups] = 254;
  EXPECT_FALSE(prepack(w).host_pack);
  sc[5 * groups] = 253;
  EXPECT_FALSE(prepack(w).host_pack);
}

// nvfp4 scale bytes the kernel converts arithmetically: E4M3 subnormals (1..7), a negative scale,
// the largest (448) and NaN (0x7F, whose row must be NaN).
TEST_F(CpuPrepack, NvFp4ScaleExtremes) {
  const int64_t n = 12, k = 256;
  QuantizedMatrix w = test::host_weights(Format::nvfp4(), DType::f32, n, k, Layout::nk, 8);
  auto* sc = reinterpret_cast<uint8_t*>(w.scales);
  const int64_t groups = k / 16;
  for (int64_t g = 0; g < groups; ++g) {
    sc[0 * groups + g] = static_cast<uint8_t>(1 + g % 7);  // subnormal: m·2^-9
    sc[2 * groups + g] = static_cast<uint8_t>(0x80 | sc[2 * groups + g]);
  }
  sc[1 * groups + 5] = 0x7F;
  sc[3 * groups + 2] = 0x7E;  // 448
  const QuantizedMatrix p = prepack(w);
  ASSERT_EQ(p.host_pack != nullptr, packed_here(w.format));
  expect_scale_extremes(test::random_dense(DType::f32, 1, k, 11), p, w, 1);
}

// Every E4M3 scale byte through the packed kernel: row r's sixteen groups take bytes 16r ..
// 16r + 15, so each row is checked on its own against the oracle, and rows 7 and 15 (0x7F,
// 0xFF) must be NaN.
TEST_F(CpuPrepack, NvFp4EveryScaleByte) {
  const int64_t n = 16, k = 256, groups = k / 16;
  QuantizedMatrix w = test::host_weights(Format::nvfp4(), DType::f32, n, k, Layout::nk, 12);
  auto* sc = reinterpret_cast<uint8_t*>(w.scales);
  for (int64_t i = 0; i < n * groups; ++i) sc[i] = static_cast<uint8_t>(i);
  const QuantizedMatrix p = prepack(w);
  ASSERT_EQ(p.host_pack != nullptr, packed_here(w.format));
  const test::Dense x = test::random_dense(DType::f32, 1, k, 13);
  test::Dense y(DType::f32, 1, n);
  y.poison();
  const std::string kernel = kernel_for(1);  // Context::kernel is a view: the string outlives it
  Context ctx;
  ctx.kernel = kernel;
  matmul(x.view(), p, y.mut(), ctx);
  const std::vector<double> want = ref::matmul(x.view(), w);
  const std::vector<double> wd = ref::dequantize(w);
  for (int64_t r = 0; r < n; ++r) {
    if (r % 8 == 7) {
      EXPECT_TRUE(std::isnan(y.at(r))) << "row " << r;
      continue;
    }
    double mag = 0;  // Σ |x·w| over the row: the bound's scale, whatever the sum cancels
    for (int64_t i = 0; i < k; ++i)
      mag += std::fabs(x.at(i) * wd[static_cast<std::size_t>(r * k + i)]);
    ASSERT_GT(mag, 0.0) << "row " << r;
    EXPECT_NEAR(y.at(r), want[static_cast<std::size_t>(r)], 1e-6 * mag) << "row " << r;
  }
}

// After packing, the original codes and scales are overwritten: a kernel that reads the pack
// still gives the old product, one that read the originals would not.
TEST_F(CpuPrepack, KernelReadsThePack) {
  if (!cpu::int8_active()) GTEST_SKIP() << "no packed kernel on this CPU level";
  const int64_t n = 70, k = 2048;
  for (int bits : {2, 3, 4, 5, 6, 8}) {
    const Format f = Format::affine(bits, 64);
    if (!packed_here(f)) continue;
    QuantizedMatrix w = test::host_weights(f, DType::f32, n, k, Layout::nk, 9);
    const QuantizedMatrix p = prepack(w);
    ASSERT_TRUE(p.host_pack);
    std::vector<test::Dense> xs;
    std::vector<std::vector<double>> want;
    for (int64_t m : {1, 2, 4}) {
      xs.push_back(test::random_dense(DType::f32, m, k, 80 + static_cast<uint32_t>(m)));
      want.push_back(ref::matmul(xs.back().view(), w));
    }
    const Footprint fp = w.footprint();
    std::memset(w.codes, 0x5A, fp.code_bytes);
    std::memset(w.scales, 0x11, fp.scale_bytes);
    for (std::size_t i = 0; i < xs.size(); ++i)
      for (int threads : {1, 2}) {
        const ref::Comparison cmp = run(xs[i], p, want[i], kernel_for(xs[i].rows), threads);
        EXPECT_TRUE(cmp.pass) << f.name() << " M=" << xs[i].rows << " threads=" << threads
                              << ": rel_l2 " << cmp.rel_l2;
      }
  }
}

// A pack describes the buffers it was made from: on a copy of the matrix pointing at other
// codes, or on one expert's view of a packed stack, the kernels read the matrix itself.
TEST_F(CpuPrepack, PackOfOtherBuffersIsIgnored) {
  const Format f = Format::affine(4, 64);
  const int64_t n = 33, k = 1024;
  const QuantizedMatrix a = test::host_weights(f, DType::f32, n, k, Layout::nk, 1);
  const QuantizedMatrix b = test::host_weights(f, DType::f32, n, k, Layout::nk, 2);
  QuantizedMatrix mixed = prepack(a);
  mixed.codes = b.codes;
  mixed.scales = b.scales;
  mixed.biases = b.biases;
  const test::Dense x = test::random_dense(DType::f32, 1, k, 3);
  const ref::Comparison cmp = run(x, mixed, ref::matmul(x.view(), b), kernel_for(1));
  EXPECT_TRUE(cmp.pass) << "rel_l2 " << cmp.rel_l2;

  const QuantizedMatrix stack = prepack(test::host_weights(f, DType::f32, n, k, Layout::nk, 4, 3));
  EXPECT_EQ(stack.host_pack != nullptr, packed_here(f));
  EXPECT_FALSE(stack.expert(1).host_pack);
}

// A packed stack of experts serves gather_matmul (each expert's rows: 1..4, the packed kernel).
TEST_F(CpuPrepack, GatherMatmulOnPackedStack) {
  const int64_t e = 3, n = 41, k = 768;
  for (int bits : {3, 4}) {
    const QuantizedMatrix stack =
        prepack(test::host_weights(Format::affine(bits, 32), DType::f16, n, k, Layout::nk, 12, e));
    for (int64_t m : {1, 5, 9}) {
      const test::Dense x = test::random_dense(DType::f16, m, k, 40 + static_cast<uint32_t>(m));
      std::vector<int32_t> ids(static_cast<std::size_t>(m));
      for (int64_t i = 0; i < m; ++i)
        ids[static_cast<std::size_t>(i)] = static_cast<int32_t>((i * 2 + 1) % e);
      test::Dense y(DType::f16, m, n);
      y.poison();
      gather_matmul(x.view(), stack, ids.data(), y.mut());
      const ref::Comparison cmp =
          ref::compare(y.view(), ref::gather_matmul(x.view(), stack, ids), DType::f16);
      EXPECT_TRUE(cmp.pass) << bits << "-bit M=" << m << " rel_l2 " << cmp.rel_l2;
    }
  }
}

// Activations the planes cannot hold (a NaN, a block below 2^-96) send the call to the float
// kernels on the original buffers ([N, K]: the float GEMV; [K, N]: the [K, N] kernels, at M = 2
// where one row splits and the other does not); outliers stay on the pack and within the bound.
TEST_F(CpuPrepack, ActivationExtremes) {
  struct Case {
    Format f;
    Layout layout;
    int64_t n, m;
  };
  for (const Case& c : {Case{Format::affine(4, 64), Layout::nk, 37, 1},
                        Case{Format::affine(3, 64), Layout::kn, 64, 2}}) {
    const int64_t k = 1024, last = (c.m - 1) * k;  // the last row of x
    const QuantizedMatrix w = test::host_weights(c.f, DType::f32, c.n, k, c.layout, 21);
    const QuantizedMatrix p = prepack(w);
    test::Dense x = test::random_dense(DType::f32, c.m, k, 22);
    x.set(last + 5, 3.0e4f);
    for (int64_t i = 256; i < 384; ++i) x.set(last + i, x.at(last + i) * 0x1p-110f);
    const ref::Comparison cmp = run(x, p, ref::matmul(x.view(), w), kernel_for(c.m));
    EXPECT_TRUE(cmp.pass) << c.f.name() << " rel_l2 " << cmp.rel_l2;
    x.set(last + 700, std::nanf(""));
    test::Dense y(DType::f32, c.m, c.n);
    y.poison();
    matmul(x.view(), p, y.mut());
    for (int64_t i = 0; i < c.n; ++i)
      EXPECT_TRUE(std::isnan(y.at((c.m - 1) * c.n + i))) << c.f.name() << " n = " << i;
  }
}

// W [K, N] (affine, mxfp4, nvfp4) packs as its [N, K] transpose: M = 1..8 read the pack (checked
// again after the original buffers are overwritten), M = 9 the [K, N] tiles on the originals
// (checked before). N = 96 ends halfway through the pack's blocks of 64 transposed rows.
TEST_F(CpuPrepack, KnLayoutPacksAsTranspose) {
  struct Case {
    Format f;
    DType t;
    uint32_t seed;  // nvfp4: odd seeds quantize with a tensor scale (test_util.hpp)
  };
  std::vector<Case> cases;
  for (int bits : {2, 3, 4, 5, 6, 8})
    for (int group : {32, 64, 128})
      cases.push_back({Format::affine(bits, group), group == 64 ? DType::bf16 : DType::f16, 3});
  cases.push_back({Format::affine(4, 64), DType::f32, 4});
  cases.push_back({Format::mxfp4(), DType::f32, 6});
  cases.push_back({Format::nvfp4(), DType::f32, 6});
  cases.push_back({Format::nvfp4(), DType::f32, 7});
  for (const Case& c : cases)
    for (int64_t k : {1280, 384}) {
      const int64_t n = 96;
      QuantizedMatrix w = test::host_weights(c.f, c.t, n, k, Layout::kn, c.seed);
      const QuantizedMatrix p = prepack(w);
      ASSERT_EQ(p.host_pack != nullptr, packed_here(c.f)) << c.f.name();
      std::vector<test::Dense> xs;
      std::vector<std::vector<double>> want;
      for (int64_t m : {1, 2, 3, 5, 8, 9}) {
        xs.push_back(test::random_dense(c.t, m, k, 90 + static_cast<uint32_t>(m)));
        want.push_back(ref::matmul(xs.back().view(), w));
      }
      const ref::Comparison tiled = run(xs.back(), p, want.back(), "auto");
      EXPECT_TRUE(tiled.pass) << c.f.name() << " K=" << k << " M=9: rel_l2 " << tiled.rel_l2;
      if (p.host_pack) {
        const Footprint fp = w.footprint();
        std::memset(w.codes, 0x6C, fp.code_bytes);
        std::memset(w.scales, 0x33, fp.scale_bytes);
        if (fp.bias_bytes) std::memset(w.biases, 0x44, fp.bias_bytes);
      }
      for (std::size_t i = 0; i + 1 < xs.size(); ++i) {
        const ref::Comparison cmp = run(xs[i], p, want[i], "auto");
        EXPECT_TRUE(cmp.pass) << c.f.name() << " " << dtype_name(c.t) << " K=" << k
                              << " M=" << xs[i].rows << ": rel_l2 " << cmp.rel_l2 << ", non-finite "
                              << cmp.nonfinite;
      }
    }
}

// Formats, layouts and shapes without a packed kernel come back without a pack (and still
// multiply correctly); the avx2 level packs only 4-bit codes, the scalar level nothing.
TEST_F(CpuPrepack, WithoutPackedKernel) {
  struct Shape {
    Format f;
    Layout layout;
    int64_t k;
  };
  const Shape shapes[] = {{Format::gguf(Scheme::q8_0), Layout::nk, 1024},
                          {Format::affine(4, 64), Layout::nk, 320},  // K % 128 != 0
                          {Format::mxfp8(), Layout::kn, 1024},
                          {Format::fp8_e4m3(), Layout::kn, 1024},
                          {Format::mxfp8(), Layout::nk, 1024}};
  for (const Shape& s : shapes) {
    const QuantizedMatrix w = test::host_weights(s.f, DType::f32, 40, s.k, s.layout, 31);
    const QuantizedMatrix p = prepack(w);
    EXPECT_FALSE(p.host_pack) << s.f.name();
    const test::Dense x = test::random_dense(DType::f32, 2, s.k, 32);
    const ref::Comparison cmp = run(x, p, ref::matmul(x.view(), w), "auto");
    EXPECT_TRUE(cmp.pass) << s.f.name() << " rel_l2 " << cmp.rel_l2;
  }
  const QuantizedMatrix w =
      test::host_weights(Format::affine(4, 64), DType::f32, 8, 256, Layout::nk, 33);
  const QuantizedMatrix w8 =
      test::host_weights(Format::affine(8, 64), DType::f32, 8, 256, Layout::nk, 33);
  if (cpu::isa_supported(Isa::avx2)) {
    const cpu::ScopedIsa scoped(Isa::avx2);
    EXPECT_TRUE(prepack(w).host_pack);
    EXPECT_FALSE(prepack(w8).host_pack);
    EXPECT_NE(cpu::pack_unsupported(w8).find("the avx2 level packs only codes of 2 to 6 bits"),
              std::string::npos)
        << cpu::pack_unsupported(w8);
  }
  {
    const cpu::ScopedIsa scoped(Isa::scalar);
    EXPECT_FALSE(prepack(w).host_pack);
    EXPECT_NE(cpu::pack_unsupported(w).find("no packed kernel"), std::string::npos)
        << cpu::pack_unsupported(w);
  }
  // Made at the best level, then run with the level capped: the scalar level's float kernel reads
  // the originals, the avx2 level's integer one the pack.
  const QuantizedMatrix p = prepack(w);
  const test::Dense x = test::random_dense(DType::f32, 1, 256, 34);
  for (Isa isa : {Isa::scalar, Isa::avx2}) {
    if (!cpu::isa_supported(isa)) continue;
    const cpu::ScopedIsa scoped(isa);
    const ref::Comparison cmp = run(x, p, ref::matmul(x.view(), w), kernel_for(1));
    EXPECT_TRUE(cmp.pass) << cpu::isa_name(isa) << " rel_l2 " << cmp.rel_l2;
  }
}

// A matrix marked Location::device whose buffers are host memory: the device pack refuses it
// (with CUDA: the pointer named; without: the missing backend named).
TEST_F(CpuPrepack, DeviceMarkedHostMemoryIsRefused) {
  QuantizedMatrix w = test::host_weights(Format::affine(4, 64), DType::f32, 8, 256, Layout::nk, 35);
  w.location = Location::device;
  test::expect_error([&] { (void)prepack(w); }, "[quanta::prepack] ");
  try {
    (void)prepack(w);
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_TRUE(what.find("w.codes: pointer") != std::string::npos ||
                what.find("no CUDA backend") != std::string::npos)
        << what;
  }
}

TEST_F(CpuPrepack, DescribeSaysPacked) {
  const QuantizedMatrix p =
      prepack(test::host_weights(Format::affine(4, 64), DType::f32, 8, 256, Layout::nk, 36));
  EXPECT_EQ(p.describe().ends_with(" packed"), p.host_pack != nullptr) << p.describe();
}

// Without prefer_pack: on VNNI CPUs whose GEMV prefetches the next rows one by one (Intel), M <= 2
// reads the plain rows of a packed [N, K] matrix and M = 4 the pack, elsewhere (and at the avx2
// level, which has no integer kernel for the plain rows) every M the pack. The pack scribbled over
// shows which one each M read.
TEST(CpuPrepackRows, PlainRowsAtSmallMWherePrefetchIsPerRow) {
  if (!cpu::int8_active()) GTEST_SKIP() << "no packed kernel on this CPU level";
  const int64_t n = 70, k = 2048;
  for (const Format& f : {Format::affine(4, 64), Format::gguf(Scheme::q4_0)}) {
    const QuantizedMatrix w = test::host_weights(f, DType::f32, n, k, Layout::nk, 9);
    const QuantizedMatrix p = prepack(w);
    ASSERT_TRUE(p.host_pack);
    std::memset(p.host_pack->data.get(), 0x5A, static_cast<std::size_t>(p.host_pack->expert_bytes));
    const bool per_row = cpu::gemv_prefetch().rows && cpu::vnni_active();
    for (int64_t m : {1, 2, 4}) {
      const test::Dense x = test::random_dense(DType::f32, m, k, 90 + static_cast<uint32_t>(m));
      const ref::Comparison cmp = run(x, p, ref::matmul(x.view(), w), kernel_for(m));
      EXPECT_EQ(cmp.pass, per_row && m <= cpu::kPlainRowsMaxM)
          << f.name() << " M=" << m << ": rel_l2 " << cmp.rel_l2;
    }
  }
}

// The avx2 level's dot products on vpmaddubsw, and on AVX-VNNI's vpdpbusd where the CPU has it.
struct ScopedAvxVnni {
  explicit ScopedAvxVnni(bool on) { cpu::force_avx_vnni(on); }
  ~ScopedAvxVnni() { cpu::force_avx_vnni(std::nullopt); }
  ScopedAvxVnni(const ScopedAvxVnni&) = delete;
  ScopedAvxVnni& operator=(const ScopedAvxVnni&) = delete;
};

// The avx2 level's integer GEMVs (x86/avx2_int8.hpp, x86/avx2_kquant.hpp), forced where the CPU has
// a higher level: each format it packs (codes of 2 to 6 bits, and q2_K-q6_K in quad order), every
// group and scale dtype, x in f32 (three planes) and bf16 (two), M = 1..4 (q3_K, q5_K, q6_K: to 8),
// ragged N, K in whole and partial chunks, one and two threads, and W [K, N] packed as its
// transpose. The original buffers
// are overwritten after packing: only a kernel that reads the pack passes. Where AVX-VNNI runs (or
// the build emulates it), every case runs with both dot products.
TEST_F(CpuPrepack, Avx2LevelReadsThePack) {
  if (!cpu::isa_supported(Isa::avx2)) GTEST_SKIP() << "no avx2 level on this CPU";
  const cpu::ScopedIsa scoped(Isa::avx2);
  std::vector<bool> dots = {false};
  {
    const ScopedAvxVnni on(true);  // a CPU with AVX-VNNI, or a build emulating it
    if (cpu::avx_vnni_active()) dots.push_back(true);
  }
  struct Case {
    Format f;
    DType t;
    Layout layout;
    uint32_t seed;  // nvfp4: odd seeds quantize with a tensor scale (test_util.hpp)
  };
  std::vector<Case> cases;
  for (int bits : {2, 3, 4, 5, 6})
    for (int group : {32, 64, 128})
      for (DType t : {DType::f32, DType::f16, DType::bf16})
        cases.push_back({Format::affine(bits, group), t, Layout::nk, 5});
  for (const Format& f :
       {Format::gguf(Scheme::q4_0), Format::gguf(Scheme::q4_1), Format::gguf(Scheme::q5_0),
        Format::gguf(Scheme::q5_1), Format::mxfp4(), Format::nvfp4()})
    cases.push_back({f, DType::f32, Layout::nk, 7});
  for (Scheme s : {Scheme::q2_K, Scheme::q3_K, Scheme::q4_K, Scheme::q5_K, Scheme::q6_K})
    cases.push_back({Format::gguf(s), DType::f32, Layout::nk, 9});
  cases.push_back({Format::affine(6, 32), DType::f16, Layout::kn, 4});
  cases.push_back({Format::affine(3, 64), DType::bf16, Layout::kn, 2});
  cases.push_back({Format::nvfp4(), DType::f32, Layout::nk, 8});
  cases.push_back({Format::affine(4, 64), DType::bf16, Layout::kn, 3});
  cases.push_back({Format::mxfp4(), DType::f32, Layout::kn, 6});
  for (const Case& c : cases)
    for (int64_t k : {int64_t{1280}, c.f.group_size == 256 ? int64_t{512} : int64_t{384}}) {
      const int64_t n = c.layout == Layout::nk ? 37 : 96;
      QuantizedMatrix w = test::host_weights(c.f, c.t, n, k, c.layout, c.seed);
      const QuantizedMatrix p = prepack(w);
      ASSERT_TRUE(p.host_pack) << c.f.name();
      std::vector<test::Dense> xs;
      std::vector<std::vector<double>> want;
      // Affine scales share x's dtype; the others take f32 and bf16 x.
      const std::vector<DType> x_types = c.f.scheme == Scheme::affine
                                             ? std::vector<DType>{c.t}
                                             : std::vector<DType>{DType::f32, DType::bf16};
      // The K-quants' packed GEMV serves M up to 8 (q3_K, q5_K, q6_K: fused_max_rows).
      const bool to8 =
          c.f.scheme == Scheme::q3_K || c.f.scheme == Scheme::q5_K || c.f.scheme == Scheme::q6_K;
      for (DType xt : x_types)
        for (int64_t m : {1, 2, 3, 4, 6, 8}) {
          if (m > 4 && !to8) continue;
          xs.push_back(test::random_dense(xt, m, k, 50 + static_cast<uint32_t>(m)));
          want.push_back(ref::matmul(xs.back().view(), w));
        }
      const Footprint fp = w.footprint();
      std::memset(w.codes, 0x6C, fp.code_bytes);
      if (fp.scale_bytes) std::memset(w.scales, 0x33, fp.scale_bytes);  // GGUF: none apart
      if (fp.bias_bytes) std::memset(w.biases, 0x44, fp.bias_bytes);
      for (const bool vnni_dot : dots) {
        const ScopedAvxVnni dot(vnni_dot);
        ASSERT_EQ(cpu::avx_vnni_active(), vnni_dot);
        for (std::size_t i = 0; i < xs.size(); ++i)
          for (int threads : {1, 2}) {
            const ref::Comparison cmp = run(xs[i], p, want[i], "qmv_fused_avx2", threads);
            EXPECT_TRUE(cmp.pass) << c.f.name() << " " << dtype_name(c.t) << " K=" << k << " x "
                                  << dtype_name(xs[i].dtype) << " M=" << xs[i].rows
                                  << " threads=" << threads << (vnni_dot ? " vpdpbusd" : "")
                                  << ": rel_l2 " << cmp.rel_l2 << ", non-finite " << cmp.nonfinite;
          }
      }
    }
}

// 3- to 6-bit packs' codes are laid out for the level that made them (the avx2 level's own
// layouts, pack.cpp avx2_block; MLX's bit stream, nibbles and bit masks at the VNNI level): a
// level that reads the other layout ignores the pack and reads the plain rows, so the answer
// stays right when a program switches levels after packing.
TEST_F(CpuPrepack, OwnLayoutPackStaysWithItsLevel) {
  std::vector<Isa> levels;
  for (Isa i : {Isa::scalar, Isa::avx2, Isa::avx512})
    if (cpu::isa_supported(i)) levels.push_back(i);
  const int64_t n = 37, k = 1280;
  int packs = 0;
  for (const Format& f :
       {Format::affine(3, 64), Format::affine(6, 32), Format::affine(5, 128), Format::affine(4, 64),
        Format::gguf(Scheme::q5_1), Format::gguf(Scheme::q4_0), Format::mxfp4(), Format::nvfp4()}) {
    const QuantizedMatrix w = test::host_weights(f, DType::f32, n, k, Layout::nk, 5);
    const test::Dense x = test::random_dense(DType::f32, 1, k, 51);
    const std::vector<double> want = ref::matmul(x.view(), w);
    for (Isa made : levels) {
      QuantizedMatrix p;
      {
        const cpu::ScopedIsa at(made);
        if (!cpu::int8_active()) continue;
        p = prepack(w);
      }
      ASSERT_TRUE(p.host_pack) << f.name() << " at " << cpu::isa_name(made);
      ++packs;
      for (Isa read : levels) {
        const cpu::ScopedIsa at(read);
        const std::string where = f.name() + " made at " + std::string(cpu::isa_name(made)) +
                                  ", read at " + std::string(cpu::isa_name(read));
        const bool readable = p.host_pack->avx2_codes == cpu::avx2_int8_active();
        EXPECT_EQ(cpu::pack_of(p) != nullptr, readable) << where;
        const ref::Comparison cmp =
            run(x, p, want, "qmv_fused_" + std::string(cpu::isa_name(read)));
        EXPECT_TRUE(cmp.pass) << where << ": rel_l2 " << cmp.rel_l2;
      }
    }
  }
  if (packs == 0) GTEST_SKIP() << "no packed kernel on this CPU";
}

// q2_K-q6_K pack only at the avx2 level (the VNNI level reads GGUF's blocks as stored, and says
// so); a pack made there serves only that level, and every level's answer stays right.
TEST_F(CpuPrepack, KquantPackOnlyAtAvx2Level) {
  if (!cpu::isa_supported(Isa::avx2)) GTEST_SKIP() << "no avx2 level on this CPU";
  const int64_t n = 37, k = 1024;
  for (Scheme s : {Scheme::q2_K, Scheme::q6_K}) {
    const Format f = Format::gguf(s);
    const QuantizedMatrix w = test::host_weights(f, DType::f32, n, k, Layout::nk, 11);
    const test::Dense x = test::random_dense(DType::f32, 1, k, 52);
    const std::vector<double> want = ref::matmul(x.view(), w);
    QuantizedMatrix p;
    {
      const cpu::ScopedIsa at(Isa::avx2);
      p = prepack(w);
    }
    ASSERT_TRUE(p.host_pack) << f.name();
    EXPECT_TRUE(p.host_pack->kquant_rows);
    for (Isa read : {Isa::scalar, Isa::avx2, Isa::avx512}) {
      if (!cpu::isa_supported(read)) continue;
      const cpu::ScopedIsa at(read);
      const std::string where = f.name() + " read at " + std::string(cpu::isa_name(read));
      EXPECT_EQ(cpu::pack_of(p) != nullptr, read == Isa::avx2) << where;
      if (cpu::vnni_active()) {
        EXPECT_FALSE(prepack(w).host_pack) << where;
        EXPECT_NE(cpu::pack_unsupported(w).find("packs only at the avx2 level"), std::string::npos)
            << cpu::pack_unsupported(w);
      }
      const ref::Comparison cmp = run(x, p, want, "qmv_fused_" + std::string(cpu::isa_name(read)));
      EXPECT_TRUE(cmp.pass) << where << ": rel_l2 " << cmp.rel_l2;
    }
  }
  const QuantizedMatrix kn =
      test::host_weights(Format::gguf(Scheme::q4_K), DType::f32, 64, 256, Layout::nk, 12);
  QuantizedMatrix as_kn = kn;
  as_kn.layout = Layout::kn;
  const cpu::ScopedIsa at(Isa::avx2);
  EXPECT_NE(cpu::pack_unsupported(as_kn).find("W [K, N] in q4_K has no packed kernel"),
            std::string::npos)
      << cpu::pack_unsupported(as_kn);
}

}  // namespace
}  // namespace quanta
