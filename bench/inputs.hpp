// Operands for bench rows: random dense activations and quantized weights of any format,
// made fast enough for the largest suite shapes (a splitmix generator, quantization split
// over threads), never all zero, with finite scales.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "quanta/matrix.hpp"

namespace quanta::bench {

// Owned host bytes, uninitialised until filled (no zeroing pass over large buffers).
struct HostBuffer {
  std::shared_ptr<std::byte[]> data;
  std::size_t bytes = 0;
  static HostBuffer allocate(std::size_t bytes);
  std::byte* get() const { return data.get(); }
};

// A dense host matrix of one dtype.
struct HostMatrix {
  HostBuffer buffer;
  DType dtype = DType::f32;
  int64_t rows = 0, cols = 0;
  static HostMatrix allocate(DType t, int64_t rows, int64_t cols);
  ConstMatrixView view() const { return {buffer.get(), dtype, rows, cols}; }
  MatrixView mut() const { return {buffer.get(), dtype, rows, cols}; }
  void poison() const;  // every element NaN: an unwritten element fails the check
};

// Approximately normal values (mean 0, sd `scale`) from a seeded counter-based generator;
// `threads` workers split the buffer, so the values do not depend on the thread count.
void fill_normal(void* data, DType t, std::size_t count, uint64_t seed, float scale = 1.0f,
                 int threads = 1);
HostMatrix random_matrix(DType t, int64_t rows, int64_t cols, uint64_t seed, float scale = 1.0f,
                         int threads = 1);

// A stack of `experts` matrices W[N, K] in format f and layout, scales in dtype t (affine).
// Encodable formats quantize random normal weights with the library's own quantizer (nvfp4
// with its two-level global scale); decode-only formats (GGUF K-quants) get random block
// bytes with small finite scales.
QuantizedMatrix make_weights(const Format& f, DType t, int64_t n, int64_t k, Layout layout,
                             int64_t experts, uint64_t seed, int threads = 1);

// A deep copy of a host matrix (its own storage), for rotating copies past the cache.
QuantizedMatrix clone_host(const QuantizedMatrix& w);

}  // namespace quanta::bench
