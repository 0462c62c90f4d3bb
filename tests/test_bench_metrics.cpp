// The bench runner's arithmetic: bytes per format (codes + scales + biases + x + y), rates,
// % of roof, speedup, rotation and summaries, and the suite / option parsing.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <memory>

#include "device.hpp"
#include "metrics.hpp"
#include "quanta/error.hpp"
#include "suites.hpp"

namespace quanta::bench {
namespace {

ProblemSize mm(Format f, DType t, int64_t m, int64_t n, int64_t k) {
  ProblemSize p;
  p.op = Op::matmul;
  p.format = f;
  p.dtype = t;
  p.m = m;
  p.n = n;
  p.k = k;
  return p;
}

// Expected bytes written out by hand from each format's definition, not from footprint().
TEST(BenchMetrics, BytesPerFormatIncludeScalesAndBiases) {
  const std::size_t N = 4096, K = 4096, NK = N * K;
  // affine 4-bit g64, bf16: codes N·K/2, one bf16 scale and one bf16 bias per 64 weights.
  EXPECT_EQ(weight_bytes(mm(Format::affine(4, 64), DType::bf16, 1, N, K)),
            NK / 2 + NK / 64 * 2 + NK / 64 * 2);
  // affine scales follow the activation dtype: f32 doubles them.
  EXPECT_EQ(weight_bytes(mm(Format::affine(4, 64), DType::f32, 1, N, K)), NK / 2 + NK / 64 * 4 * 2);
  EXPECT_EQ(weight_bytes(mm(Format::affine(3, 32), DType::f16, 1, N, K)),
            NK * 3 / 8 + NK / 32 * 2 * 2);
  // mxfp4: E2M1 nibbles + one E8M0 byte per 32; nvfp4: + one E4M3 byte per 16.
  EXPECT_EQ(weight_bytes(mm(Format::mxfp4(), DType::bf16, 1, N, K)), NK / 2 + NK / 32);
  EXPECT_EQ(weight_bytes(mm(Format::nvfp4(), DType::bf16, 1, N, K)), NK / 2 + NK / 16);
  EXPECT_EQ(weight_bytes(mm(Format::mxfp8(), DType::bf16, 1, N, K)), NK + NK / 32);
  // fp8: one byte per weight, f32 per output channel or per tensor.
  EXPECT_EQ(weight_bytes(mm(Format::fp8_e4m3(), DType::bf16, 1, N, K)), NK + 4 * N);
  EXPECT_EQ(weight_bytes(mm(Format::fp8_e5m2(Granularity::tensor), DType::f16, 1, N, K)), NK + 4);
  // GGUF: whole blocks (ggml-common.h sizes), scales inside.
  EXPECT_EQ(weight_bytes(mm(Format::gguf(Scheme::q4_0), DType::f32, 1, N, K)), NK / 32 * 18);
  EXPECT_EQ(weight_bytes(mm(Format::gguf(Scheme::q8_0), DType::f32, 1, N, K)), NK / 32 * 34);
  EXPECT_EQ(weight_bytes(mm(Format::gguf(Scheme::q4_K), DType::f32, 1, N, K)), NK / 256 * 144);
  EXPECT_EQ(weight_bytes(mm(Format::gguf(Scheme::q6_K), DType::f32, 1, N, K)), NK / 256 * 210);
}

TEST(BenchMetrics, BytesMovedAddActivationsAndOutputs) {
  const std::size_t M = 8, N = 1024, K = 2048;
  const ProblemSize p = mm(Format::mxfp4(), DType::bf16, M, N, K);
  EXPECT_EQ(bytes_moved(p), N * K / 2 + N * K / 32 + M * K * 2 + M * N * 2);
  const ProblemSize f = mm(Format::mxfp4(), DType::f32, M, N, K);
  EXPECT_EQ(bytes_moved(f), N * K / 2 + N * K / 32 + M * K * 4 + M * N * 4);
  EXPECT_DOUBLE_EQ(flops(p), 2.0 * M * N * K);
}

TEST(BenchMetrics, GatherReadsOnlyTouchedExperts) {
  ProblemSize p = mm(Format::gguf(Scheme::q4_0), DType::f32, 3, 256, 1024);
  p.op = Op::gather_matmul;
  p.experts = 8;
  const std::size_t one = 256 * 1024 / 32 * 18;
  EXPECT_EQ(experts_touched(p), 3);
  EXPECT_EQ(bytes_moved(p), 3 * one + 3 * 1024 * 4 + 3 * 256 * 4 + 3 * 4);
  p.m = 20;  // more rows than experts: every expert once
  EXPECT_EQ(experts_touched(p), 8);
  EXPECT_EQ(bytes_moved(p), 8 * one + 20 * 1024 * 4 + 20 * 256 * 4 + 20 * 4);
  for (int64_t i = 0; i < 20; ++i) EXPECT_EQ(expert_of_row(i, 8), i % 8);
  // Shifting by the touched count gives disjoint expert sets: 3 rows, shifts 0, 3 -> {0,1,2},
  // {3,4,5}.
  EXPECT_EQ(expert_of_row(0, 8, 3), 3);
  EXPECT_EQ(expert_of_row(2, 8, 3), 5);
  EXPECT_EQ(expert_of_row(2, 8, 6), 0);
}

TEST(BenchMetrics, DequantizeReadsCodesAndWritesDenseWeights) {
  ProblemSize p = mm(Format::affine(8, 128), DType::f16, 0, 512, 1024);
  p.op = Op::dequantize;
  const std::size_t NK = 512 * 1024;
  EXPECT_EQ(bytes_moved(p), NK + NK / 128 * 2 * 2 + NK * 2);
  EXPECT_EQ(flops(p), 0.0);
}

TEST(BenchMetrics, RatesRoofAndSpeedup) {
  EXPECT_DOUBLE_EQ(gbps(2e9, 0.5), 4.0);
  EXPECT_DOUBLE_EQ(tflops(3e12, 1.5), 2.0);
  const Roof roof{100.0, 2.0};  // 100 GB/s, 2 TFLOP/s
  // Memory bound: 1 GB in 20 ms; the bound is 10 ms -> 50 %.
  EXPECT_NEAR(roof_pct(1e9, 1e9, 0.020, roof), 50.0, 1e-9);
  // Compute bound: 4 TFLOP in 4 s; the bound is 2 s (bytes would take 10 ms) -> 50 %.
  EXPECT_NEAR(roof_pct(1e9, 4e12, 4.0, roof), 50.0, 1e-9);
  // No flops (dequantize): bytes only.
  EXPECT_NEAR(roof_pct(1e9, 0, 0.010, roof), 100.0, 1e-9);
  EXPECT_TRUE(std::isnan(roof_pct(1e9, 1e9, 0.0, roof)));
  EXPECT_TRUE(std::isnan(roof_pct(1e9, 1e9, 1.0, Roof{})));
  EXPECT_TRUE(std::isnan(gbps(1e9, 0)));
  EXPECT_EQ(roof_bound(1e9, 1e9, roof), "memory");
  EXPECT_EQ(roof_bound(1e9, 4e12, roof), "compute");
  EXPECT_EQ(roof_bound(1e9, 0, roof), "memory");
  EXPECT_EQ(roof_bound(1e9, 1e9, Roof{}), "");
  EXPECT_DOUBLE_EQ(speedup(3e-3, 1e-3), 3.0);  // baseline 3 ms, kernel 1 ms
  EXPECT_DOUBLE_EQ(speedup(1e-3, 4e-3), 0.25);
  EXPECT_TRUE(std::isnan(speedup(0, 1e-3)));
  EXPECT_TRUE(std::isnan(speedup(NAN, 1e-3)));
}

TEST(BenchMetrics, RotationExceedsTheCacheFourTimes) {
  const std::size_t MiB = 1 << 20;
  ASSERT_EQ(kRotationFactor, 4u);
  EXPECT_EQ(rotation_copies(10 * MiB, 32 * MiB), 13);  // 130 MiB >= 128 MiB
  EXPECT_EQ(rotation_copies(64 * MiB, 32 * MiB), 2);
  EXPECT_EQ(rotation_copies(500 * MiB, 60 * MiB), 1);
  EXPECT_EQ(rotation_copies(0, 32 * MiB), 1);
  for (std::size_t b : {1 * MiB, 3 * MiB + 5, 33 * MiB})
    EXPECT_GE(rotation_copies(b, 32 * MiB) * b, 128 * MiB);
}

TEST(BenchMetrics, SummaryIsMedianMinMax) {
  const Timing odd = summarize({5, 1, 3, 9, 7}, 3);
  EXPECT_EQ(odd.median, 5);
  EXPECT_EQ(odd.min, 1);
  EXPECT_EQ(odd.max, 9);
  EXPECT_EQ(odd.runs, 5);
  EXPECT_EQ(odd.copies, 3);
  EXPECT_EQ(summarize({4, 1, 3, 2}, 1).median, 2.5);
}

TEST(BenchTiming, CpuTimerRunsEnoughAndRotatesCopies) {
  std::unique_ptr<Device> cpu = make_cpu_device(1);
  std::vector<int> seen;
  TimingPolicy p;
  p.min_runs = 20;
  p.min_seconds = 0;
  p.warmup_runs = 3;
  p.warmup_seconds = 0;
  const Samples timed = cpu->time([&](int c) { seen.push_back(c); }, 7, p);
  const std::vector<double>& s = timed.seconds;
  EXPECT_FALSE(timed.over_budget);
  EXPECT_EQ(s.size(), 20u);
  ASSERT_EQ(seen.size(), 23u);  // warm-up runs included
  for (std::size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i], static_cast<int>(i % 7));
  for (double t : s) EXPECT_GE(t, 0.0);

  p.min_seconds = 0.05;  // a time floor adds runs
  int calls = 0;
  const auto busy = [&](int) {
    ++calls;
    const auto t0 = std::chrono::steady_clock::now();
    while (std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(1)) {
    }
  };
  const std::vector<double> floor = cpu->time(busy, 1, p).seconds;
  EXPECT_GE(floor.size(), 20u);
  double total = 0;
  for (double t : floor) total += t;
  EXPECT_GE(total, 0.05);

  p.max_row_seconds = 0.01;  // 23 runs of >= 1 ms exceed 10 ms: one probe call, untimed
  calls = 0;
  const Samples probe = cpu->time(busy, 1, p);
  EXPECT_TRUE(probe.over_budget);
  EXPECT_EQ(probe.seconds.size(), 1u);
  EXPECT_EQ(calls, 1);
}

TEST(BenchSuites, NamesShapesAndLists) {
  for (const std::string& name : suite_names()) {
    const auto s = find_suite(name);
    ASSERT_TRUE(s) << name;
    EXPECT_FALSE(s->shapes.empty()) << name;
    for (const Shape& sh : s->shapes) EXPECT_FALSE(sh.source.empty()) << sh.label;
  }
  EXPECT_FALSE(find_suite("nope"));
  const auto seeds = find_suite("seeds");
  std::vector<std::pair<int64_t, int64_t>> nk;
  for (const Shape& sh : seeds->shapes) nk.emplace_back(sh.n, sh.k);
  EXPECT_EQ(nk, (std::vector<std::pair<int64_t, int64_t>>{
                    {4096, 4096}, {5120, 5120}, {14336, 5120}, {5120, 14336}, {27648, 5120}}));
  EXPECT_EQ(default_ms(), (std::vector<int64_t>{1, 2, 4, 8, 16, 32, 64, 128, 512, 2048}));
  EXPECT_EQ(parse_m_list("1,3,2048"), (std::vector<int64_t>{1, 3, 2048}));
  EXPECT_THROW(parse_m_list("1,,2"), Error);
  EXPECT_THROW(parse_m_list("0"), Error);
  EXPECT_THROW(parse_m_list("4x"), Error);
  EXPECT_EQ(parse_dtype_list("bf16,f32"), (std::vector<DType>{DType::bf16, DType::f32}));
  EXPECT_THROW(parse_dtype_list("f64"), Error);
}

}  // namespace
}  // namespace quanta::bench
