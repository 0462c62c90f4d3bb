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

// K-quants have no encoder: random block bytes with small finite f16 scales.
inline QuantizedMatrix random_kquant(Scheme s, int64_t n, int64_t k, uint32_t seed, int64_t batch) {
  QuantizedMatrix m =
      QuantizedMatrix::allocate_host(Format::gguf(s), n, k, DType::f32, Layout::nk, batch);
  std::mt19937 rng(seed);
  const auto bytes = m.footprint().code_bytes * static_cast<size_t>(batch);
  for (size_t i = 0; i < bytes; ++i) m.codes[i] = static_cast<std::byte>(rng() & 0xff);
  const SchemeInfo& info = scheme_info(s);
  auto set_f16 = [&](size_t block, size_t offset, float v) {
    const uint16_t h = f32_to_f16_bits(v);
    std::memcpy(m.codes + block * info.block_bytes + offset, &h, 2);
  };
  std::uniform_real_distribution<float> u(0.001f, 0.02f);
  using namespace codec::gguf;
  for (size_t b = 0; b < bytes / info.block_bytes; ++b) {
    switch (s) {
      case Scheme::q2_K:
        set_f16(b, offsetof(block_q2_K, d), u(rng));
        set_f16(b, offsetof(block_q2_K, dmin), u(rng));
        break;
      case Scheme::q3_K:
        set_f16(b, offsetof(block_q3_K, d), u(rng));
        break;
      case Scheme::q4_K:
        set_f16(b, offsetof(block_q4_K, d), u(rng));
        set_f16(b, offsetof(block_q4_K, dmin), u(rng));
        break;
      case Scheme::q5_K:
        set_f16(b, offsetof(block_q5_K, d), u(rng));
        set_f16(b, offsetof(block_q5_K, dmin), u(rng));
        break;
      default:
        set_f16(b, offsetof(block_q6_K, d), u(rng));
        break;
    }
  }
  return m;
}

// A quantized random matrix on the host (scales in dtype t), a stack of `batch` experts.
inline QuantizedMatrix host_weights(const Format& f, DType t, int64_t n, int64_t k, Layout layout,
                                    uint32_t seed, int64_t batch = 1) {
  if (!f.info().encode) return random_kquant(f.scheme, n, k, seed, batch);
  if (batch == 1) {
    const Dense w =
        layout == Layout::nk ? random_dense(t, n, k, seed) : random_dense(t, k, n, seed);
    QuantizeOptions o;
    o.layout = layout;
    if (f.scheme == Scheme::nvfp4 && seed % 2) o.nvfp4_tensor_amax = 6.0f;
    return quantize(w.view(), f, o);
  }
  QuantizedMatrix stack = QuantizedMatrix::allocate_host(f, n, k, t, layout, batch);
  const Footprint fp = stack.footprint();
  for (int64_t e = 0; e < batch; ++e) {
    const QuantizedMatrix one =
        host_weights(f, t, n, k, layout, seed + static_cast<uint32_t>(e) * 7);
    const QuantizedMatrix dst = stack.expert(e);
    std::memcpy(dst.codes, one.codes, fp.code_bytes);
    if (fp.scale_bytes) std::memcpy(dst.scales, one.scales, fp.scale_bytes);
    if (fp.bias_bytes) std::memcpy(dst.biases, one.biases, fp.bias_bytes);
  }
  return stack;
}

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
