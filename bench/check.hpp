// The correctness half of a row: the same kind of problem (op, layout, format, dtype, kernel,
// device, M regime) at a small N x K, against the fp64 oracle. Random inputs, never all zero;
// the output is poisoned with NaN first, so an element the kernel does not write fails;
// rel-L2 must meet rel_l2_bound(dtype) and every element must be finite.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "device.hpp"
#include "inputs.hpp"
#include "spec.hpp"

namespace quanta::bench {

// The operands of one launch, in the device's memory. For dequantize, y is the output in the
// storage layout and x/ids are unused.
struct Operands {
  QuantizedMatrix w;
  ConstMatrixView x;
  MatrixView y;
  const int32_t* ids = nullptr;
};

// Runs one launch of `kernel` on the operands. The runner's invoker calls the public op with
// Context::kernel forced to `kernel`; tests substitute deliberately wrong kernels.
using Invoker = std::function<void(const BenchSpec& spec, std::string_view kernel,
                                   const Operands& o, const Context& ctx)>;
void invoke_public_op(const BenchSpec& spec, std::string_view kernel, const Operands& o,
                      const Context& ctx);

struct CheckResult {
  ProblemSize shape;   // the check problem
  std::string kernel;  // the kernel that ran
  bool pass = false;
  double max_abs = 0, rel_l2 = 0, cosine = 0, bound = 0;
  int64_t nonfinite = 0;
  std::string error;  // what the kernel threw, if it did (the row fails)
};

// The check problem for a row of `spec` at `full`: M kept up to 128 and inside the kernel's M
// range, experts up to 4, and the first of a few small (N, K) that the kernel and the format
// accept (odd-sized first, to catch tail bugs), else the full shape. `packed`: the row's weights
// carry a device pack, and so will the check's (placed the same way, Device::place).
ProblemSize check_shape(const BenchSpec& spec, const KernelEntry* kernel, const ProblemSize& full,
                        bool packed = false);

// The selector's view of a row of `spec` at `p`: from the weights it runs on where given
// (`placed`: what quanta::prepack attached to them, a device pack, changes the pick, and the spec
// alone cannot know it), else from the spec and the shape.
Problem row_problem(const BenchSpec& spec, const ProblemSize& p, const QuantizedMatrix* placed);

// The kernel a row of `spec` runs at `p`: its own entry, or the selector's pick for "auto" (for
// row_problem(spec, p, placed)). Throws NotSupported when nothing accepts.
const KernelEntry& resolve_kernel(const BenchSpec& spec, const ProblemSize& p,
                                  const QuantizedMatrix* placed = nullptr);

// A check problem's host inputs and the oracle's answer. They depend on the spec's op,
// format, layout and dtype and on the shape, not on the kernel, so one set serves every
// kernel checked on that problem.
struct CheckInputs {
  ProblemSize shape;
  QuantizedMatrix w;
  HostMatrix x;              // matmul, gather_matmul
  std::vector<int32_t> ids;  // gather_matmul
  std::vector<double> want;  // the fp64 oracle: [M][N], or [N][K] for dequantize
};
CheckInputs make_check_inputs(const BenchSpec& spec, const ProblemSize& shape);

CheckResult run_check(Device& device, const BenchSpec& spec, const KernelEntry& kernel,
                      const CheckInputs& inputs, const Invoker& invoke = invoke_public_op);
CheckResult run_check(Device& device, const BenchSpec& spec, const KernelEntry& kernel,
                      const ProblemSize& shape, const Invoker& invoke = invoke_public_op);

}  // namespace quanta::bench
