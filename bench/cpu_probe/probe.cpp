// quanta_cpu_probe: a standalone timing driver for the CPU backend (until `quanta bench` runs
// the CPU rows). In one process it measures the machine's DRAM read roof, the fused GEMV of
// each format on one large shape, OpenBLAS sgemv on the same shape in f32, and the M > 1 path
// against OpenBLAS sgemm on the pre-dequantized weights. Every time is the median of --reps
// runs after two warm-ups; weights of >= 64 MB do not fit the last-level cache, so every run
// streams them from DRAM.
//
//   quanta_cpu_probe [--n 16384] [--k 14336] [--threads 0] [--reps 15] [--isa avx512]
//                    [--formats affine-4b-g64,q4_0,...|all] [--gemm] [--gemm-n 4096]
//                    [--gemm-k 14336] [--ms 1,2,4,...] [--no-gemv] [--roof-mb 512]
//                    [--layout nk|kn] [--kernel NAME (default auto)] [--hot] [--prepack]
//                    [--bf16-x] [--f16-x]
//
// --hot times back-to-back calls with no roof read between them: for a matrix that fits the
// caches, the kernel's compute rate rather than its DRAM rate (the roof column is then the last
// roof measured before the format's runs).
// --prepack adds a row per format that quanta::prepack packs ("<format> packed"), the same
// weights run from the pack, right after the unpacked row; with --gemm, the M sweep runs the
// packed matrix instead.
// --bf16-x runs the GEMV and the M sweep with x and y in bf16, --f16-x the M sweep in f16 (x
// rounded from the same f32 values).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "cpu/isa.hpp"
#include "cpu/pool.hpp"
#include "format/dense.hpp"
#include "quanta/numeric.hpp"
#include "quanta/ops.hpp"
#include "roof.hpp"

#if defined(QUANTA_PROBE_OPENBLAS)
#include <cblas.h>
extern "C" void openblas_set_num_threads(int);
extern "C" char* openblas_get_corename();
#endif

namespace quanta::probe {
namespace {

struct Options {
  int64_t n = 16384, k = 14336;
  int threads = 0;
  int reps = 15;
  std::string isa;
  std::string kernel = "auto";
  std::vector<std::string> formats = {"affine-4b-g64", "q4_0"};
  bool gemv = true, gemm = false;
  int64_t gemm_n = 4096, gemm_k = 14336;
  std::vector<int64_t> ms = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512};
  std::size_t roof_mb = 512;
  Layout layout = Layout::nk;
  bool hot = false;      // no roof read between the GEMV calls
  bool prepack = false;  // also time the prepacked matrix
  bool bf16_x = false;   // GEMV x and y in bf16
  bool f16_x = false;    // M sweep: x and y in f16
};

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::size_t at = 0;
  while (at <= s.size()) {
    const std::size_t c = s.find(',', at);
    out.push_back(s.substr(at, c == std::string::npos ? std::string::npos : c - at));
    if (c == std::string::npos) break;
    at = c + 1;
  }
  return out;
}

double median_seconds(const std::function<void()>& fn, int reps) {
  fn();
  fn();
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// A matrix in format f with random codes and moderate valid scales (speed does not depend on
// the values; building it this way takes a moment instead of quantizing 10^8 weights).
// Affine scales and biases in sd (f32, or bf16 for bf16 activations).
QuantizedMatrix random_matrix(const Format& f, int64_t n, int64_t k, Layout layout,
                              DType sd = DType::f32) {
  QuantizedMatrix w = QuantizedMatrix::allocate_host(f, n, k, sd, layout);
  const Footprint fp = w.footprint();
  auto* codes = reinterpret_cast<uint8_t*>(w.codes);
  cpu::parallel_for(64, cpu::resolve_threads(0), [&](int64_t part, int) {
    std::mt19937_64 rng(static_cast<uint64_t>(part) + 1);
    const std::size_t b = fp.code_bytes / 64 * static_cast<std::size_t>(part);
    const std::size_t e = part == 63 ? fp.code_bytes : b + fp.code_bytes / 64;
    for (std::size_t i = b; i < e; ++i) codes[i] = static_cast<uint8_t>(rng() >> 17);
  });
  const SchemeInfo& info = f.info();
  // Keep fp8 codes finite as a checkpoint's are (E4M3 0x7f/0xff are NaN: clear bit 0 of those
  // bytes; E5M2's exponent field of all ones is inf or NaN: clear its low bit), or a kernel's
  // fallback for non-finite weights is what gets timed.
  if (info.code == ElementCode::e4m3)
    for (std::size_t i = 0; i < fp.code_bytes; ++i)
      if ((codes[i] & 0x7f) == 0x7f) codes[i] &= 0xfe;
  if (info.code == ElementCode::e5m2)
    for (std::size_t i = 0; i < fp.code_bytes; ++i)
      if ((codes[i] & 0x7c) == 0x7c) codes[i] &= 0xfb;
  auto* scales = reinterpret_cast<uint8_t*>(w.scales);
  switch (info.family) {
    case Family::affine:
      for (std::size_t i = 0; i < fp.scale_count; ++i) {
        dense::store(w.scales, sd, i, 0.01f);
        dense::store(w.biases, sd, i, -0.08f);
      }
      break;
    case Family::microscaled:
      std::memset(scales, info.scale == ScaleEncoding::e8m0 ? 120 : 0x30, fp.scale_bytes);
      break;
    case Family::fp8:
      for (std::size_t i = 0; i < fp.scale_count; ++i) {
        const float s = 0.01f;
        std::memcpy(scales + 4 * i, &s, 4);
      }
      break;
    case Family::gguf: {
      // f16 block scales: d at the format's offsets (see src/format/gguf.hpp), 0.01.
      const uint16_t h = f32_to_f16_bits(0.01f);
      int at[2] = {-1, -1};
      switch (f.scheme) {
        case Scheme::q2_K:
          at[0] = 80, at[1] = 82;
          break;
        case Scheme::q3_K:
          at[0] = 108;
          break;
        case Scheme::q6_K:
          at[0] = 208;
          break;
        case Scheme::q4_1:
        case Scheme::q5_1:
        case Scheme::q4_K:
        case Scheme::q5_K:
          at[0] = 0, at[1] = 2;
          break;
        default:
          at[0] = 0;
      }
      for (std::size_t b = 0; b < fp.code_bytes / static_cast<std::size_t>(info.block_bytes); ++b)
        for (int a : at)
          if (a >= 0)
            std::memcpy(codes + b * static_cast<std::size_t>(info.block_bytes) + a, &h, 2);
      break;
    }
  }
  return w;
}

std::vector<float> random_floats(std::size_t n, uint32_t seed) {
  std::vector<float> v(n);
  std::mt19937 rng(seed);
  std::normal_distribution<float> d;
  for (float& f : v) f = d(rng);
  return v;
}

int run(const Options& o) {
  if (!o.isa.empty()) cpu::force_isa(cpu::parse_isa(o.isa));
  const int threads = cpu::resolve_threads(o.threads);
  fmt::print("cpu: {}\nisa: {}  threads: {}  next-pass prefetch: {}{}\n",
             cpu::cpu_features().describe(), cpu::isa_name(cpu::active_isa()), threads,
             cpu::gemv_prefetch().rows ? "rows, l2"
             : cpu::gemv_prefetch().l2 ? "run, l2"
                                       : "run, l1",
             cpu::avx_vnni_active() ? "  packed dots: vpdpbusd (AVX-VNNI)" : "");
#if defined(QUANTA_PROBE_OPENBLAS)
  openblas_set_num_threads(threads);
  fmt::print("openblas core: {}\n", openblas_get_corename());
#endif
  RoofBuffer roof_buf(o.roof_mb << 20);
  const RoofResult roof = read_roof(o.roof_mb << 20, threads, o.reps, roof_buf);
  fmt::print(
      "read roof ({} MB, {} threads, {}, prefetch choice {}): median {:.2f} GB/s, best {:.2f} "
      "GB/s\n",
      o.roof_mb, threads, roof.isa, roof.loop, roof.median_gbs, roof.best_gbs);
  Context ctx;
  ctx.threads = o.threads;
  ctx.kernel = o.kernel;

  if (o.gemv) {
    const int64_t N = o.n, K = o.k;
    std::vector<float> x = random_floats(static_cast<std::size_t>(K), 1),
                       y(static_cast<std::size_t>(N));
    // --bf16-x: x as bf16 (rounded to nearest even), y as bf16; else both f32.
    std::vector<uint16_t> xb(static_cast<std::size_t>(K)), yb(static_cast<std::size_t>(N));
    for (std::size_t i = 0; i < xb.size(); ++i) dense::store(xb.data(), DType::bf16, i, x[i]);
    const ConstMatrixView xv = o.bf16_x ? ConstMatrixView{xb.data(), DType::bf16, 1, K}
                                        : ConstMatrixView{x.data(), DType::f32, 1, K};
    const MatrixView yv = o.bf16_x ? MatrixView{yb.data(), DType::bf16, 1, N}
                                   : MatrixView{y.data(), DType::f32, 1, N};
    double blas_s = 0;
#if defined(QUANTA_PROBE_OPENBLAS)
    {
      std::vector<float> a = random_floats(static_cast<std::size_t>(N * K), 2);
      blas_s = median_seconds(
          [&] {
            cblas_sgemv(CblasRowMajor, CblasNoTrans, static_cast<int>(N), static_cast<int>(K), 1.0f,
                        a.data(), static_cast<int>(K), x.data(), 1, 0.0f, y.data(), 1);
          },
          o.reps);
      fmt::print("openblas sgemv f32 [{} x {}] ({:.0f} MB): {:.3f} ms, {:.2f} GB/s\n", N, K,
                 4.0 * N * K / 1e6, blas_s * 1e3, 4.0 * N * K / blas_s / 1e9);
    }
#endif
    fmt::print("{:<21} {:>5} {:>9} {:>10} {:>9} {:>8} {:>9} {:>8}\n", "format", "bpw", "MB", "ms",
               "GB/s", "% roof", "x sgemv", "roof");
    for (const std::string& name : o.formats) {
      std::vector<Format> fs;
      if (name == "all") {
        for (const Format& f : all_formats()) fs.push_back(f);
      } else if (auto f = parse_format(name)) {
        fs.push_back(*f);
      } else {
        fmt::print("unknown format {}\n", name);
        return 2;
      }
      for (const Format& f : fs) {
        if (o.layout == Layout::kn && !f.info().kn_layout) continue;
        const QuantizedMatrix plain =
            random_matrix(f, N, K, o.layout, o.bf16_x ? DType::bf16 : DType::f32);
        std::vector<std::pair<std::string, QuantizedMatrix>> runs;
        runs.emplace_back(f.name(), plain);
        if (o.prepack)
          if (QuantizedMatrix packed = prepack(plain, ctx); packed.host_pack)
            runs.emplace_back(f.name() + " packed", std::move(packed));
        for (const auto& [label, w] : runs) {
          const double mb = static_cast<double>(w.footprint().total()) / 1e6;
          // Alternate the kernel with a roof run so both see the same machine (it is shared).
          std::vector<double> ts, roofs;
          double rg = 0;
          for (int r = -2; r < o.reps; ++r) {
            const auto t0 = std::chrono::steady_clock::now();
            matmul(xv, w, yv, ctx);
            const double s1 =
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            if (!o.hot || r == -2) rg = roof_pass(o.roof_mb << 20, threads, roof.loop, roof_buf);
            if (r < 0) continue;
            ts.push_back(s1);
            roofs.push_back(rg);
          }
          std::sort(ts.begin(), ts.end());
          std::sort(roofs.begin(), roofs.end());
          const double s = ts[ts.size() / 2], rmed = roofs[roofs.size() / 2];
          const double gbs = mb / 1e3 / s;
          fmt::print("{:<21} {:>5.2f} {:>9.1f} {:>10.3f} {:>9.2f} {:>7.1f}% {:>8.1f}x {:>8.2f}\n",
                     label, f.bits_per_weight(DType::f32), mb, s * 1e3, gbs, 100 * gbs / rmed,
                     blas_s > 0 ? blas_s / s : 0.0, rmed);
        }
      }
    }
  }

  if (o.gemm) {
    const int64_t N = o.gemm_n, K = o.gemm_k;
    fmt::print("\nM > 1, [{} x {}] weights; GFLOP/s = 2 M N K / time\n", N, K);
    for (const std::string& name : o.formats) {
      const std::optional<Format> f = parse_format(name);
      if (!f) continue;
      if (o.layout == Layout::kn && !f->info().kn_layout) continue;
      const DType xt = o.bf16_x ? DType::bf16 : o.f16_x ? DType::f16 : DType::f32;
      const bool half = xt != DType::f32;
      const QuantizedMatrix plain = random_matrix(*f, N, K, o.layout, xt);
      const QuantizedMatrix w = o.prepack ? prepack(plain, ctx) : plain;
      std::vector<float> wd(static_cast<std::size_t>(N * K));
      const bool nk = o.layout == Layout::nk;
      dequantize(w, {wd.data(), DType::f32, nk ? N : K, nk ? K : N});
      fmt::print("{:<21} {:>5} {:>10} {:>10} {:>10} {:>10} {:>8}\n",
                 f->name() + (w.host_pack ? " packed" : ""), "M", "quanta ms", "GFLOP/s",
                 "sgemm ms", "GFLOP/s", "ratio");
      for (int64_t m : o.ms) {
        std::vector<float> x = random_floats(static_cast<std::size_t>(m * K), 3);
        std::vector<float> y(static_cast<std::size_t>(m * N));
        // --bf16-x / --f16-x: x and y in that dtype (x rounded from the same values, which sgemm
        // then reads).
        std::vector<uint16_t> xb(half ? x.size() : 0), yb16(half ? y.size() : 0);
        for (std::size_t i = 0; i < xb.size(); ++i) {
          dense::store(xb.data(), xt, i, x[i]);
          x[i] = dense::load(xb.data(), xt, i);
        }
        const ConstMatrixView xv =
            half ? ConstMatrixView{xb.data(), xt, m, K} : ConstMatrixView{x.data(), xt, m, K};
        const MatrixView yv =
            half ? MatrixView{yb16.data(), xt, m, N} : MatrixView{y.data(), xt, m, N};
        const int reps = std::max(3, o.reps / (m >= 64 ? 3 : 1));
        const double s = median_seconds([&] { matmul(xv, w, yv, ctx); }, reps);
        for (std::size_t i = 0; i < yb16.size(); ++i) y[i] = dense::load(yb16.data(), xt, i);
        double bs = 0;
#if defined(QUANTA_PROBE_OPENBLAS)
        std::vector<float> yb(static_cast<std::size_t>(m * N));
        bs = median_seconds(
            [&] {
              cblas_sgemm(CblasRowMajor, CblasNoTrans, nk ? CblasTrans : CblasNoTrans,
                          static_cast<int>(m), static_cast<int>(N), static_cast<int>(K), 1.0f,
                          x.data(), static_cast<int>(K), wd.data(), static_cast<int>(nk ? K : N),
                          0.0f, yb.data(), static_cast<int>(N));
            },
            reps);
        double num = 0, den = 0;
        for (std::size_t i = 0; i < y.size(); ++i) {
          num += (static_cast<double>(y[i]) - yb[i]) * (static_cast<double>(y[i]) - yb[i]);
          den += static_cast<double>(yb[i]) * yb[i];
        }
        if (std::sqrt(num / den) > (half ? 1e-2 : 1e-4))
          fmt::print("  warning: M={} differs from sgemm, rel-L2 {:.2e}\n", m,
                     std::sqrt(num / den));
#endif
        const double flop =
            2.0 * static_cast<double>(m) * static_cast<double>(N) * static_cast<double>(K);
        fmt::print("{:<21} {:>5} {:>10.3f} {:>10.1f} {:>10.3f} {:>10.1f} {:>7.2f}x\n", "", m,
                   s * 1e3, flop / s / 1e9, bs * 1e3, bs > 0 ? flop / bs / 1e9 : 0.0,
                   bs > 0 ? bs / s : 0.0);
      }
    }
  }
  return 0;
}

}  // namespace
}  // namespace quanta::probe

int main(int argc, char** argv) {
  quanta::probe::Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : std::string(); };
    if (a == "--n")
      o.n = std::stoll(next());
    else if (a == "--k")
      o.k = std::stoll(next());
    else if (a == "--threads")
      o.threads = std::stoi(next());
    else if (a == "--reps")
      o.reps = std::stoi(next());
    else if (a == "--isa")
      o.isa = next();
    else if (a == "--kernel")
      o.kernel = next();
    else if (a == "--formats")
      o.formats = quanta::probe::split(next());
    else if (a == "--gemm")
      o.gemm = true;
    else if (a == "--hot")
      o.hot = true;
    else if (a == "--prepack")
      o.prepack = true;
    else if (a == "--bf16-x")
      o.bf16_x = true;
    else if (a == "--f16-x")
      o.f16_x = true;
    else if (a == "--no-gemv")
      o.gemv = false;
    else if (a == "--gemm-n")
      o.gemm_n = std::stoll(next());
    else if (a == "--gemm-k")
      o.gemm_k = std::stoll(next());
    else if (a == "--roof-mb")
      o.roof_mb = std::stoull(next());
    else if (a == "--layout")
      o.layout = next() == "kn" ? quanta::Layout::kn : quanta::Layout::nk;
    else if (a == "--ms") {
      o.ms.clear();
      for (const std::string& s : quanta::probe::split(next())) o.ms.push_back(std::stoll(s));
    } else {
      fmt::print(stderr, "unknown argument {}\n", a);
      return 2;
    }
  }
  try {
    return quanta::probe::run(o);
  } catch (const std::exception& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
}
