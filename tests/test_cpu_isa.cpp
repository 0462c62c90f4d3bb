// CPU backend plumbing: ISA detection and capping, the kernel table's choice per level, and
// the thread pool.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/kernel.hpp"
#include "cpu/isa.hpp"
#include "cpu/pool.hpp"
#include "quanta/error.hpp"

namespace quanta {
namespace {

using cpu::Isa;

TEST(CpuIsa, NamesRoundTrip) {
  for (Isa i : cpu::kAllIsas) EXPECT_EQ(cpu::parse_isa(cpu::isa_name(i)), i);
  EXPECT_FALSE(cpu::parse_isa("avx1024").has_value());
}

TEST(CpuIsa, DetectionIsConsistent) {
  const cpu::CpuFeatures& f = cpu::cpu_features();
  EXPECT_TRUE(cpu::isa_supported(Isa::scalar));
  EXPECT_TRUE(cpu::isa_supported(cpu::best_isa()));
  if (cpu::isa_supported(Isa::avx512)) {
    EXPECT_TRUE(cpu::isa_supported(Isa::avx2));
    EXPECT_TRUE(f.os_avx512 && f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq);
  }
  if (cpu::isa_supported(Isa::avx2)) {
    EXPECT_TRUE(f.os_avx && f.avx2 && f.fma && f.f16c);
  }
  if (f.amx_tile) {
    EXPECT_TRUE(f.os_amx);
  }
  // Every x86-64 CPU with AVX2 reports its L1D through CPUID (a power of two, 16-64 KB today),
  // and the prefetch choice follows it and the vendor unless QUANTA_CPU_PREFETCH overrides.
  if (cpu::isa_supported(Isa::avx2)) {
    EXPECT_GE(f.l1d_kb, 16) << f.describe();
    EXPECT_LE(f.l1d_kb, 256) << f.describe();
    if (std::getenv("QUANTA_CPU_PREFETCH") == nullptr) {
      const cpu::GemvPrefetch pf = cpu::gemv_prefetch();
      EXPECT_EQ(pf.l2, !(f.amd && f.l1d_kb >= 48));
      EXPECT_EQ(pf.rows, !f.amd);
    }
  }
  RecordProperty("cpu", f.describe());
}

TEST(CpuIsa, ForceAndRestore) {
  const Isa before = cpu::active_isa();
  {
    const cpu::ScopedIsa s(Isa::scalar);
    EXPECT_EQ(cpu::active_isa(), Isa::scalar);
  }
  EXPECT_EQ(cpu::active_isa(), before);
  for (Isa i : cpu::kAllIsas)
    if (!cpu::isa_supported(i)) {
      EXPECT_THROW(cpu::force_isa(i), Error);
    }
}

// Under each cap, the table's first choice is that level's kernel for the M range.
TEST(CpuIsa, SelectorFollowsTheCap) {
  Problem p;
  p.n = 64;
  p.k = 256;
  for (Isa i : cpu::kAllIsas) {
    if (!cpu::isa_supported(i)) continue;
    const cpu::ScopedIsa s(i);
    const std::string isa(cpu::isa_name(i));
    p.format = Format::affine(4, 64);
    p.op = Op::matmul;
    p.m = 1;
    EXPECT_EQ(select_kernel(p, "auto").name, "qmv_fused_" + isa);
    p.m = 4;
    EXPECT_EQ(select_kernel(p, "auto").name, "qmv_fused_" + isa);
    // M = 5..8: two passes of the fused GEMV where it takes x as integer planes (VNNI), else
    // the tiled path; 8-bit codes too (the planes' GEMV reads them as stored), but the fp8
    // codes have no such GEMV.
    const bool planes = i == Isa::avx512 && cpu::vnni_active();
    p.m = 5;
    EXPECT_EQ(select_kernel(p, "auto").name, (planes ? "qmv_fused_" : "qmm_tiled_") + isa);
    p.m = 8;
    EXPECT_EQ(select_kernel(p, "auto").name, (planes ? "qmv_fused_" : "qmm_tiled_") + isa);
    p.m = 9;
    EXPECT_EQ(select_kernel(p, "auto").name, "qmm_tiled_" + isa);
    p.format = Format::affine(8, 64);
    p.m = 5;
    EXPECT_EQ(select_kernel(p, "auto").name, (planes ? "qmv_fused_" : "qmm_tiled_") + isa);
    p.format = Format::fp8_e4m3();
    EXPECT_EQ(select_kernel(p, "auto").name, "qmm_tiled_" + isa);
    p.format = Format::gguf(Scheme::q6_K);  // costly tiles: fused up to M = 8
    p.m = 8;
    EXPECT_EQ(select_kernel(p, "auto").name, "qmv_fused_" + isa);
    p.layout = Layout::kn;  // [K, N]: fused up to two passes of kKnMaxRows rows of x
    p.format = Format::affine(4, 64);
    p.m = 8;
    EXPECT_EQ(select_kernel(p, "auto").name, "qmv_fused_" + isa);
    p.m = 9;
    EXPECT_EQ(select_kernel(p, "auto").name, "qmm_tiled_" + isa);
    p.layout = Layout::nk;
    p.op = Op::gather_matmul;
    EXPECT_EQ(select_kernel(p, "auto").name, "gather_qmm_" + isa);
  }
  if (cpu::best_isa() != Isa::scalar) {
    const cpu::ScopedIsa s(Isa::scalar);
    p.op = Op::matmul;
    p.m = 1;
    const std::string above = "qmv_fused_" + std::string(cpu::isa_name(cpu::best_isa()));
    try {
      select_kernel(p, above);
      FAIL() << above << " ran under a scalar cap";
    } catch (const NotSupported& e) {
      EXPECT_NE(std::string(e.what()).find("capped"), std::string::npos) << e.what();
    }
  }
}

TEST(CpuPool, EveryTaskOnce) {
  for (int workers : {1, 2, 3, 8}) {
    for (int64_t tasks : {0, 1, 2, 7, 100}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(tasks));
      std::atomic<int> bad_worker{0};
      cpu::parallel_for(tasks, workers, [&](int64_t t, int w) {
        hits[static_cast<size_t>(t)]++;
        if (w < 0 || w >= workers) bad_worker++;
      });
      for (auto& h : hits) EXPECT_EQ(h.load(), 1);
      EXPECT_EQ(bad_worker.load(), 0);
    }
  }
}

TEST(CpuPool, NestedCallsRunInline) {
  std::atomic<int> inner{0};
  cpu::parallel_for(4, 2, [&](int64_t, int) {
    cpu::parallel_for(3, 2, [&](int64_t, int w) {
      EXPECT_EQ(w, 0);
      inner++;
    });
  });
  EXPECT_EQ(inner.load(), 12);
  EXPECT_EQ(cpu::resolve_threads(0), cpu::hardware_threads());
  EXPECT_EQ(cpu::resolve_threads(3), 3);
}

}  // namespace
}  // namespace quanta
