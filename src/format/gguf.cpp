// Host side of the GGUF codecs: runtime dispatch for decoding and the reference encoders for
// the 32-element block types, bit-exact with gguf-py 0.19 quantize() (gguf-py/gguf/quants.py),
// which mirrors ggml's quantize_row_*_ref (ggml/src/ggml-quants.c) in f32 numpy arithmetic.
#include "format/gguf.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "quanta/error.hpp"

namespace quanta::codec::gguf {

namespace {

std::string scheme_name(Scheme s) {
  return std::string(scheme_info(s).name);
}

void require_gguf(Scheme s, const char* op) {
  if (static_cast<int>(s) >= static_cast<int>(std::size(kSchemes)) ||
      scheme_info(s).family != Family::gguf) {
    const std::string name = static_cast<int>(s) < static_cast<int>(std::size(kSchemes))
                                 ? scheme_name(s)
                                 : "scheme id " + std::to_string(static_cast<int>(s));
    throw Error(std::string("[quanta::gguf::") + op + "] s: " + name +
                " is not a GGUF block scheme (expected q4_0 .. q6_K)");
  }
}

// Copies the block out first: `block` may sit at any byte offset of a row.
template <class Block, class T>
void decode_as(const void* block, T* out, void (*fn)(const Block&, T*)) {
  Block b;
  std::memcpy(&b, block, sizeof b);
  fn(b, out);
}

template <class T>
void decode_any(Scheme s, const void* block, T* out, const char* op) {
  require_gguf(s, op);
  switch (s) {
    case Scheme::q4_0:
      return decode_as<block_q4_0, T>(block, out, dequantize_block_q4_0<T>);
    case Scheme::q4_1:
      return decode_as<block_q4_1, T>(block, out, dequantize_block_q4_1<T>);
    case Scheme::q5_0:
      return decode_as<block_q5_0, T>(block, out, dequantize_block_q5_0<T>);
    case Scheme::q5_1:
      return decode_as<block_q5_1, T>(block, out, dequantize_block_q5_1<T>);
    case Scheme::q8_0:
      return decode_as<block_q8_0, T>(block, out, dequantize_block_q8_0<T>);
    case Scheme::q2_K:
      return decode_as<block_q2_K, T>(block, out, dequantize_block_q2_K<T>);
    case Scheme::q3_K:
      return decode_as<block_q3_K, T>(block, out, dequantize_block_q3_K<T>);
    case Scheme::q4_K:
      return decode_as<block_q4_K, T>(block, out, dequantize_block_q4_K<T>);
    case Scheme::q5_K:
      return decode_as<block_q5_K, T>(block, out, dequantize_block_q5_K<T>);
    case Scheme::q6_K:
      return decode_as<block_q6_K, T>(block, out, dequantize_block_q6_K<T>);
    default:
      break;
  }
  throw Error(std::string("[quanta::gguf::") + op + "] s: no decoder for " + scheme_name(s));
}

// ---- encoders ------------------------------------------------------------------------------
// gguf-py rounds x * id to f32 and then adds the offset (two numpy ufuncs), as ggml's C does
// when built without contraction. A compiler allowed to contract (GCC's default
// -ffp-contract=fast once FMA is enabled, e.g. -march=native) would fuse x * id + 8.5f into
// one FMA and flip some truncations, so the product goes through a volatile to stay rounded.
float rounded_product(float a, float b) {
  volatile float p = a * b;
  return p;
}

// numpy's trunc(v).astype(uint8).clip(0, hi) for the finite v these encoders produce
// (v >= 0 up to rounding); clamping first keeps the float-to-int cast defined for any input.
uint8_t trunc_clip(float v, int hi) {
  const float t = std::trunc(v);
  return static_cast<uint8_t>(std::clamp(t, 0.0f, static_cast<float>(hi)));
}

// Q4_0 / Q5_0: d = max / -(2^(bits-1)) where max is the signed value of the first element of
// largest |x| (gguf-py: abs().argmax(); ggml: strict `amax < fabsf(v)`); then
// q = trunc(x * id + (2^(bits-1) + 0.5)) clipped to 2^bits - 1. Starting from x[0] as argmax
// does: in an all-zero block gguf-py takes x[0] (maybe -0) where ggml takes +0, so the two
// differ only in the sign of d = 0 when x[0] is -0.
void absmax_signed(const float* x, float* max) {
  float amax = std::fabs(x[0]);
  *max = x[0];
  for (int j = 1; j < kQK; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      *max = x[j];
    }
  }
}

// Q4_1 / Q5_1 min and max as ggml's scan. gguf-py's numpy min()/max() agree on every finite
// block except the sign of a zero min when both +0 and -0 occur (numpy's answer then depends
// on SIMD lane positions), which only flips the sign bit of m = 0.
void min_max(const float* x, float* min, float* max) {
  *min = x[0];
  *max = x[0];
  for (int j = 1; j < kQK; ++j) {
    *min = std::min(*min, x[j]);
    *max = std::max(*max, x[j]);
  }
}

float inverse(float d) {
  return d != 0.0f ? 1.0f / d : 0.0f;
}

void encode_q4_0(const float* x, block_q4_0* y) {
  float max;
  absmax_signed(x, &max);
  const float d = max / -8.0f;
  const float id = inverse(d);
  y->d = f32_to_f16_bits(d);
  for (int j = 0; j < kQK / 2; ++j) {
    const uint8_t q0 = trunc_clip(rounded_product(x[j], id) + 8.5f, 15);
    const uint8_t q1 = trunc_clip(rounded_product(x[j + kQK / 2], id) + 8.5f, 15);
    y->qs[j] = static_cast<uint8_t>(q0 | q1 << 4);
  }
}

void encode_q4_1(const float* x, block_q4_1* y) {
  float min, max;
  min_max(x, &min, &max);
  const float d = (max - min) / 15.0f;
  const float id = inverse(d);
  y->d = f32_to_f16_bits(d);
  y->m = f32_to_f16_bits(min);
  for (int j = 0; j < kQK / 2; ++j) {
    const uint8_t q0 = trunc_clip(rounded_product(x[j] - min, id) + 0.5f, 15);
    const uint8_t q1 = trunc_clip(rounded_product(x[j + kQK / 2] - min, id) + 0.5f, 15);
    y->qs[j] = static_cast<uint8_t>(q0 | q1 << 4);
  }
}

// Q5_x: low nibbles as Q4_x; bit 4 of element j goes to bit j of the little-endian u32 qh.
void pack_q5(const uint8_t* q, uint8_t* qh, uint8_t* qs) {
  std::memset(qh, 0, 4);
  for (int j = 0; j < kQK / 2; ++j) {
    qs[j] = static_cast<uint8_t>((q[j] & 0x0F) | (q[j + kQK / 2] & 0x0F) << 4);
  }
  for (int j = 0; j < kQK; ++j) qh[j / 8] |= static_cast<uint8_t>(((q[j] >> 4) & 1) << (j % 8));
}

void encode_q5_0(const float* x, block_q5_0* y) {
  float max;
  absmax_signed(x, &max);
  const float d = max / -16.0f;
  const float id = inverse(d);
  y->d = f32_to_f16_bits(d);
  uint8_t q[kQK];
  for (int j = 0; j < kQK; ++j) q[j] = trunc_clip(rounded_product(x[j], id) + 16.5f, 31);
  pack_q5(q, y->qh, y->qs);
}

void encode_q5_1(const float* x, block_q5_1* y) {
  float min, max;
  min_max(x, &min, &max);
  const float d = (max - min) / 31.0f;
  const float id = inverse(d);
  y->d = f32_to_f16_bits(d);
  y->m = f32_to_f16_bits(min);
  uint8_t q[kQK];
  for (int j = 0; j < kQK; ++j) q[j] = trunc_clip(rounded_product(x[j] - min, id) + 0.5f, 31);
  pack_q5(q, y->qh, y->qs);
}

// Q8_0: d = amax / 127, q = roundf(x * id): half away from zero, as gguf-py's np_roundf.
void encode_q8_0(const float* x, block_q8_0* y) {
  float amax = 0.0f;
  for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float d = amax / 127.0f;
  const float id = inverse(d);
  y->d = f32_to_f16_bits(d);
  for (int j = 0; j < kQK; ++j) {
    const float r = std::round(x[j] * id);  // no add follows: nothing to contract
    y->qs[j] = static_cast<int8_t>(std::clamp(r, -128.0f, 127.0f));
  }
}

template <class Block>
void encode_blocks(const float* x, int64_t n_blocks, uint8_t* out,
                   void (*fn)(const float*, Block*)) {
  for (int64_t i = 0; i < n_blocks; ++i) {
    Block b;
    fn(x + i * kQK, &b);
    std::memcpy(out + i * sizeof(Block), &b, sizeof b);
  }
}

}  // namespace

void decode_block(Scheme s, const void* block, float* out) {
  decode_any<float>(s, block, out, "decode_block");
}

void decode_block_f64(Scheme s, const void* block, double* out) {
  decode_any<double>(s, block, out, "decode_block_f64");
}

void encode_row(Scheme s, const float* x, int64_t k, uint8_t* out) {
  require_gguf(s, "encode_row");
  const SchemeInfo& info = scheme_info(s);
  if (info.block_elems == kQK_K) {
    throw Error("[quanta::gguf::encode_row] s: encode is not implemented yet for " +
                scheme_name(s) + " (GGUF K-quants are decode-only for now)");
  }
  if (k < 0 || k % info.block_elems != 0) {
    throw Error("[quanta::gguf::encode_row] k: k = " + std::to_string(k) +
                " is not a non-negative multiple of the " + scheme_name(s) + " block size " +
                std::to_string(info.block_elems));
  }
  const int64_t n = k / info.block_elems;
  switch (s) {
    case Scheme::q4_0:
      return encode_blocks<block_q4_0>(x, n, out, encode_q4_0);
    case Scheme::q4_1:
      return encode_blocks<block_q4_1>(x, n, out, encode_q4_1);
    case Scheme::q5_0:
      return encode_blocks<block_q5_0>(x, n, out, encode_q5_0);
    case Scheme::q5_1:
      return encode_blocks<block_q5_1>(x, n, out, encode_q5_1);
    case Scheme::q8_0:
      return encode_blocks<block_q8_0>(x, n, out, encode_q8_0);
    default:
      break;
  }
  throw Error("[quanta::gguf::encode_row] s: no encoder for " + scheme_name(s));
}

}  // namespace quanta::codec::gguf
