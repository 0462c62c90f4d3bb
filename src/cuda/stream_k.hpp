// Host side of the stream-K kernels (qmm_affine_tc, qmm_affine_rf): the checks and arguments
// they share, the persistent grid and the per-stream slots for partial sums. The device side
// (the units, stream_k_flush) is in qmm_affine_tc.cuh. Defined in qmm_affine_tc.cu.
#pragma once

#include <cuda_runtime.h>

#include <string_view>

#include "cuda/qmm_affine_tc.cuh"  // TcArgs
#include "quanta/matrix.hpp"
#include "quanta/ops.hpp"

namespace quanta::cuda {

// Device operands (an error if not), then the alignment the kernels' loads need: 16 bytes for x
// and the codes, 4 for the scale and bias rows. False: run matmul_generic instead (the kernel
// was chosen automatically); a forced kernel throws naming the argument.
bool stream_k_operands_ok(ConstMatrixView x, const QuantizedMatrix& w, MatrixView y,
                          const Context& ctx, std::string_view kernel);

// The operands' fields of the arguments (the grid fields are choose_stream_k_grid's).
TcArgs stream_k_args(ConstMatrixView x, const QuantizedMatrix& w, MatrixView y);

// Persistent stream-K grid for W's rows in tiles of 128 and K in stages of 256 codes: one CTA
// per resident slot (occupancy CTAs per SM), never more than there are units; sets the units,
// stages and partial slots per tile in a and returns the CTA count.
int choose_stream_k_grid(TcArgs& a, int occupancy);

// The partial-sum slots and arrival counters of a launch, from the stream's scratch (the
// counters are zero between launches: the last CTA of a tile resets its own).
void stream_k_scratch(TcArgs& a, cudaStream_t stream);

}  // namespace quanta::cuda
