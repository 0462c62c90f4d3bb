#include "cuda/checks.hpp"

#include <fmt/format.h>

#include "cuda/runtime.cuh"
#include "cuda/workspace.hpp"

namespace quanta::cuda {

void require_device_pointer(const void* p, std::string_view op, std::string_view arg) {
  if (p == nullptr || is_device_pointer(p)) return;  // null is reported by the op layer
  throw Error(fmt::format(
      "[quanta::{}] {}: pointer {} is host memory, but the matrix is marked Location::device "
      "(copy it with cudaMemcpy or quanta::to_device first)",
      op, arg, p));
}

void require_device_weights(const QuantizedMatrix& w, std::string_view op) {
  require_device_pointer(w.codes, op, "w.codes");
  require_device_pointer(w.scales, op, "w.scales");
  require_device_pointer(w.biases, op, "w.biases");
}

void require_device_operands(const ConstMatrixView& x, const QuantizedMatrix& w,
                             const int32_t* expert_ids, const MatrixView& y, std::string_view op) {
  require_device_pointer(x.data, op, "x");
  require_device_pointer(y.data, op, "y");
  require_device_weights(w, op);
  if (expert_ids) require_device_pointer(expert_ids, op, "expert_ids");
}

bool alignment_ok(const void* p, std::size_t bytes, const Context& ctx, std::string_view kernel,
                  std::string_view op, std::string_view arg) {
  if (is_aligned(p, bytes)) return true;
  if (ctx.kernel.empty() || ctx.kernel == "auto") return false;
  throw Error(fmt::format(
      "[quanta::{}] {}: pointer {} is not {}-byte aligned, which kernel {} loads with (use "
      "kernel=auto to fall back to the generic kernel)",
      op, arg, p, bytes, kernel));
}

ExpertFlag expert_flag_begin(const Context& ctx) {
  auto stream = static_cast<cudaStream_t>(ctx.cuda_stream);
  ExpertFlag f;
  f.device = static_cast<int*>(stream_scratch(stream, Scratch::expert_flag, sizeof(int)));
  QUANTA_CUDA_CHECK(cudaMemsetAsync(f.device, 0, sizeof(int), stream));
  return f;
}

void expert_flag_end(const ExpertFlag& f, const Context& ctx, int64_t batch, std::string_view op) {
  auto stream = static_cast<cudaStream_t>(ctx.cuda_stream);
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  QUANTA_CUDA_CHECK(cudaStreamIsCapturing(stream, &capture));
  if (capture != cudaStreamCaptureStatusNone) return;
  int flag = 0;
  QUANTA_CUDA_CHECK(cudaMemcpyAsync(&flag, f.device, sizeof flag, cudaMemcpyDeviceToHost, stream));
  QUANTA_CUDA_CHECK(cudaStreamSynchronize(stream));
  if (flag)
    throw Error(fmt::format(
        "[quanta::{}] expert_ids: a device-side id is outside [0, {}); those rows of y were "
        "set to NaN and no weights out of bounds were read",
        op, batch));
}

}  // namespace quanta::cuda
