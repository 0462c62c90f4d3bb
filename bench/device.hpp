// What the runner needs from a device: its caches and roof, memory, a timer and a dense
// baseline. The CPU device (device_cpu.cpp) is always built; the CUDA device (device_cuda.cpp)
// is built when the library has CUDA and bench/cuda/gpu_timing.hpp exists.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "metrics.hpp"
#include "quanta/ops.hpp"

namespace quanta::bench {

// Bytes in the device's memory (host memory for the CPU).
struct DeviceBuffer {
  std::shared_ptr<void> mem;
  std::size_t bytes = 0;
  void* get() const { return mem.get(); }
};

// How long to time: at least `min_runs` timed runs and `min_seconds` of them, after at least
// `warmup_runs` untimed runs and `warmup_seconds`; never more than `max_runs`. A row whose
// first call shows that min_runs calls would take longer than `max_row_seconds` (0: no limit)
// is not timed: the device returns that one call, and the runner reports the row untimed.
struct TimingPolicy {
  int min_runs = 20;
  double min_seconds = 0.1;
  int warmup_runs = 2;
  double warmup_seconds = 0.02;
  int max_runs = 2000;
  double max_row_seconds = 0;
};

// What a device's timer returns: seconds per call, one entry per timed sample (a CPU call,
// or a GPU graph replay divided by its calls), or a single probe call when the row was over
// its time budget.
struct Samples {
  std::vector<double> seconds;
  bool over_budget = false;
};

// Seconds per run, summarised.
struct Timing {
  double median = 0, min = 0, max = 0;
  int runs = 0;
  int copies = 0;  // operand sets rotated through
};
Timing summarize(std::vector<double> seconds, int copies);
inline Timing summarize(Samples s, int copies) {
  return summarize(std::move(s.seconds), copies);
}

// How many operand copies to rotate so that together they exceed the last-level cache
// kRotationFactor times over, at least 1. Twice was not enough on the 2-core EPYC VM (32 MiB
// L3 reported): OpenBLAS sgemv on 8 MiB weights read 100 GB/s with 1 copy, 63 GB/s with 8
// (67 MiB), 50 GB/s with 16 (134 MiB) and 49 GB/s with 32, its DRAM rate (docs/perf-bench.md).
inline constexpr std::size_t kRotationFactor = 4;
int rotation_copies(std::size_t bytes_per_copy, std::size_t cache_bytes);

struct Baseline {
  std::string name;  // "openblas sgemv f32", "none"
  Timing timing;     // runs 0 when there is no baseline
  double bytes = 0;  // what the baseline itself moves (dense weights + x + y)
};

class Device {
 public:
  virtual ~Device() = default;
  virtual Location location() const = 0;
  virtual std::string name() const = 0;         // "AMD EPYC ... (2 threads)", "NVIDIA H200"
  virtual std::string details() const = 0;      // caches, threads, clocks: for the header
  virtual std::size_t cache_bytes() const = 0;  // the last-level cache to rotate past
  virtual int threads() const { return 0; }
  // Anything that makes this run's timings doubtful (e.g. other processes competing for the
  // CPU), or "".
  virtual std::string warning() const { return ""; }

  // Measured once at start-up (streaming read, dense GEMM); `method` says how.
  virtual Roof measure_roof(std::string& method) = 0;
  // The context ops run with (thread count, stream).
  virtual Context context() const = 0;

  virtual DeviceBuffer alloc(std::size_t bytes) = 0;
  virtual void upload(void* dst, const void* src, std::size_t bytes) = 0;
  virtual void download(void* dst, const void* src, std::size_t bytes) = 0;
  // A copy of host weights in this device's memory (a deep copy on the CPU too, so rotated
  // copies live at different addresses).
  virtual QuantizedMatrix place(const QuantizedMatrix& host) = 0;

  // Times launch(i % copies) per the policy.
  virtual Samples time(const std::function<void(int)>& launch, int copies,
                       const TimingPolicy& policy) = 0;

  // The dense baseline for a problem (same M, N, K, experts; the device's dense GEMM/GEMV).
  virtual Baseline baseline(const ProblemSize& p, const TimingPolicy& policy) = 0;
};

// "cpu" or "cuda" (or "" for the default: CUDA when a GPU is present, else CPU). Throws
// quanta::Error naming the device when it is absent. `threads` is for the CPU (0 = all cores).
std::unique_ptr<Device> make_device(const std::string& which, int threads);

std::unique_ptr<Device> make_cpu_device(int threads);

// OpenBLAS picks its kernels once, at load (OPENBLAS_CORETYPE overrides). 0.3.21 does not know
// Zen 5 and uses its AVX2 (Haswell) kernels there, about half the sgemm rate of its AVX-512
// ones. Returns the stronger OPENBLAS_CORETYPE this CPU could use ("SkylakeX", "Cooperlake"),
// or "" when the loaded kernels already match the CPU; the CPU device's header says so.
std::string openblas_core_upgrade();
std::string openblas_core();
// Null when this build has no CUDA device support (see device_cuda.cpp).
std::unique_ptr<Device> make_cuda_device();
bool cuda_device_built();

}  // namespace quanta::bench
