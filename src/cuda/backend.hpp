// CUDA backend services used by the op layer; kernels are listed in src/cuda/kernels.cpp.
// In a build without CUDA every entry point throws NotSupported.
#pragma once

#include "quanta/ops.hpp"

namespace quanta::cuda {

bool available();
QuantizedMatrix to_device(const QuantizedMatrix& w, const Context& ctx);
QuantizedMatrix to_host(const QuantizedMatrix& w, const Context& ctx);

}  // namespace quanta::cuda
