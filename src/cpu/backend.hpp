// CPU kernel families (entry points listed in src/cpu/kernels.cpp). Arguments arrive
// validated by the op layer.
#pragma once

#include "core/kernel.hpp"

namespace quanta::cpu {

// generic.cpp: decode a stored row to f32, multiply-accumulate in f32. Every format, layout,
// M and expert stack; the fallback that always accepts.
void matmul_generic(ConstMatrixView x, const QuantizedMatrix& w, const int32_t* expert_ids,
                    MatrixView y, const Context& ctx);
void dequantize_generic(const QuantizedMatrix& w, MatrixView out, const Context& ctx);

}  // namespace quanta::cpu
