// The SIMD CPU engine against the fp64 oracle: every format and layout, every ISA level this
// machine runs (each forced in turn), the fused GEMV and the tiled path, M in {1, 2, 3, 8, 33}
// and one past the level's packed-tile threshold (a ragged micro-tile), ragged N, outputs poisoned
// with NaN first. Timing lives in bench/cpu_probe, not here.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cpu/backend.hpp"
#include "cpu/isa.hpp"
#include "quanta/error.hpp"
#include "quanta/numeric.hpp"
#include "quanta/ops.hpp"
#include "quanta/reference.hpp"
#include "test_util.hpp"

namespace quanta {
namespace {

using cpu::Isa;

struct Case {
  Format format;
  Layout layout = Layout::nk;
  bool global = false;  // nvfp4 with a tensor scale
  std::string name() const {
    std::string s = format.name() + (layout == Layout::kn ? "_kn" : "_nk");
    if (global) s += "_global";
    for (char& c : s)
      if (c == '-') c = '_';
    return s;
  }
};

std::vector<Case> all_cases() {
  std::vector<Case> v;
  for (const Format& f : all_formats()) {
    v.push_back({f, Layout::nk});
    if (f.info().kn_layout) v.push_back({f, Layout::kn});
  }
  v.push_back({Format::nvfp4(), Layout::nk, true});
  v.push_back({Format::nvfp4(), Layout::kn, true});
  return v;
}

// A matrix of the case's format with N output features and K inputs: quantized from random
// weights where quanta can encode, random valid blocks for the decode-only K-quants.
QuantizedMatrix make_weights(const Case& c, int64_t n, int64_t k, DType dtype, uint32_t seed) {
  const SchemeInfo& info = c.format.info();
  if (!info.encode) {
    QuantizedMatrix w = QuantizedMatrix::allocate_host(c.format, n, k);
    std::mt19937 rng(seed);
    auto* codes = reinterpret_cast<uint8_t*>(w.codes);
    const std::size_t bytes = w.footprint().code_bytes;
    for (std::size_t i = 0; i < bytes; ++i) codes[i] = static_cast<uint8_t>(rng());
    // Finite, moderate f16 super-block scales (d, dmin) in every block.
    std::uniform_real_distribution<float> ds(0.002f, 0.02f);
    const int bb = info.block_bytes;
    for (std::size_t b = 0; b < bytes / static_cast<std::size_t>(bb); ++b) {
      uint8_t* blk = codes + b * static_cast<std::size_t>(bb);
      auto put = [&](int at) {
        const uint16_t h = f32_to_f16_bits(ds(rng));
        std::memcpy(blk + at, &h, 2);
      };
      switch (c.format.scheme) {
        case Scheme::q2_K:
          put(80), put(82);
          break;
        case Scheme::q3_K:
          put(108);
          break;
        case Scheme::q4_K:
        case Scheme::q5_K:
          put(0), put(2);
          break;
        case Scheme::q6_K:
          put(208);
          break;
        default:
          break;
      }
    }
    return w;
  }
  const bool nk = c.layout == Layout::nk;
  const test::Dense dense =
      test::random_dense(dtype, nk ? n : k, nk ? k : n, seed, 1.0f, /*row_scales=*/true);
  QuantizeOptions opts;
  opts.layout = c.layout;
  if (c.global) {
    float amax = 0;
    for (int64_t i = 0; i < dense.rows * dense.cols; ++i)
      amax = std::fmax(amax, std::fabs(dense.at(i)));
    opts.nvfp4_tensor_amax = amax;
  }
  return quantize(dense.view(), c.format, opts);
}

// Checks one run of `kernel` against the oracle; y is poisoned first.
void check(const Case& c, const QuantizedMatrix& w, const test::Dense& x, std::string_view kernel,
           int threads = 0) {
  test::Dense y(x.dtype, x.rows, w.n);
  y.poison();
  Context ctx;
  ctx.kernel = kernel;
  ctx.threads = threads;
  matmul(x.view(), w, y.mut(), ctx);
  const std::vector<double> want = ref::matmul(x.view(), w);
  const ref::Comparison cmp = ref::compare(y.view(), want, x.dtype);
  EXPECT_TRUE(cmp.pass) << c.name() << " " << kernel << " M=" << x.rows << " N=" << w.n
                        << " K=" << w.k << " " << dtype_name(x.dtype) << ": rel_l2 " << cmp.rel_l2
                        << " (bound " << rel_l2_bound(x.dtype) << "), non-finite " << cmp.nonfinite
                        << ", max_abs " << cmp.max_abs;
}

std::vector<Isa> machine_isas() {
  std::vector<Isa> v;
  for (Isa i : cpu::kAllIsas)
    if (cpu::isa_supported(i)) v.push_back(i);
  return v;
}

// The integer (VNNI) kernels inside the avx512 level run where the CPU has them; the tests
// run that level with them and without.
bool vnni_here() {
  const cpu::CpuFeatures& f = cpu::cpu_features();
  return cpu::isa_supported(Isa::avx512) && f.avx512vnni && f.avx512vbmi && f.gfni;
}
struct ScopedNoVnni {
  explicit ScopedNoVnni(bool off) { cpu::disable_vnni(off); }
  ~ScopedNoVnni() { cpu::disable_vnni(false); }
  ScopedNoVnni(const ScopedNoVnni&) = delete;
  ScopedNoVnni& operator=(const ScopedNoVnni&) = delete;
};

std::string kernel_name(std::string_view path, Isa isa) {
  return std::string(path) + "_" + std::string(cpu::isa_name(isa));
}

// Shapes: K crosses the tiled path's K block (1024 for W [N, K], 256 for W [K, N]) and is a
// multiple of every group; fp8 takes any K, so a ragged one. N is ragged for nk; kn needs
// N * bits % 32 == 0.
int64_t k_of(const Case& c) {
  if (c.format.info().family == Family::fp8) return 1111;
  return 1280;
}
int64_t n_of(const Case& c) {
  if (c.layout == Layout::nk) return 37;
  switch (c.format.bits) {  // not a whole number of vectors where the layout allows
    case 4:
      return 40;
    case 8:
      return 36;
    case 2:
    case 6:
      return 80;
    default:
      return 96;  // 3 and 5 bits need N % 32 == 0
  }
}

class CpuKernels : public ::testing::TestWithParam<Case> {};

TEST_P(CpuKernels, EveryIsaAndPathMatchesOracle) {
  const Case& c = GetParam();
  const int64_t N = n_of(c), K = k_of(c);
  const QuantizedMatrix w = make_weights(c, N, K, DType::f32, 7);
  for (Isa isa : machine_isas()) {
    for (const bool no_vnni : {false, true}) {
      // Both levels with integer GEMVs (avx512 with VNNI, avx2) also run with them off.
      if (no_vnni && !(isa == Isa::avx2 || (isa == Isa::avx512 && vnni_here()))) continue;
      SCOPED_TRACE(no_vnni ? "integer kernels off" : "");
      const cpu::ScopedIsa scoped(isa);
      const ScopedNoVnni vnni(no_vnni);
      // Past the threshold the nk tiles are packed K-major (outer-product form).
      std::vector<int64_t> ms = {1, 2, 3, 8, 33};
      const int64_t packed = cpu::packed_min_rows(c.format, c.layout, isa);
      if (packed < INT64_MAX) ms.push_back(std::max<int64_t>(packed, 9) + 7);
      for (int64_t m : ms) {
        const test::Dense x = test::random_dense(DType::f32, m, K, 100 + static_cast<uint32_t>(m));
        if (m <= cpu::fused_max_rows(c.format, c.layout, K, isa))
          check(c, w, x, kernel_name("qmv_fused", isa));
        check(c, w, x, kernel_name("qmm_tiled", isa));
      }
      // The automatic choice under this cap is this level's kernel.
      const test::Dense x1 = test::random_dense(DType::f32, 1, K, 5);
      check(c, w, x1, "auto");
    }
  }
}

// The integer GEMVs (q2_K-q6_K, q4_1, q5_0, q5_1, affine 2/3/4-bit) split x into planes per block
// of 256 (128 for affine) elements, 2^e from the block's largest |x|: outliers 10^4 times the rest,
// a block of zeros, a block of values near 2^-90 and one with a value near 10^30 must still meet
// the f32 bound; a NaN, an infinity or a block below 2^-96 make them fall back to the float kernels
// (NaN or the exact value, not a wrong one). Runs on every level (the planes on avx512 with VNNI,
// and on avx2 for the K-quants).
class PlaneExtremes : public ::testing::TestWithParam<Format> {};

TEST_P(PlaneExtremes, ActivationExtremes) {
  const Case c{GetParam()};
  const int64_t N = 37, K = 2048;
  const QuantizedMatrix w = make_weights(c, N, K, DType::f32, 3);
  auto run = [&](const char* what, auto&& edit) {
    test::Dense x = test::random_dense(DType::f32, 1, K, 17);
    edit(x);
    SCOPED_TRACE(what);
    for (Isa isa : machine_isas()) {
      const cpu::ScopedIsa scoped(isa);
      check(c, w, x, kernel_name("qmv_fused", isa));
    }
  };
  auto set = [](test::Dense& x, int64_t i, float v) { x.set(i, v); };
  run("outliers",
      [&](test::Dense& x) { set(x, 3, 2.5e4f), set(x, 700, -1.0e4f), set(x, 1500, 3.0e4f); });
  run("zero block", [&](test::Dense& x) {
    for (int64_t i = 256; i < 512; ++i) set(x, i, 0.0f);
  });
  run("tiny block", [&](test::Dense& x) {
    for (int64_t i = 512; i < 768; ++i) set(x, i, x.at(i) * 0x1p-90f);
  });
  run("huge value", [&](test::Dense& x) { set(x, 900, 1.0e30f); });
  // A block maximum just under a power of two: its leading digit rounds past 127 at the
  // first 2^e tried.
  run("maximum near 2^k", [&](test::Dense& x) { set(x, 1100, 3.999f), set(x, 1300, -7.9999f); });
  run("below 2^-96 (float kernel)", [&](test::Dense& x) {
    for (int64_t i = 768; i < 1024; ++i) set(x, i, x.at(i) * 0x1p-110f);
  });
  // Non-finite x: the result must be non-finite where the oracle's is, never a finite guess.
  for (Isa isa : machine_isas()) {
    const cpu::ScopedIsa scoped(isa);
    for (const float bad : {std::nanf(""), INFINITY}) {
      test::Dense x = test::random_dense(DType::f32, 1, K, 17);
      x.set(1000, bad);
      test::Dense y(DType::f32, 1, N);
      y.poison();
      const std::string kernel = kernel_name("qmv_fused", isa);
      Context ctx;
      ctx.kernel = kernel;
      matmul(x.view(), w, y.mut(), ctx);
      const std::vector<double> want = ref::matmul(x.view(), w);
      for (int64_t n = 0; n < N; ++n)
        EXPECT_EQ(std::isfinite(y.at(n)), std::isfinite(want[static_cast<std::size_t>(n)]))
            << cpu::isa_name(isa) << " x[1000] = " << bad << ", n = " << n;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Int8Planes, PlaneExtremes,
                         ::testing::Values(Format::gguf(Scheme::q2_K), Format::gguf(Scheme::q3_K),
                                           Format::gguf(Scheme::q4_K), Format::gguf(Scheme::q5_K),
                                           Format::gguf(Scheme::q6_K), Format::affine(4, 32),
                                           Format::affine(4, 64), Format::affine(4, 128),
                                           Format::affine(3, 32), Format::affine(3, 128),
                                           Format::affine(2, 64), Format::gguf(Scheme::q4_0),
                                           Format::gguf(Scheme::q4_1), Format::gguf(Scheme::q5_0),
                                           Format::gguf(Scheme::q5_1), Format::gguf(Scheme::q8_0),
                                           Format::affine(8, 64)),
                         [](const ::testing::TestParamInfo<Format>& i) {
                           std::string s(i.param.name());
                           for (char& ch : s)
                             if (ch == '-') ch = '_';
                           return s;
                         });

// 16-bit activations (affine scales then share that dtype) on the best level and the
// portable one.
TEST_P(CpuKernels, HalfActivations) {
  const Case& c = GetParam();
  const int64_t N = n_of(c), K = k_of(c);
  for (DType t : {DType::f16, DType::bf16}) {
    const QuantizedMatrix w = make_weights(c, N, K, t, 11);
    for (Isa isa : {cpu::best_isa(), Isa::scalar}) {
      const cpu::ScopedIsa scoped(isa);
      for (int64_t m : {1, 3, 6, 12}) {
        const test::Dense x = test::random_dense(t, m, K, 200 + static_cast<uint32_t>(m));
        const bool fused = m <= cpu::fused_max_rows(c.format, c.layout, K, isa);
        check(c, w, x, kernel_name(fused ? "qmv_fused" : "qmm_tiled", isa));
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllFormats, CpuKernels, ::testing::ValuesIn(all_cases()),
                         [](const ::testing::TestParamInfo<Case>& i) { return i.param.name(); });

// Shapes that stress the edges: one row, N below a vector, K of a single group, rows whose
// vector loads reach the end of the buffer (the padded tail copy), many threads on few rows.
TEST(CpuKernelsEdges, TinyAndOddShapes) {
  const Case cases[] = {
      {Format::affine(4, 32)}, {Format::affine(3, 128)},     {Format::nvfp4(), Layout::nk, true},
      {Format::fp8_e5m2()},    {Format::gguf(Scheme::q4_0)}, {Format::gguf(Scheme::q6_K)},
      {Format::affine(2, 32)}};  // one group of 32: not a whole pair, so the natural order
  for (const Case& c : cases) {
    const SchemeInfo& info = c.format.info();
    const int64_t K = info.family == Family::fp8 ? 5 : std::max(c.format.group_size, 16);
    for (int64_t N : {1, 3, 17}) {
      const QuantizedMatrix w = make_weights(c, N, K, DType::f32, 3);
      for (Isa isa : machine_isas()) {
        const cpu::ScopedIsa scoped(isa);
        for (int64_t m : {1, 2, 3, 7}) {
          const test::Dense x = test::random_dense(DType::f32, m, K, 9);
          for (int threads : {1, 8}) {
            if (m <= cpu::fused_max_rows(c.format, c.layout, K, isa))
              check(c, w, x, kernel_name("qmv_fused", isa), threads);
            check(c, w, x, kernel_name("qmm_tiled", isa), threads);
          }
        }
      }
    }
  }
}

// W [K, N] wider than one GEMV panel (4096 columns), with a ragged last panel, and K split
// over workers.
TEST(CpuKernelsEdges, KnPanelsAndKSplit) {
  for (const Case& c :
       {Case{Format::affine(4, 32), Layout::kn}, Case{Format::mxfp8(), Layout::kn},
        Case{Format::affine(3, 64), Layout::kn}, Case{Format::affine(2, 64), Layout::kn}}) {
    // Past one 8192-column panel (M = 1); 2-bit: 8240 ends in a part of a 64-column chunk (four
    // vectors of byte lanes)
    const int64_t N = c.format.bits == 3 ? 8256 : (c.format.bits == 2 ? 8240 : 8232), K = 128;
    const QuantizedMatrix w = make_weights(c, N, K, DType::f32, 13);
    for (Isa isa : machine_isas()) {
      const cpu::ScopedIsa scoped(isa);
      // 2..4 rows of x: panels of 4096 and 2048 columns, so several of them and a part; 7: two
      // passes over W.
      for (int64_t m : {1, 2, 3, 4, 7}) {
        const test::Dense x = test::random_dense(DType::f32, m, K, 14 + static_cast<uint32_t>(m));
        for (int threads : {1, 2, 5}) check(c, w, x, kernel_name("qmv_fused", isa), threads);
      }
    }
  }
}

// Packed nk tiles at large M: several tasks of 128 rows with a ragged last one (a partial
// panel), K past one block and ragged within the decode chunk (fp8), M ragged for the
// micro-tile, one and two threads.
TEST(CpuKernelsEdges, PackedTilesLargeM) {
  const Case cases[] = {{Format::affine(4, 64)},
                        {Format::affine(3, 32)},
                        {Format::mxfp4()},
                        {Format::nvfp4(), Layout::nk, true},
                        {Format::fp8_e4m3()},
                        {Format::gguf(Scheme::q4_0)},
                        {Format::gguf(Scheme::q6_K)},
                        {Format::gguf(Scheme::q3_K)}};
  for (const Case& c : cases) {
    const int64_t N = 301, K = c.format.info().family == Family::fp8 ? 1303 : 1536;
    const QuantizedMatrix w = make_weights(c, N, K, DType::f32, 31);
    for (Isa isa : machine_isas()) {
      const int64_t packed = cpu::packed_min_rows(c.format, c.layout, isa);
      if (packed == INT64_MAX) continue;
      const cpu::ScopedIsa scoped(isa);
      const int64_t m = std::max<int64_t>(packed, 9) + 13;
      const test::Dense x = test::random_dense(DType::f32, m, K, 32);
      for (int threads : {1, 2}) check(c, w, x, kernel_name("qmm_tiled", isa), threads);
    }
  }
}

// A large enough problem that every worker gets several tasks; thread counts must agree.
TEST(CpuKernelsEdges, ThreadCountsAgree) {
  const Case c{Format::affine(4, 64)};
  const int64_t N = 1000, K = 1024;
  const QuantizedMatrix w = make_weights(c, N, K, DType::f32, 21);
  for (int64_t m : {1, 5}) {
    const test::Dense x = test::random_dense(DType::f32, m, K, 22);
    std::vector<std::vector<unsigned char>> outs;
    for (int threads : {1, 2, 0, 3}) {
      check(c, w, x, "auto", threads);
      test::Dense y(DType::f32, m, N);
      Context ctx;
      ctx.threads = threads;
      matmul(x.view(), w, y.mut(), ctx);
      outs.push_back(y.bytes);
    }
    // Each output row's sum runs in the same order whatever the split over N.
    for (const auto& o : outs) EXPECT_EQ(o, outs.front()) << "M=" << m;
  }
}

// E4M3 NaN codes (0x7f/0xff) are NaN, not 480: the rows that hold one come out NaN.
TEST(CpuKernelsEdges, E4M3NanCodesPropagate) {
  for (const Format& f : {Format::mxfp8(), Format::fp8_e4m3()}) {
    const Case c{f};
    const int64_t N = 8, K = 64;
    QuantizedMatrix w = make_weights(c, N, K, DType::f32, 5);
    auto* codes = reinterpret_cast<uint8_t*>(w.codes);
    codes[2 * K + 17] = 0x7f;  // row 2
    codes[5 * K + 40] = 0xff;  // row 5
    for (Isa isa : machine_isas()) {
      const cpu::ScopedIsa scoped(isa);
      for (int64_t m : {1, 3, 5}) {
        const test::Dense x = test::random_dense(DType::f32, m, K, 6);
        for (std::string_view path : {"qmv_fused", "qmm_tiled"}) {
          if (m > cpu::fused_max_rows(f, Layout::nk, K, isa) && path == "qmv_fused") continue;
          test::Dense y(DType::f32, m, N);
          Context ctx;
          const std::string name = kernel_name(path, isa);
          ctx.kernel = name;
          matmul(x.view(), w, y.mut(), ctx);
          for (int64_t i = 0; i < m; ++i)
            for (int64_t n = 0; n < N; ++n)
              EXPECT_EQ(std::isnan(y.at(i * N + n)), n == 2 || n == 5)
                  << f.name() << " " << name << " row " << i << " col " << n;
        }
      }
    }
  }
}

// The SIMD dequantize against the codec (dequantize_generic), bit for bit (or NaN where it is
// NaN): every packed format and the GGUF blocks it takes, W [N, K], each output dtype and ISA
// level, ragged N, fp8 rows that end inside a vector, random code bytes (NaN codes, and for GGUF
// random and non-finite block scales, included), a stack of experts, 1-3 threads.
TEST(CpuKernelsEdges, DequantizeBitExactWithTheCodec) {
  for (const Case& c : all_cases()) {
    if (c.layout != Layout::nk) continue;
    if (c.format.info().family == Family::gguf && !cpu::dequantize_simd_exact(c.format.scheme))
      continue;
    const int64_t N = 37, K = c.format.info().family == Family::fp8 ? 250 : 512;
    for (DType t : {DType::f32, DType::f16, DType::bf16}) {
      QuantizedMatrix w = test::host_weights(c.format, t, N, K, Layout::nk, 21, /*batch=*/2);
      if (c.global) w.global_scale = 0.37f;
      std::mt19937 rng(22);
      auto* codes = reinterpret_cast<uint8_t*>(w.codes);
      for (std::size_t i = 0; i < 2 * w.footprint().code_bytes; ++i)
        codes[i] = static_cast<uint8_t>(rng());
      test::Dense want(t, 2 * N, K);
      want.poison();
      Context gen;
      gen.kernel = "dequantize_generic";
      dequantize(w, want.mut(), gen);
      for (Isa isa : machine_isas()) {
        for (int threads : {1, 2, 3}) {
          test::Dense got(t, 2 * N, K);
          got.poison();
          Context ctx;
          const std::string name = kernel_name("dequantize", isa);
          ctx.kernel = name;
          ctx.threads = threads;
          dequantize(w, got.mut(), ctx);
          int64_t bad = 0;
          for (int64_t i = 0; i < 2 * N * K; ++i) {
            const float a = got.at(i), b = want.at(i);
            const bool same = std::isnan(b) ? std::isnan(a)
                                            : std::memcmp(got.bytes.data() + i * dtype_size(t),
                                                          want.bytes.data() + i * dtype_size(t),
                                                          dtype_size(t)) == 0;
            bad += same ? 0 : 1;
          }
          EXPECT_EQ(bad, 0) << c.name() << " -> " << dtype_name(t) << " " << name << ", " << threads
                            << " threads";
        }
      }
    }
  }
}

TEST(CpuKernelsEdges, GatherMatmulMatchesOracle) {
  const Case cases[] = {
      {Format::affine(4, 64)}, {Format::mxfp4(), Layout::kn}, {Format::gguf(Scheme::q4_K)}};
  for (const Case& c : cases) {
    const int64_t E = 3, N = 40, K = 512;
    // A stack of three experts: quantize each and copy into one allocation.
    QuantizedMatrix stack = QuantizedMatrix::allocate_host(c.format, N, K, DType::f32, c.layout, E);
    const Footprint fp = stack.footprint();
    for (int64_t e = 0; e < E; ++e) {
      const QuantizedMatrix one = make_weights(c, N, K, DType::f32, 30 + static_cast<uint32_t>(e));
      const QuantizedMatrix dst = stack.expert(e);
      std::memcpy(dst.codes, one.codes, fp.code_bytes);
      if (fp.scale_bytes) std::memcpy(dst.scales, one.scales, fp.scale_bytes);
      if (fp.bias_bytes) std::memcpy(dst.biases, one.biases, fp.bias_bytes);
    }
    for (Isa isa : machine_isas()) {
      const cpu::ScopedIsa scoped(isa);
      for (int64_t m : {1, 7, 101}) {  // 101: about 34 rows per expert, packed tiles
        const test::Dense x = test::random_dense(DType::f32, m, K, 40);
        std::vector<int32_t> ids(static_cast<size_t>(m));
        for (int64_t i = 0; i < m; ++i)
          ids[static_cast<size_t>(i)] = static_cast<int32_t>((i * 2) % E);
        test::Dense y(DType::f32, m, N);
        y.poison();
        Context ctx;
        const std::string name = kernel_name("gather_qmm", isa);
        ctx.kernel = name;
        gather_matmul(x.view(), stack, ids.data(), y.mut(), ctx);
        const auto want = ref::gather_matmul(x.view(), stack, ids);
        const auto cmp = ref::compare(y.view(), want, DType::f32);
        EXPECT_TRUE(cmp.pass) << c.name() << " " << name << " M=" << m << " rel_l2 " << cmp.rel_l2;
      }
    }
  }
}

}  // namespace
}  // namespace quanta
