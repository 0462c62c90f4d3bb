// Helpers shared by tests: random dense buffers in any dtype, NaN poisoning, views.
#pragma once

#include <gtest/gtest.h>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include <random>
#include <string>
#include <vector>

#include "format/dense.hpp"
#include "format/gguf.hpp"
#include "quanta/error.hpp"
#include "quanta/matrix.hpp"
#include "quanta/ops.hpp"

namespace quanta::test {

// A dense host buffer of one dtype.
struct Dense {
  std::vector<unsigned char> bytes;
  DType dtype = DType::f32;
  int64_t rows = 0, cols = 0;

  Dense(DType t, int64_t r, int64_t c)
      : bytes(static_cast<size_t>(r * c) * dtype_size(t)), dtype(t), rows(r), cols(c) {}
  ConstMatrixView view() const { return {bytes.data(), dtype, rows, cols}; }
  MatrixView mut() { return {bytes.data(), dtype, rows, cols}; }
  float at(int64_t i) const { return dense::load(bytes.data(), dtype, static_cast<size_t>(i)); }
  void set(int64_t i, float v) { dense::store(bytes.data(), dtype, static_cast<size_t>(i), v); }
  // Every element NaN, so an element a kernel fails to write cannot pass a check.
  void poison() {
    for (int64_t i = 0; i < rows * cols; ++i) set(i, NAN);
  }
};

// Normal values with a per-row scale (weights) — never all zero.
inline Dense random_dense(DType t, int64_t rows, int64_t cols, uint32_t seed, float scale = 1.0f,
                          bool row_scales = true) {
  Dense d(t, rows, cols);
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> rs(0.1f, 2.0f);
  for (int64_t r = 0; r < rows; ++r) {
    const float s = scale * (row_scales ? rs(rng) : 1.0f);
    for (int64_t c = 0; c < cols; ++c) d.set(r * cols + c, normal(rng) * s);
  }
  return d;
}

// K-quants have no encoder: random block bytes with small finite f16 scales.
inline QuantizedMatrix random_kquant(Scheme s, int64_t n, int64_t k, uint32_t seed, int64_t batch) {
  QuantizedMatrix m =
      QuantizedMatrix::allocate_host(Format::gguf(s), n, k, DType::f32, Layout::nk, batch);
  std::mt19937 rng(seed);
  const auto bytes = m.footprint().code_bytes * static_cast<size_t>(batch);
  for (size_t i = 0; i < bytes; ++i) m.codes[i] = static_cast<std::byte>(rng() & 0xff);
  const SchemeInfo& info = scheme_info(s);
  auto set_f16 = [&](size_t block, size_t offset, float v) {
    const uint16_t h = f32_to_f16_bits(v);
    std::memcpy(m.codes + block * info.block_bytes + offset, &h, 2);
  };
  std::uniform_real_distribution<float> u(0.001f, 0.02f);
  using namespace codec::gguf;
  for (size_t b = 0; b < bytes / info.block_bytes; ++b) {
    switch (s) {
      case Scheme::q2_K:
        set_f16(b, offsetof(block_q2_K, d), u(rng));
        set_f16(b, offsetof(block_q2_K, dmin), u(rng));
        break;
      case Scheme::q3_K:
        set_f16(b, offsetof(block_q3_K, d), u(rng));
        break;
      case Scheme::q4_K:
        set_f16(b, offsetof(block_q4_K, d), u(rng));
        set_f16(b, offsetof(block_q4_K, dmin), u(rng));
        break;
      case Scheme::q5_K:
        set_f16(b, offsetof(block_q5_K, d), u(rng));
        set_f16(b, offsetof(block_q5_K, dmin), u(rng));
        break;
      default:
        set_f16(b, offsetof(block_q6_K, d), u(rng));
        break;
    }
  }
  return m;
}

// A quantized random matrix on the host (scales in dtype t), a stack of `batch` experts.
inline QuantizedMatrix host_weights(const Format& f, DType t, int64_t n, int64_t k, Layout layout,
                                    uint32_t seed, int64_t batch = 1) {
  if (!f.info().encode) return random_kquant(f.scheme, n, k, seed, batch);
  if (batch == 1) {
    const Dense w =
        layout == Layout::nk ? random_dense(t, n, k, seed) : random_dense(t, k, n, seed);
    QuantizeOptions o;
    o.layout = layout;
    if (f.scheme == Scheme::nvfp4 && seed % 2) o.nvfp4_tensor_amax = 6.0f;
    return quantize(w.view(), f, o);
  }
  QuantizedMatrix stack = QuantizedMatrix::allocate_host(f, n, k, t, layout, batch);
  const Footprint fp = stack.footprint();
  for (int64_t e = 0; e < batch; ++e) {
    // A stack carries no per-expert global scale, so nvfp4 experts are quantized without one
    // (even seeds): with one, their block scales would assume a global the stack does not apply.
    const uint32_t s = seed + static_cast<uint32_t>(e) * 7;
    const QuantizedMatrix one =
        host_weights(f, t, n, k, layout, f.scheme == Scheme::nvfp4 ? s & ~1u : s);
    const QuantizedMatrix dst = stack.expert(e);
    std::memcpy(dst.codes, one.codes, fp.code_bytes);
    if (fp.scale_bytes) std::memcpy(dst.scales, one.scales, fp.scale_bytes);
    if (fp.bias_bytes) std::memcpy(dst.biases, one.biases, fp.bias_bytes);
  }
  return stack;
}

// Runs f and expects a quanta::Error whose message contains `fragment`.
template <class F>
void expect_error(F&& f, const std::string& fragment) {
  try {
    f();
    ADD_FAILURE() << "expected an error containing: " << fragment;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

}  // namespace quanta::test
