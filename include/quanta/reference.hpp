// The fp64 oracle: clarity over speed. It decodes every element with the format's codec,
// holds values in double and accumulates in double. It is an independent computation, not
// a restatement of any kernel's loop, and it only reads host memory.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "quanta/matrix.hpp"

namespace quanta::ref {

// Logical W of one expert as doubles, [N][K] row-major whatever the storage layout.
std::vector<double> dequantize(const QuantizedMatrix& w, int64_t expert = 0);

// Dense activations as doubles.
std::vector<double> to_double(ConstMatrixView x);

// y[M][N] = Σ_k x[m][k] · W[n][k] (for either layout).
std::vector<double> matmul(ConstMatrixView x, const QuantizedMatrix& w);

// y[i][n] = Σ_k x[i][k] · W_{ids[i]}[n][k].
std::vector<double> gather_matmul(ConstMatrixView x, const QuantizedMatrix& w,
                                  std::span<const int32_t> expert_ids);

// How a result compares with the oracle, and whether it meets the bound for `dtype`
// (rel-L2 <= rel_l2_bound(dtype), every element finite).
struct Comparison {
  double max_abs = 0;
  double rel_l2 = 0;
  double cosine = 0;
  int64_t nonfinite = 0;  // NaN or Inf elements in the result
  bool pass = false;
};
Comparison compare(ConstMatrixView y, std::span<const double> expected, DType bound_dtype);
Comparison compare(std::span<const double> y, std::span<const double> expected, double bound);

}  // namespace quanta::ref
