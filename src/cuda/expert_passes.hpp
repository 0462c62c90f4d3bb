// Rows of x grouped by expert on the device, for gather kernels that run one expert's matrix
// against many rows at once: with one row of x a pass (gather_qmv_*), a prefill of M rows over E
// experts reads each expert's matrix ~M/E times. The grouping is one small kernel with no host
// synchronisation, so a gather stays graph-capturable.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/families.hpp"  // kMaxGroupedExperts
#include "quanta/dtype.hpp"

namespace quanta::cuda {

// `rows` rows of x (at most the pass size) with the same expert: order[start .. start + rows).
struct ExpertPass {
  int32_t expert, start, rows, unused;  // 16 bytes: one load
};

struct ExpertPasses {
  const int32_t* order = nullptr;    // [M] the rows of x with a valid id, grouped by expert
  const ExpertPass* pass = nullptr;  // [max_passes], the first *count of them used
  const int32_t* count = nullptr;    // passes used
  int32_t max_passes = 0;            // a bound the host can size a grid by
};

// At most floor(M / per_pass) full passes plus one partial pass per expert present.
inline int64_t max_expert_passes(int64_t m, int64_t batch, int per_pass) {
  const int64_t bound = m / per_pass + (batch < m ? batch : m);
  return bound < m ? bound : m;
}

// Groups the M rows of x by ids (on `stream`, behind the previous kernel) into passes of at most
// per_pass rows. Rows whose id lies outside [0, batch) join no pass: their row of y (n elements
// of y_dtype) becomes NaN and *flag is set, as in the other gather kernels.
ExpertPasses group_rows_by_expert(const int32_t* ids, int32_t m, int32_t batch, int per_pass,
                                  void* y, DType y_dtype, int64_t n, int* flag,
                                  cudaStream_t stream);

}  // namespace quanta::cuda
