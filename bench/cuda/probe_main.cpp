// quanta_cuda_probe: times chosen CUDA kernels on chosen shapes through the public ops (with
// Context::kernel forced), beside the cuBLAS dense baseline in the same dtype, and prints GB/s,
// % of the measured read roof and the speedup. A standalone driver while `quanta bench` grows
// its CUDA rows; the timing method is gpu_timing.hpp's.
//
//   quanta_cuda_probe [--formats affine-4b-g64,...|affine-all] [--dtypes bf16,f16]
//                     [--shapes 14336x5120,5120x14336,27648x5120] [--m 1,2,4,...]
//                     [--kernel auto|name] [--layout nk|kn] [--no-cublas] [--check]
//                     [--replays 20] [--read-at-size] [--prepack] [--experts E]
// Shapes are N x K. --check compares each timed result with matmul_generic on the device.
// --experts E times gather_matmul on a stack of E experts of N x K, row r of x with expert
// (r * 7919) % E (every expert's share equal within one row, in a shuffled order).
// --read-at-size also times a plain streaming read of the same bytes (same rotation and timing):
// what launch, ramp-up and tail leave of the roof at that size.
// --prepack runs quanta::prepack on each copy of W first (a device pack where one applies).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "core/kernel.hpp"
#include "cuda/gpu_timing.hpp"
#include "quanta/error.hpp"
#include "quanta/numeric.hpp"
#include "quanta/ops.hpp"

namespace {

using namespace quanta;
namespace gpu = quanta::bench::gpu;

std::vector<std::string> split(const std::string& s, char sep = ',') {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == sep) {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

struct Options {
  std::vector<Format> formats = {Format::affine(4, 64)};
  std::vector<DType> dtypes = {DType::bf16, DType::f16};
  std::vector<std::pair<int64_t, int64_t>> shapes = {{14336, 5120}, {5120, 14336}, {27648, 5120}};
  std::vector<int64_t> ms = {1};
  std::string kernel = "auto";
  Layout layout = Layout::nk;
  bool cublas = true, check = false, api = false, read_at_size = false, prepack = false;
  int replays = 20;
  int64_t experts = 0;  // > 0: gather_matmul over a stack of this many
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw Error("missing value after " + a);
      return argv[++i];
    };
    if (a == "--formats") {
      o.formats.clear();
      for (const std::string& f : split(value())) {
        if (f == "affine-all") {
          for (int b : quanta::detail::kAffineBits)
            for (int g : quanta::detail::kAffineGroups) o.formats.push_back(Format::affine(b, g));
        } else if (auto pf = parse_format(f)) {
          o.formats.push_back(*pf);
        } else {
          throw Error("unknown format " + f);
        }
      }
    } else if (a == "--dtypes") {
      o.dtypes.clear();
      for (const std::string& d : split(value())) o.dtypes.push_back(*parse_dtype(d));
    } else if (a == "--shapes") {
      o.shapes.clear();
      for (const std::string& s : split(value())) {
        const auto p = split(s, 'x');
        o.shapes.push_back({std::stoll(p.at(0)), std::stoll(p.at(1))});
      }
    } else if (a == "--m") {
      o.ms.clear();
      for (const std::string& m : split(value())) o.ms.push_back(std::stoll(m));
    } else if (a == "--kernel") {
      o.kernel = value();
    } else if (a == "--layout") {
      o.layout = value() == "kn" ? Layout::kn : Layout::nk;
    } else if (a == "--no-cublas") {
      o.cublas = false;
    } else if (a == "--read-at-size") {
      o.read_at_size = true;
    } else if (a == "--check") {
      o.check = true;
    } else if (a == "--prepack") {
      o.prepack = true;
    } else if (a == "--api") {
      o.api = true;
    } else if (a == "--experts") {
      o.experts = std::stoll(value());
    } else if (a == "--replays") {
      o.replays = std::stoi(value());
    } else {
      throw Error("unknown argument " + a + " (see the comment at the top of probe_main.cpp)");
    }
  }
  return o;
}

// Random codes, scales and biases on the device (statistics like real affine weights: scales
// of either sign around 0.01, biases around 0).
struct DeviceWeights {
  std::shared_ptr<void> mem;
  QuantizedMatrix w;
};

DeviceWeights random_weights(const Format& f, DType t, int64_t n, int64_t k, Layout layout,
                             uint32_t seed, int64_t batch = 1) {
  Footprint fp = footprint(f, n, k, layout, t);
  fp.code_bytes *= static_cast<std::size_t>(batch);
  fp.scale_bytes *= static_cast<std::size_t>(batch);
  fp.bias_bytes *= static_cast<std::size_t>(batch);
  fp.scale_count *= static_cast<std::size_t>(batch);
  DeviceWeights d;
  d.mem = gpu::device_alloc(fp.total() + 256);
  auto* base = static_cast<std::byte*>(d.mem.get());
  gpu::fill_random_bytes(base, fp.code_bytes, seed);
  std::byte* scales = base + (fp.code_bytes + 255) / 256 * 256;
  std::byte* biases = scales + fp.scale_bytes;
  // Microscaled, fp8 and GGUF codes and scales kept finite, so that --check compares numbers: E4M3
  // codes without the top exponent bit's 0x7F / 0xFF, E5M2 without the all-ones exponent, E8M0
  // scales 2^-7..2^0, E4M3 scales positive 2^-3..2^-1, fp8's f32 scales normal(0, 0.01).
  const SchemeInfo& info = f.info();
  if (info.code == ElementCode::e4m3) gpu::mask_bytes(base, fp.code_bytes, 0xF7, 0);
  if (info.code == ElementCode::e5m2) gpu::mask_bytes(base, fp.code_bytes, 0xFB, 0);
  // GGUF blocks hold their f16 scales among the codes: bits 5 and 6 of every byte cleared keep
  // each f16 field's exponent below 8 (|d| < 2^-7), so q5_K / q6_K rows (d · int8 scale · code up
  // to 2^-7 · 128 · 32 a weight) stay inside f16's range over K of thousands (with bit 6 alone,
  // |d| < 2, their f16 outputs overflowed to inf and the checks read NaN).
  if (info.family == Family::gguf) gpu::mask_bytes(base, fp.code_bytes, 0x9F, 0);
  if (fp.scale_bytes) {
    if (f.scheme == Scheme::affine) {
      gpu::fill_random(scales, t, fp.scale_count, seed + 1, 0.01f);
      gpu::fill_random(biases, t, fp.scale_count, seed + 2, 0.05f);
    } else if (info.family == Family::fp8) {
      gpu::fill_random(scales, DType::f32, fp.scale_bytes / 4, seed + 1, 0.01f);
    } else {
      gpu::fill_random_bytes(scales, fp.scale_bytes, seed + 1);
      if (info.scale == ScaleEncoding::e8m0) gpu::mask_bytes(scales, fp.scale_bytes, 0x0F, 0x78);
      if (info.scale == ScaleEncoding::e4m3) gpu::mask_bytes(scales, fp.scale_bytes, 0x37, 0x20);
    }
  }
  d.w = QuantizedMatrix::wrap(f, n, k, t, layout, Location::device, {base, fp.code_bytes},
                              {scales, fp.scale_bytes}, {biases, fp.bias_bytes}, batch);
  return d;
}

double rel_l2(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += double(b[i]) * b[i];
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

std::vector<float> to_f32(const std::vector<unsigned char>& bytes, DType t) {
  std::vector<float> v(bytes.size() / dtype_size(t));
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (t == DType::f32) {
      std::memcpy(&v[i], bytes.data() + 4 * i, 4);
    } else {
      uint16_t h;
      std::memcpy(&h, bytes.data() + 2 * i, 2);
      v[i] = t == DType::f16 ? f16_bits_to_f32(h) : bf16_bits_to_f32(h);
    }
  }
  return v;
}

// Exercises the adapter API bench/device_cuda.cpp uses (gpu_timing.hpp, second half).
int api_selftest() {
  const gpu::Info inf = gpu::info();
  fmt::print("api: available={} name='{}' sm_{} sms={} l2={} MiB mem={} GiB\n", gpu::available(),
             inf.name, inf.compute_capability, inf.sm_count, inf.l2_bytes >> 20,
             inf.global_bytes >> 30);
  fmt::print("api: read roof {:.0f} GB/s, gemm roof {:.0f} TFLOP/s ({})\n", gpu::read_roof_gbps(),
             gpu::gemm_roof_tflops(), gpu::roof_method());
  const int64_t n = 14336, k = 5120;
  auto w = random_weights(Format::affine(4, 64), DType::bf16, n, k, Layout::nk, 5);
  auto x = gpu::alloc(gpu::dense_bytes(DType::bf16, 1, k));
  auto y = gpu::alloc(gpu::dense_bytes(DType::bf16, 1, n));
  gpu::fill_random(x.get(), DType::bf16, static_cast<std::size_t>(k), 3);
  Context ctx;
  ctx.cuda_stream = gpu::stream();
  const std::vector<double> t = gpu::time_graph(
      [&](int) {
        matmul(ConstMatrixView{x.get(), DType::bf16, 1, k, Location::device}, w.w,
               MatrixView{y.get(), DType::bf16, 1, n, Location::device}, ctx);
      },
      1, 3, 20, 0.01);
  std::vector<double> s = t;
  std::sort(s.begin(), s.end());
  fmt::print("api: time_graph int4 M=1 {}x{}: {} replays, median {:.2f} us\n", n, k, s.size(),
             s[s.size() / 2] * 1e6);
  for (Layout l : {Layout::nk, Layout::kn})
    for (int64_t experts : {1, 4}) {
      std::string name;
      std::vector<double> b =
          gpu::dense_baseline(16, 4096, 4096, experts, DType::bf16, l, 20, 0.01, name);
      std::sort(b.begin(), b.end());
      fmt::print(
          "api: dense_baseline M=16 4096x4096 experts={} {}: {} ({} replays) median {:.2f} us\n",
          experts, l == Layout::nk ? "nk" : "kn", name, b.size(), b[b.size() / 2] * 1e6);
    }
  return 0;
}

int run(const Options& o) {
  if (o.api) return api_selftest();
  const gpu::DeviceInfo dev = gpu::device_info();
  const double roof = gpu::measure_read_roof_gbps();
  const double dense = gpu::measure_dense_tflops();
  fmt::print(
      "device: {} (sm_{}, {} SMs, L2 {} MB); read roof {:.0f} GB/s; bf16 GEMM {:.0f} TFLOP/s\n",
      dev.name, dev.compute_capability, dev.multiprocessors, dev.l2_bytes >> 20, roof, dense);
  fmt::print(
      "{:<16} {:<15} {:<5} {:>5} {:>6} {:>6} {:>9} {:>9} {:>9} {:>7} {:>6} {:>8} {:>8} {:>7} {:>8} "
      "{:>9}\n",
      "kernel", "format", "dtype", "M", "N", "K", "med_us", "min_us", "max_us", "GB/s", "roof%",
      "TFLOP/s", "cublas_us", "speedup", "vs_M1", "check");
  gpu::TimingOptions topt;
  topt.replays = o.replays;
  std::map<std::string, double> m1_time;
  for (const auto& [n, k] : o.shapes)
    for (const Format& f : o.formats)
      for (DType t : o.dtypes) {
        const Footprint fp = footprint(f, n, k, o.layout, t);
        const int64_t batch = std::max<int64_t>(o.experts, 1);
        const int copies = gpu::rotation_copies(fp.total() * static_cast<std::size_t>(batch));
        std::vector<DeviceWeights> ws;
        for (int c = 0; c < copies; ++c)
          ws.push_back(
              random_weights(f, t, n, k, o.layout, 1000u + static_cast<uint32_t>(c), batch));
        if (o.prepack) {
          Context pc;
          pc.cuda_stream = gpu::timing_stream();
          for (DeviceWeights& dw : ws) dw.w = quanta::prepack(dw.w, pc);
        }
        for (int64_t m : o.ms) {
          std::vector<std::shared_ptr<void>> xs, ys;
          for (int c = 0; c < copies; ++c) {
            xs.push_back(gpu::device_alloc(gpu::dense_bytes(t, m, k)));
            ys.push_back(gpu::device_alloc(gpu::dense_bytes(t, m, n)));
            gpu::fill_random(xs.back().get(), t, static_cast<std::size_t>(m * k), 77u + c);
          }
          Context ctx;
          ctx.cuda_stream = gpu::timing_stream();
          ctx.kernel = o.kernel;
          const bool gather = o.experts > 0;
          std::shared_ptr<void> ids;
          if (gather) {
            std::vector<int32_t> h(static_cast<std::size_t>(m));
            for (int64_t r = 0; r < m; ++r) h[r] = static_cast<int32_t>((r * 7919) % o.experts);
            ids = gpu::device_alloc(h.size() * sizeof(int32_t));
            gpu::upload(ids.get(), h.data(), h.size() * sizeof(int32_t));
          }
          const int32_t* ids_d = static_cast<const int32_t*>(ids.get());
          const Problem p =
              matmul_problem(gather ? Op::gather_matmul : Op::matmul,
                             ConstMatrixView{xs[0].get(), t, m, k, Location::device}, ws[0].w);
          std::string name;
          try {
            name = std::string(select_kernel(p, o.kernel).name);
          } catch (const Error& e) {
            fmt::print("{:<16} {:<15} {:<5} {:>5} {:>6} {:>6}  skipped: {}\n", o.kernel, f.name(),
                       dtype_name(t), m, n, k, e.what());
            continue;
          }
          auto launch = [&](int c, void* s) {
            Context cx = ctx;
            cx.cuda_stream = s;
            const ConstMatrixView xv{xs[c].get(), t, m, k, Location::device};
            const MatrixView yv{ys[c].get(), t, m, n, Location::device};
            if (gather)
              gather_matmul(xv, ws[c].w, ids_d, yv, cx);
            else
              matmul(xv, ws[c].w, yv, cx);
          };
          const gpu::Timing tm = gpu::time_launches(launch, copies, topt);
          // A gather reads the experts its rows use, each once at best.
          const double bytes =
              static_cast<double>(fp.total() * static_cast<std::size_t>(std::min(batch, m)) +
                                  gpu::dense_bytes(t, m, k) + gpu::dense_bytes(t, m, n));
          const double gbs = bytes / tm.median / 1e9;
          const double tflops = 2.0 * m * n * k / tm.median / 1e12;
          std::string cub = "-", speed = "-";
          if (o.cublas && !gather) {
            const gpu::Timing cb = gpu::cublas_matmul(t, m, n, k, topt);
            cub = fmt::format("{:.2f}", cb.median * 1e6);
            speed = fmt::format("{:.2f}x", cb.median / tm.median);
          }
          const std::string key =
              fmt::format("{}/{}/{}/{}x{}", name, f.name(), dtype_name(t), n, k);
          if (m == 1) m1_time[key] = tm.median;
          const std::string vs1 =
              m1_time.count(key) ? fmt::format("{:.3f}", tm.median / m1_time[key]) : "-";
          std::string chk = "-";
          if (o.check) {
            std::vector<unsigned char> a(gpu::dense_bytes(t, m, n)), b(a.size());
            launch(0, gpu::timing_stream());
            gpu::synchronize();
            gpu::download(a.data(), ys[0].get(), a.size());
            Context g = ctx;
            g.kernel = gather ? "gather_matmul_generic" : "matmul_generic";
            const ConstMatrixView xv{xs[0].get(), t, m, k, Location::device};
            const MatrixView yv{ys[0].get(), t, m, n, Location::device};
            if (gather)
              gather_matmul(xv, ws[0].w, ids_d, yv, g);
            else
              matmul(xv, ws[0].w, yv, g);
            gpu::synchronize();
            gpu::download(b.data(), ys[0].get(), b.size());
            chk = fmt::format("{:.1e}", rel_l2(to_f32(a, t), to_f32(b, t)));
          }
          fmt::print(
              "{:<16} {:<15} {:<5} {:>5} {:>6} {:>6} {:>9.2f} {:>9.2f} {:>9.2f} {:>7.0f} {:>6.1f} "
              "{:>8.1f} {:>8} {:>7} {:>8} {:>9}\n",
              name, f.name(), dtype_name(t), m, n, k, tm.median * 1e6, tm.min * 1e6, tm.max * 1e6,
              gbs, 100.0 * gbs / roof, tflops, cub, speed, vs1, chk);
          if (o.read_at_size) {
            const gpu::Timing rd = gpu::time_read_at_size(static_cast<std::size_t>(bytes), topt);
            fmt::print(
                "{:<16} plain read of the same {:.1f} MB: {:.2f} us = {:.0f} GB/s ({:.1f}% "
                "of roof); kernel at {:.1f}% of that\n",
                "", bytes / 1e6, rd.median * 1e6, bytes / rd.median / 1e9,
                100.0 * bytes / rd.median / 1e9 / roof, 100.0 * rd.median / tm.median);
            if (f.scheme == Scheme::affine && o.layout == Layout::nk) {
              const int64_t row_bytes = k * f.bits / 8;
              for (int w : {1, 2, 4}) {
                const gpu::Timing pr = gpu::time_pattern_read(n, row_bytes, w, topt);
                fmt::print(
                    "{:<16} its codes read in qmv_affine_i8's pattern, {} warps: {:.2f} us = "
                    "{:.0f} GB/s\n",
                    "", w, pr.median * 1e6, n * row_bytes / pr.median / 1e9);
              }
            }
          }
          std::fflush(stdout);
        }
      }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (!cuda_available()) {
      fmt::print(stderr, "quanta_cuda_probe: no CUDA device\n");
      return 2;
    }
    return run(parse(argc, argv));
  } catch (const std::exception& e) {
    fmt::print(stderr, "quanta_cuda_probe: {}\n", e.what());
    return 1;
  }
}
