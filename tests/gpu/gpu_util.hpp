// Helpers for the CUDA tests: random weights in any format, dense buffers mirrored on the
// device, and a fixture that skips cleanly when there is no GPU.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/kernel.hpp"
#include "cuda/runtime.cuh"
#include "format/gguf.hpp"
#include "quanta/ops.hpp"
#include "quanta/reference.hpp"
#include "test_util.hpp"

namespace quanta::gpu_test {

using test::Dense;
using test::random_dense;

class Gpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  }
};

using test::host_weights;
using test::random_kquant;

// A dense host matrix with a device twin.
struct DeviceDense {
  Dense host;
  cuda::DeviceBuffer dev;
  explicit DeviceDense(Dense h) : host(std::move(h)), dev(host.bytes.size()) { upload(); }
  DeviceDense(DType t, int64_t r, int64_t c) : DeviceDense(Dense(t, r, c)) {}
  void upload() {
    QUANTA_CUDA_CHECK(
        cudaMemcpy(dev.data(), host.bytes.data(), host.bytes.size(), cudaMemcpyHostToDevice));
  }
  void download() {
    QUANTA_CUDA_CHECK(cudaDeviceSynchronize());
    QUANTA_CUDA_CHECK(
        cudaMemcpy(host.bytes.data(), dev.data(), host.bytes.size(), cudaMemcpyDeviceToHost));
  }
  // NaN everywhere, on the device too.
  void poison() {
    host.poison();
    upload();
  }
  ConstMatrixView view() const {
    return {dev.data(), host.dtype, host.rows, host.cols, Location::device};
  }
  MatrixView mut() { return {dev.data(), host.dtype, host.rows, host.cols, Location::device}; }
};

// Device kernels of `op` that accept p (by their M range and supports rule).
inline std::vector<const KernelEntry*> device_kernels_for(const Problem& p) {
  std::vector<const KernelEntry*> v;
  for (const KernelEntry* e : all_kernels())
    if (e->device == Location::device && decline_reason(*e, p).empty()) v.push_back(e);
  return v;
}

inline std::string describe(const QuantizedMatrix& w, DType t, int64_t m) {
  return w.describe() + " " + std::string(dtype_name(t)) + " M=" + std::to_string(m);
}

}  // namespace quanta::gpu_test
