#include "runner.hpp"

#include <fmt/chrono.h>
#include <fmt/format.h>

#include <chrono>
#include <ctime>
#include <regex>
#include <set>
#include <thread>

#include "build_info.hpp"
#include "inputs.hpp"
#include "quanta/error.hpp"

namespace quanta::bench {

namespace {

bool shape_fits(const BenchSpec& s, const Shape& shape) {
  return (s.op == Op::gather_matmul) == (shape.experts > 1);
}

std::string check_key(const BenchSpec& s, std::string_view kernel, const ProblemSize& c) {
  return fmt::format("{}|{}|{}x{}x{}x{}", s.id(), kernel, c.m, c.n, c.k, c.experts);
}

}  // namespace

std::string RowPlan::key() const {
  return fmt::format("{}@{} M={}", spec.id(), shape.label, problem.m);
}

Runner::Runner(Device& device, RunOptions options) : device_(device), options_(std::move(options)) {
  auto s = find_suite(options_.suite);
  if (!s)
    throw Error(
        fmt::format("[quanta::bench] --suite: '{}' must be one of quick, seeds, models, "
                    "full",
                    options_.suite));
  suite_ = *s;
  if (options_.ms) suite_.ms = *options_.ms;
  if (options_.dtypes) suite_.dtypes = *options_.dtypes;
  if (options_.automatic) suite_.automatic = *options_.automatic;
  if (options_.check_only) {
    // Every registered kernel: all formats, layouts and dtypes, over the M regimes.
    suite_.formats.clear();
    suite_.layouts = {Layout::nk, Layout::kn};
    if (!options_.dtypes) suite_.dtypes = {DType::f32, DType::f16, DType::bf16};
    if (!options_.ms) suite_.ms = check_ms();
    if (!options_.automatic) suite_.automatic = false;
  }
}

const RunHeader& Runner::start() {
  if (started_) return header_;
  header_.device = device_.name();
  header_.device_details = device_.details();
  header_.warning = device_.warning();
  header_.location = device_.location();
  header_.threads = device_.threads();
  header_.cache_bytes = device_.cache_bytes();
  header_.suite = suite_.name;
  header_.ms = suite_.ms;
  header_.check_only = options_.check_only;
  header_.build_type = QUANTA_BUILD_TYPE;
  header_.git_revision = QUANTA_GIT_REVISION;
  header_.version = QUANTA_VERSION;
  header_.started = fmt::format("{:%Y-%m-%dT%H:%M:%S}", fmt::localtime(std::time(nullptr)));
  if (!options_.check_only) header_.roof = device_.measure_roof(header_.roof_method);
  started_ = true;
  return header_;
}

std::vector<RowPlan> Runner::plan(std::vector<std::pair<RowPlan, std::string>>* skipped) const {
  RegistryOptions ro;
  ro.device = device_.location();
  ro.named = !suite_.automatic;
  ro.automatic = suite_.automatic;
  ro.formats = suite_.formats;
  ro.dtypes = suite_.dtypes;
  ro.layouts = suite_.layouts;
  const std::vector<BenchSpec> specs = registered_specs(ro);
  std::optional<std::regex> filter;
  if (!options_.filter.empty()) {
    try {
      filter.emplace(options_.filter);
    } catch (const std::regex_error& e) {
      throw Error(fmt::format("[quanta::bench] --filter: '{}' is not a valid regex ({})",
                              options_.filter, e.what()));
    }
  }
  std::vector<RowPlan> rows;
  std::set<std::string> checks;  // check-only: one row per distinct check problem
  for (const Shape& shape : suite_.shapes)
    for (const BenchSpec& spec : specs) {
      if (!shape_fits(spec, shape)) continue;
      std::vector<int64_t> ms = suite_.ms;
      if (spec.op == Op::dequantize) ms = {0};
      for (int64_t m : ms) {
        RowPlan p{spec, shape, spec.problem(m, shape.n, shape.k, shape.experts)};
        if (filter && !std::regex_search(p.key(), *filter)) continue;
        const std::string why = decline(spec, p.problem);
        if (!why.empty()) {
          if (skipped) skipped->emplace_back(p, why);
          continue;
        }
        if (options_.check_only) {
          const KernelEntry& k = resolve_kernel(spec, p.problem);
          if (!checks.insert(check_key(spec, k.name, check_shape(spec, &k, p.problem))).second)
            continue;
        }
        rows.push_back(std::move(p));
      }
    }
  return rows;
}

const std::vector<QuantizedMatrix>& Runner::weights(const RowPlan& p, int copies) {
  const ProblemSize& s = p.problem;
  // Only affine scales depend on the activation dtype; other formats reuse one set of bytes.
  const WeightKey key{p.spec.format.name(),
                      p.spec.format.info().family == Family::affine ? int(s.dtype) : -1,
                      int(s.layout),
                      s.n,
                      s.k,
                      s.experts};
  if (!weight_key_ || *weight_key_ != key) {
    weight_copies_.clear();
    weight_key_ = key;
    const int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    weight_host_ =
        make_weights(p.spec.format, s.dtype, s.n, s.k, s.layout, s.experts, 0xbe7c4, threads);
    // On the CPU the original is the first copy (packed as place() packs every other one:
    // quanta::prepack shares its buffers); every further copy lives elsewhere.
    if (device_.location() == Location::host)
      weight_copies_.push_back(prepack(weight_host_, device_.context()));
  }
  while (static_cast<int>(weight_copies_.size()) < copies)
    weight_copies_.push_back(device_.place(weight_host_));
  return weight_copies_;
}

Baseline Runner::baseline(const ProblemSize& p) {
  // The CPU baseline is f32 whatever the row's dtype; a GPU baseline runs in the row's dtype.
  const int dtype =
      device_.location() == Location::host && p.op != Op::dequantize ? -1 : int(p.dtype);
  const auto key = std::make_tuple(int(p.op), int(p.layout), dtype, p.m, p.n, p.k, p.experts);
  auto it = baselines_.find(key);
  if (it != baselines_.end()) return it->second;
  Baseline b;
  try {
    b = device_.baseline(p, options_.timing);
  } catch (const std::exception& e) {
    b.name = fmt::format("none ({})", e.what());
  }
  return baselines_[key] = b;
}

Row Runner::run(const RowPlan& p) {
  start();
  Row r;
  r.plan = p;
  const ProblemSize& s = p.problem;
  const int copies = rotation_copies(bytes_moved(s), device_.cache_bytes());
  // A MoE row reads only its touched experts: copy c routes to the c-th disjoint set of them
  // (as consecutive tokens of a real model do), and the stack is cloned only once every set
  // has been used.
  const int64_t touched = experts_touched(s);
  const int id_sets = s.op == Op::gather_matmul ? static_cast<int>(s.experts / touched) : 1;
  const int stacks = (copies + id_sets - 1) / id_sets;
  const KernelEntry* kernel = nullptr;
  bool packed = false;  // the row's weights carry a device pack
  try {
    // A timed "auto" row picks its kernel for the weights it runs (placed as a user keeps
    // them: prepacked), so it names and forces what the library itself would run on them.
    const bool timed_auto = !options_.check_only && !p.spec.entry && s.op != Op::dequantize;
    const QuantizedMatrix* placed = timed_auto ? &weights(p, stacks).front() : nullptr;
    packed = row_problem(p.spec, s, placed).device_packed;
    kernel = &resolve_kernel(p.spec, s, placed);
  } catch (const std::exception& e) {
    r.error = e.what();
    return r;
  }
  r.kernel = std::string(kernel->name);

  // 1. Check on a small problem of the same kind (cached: M sweeps share check problems).
  // A kernel that needs the pack (qmm_affine_repack on a [K, N] pack) is checked on small
  // weights that get one too.
  const ProblemSize cs = check_shape(p.spec, kernel, p.problem, packed);
  const std::string ck = check_key(p.spec, kernel->name, cs);
  auto cached = checks_.find(ck);
  if (cached != checks_.end()) {
    r.check = cached->second;
  } else {
    try {
      BenchSpec kind = p.spec;
      kind.entry = nullptr;
      if (kind.id() != inputs_key_) {
        inputs_.clear();
        inputs_key_ = kind.id();
      }
      const auto shape_key = std::make_tuple(cs.m, cs.n, cs.k, cs.experts);
      auto in = inputs_.find(shape_key);
      if (in == inputs_.end()) in = inputs_.emplace(shape_key, make_check_inputs(p.spec, cs)).first;
      r.check = run_check(device_, p.spec, *kernel, in->second, invoke_);
    } catch (const std::exception& e) {  // making inputs or the oracle failed
      r.check.shape = cs;
      r.check.kernel = r.kernel;
      r.check.error = e.what();
    }
    checks_[ck] = r.check;
  }
  if (options_.check_only) return r;

  // 2. Time the full shape, operands rotated past the last-level cache.
  r.bytes = static_cast<double>(bytes_moved(s));
  r.flops = flops(s);
  try {
    const std::vector<QuantizedMatrix>& ws = weights(p, stacks);
    const bool deq = s.op == Op::dequantize, nk = s.layout == Layout::nk;
    const int64_t y_rows = deq ? (nk ? s.n : s.k) : s.m, y_cols = deq ? (nk ? s.k : s.n) : s.n;
    std::vector<DeviceBuffer> xs, ys, ids;
    std::vector<Operands> ops;
    for (int c = 0; c < copies; ++c) {
      Operands o;
      o.w = ws[static_cast<std::size_t>(c / id_sets)];
      if (!deq) {
        const HostMatrix hx = random_matrix(s.dtype, s.m, s.k, 77 + static_cast<uint64_t>(c));
        xs.push_back(device_.alloc(hx.buffer.bytes));
        device_.upload(xs.back().get(), hx.buffer.get(), hx.buffer.bytes);
        o.x = ConstMatrixView{xs.back().get(), s.dtype, s.m, s.k, device_.location()};
      }
      if (s.op == Op::gather_matmul) {
        std::vector<int32_t> h(static_cast<std::size_t>(s.m));
        for (int64_t i = 0; i < s.m; ++i)
          h[static_cast<std::size_t>(i)] = expert_of_row(i, s.experts, (c % id_sets) * touched);
        ids.push_back(device_.alloc(h.size() * sizeof(int32_t)));
        device_.upload(ids.back().get(), h.data(), h.size() * sizeof(int32_t));
        o.ids = static_cast<const int32_t*>(ids.back().get());
      }
      ys.push_back(device_.alloc(static_cast<std::size_t>(y_rows * y_cols) * dtype_size(s.dtype)));
      o.y = MatrixView{ys.back().get(), s.dtype, y_rows, y_cols, device_.location()};
      ops.push_back(o);
    }
    const Context ctx = device_.context();
    const std::string_view name = kernel->name;
    auto launch = [&](int c) { invoke_(p.spec, name, ops[static_cast<std::size_t>(c)], ctx); };
    const Samples samples = device_.time(launch, copies, options_.timing);
    r.timing = summarize(samples.seconds, copies);
    if (samples.over_budget) {
      r.note = fmt::format(
          "not timed: one call took {:.1f} s, so {} runs would pass the row budget of {:g} s "
          "(--max-row-time)",
          r.timing.median, options_.timing.min_runs + options_.timing.warmup_runs,
          options_.timing.max_row_seconds);
      r.timing = {};
      return r;
    }
    r.timed = true;
  } catch (const std::exception& e) {
    r.error = e.what();
    return r;
  }

  // 3. Derived rates against the roof measured at start-up.
  r.gbps = gbps(r.bytes, r.timing.median);
  r.tflops = tflops(r.flops, r.timing.median);
  r.roof_pct = roof_pct(r.bytes, r.flops, r.timing.median, header_.roof);

  // 4. The dense baseline on the same shape, in the same run.
  r.baseline = baseline(s);
  r.speedup = speedup(r.baseline.timing.median, r.timing.median);
  return r;
}

}  // namespace quanta::bench
