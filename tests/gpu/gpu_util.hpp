// Helpers for the CUDA tests: random weights in any format, dense buffers mirrored on the
// device, and a fixture that skips cleanly when there is no GPU.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <random>
#include <span>
#include <string>
#include <utility>
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

// gather_matmul through `kernel` on a stack of 3 experts (hw on the host, w its device copy) for
// 6 rows of x: valid ids with repeats, then ids with two outside the stack, whose rows must come
// back NaN with an error after the launch; every other row against the fp64 oracle.
// The expert ids on the device.
inline cuda::DeviceBuffer upload_ids(const std::vector<int32_t>& ids) {
  cuda::DeviceBuffer d(ids.size() * sizeof(int32_t));
  QUANTA_CUDA_CHECK(
      cudaMemcpy(d.data(), ids.data(), ids.size() * sizeof(int32_t), cudaMemcpyHostToDevice));
  return d;
}

// Row r of y (downloaded) against row r of the oracle's [M][N] result, at y's dtype's bound.
inline ref::Comparison compare_row(const DeviceDense& y, const std::vector<double>& want,
                                   int64_t r) {
  const int64_t n = y.host.cols;
  Dense got_r(y.host.dtype, 1, n);
  const std::size_t row = static_cast<std::size_t>(n) * dtype_size(y.host.dtype);
  std::memcpy(got_r.bytes.data(), y.host.bytes.data() + r * row, row);
  return ref::compare(got_r.view(),
                      std::span<const double>(want.data() + r * n, static_cast<std::size_t>(n)),
                      y.host.dtype);
}

// gather_matmul through `kernel` on the stack hw (w its device copy) for one row of x per id,
// after y was poisoned: rows with a valid id against the fp64 oracle; an id outside the stack
// makes its row NaN and the call throw.
inline void check_gather_ids(const QuantizedMatrix& hw, const QuantizedMatrix& w, DType t,
                             std::string_view kernel, const std::vector<int32_t>& ids,
                             uint32_t seed) {
  const int64_t m = static_cast<int64_t>(ids.size()), n = hw.n, k = hw.k;
  DeviceDense x(random_dense(t, m, k, seed, 1.0f, false));
  DeviceDense y(t, m, n);
  Context ctx;
  ctx.kernel = kernel;
  const cuda::DeviceBuffer ids_d = upload_ids(ids);
  y.poison();
  const bool bad = std::ranges::any_of(ids, [&](int32_t e) { return e < 0 || e >= hw.batch; });
  if (bad)
    EXPECT_THROW(gather_matmul(x.view(), w, ids_d.as<int32_t>(), y.mut(), ctx), Error);
  else
    gather_matmul(x.view(), w, ids_d.as<int32_t>(), y.mut(), ctx);
  y.download();
  std::vector<int32_t> safe = ids;  // the oracle on valid ids; bad rows checked apart
  for (int32_t& e : safe) e = e < 0 || e >= hw.batch ? 0 : e;
  const std::vector<double> want = ref::gather_matmul(x.host.view(), hw, safe);
  for (int64_t r = 0; r < m; ++r) {
    if (ids[r] < 0 || ids[r] >= hw.batch) {  // a bad id: the row is NaN
      for (int64_t j = 0; j < n; ++j)
        EXPECT_TRUE(std::isnan(y.host.at(r * n + j))) << r << " " << j;
    } else {
      const auto c = compare_row(y, want, r);
      EXPECT_TRUE(c.pass) << kernel << " " << hw.describe() << " " << dtype_name(t) << " M=" << m
                          << " row " << r << " (expert " << ids[r] << ") rel_l2 " << c.rel_l2;
    }
  }
}

// Six rows over a stack of 3 experts: repeated ids, then two ids outside the stack.
inline void check_gather(const QuantizedMatrix& hw, const QuantizedMatrix& w, DType t,
                         std::string_view kernel, uint32_t seed) {
  check_gather_ids(hw, w, t, kernel, {2, 0, 2, 1, 1, 0}, seed);
  check_gather_ids(hw, w, t, kernel, {1, 3, 0, -1, 2, 2}, seed);
}

// The grouped gathers' row sets on a stack of 3 experts (hw, w its device copy): check_gather's
// six rows (repeats, then bad ids), runs of `first_run` rows of expert 2 (longer than a pass), 22
// of expert 0 and 11 of expert 1, 9 rows with expert 2 unused, and 70 rows with ids shuffled.
inline void check_grouped_gather(const QuantizedMatrix& hw, const QuantizedMatrix& w, DType t,
                                 std::string_view kernel, int first_run, uint32_t seed) {
  check_gather(hw, w, t, kernel, seed);
  std::vector<int32_t> runs;
  for (auto [e, count] : {std::pair{2, first_run}, std::pair{0, 22}, std::pair{1, 11}})
    runs.insert(runs.end(), static_cast<std::size_t>(count), e);
  check_gather_ids(hw, w, t, kernel, runs, seed + 1);
  check_gather_ids(hw, w, t, kernel, {1, 1, 0, 1, 0, 0, 1, 1, 0}, seed + 2);
  std::vector<int32_t> mixed(70);
  for (std::size_t i = 0; i < mixed.size(); ++i)
    mixed[i] = static_cast<int32_t>((i * 7 + i / 5) % 3);
  check_gather_ids(hw, w, t, kernel, mixed, seed + 3);
}

}  // namespace quanta::gpu_test
