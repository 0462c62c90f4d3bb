// A build without CUDA still links: every CUDA entry point names what is missing.
#include <fmt/format.h>

#include "cuda/backend.hpp"
#include "quanta/error.hpp"

namespace quanta::cuda {

namespace {
[[noreturn]] void unavailable(std::string_view op) {
  throw NotSupported(fmt::format(
      "[quanta::{}] this build of quanta has no CUDA backend (configure with -DQUANTA_CUDA=ON "
      "on a machine with nvcc)",
      op));
}
}  // namespace

bool available() {
  return false;
}
void dequantize(const QuantizedMatrix&, MatrixView, const Context&) {
  unavailable("dequantize");
}
void matmul(ConstMatrixView, const QuantizedMatrix&, MatrixView, const Context&) {
  unavailable("matmul");
}
void gather_matmul(ConstMatrixView, const QuantizedMatrix&, const int32_t*, MatrixView,
                   const Context&) {
  unavailable("gather_matmul");
}
QuantizedMatrix to_device(const QuantizedMatrix&, const Context&) {
  unavailable("to_device");
}
QuantizedMatrix to_host(const QuantizedMatrix&, const Context&) {
  unavailable("to_host");
}

}  // namespace quanta::cuda
