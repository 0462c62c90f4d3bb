// CUDA backend entry points. Arguments are already validated by the op layer (shapes,
// dtypes, locations); in a build without CUDA every entry point throws NotSupported.
#pragma once

#include "quanta/ops.hpp"

namespace quanta::cuda {

bool available();
void dequantize(const QuantizedMatrix& w, MatrixView out, const Context& ctx);
void matmul(ConstMatrixView x, const QuantizedMatrix& w, MatrixView y, const Context& ctx);
void gather_matmul(ConstMatrixView x, const QuantizedMatrix& w, const int32_t* expert_ids,
                   MatrixView y, const Context& ctx);
QuantizedMatrix to_device(const QuantizedMatrix& w, const Context& ctx);
QuantizedMatrix to_host(const QuantizedMatrix& w, const Context& ctx);

}  // namespace quanta::cuda
