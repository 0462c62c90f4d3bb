// The op boundary: validate once, then ask the selector for a kernel of the buffers' device.
#include <fmt/format.h>

#include "core/kernel.hpp"
#include "core/validate.hpp"
#include "cpu/pack.hpp"
#include "cuda/backend.hpp"
#include "quanta/error.hpp"
#include "quanta/ops.hpp"

namespace quanta {

void dequantize(const QuantizedMatrix& w, MatrixView out, const Context& ctx) {
  constexpr std::string_view op = "dequantize";
  w.validate(op);
  detail::check_view(out, op, "out");
  detail::check_location(out.location, w.location, op, "out");
  const bool nk = w.layout == Layout::nk;
  const int64_t rows = (nk ? w.n : w.k) * w.batch, cols = nk ? w.k : w.n;
  if (out.rows != rows || out.cols != cols)
    throw Error(
        fmt::format("[quanta::{}] out: shape [{} x {}] must be [{} x {}] (the storage "
                    "layout of {}{})",
                    op, out.rows, out.cols, rows, cols, w.describe(),
                    w.batch > 1 ? ", experts stacked along rows" : ""));
  Problem p = matmul_problem(Op::dequantize, ConstMatrixView{out.data, out.dtype, 0, w.k}, w);
  select_kernel(p, ctx.kernel).dequantize(w, out, ctx);
}

void matmul(ConstMatrixView x, const QuantizedMatrix& w, MatrixView y, const Context& ctx) {
  constexpr std::string_view op = "matmul";
  detail::check_matmul_args(x, w, y, op);
  if (w.batch != 1)
    throw Error(
        fmt::format("[quanta::{}] w: a stack of {} matrices needs gather_matmul", op, w.batch));
  select_kernel(matmul_problem(Op::matmul, x, w), ctx.kernel).matmul(x, w, nullptr, y, ctx);
}

void gather_matmul(ConstMatrixView x, const QuantizedMatrix& w, const int32_t* expert_ids,
                   MatrixView y, const Context& ctx) {
  constexpr std::string_view op = "gather_matmul";
  detail::check_matmul_args(x, w, y, op);
  if (expert_ids == nullptr) throw Error(fmt::format("[quanta::{}] expert_ids: null pointer", op));
  // Host ids are checked here; device ids are checked by the kernel (out-of-range rows are
  // reported as an error after the launch, never read out of bounds).
  if (x.location == Location::host)
    for (int64_t m = 0; m < x.rows; ++m)
      if (expert_ids[m] < 0 || expert_ids[m] >= w.batch)
        throw Error(fmt::format("[quanta::{}] expert_ids[{}] = {} must be in [0, {})", op, m,
                                expert_ids[m], w.batch));
  select_kernel(matmul_problem(Op::gather_matmul, x, w), ctx.kernel)
      .matmul(x, w, expert_ids, y, ctx);
}

QuantizedMatrix prepack(const QuantizedMatrix& w, const Context& ctx) {
  constexpr std::string_view op = "prepack";
  w.validate(op);
  QuantizedMatrix out = w;
  if (w.location == Location::device) {
    out.device_pack = cuda::make_device_pack(w, ctx);
    return out;
  }
  out.host_pack = cpu::pack_unsupported(w).empty() ? cpu::make_pack(w, ctx.threads) : nullptr;
  return out;
}

bool cuda_available() {
  return cuda::available();
}

QuantizedMatrix to_device(const QuantizedMatrix& w, const Context& ctx) {
  w.validate("to_device");
  detail::check_location(w.location, Location::host, "to_device", "w");
  return cuda::to_device(w, ctx);
}

QuantizedMatrix to_host(const QuantizedMatrix& w, const Context& ctx) {
  w.validate("to_host");
  detail::check_location(w.location, Location::device, "to_host", "w");
  return cuda::to_host(w, ctx);
}

}  // namespace quanta
