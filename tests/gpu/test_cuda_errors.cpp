// Bad input on the device: host buffers passed as device ones, misaligned pointers a fast path
// loads with, out-of-range expert ids (flagged on the device, raised after the launch).
#include <gtest/gtest.h>

#include <cmath>

#include "gpu/gpu_util.hpp"

namespace quanta {
namespace {

using gpu_test::DeviceDense;
using gpu_test::Gpu;
using gpu_test::host_weights;
using test::Dense;
using test::expect_error;

using CudaErrors = Gpu;

TEST_F(CudaErrors, HostBuffersMarkedDeviceAreRefused) {
  const QuantizedMatrix hw =
      host_weights(Format::affine(4, 64), DType::f16, 32, 256, Layout::nk, 1);
  const QuantizedMatrix w = to_device(hw);
  DeviceDense x(test::random_dense(DType::f16, 2, 256, 1));
  DeviceDense y(DType::f16, 2, 32);
  // x claims to be device memory but is a host vector.
  const ConstMatrixView host_x{x.host.bytes.data(), DType::f16, 2, 256, Location::device};
  for (std::string_view k : {"auto", "matmul_generic", "qmm_affine_tc"}) {
    Context ctx;
    ctx.kernel = k;
    expect_error([&] { matmul(host_x, w, y.mut(), ctx); }, "x: pointer");
  }
  // Weights marked device whose codes live on the host.
  QuantizedMatrix fake = hw;
  fake.location = Location::device;
  expect_error([&] { matmul(x.view(), fake, y.mut()); }, "w.codes: pointer");
  // y on the host.
  const MatrixView host_y{y.host.bytes.data(), DType::f16, 2, 32, Location::device};
  expect_error([&] { matmul(x.view(), w, host_y); }, "y: pointer");
  // dequantize into host memory marked device.
  Dense big(DType::f16, 32, 256);
  const MatrixView big_out{big.bytes.data(), DType::f16, 32, 256, Location::device};
  expect_error([&] { dequantize(w, big_out); }, "out: pointer");
}

TEST_F(CudaErrors, MisalignedActivationsFallBackOrNameTheArgument) {
  const QuantizedMatrix hw =
      host_weights(Format::affine(4, 64), DType::f16, 32, 256, Layout::nk, 2);
  const QuantizedMatrix w = to_device(hw);
  DeviceDense x(test::random_dense(DType::f16, 1, 256 + 1, 3, 1.0f, false));
  // x starting one f16 into the buffer: 2-byte aligned only.
  const ConstMatrixView xs{static_cast<const uint16_t*>(x.dev.data()) + 1, DType::f16, 1, 256,
                           Location::device};
  DeviceDense y(DType::f16, 1, 32);
  y.poison();
  matmul(xs, w, y.mut());  // auto: the generic kernel takes over
  y.download();
  Dense xh(DType::f16, 1, 256);
  std::memcpy(xh.bytes.data(), x.host.bytes.data() + 2, xh.bytes.size());
  const auto c = ref::compare(y.host.view(), ref::matmul(xh.view(), hw), DType::f16);
  EXPECT_TRUE(c.pass) << "rel_l2 " << c.rel_l2;
  Context ctx;
  ctx.kernel = "qmm_affine_tc";
  expect_error([&] { matmul(xs, w, y.mut(), ctx); }, "x: pointer");
  expect_error([&] { matmul(xs, w, y.mut(), ctx); }, "is not 16-byte aligned");
}

TEST_F(CudaErrors, OutOfRangeExpertIdsRaiseAfterTheLaunch) {
  const QuantizedMatrix hw =
      host_weights(Format::affine(4, 64), DType::f32, 16, 128, Layout::nk, 4, /*batch=*/2);
  const QuantizedMatrix w = to_device(hw);
  DeviceDense x(test::random_dense(DType::f32, 3, 128, 5));
  DeviceDense y(DType::f32, 3, 16);
  const std::vector<int32_t> ids = {0, 7, -1};
  cuda::DeviceBuffer ids_d(ids.size() * sizeof(int32_t));
  QUANTA_CUDA_CHECK(
      cudaMemcpy(ids_d.data(), ids.data(), sizeof(int32_t) * ids.size(), cudaMemcpyHostToDevice));
  expect_error([&] { gather_matmul(x.view(), w, ids_d.as<int32_t>(), y.mut()); },
               "[quanta::gather_matmul] expert_ids: a device-side id is outside [0, 2)");
  y.download();
  for (int64_t n = 0; n < 16; ++n) {
    EXPECT_TRUE(std::isfinite(y.host.at(n))) << "row 0 has a valid id";
    EXPECT_TRUE(std::isnan(y.host.at(16 + n))) << "row 1 (id 7) must be NaN";
    EXPECT_TRUE(std::isnan(y.host.at(32 + n))) << "row 2 (id -1) must be NaN";
  }
  // Host ids are device memory's opposite: the op refuses them.
  expect_error([&] { gather_matmul(x.view(), w, ids.data(), y.mut()); }, "expert_ids: pointer");
}

TEST_F(CudaErrors, KernelOutsideItsRangeOrRuleIsRefusedByName) {
  const QuantizedMatrix hw =
      host_weights(Format::affine(4, 64), DType::f16, 32, 256, Layout::nk, 6);
  const QuantizedMatrix w = to_device(hw);
  DeviceDense x(test::random_dense(DType::f16, 40, 256, 7));
  DeviceDense y(DType::f16, 40, 32);
  Context ctx;
  ctx.kernel = "qmm_affine_tc";
  try {
    matmul(x.view(), w, y.mut(), ctx);
    ADD_FAILURE() << "M = 40 is outside qmm_affine_tc's range";
  } catch (const NotSupported& e) {
    EXPECT_NE(std::string(e.what()).find("M = 40 is outside [1, 32]"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace quanta
