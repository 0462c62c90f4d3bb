// A QuantizedMatrix as kernels see it: raw pointers, byte strides and the format's facts as
// plain values (one POD passed by value), plus the per-element decode every generic kernel uses.
// The decode mirrors codec::decode_storage_row (src/format/decode.cpp) operation by operation,
// with the shared __host__ __device__ codecs, so device dequantize is bit-identical to the host.
#pragma once

#include <cstdint>

#include "cuda/common.cuh"
#include "format/affine.hpp"
#include "format/gguf.hpp"
#include "format/minifloat.hpp"
#include "quanta/matrix.hpp"

namespace quanta::cuda {

struct WeightDesc {
  const uint8_t* codes = nullptr;
  const uint8_t* scales = nullptr;
  const uint8_t* biases = nullptr;
  int64_t code_stride = 0, scale_stride = 0, bias_stride = 0;  // bytes per matrix of the stack
  int64_t row_bytes = 0;  // bytes per storage row (nk: one output row n; kn: one K-row)
  int32_t n = 0, k = 0, batch = 1;
  int32_t group = 0;  // elements per scale along K; 0 for fp8 channel / tensor scales
  int32_t bits = 0;
  int32_t block_elems = 0, block_bytes = 0;  // GGUF blocks
  Scheme scheme = Scheme::affine;
  Family family = Family::affine;
  ElementCode code = ElementCode::uint;
  ScaleEncoding scale_enc = ScaleEncoding::activation_dtype;
  Granularity granularity = Granularity::group;
  DType scale_dtype = DType::f16;
  Layout layout = Layout::nk;
  float global = 1.0f;  // nvfp4 global scale (1 when absent)

  __host__ __device__ int64_t storage_rows() const { return layout == Layout::nk ? n : k; }
  __host__ __device__ int64_t storage_cols() const { return layout == Layout::nk ? k : n; }
};

inline WeightDesc make_desc(const QuantizedMatrix& w) {
  const Footprint fp = w.footprint();
  const SchemeInfo& info = w.format.info();
  WeightDesc d;
  d.codes = reinterpret_cast<const uint8_t*>(w.codes);
  d.scales = reinterpret_cast<const uint8_t*>(w.scales);
  d.biases = reinterpret_cast<const uint8_t*>(w.biases);
  d.code_stride = static_cast<int64_t>(fp.code_bytes);
  d.scale_stride = static_cast<int64_t>(fp.scale_bytes);
  d.bias_stride = static_cast<int64_t>(fp.bias_bytes);
  d.n = static_cast<int32_t>(w.n);
  d.k = static_cast<int32_t>(w.k);
  d.batch = static_cast<int32_t>(w.batch);
  d.group = w.format.group_size;
  d.bits = w.format.bits;
  d.block_elems = info.block_elems;
  d.block_bytes = info.block_bytes;
  d.scheme = w.format.scheme;
  d.family = info.family;
  d.code = info.code;
  d.scale_enc = info.scale;
  d.granularity = w.format.granularity;
  d.scale_dtype = w.scale_dtype;
  d.layout = w.layout;
  d.global = w.global_scale ? *w.global_scale : 1.0f;
  d.row_bytes = static_cast<int64_t>(fp.code_bytes) / d.storage_rows();
  return d;
}

// Element code value (uint, E2M1, E4M3, E5M2) as a float.
__device__ __forceinline__ float element_value(ElementCode c, uint32_t q) {
  switch (c) {
    case ElementCode::uint:
      return static_cast<float>(q);
    case ElementCode::e2m1:
      return codec::e2m1_to_float(static_cast<uint8_t>(q));
    case ElementCode::e4m3:
      return codec::e4m3_to_float(static_cast<uint8_t>(q));
    case ElementCode::e5m2:
      return codec::e5m2_to_float(static_cast<uint8_t>(q));
    case ElementCode::gguf_block:
      break;
  }
  return 0.0f;
}

// Element i of storage row r of expert e (not for GGUF), rounded as decode_storage_row rounds
// for `round_as`: affine multiplies then adds (two roundings, no FMA), fp formats multiply.
__device__ __forceinline__ float decode_element(const WeightDesc& w, int64_t e, int64_t r,
                                                int64_t i, DType rounding) {
  const int64_t len = w.storage_cols();
  const uint8_t* row = w.codes + e * w.code_stride + r * w.row_bytes;
  const float v = element_value(w.code, codec::affine_code(row, i, w.bits, len));
  const bool nk = w.layout == Layout::nk;
  const int64_t n = nk ? r : i, k = nk ? i : r;
  const int64_t g = w.group > 0 ? w.group : 1;
  const int64_t groups = w.group > 0 ? w.k / w.group : 1;
  const int64_t si = nk ? n * groups + k / g : (k / g) * w.n + n;
  switch (w.family) {
    case Family::affine: {
      const float s = load_as_f32(w.scales + e * w.scale_stride, w.scale_dtype, si);
      const float b = load_as_f32(w.biases + e * w.bias_stride, w.scale_dtype, si);
      const float sq = round_as(rounding, __fmul_rn(s, v));
      return round_as(rounding, __fadd_rn(sq, b));
    }
    case Family::microscaled: {
      const uint8_t sb = w.scales[e * w.scale_stride + si];
      const float s =
          w.scale_enc == ScaleEncoding::e8m0 ? codec::e8m0_to_float(sb) : codec::e4m3_to_float(sb);
      return __fmul_rn(round_as(rounding, __fmul_rn(v, s)), w.global);
    }
    case Family::fp8: {
      const float* s = reinterpret_cast<const float*>(w.scales + e * w.scale_stride);
      return __fmul_rn(v, w.granularity == Granularity::channel ? s[n] : s[0]);
    }
    case Family::gguf:
      break;
  }
  return 0.0f;
}

// Decodes one GGUF block (block_elems values) with ggml's f32 arithmetic.
__device__ __forceinline__ void decode_gguf_block(Scheme s, const uint8_t* p, float* out) {
  using namespace codec::gguf;
  switch (s) {
    case Scheme::q4_0:
      return dequantize_block_q4_0<float>(*reinterpret_cast<const block_q4_0*>(p), out);
    case Scheme::q4_1:
      return dequantize_block_q4_1<float>(*reinterpret_cast<const block_q4_1*>(p), out);
    case Scheme::q5_0:
      return dequantize_block_q5_0<float>(*reinterpret_cast<const block_q5_0*>(p), out);
    case Scheme::q5_1:
      return dequantize_block_q5_1<float>(*reinterpret_cast<const block_q5_1*>(p), out);
    case Scheme::q8_0:
      return dequantize_block_q8_0<float>(*reinterpret_cast<const block_q8_0*>(p), out);
    case Scheme::q2_K:
      return dequantize_block_q2_K<float>(*reinterpret_cast<const block_q2_K*>(p), out);
    case Scheme::q3_K:
      return dequantize_block_q3_K<float>(*reinterpret_cast<const block_q3_K*>(p), out);
    case Scheme::q4_K:
      return dequantize_block_q4_K<float>(*reinterpret_cast<const block_q4_K*>(p), out);
    case Scheme::q5_K:
      return dequantize_block_q5_K<float>(*reinterpret_cast<const block_q5_K*>(p), out);
    case Scheme::q6_K:
      return dequantize_block_q6_K<float>(*reinterpret_cast<const block_q6_K*>(p), out);
    default:
      break;
  }
}

// Elements [c0, c0 + count) of storage row r of expert e, decoded into out[0, count) by the
// whole block. For GGUF, c0 and count are multiples of the block size (every K is).
__device__ __forceinline__ void decode_row_span(const WeightDesc& w, int64_t e, int64_t r,
                                                int64_t c0, int count, float* out, DType rounding) {
  if (w.family == Family::gguf) {
    const uint8_t* row = w.codes + e * w.code_stride + r * w.row_bytes;
    for (int b = threadIdx.x; b < count / w.block_elems; b += blockDim.x)
      decode_gguf_block(w.scheme, row + (c0 / w.block_elems + b) * w.block_bytes,
                        out + b * w.block_elems);
    return;
  }
  for (int i = threadIdx.x; i < count; i += blockDim.x)
    out[i] = decode_element(w, e, r, c0 + i, rounding);
}

}  // namespace quanta::cuda
