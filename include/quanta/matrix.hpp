// QuantizedMatrix: a logical weight matrix W in a storage Format, plus dense activation views.
//
// Convention (written once): M rows of activations x, N output features, K the reduction.
//   Layout::nk  W is [N, K], y[M, N] = x[M, K] · Wᵀ, groups run along K within a row
//               (the MLX "transpose=True" and GGUF convention).
//   Layout::kn  W is stored [K, N] (the vecmat / qvm layout), y = x · W; groups still run
//               along K, so scales are [K / G, N] and codes are packed along N per K-row.
// A stack of `batch` matrices (MoE experts) lies back to back in each buffer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "quanta/dtype.hpp"
#include "quanta/format.hpp"

namespace quanta {

enum class Location : uint8_t { host, device };
enum class Layout : uint8_t { nk, kn };

constexpr std::string_view location_name(Location l) {
  return l == Location::host ? "host" : "device";
}

// A re-layout of a matrix's weights for the host backend's fastest kernels (quanta::prepack);
// opaque, defined by the CPU backend.
struct HostPack;
// The same for the CUDA backend's large-M kernel (quanta::prepack of a device matrix); opaque,
// defined by the CUDA backend.
struct DevicePack;

// Byte counts of one matrix in a format; every product is overflow-checked.
struct Footprint {
  std::size_t code_bytes = 0;   // packed codes (GGUF: whole blocks, scales inside)
  std::size_t scale_bytes = 0;  // separate scales (0 for GGUF)
  std::size_t bias_bytes = 0;   // affine biases
  std::size_t scale_count = 0;  // number of scale entries
  std::size_t total() const { return code_bytes + scale_bytes + bias_bytes; }
};

// Throws quanta::Error (naming `op`) when the shape does not fit the format: non-positive
// dims, K not a multiple of the group, a [K, N] layout the scheme lacks, sizes that overflow.
Footprint footprint(const Format& f, int64_t n, int64_t k, Layout layout, DType scale_dtype,
                    std::string_view op = "footprint");

struct QuantizedMatrix {
  Format format{};
  Layout layout = Layout::nk;
  DType scale_dtype = DType::f16;  // affine only: dtype of scales and biases
  Location location = Location::host;
  int64_t batch = 1;  // experts in the stack
  int64_t n = 0;      // output features
  int64_t k = 0;      // reduction length

  std::byte* codes = nullptr;
  std::byte* scales = nullptr;
  std::byte* biases = nullptr;
  // nvfp4: decode multiplier applied to every element (NVIDIA ModelOpt `weight_scale_2`,
  // = MLX global_scale / (448 * 6)); absent means 1.
  std::optional<float> global_scale;

  std::shared_ptr<void> keepalive;  // owns the bytes when the matrix owns them
  // Set by quanta::prepack: a second, packed copy of these weights that host matmuls read
  // instead. It is a snapshot, used only while codes, scales, biases, shape and format are the
  // ones it was made from (write new codes in place and prepack again).
  std::shared_ptr<const HostPack> host_pack;
  // Set by quanta::prepack for a device matrix: the GPU's copy of these weights in the layout
  // of its large-M kernel, a snapshot on the same terms as host_pack.
  std::shared_ptr<const DevicePack> device_pack;

  // One matrix of the stack.
  Footprint footprint() const;
  std::size_t code_bytes_per_matrix() const { return footprint().code_bytes; }
  QuantizedMatrix expert(int64_t e) const;  // without the stack's host_pack or device_pack

  // Zero-filled host storage of the right size.
  static QuantizedMatrix allocate_host(const Format& f, int64_t n, int64_t k,
                                       DType scale_dtype = DType::f16, Layout layout = Layout::nk,
                                       int64_t batch = 1);

  // Views caller-owned bytes (the whole stack), checking that every buffer the format
  // needs is present and at least as large as the footprint says.
  static QuantizedMatrix wrap(const Format& f, int64_t n, int64_t k, DType scale_dtype,
                              Layout layout, Location location, std::span<std::byte> codes,
                              std::span<std::byte> scales = {}, std::span<std::byte> biases = {},
                              int64_t batch = 1, std::optional<float> global_scale = {});

  // Checks format, shape, batch and that the buffers the format needs are not null.
  void validate(std::string_view op, std::string_view arg = "w") const;

  std::string describe() const;  // "affine-4b-g64 [4096 x 4096] nk host scales f16"
};

// Dense row-major activations.
struct ConstMatrixView {
  const void* data = nullptr;
  DType dtype = DType::f32;
  int64_t rows = 0;
  int64_t cols = 0;
  Location location = Location::host;
  std::size_t bytes() const { return static_cast<std::size_t>(rows * cols) * dtype_size(dtype); }
};

struct MatrixView {
  void* data = nullptr;
  DType dtype = DType::f32;
  int64_t rows = 0;
  int64_t cols = 0;
  Location location = Location::host;
  operator ConstMatrixView() const { return {data, dtype, rows, cols, location}; }
  std::size_t bytes() const { return static_cast<std::size_t>(rows * cols) * dtype_size(dtype); }
};

}  // namespace quanta
