// CUDA runtime plumbing: the check that turns a CUDA failure into quanta::Error, and
// move-only RAII handles for device memory, streams and events. No raw cudaMalloc/cudaFree
// outside this file.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <string>
#include <utility>

#include "quanta/error.hpp"

namespace quanta::cuda {

[[noreturn]] void throw_cuda_error(cudaError_t err, const char* call, const char* file, int line);

// Stringifies the call; throws quanta::Error with CUDA's message, file:line and device.
#define QUANTA_CUDA_CHECK(call)                                                 \
  do {                                                                          \
    cudaError_t quanta_err_ = (call);                                           \
    if (quanta_err_ != cudaSuccess)                                             \
      ::quanta::cuda::throw_cuda_error(quanta_err_, #call, __FILE__, __LINE__); \
  } while (0)

// After a launch: catches bad configurations immediately (asynchronous faults surface at the
// next synchronising call, which is checked too).
#define QUANTA_CUDA_CHECK_LAUNCH() QUANTA_CUDA_CHECK(cudaGetLastError())

// A move-only owner of one CUDA resource; the destructor never throws.
template <class T, cudaError_t (*Destroy)(T)>
class Handle {
 public:
  Handle() = default;
  explicit Handle(T h) : h_(h) {}
  Handle(Handle&& o) noexcept : h_(std::exchange(o.h_, T{})) {}
  Handle& operator=(Handle&& o) noexcept {
    if (this != &o) {
      reset();
      h_ = std::exchange(o.h_, T{});
    }
    return *this;
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle() { reset(); }
  T get() const { return h_; }
  void reset() {
    if (h_) (void)Destroy(h_);
    h_ = T{};
  }

 private:
  T h_{};
};

inline cudaError_t free_device(void* p) {
  return cudaFree(p);
}

// Untyped device allocation.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
    void* p = nullptr;
    if (bytes) QUANTA_CUDA_CHECK(cudaMalloc(&p, bytes));
    mem_ = Handle<void*, free_device>(p);
  }
  void* data() const { return mem_.get(); }
  std::size_t bytes() const { return bytes_; }
  template <class T>
  T* as() const {
    return static_cast<T*>(mem_.get());
  }

 private:
  Handle<void*, free_device> mem_;
  std::size_t bytes_ = 0;
};

using Stream = Handle<cudaStream_t, cudaStreamDestroy>;
using Event = Handle<cudaEvent_t, cudaEventDestroy>;

inline Stream make_stream() {
  cudaStream_t s;
  QUANTA_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  return Stream(s);
}

inline Event make_event() {
  cudaEvent_t e;
  QUANTA_CUDA_CHECK(cudaEventCreate(&e));
  return Event(e);
}

// Where a pointer lives, as the runtime sees it.
bool is_device_pointer(const void* p);

// Multiprocessors of the current device (persistent grids and split-K choices size by it).
int multiprocessor_count();

}  // namespace quanta::cuda
