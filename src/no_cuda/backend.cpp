// A build without CUDA still links: the CUDA kernel table is empty and every CUDA service
// names what is missing.
#include <fmt/format.h>

#include "core/kernel.hpp"
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
std::span<const KernelEntry> kernels() {
  return {};
}
int compute_capability() {
  return 0;
}
QuantizedMatrix to_device(const QuantizedMatrix&, const Context&) {
  unavailable("to_device");
}
QuantizedMatrix to_host(const QuantizedMatrix&, const Context&) {
  unavailable("to_host");
}
std::shared_ptr<const DevicePack> make_device_pack(const QuantizedMatrix&, const Context&) {
  unavailable("prepack");
}

}  // namespace quanta::cuda
