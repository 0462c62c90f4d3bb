// The CPU device: host memory, a monotonic clock with an explicit thread count, the roof from
// a STREAM-like read and an OpenBLAS sgemm, and OpenBLAS sgemv/sgemm as the dense baseline.
#include <cblas.h>
#include <fmt/format.h>
#include <immintrin.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <thread>

#include "device.hpp"
#include "inputs.hpp"
#include "quanta/error.hpp"

namespace quanta::bench {

namespace {

using Clock = std::chrono::steady_clock;
constexpr std::size_t kHugePage = 2u << 20;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// "32768K" -> bytes.
std::size_t parse_size(std::string s) {
  if (s.empty()) return 0;
  std::size_t mult = 1;
  const char unit = s.back();
  if (unit == 'K') mult = 1024;
  if (unit == 'M') mult = 1024 * 1024;
  if (unit == 'G') mult = 1024ull * 1024 * 1024;
  if (mult != 1) s.pop_back();
  try {
    return static_cast<std::size_t>(std::stoull(s)) * mult;
  } catch (...) {
    return 0;
  }
}

std::string read_line(const std::string& path) {
  std::ifstream f(path);
  std::string line;
  std::getline(f, line);
  return line;
}

struct CacheInfo {
  std::size_t bytes = 0;
  int level = 0;
  std::string source;
};

// The last-level data cache of CPU 0 as the kernel reports it in sysfs (what this VM or
// host partition actually has); sysconf as a fallback (glibc reads CPUID, which on some
// hypervisors reports the whole socket's L3), 32 MiB if neither answers.
CacheInfo last_level_cache() {
  CacheInfo best;
  for (int i = 0; i < 8; ++i) {
    const std::string dir = fmt::format("/sys/devices/system/cpu/cpu0/cache/index{}/", i);
    const std::string type = read_line(dir + "type");
    if (type.empty()) continue;
    if (type != "Unified" && type != "Data") continue;
    const int level = std::atoi(read_line(dir + "level").c_str());
    const std::size_t size = parse_size(read_line(dir + "size"));
    if (level > best.level && size > 0) best = {size, level, "sysfs"};
  }
  if (best.bytes) return best;
  for (auto [name, level] : {std::pair{_SC_LEVEL3_CACHE_SIZE, 3}, {_SC_LEVEL2_CACHE_SIZE, 2}}) {
    const long v = sysconf(name);
    if (v > 0) return {static_cast<std::size_t>(v), level, "sysconf"};
  }
  return {32u << 20, 3, "assumed"};
}

// " OpenBLAS 0.3.21 " -> "0.3.21"
std::string openblas_version() {
  std::string v = OPENBLAS_VERSION;
  v.erase(0, v.find_first_of("0123456789"));
  v.erase(v.find_last_not_of(' ') + 1);
  return v;
}

std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) {
        auto v = line.substr(colon + 1);
        v.erase(0, v.find_first_not_of(' '));
        return v;
      }
    }
  return "unknown CPU";
}

// Streaming read: four independent accumulators so the loop is bound by loads, not by an
// add chain. AVX2 when the CPU has it (on this project's EPYC it beats both 512-bit loads and
// compiler-vectorised code by ~10%), SSE2 otherwise. kL2Prefetch: each line also requested into
// L2 12 KB ahead (on the Zen 4 VM 0-2 GB/s faster than the hardware prefetchers alone, on others
// slower: measure_roof keeps the faster loop).
template <bool kL2Prefetch>
__attribute__((target("avx2"))) uint64_t read_avx2(const std::byte* p, std::size_t bytes) {
  __m256i a = _mm256_setzero_si256(), b = a, c = a, d = a;
  for (std::size_t i = 0; i + 128 <= bytes; i += 128) {
    if constexpr (kL2Prefetch) {
      _mm_prefetch(reinterpret_cast<const char*>(p + i) + 12288, _MM_HINT_T1);
      _mm_prefetch(reinterpret_cast<const char*>(p + i) + 12288 + 64, _MM_HINT_T1);
    }
    a = _mm256_add_epi64(a, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i)));
    b = _mm256_add_epi64(b, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 32)));
    c = _mm256_add_epi64(c, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 64)));
    d = _mm256_add_epi64(d, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 96)));
  }
  a = _mm256_add_epi64(_mm256_add_epi64(a, b), _mm256_add_epi64(c, d));
  uint64_t r[4];  // unsigned: the sum wraps by design
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(r), a);
  return r[0] + r[1] + r[2] + r[3];
}

uint64_t read_sse2(const std::byte* p, std::size_t bytes) {
  __m128i a = _mm_setzero_si128(), b = a, c = a, d = a;
  for (std::size_t i = 0; i + 64 <= bytes; i += 64) {
    a = _mm_add_epi64(a, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i)));
    b = _mm_add_epi64(b, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i + 16)));
    c = _mm_add_epi64(c, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i + 32)));
    d = _mm_add_epi64(d, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i + 48)));
  }
  a = _mm_add_epi64(_mm_add_epi64(a, b), _mm_add_epi64(c, d));
  uint64_t r[2];
  _mm_storeu_si128(reinterpret_cast<__m128i*>(r), a);
  return r[0] + r[1];
}

uint64_t read_all(const std::byte* p, std::size_t bytes, bool l2_prefetch) {
  static const bool avx2 = __builtin_cpu_supports("avx2");
  if (!avx2) return read_sse2(p, bytes);
  return l2_prefetch ? read_avx2<true>(p, bytes) : read_avx2<false>(p, bytes);
}

// Runs body(t) on `threads` threads (t = 0..threads-1) and waits for all.
template <class F>
void on_threads(int threads, F&& body) {
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back([&, t] { body(t); });
  body(0);
  for (auto& th : pool) th.join();
}

class CpuDevice final : public Device {
 public:
  explicit CpuDevice(int threads)
      : threads_(threads > 0 ? threads
                             : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()))),
        cache_(last_level_cache()) {
    openblas_set_num_threads(threads_);
  }

  Location location() const override { return Location::host; }
  std::string name() const override {
    return fmt::format("{} ({} threads)", cpu_model(), threads_);
  }
  std::string details() const override {
    std::string blas = fmt::format("OpenBLAS {} ({} kernels", openblas_version(), openblas_core());
    if (const char* env = std::getenv("OPENBLAS_CORETYPE"))
      blas += fmt::format(", OPENBLAS_CORETYPE={}", env);
    const std::string better = openblas_core_upgrade();
    if (!better.empty())
      blas += fmt::format("; this CPU could use OPENBLAS_CORETYPE={}: a stronger baseline", better);
    blas += ")";
    return fmt::format("L{} cache {} MiB ({}); {} of {} hardware threads; {}", cache_.level,
                       cache_.bytes >> 20, cache_.source, threads_,
                       std::thread::hardware_concurrency(), blas);
  }
  std::size_t cache_bytes() const override { return cache_.bytes; }
  int threads() const override { return threads_; }

  Context context() const override {
    Context c;
    c.threads = threads_;
    return c;
  }

  // A loaded machine starves the timed threads: a kernel that waits for its last worker
  // waits for the scheduler (on the shared 2-core VM, 2-thread rows ran up to 8x slower at
  // load 6.5 than 1-thread rows).
  std::string warning() const override {
    double load = 0;
    std::ifstream f("/proc/loadavg");
    if (!(f >> load)) return "";
    const auto hw = std::max(1u, std::thread::hardware_concurrency());
    if (load + threads_ <= hw + 0.5) return "";
    return fmt::format(
        "load average {:.1f} on {} hardware threads before this run: other processes compete "
        "with the {} timed threads, so timings are noisy (try --threads 1, or a quiet machine)",
        load, hw, threads_);
  }

  Roof measure_roof(std::string& method) override {
    Roof r;
    // Read roof: a buffer 8x the last-level cache (>= 256 MiB), each thread streaming its
    // slice; the best of 10 passes, as STREAM reports, alternating the loop without and with
    // the far L2 prefetch (which one is faster depends on the machine).
    const std::size_t bytes =
        std::max<std::size_t>(256u << 20, 8 * cache_.bytes) & ~std::size_t{255};
    const HostBuffer buf = HostBuffer::allocate(bytes);
    const std::size_t slice = bytes / static_cast<std::size_t>(threads_) & ~std::size_t{255};
    on_threads(threads_, [&](int t) {  // first touch by the thread that reads it
      std::memset(buf.get() + static_cast<std::size_t>(t) * slice, 1, slice);
    });
    std::vector<uint64_t> sink(static_cast<std::size_t>(threads_));
    double best = 1e30;
    for (int pass = 0; pass < 10; ++pass) {
      const auto t0 = Clock::now();
      on_threads(threads_, [&](int t) {
        sink[static_cast<std::size_t>(t)] +=
            read_all(buf.get() + static_cast<std::size_t>(t) * slice, slice, pass % 2 == 1);
      });
      best = std::min(best, seconds_since(t0));
    }
    r.read_gbps = static_cast<double>(slice) * threads_ / best / 1e9;
    // Compute roof: OpenBLAS sgemm on square matrices, best of 5 after a warm-up (the best,
    // since other processes on a shared machine only ever slow it down).
    const int n = 2048;
    const HostMatrix a = random_matrix(DType::f32, n, n, 1), b = random_matrix(DType::f32, n, n, 2);
    HostMatrix c = HostMatrix::allocate(DType::f32, n, n);
    auto gemm = [&] {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f,
                  static_cast<const float*>(a.view().data), n,
                  static_cast<const float*>(b.view().data), n, 0.0f,
                  static_cast<float*>(c.mut().data), n);
    };
    gemm();
    double gbest = 1e30;
    for (int i = 0; i < 5; ++i) {
      const auto t0 = Clock::now();
      gemm();
      gbest = std::min(gbest, seconds_since(t0));
    }
    r.compute_tflops = 2.0 * n * n * n / gbest / 1e12;
    method = fmt::format(
        "read: {} threads stream {} MiB (best of 10, half with a far L2 prefetch); compute: "
        "OpenBLAS sgemm {}^3 f32 (best of 5)",
        threads_, bytes >> 20, n);
    return r;
  }

  DeviceBuffer alloc(std::size_t bytes) override {
    const HostBuffer b = HostBuffer::allocate(bytes);
    return {std::shared_ptr<void>(b.data, b.get()), bytes};
  }
  void upload(void* dst, const void* src, std::size_t bytes) override {
    std::memcpy(dst, src, bytes);
  }
  void download(void* dst, const void* src, std::size_t bytes) override {
    std::memcpy(dst, src, bytes);
  }
  // Weights as a host user keeps them: packed once where the CPU has a packed kernel
  // (quanta::prepack, M = 1..4), so the rows time and check that path.
  QuantizedMatrix place(const QuantizedMatrix& host) override {
    return prepack(clone_host(host), context());
  }

  Samples time(const std::function<void(int)>& launch, int copies, const TimingPolicy& p) override {
    int i = 0;
    const auto w0 = Clock::now();
    launch(i++ % copies);
    const double first = seconds_since(w0);
    if (p.max_row_seconds > 0 && first * (p.min_runs + p.warmup_runs) > p.max_row_seconds)
      return {{first}, true};  // over budget: the runner reports the row untimed
    for (int r = 1; r < p.warmup_runs || seconds_since(w0) < p.warmup_seconds; ++r)
      launch(i++ % copies);
    std::vector<double> s;
    double total = 0;
    while ((static_cast<int>(s.size()) < p.min_runs || total < p.min_seconds) &&
           static_cast<int>(s.size()) < p.max_runs) {
      const auto t0 = Clock::now();
      launch(i++ % copies);
      s.push_back(seconds_since(t0));
      total += s.back();
    }
    return {std::move(s), false};
  }

  Baseline baseline(const ProblemSize& p, const TimingPolicy& policy) override {
    if (p.op == Op::dequantize) return copy_baseline(p, policy);
    return blas_baseline(p, policy);
  }

 private:
  // Dequantize against copying the dense weights it produces (read + write N·K of the dtype).
  Baseline copy_baseline(const ProblemSize& p, const TimingPolicy& policy) {
    const std::size_t bytes = static_cast<std::size_t>(p.n * p.k) * dtype_size(p.dtype);
    const int copies = rotation_copies(2 * bytes, cache_.bytes);
    std::vector<HostBuffer> src, dst;
    for (int c = 0; c < copies; ++c) {
      src.push_back(HostBuffer::allocate(bytes));
      dst.push_back(HostBuffer::allocate(bytes));
      std::memset(src.back().get(), 1, bytes);
      std::memset(dst.back().get(), 0, bytes);
    }
    auto run = [&](int c) {
      const auto cc = static_cast<std::size_t>(c);
      const std::size_t slice = bytes / static_cast<std::size_t>(threads_);
      on_threads(threads_, [&](int t) {
        const std::size_t b = static_cast<std::size_t>(t) * slice;
        const std::size_t e = t == threads_ - 1 ? bytes : b + slice;
        std::memcpy(dst[cc].get() + b, src[cc].get() + b, e - b);
      });
    };
    return {fmt::format("memcpy dense {}", dtype_name(p.dtype)),
            summarize(time(run, copies, policy), copies), 2.0 * static_cast<double>(bytes)};
  }

  // y = x · Wᵀ in f32 on dense weights of the same shape: sgemv at M = 1, sgemm otherwise;
  // a MoE stack runs one sgemm per touched expert on its rows (rows pre-sorted by expert).
  Baseline blas_baseline(const ProblemSize& p, const TimingPolicy& policy) {
    const int64_t experts = experts_touched(p);
    const std::size_t w_bytes = static_cast<std::size_t>(experts * p.n * p.k) * 4;
    const std::size_t xy_bytes = static_cast<std::size_t>(p.m * (p.k + p.n)) * 4;
    const int copies = rotation_copies(w_bytes + xy_bytes, cache_.bytes);
    struct Set {
      HostMatrix w, x, y;
    };
    std::vector<Set> sets;
    for (int c = 0; c < copies; ++c)
      sets.push_back({random_matrix(DType::f32, experts * p.n, p.k, 11 + c, 0.05f, threads_),
                      random_matrix(DType::f32, p.m, p.k, 13 + c, 1.0f, threads_),
                      HostMatrix::allocate(DType::f32, p.m, p.n)});
    // Rows per expert under the runner's routing, contiguous after sorting by expert.
    std::vector<int64_t> rows(static_cast<std::size_t>(experts), 0);
    for (int64_t i = 0; i < p.m; ++i) ++rows[static_cast<std::size_t>(expert_of_row(i, p.experts))];
    const bool nk = p.layout == Layout::nk;
    auto run = [&](int c) {
      const Set& s = sets[static_cast<std::size_t>(c)];
      const auto* w = static_cast<const float*>(s.w.view().data);
      const auto* x = static_cast<const float*>(s.x.view().data);
      auto* y = static_cast<float*>(s.y.mut().data);
      const int N = static_cast<int>(p.n), K = static_cast<int>(p.k);
      for (std::size_t e = 0, r0 = 0; e < rows.size(); r0 += rows[e], ++e) {
        const int M = static_cast<int>(rows[e]);
        const float* we = w + e * static_cast<std::size_t>(N) * K;
        const float* xe = x + r0 * static_cast<std::size_t>(K);
        float* ye = y + r0 * static_cast<std::size_t>(N);
        if (M == 1)
          cblas_sgemv(CblasRowMajor, nk ? CblasNoTrans : CblasTrans, nk ? N : K, nk ? K : N, 1.0f,
                      we, nk ? K : N, xe, 1, 0.0f, ye, 1);
        else
          cblas_sgemm(CblasRowMajor, CblasNoTrans, nk ? CblasTrans : CblasNoTrans, M, N, K, 1.0f,
                      xe, K, we, nk ? K : N, 0.0f, ye, N);
      }
    };
    const bool gemv = p.m == 1 || (p.op == Op::gather_matmul && p.m <= p.experts);
    return {fmt::format("openblas {} f32", gemv ? "sgemv" : "sgemm"),
            summarize(time(run, copies, policy), copies), static_cast<double>(w_bytes + xy_bytes)};
  }

  int threads_;
  CacheInfo cache_;
};

}  // namespace

Timing summarize(std::vector<double> s, int copies) {
  Timing t;
  t.copies = copies;
  t.runs = static_cast<int>(s.size());
  if (s.empty()) return t;
  std::sort(s.begin(), s.end());
  const std::size_t n = s.size();
  t.median = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
  t.min = s.front();
  t.max = s.back();
  return t;
}

int rotation_copies(std::size_t bytes_per_copy, std::size_t cache_bytes) {
  if (bytes_per_copy == 0) return 1;
  const std::size_t want = kRotationFactor * cache_bytes;
  return static_cast<int>(std::max<std::size_t>(1, (want + bytes_per_copy - 1) / bytes_per_copy));
}

std::string openblas_core() {
  return openblas_get_corename();
}

std::string openblas_core_upgrade() {
  const std::string core = openblas_core();
  if (core != "Haswell" && core != "Zen" && core != "Sandybridge") return "";
  __builtin_cpu_init();
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
                      __builtin_cpu_supports("avx512cd");
  if (!avx512) return "";
  return __builtin_cpu_supports("avx512bf16") ? "Cooperlake" : "SkylakeX";
}

std::unique_ptr<Device> make_cpu_device(int threads) {
  return std::make_unique<CpuDevice>(threads);
}

std::unique_ptr<Device> make_device(const std::string& which, int threads) {
  if (which == "cpu") return make_cpu_device(threads);
  if (which == "cuda" || which.empty()) {
    std::unique_ptr<Device> d = make_cuda_device();
    if (d) return d;
    if (which.empty()) return make_cpu_device(threads);
    throw Error(
        fmt::format("[quanta::bench] --device: cuda is not available here ({}); use --device cpu",
                    !cuda_device_built() ? "this build has no CUDA bench support"
                    : !cuda_available()  ? "no CUDA device was found"
                                         : "the CUDA device could not be opened"));
  }
  throw Error(fmt::format("[quanta::bench] --device: '{}' must be cpu or cuda", which));
}

}  // namespace quanta::bench
