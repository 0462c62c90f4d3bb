// GPU timing primitives (see gpu_timing.hpp): events around CUDA-graph replays, L2 rotation,
// the streaming-read roof kernel and the cuBLAS dense baselines.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <mutex>
#include <string>
#include <type_traits>

#include "cuda/gpu_timing.hpp"
#include "cuda/runtime.cuh"
#include "quanta/error.hpp"

namespace quanta::bench::gpu {

namespace {

void check_cublas(cublasStatus_t s, const char* call) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw Error(std::string("[quanta::bench] ") + call + " failed: cuBLAS status " +
                std::to_string(static_cast<int>(s)));
}
#define QUANTA_CUBLAS_CHECK(call) check_cublas((call), #call)

__device__ __forceinline__ uint32_t hash32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}

template <class T>
__global__ void fill_random_kernel(T* p, std::size_t n, uint32_t seed, float scale) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const uint32_t h1 =
        hash32(static_cast<uint32_t>(i) * 2654435761u ^ seed ^ static_cast<uint32_t>(i >> 32));
    const uint32_t h2 = hash32(h1 ^ 0x9e3779b9u);
    const float u1 = (static_cast<float>(h1 >> 8) + 1.0f) * (1.0f / 16777216.0f);
    const float u2 = static_cast<float>(h2 >> 8) * (1.0f / 16777216.0f);
    const float v = scale * sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2);  // Box-Muller
    if constexpr (sizeof(T) == 4)
      p[i] = v;
    else if constexpr (std::is_same_v<T, __half>)
      p[i] = __float2half_rn(v);
    else
      p[i] = __float2bfloat16_rn(v);
  }
}

__global__ void fill_bytes_kernel(uint32_t* p, std::size_t words, uint32_t seed) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < words;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    p[i] = hash32(static_cast<uint32_t>(i) ^ seed * 0x9e3779b9u ^
                  static_cast<uint32_t>(i >> 32) * 31u);
}

// Each thread keeps 4 independent 16-byte streaming loads in flight per iteration.
__global__ void __launch_bounds__(256)
    read_roof_kernel(const uint4* p, std::size_t n, uint32_t* sink) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  uint32_t acc = 0;
  std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  for (; i + 3 * stride < n; i += 4 * stride) {
    const uint4 a = __ldcs(p + i), b = __ldcs(p + i + stride), c = __ldcs(p + i + 2 * stride),
                d = __ldcs(p + i + 3 * stride);
    acc ^= (a.x ^ a.y ^ a.z ^ a.w) + (b.x ^ b.y ^ b.z ^ b.w) + (c.x ^ c.y ^ c.z ^ c.w) +
           (d.x ^ d.y ^ d.z ^ d.w);
  }
  for (; i < n; i += stride) {
    const uint4 a = __ldcs(p + i);
    acc ^= a.x ^ a.y ^ a.z ^ a.w;
  }
  if (acc == 0x9e3779b9u) sink[0] = acc;  // keeps the loads alive
}

// The address pattern of qmv_affine_i8 without its arithmetic: a block of `warps` warps owns 16
// rows of a row-major matrix; lane (g, q) of warp w reads, for steps s = w, w + warps, ..., the
// 32-byte piece q of 128-byte step s of rows g and g + 8 as two 16-byte loads each.
__global__ void pattern_read_kernel(const uint8_t* p, int64_t row_bytes, int rows, uint32_t* sink) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  const int g = lane >> 2, q = lane & 3;
  const int r_lo = min(static_cast<int>(blockIdx.x) * 16 + g, rows - 1);
  const int r_hi = min(static_cast<int>(blockIdx.x) * 16 + g + 8, rows - 1);
  const uint8_t* lo = p + r_lo * row_bytes + 32 * q;
  const uint8_t* hi = p + r_hi * row_bytes + 32 * q;
  const int steps = static_cast<int>(row_bytes / 128);
  uint32_t acc = 0;
#pragma unroll 2
  for (int s = warp; s < steps; s += warps) {
    const uint4 a = *reinterpret_cast<const uint4*>(lo + 128 * s);
    const uint4 b = *reinterpret_cast<const uint4*>(lo + 128 * s + 16);
    const uint4 c = *reinterpret_cast<const uint4*>(hi + 128 * s);
    const uint4 d = *reinterpret_cast<const uint4*>(hi + 128 * s + 16);
    acc ^= (a.x ^ a.y ^ a.z ^ a.w) + (b.x ^ b.y ^ b.z ^ b.w) + (c.x ^ c.y ^ c.z ^ c.w) +
           (d.x ^ d.y ^ d.z ^ d.w);
  }
  if (acc == 0x9e3779b9u) sink[0] = acc;
}

int grid_for(std::size_t n) {
  const DeviceInfo d = device_info();
  return static_cast<int>(
      std::min<std::size_t>((n + 255) / 256, static_cast<std::size_t>(d.multiprocessors) * 16));
}

cublasHandle_t cublas() {
  static cublasHandle_t h = [] {
    cublasHandle_t handle;
    QUANTA_CUBLAS_CHECK(cublasCreate(&handle));
    // An explicit workspace: cuBLAS must not allocate while a graph is being captured.
    static std::shared_ptr<void> ws = device_alloc(64u << 20);
    QUANTA_CUBLAS_CHECK(cublasSetWorkspace(handle, ws.get(), 64u << 20));
    return handle;
  }();
  return h;
}

cudaDataType_t cuda_type(DType t) {
  return t == DType::f32 ? CUDA_R_32F : t == DType::f16 ? CUDA_R_16F : CUDA_R_16BF;
}

// y[M, N] = x[M, K] · W[N, K]ᵀ as column-major: yᵀ (N x M) = (W as K x N)ᵀ · (x as K x M); for
// W stored [K, N] (kn) W is already N x K column-major.
void gemm(DType t, int64_t m, int64_t n, int64_t k, const void* w, const void* x, void* y,
          void* stream, bool kn = false) {
  cublasHandle_t h = cublas();
  QUANTA_CUBLAS_CHECK(cublasSetStream(h, static_cast<cudaStream_t>(stream)));
  const float alpha = 1.0f, beta = 0.0f;
  QUANTA_CUBLAS_CHECK(cublasGemmEx(h, kn ? CUBLAS_OP_N : CUBLAS_OP_T, CUBLAS_OP_N,
                                   static_cast<int>(n), static_cast<int>(m), static_cast<int>(k),
                                   &alpha, w, cuda_type(t), static_cast<int>(kn ? n : k), x,
                                   cuda_type(t), static_cast<int>(k), &beta, y, cuda_type(t),
                                   static_cast<int>(n), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

}  // namespace

DeviceInfo device_info() {
  static std::once_flag once;
  static DeviceInfo info;
  std::call_once(once, [] {
    int dev = 0;
    QUANTA_CUDA_CHECK(cudaGetDevice(&dev));
    cudaDeviceProp p{};
    QUANTA_CUDA_CHECK(cudaGetDeviceProperties(&p, dev));
    info.name = p.name;
    info.compute_capability = p.major * 10 + p.minor;
    info.multiprocessors = p.multiProcessorCount;
    info.l2_bytes = static_cast<std::size_t>(p.l2CacheSize);
    info.memory_bytes = p.totalGlobalMem;
    QUANTA_CUDA_CHECK(
        cudaDeviceGetAttribute(&info.memory_clock_khz, cudaDevAttrMemoryClockRate, dev));
    QUANTA_CUDA_CHECK(
        cudaDeviceGetAttribute(&info.memory_bus_bits, cudaDevAttrGlobalMemoryBusWidth, dev));
  });
  return info;
}

std::shared_ptr<void> device_alloc(std::size_t bytes) {
  void* p = nullptr;
  QUANTA_CUDA_CHECK(cudaMalloc(&p, bytes ? bytes : 1));
  return std::shared_ptr<void>(p, [](void* q) { (void)cudaFree(q); });
}

void upload(void* dst, const void* src, std::size_t bytes) {
  QUANTA_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
  // From pageable memory cudaMemcpy may return before the DMA lands, and kernels run on the
  // non-blocking timing stream, which does not wait for it: a poisoned output uploaded this way
  // could overwrite a kernel's result (seen as f32 dequantize rows failing at random).
  QUANTA_CUDA_CHECK(cudaDeviceSynchronize());
}
void download(void* dst, const void* src, std::size_t bytes) {
  QUANTA_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
}
void synchronize() {
  QUANTA_CUDA_CHECK(cudaDeviceSynchronize());
}

void* timing_stream() {
  static cudaStream_t s = [] {
    cudaStream_t st;
    QUANTA_CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    return st;
  }();
  return s;
}

int rotation_copies(std::size_t bytes_per_copy) {
  const std::size_t want = 2 * device_info().l2_bytes;
  if (bytes_per_copy == 0) return 1;
  return static_cast<int>(std::max<std::size_t>(1, (want + bytes_per_copy - 1) / bytes_per_copy));
}

std::vector<double> time_launches_raw(const std::function<void(int, void*)>& launch, int copies,
                                      const TimingOptions& opt) {
  copies = std::max(copies, 1);
  auto stream = static_cast<cudaStream_t>(timing_stream());
  for (int i = 0; i < opt.warmup_launches; ++i) launch(i % copies, stream);
  QUANTA_CUDA_CHECK(cudaStreamSynchronize(stream));
  int per = opt.launches_per_replay;
  if (per <= 0) per = (std::max(copies, 10) + copies - 1) / copies * copies;

  cudaGraph_t graph = nullptr;
  QUANTA_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed));
  try {
    for (int i = 0; i < per; ++i) launch(i % copies, stream);
  } catch (...) {
    (void)cudaStreamEndCapture(stream, &graph);
    if (graph) (void)cudaGraphDestroy(graph);
    (void)cudaGetLastError();
    throw;
  }
  QUANTA_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec = nullptr;
  const cudaError_t inst = cudaGraphInstantiate(&exec, graph, 0);
  (void)cudaGraphDestroy(graph);
  QUANTA_CUDA_CHECK(inst);
  std::vector<cudaEvent_t> ev(2 * static_cast<std::size_t>(opt.replays));
  for (auto& e : ev) QUANTA_CUDA_CHECK(cudaEventCreate(&e));
  std::vector<double> out;
  try {
    // Untimed replays first, in windows of 4, until at least 25 ms have run and a window is
    // within 2% of the one before (at most 250 ms): the GPU idles at a low clock while the host
    // prepares operands and ramps up under load, and ~10 ms of timed replays caught the ramp
    // (rows up to 1.3x slower, a process's first the most; docs/perf-cuda.md).
    if (opt.replays > 0) {
      float total = 0, last = 0;  // (ev[0], ev[1] are free until the timed replays)
      for (int window = 0; window < 4000 && total < 250.0f; ++window) {
        QUANTA_CUDA_CHECK(cudaEventRecord(ev[0], stream));
        for (int i = 0; i < 4; ++i) QUANTA_CUDA_CHECK(cudaGraphLaunch(exec, stream));
        QUANTA_CUDA_CHECK(cudaEventRecord(ev[1], stream));
        QUANTA_CUDA_CHECK(cudaEventSynchronize(ev[1]));
        float ms = 0;
        QUANTA_CUDA_CHECK(cudaEventElapsedTime(&ms, ev[0], ev[1]));
        total += ms;
        if (total >= 25.0f && last > 0 && ms <= 1.02f * last && ms >= 0.98f * last) break;
        last = ms;
      }
    }
    for (int r = 0; r < opt.replays; ++r) {
      QUANTA_CUDA_CHECK(cudaEventRecord(ev[2 * r], stream));
      QUANTA_CUDA_CHECK(cudaGraphLaunch(exec, stream));
      QUANTA_CUDA_CHECK(cudaEventRecord(ev[2 * r + 1], stream));
    }
    QUANTA_CUDA_CHECK(cudaStreamSynchronize(stream));
    for (int r = 0; r < opt.replays; ++r) {
      float ms = 0;
      QUANTA_CUDA_CHECK(cudaEventElapsedTime(&ms, ev[2 * r], ev[2 * r + 1]));
      out.push_back(ms * 1e-3 / per);
    }
  } catch (...) {
    for (auto& e : ev) (void)cudaEventDestroy(e);
    (void)cudaGraphExecDestroy(exec);
    throw;
  }
  for (auto& e : ev) (void)cudaEventDestroy(e);
  (void)cudaGraphExecDestroy(exec);
  return out;
}

Timing time_launches(const std::function<void(int, void*)>& launch, int copies,
                     const TimingOptions& opt) {
  std::vector<double> s = time_launches_raw(launch, copies, opt);
  Timing t;
  t.replays = static_cast<int>(s.size());
  t.copies = std::max(copies, 1);
  t.launches_per_replay = opt.launches_per_replay > 0
                              ? opt.launches_per_replay
                              : (std::max(t.copies, 10) + t.copies - 1) / t.copies * t.copies;
  if (s.empty()) return t;
  std::sort(s.begin(), s.end());
  t.min = s.front();
  t.max = s.back();
  t.median = s.size() % 2 ? s[s.size() / 2] : 0.5 * (s[s.size() / 2 - 1] + s[s.size() / 2]);
  return t;
}

double measure_read_roof_gbps(std::size_t bytes) {
  bytes = bytes / 16 * 16;
  auto buf = device_alloc(bytes);
  auto sink = device_alloc(sizeof(uint32_t));
  fill_random_bytes(buf.get(), bytes, 7);
  const std::size_t n = bytes / 16;
  int per_sm = 0;
  QUANTA_CUDA_CHECK(
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, read_roof_kernel, 256, 0));
  const int grid = device_info().multiprocessors * std::max(per_sm, 1);
  TimingOptions o;
  o.launches_per_replay = 4;
  const Timing t = time_launches(
      [&](int, void* s) {
        read_roof_kernel<<<grid, 256, 0, static_cast<cudaStream_t>(s)>>>(
            static_cast<const uint4*>(buf.get()), n, static_cast<uint32_t*>(sink.get()));
        QUANTA_CUDA_CHECK_LAUNCH();
      },
      1, o);
  return static_cast<double>(bytes) / t.median / 1e9;
}

Timing time_read_at_size(std::size_t bytes, const TimingOptions& opt) {
  bytes = std::max<std::size_t>(bytes / 16 * 16, 16);
  const int copies = rotation_copies(bytes);
  std::vector<std::shared_ptr<void>> bufs;
  for (int i = 0; i < copies; ++i) {
    bufs.push_back(device_alloc(bytes));
    fill_random_bytes(bufs.back().get(), bytes, 7 + static_cast<uint32_t>(i));
  }
  auto sink = device_alloc(sizeof(uint32_t));
  int per_sm = 0;
  QUANTA_CUDA_CHECK(
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, read_roof_kernel, 256, 0));
  const std::size_t n = bytes / 16;
  const int grid = static_cast<int>(std::min<std::size_t>(
      (n + 255) / 256, static_cast<std::size_t>(device_info().multiprocessors) *
                           static_cast<std::size_t>(std::max(per_sm, 1))));
  return time_launches(
      [&](int c, void* s) {
        read_roof_kernel<<<grid, 256, 0, static_cast<cudaStream_t>(s)>>>(
            static_cast<const uint4*>(bufs[static_cast<std::size_t>(c)].get()), n,
            static_cast<uint32_t*>(sink.get()));
        QUANTA_CUDA_CHECK_LAUNCH();
      },
      copies, opt);
}

Timing time_pattern_read(int64_t rows, int64_t row_bytes, int warps, const TimingOptions& opt) {
  const std::size_t bytes = static_cast<std::size_t>(rows * row_bytes);
  const int copies = rotation_copies(bytes);
  std::vector<std::shared_ptr<void>> bufs;
  for (int i = 0; i < copies; ++i) {
    bufs.push_back(device_alloc(bytes));
    fill_random_bytes(bufs.back().get(), bytes, 9 + static_cast<uint32_t>(i));
  }
  auto sink = device_alloc(sizeof(uint32_t));
  return time_launches(
      [&](int c, void* s) {
        pattern_read_kernel<<<static_cast<unsigned>((rows + 15) / 16), 32 * warps, 0,
                              static_cast<cudaStream_t>(s)>>>(
            static_cast<const uint8_t*>(bufs[static_cast<std::size_t>(c)].get()), row_bytes,
            static_cast<int>(rows), static_cast<uint32_t*>(sink.get()));
        QUANTA_CUDA_CHECK_LAUNCH();
      },
      copies, opt);
}

double measure_dense_tflops(int size) {
  const int64_t s = size;
  auto a = device_alloc(dense_bytes(DType::bf16, s, s));
  auto b = device_alloc(dense_bytes(DType::bf16, s, s));
  auto c = device_alloc(dense_bytes(DType::bf16, s, s));
  fill_random(a.get(), DType::bf16, static_cast<std::size_t>(s * s), 1);
  fill_random(b.get(), DType::bf16, static_cast<std::size_t>(s * s), 2);
  TimingOptions o;
  o.launches_per_replay = 2;
  const Timing t = time_launches(
      [&](int, void* st) { gemm(DType::bf16, s, s, s, a.get(), b.get(), c.get(), st); }, 1, o);
  return 2.0 * s * s * s / t.median / 1e12;
}

Timing cublas_matmul(DType t, int64_t m, int64_t n, int64_t k, const TimingOptions& opt) {
  const std::size_t wb = dense_bytes(t, n, k), xb = dense_bytes(t, m, k), yb = dense_bytes(t, m, n);
  const int copies = rotation_copies(wb + xb + yb);
  std::vector<std::shared_ptr<void>> w, x, y;
  for (int i = 0; i < copies; ++i) {
    w.push_back(device_alloc(wb));
    x.push_back(device_alloc(xb));
    y.push_back(device_alloc(yb));
    fill_random(w.back().get(), t, static_cast<std::size_t>(n * k), 11 + i, 0.05f);
    fill_random(x.back().get(), t, static_cast<std::size_t>(m * k), 101 + i);
  }
  return time_launches(
      [&](int i, void* s) { gemm(t, m, n, k, w[i].get(), x[i].get(), y[i].get(), s); }, copies,
      opt);
}

void fill_random(void* dst, DType t, std::size_t count, uint32_t seed, float scale) {
  const int grid = grid_for(count);
  switch (t) {
    case DType::f32:
      fill_random_kernel<<<grid, 256>>>(static_cast<float*>(dst), count, seed, scale);
      break;
    case DType::f16:
      fill_random_kernel<<<grid, 256>>>(static_cast<__half*>(dst), count, seed, scale);
      break;
    case DType::bf16:
      fill_random_kernel<<<grid, 256>>>(static_cast<__nv_bfloat16*>(dst), count, seed, scale);
      break;
  }
  QUANTA_CUDA_CHECK_LAUNCH();
  QUANTA_CUDA_CHECK(cudaDeviceSynchronize());
}

void fill_random_bytes(void* dst, std::size_t bytes, uint32_t seed) {
  const std::size_t words = bytes / 4;
  if (words) {
    fill_bytes_kernel<<<grid_for(words), 256>>>(static_cast<uint32_t*>(dst), words, seed);
    QUANTA_CUDA_CHECK_LAUNCH();
  }
  if (bytes % 4) {
    const uint32_t tail = 0xA5A5A5A5u ^ seed;
    QUANTA_CUDA_CHECK(cudaMemcpy(static_cast<uint8_t*>(dst) + words * 4, &tail, bytes % 4,
                                 cudaMemcpyHostToDevice));
  }
  QUANTA_CUDA_CHECK(cudaDeviceSynchronize());
}

__global__ void mask_bytes_kernel(uint8_t* p, std::size_t n, uint8_t keep, uint8_t set) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    p[i] = static_cast<uint8_t>((p[i] & keep) | set);
}

void mask_bytes(void* dst, std::size_t bytes, uint8_t keep, uint8_t set) {
  if (!bytes) return;
  mask_bytes_kernel<<<grid_for(bytes), 256>>>(static_cast<uint8_t*>(dst), bytes, keep, set);
  QUANTA_CUDA_CHECK_LAUNCH();
  QUANTA_CUDA_CHECK(cudaDeviceSynchronize());
}

// ---- the runner's adapter API -----------------------------------------------------------------

bool available() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return count > 0;
}

Info info() {
  const DeviceInfo d = device_info();
  return {d.name, d.compute_capability, d.l2_bytes, d.memory_bytes, d.multiprocessors};
}

std::shared_ptr<void> alloc(std::size_t bytes) {
  return device_alloc(bytes);
}
void* stream() {
  return timing_stream();
}

std::vector<double> time_graph(const std::function<void(int)>& launch, int copies, int warmup,
                               int min_runs, double min_seconds) {
  copies = std::max(copies, 1);
  auto s = static_cast<cudaStream_t>(timing_stream());
  for (int c = 0; c < copies; ++c) launch(c);  // lazy allocations happen outside the capture
  QUANTA_CUDA_CHECK(cudaStreamSynchronize(s));
  cudaGraph_t graph = nullptr;
  QUANTA_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
  try {
    for (int c = 0; c < copies; ++c) launch(c);
  } catch (...) {
    (void)cudaStreamEndCapture(s, &graph);
    if (graph) (void)cudaGraphDestroy(graph);
    (void)cudaGetLastError();
    throw;
  }
  QUANTA_CUDA_CHECK(cudaStreamEndCapture(s, &graph));
  cudaGraphExec_t exec = nullptr;
  const cudaError_t inst = cudaGraphInstantiate(&exec, graph, 0);
  (void)cudaGraphDestroy(graph);
  QUANTA_CUDA_CHECK(inst);
  std::vector<double> out;
  cudaEvent_t a = nullptr, b = nullptr;
  try {
    QUANTA_CUDA_CHECK(cudaEventCreate(&a));
    QUANTA_CUDA_CHECK(cudaEventCreate(&b));
    for (int i = 0; i < warmup; ++i) QUANTA_CUDA_CHECK(cudaGraphLaunch(exec, s));
    double total = 0;
    int64_t calls = 0;
    while ((calls < min_runs || total < min_seconds) && calls < 100000) {
      QUANTA_CUDA_CHECK(cudaEventRecord(a, s));
      QUANTA_CUDA_CHECK(cudaGraphLaunch(exec, s));
      QUANTA_CUDA_CHECK(cudaEventRecord(b, s));
      QUANTA_CUDA_CHECK(cudaEventSynchronize(b));
      float ms = 0;
      QUANTA_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
      out.push_back(ms * 1e-3 / copies);
      total += ms * 1e-3;
      calls += copies;
    }
  } catch (...) {
    if (a) (void)cudaEventDestroy(a);
    if (b) (void)cudaEventDestroy(b);
    (void)cudaGraphExecDestroy(exec);
    throw;
  }
  (void)cudaEventDestroy(a);
  (void)cudaEventDestroy(b);
  (void)cudaGraphExecDestroy(exec);
  return out;
}

double read_roof_gbps() {
  static const double v = measure_read_roof_gbps();
  return v;
}
double gemm_roof_tflops() {
  static const double v = measure_dense_tflops();
  return v;
}
std::string roof_method() {
  return "read: 2 GiB streamed once with 16-byte ld.global.cs, 4 loads in flight per thread, one "
         "resident grid (median of 20 graph replays); compute: cublasGemmEx bf16 8192^3, f32 "
         "accumulate, random data";
}

std::vector<double> dense_baseline(int64_t m, int64_t n, int64_t k, int64_t experts, DType dtype,
                                   Layout layout, int min_runs, double min_seconds,
                                   std::string& name) {
  experts = std::max<int64_t>(experts, 1);
  const int64_t used = std::min(experts, m);  // row i goes to expert i % experts
  const std::size_t wb = dense_bytes(dtype, n, k), xb = dense_bytes(dtype, m, k),
                    yb = dense_bytes(dtype, m, n);
  const int copies = rotation_copies(wb * static_cast<std::size_t>(used) + xb + yb);
  std::vector<std::shared_ptr<void>> w, x, y;
  for (int c = 0; c < copies; ++c) {
    w.push_back(device_alloc(wb * static_cast<std::size_t>(used)));
    x.push_back(device_alloc(xb));
    y.push_back(device_alloc(yb));
    fill_random(w.back().get(), dtype, static_cast<std::size_t>(n * k * used), 11 + c, 0.05f);
    fill_random(x.back().get(), dtype, static_cast<std::size_t>(m * k), 101 + c);
  }
  name = std::string("cublasGemmEx ") + std::string(dtype_name(dtype));
  const bool kn = layout == Layout::kn;
  return time_graph(
      [&](int c) {
        int64_t row = 0;
        for (int64_t e = 0; e < used; ++e) {  // expert e serves m / used rows (+1 for the first)
          const int64_t rows = m / used + (e < m % used ? 1 : 0);
          if (rows == 0) continue;
          gemm(dtype, rows, n, k, static_cast<const std::byte*>(w[c].get()) + e * wb,
               static_cast<const std::byte*>(x[c].get()) + row * k * dtype_size(dtype),
               static_cast<std::byte*>(y[c].get()) + row * n * dtype_size(dtype), stream(), kn);
          row += rows;
        }
      },
      copies, 2, min_runs, min_seconds);
}

}  // namespace quanta::bench::gpu
