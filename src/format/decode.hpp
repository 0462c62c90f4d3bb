// Float decoding of stored rows, for host code that needs dense values (dequantize, the
// generic CPU kernels). f32 arithmetic in the owner's order: affine s*q + b as two roundings
// (MLX's multiply then add), fp formats code * scale (* global).
#pragma once

#include <cstdint>

#include "quanta/matrix.hpp"

namespace quanta::codec {

// Storage row r of one matrix (w.batch must be 1): for Layout::nk the K values of output
// row n = r, for Layout::kn the N values of reduction row k = r.
// `round_as` emulates the owner's arithmetic in that dtype (MLX dequantize multiplies, then
// adds, rounding to the output dtype after each op; this is what makes code -q0 exactly 0).
void decode_storage_row(const QuantizedMatrix& w, int64_t r, float* out,
                        DType round_as = DType::f32);

// Number of storage rows and their length.
inline int64_t storage_rows(const QuantizedMatrix& w) {
  return w.layout == Layout::nk ? w.n : w.k;
}
inline int64_t storage_cols(const QuantizedMatrix& w) {
  return w.layout == Layout::nk ? w.k : w.n;
}

}  // namespace quanta::codec
