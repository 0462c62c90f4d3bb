// Helpers shared by tests: random dense buffers in any dtype, NaN poisoning, views.
#pragma once

#include <gtest/gtest.h>
#include <cmath>
#include <cstdint>

#include <random>
#include <string>
#include <vector>

#include "format/dense.hpp"
#include "quanta/error.hpp"
#include "quanta/matrix.hpp"

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
