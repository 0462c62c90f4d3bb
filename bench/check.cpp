#include "check.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "format/dense.hpp"
#include "inputs.hpp"
#include "quanta/error.hpp"
#include "quanta/reference.hpp"

namespace quanta::bench {

namespace {
constexpr int64_t kCheckMaxM = 128;
constexpr int64_t kCheckMaxExperts = 4;
// Small (N, K) tried in order: 264 = 8·33 and 768 = 3·256 leave tails for wide kernels while
// every group (32/64/128) and GGUF block (32/256) divides K.
constexpr std::pair<int64_t, int64_t> kCheckNK[] = {
    {264, 768}, {256, 1024}, {512, 2048}, {1024, 4096}};
}  // namespace

void invoke_public_op(const BenchSpec& spec, std::string_view kernel, const Operands& o,
                      const Context& base) {
  Context ctx = base;
  ctx.kernel = kernel;
  switch (spec.op) {
    case Op::matmul:
      return matmul(o.x, o.w, o.y, ctx);
    case Op::gather_matmul:
      return gather_matmul(o.x, o.w, o.ids, o.y, ctx);
    case Op::dequantize:
      return dequantize(o.w, o.y, ctx);
  }
}

Problem row_problem(const BenchSpec& spec, const ProblemSize& p, const QuantizedMatrix* placed) {
  if (!placed || spec.op == Op::dequantize) return to_problem(spec, p);
  const ConstMatrixView x{nullptr, p.dtype, p.m, p.k, placed->location};
  return matmul_problem(spec.op, x, *placed);
}

const KernelEntry& resolve_kernel(const BenchSpec& spec, const ProblemSize& p,
                                  const QuantizedMatrix* placed) {
  if (spec.entry) return *spec.entry;
  return select_kernel(row_problem(spec, p, placed), "auto");
}

ProblemSize check_shape(const BenchSpec& spec, const KernelEntry* kernel, const ProblemSize& full,
                        bool packed) {
  ProblemSize c = full;
  if (spec.op != Op::dequantize) {
    const int64_t lo = kernel ? kernel->m_min : 1, hi = kernel ? kernel->m_max : full.m;
    c.m = std::clamp(full.m, lo, std::max(lo, std::min(hi, kCheckMaxM)));
  }
  c.experts = std::min(full.experts, kCheckMaxExperts);
  BenchSpec forced = spec;
  if (kernel) forced.entry = kernel;
  for (auto [n, k] : kCheckNK) {
    ProblemSize t = c;
    t.n = n;
    t.k = k;
    if (t.n * t.k <= full.n * full.k && decline(forced, t, packed).empty()) return t;
  }
  return c;  // the kernel accepts no small problem: check at the full N x K
}

CheckInputs make_check_inputs(const BenchSpec& spec, const ProblemSize& s) {
  CheckInputs in;
  in.shape = s;
  const uint64_t seed = 0x5eed + static_cast<uint64_t>(s.m * 131 + s.n * 7 + s.k);
  in.w = make_weights(spec.format, spec.dtype, s.n, s.k, spec.layout, s.experts, seed);
  // The oracle, in the logical order the output is compared in.
  if (spec.op == Op::dequantize) {
    in.want = ref::dequantize(in.w);  // [N][K]
    return in;
  }
  in.x = random_matrix(spec.dtype, s.m, s.k, seed + 1);
  if (spec.op == Op::gather_matmul) {
    for (int64_t i = 0; i < s.m; ++i) in.ids.push_back(expert_of_row(i, s.experts));
    in.want = ref::gather_matmul(in.x.view(), in.w, in.ids);
  } else {
    in.want = ref::matmul(in.x.view(), in.w);
  }
  return in;
}

CheckResult run_check(Device& device, const BenchSpec& spec, const KernelEntry& kernel,
                      const ProblemSize& s, const Invoker& invoke) {
  return run_check(device, spec, kernel, make_check_inputs(spec, s), invoke);
}

CheckResult run_check(Device& device, const BenchSpec& spec, const KernelEntry& kernel,
                      const CheckInputs& in, const Invoker& invoke) {
  const ProblemSize& s = in.shape;
  CheckResult r;
  r.shape = s;
  r.kernel = std::string(kernel.name);
  r.bound = rel_l2_bound(spec.dtype);
  const bool deq = spec.op == Op::dequantize;
  const bool nk = spec.layout == Layout::nk;
  const int64_t y_rows = deq ? (nk ? s.n : s.k) * s.experts : s.m;
  const int64_t y_cols = deq ? (nk ? s.k : s.n) : s.n;
  const HostMatrix& x = in.x;
  const std::vector<int32_t>& ids = in.ids;
  const std::vector<double>& want = in.want;
  const QuantizedMatrix& w = in.w;

  // Device operands; y poisoned.
  Operands o;
  o.w = device.place(w);
  DeviceBuffer dx, dy, dids;
  if (!deq) {
    dx = device.alloc(x.buffer.bytes);
    device.upload(dx.get(), x.buffer.get(), x.buffer.bytes);
    o.x = ConstMatrixView{dx.get(), spec.dtype, s.m, s.k, device.location()};
  }
  if (!ids.empty()) {
    dids = device.alloc(ids.size() * sizeof(int32_t));
    device.upload(dids.get(), ids.data(), ids.size() * sizeof(int32_t));
    o.ids = static_cast<const int32_t*>(dids.get());
  }
  HostMatrix y = HostMatrix::allocate(spec.dtype, y_rows, y_cols);
  y.poison();
  dy = device.alloc(y.buffer.bytes);
  device.upload(dy.get(), y.buffer.get(), y.buffer.bytes);
  o.y = MatrixView{dy.get(), spec.dtype, y_rows, y_cols, device.location()};

  try {
    invoke(spec, kernel.name, o, device.context());
    device.download(y.buffer.get(), dy.get(), y.buffer.bytes);
  } catch (const std::exception& e) {
    r.error = e.what();
    r.pass = false;
    r.rel_l2 = r.max_abs = r.cosine = NAN;
    return r;
  }

  ref::Comparison c;
  if (deq && !nk) {
    // Stored [K, N] per expert: compare in the oracle's [N][K] order.
    std::vector<double> got(want.size());
    for (int64_t nn = 0; nn < s.n; ++nn)
      for (int64_t kk = 0; kk < s.k; ++kk)
        got[static_cast<std::size_t>(nn * s.k + kk)] =
            dense::load(y.buffer.get(), spec.dtype, static_cast<std::size_t>(kk * s.n + nn));
    c = ref::compare(got, want, r.bound);
  } else {  // matmul, gather_matmul [M][N]; dequantize [N][K] (one matrix: experts = 1)
    c = ref::compare(y.view(), want, spec.dtype);
  }
  r.pass = c.pass;
  r.max_abs = c.max_abs;
  r.rel_l2 = c.rel_l2;
  r.cosine = c.cosine;
  r.nonfinite = c.nonfinite;
  return r;
}

}  // namespace quanta::bench
