// quanta::DevicePack (opaque in quanta/matrix.hpp): a device matrix's weights re-laid out once
// for qmm_affine_wgmma (quanta::prepack; made in qmm_affine_wgmma.cu).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "quanta/matrix.hpp"

namespace quanta {

struct DevicePack {
  // What it was made from: the pack serves a matrix only while it still points at these buffers
  // with this shape and format.
  const std::byte* codes_src = nullptr;
  const std::byte* scales_src = nullptr;
  const std::byte* biases_src = nullptr;
  Format format{};
  DType scale_dtype = DType::f16;
  int64_t n = 0, k = 0;

  std::shared_ptr<void> storage;   // owns the device bytes below
  const void* codes = nullptr;     // reordered as qmm_affine_wgmma reads them (Gemm::AtomQ)
  const void* scales_t = nullptr;  // scale dtype [K/G, N]
  const void* biases_t = nullptr;  // scale dtype [K/G, N]

  bool serves(const QuantizedMatrix& w) const {
    return w.location == Location::device && w.batch == 1 && w.layout == Layout::nk &&
           w.codes == codes_src && w.scales == scales_src && w.biases == biases_src &&
           w.format == format && w.scale_dtype == scale_dtype && w.n == n && w.k == k;
  }
};

}  // namespace quanta
