#include "cuda/workspace.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <tuple>
#include <utility>

#include "cuda/runtime.cuh"

namespace quanta::cuda {

namespace {
struct Key {
  cudaStream_t stream;
  Scratch slot;
  int device;
  bool operator<(const Key& o) const {
    return std::tie(stream, slot, device) < std::tie(o.stream, o.slot, o.device);
  }
};
}  // namespace

void* stream_scratch(cudaStream_t stream, Scratch slot, std::size_t bytes) {
  static std::mutex mu;
  // Leaked on purpose: freeing device memory during static destruction can run after the CUDA
  // runtime has shut down.
  static auto* buffers = new std::map<Key, DeviceBuffer>();
  int device = 0;
  QUANTA_CUDA_CHECK(cudaGetDevice(&device));
  std::lock_guard<std::mutex> lock(mu);
  DeviceBuffer& buf = (*buffers)[Key{stream, slot, device}];
  if (buf.bytes() >= bytes && buf.data() != nullptr) return buf.data();
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  QUANTA_CUDA_CHECK(cudaStreamIsCapturing(stream, &capture));
  if (capture != cudaStreamCaptureStatusNone)
    throw Error(fmt::format(
        "[quanta::cuda] workspace: {} bytes of scratch memory are needed while the stream is "
        "being captured into a graph; run the op once before capturing",
        bytes));
  const std::size_t want = std::max<std::size_t>(bytes, 256) * 3 / 2;
  buf = DeviceBuffer();  // cudaFree waits for work that may still use the old buffer
  buf = DeviceBuffer(want);
  QUANTA_CUDA_CHECK(cudaMemsetAsync(buf.data(), 0, want, stream));
  return buf.data();
}

}  // namespace quanta::cuda
