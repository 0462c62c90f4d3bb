// CUDA backend services used by the op layer; kernels are listed in src/cuda/kernels.cpp.
// In a build without CUDA every entry point throws NotSupported.
#pragma once

#include "quanta/ops.hpp"

namespace quanta::cuda {

bool available();
QuantizedMatrix to_device(const QuantizedMatrix& w, const Context& ctx);
QuantizedMatrix to_host(const QuantizedMatrix& w, const Context& ctx);
// quanta::prepack of a device matrix: the pack, or null where no packed kernel applies
// (qmm_affine_wgmma.cu).
std::shared_ptr<const DevicePack> make_device_pack(const QuantizedMatrix& w, const Context& ctx);

// Quantizes device-resident weights into a matrix on the device, bit-exact with the host
// quantizer (src/cuda/quantize.cu; affine and microscaled [N, K] on the GPU, the rest through
// the host quantizer).
QuantizedMatrix quantize(ConstMatrixView w, const Format& format, const QuantizeOptions& opts,
                         const Context& ctx);

}  // namespace quanta::cuda
