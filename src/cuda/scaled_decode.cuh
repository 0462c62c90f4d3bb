// The element and scale decoders of the microscaled (mxfp4, nvfp4, mxfp8) and fp8 (e4m3, e5m2)
// formats, shared by qmv_scaled.cu and dequantize.cu. Every decode is exact:
//   E2M1: the code's magnitude moved under an f16's exponent and mantissa (bits 9-11) and its sign
//   to bit 15 reads v · 2^-14, also for the subnormal 0.5 (times 2^14 for the value itself).
//   E4M3: cvt.f16x2.e4m3x2 (sm_89+; cuda_fp8.h emulates it before). E5M2: the byte is the top half
//   of an f16.
#pragma once

#include <cuda_fp8.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "cuda/common.cuh"
#include "cuda/mma.cuh"  // as_u32, as_vec2
#include "format/minifloat.hpp"
#include "quanta/error.hpp"
#include "quanta/format.hpp"
#include "quanta/matrix.hpp"

namespace quanta::cuda {

// What a scheme stores: codes per 16-byte chunk, elements per scale, the element code.
template <Scheme S>
struct ScaledTraits;
template <>
struct ScaledTraits<Scheme::mxfp4> {
  static constexpr int kCodes = 32, kGroup = 32;
  static constexpr ElementCode kCode = ElementCode::e2m1;
};
template <>
struct ScaledTraits<Scheme::nvfp4> {
  static constexpr int kCodes = 32, kGroup = 16;
  static constexpr ElementCode kCode = ElementCode::e2m1;
};
template <>
struct ScaledTraits<Scheme::mxfp8> {
  static constexpr int kCodes = 16, kGroup = 32;
  static constexpr ElementCode kCode = ElementCode::e4m3;
};
template <>
struct ScaledTraits<Scheme::fp8_e4m3> {
  static constexpr int kCodes = 16, kGroup = 0;
  static constexpr ElementCode kCode = ElementCode::e4m3;
};
template <>
struct ScaledTraits<Scheme::fp8_e5m2> {
  static constexpr int kCodes = 16, kGroup = 0;
  static constexpr ElementCode kCode = ElementCode::e5m2;
};

// Element pair (i, i + 4) of a word of 8 E2M1 codes (i = 0..3) as an f16 pair of v · 2^-14: the
// magnitude under the exponent and mantissa (bits 9-11), the sign at bit 15 (exact, also for the
// subnormal 0.5).
__device__ __forceinline__ uint32_t e2m1_pair_small(uint32_t w, int i) {
  const uint32_t s = w >> (4 * i);
  return ((s & 0x00070007u) << 9) | ((s & 0x00080008u) << 12);
}

// The same pair as exact values.
__device__ __forceinline__ uint32_t e2m1_pair(uint32_t w, int i) {
  return as_u32(__hmul2(as_vec2<__half>(e2m1_pair_small(w, i)), __float2half2_rn(16384.0f)));
}

// Element pair (2i, 2i + 1) of a word of 4 fp8 codes as an exact f16 pair.
template <ElementCode C>
__device__ __forceinline__ uint32_t fp8_pair(uint32_t w, int i) {
  if constexpr (C == ElementCode::e4m3) {
    const __half2_raw r =
        __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(w >> (16 * i)), __NV_E4M3);
    return static_cast<uint32_t>(r.x) | static_cast<uint32_t>(r.y) << 16;
  } else {
    return __byte_perm(w, 0u, i == 0 ? 0x1404u : 0x3424u);
  }
}

// The word's codes as f32, in element order: 8 E2M1 codes (as v · 2^-14) or 4 fp8 codes (exact).
template <ElementCode C>
__device__ __forceinline__ void decode_word(uint32_t w, float* v) {
#pragma unroll
  for (int t = 0; t < (C == ElementCode::e2m1 ? 4 : 2); ++t) {
    if constexpr (C == ElementCode::e2m1) {  // elements t and t + 4 share a pair
      const float2 f = __half22float2(as_vec2<__half>(e2m1_pair_small(w, t)));
      v[t] = f.x;
      v[t + 4] = f.y;
    } else {  // elements 2t and 2t + 1
      const float2 f = __half22float2(as_vec2<__half>(fp8_pair<C>(w, t)));
      v[2 * t] = f.x;
      v[2 * t + 1] = f.y;
    }
  }
}

// The scales a chunk needs, as f32 (microscaled: one or two groups; fp8: unused).
template <Scheme S>
__device__ __forceinline__ void chunk_scales(const uint8_t* srow, int chunk, float* s) {
  if constexpr (S == Scheme::mxfp4) {
    s[0] = codec::e8m0_to_float(srow[chunk]);
  } else if constexpr (S == Scheme::nvfp4) {
    const uint16_t b = *reinterpret_cast<const uint16_t*>(srow + 2 * chunk);
    s[0] = codec::e4m3_to_float(static_cast<uint8_t>(b));
    s[1] = codec::e4m3_to_float(static_cast<uint8_t>(b >> 8));
  } else if constexpr (S == Scheme::mxfp8) {
    s[0] = codec::e8m0_to_float(srow[chunk / 2]);
  }
}

// f.template operator()<S>() for the scheme of w; `who` (e.g. "[quanta::matmul] qmv_scaled") opens
// the error otherwise.
template <class F>
void dispatch_scaled_scheme(const QuantizedMatrix& w, std::string_view who, F&& f) {
  switch (w.format.scheme) {
    case Scheme::mxfp4:
      return f.template operator()<Scheme::mxfp4>();
    case Scheme::nvfp4:
      return f.template operator()<Scheme::nvfp4>();
    case Scheme::mxfp8:
      return f.template operator()<Scheme::mxfp8>();
    case Scheme::fp8_e4m3:
      return f.template operator()<Scheme::fp8_e4m3>();
    case Scheme::fp8_e5m2:
      return f.template operator()<Scheme::fp8_e5m2>();
    default:
      throw Error(std::string(who) + ": " + std::string(w.format.info().name) +
                  " is not a microscaled or fp8 format");
  }
}

// nvfp4 reads a chunk's two scale bytes as one u16, fp8 an f32 per row.
inline std::size_t scale_alignment(Scheme s) {
  return s == Scheme::nvfp4 ? 2 : (s == Scheme::fp8_e4m3 || s == Scheme::fp8_e5m2) ? 4 : 1;
}

}  // namespace quanta::cuda
