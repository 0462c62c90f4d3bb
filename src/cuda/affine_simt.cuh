// Helpers for affine chunks (32 consecutive codes = 4·bits bytes of one stored row): the widest
// aligned loads a chunk allows, with the cache policy its kernel wants, and code i as an exact
// f32 (CUDA-core kernels).
#pragma once

#include <cstdint>

#include "cuda/common.cuh"

namespace quanta::cuda {

// How a chunk's words are read: plain loads (shared memory), through the read-only cache, as
// streaming loads (read once: kept out of L1), or streaming with a request to L2 for the
// surrounding 256 bytes (a lane quad reads 64 bytes of a row per window in qmm_affine_rf, and
// the row's next three windows then come from L2).
enum class ChunkLoad { plain, ldg, stream, stream_l2 };

template <ChunkLoad L, class V>  // V: uint4, uint2 or uint32_t
__device__ __forceinline__ V load_as(const uint8_t* p) {
  const V* q = reinterpret_cast<const V*>(p);
  if constexpr (L == ChunkLoad::plain) {
    return *q;
  } else if constexpr (L == ChunkLoad::ldg) {
    return __ldg(q);
  } else if constexpr (L == ChunkLoad::stream) {
    return __ldcs(q);
  } else if constexpr (sizeof(V) == 16) {
    uint4 v;
    asm("ld.global.cs.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];\n"
        : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
        : "l"(p));
    return v;
  } else if constexpr (sizeof(V) == 8) {
    uint2 v;
    asm("ld.global.cs.L2::256B.v2.u32 {%0, %1}, [%2];\n" : "=r"(v.x), "=r"(v.y) : "l"(p));
    return v;
  } else {
    uint32_t v;
    asm("ld.global.cs.L2::256B.u32 %0, [%1];\n" : "=r"(v) : "l"(p));
    return v;
  }
}

// 4·BITS bytes at p: 16-byte loads for 4 and 8 bits, 8-byte for 2 and 6, 4-byte for 3 and 5
// (chunk offsets are multiples of those widths when the row start is 16-byte aligned).
template <int BITS, ChunkLoad L = ChunkLoad::ldg>
__device__ __forceinline__ void load_chunk(const uint8_t* p, uint32_t (&w)[BITS]) {
  if constexpr (BITS == 4 || BITS == 8) {
#pragma unroll
    for (int i = 0; i < BITS / 4; ++i) {
      const uint4 v = load_as<L, uint4>(p + 16 * i);
      w[4 * i] = v.x;
      w[4 * i + 1] = v.y;
      w[4 * i + 2] = v.z;
      w[4 * i + 3] = v.w;
    }
  } else if constexpr (BITS == 2 || BITS == 6) {
#pragma unroll
    for (int i = 0; i < BITS / 2; ++i) {
      const uint2 v = load_as<L, uint2>(p + 8 * i);
      w[2 * i] = v.x;
      w[2 * i + 1] = v.y;
    }
  } else {
#pragma unroll
    for (int i = 0; i < BITS; ++i) w[i] = load_as<L, uint32_t>(p + 4 * i);
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
