// CPU backend entry points. Arguments are already validated by the op layer.
#pragma once

#include "quanta/ops.hpp"

namespace quanta::cpu {

void dequantize(const QuantizedMatrix& w, MatrixView out, const Context& ctx);
void matmul(ConstMatrixView x, const QuantizedMatrix& w, MatrixView y, const Context& ctx);
void gather_matmul(ConstMatrixView x, const QuantizedMatrix& w, const int32_t* expert_ids,
                   MatrixView y, const Context& ctx);

}  // namespace quanta::cpu
