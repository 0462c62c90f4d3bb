// The selector: read the backends' tables, take the first kernel that accepts the problem.
#include <fmt/format.h>

#include "core/kernel.hpp"
#include "quanta/error.hpp"

namespace quanta {

Problem matmul_problem(Op op, const ConstMatrixView& x, const QuantizedMatrix& w) {
  Problem p;
  p.op = op;
  p.format = w.format;
  p.layout = w.layout;
  p.dtype = x.dtype;
  p.device = w.location;
  p.m = x.rows;
  p.n = w.n;
  p.k = w.k;
  p.batch = w.batch;
  p.compute_capability = w.location == Location::device ? cuda::compute_capability() : 0;
  // A [K, N] pack (the [N, K] copy) serves every x dtype; the wgmma one, x in the scale dtype.
  p.device_packed =
      w.device_pack != nullptr && (w.layout == Layout::kn || w.scale_dtype == x.dtype);
  return p;
}

std::vector<const KernelEntry*> all_kernels() {
  std::vector<const KernelEntry*> v;
  for (const KernelEntry& e : cuda::kernels()) v.push_back(&e);
  for (const KernelEntry& e : cpu::kernels()) v.push_back(&e);
  return v;
}

std::string decline_reason(const KernelEntry& e, const Problem& p) {
  if (e.op != p.op) return fmt::format("runs {}, not {}", op_name(e.op), op_name(p.op));
  if (e.device != p.device)
    return fmt::format("runs on {} buffers, not {}", location_name(e.device),
                       location_name(p.device));
  if (p.op != Op::dequantize && (p.m < e.m_min || p.m > e.m_max))
    return fmt::format("M = {} is outside [{}, {}]", p.m, e.m_min, e.m_max);
  return e.supports ? e.supports(p) : std::string();
}

const KernelEntry& select_kernel(const Problem& p, std::string_view forced) {
  const bool automatic = forced.empty() || forced == "auto";
  std::string reasons;
  bool named_exists = false;
  for (const KernelEntry* e : all_kernels()) {
    if (!automatic && e->name != forced) continue;
    named_exists = true;
    const std::string why = decline_reason(*e, p);
    if (why.empty()) return *e;
    if (e->op == p.op && e->device == p.device) reasons += fmt::format("\n  {}: {}", e->name, why);
  }
  if (!automatic && !named_exists)
    throw Error(fmt::format("[quanta::{}] kernel: no kernel is named '{}'", op_name(p.op), forced));
  throw NotSupported(fmt::format("[quanta::{}] no {} kernel accepts {} {} M={} N={} K={}{}",
                                 op_name(p.op), location_name(p.device), p.format.name(),
                                 dtype_name(p.dtype), p.m, p.n, p.k,
                                 reasons.empty() ? " (none is built)" : reasons));
}

std::string explain(const Problem& p) {
  std::string out;
  bool chosen = false;
  for (const KernelEntry* e : all_kernels()) {
    if (e->op != p.op || e->device != p.device) continue;
    const std::string why = decline_reason(*e, p);
    std::string verdict = why.empty() ? (chosen ? "accepts" : "selected") : why;
    if (why.empty()) chosen = true;
    out += fmt::format("{:<28} {}\n", e->name, verdict);
  }
  return out;
}

}  // namespace quanta
