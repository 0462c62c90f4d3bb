// The kernel table and the selector. Each backend lists its kernels, in order of preference,
// in one table (src/cpu/kernels.cpp, src/cuda/kernels.cpp); a kernel's family file exports
// its entry points and its `supports` rule beside its launcher. The selector takes the first
// entry of the buffers' device whose M range and rule accept the problem; every rejection
// carries a reason, printed by "no kernel" errors and by `quanta bench --explain`.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "quanta/ops.hpp"

namespace quanta {

enum class Op : uint8_t { matmul, gather_matmul, dequantize };

constexpr std::string_view op_name(Op op) {
  switch (op) {
    case Op::matmul:
      return "matmul";
    case Op::gather_matmul:
      return "gather_matmul";
    case Op::dequantize:
      return "dequantize";
  }
  return "?";
}

// What a kernel is asked to do. For dequantize, m = 0.
struct Problem {
  Op op = Op::matmul;
  Format format{};
  Layout layout = Layout::nk;
  DType dtype = DType::f32;  // activations (matmul) or output (dequantize)
  Location device = Location::host;
  int64_t m = 0, n = 0, k = 0, batch = 1;
  int compute_capability = 0;  // 90 for sm_90; 0 on the host
  // w carries a device pack (quanta::prepack) for x's dtype ([K, N]: for any dtype). Whether the
  // pack still matches w's buffers is the kernel's check (DevicePack::serves): a stale one runs
  // the unpacked path.
  bool device_packed = false;
};

Problem matmul_problem(Op op, const ConstMatrixView& x, const QuantizedMatrix& w);

// Entry points. Arguments arrive validated; expert_ids is null for a plain matmul.
using MatmulFn = void (*)(ConstMatrixView x, const QuantizedMatrix& w, const int32_t* expert_ids,
                          MatrixView y, const Context& ctx);
using DequantizeFn = void (*)(const QuantizedMatrix& w, MatrixView out, const Context& ctx);
// Empty string: supported. Otherwise the reason to decline, e.g. "needs K % 512 == 0".
using SupportsFn = std::string (*)(const Problem& p);

struct KernelEntry {
  std::string_view name;  // <op>_<scheme>_<variant>[_<arch>], e.g. "qmv_affine_warp"
  Op op;
  Location device;
  int64_t m_min, m_max;  // accepted rows of x (inclusive); dequantize ignores them
  SupportsFn supports;   // format/dtype/shape rule beyond the M range (null: all)
  MatmulFn matmul;       // set for matmul and gather_matmul kernels
  DequantizeFn dequantize;
  std::string_view why;  // one line: what the kernel is for, with the measurement behind its range
};

// Each backend's table, in preference order.
namespace cpu {
std::span<const KernelEntry> kernels();
}
namespace cuda {
std::span<const KernelEntry> kernels();
int compute_capability();  // of the current device, 0 without one
}  // namespace cuda

// All entries of both backends.
std::vector<const KernelEntry*> all_kernels();

// Why `e` cannot run `p`; empty if it can.
std::string decline_reason(const KernelEntry& e, const Problem& p);

// The kernel for `p`: `forced` (a name, or "auto" for the first that accepts). Throws
// NotSupported listing every candidate's reason when none accepts.
const KernelEntry& select_kernel(const Problem& p, std::string_view forced);

// One line per candidate of p's op and device: name, and "selected" / "accepts" / reason.
std::string explain(const Problem& p);

}  // namespace quanta
