// CUDA backend entry points: device detection, host <-> device copies of matrices, and
// routing to the kernel families.
#include <fmt/format.h>

#include <memory>

#include "core/kernel.hpp"
#include "cuda/backend.hpp"
#include "cuda/runtime.cuh"

namespace quanta::cuda {

int compute_capability() {
  int dev = 0, major = 0, minor = 0;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return major * 10 + minor;
}

bool available() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return count > 0;
}

namespace {

cudaStream_t stream_of(const Context& ctx) {
  return static_cast<cudaStream_t>(ctx.cuda_stream);
}

QuantizedMatrix copy_matrix(const QuantizedMatrix& w, Location to, const Context& ctx) {
  const Footprint fp = w.footprint();
  const std::size_t b = static_cast<std::size_t>(w.batch);
  const std::size_t total = fp.total() * b;
  QuantizedMatrix m = w;
  m.location = to;
  m.host_pack = nullptr;
  m.device_pack = nullptr;
  std::byte* base = nullptr;
  if (to == Location::device) {
    auto buf = std::make_shared<DeviceBuffer>(total);
    base = buf->as<std::byte>();
    m.keepalive = buf;
  } else {
    auto storage = std::shared_ptr<std::byte[]>(new std::byte[total ? total : 1]());
    base = storage.get();
    m.keepalive = storage;
  }
  const cudaMemcpyKind kind =
      to == Location::device ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost;
  m.codes = base;
  QUANTA_CUDA_CHECK(cudaMemcpyAsync(m.codes, w.codes, fp.code_bytes * b, kind, stream_of(ctx)));
  m.scales = fp.scale_bytes ? base + fp.code_bytes * b : nullptr;
  if (m.scales)
    QUANTA_CUDA_CHECK(
        cudaMemcpyAsync(m.scales, w.scales, fp.scale_bytes * b, kind, stream_of(ctx)));
  m.biases = fp.bias_bytes ? base + (fp.code_bytes + fp.scale_bytes) * b : nullptr;
  if (m.biases)
    QUANTA_CUDA_CHECK(cudaMemcpyAsync(m.biases, w.biases, fp.bias_bytes * b, kind, stream_of(ctx)));
  QUANTA_CUDA_CHECK(cudaStreamSynchronize(stream_of(ctx)));
  return m;
}

}  // namespace

QuantizedMatrix to_device(const QuantizedMatrix& w, const Context& ctx) {
  return copy_matrix(w, Location::device, ctx);
}
QuantizedMatrix to_host(const QuantizedMatrix& w, const Context& ctx) {
  return copy_matrix(w, Location::host, ctx);
}

}  // namespace quanta::cuda
