// quanta::DevicePack (opaque in quanta/matrix.hpp): a device matrix's weights re-laid out once
// (quanta::prepack): W [N, K] for qmm_affine_wgmma (made in qmm_affine_wgmma.cu), W [K, N] as
// the [N, K] matrix Wᵀ that every [N, K] kernel takes (made in qmm_affine_repack.cu).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>

#include "quanta/matrix.hpp"

namespace quanta {

struct DevicePack {
  // What it was made from: the pack serves a matrix only while it still points at these buffers
  // with this shape and format.
  const std::byte* codes_src = nullptr;
  const std::byte* scales_src = nullptr;
  const std::byte* biases_src = nullptr;
  Format format{};
  Layout layout = Layout::nk;
  DType scale_dtype = DType::f16;
  int64_t n = 0, k = 0;

  std::shared_ptr<void> storage;   // owns the device bytes below
  const void* codes = nullptr;     // reordered as qmm_affine_wgmma reads them (Gemm::AtomQ)
  const void* scales_t = nullptr;  // scale dtype [K/G, N]
  const void* biases_t = nullptr;  // scale dtype [K/G, N]

  // W [K, N]: Wᵀ stored [N, K] (owning its buffers; with its own wgmma pack where one applies).
  std::optional<QuantizedMatrix> transposed;

  bool serves(const QuantizedMatrix& w) const {
    return w.location == Location::device && w.batch == 1 && w.layout == layout &&
           w.codes == codes_src && w.scales == scales_src && w.biases == biases_src &&
           w.format == format && w.scale_dtype == scale_dtype && w.n == n && w.k == k;
  }
};

}  // namespace quanta
