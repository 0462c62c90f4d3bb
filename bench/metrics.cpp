#include "metrics.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace quanta::bench {

namespace {
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
bool positive(double v) {
  return std::isfinite(v) && v > 0;
}
}  // namespace

int32_t expert_of_row(int64_t row, int64_t experts, int64_t shift) {
  return static_cast<int32_t>((row + shift) % experts);
}

int64_t experts_touched(const ProblemSize& p) {
  if (p.op != Op::gather_matmul) return 1;
  return std::min(p.m, p.experts);
}

std::size_t weight_bytes(const ProblemSize& p) {
  // Affine scales share the activation dtype (MLX); other schemes ignore scale_dtype.
  return footprint(p.format, p.n, p.k, p.layout, p.dtype, "bench").total();
}

std::size_t bytes_moved(const ProblemSize& p) {
  const auto esize = dtype_size(p.dtype);
  const auto N = static_cast<std::size_t>(p.n), K = static_cast<std::size_t>(p.k),
             M = static_cast<std::size_t>(p.m);
  if (p.op == Op::dequantize) return weight_bytes(p) + N * K * esize;
  std::size_t b = static_cast<std::size_t>(experts_touched(p)) * weight_bytes(p);
  b += M * K * esize + M * N * esize;
  if (p.op == Op::gather_matmul) b += M * sizeof(int32_t);
  return b;
}

double flops(const ProblemSize& p) {
  if (p.op == Op::dequantize) return 0;
  return 2.0 * static_cast<double>(p.m) * static_cast<double>(p.n) * static_cast<double>(p.k);
}

double gbps(double bytes, double seconds) {
  return positive(seconds) ? bytes / seconds / 1e9 : kNaN;
}

double tflops(double flop_count, double seconds) {
  return positive(seconds) ? flop_count / seconds / 1e12 : kNaN;
}

double roof_pct(double bytes, double flop_count, double seconds, const Roof& roof) {
  if (!positive(seconds) || !positive(roof.read_gbps)) return kNaN;
  double bound = bytes / (roof.read_gbps * 1e9);
  if (flop_count > 0) {
    if (!positive(roof.compute_tflops)) return kNaN;
    bound = std::max(bound, flop_count / (roof.compute_tflops * 1e12));
  }
  return 100.0 * bound / seconds;
}

std::string_view roof_bound(double bytes, double flop_count, const Roof& roof) {
  if (!positive(roof.read_gbps)) return "";
  if (flop_count <= 0) return "memory";
  if (!positive(roof.compute_tflops)) return "";
  return flop_count / (roof.compute_tflops * 1e12) > bytes / (roof.read_gbps * 1e9) ? "compute"
                                                                                    : "memory";
}

double speedup(double baseline_seconds, double kernel_seconds) {
  return positive(baseline_seconds) && positive(kernel_seconds) ? baseline_seconds / kernel_seconds
                                                                : kNaN;
}

}  // namespace quanta::bench
