// The bench runner's check path: real kernels pass against the fp64 oracle; deliberately wrong
// kernels (a perturbed output, an unwritten element, a NaN, a throw) fail, both through
// run_check and through a Runner row; the registry covers every CPU kernel table entry.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <set>

#include "check.hpp"
#include "cpu/isa.hpp"
#include "cuda/device_pack.hpp"
#include "format/dense.hpp"
#include "quanta/error.hpp"
#include "runner.hpp"
#include "spec.hpp"

namespace quanta::bench {
namespace {

// The portable fallback of an op: the last host entry of its table, which takes every format,
// layout and M (faster kernels come first and may decline).
const KernelEntry& fallback(Op op) {
  const KernelEntry* last = nullptr;
  for (const KernelEntry* e : all_kernels())
    if (e->op == op && e->device == Location::host) last = e;
  if (!last) throw Error("no host kernel");
  return *last;
}

BenchSpec spec_of(Op op, Format f, DType t, Layout l = Layout::nk) {
  return BenchSpec{op, l, &fallback(op), f, t, Location::host};
}

Device& cpu() {
  static std::unique_ptr<Device> d = make_cpu_device(2);
  return *d;
}

CheckResult check(const BenchSpec& s, int64_t m, int64_t n, int64_t k, int64_t experts,
                  const Invoker& inv = invoke_public_op) {
  const ProblemSize full = s.problem(m, n, k, experts);
  return run_check(cpu(), s, *s.entry, check_shape(s, s.entry, full), inv);
}

// Runs the real kernel, then damages the output with `damage(y, element count)`.
template <class F>
Invoker damaging(F damage) {
  return [damage](const BenchSpec& s, std::string_view k, const Operands& o, const Context& c) {
    invoke_public_op(s, k, o, c);
    damage(o.y, o.y.rows * o.y.cols);
  };
}

TEST(BenchCheck, RealKernelsPass) {
  struct Case {
    Op op;
    Format f;
    DType t;
    Layout l;
    int64_t m, experts;
  };
  const Case cases[] = {
      {Op::matmul, Format::affine(4, 64), DType::f32, Layout::nk, 1, 1},
      {Op::matmul, Format::nvfp4(), DType::bf16, Layout::nk, 8, 1},
      {Op::matmul, Format::gguf(Scheme::q4_K), DType::f16, Layout::nk, 3, 1},
      {Op::matmul, Format::affine(3, 32), DType::f32, Layout::kn, 2, 1},
      {Op::gather_matmul, Format::mxfp4(), DType::f32, Layout::nk, 16, 8},
      {Op::dequantize, Format::fp8_e4m3(), DType::bf16, Layout::nk, 0, 1},
      {Op::dequantize, Format::affine(5, 32), DType::f16, Layout::kn, 0, 1},
  };
  for (const Case& c : cases) {
    const BenchSpec s = spec_of(c.op, c.f, c.t, c.l);
    const CheckResult r = check(s, c.m, 2048, 2048, c.experts);
    EXPECT_TRUE(r.pass) << s.id() << " rel_l2 " << r.rel_l2 << " " << r.error;
    EXPECT_LE(r.rel_l2, rel_l2_bound(c.t));
    EXPECT_GT(r.cosine, 0.999);
    EXPECT_EQ(r.nonfinite, 0);
    EXPECT_TRUE(r.error.empty());
  }
}

TEST(BenchCheck, CheckShapeIsSmallAndOfTheSameKind) {
  const BenchSpec s = spec_of(Op::matmul, Format::affine(4, 64), DType::bf16);
  const ProblemSize big = s.problem(2048, 14336, 4096, 1);
  const ProblemSize c = check_shape(s, s.entry, big);
  EXPECT_EQ(c.m, 128);  // prefill regime kept, capped
  EXPECT_EQ(c.n, 264);  // odd-sized first: tails get exercised
  EXPECT_EQ(c.k, 768);
  EXPECT_EQ(check_shape(s, s.entry, s.problem(3, 14336, 4096, 1)).m, 3);
  // [K, N] 3-bit needs N * 3 % 32 == 0: 264 fails, 256 fits.
  const BenchSpec kn = spec_of(Op::matmul, Format::affine(3, 64), DType::f32, Layout::kn);
  EXPECT_EQ(check_shape(kn, kn.entry, kn.problem(1, 4096, 4096, 1)).n, 256);
  const BenchSpec g = spec_of(Op::gather_matmul, Format::mxfp4(), DType::f32);
  EXPECT_EQ(check_shape(g, g.entry, g.problem(64, 768, 2048, 128)).experts, 4);

  // A kernel's own M range and rule bound its check problem.
  const KernelEntry narrow{"matmul_fake_m4_16",
                           Op::matmul,
                           Location::host,
                           4,
                           16,
                           [](const Problem& p) {
                             return p.k % 1024 ? std::string("needs K % 1024 == 0") : std::string();
                           },
                           nullptr,
                           nullptr,
                           "test"};
  const ProblemSize n1 = check_shape(s, &narrow, s.problem(1, 4096, 4096, 1));
  EXPECT_EQ(n1.m, 4);
  EXPECT_EQ(n1.k, 1024);  // 768 declined
  EXPECT_EQ(n1.n, 256);
  EXPECT_EQ(check_shape(s, &narrow, s.problem(2048, 4096, 4096, 1)).m, 16);
  EXPECT_EQ(check_shape(s, &narrow, s.problem(9, 4096, 4096, 1)).m, 9);
}

TEST(BenchCheck, WrongKernelsFail) {
  const BenchSpec s = spec_of(Op::matmul, Format::affine(4, 64), DType::f32);
  // Every output 0.1% too large: far outside the f32 bound of 1e-5.
  const CheckResult scaled = check(s, 4, 4096, 4096, 1, damaging([](MatrixView y, int64_t n) {
                                     for (int64_t i = 0; i < n; ++i) {
                                       auto* p = static_cast<float*>(y.data) + i;
                                       *p *= 1.001f;
                                     }
                                   }));
  EXPECT_FALSE(scaled.pass);
  EXPECT_NEAR(scaled.rel_l2, 1e-3, 1e-4);

  // One element never written: the NaN poison stays and fails the row.
  const CheckResult unwritten =
      check(s, 4, 4096, 4096, 1,
            [](const BenchSpec& sp, std::string_view k, const Operands& o, const Context& c) {
              const float last = static_cast<float*>(o.y.data)[o.y.rows * o.y.cols - 1];
              invoke_public_op(sp, k, o, c);
              static_cast<float*>(o.y.data)[o.y.rows * o.y.cols - 1] = last;  // restore the poison
            });
  EXPECT_FALSE(unwritten.pass);
  EXPECT_EQ(unwritten.nonfinite, 1);

  // A NaN in the output never passes, however small the rest of the error.
  const CheckResult nan =
      check(s, 1, 4096, 4096, 1,
            damaging([](MatrixView y, int64_t) { static_cast<float*>(y.data)[0] = NAN; }));
  EXPECT_FALSE(nan.pass);

  // A kernel that throws fails with its message.
  const CheckResult thrown = check(
      s, 1, 4096, 4096, 1, [](const BenchSpec&, std::string_view, const Operands&, const Context&) {
        throw Error("[test] kernel exploded");
      });
  EXPECT_FALSE(thrown.pass);
  EXPECT_NE(thrown.error.find("exploded"), std::string::npos);

  // The bound is the dtype's: a 0.1% error fails f32 but is inside bf16's 1e-2.
  const BenchSpec b = spec_of(Op::matmul, Format::affine(4, 64), DType::bf16);
  const CheckResult bf =
      check(b, 2, 4096, 4096, 1, damaging([](MatrixView y, int64_t n) {
              for (int64_t i = 0; i < n; ++i)
                dense::store(y.data, y.dtype, static_cast<std::size_t>(i),
                             dense::load(y.data, y.dtype, static_cast<std::size_t>(i)) * 1.001f);
            }));
  EXPECT_TRUE(bf.pass) << bf.rel_l2;
}

TEST(BenchCheck, RunnerShowsAWrongKernelAsFailed) {
  const KernelEntry& k = fallback(Op::matmul);
  RunOptions o;
  o.suite = "quick";
  o.check_only = true;
  o.ms = std::vector<int64_t>{1};
  o.filter = "^matmul/nk/" + std::string(k.name) + "/affine-4b-g64/f32@";
  Runner runner(cpu(), o);
  const std::vector<RowPlan> rows = runner.plan();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_TRUE(runner.run(rows[0]).pass());

  Runner broken(cpu(), o);
  broken.set_invoker(damaging([](MatrixView y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) static_cast<float*>(y.data)[i] += 1.0f;
  }));
  const Row r = broken.run(rows[0]);
  EXPECT_FALSE(r.pass());
  EXPECT_EQ(r.kernel, k.name);
}

// A device matrix of `spec` at `size` as the selector sees it (no buffers: selection only).
QuantizedMatrix device_weights(const BenchSpec& spec, const ProblemSize& size) {
  QuantizedMatrix w;
  w.format = spec.format;
  w.layout = spec.layout;
  w.scale_dtype = spec.dtype;
  w.location = Location::device;
  w.n = size.n;
  w.k = size.k;
  return w;
}

// A timed "auto" row picks for the weights it runs on, as the library does: a device pack from
// quanta::prepack moves int4 g64 at M = 64 on 14336 x 5120 from qmm_affine_wgrf to the packed
// qmm_affine_wgmma (the bench had named and forced qmm_affine_wgrf on packed weights: 1.3x
// slower on the H200). Selection only: needs no GPU.
TEST(BenchCheck, AutoPicksForThePlacedWeights) {
  if (cuda::kernels().empty()) GTEST_SKIP() << "this build has no CUDA kernel table";
  const BenchSpec spec{Op::matmul, Layout::nk,      nullptr, Format::affine(4, 64),
                       DType::f16, Location::device};
  const ProblemSize size = spec.problem(64, 14336, 5120, 1);
  QuantizedMatrix w = device_weights(spec, size);
  const std::string_view unpacked = resolve_kernel(spec, size).name;
  EXPECT_EQ(unpacked, "qmm_affine_wgrf");
  EXPECT_EQ(resolve_kernel(spec, size, &w).name, unpacked);
  w.device_pack = std::make_shared<const DevicePack>();
  EXPECT_EQ(resolve_kernel(spec, size, &w).name, "qmm_affine_wgmma");
  // A pack made for f16 scales does not serve bf16 x: the unpacked pick again.
  BenchSpec bf16 = spec;
  bf16.dtype = DType::bf16;
  EXPECT_EQ(resolve_kernel(bf16, bf16.problem(64, 14336, 5120, 1), &w).name, unpacked);
}

// A kernel that needs the device pack (qmm_affine_repack on a [K, N] matrix's [N, K] copy) is
// checked on small weights that get a pack too (the check places them as the row's): without
// the row's `packed` no small problem passes its rule, and the check fell back to the full shape.
TEST(BenchCheck, PackedRowsCheckOnSmallPackedWeights) {
  if (cuda::kernels().empty()) GTEST_SKIP() << "this build has no CUDA kernel table";
  const BenchSpec spec{Op::matmul, Layout::kn,      nullptr, Format::affine(4, 64),
                       DType::f16, Location::device};
  const ProblemSize full = spec.problem(16, 14336, 5120, 1);
  QuantizedMatrix w = device_weights(spec, full);
  w.device_pack = std::make_shared<const DevicePack>();
  ASSERT_TRUE(row_problem(spec, full, &w).device_packed);
  const KernelEntry& k = resolve_kernel(spec, full, &w);
  ASSERT_EQ(k.name, "qmm_affine_repack");
  EXPECT_EQ(check_shape(spec, &k, full).n, full.n);
  const ProblemSize c = check_shape(spec, &k, full, true);
  EXPECT_EQ(c.n, 256);  // 264 is not a whole number of 32-code chunks
  EXPECT_EQ(c.k, 1024);
  EXPECT_EQ(c.m, 16);
}

TEST(BenchRegistry, EveryHostKernelHasSpecs) {
  RegistryOptions o;
  const std::vector<BenchSpec> specs = registered_specs(o);
  std::set<std::string_view> covered;
  std::set<std::string> formats;
  for (const BenchSpec& s : specs) {
    covered.insert(s.kernel());
    formats.insert(s.format.name());
    EXPECT_EQ(s.device, Location::host);
    if (s.layout == Layout::kn) {
      EXPECT_TRUE(s.format.info().kn_layout) << s.id();
    }
  }
  // A kernel for an ISA this machine lacks (an AVX2-only CI runner has no avx512 path, an
  // AVX-512 CPU without AMX no AMX path) declines every spec; the others must each have one.
  auto runs_here = [](std::string_view name) {
    if (name.find("_amx_") != std::string_view::npos && !cpu::amx_active()) return false;
    for (cpu::Isa isa : cpu::kAllIsas) {
      const std::string suffix = "_" + std::string(cpu::isa_name(isa));
      if (name.size() > suffix.size() && name.ends_with(suffix)) return cpu::isa_supported(isa);
    }
    return true;
  };
  for (const KernelEntry* e : all_kernels()) {
    if (e->device == Location::host && runs_here(e->name)) {
      EXPECT_TRUE(covered.count(e->name)) << e->name;
    }
  }
  EXPECT_EQ(formats.size(), all_formats().size());  // the generic kernels take every format

  RegistryOptions a;
  a.named = false;
  a.automatic = true;
  a.formats = {Format::mxfp4()};
  a.dtypes = {DType::bf16};
  for (const BenchSpec& s : registered_specs(a)) EXPECT_EQ(s.kernel(), "auto");
}

}  // namespace
}  // namespace quanta::bench
