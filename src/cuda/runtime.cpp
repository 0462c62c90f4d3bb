// Host-side CUDA code lives in .cpp files (compiled by the host compiler, which can use fmt);
// kernels and their launchers live in .cu files.
#include <fmt/format.h>

#include "cuda/runtime.cuh"

namespace quanta::cuda {

void throw_cuda_error(cudaError_t err, const char* call, const char* file, int line) {
  int dev = -1;
  (void)cudaGetDevice(&dev);
  throw Error(fmt::format("[quanta::cuda] {} failed: {} ({}) at {}:{} on device {}", call,
                          cudaGetErrorString(err), cudaGetErrorName(err), file, line, dev));
}

bool is_device_pointer(const void* p) {
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, p) != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky-free error of an unknown pointer
    return false;
  }
  return attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged;
}

int multiprocessor_count() {
  int dev = 0, sms = 0;
  QUANTA_CUDA_CHECK(cudaGetDevice(&dev));
  QUANTA_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  return sms;
}

}  // namespace quanta::cuda
