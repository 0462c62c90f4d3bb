// GPU timing primitives for the bench runner (`quanta bench`) and quanta_cuda_probe. Plain C++
// interface (no CUDA types: a stream is a void* holding a cudaStream_t), so g++-compiled code can
// call it. Every function throws quanta::Error carrying CUDA's message on a CUDA failure.
//
// Method (docs/perf-cuda.md): CUDA events around CUDA-graph replays, each replay running
// `launches_per_replay` launches that rotate over `copies` operand sets whose bytes together
// exceed twice the 60 MB L2, after untimed warm-up launches; the time of one launch is the
// replay time divided by its launches; median, min and max over >= 20 replays.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "quanta/dtype.hpp"
#include "quanta/matrix.hpp"

// The runner adapter's API version (bench/device_cuda.cpp checks it).
#define QUANTA_GPU_TIMING_API 1

namespace quanta::bench::gpu {

struct DeviceInfo {
  std::string name;            // "NVIDIA H200"
  int compute_capability = 0;  // 90
  int multiprocessors = 0;
  std::size_t l2_bytes = 0;
  std::size_t memory_bytes = 0;
  int memory_clock_khz = 0;
  int memory_bus_bits = 0;
};
DeviceInfo device_info();  // of the current device; throws when there is none

// Device memory freed (cudaFree) when the last owner lets go.
std::shared_ptr<void> device_alloc(std::size_t bytes);
void upload(void* device_dst, const void* host_src, std::size_t bytes);
void download(void* host_dst, const void* device_src, std::size_t bytes);
void synchronize();

// The stream the timing functions launch on (created once, non-blocking). Pass it to
// quanta ops as Context::cuda_stream.
void* timing_stream();

// Operand sets to rotate so that together they exceed 2 x L2 (at least 1).
int rotation_copies(std::size_t bytes_per_copy);

struct TimingOptions {
  int warmup_launches = 3;      // untimed, before capture (also allocates lazy workspaces)
  int replays = 20;             // timed graph replays (>= 20 for a median)
  int launches_per_replay = 0;  // 0: max(copies, 10) rounded up to a multiple of copies
};

struct Timing {
  double median = 0, min = 0, max = 0;  // seconds per launch
  int replays = 0;
  int launches_per_replay = 0;
  int copies = 0;
};

// Times launch(copy, stream) for copy = i % copies: warm-up launches, then one CUDA graph of
// launches_per_replay launches, replayed `replays` times between CUDA events.
Timing time_launches(const std::function<void(int copy, void* stream)>& launch, int copies,
                     const TimingOptions& opt = {});

// Seconds per launch of each timed replay (what time_launches summarises).
std::vector<double> time_launches_raw(const std::function<void(int copy, void* stream)>& launch,
                                      int copies, const TimingOptions& opt = {});

// Streaming-read roof: a kernel reading `bytes` once with 16-byte non-caching loads (several in
// flight per thread), every SM busy. Returns GB/s (1e9 bytes/s) of the median replay.
double measure_read_roof_gbps(std::size_t bytes = std::size_t(2) << 30);

// The same read kernel on operand sets of `bytes` each, rotated past the L2 like a kernel's
// operands and timed the same way: the best a kernel streaming that many bytes once per launch
// could do, launch and ramp included. Seconds per launch.
Timing time_read_at_size(std::size_t bytes, const TimingOptions& opt = {});

// qmv_affine_i8's address pattern (16 rows per block, lanes reading 16-byte pieces of 128-byte
// steps) over a rows x row_bytes matrix with no arithmetic; seconds per launch.
Timing time_pattern_read(int64_t rows, int64_t row_bytes, int warps, const TimingOptions& opt = {});

// Dense GEMM roof: cuBLAS bf16 x bf16 -> bf16 (f32 accumulate) m = n = k = `size`, random data.
// Returns TFLOP/s of the median replay.
double measure_dense_tflops(int size = 8192);

// The cuBLAS dense baseline in the activation dtype: y[M, N] = x[M, K] · W[N, K]ᵀ with W dense in
// `t` (f32 uses plain FP32 math, no TF32), operands rotated past the L2. Returns the timing of
// one call.
Timing cublas_matmul(DType t, int64_t m, int64_t n, int64_t k, const TimingOptions& opt = {});

// Bytes of one dense matrix of dtype t.
inline std::size_t dense_bytes(DType t, int64_t rows, int64_t cols) {
  return static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols) * dtype_size(t);
}

// Fills device memory with random values of dtype t (normal(0, scale)); never all zero.
void fill_random(void* device_dst, DType t, std::size_t count, uint32_t seed, float scale = 1.0f);
// Fills device memory with random bytes.
void fill_random_bytes(void* device_dst, std::size_t bytes, uint32_t seed);
// Each byte becomes (byte & keep) | set: random bytes kept off NaN / Inf encodings.
void mask_bytes(void* device_dst, std::size_t bytes, uint8_t keep, uint8_t set);

// ---- the runner's adapter API (bench/device_cuda.cpp), built on the primitives above --------

struct Info {
  std::string name;
  int compute_capability = 0;
  std::size_t l2_bytes = 0;
  std::size_t global_bytes = 0;
  int sm_count = 0;
};
bool available();                                // a usable CUDA device is present
Info info();                                     // the current device
std::shared_ptr<void> alloc(std::size_t bytes);  // = device_alloc
void* stream();                                  // = timing_stream()

// launch(c) enqueues one call on stream() reading operand copy c. One untimed pass over
// c = 0..copies-1 first (lazy workspaces), then the calls for c = 0..copies-1 are captured into
// one CUDA graph, replayed `warmup` times, then timed with CUDA events per replay until
// min_runs calls and min_seconds have passed (at most 100000 calls). Returns seconds per call
// (replay time / copies), one entry per timed replay.
std::vector<double> time_graph(const std::function<void(int)>& launch, int copies, int warmup,
                               int min_runs, double min_seconds);

double read_roof_gbps();    // measure_read_roof_gbps(), measured once per process
double gemm_roof_tflops();  // measure_dense_tflops(), measured once per process
std::string roof_method();  // one line: how the two were measured

// Dense cuBLAS baseline y[M, N] = x[M, K] · Wᵀ (Layout::nk) or x · W (Layout::kn) in `dtype`
// (f32 accumulate; f32 without TF32), `experts` weight matrices each used by its share of the
// rows (one GEMM per expert), operands rotated past L2, timed like time_graph. `name` receives
// e.g. "cublasGemmEx bf16".
std::vector<double> dense_baseline(int64_t m, int64_t n, int64_t k, int64_t experts, DType dtype,
                                   Layout layout, int min_runs, double min_seconds,
                                   std::string& name);

}  // namespace quanta::bench::gpu
