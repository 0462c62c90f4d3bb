#include "spec.hpp"

#include <fmt/format.h>

#include "quanta/error.hpp"

namespace quanta::bench {

std::string BenchSpec::id() const {
  return fmt::format("{}/{}/{}/{}/{}", op_name(op), layout_name(layout), kernel(), format.name(),
                     dtype_name(dtype));
}

ProblemSize BenchSpec::problem(int64_t m, int64_t n, int64_t k, int64_t experts) const {
  ProblemSize p;
  p.op = op;
  p.format = format;
  p.layout = layout;
  p.dtype = dtype;
  p.m = op == Op::dequantize ? 0 : m;
  p.n = n;
  p.k = k;
  p.experts = op == Op::gather_matmul ? experts : 1;
  return p;
}

Problem to_problem(const BenchSpec& s, const ProblemSize& p, bool packed) {
  Problem q;
  q.op = s.op;
  q.format = s.format;
  q.layout = s.layout;
  q.dtype = s.dtype;
  q.device = s.device;
  q.m = p.m;
  q.n = p.n;
  q.k = p.k;
  q.batch = p.experts;
  q.compute_capability = s.device == Location::device ? cuda::compute_capability() : 0;
  q.device_packed = packed;
  return q;
}

std::string decline(const BenchSpec& s, const ProblemSize& p, bool packed) {
  try {
    (void)footprint(s.format, p.n, p.k, s.layout, s.dtype, "bench");
  } catch (const Error& e) {
    return e.what();
  }
  const Problem q = to_problem(s, p, packed);
  if (s.entry) return decline_reason(*s.entry, q);
  try {
    (void)select_kernel(q, "auto");
  } catch (const Error& e) {
    return e.what();
  }
  return {};
}

namespace {

// The most accommodating problem of a kind: K and N multiples of every group and block.
ProblemSize probe(const BenchSpec& s) {
  const int64_t m = s.entry && s.op != Op::dequantize ? s.entry->m_min : 1;
  return s.problem(m, 4096, 4096, 4);
}

std::vector<Layout> layouts_for(const Format& f, const std::vector<Layout>& wanted) {
  std::vector<Layout> out;
  for (Layout l : wanted.empty() ? std::vector<Layout>{Layout::nk, Layout::kn} : wanted)
    if (l == Layout::nk || f.info().kn_layout) out.push_back(l);
  return out;
}

}  // namespace

std::vector<BenchSpec> registered_specs(const RegistryOptions& o) {
  std::vector<Format> formats = o.formats;
  if (formats.empty()) formats.assign(all_formats().begin(), all_formats().end());
  std::vector<DType> dtypes = o.dtypes;
  if (dtypes.empty()) dtypes.assign(std::begin(kAllDTypes), std::end(kAllDTypes));
  const std::vector<const KernelEntry*> entries = all_kernels();

  std::vector<BenchSpec> specs;
  for (const Format& f : formats)
    for (Layout l : layouts_for(f, o.layouts))
      for (DType t : dtypes) {
        for (Op op : {Op::matmul, Op::gather_matmul, Op::dequantize}) {
          bool any = false;
          for (const KernelEntry* e : entries) {
            if (e->op != op || e->device != o.device) continue;
            BenchSpec s{op, l, e, f, t, o.device};
            if (!decline(s, probe(s)).empty()) continue;
            any = true;
            if (o.named) specs.push_back(s);
          }
          if (o.automatic && any) specs.push_back(BenchSpec{op, l, nullptr, f, t, o.device});
        }
      }
  return specs;
}

}  // namespace quanta::bench
