// The bench registry. A spec is (op, layout, kernel, format, dtype, device); the list is derived
// from the backends' kernel tables (src/core/kernel.hpp) crossed with the format table, so a
// kernel added to its backend's table gets its bench rows with no edit here. An entry takes a
// (format, dtype, layout) when its `supports` rule accepts a generous probe problem; shape
// limits are asked again per row, and a declined row is skipped with the selector's reason.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/kernel.hpp"
#include "metrics.hpp"
#include "suites.hpp"

namespace quanta::bench {

struct BenchSpec {
  Op op = Op::matmul;
  Layout layout = Layout::nk;
  const KernelEntry* entry = nullptr;  // null: "auto", what the selector picks per problem
  Format format{};
  DType dtype = DType::f32;
  Location device = Location::host;

  std::string_view kernel() const { return entry ? entry->name : std::string_view("auto"); }
  // "matmul/nk/matmul_generic/affine-4b-g64/bf16": what --filter matches.
  std::string id() const;
  ProblemSize problem(int64_t m, int64_t n, int64_t k, int64_t experts) const;
};

constexpr std::string_view layout_name(Layout l) {
  return l == Layout::nk ? "nk" : "kn";
}

// The selector's view of a problem (compute capability filled in for the device). `packed`: the
// weights carry a device pack from quanta::prepack (Problem::device_packed).
Problem to_problem(const BenchSpec& s, const ProblemSize& p, bool packed = false);

// Why the spec's kernel cannot run this problem (empty if it can): footprint rules first
// (K multiple of the group, [K, N] word alignment), then the kernel table's own rule.
std::string decline(const BenchSpec& s, const ProblemSize& p, bool packed = false);

struct RegistryOptions {
  Location device = Location::host;
  bool named = true;            // one spec per kernel table entry
  bool automatic = false;       // plus one "auto" spec per (op, layout, format, dtype)
  std::vector<Format> formats;  // empty: all_formats()
  std::vector<DType> dtypes;    // empty: every dtype
  std::vector<Layout> layouts;  // empty: both (kn only where the scheme has it)
};

// Every spec of the kernel tables for the options, in table order within each format.
std::vector<BenchSpec> registered_specs(const RegistryOptions& o);

}  // namespace quanta::bench
