// CUDA-core helpers for affine chunks (32 consecutive codes = 4·bits bytes of one stored row):
// the widest aligned loads a chunk allows, and code i as an exact f32.
#pragma once

#include <cstdint>

#include "cuda/common.cuh"

namespace quanta::cuda {

// 4·BITS bytes at p: 16-byte loads for 4 and 8 bits, 8-byte for 2 and 6, 4-byte for 3 and 5
// (chunk offsets are multiples of those widths when the row start is 16-byte aligned).
template <int BITS>
__device__ __forceinline__ void load_chunk(const uint8_t* p, uint32_t (&w)[BITS]) {
  if constexpr (BITS == 4 || BITS == 8) {
#pragma unroll
    for (int i = 0; i < BITS / 4; ++i) {
      const uint4 v = __ldg(reinterpret_cast<const uint4*>(p) + i);
      w[4 * i] = v.x;
      w[4 * i + 1] = v.y;
      w[4 * i + 2] = v.z;
      w[4 * i + 3] = v.w;
    }
  } else if constexpr (BITS == 2 || BITS == 6) {
#pragma unroll
    for (int i = 0; i < BITS / 2; ++i) {
      const uint2 v = __ldg(reinterpret_cast<const uint2*>(p) + i);
      w[2 * i] = v.x;
      w[2 * i + 1] = v.y;
    }
  } else {
#pragma unroll
    for (int i = 0; i < BITS; ++i) w[i] = __ldg(reinterpret_cast<const uint32_t*>(p) + i);
  }
}

// Code i (0..31, a compile-time constant after unrolling) of a chunk.
template <int BITS>
__device__ __forceinline__ uint32_t code_u32(const uint32_t (&w)[BITS], int i) {
  constexpr uint32_t kMask = (1u << BITS) - 1u;
  const int bit = i * BITS, wi = bit / 32, sh = bit % 32;
  if (sh + BITS <= 32) return (w[wi] >> sh) & kMask;
  return __funnelshift_r(w[wi], w[wi + 1 < BITS ? wi + 1 : BITS - 1], sh) & kMask;
}

// Code i as f32: the code under the magic exponent 0x4B000000 reads 2^23 + q; subtracting 2^23
// is exact.
template <int BITS>
__device__ __forceinline__ float code_f32(const uint32_t (&w)[BITS], int i) {
  return __uint_as_float(code_u32<BITS>(w, i) | 0x4B000000u) - 8388608.0f;
}

}  // namespace quanta::cuda
