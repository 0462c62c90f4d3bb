// The CUDA kernel table, in order of preference (first that accepts wins).
#include "core/kernel.hpp"

namespace quanta::cuda {

namespace {
// clang-format off
const KernelEntry kTable[] = {
  // name  op  device  M range  supports  matmul  dequantize  why
  {"none", Op::dequantize, Location::device, 0, 0, [](const Problem&) { return std::string("no CUDA kernels are built yet"); }, nullptr, nullptr, "placeholder"},
};
// clang-format on
}  // namespace

std::span<const KernelEntry> kernels() {
  return kTable;
}

}  // namespace quanta::cuda
