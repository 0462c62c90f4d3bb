// The CUDA device. The GPU primitives (CUDA events around graph replays, L2 rotation, the
// streaming-read roof kernel, cuBLAS baselines, device memory) come from the CUDA engineer's
// bench/cuda/gpu_timing.hpp; this file only adapts them to the runner's Device. It is built
// when the library has CUDA and that header declares the API below (QUANTA_GPU_TIMING_API 1);
// otherwise `--device cuda` says that this build has no CUDA bench support (exit 2).
//
// The API this adapter expects (namespace quanta::bench::gpu, g++-callable, no CUDA types):
//   struct Info { std::string name; int compute_capability; std::size_t l2_bytes;
//                 std::size_t global_bytes; int sm_count; };
//   bool available();                                   // a usable device is present
//   Info info();                                        // the current device
//   std::shared_ptr<void> alloc(std::size_t bytes);     // device memory, freed by the deleter
//   void upload(void* dst, const void* src, std::size_t bytes);    // synchronous
//   void download(void* dst, const void* src, std::size_t bytes);  // synchronous
//   void synchronize();                                 // wait for all device work
//   void* stream();                                     // the cudaStream_t launches go to
//   // launch(c) enqueues one call on stream() reading operand copy c; the calls for
//   // c = 0..copies-1 are captured into one CUDA graph, replayed `warmup` times, then timed
//   // with CUDA events per replay until min_runs calls and min_seconds have passed; returns
//   // seconds per call (replay time / copies), one entry per replay.
//   std::vector<double> time_graph(const std::function<void(int)>& launch, int copies,
//                                  int warmup, int min_runs, double min_seconds);
//   double read_roof_gbps();    // streaming-read kernel over a buffer far larger than L2
//   double gemm_roof_tflops();  // dense cuBLAS(Lt) bf16 GEMM at a large square shape
//   std::string roof_method();  // one line: how the two were measured
//   // Dense cuBLAS(Lt) baseline y[M, N] = x[M, K] · Wᵀ (Layout::nk) or x · W (Layout::kn)
//   // in `dtype` (f32 accumulate), for `experts` weight matrices each used by its rows,
//   // operands rotated past L2, timed like time_graph. `name` receives e.g. "cublasLt bf16".
//   std::vector<double> dense_baseline(int64_t m, int64_t n, int64_t k, int64_t experts,
//                                      quanta::DType dtype, quanta::Layout layout,
//                                      int min_runs, double min_seconds, std::string& name);
#include <fmt/format.h>

#include "device.hpp"

#if defined(QUANTA_HAS_CUDA) && __has_include("cuda/gpu_timing.hpp")
#include "cuda/gpu_timing.hpp"
#endif

#if defined(QUANTA_GPU_TIMING_API) && QUANTA_GPU_TIMING_API == 1
#include "quanta/error.hpp"

namespace quanta::bench {

namespace {

class CudaDevice final : public Device {
 public:
  CudaDevice() : info_(gpu::info()) {}

  Location location() const override { return Location::device; }
  std::string name() const override { return info_.name; }
  std::string details() const override {
    return fmt::format("sm_{}, {} SMs, L2 {} MiB, {} GiB; CUDA events around graph replays",
                       info_.compute_capability, info_.sm_count, info_.l2_bytes >> 20,
                       info_.global_bytes >> 30);
  }
  std::size_t cache_bytes() const override { return info_.l2_bytes; }

  Roof measure_roof(std::string& method) override {
    Roof r;
    r.read_gbps = gpu::read_roof_gbps();
    r.compute_tflops = gpu::gemm_roof_tflops();
    method = gpu::roof_method();
    return r;
  }

  Context context() const override {
    Context c;
    c.cuda_stream = gpu::stream();
    return c;
  }

  DeviceBuffer alloc(std::size_t bytes) override { return {gpu::alloc(bytes), bytes}; }
  void upload(void* dst, const void* src, std::size_t bytes) override {
    gpu::upload(dst, src, bytes);
  }
  void download(void* dst, const void* src, std::size_t bytes) override {
    // Kernels run on the non-blocking timing stream, which a plain cudaMemcpy does not wait
    // for: finish the device's work before reading a result back.
    gpu::synchronize();
    gpu::download(dst, src, bytes);
  }
  // Weights as a GPU user keeps them: uploaded and prepacked (a device pack where
  // qmm_affine_wgmma reads one), so rows and checks run the path a prepacked model runs.
  QuantizedMatrix place(const QuantizedMatrix& host) override {
    const Context c = context();
    return prepack(to_device(host, c), c);
  }

  Samples time(const std::function<void(int)>& launch, int copies, const TimingPolicy& p) override {
    // Each sample is one graph replay of `copies` calls; min_runs counts calls.
    return {gpu::time_graph(launch, copies, p.warmup_runs, p.min_runs, p.min_seconds), false};
  }

  Baseline baseline(const ProblemSize& p, const TimingPolicy& policy) override {
    Baseline b;
    if (p.op == Op::dequantize) {
      b.name = "none";
      return b;
    }
    std::vector<double> s =
        gpu::dense_baseline(p.m, p.n, p.k, experts_touched(p), p.dtype, p.layout, policy.min_runs,
                            policy.min_seconds, b.name);
    const int copies = rotation_copies(bytes_moved(p), info_.l2_bytes);
    b.timing = summarize(std::move(s), copies);
    const auto es = static_cast<double>(dtype_size(p.dtype));
    b.bytes = es * static_cast<double>(experts_touched(p) * p.n * p.k + p.m * (p.k + p.n));
    return b;
  }

 private:
  gpu::Info info_;
};

}  // namespace

std::unique_ptr<Device> make_cuda_device() {
  if (!gpu::available() || !cuda_available()) return nullptr;
  return std::make_unique<CudaDevice>();
}
bool cuda_device_built() {
  return true;
}

}  // namespace quanta::bench

#else

namespace quanta::bench {

std::unique_ptr<Device> make_cuda_device() {
  return nullptr;
}
bool cuda_device_built() {
  return false;
}

}  // namespace quanta::bench

#endif
