// One timed bench row end to end on the CPU: the header and the row serialise to JSON that
// parses back with every field the issue asks for, and the derived numbers agree.
#include <gtest/gtest.h>

#include <cmath>

#include "output.hpp"
#include "runner.hpp"

namespace quanta::bench {
namespace {

TEST(BenchJson, RowAndHeaderCarryEveryField) {
  const KernelEntry* k = nullptr;
  for (const KernelEntry* e : all_kernels())
    if (e->op == Op::matmul && e->device == Location::host) k = e;  // the last: the fallback
  ASSERT_NE(k, nullptr);
  std::unique_ptr<Device> device = make_device("cpu", 2);
  RunOptions o;
  o.suite = "quick";
  o.ms = std::vector<int64_t>{1};
  o.automatic = false;  // a named kernel's row (quick defaults to the selector's pick)
  o.filter = "^matmul/nk/" + std::string(k->name) + "/affine-4b-g64/f32@quick";
  o.timing.min_seconds = 0;
  Runner runner(*device, o);
  const std::vector<RowPlan> rows = runner.plan();
  ASSERT_EQ(rows.size(), 1u);
  const RunHeader& h = runner.start();
  const Row row = runner.run(rows[0]);
  ASSERT_TRUE(row.pass()) << row.error << row.check.error;

  const nlohmann::json hj = nlohmann::json::parse(header_json(h).dump());
  for (const char* f : {"type", "device", "device_name", "roof", "build_type", "git_revision",
                        "suite", "threads", "cache_bytes", "started"})
    EXPECT_TRUE(hj.contains(f)) << f;
  EXPECT_EQ(hj["device"], "cpu");
  EXPECT_GT(hj["roof"]["read_gbps"].get<double>(), 0);
  EXPECT_GT(hj["roof"]["compute_tflops"].get<double>(), 0);
  EXPECT_GT(hj["cache_bytes"].get<double>(), 0);

  const nlohmann::json j = nlohmann::json::parse(row_json(row, h).dump());
  for (const char* f :
       {"op",     "kernel", "format", "bits",     "group",    "dtype",       "device",    "M",
        "N",      "K",      "pass",   "max_abs",  "rel_l2",   "cosine",      "median_us", "min_us",
        "max_us", "gbps",   "tflops", "roof_pct", "baseline", "baseline_us", "speedup"}) {
    ASSERT_TRUE(j.contains(f)) << f;
    EXPECT_FALSE(j[f].is_null()) << f;  // a timed, passing CPU row has every value
  }
  EXPECT_EQ(j["op"], "matmul");
  EXPECT_EQ(j["kernel"], k->name);
  EXPECT_EQ(j["format"], "affine-4b-g64");
  EXPECT_EQ(j["bits"], 4);
  EXPECT_EQ(j["group"], 64);
  EXPECT_EQ(j["dtype"], "f32");
  EXPECT_EQ(j["device"], "cpu");
  EXPECT_EQ(j["M"], 1);
  EXPECT_EQ(j["N"], 1024);
  EXPECT_EQ(j["K"], 2048);
  EXPECT_EQ(j["pass"], true);
  EXPECT_GE(j["runs"].get<int>(), 20);
  EXPECT_GE(j["copies"].get<int>(), 1);
  const double med = j["median_us"], mn = j["min_us"], mx = j["max_us"];
  EXPECT_LE(mn, med);
  EXPECT_LE(med, mx);
  EXPECT_NEAR(j["gbps"].get<double>(), j["bytes"].get<double>() / (med * 1e-6) / 1e9, 1e-9);
  EXPECT_NEAR(j["tflops"].get<double>(), 2.0 * 1024 * 2048 / (med * 1e-6) / 1e12, 1e-12);
  EXPECT_NEAR(j["speedup"].get<double>(), j["baseline_us"].get<double>() / med, 1e-9);
  EXPECT_EQ(j["baseline"], "openblas sgemv f32");
  EXPECT_GT(j["roof_pct"].get<double>(), 0);
}

// A timed "auto" row picks its kernel for the weights it runs on (the runner places them
// first), and names the kernel the library picks for them.
TEST(BenchJson, TimedAutoRowNamesThePick) {
  std::unique_ptr<Device> device = make_device("cpu", 2);
  RunOptions o;
  o.suite = "quick";
  o.ms = std::vector<int64_t>{3};
  o.filter = "^matmul/nk/auto/q4_K/f32@quick";
  o.timing.min_seconds = 0;
  Runner runner(*device, o);
  const std::vector<RowPlan> rows = runner.plan();
  ASSERT_EQ(rows.size(), 1u);
  runner.start();
  const Row row = runner.run(rows[0]);
  ASSERT_TRUE(row.pass()) << row.error << row.check.error;
  EXPECT_TRUE(row.timed);
  const ProblemSize& s = rows[0].problem;
  const ConstMatrixView x{nullptr, s.dtype, s.m, s.k, Location::host};
  QuantizedMatrix w;
  w.format = s.format;
  w.n = s.n;
  w.k = s.k;
  EXPECT_EQ(row.kernel, select_kernel(matmul_problem(Op::matmul, x, w), "auto").name);
}

TEST(BenchJson, MissingValuesAreNull) {
  Row r;
  r.plan.spec =
      BenchSpec{Op::matmul, Layout::nk, nullptr, Format::mxfp4(), DType::bf16, Location::host};
  r.plan.problem = r.plan.spec.problem(1, 256, 512, 1);
  r.check.rel_l2 = NAN;
  const nlohmann::json j = nlohmann::json::parse(row_json(r, RunHeader{}).dump());
  EXPECT_TRUE(j["median_us"].is_null());
  EXPECT_TRUE(j["speedup"].is_null());
  EXPECT_TRUE(j["rel_l2"].is_null());
  EXPECT_EQ(j["pass"], false);
  EXPECT_EQ(j["requested"], "auto");
}

}  // namespace
}  // namespace quanta::bench
