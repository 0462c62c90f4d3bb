// The bench runner: plans rows from the registry and a suite, then for each row checks the
// kernel against the fp64 oracle on a small problem, times it at the full shape with operands
// rotated past the last-level cache, derives bytes, rates and % of the measured roof, and
// times the device's dense baseline on the same shape.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "check.hpp"
#include "device.hpp"
#include "spec.hpp"
#include "suites.hpp"

namespace quanta::bench {

struct RunOptions {
  std::string suite = "quick";
  std::optional<std::vector<int64_t>> ms;    // overrides the suite's M sweep
  std::optional<std::vector<DType>> dtypes;  // overrides the suite's dtypes
  std::string filter;                        // ECMAScript regex on Row::key()
  std::optional<bool> automatic;             // "auto" rows (the selector's pick) or one per kernel;
                                             // default: the suite's choice
  bool check_only = false;  // every registered kernel on its check problems, nothing timed
  TimingPolicy timing;
};

// The run's header: what ran where, and the roof every row is measured against.
struct RunHeader {
  std::string device, device_details, roof_method, warning;
  Location location = Location::host;
  Roof roof;
  int threads = 0;
  std::size_t cache_bytes = 0;
  std::string suite, build_type, git_revision, version, started;
  std::vector<int64_t> ms;
  bool check_only = false;
};

// One planned row: a spec on a shape at one M.
struct RowPlan {
  BenchSpec spec;
  Shape shape;
  ProblemSize problem;
  std::string key() const;  // spec id + "@" + shape label + " M=" (matched by --filter)
};

struct Row {
  RowPlan plan;
  std::string kernel;  // what ran (the spec's kernel, or the selector's pick for auto)
  CheckResult check;
  bool timed = false;
  Timing timing;
  double bytes = 0, flops = 0, gbps = 0, tflops = 0, roof_pct = 0;
  Baseline baseline;
  double speedup = 0;
  std::string error;  // the kernel threw at the full shape
  std::string note;   // why a row that passed was not timed (over the row time budget)
  bool pass() const { return check.pass && error.empty(); }
};

class Runner {
 public:
  Runner(Device& device, RunOptions options);

  // Measures the roof (once) and fills the header.
  const RunHeader& start();
  // The rows this run will produce, in the order they run (weights reused across kernels,
  // dtypes and M of one shape and format). `skipped` receives (row, reason) for declined ones.
  std::vector<RowPlan> plan(std::vector<std::pair<RowPlan, std::string>>* skipped = nullptr) const;
  Row run(const RowPlan& p);

  // Test hook: how kernels are launched (default: the public op with the kernel forced).
  void set_invoker(Invoker inv) { invoke_ = std::move(inv); }

 private:
  struct WeightKey {
    std::string format;
    int dtype, layout;
    int64_t n, k, experts;
    auto operator<=>(const WeightKey&) const = default;
  };
  const std::vector<QuantizedMatrix>& weights(const RowPlan& p, int copies);
  Baseline baseline(const ProblemSize& p);

  Device& device_;
  RunOptions options_;
  Suite suite_;
  RunHeader header_;
  bool started_ = false;
  Invoker invoke_ = invoke_public_op;
  // The weights of the current (format, dtype, layout, shape): host original + device copies.
  std::optional<WeightKey> weight_key_;
  QuantizedMatrix weight_host_;
  std::vector<QuantizedMatrix> weight_copies_;
  std::map<std::string, CheckResult> checks_;
  // Check inputs of the current (op, layout, format, dtype), by check shape: every kernel
  // checked on a problem shares its inputs and its oracle answer.
  std::string inputs_key_;
  std::map<std::tuple<int64_t, int64_t, int64_t, int64_t>, CheckInputs> inputs_;
  std::map<std::tuple<int, int, int, int64_t, int64_t, int64_t, int64_t>, Baseline> baselines_;
};

}  // namespace quanta::bench
