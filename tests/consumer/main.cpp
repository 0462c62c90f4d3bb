// Quantize a small matrix, pack it for the CPU, multiply, check against the oracle.
#include <quanta/ops.hpp>
#include <quanta/reference.hpp>

#include <cstdio>
#include <vector>

int main() {
  const int64_t m = 2, n = 8, k = 128;
  std::vector<float> w(n * k), x(m * k), y(m * n);
  for (int64_t i = 0; i < n * k; ++i) w[i] = static_cast<float>((i * 37) % 17) / 17.0f - 0.5f;
  for (int64_t i = 0; i < m * k; ++i) x[i] = static_cast<float>((i * 11) % 13) / 13.0f - 0.4f;
  const auto q = quanta::prepack(
      quanta::quantize({w.data(), quanta::DType::f32, n, k}, quanta::Format::affine(4, 64)));
  quanta::matmul({x.data(), quanta::DType::f32, m, k}, q, {y.data(), quanta::DType::f32, m, n});
  const auto c = quanta::ref::compare(quanta::ConstMatrixView{y.data(), quanta::DType::f32, m, n},
                                      quanta::ref::matmul({x.data(), quanta::DType::f32, m, k}, q),
                                      quanta::DType::f32);
  std::printf("consumer: %s rel_l2 %.2e\n", q.describe().c_str(), c.rel_l2);
  return c.pass ? 0 : 1;
}
