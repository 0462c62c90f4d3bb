// CPU kernel families (entry points listed in src/cpu/kernels.cpp). Arguments arrive
// validated by the op layer.
#pragma once

#include "core/kernel.hpp"
#include "cpu/isa.hpp"

namespace quanta::cpu {

// generic.cpp: decode a stored row to f32, multiply-accumulate in f32. Every format, layout,
// M and expert stack; the fallback that always accepts.
void matmul_generic(ConstMatrixView x, const QuantizedMatrix& w, const int32_t* expert_ids,
                    MatrixView y, const Context& ctx);
void dequantize_generic(const QuantizedMatrix& w, MatrixView out, const Context& ctx);

// fast.cpp: the SIMD engine (src/cpu/engine) at one ISA level, multithreaded over
// Context::threads. Every format, layout, M and expert stack.
//   Path::gemv  M = 1 streams the packed weights once through registers (fused GEMV);
//               other M run the tiled path.
//   Path::tiled decodes tiles of W to f32 in cache and reuses them across the M rows.
enum class Path : uint8_t { gemv, tiled };
void matmul_simd(ConstMatrixView x, const QuantizedMatrix& w, const int32_t* expert_ids,
                 MatrixView y, const Context& ctx, Isa isa, Path path);

struct IsaKernels;
const IsaKernels& isa_kernels(Isa isa);

}  // namespace quanta::cpu
