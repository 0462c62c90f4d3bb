// Shape suites: which weight shapes, M values, formats, dtypes and layouts a run covers.
// Kernels and formats come from their tables (spec.hpp); a suite only narrows them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "quanta/format.hpp"
#include "quanta/matrix.hpp"

namespace quanta::bench {

// One weight shape W[N, K] (a stack of `experts` for gather_matmul), with where it comes from.
struct Shape {
  std::string label;   // "llama3-8b.gate_up"
  std::string source;  // "meta-llama/Meta-Llama-3-8B config.json: intermediate_size 14336, ..."
  int64_t n = 0, k = 0;
  int64_t experts = 1;  // > 1: a MoE stack, benched with gather_matmul
};

struct Suite {
  std::string name;
  std::string about;
  std::vector<Shape> shapes;    // dense shapes (matmul, dequantize) and stacks (gather_matmul)
  std::vector<int64_t> ms;      // rows of x
  std::vector<Format> formats;  // empty: every format of the table
  std::vector<DType> dtypes;
  std::vector<Layout> layouts;
  // Rows per kernel table entry ("each"), or only what the selector picks ("auto").
  bool automatic = false;
};

// The default M sweep: decode (1..8), small batches, prefill (512, 2048).
const std::vector<int64_t>& default_ms();
// The M values --check-only checks each kernel at (clamped into its M range): decode, odd
// sizes that leave tails in M-tiled kernels, and the 128-row cap of check problems.
const std::vector<int64_t>& check_ms();

// quick, seeds, models, full; nullopt for an unknown name.
std::optional<Suite> find_suite(std::string_view name);
std::vector<std::string> suite_names();

// "1,2,4,8" -> {1, 2, 4, 8}; throws quanta::Error on anything else.
std::vector<int64_t> parse_m_list(std::string_view text);
std::vector<DType> parse_dtype_list(std::string_view text);

}  // namespace quanta::bench
