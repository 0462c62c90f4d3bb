// The AMX tile products (qmm_amx_avx512) against the fp64 oracle: every format, W [N, K] and
// [K, N], x in f16 and bf16 (two and one bf16 planes), M ragged for the 32-row blocks, N ragged
// for the 128-row or -column tasks, K past one K block and ragged within a tile step (fp8), one
// and two threads, outputs poisoned first; non-finite activations and weights keep their class.
// f32 activations take the codes path (affine and the GGUF blocks of 32 in [N, K]: one bf16
// plane of exact values, x in three planes, scales per group) or W's one plane (mx, nvfp4, fp8)
// and are declined with a reason for the others. Skips where the CPU has no AMX-BF16 (the tests
// then say why). Timing lives in bench/cpu_probe.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "cpu/backend.hpp"
#include "cpu/isa.hpp"
#include "quanta/numeric.hpp"
#include "quanta/ops.hpp"
#include "quanta/reference.hpp"
#include "test_util.hpp"

namespace quanta {
namespace {

constexpr const char* kAmx = "qmm_amx_avx512";

bool amx_here() {
  return cpu::amx_active();
}

// Weights of `f`: quantized from random values where quanta encodes the format, random valid
// blocks otherwise (test::host_weights).
QuantizedMatrix weights(const Format& f, int64_t n, int64_t k, DType t, uint32_t seed,
                        Layout layout = Layout::nk) {
  return test::host_weights(f, t, n, k, layout, seed);
}

// N for W [K, N]: past one 128-column task, ragged, and N · bits a multiple of 32.
int64_t kn_columns(int bits) {
  switch (bits) {
    case 3:
    case 5:
      return 160;
    case 2:
    case 6:
      return 144;
    case 4:
      return 136;
    default:
      return 132;
  }
}

// y = x · W by the AMX kernel, y poisoned first.
test::Dense amx_y(const QuantizedMatrix& w, const test::Dense& x, int threads = 0) {
  test::Dense y(x.dtype, x.rows, w.n);
  y.poison();
  Context ctx;
  ctx.kernel = kAmx;
  ctx.threads = threads;
  matmul(x.view(), w, y.mut(), ctx);
  return y;
}

// The kernel's y against the oracle.
ref::Comparison run(const QuantizedMatrix& w, const test::Dense& x, int threads = 0) {
  return ref::compare(amx_y(w, x, threads).view(), ref::matmul(x.view(), w), x.dtype);
}

// y is NaN where the oracle's value is, and infinite where it is.
void expect_same_classes(const test::Dense& y, const std::vector<double>& want) {
  for (int64_t i = 0; i < y.rows * y.cols; ++i) {
    const double v = want[static_cast<std::size_t>(i)];
    const float got = y.at(i);
    EXPECT_EQ(std::isnan(got), std::isnan(v)) << "row " << i / y.cols << " col " << i % y.cols;
    EXPECT_EQ(std::isinf(got), std::isinf(v)) << "row " << i / y.cols << " col " << i % y.cols;
  }
}

class CpuAmx : public ::testing::TestWithParam<Format> {};

TEST_P(CpuAmx, MatchesOracle) {
  if (!amx_here()) GTEST_SKIP() << "no AMX-BF16 here: " << cpu::cpu_features().describe();
  const Format f = GetParam();
  const bool fp8 = f.info().family == Family::fp8;
  const int64_t K = fp8 ? 1111 : 1280;
  for (Layout layout : {Layout::nk, Layout::kn}) {
    if (layout == Layout::kn && !f.info().kn_layout) continue;
    const int64_t N = layout == Layout::nk ? 37 : kn_columns(f.bits);
    for (DType t : {DType::f16, DType::bf16}) {
      const QuantizedMatrix w = weights(f, N, K, t, 7, layout);
      for (int64_t m : {32, 33, 47, 64}) {
        const test::Dense x = test::random_dense(t, m, K, 100 + static_cast<uint32_t>(m));
        const ref::Comparison c = run(w, x);
        const char* l = layout == Layout::nk ? " [N, K] " : " [K, N] ";
        EXPECT_TRUE(c.pass) << f.name() << l << dtype_name(t) << " M=" << m << ": rel_l2 "
                            << c.rel_l2 << " (bound " << rel_l2_bound(t) << "), non-finite "
                            << c.nonfinite;
        // f16 outputs round to ~3e-4: a lost second plane of W (its 2^-8 of each weight) would
        // show well above 1e-3.
        if (t == DType::f16) {
          EXPECT_LT(c.rel_l2, 1e-3) << f.name() << l << "M=" << m;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllFormats, CpuAmx, ::testing::ValuesIn(all_formats()),
                         [](const ::testing::TestParamInfo<Format>& i) {
                           std::string s = i.param.name();
                           for (char& ch : s)
                             if (ch == '-') ch = '_';
                           return s;
                         });

// Several 128-row tasks with a ragged last one, K over two K blocks, M past several 32-row
// blocks, one and two threads: the same bits either way.
TEST(CpuAmxEdges, TasksBlocksAndThreads) {
  if (!amx_here()) GTEST_SKIP() << "no AMX-BF16 here: " << cpu::cpu_features().describe();
  struct C {
    Format f;
    Layout layout;
  };
  for (const C& c : {C{Format::affine(4, 64), Layout::nk},
                     C{Format::gguf(Scheme::q6_K), Layout::nk}, C{Format::fp8_e4m3(), Layout::nk},
                     C{Format::affine(4, 64), Layout::kn}, C{Format::mxfp8(), Layout::kn}}) {
    const Format& f = c.f;
    const bool kn = c.layout == Layout::kn;
    const int64_t N = kn ? 296 : 301, K = f.info().family == Family::fp8 ? 2071 : 2304;
    const QuantizedMatrix w = weights(f, N, K, DType::f16, 31, c.layout);
    const test::Dense x = test::random_dense(DType::f16, 77, K, 32);
    std::vector<std::vector<unsigned char>> outs;
    for (int threads : {1, 2}) {
      const ref::Comparison cmp = run(w, x, threads);
      EXPECT_TRUE(cmp.pass) << f.name() << (kn ? " [K, N]" : "") << " threads " << threads
                            << ": rel_l2 " << cmp.rel_l2;
      outs.push_back(amx_y(w, x, threads).bytes);
    }
    EXPECT_EQ(outs[0], outs[1]) << f.name();
  }
}

// Activations far from 1 (bf16 holds f32's range), and non-finite ones, which send the call to
// the f32 path: the result is non-finite exactly where the oracle's is.
TEST(CpuAmxEdges, ExtremeAndNonFiniteActivations) {
  if (!amx_here()) GTEST_SKIP() << "no AMX-BF16 here: " << cpu::cpu_features().describe();
  const Format f = Format::affine(4, 64);
  const int64_t N = 40, K = 512, M = 32;
  const DType t = DType::bf16;
  const QuantizedMatrix w = weights(f, N, K, t, 3);
  test::Dense x = test::random_dense(t, M, K, 5);
  x.set(1 * K + 9, 1e-30f);
  x.set(2 * K + 100, 2.5e4f);
  x.set(3 * K + 7, 1e30f);
  {
    const ref::Comparison c = run(w, x);
    EXPECT_TRUE(c.pass) << "rel_l2 " << c.rel_l2 << ", non-finite " << c.nonfinite;
  }
  x.set(4 * K + 7, std::nanf(""));
  x.set(6 * K + 300, INFINITY);
  x.set(9 * K + 200, -INFINITY);
  const test::Dense y = amx_y(w, x);
  expect_same_classes(y, ref::matmul(x.view(), w));
}

// Weights that decode to infinity (E5M2 code 0x7c) or NaN (0x7f; E4M3 0x7f, 0xff) send their
// task to the f32 path: the results' classes match the oracle's (inf, not the NaN of inf · a zero
// plane).
TEST(CpuAmxEdges, NonFiniteWeights) {
  if (!amx_here()) GTEST_SKIP() << "no AMX-BF16 here: " << cpu::cpu_features().describe();
  const int64_t N = 300, K = 256, M = 40;
  const DType t = DType::f16;
  for (Layout layout : {Layout::nk, Layout::kn})
    for (const bool e4m3 : {false, true}) {  // E4M3 has NaN codes only (0x7f, 0xff)
      QuantizedMatrix w =
          weights(e4m3 ? Format::fp8_e4m3() : Format::fp8_e5m2(), N, K, t, 8, layout);
      auto* codes = reinterpret_cast<uint8_t*>(w.codes);
      auto at = [&](int64_t n, int64_t k) -> uint8_t& {
        return codes[layout == Layout::nk ? n * K + k : k * N + n];
      };
      at(2, 17) = e4m3 ? 0xff : 0x7c;   // +inf (E4M3: NaN), row (column) 2
      at(140, 9) = e4m3 ? 0x7f : 0xfc;  // -inf, another task
      at(141, 30) = 0x7f;               // NaN
      const test::Dense x = test::random_dense(t, M, K, 9);
      const test::Dense y = amx_y(w, x);
      const std::vector<double> want = ref::matmul(x.view(), w);
      expect_same_classes(y, want);
      double num = 0, den = 0;  // the finite results as close as any
      for (int64_t i = 0; i < M * N; ++i) {
        const double v = want[static_cast<std::size_t>(i)], got = y.at(i);
        if (std::isfinite(v) && std::isfinite(got)) num += (got - v) * (got - v), den += v * v;
      }
      EXPECT_LT(std::sqrt(num / den), rel_l2_bound(t));
    }
}

// Grouped experts with bf16 x: an expert with 40 rows runs on AMX (the others, with fewer, on the
// fused or tiled path), each against the oracle.
TEST(CpuAmxEdges, GroupedExperts) {
  const Format f = Format::affine(4, 64);
  const int64_t E = 3, N = 72, K = 512, M = 52;
  const DType t = DType::bf16;
  const QuantizedMatrix stack = test::host_weights(f, t, N, K, Layout::nk, 41, E);
  const test::Dense x = test::random_dense(t, M, K, 42);
  std::vector<int32_t> ids(static_cast<std::size_t>(M));
  for (int64_t i = 0; i < M; ++i)  // expert 1: 40 rows; 0: 9; 2: 3
    ids[static_cast<std::size_t>(i)] = i < 40 ? 1 : (i < 49 ? 0 : 2);
  test::Dense y(t, M, N);
  y.poison();
  Context ctx;
  ctx.kernel = "gather_qmm_avx512";
  if (!cpu::isa_supported(cpu::Isa::avx512)) ctx.kernel = "auto";
  gather_matmul(x.view(), stack, ids.data(), y.mut(), ctx);
  const ref::Comparison c = ref::compare(y.view(), ref::gather_matmul(x.view(), stack, ids), t);
  EXPECT_TRUE(c.pass) << "rel_l2 " << c.rel_l2 << ", non-finite " << c.nonfinite;
}

// f32 x on the codes path: every affine width with groups of 32, 64 and 128 (f32 scales, as x)
// and the GGUF blocks of 32 and K-quant sub-blocks of 32 (q4_0, q4_1, q5_0, q5_1, q8_0, q3_K,
// q4_K, q5_K: the scales from the blocks), N past one 128-row task and ragged, K over two
// K blocks (M = 32; M = 47 and 97 take smaller ones), M ragged for the 32-row blocks and past 128,
// against the oracle at f32's bound; one and two threads give the same bits.
TEST(CpuAmxCodes, MatchesOracle) {
  if (!amx_here()) GTEST_SKIP() << "no AMX-BF16 here: " << cpu::cpu_features().describe();
  std::vector<Format> fs;
  for (Scheme s : {Scheme::q4_0, Scheme::q4_1, Scheme::q5_0, Scheme::q5_1, Scheme::q8_0,
                   Scheme::q3_K, Scheme::q4_K, Scheme::q5_K})
    fs.push_back(Format::gguf(s));
  for (int bits : {2, 3, 4, 5, 6, 8})
    for (int g : {32, 64, 128}) fs.push_back(Format::affine(bits, g));
  const int64_t N = 165, K = 1280;
  for (const Format& f : fs) {
    const QuantizedMatrix w = weights(f, N, K, DType::f32, 11 + static_cast<uint32_t>(f.bits));
    for (int64_t m : {32, 47, 97}) {
      if (f.scheme == Scheme::q3_K && m < cpu::kAmxQ3KMinRows) continue;  // the tiled path's
      const test::Dense x = test::random_dense(DType::f32, m, K, 300 + static_cast<uint32_t>(m));
      const ref::Comparison c = run(w, x);
      EXPECT_TRUE(c.pass) << f.name() << " M=" << m << ": rel_l2 " << c.rel_l2 << " (bound "
                          << rel_l2_bound(DType::f32) << "), non-finite " << c.nonfinite;
      // Two planes of x (16 bits) would leave ~1e-5; three leave ~1e-7.
      EXPECT_LT(c.rel_l2, 1e-6) << f.name() << " M=" << m;
    }
  }
  // Past 128 rows of x (the K block shrinks with M: 1024 at M = 32, 512 at 129 and 160, 384 at
  // 300), with codes read from storage (4/8-bit, E2M1) and decoded (3-bit).
  for (const Format& f : {Format::affine(4, 64), Format::affine(3, 128), Format::affine(8, 128),
                          Format::mxfp4(), Format::gguf(Scheme::q5_K), Format::gguf(Scheme::q3_K)})
    for (int64_t m : {129, 300}) {
      const QuantizedMatrix w = weights(f, N, K, DType::f32, 21);
      const test::Dense x = test::random_dense(DType::f32, m, K, 22);
      const ref::Comparison c = run(w, x);
      EXPECT_TRUE(c.pass) << f.name() << " M=" << m << ": rel_l2 " << c.rel_l2;
      EXPECT_LT(c.rel_l2, 1e-6) << f.name() << " M=" << m;
    }
  // bf16 x takes the codes path up to 512 rows.
  for (const Format& f : {Format::affine(4, 64), Format::affine(8, 128)}) {
    const QuantizedMatrix w = weights(f, N, K, DType::bf16, 23);
    const test::Dense x = test::random_dense(DType::bf16, 300, K, 24);
    const ref::Comparison c = run(w, x);
    EXPECT_TRUE(c.pass) << f.name() << " bf16 M=300: rel_l2 " << c.rel_l2;
  }
  const QuantizedMatrix w = weights(Format::affine(4, 64), 301, 2304, DType::f32, 5);
  for (int64_t m : {77, 160}) {
    const test::Dense x = test::random_dense(DType::f32, m, 2304, 6);
    EXPECT_EQ(amx_y(w, x, 1).bytes, amx_y(w, x, 2).bytes) << "M=" << m;
  }
}

// f32 x far from 1 and non-finite (the call goes to the f32 path), and weights whose scale is
// infinite or NaN or whose fp8 code is NaN (their task goes there): classes as the oracle's.
TEST(CpuAmxCodes, ExtremeAndNonFiniteValues) {
  if (!amx_here()) GTEST_SKIP() << "no AMX-BF16 here: " << cpu::cpu_features().describe();
  const int64_t N = 300, K = 512, M = 40;
  QuantizedMatrix w = weights(Format::affine(4, 64), N, K, DType::f32, 3);
  test::Dense x = test::random_dense(DType::f32, M, K, 5);
  x.set(1 * K + 9, 1e-30f);
  x.set(2 * K + 100, 2.5e4f);
  x.set(3 * K + 7, 1e30f);
  {
    const ref::Comparison c = run(w, x);
    EXPECT_TRUE(c.pass) << "rel_l2 " << c.rel_l2 << ", non-finite " << c.nonfinite;
  }
  auto* scales = reinterpret_cast<float*>(w.scales);
  scales[2 * (K / 64) + 3] = INFINITY;  // row 2
  scales[140 * (K / 64) + 1] = NAN;     // row 140, another task
  expect_same_classes(amx_y(w, x), ref::matmul(x.view(), w));
  x.set(4 * K + 7, std::nanf(""));
  x.set(6 * K + 300, -INFINITY);
  expect_same_classes(amx_y(w, x), ref::matmul(x.view(), w));
  QuantizedMatrix w4 = weights(Format::mxfp4(), N, K, DType::f32, 4);
  reinterpret_cast<uint8_t*>(w4.scales)[141 * (K / 32) + 3] = 0xff;  // a NaN scale, row 141
  const test::Dense x4 = test::random_dense(DType::f32, M, K, 7);
  expect_same_classes(amx_y(w4, x4), ref::matmul(x4.view(), w4));
  // GGUF blocks whose f16 d (or K-quant dmin) is NaN or infinite: their task runs the f32 path.
  const test::Dense xq3 = test::random_dense(DType::f32, cpu::kAmxQ3KMinRows, K, 9);
  for (Scheme s :
       {Scheme::q4_1, Scheme::q5_0, Scheme::q5_1, Scheme::q3_K, Scheme::q4_K, Scheme::q5_K}) {
    QuantizedMatrix wg = weights(Format::gguf(s), N, K, DType::f32, 8);
    auto* codes = reinterpret_cast<uint8_t*>(wg.codes);
    const bool kq = s == Scheme::q4_K || s == Scheme::q5_K;
    const int64_t row = static_cast<int64_t>(wg.footprint().code_bytes) / N;
    const int64_t block = s == Scheme::q4_1   ? 20
                          : s == Scheme::q5_0 ? 22
                          : s == Scheme::q5_1 ? 24
                          : s == Scheme::q3_K ? 110
                          : s == Scheme::q4_K ? 144
                                              : 176;
    const int64_t d_at = s == Scheme::q3_K ? 108 : 0;  // q3_K's d ends its block
    const uint16_t inf = 0x7c00, nan = 0x7e00;
    std::memcpy(codes + 2 * row + block + d_at, &nan, 2);       // row 2: the second block's d
    std::memcpy(codes + 140 * row + (kq ? 2 : d_at), &inf, 2);  // row 140: dmin, or d
    const test::Dense& xg = s == Scheme::q3_K ? xq3 : x4;       // q3_K's codes path starts at 128
    expect_same_classes(amx_y(wg, xg), ref::matmul(xg.view(), wg));
  }
}

// GGUF q4_0 / q8_0 on two planes: a block whose f16 d is infinite or NaN sends its task to the
// f32 path, so the classes are the oracle's (q8_0's row 5
// holds one positive value and meets positive x: +inf, where the two planes of inf would give
// inf + NaN; q4_0 takes a NaN there, as the f32 path computes d·q - 8d, inf - inf for an
// infinite d where the oracle's d·(q - 8) is inf); the rest as close as any.
TEST(CpuAmxEdges, NonFiniteGgufScales) {
  if (!amx_here()) GTEST_SKIP() << "no AMX-BF16 here: " << cpu::cpu_features().describe();
  const int64_t N = 300, K = 256, M = 40;
  const DType t = DType::bf16;
  for (Scheme s : {Scheme::q4_0, Scheme::q8_0}) {
    QuantizedMatrix w = weights(Format::gguf(s), N, K, t, 12);
    auto* codes = reinterpret_cast<uint8_t*>(w.codes);
    const int64_t block = s == Scheme::q4_0 ? 18 : 34, row = K / 32 * block;
    const uint16_t inf = 0x7c00, nan = 0x7e00;
    uint8_t* b = codes + 5 * row + 2 * block;  // row 5, elements 64..95: inf times q = 1
    std::memcpy(b, s == Scheme::q8_0 ? &inf : &nan, 2);
    std::memset(b + 2, s == Scheme::q4_0 ? 0x99 : 0x01, static_cast<std::size_t>(block - 2));
    std::memcpy(codes + 200 * row + 7 * block, &nan, 2);  // another task
    test::Dense x = test::random_dense(t, M, K, 13);
    for (int64_t m = 0; m < M; ++m)
      for (int64_t k = 64; k < 96; ++k) x.set(m * K + k, std::fabs(x.at(m * K + k)));
    const test::Dense y = amx_y(w, x);
    const std::vector<double> want = ref::matmul(x.view(), w);
    expect_same_classes(y, want);
    double num = 0, den = 0;
    for (int64_t i = 0; i < M * N; ++i) {
      const double v = want[static_cast<std::size_t>(i)], got = y.at(i);
      if (std::isfinite(v) && std::isfinite(got)) num += (got - v) * (got - v), den += v * v;
    }
    EXPECT_LT(std::sqrt(num / den), rel_l2_bound(t)) << Format::gguf(s).name();
  }
}

// W in one bf16 plane (mxfp4, mxfp8, nvfp4, e4m3 per channel and per tensor, e5m2), against
// every x dtype, W [N, K] (M = 32) and [K, N] (M = 77), nvfp4's global scale not 1. Then E8M0
// scales at the ends of the plane's range (values within [2^-65, 2^66], so that the products with
// x's smaller planes stay normal: the tile unit flushes subnormal ones; mxfp4 takes 63..190,
// mxfp8 71..184): all of a matrix's scales at 5..6, 63..64 or 190..191, the first task's rows one
// step inward; a task with a scale past its format's range runs the f32 path. A flushed product or
// a lost task would show.
TEST(CpuAmxOnePlane, MxFormatsAndScalesAtTheEdges) {
  if (!amx_here()) GTEST_SKIP() << "no AMX-BF16 here: " << cpu::cpu_features().describe();
  const int64_t N = 300, K = 512;
  for (const Format& f : {Format::mxfp4(), Format::mxfp8(), Format::nvfp4(), Format::fp8_e4m3(),
                          Format::fp8_e4m3(Granularity::tensor), Format::fp8_e5m2()})
    for (DType t : {DType::f32, DType::bf16, DType::f16})
      for (int64_t m : {32, 77}) {
        const bool kn = m == 77;
        QuantizedMatrix w =
            weights(f, kn ? kn_columns(f.bits) : N, K, t, 31, kn ? Layout::kn : Layout::nk);
        if (f.scheme == Scheme::nvfp4) w.global_scale = *w.global_scale * 1.5f;  // on the sums
        const test::Dense x = test::random_dense(t, m, K, 32 + static_cast<uint32_t>(m));
        const ref::Comparison c = run(w, x);
        EXPECT_TRUE(c.pass) << f.name() << " " << dtype_name(t) << " M=" << m
                            << (kn ? " [K, N]" : " [N, K]") << ": rel_l2 " << c.rel_l2;
        if (t == DType::f32) {
          EXPECT_LT(c.rel_l2, 1e-6) << f.name() << " M=" << m;
        }
      }
  const int64_t ng = K / 32;
  const test::Dense x = test::random_dense(DType::f32, 40, K, 34);
  for (const Format& f : {Format::mxfp4(), Format::mxfp8()})
    for (int low : {5, 63, 190}) {  // E low or low + 1: the first task's rows one step inward
      QuantizedMatrix w = weights(f, N, K, DType::f32, 33);
      auto* e = reinterpret_cast<uint8_t*>(w.scales);
      const int inward = low == 63 ? 1 : low == 190 ? -1 : 0;
      for (int64_t r = 0; r < N; ++r)
        for (int64_t g = 0; g < ng; ++g)
          e[r * ng + g] = static_cast<uint8_t>(low + (r < 128 ? inward : 0) + (r + g) % 2);
      const ref::Comparison c = run(w, x);
      EXPECT_TRUE(c.pass) << f.name() << " scales from " << low << ": rel_l2 " << c.rel_l2;
      EXPECT_LT(c.rel_l2, 1e-6) << f.name() << " scales from " << low;
    }
}

// The rule, with or without AMX: a named kernel that cannot run says why.
TEST(CpuAmxEdges, DeclinesWithAReason) {
  const Format f = Format::affine(4, 64);
  auto expect_declines = [](const QuantizedMatrix& w, const test::Dense& x,
                            const std::string& why) {
    test::Dense y(x.dtype, x.rows, w.n);
    Context ctx;
    ctx.kernel = kAmx;
    test::expect_error([&] { matmul(x.view(), w, y.mut(), ctx); }, why);
  };
  const test::Dense xb = test::random_dense(DType::bf16, 32, 256, 2);
  // Without AMX (or AVX-512) the reason names what is missing; the kernel's name is there too.
  const bool here = amx_here();
  const test::Dense x32 = test::random_dense(DType::f32, 32, 256, 2);
  expect_declines(weights(Format::gguf(Scheme::q6_K), 64, 256, DType::f32, 4), x32,
                  here ? "f32 activations: affine and the GGUF blocks of 32" : kAmx);
  expect_declines(weights(f, 64, 256, DType::f32, 4), test::random_dense(DType::f32, 1025, 256, 3),
                  here ? "M <= 1024" : kAmx);
  expect_declines(weights(f, 64, 256, DType::f32, 4, Layout::kn), x32,
                  here ? "q3_K from M = 128) in [N, K]" : kAmx);
  // q3_K at M = 32 (the tiled path's until kAmxQ3KMinRows).
  expect_declines(weights(Format::gguf(Scheme::q3_K), 64, 256, DType::f32, 4), x32,
                  here ? "q3_K from M = 128" : kAmx);
  // Turned off, the kernel declines (and auto takes the tiled path).
  cpu::disable_amx(true);
  expect_declines(weights(f, 64, 256, DType::bf16, 4), xb, here ? "AMX off" : kAmx);
  cpu::disable_amx(false);
}

}  // namespace
}  // namespace quanta
