// Element access to dense buffers whose dtype is known only at run time (host code paths
// that are not hot: quantize, the oracle, generic fallbacks).
#pragma once

#include <cstddef>
#include <cstdint>

#include "quanta/dtype.hpp"
#include "quanta/numeric.hpp"

namespace quanta::dense {

inline float load(const void* p, DType t, std::size_t i) {
  switch (t) {
    case DType::f32:
      return static_cast<const float*>(p)[i];
    case DType::f16:
      return f16_bits_to_f32(static_cast<const uint16_t*>(p)[i]);
    case DType::bf16:
      return bf16_bits_to_f32(static_cast<const uint16_t*>(p)[i]);
  }
  return 0;
}

inline void store(void* p, DType t, std::size_t i, float v) {
  switch (t) {
    case DType::f32:
      static_cast<float*>(p)[i] = v;
      break;
    case DType::f16:
      static_cast<uint16_t*>(p)[i] = f32_to_f16_bits(v);
      break;
    case DType::bf16:
      static_cast<uint16_t*>(p)[i] = f32_to_bf16_bits(v);
      break;
  }
}

// The value v takes once stored as t.
inline float round_as(DType t, float v) {
  switch (t) {
    case DType::f32:
      return v;
    case DType::f16:
      return f16_bits_to_f32(f32_to_f16_bits(v));
    case DType::bf16:
      return bf16_bits_to_f32(f32_to_bf16_bits(v));
  }
  return v;
}

}  // namespace quanta::dense
