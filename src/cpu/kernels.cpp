// The CPU kernel table, in order of preference (first that accepts wins).
#include <limits>

#include "cpu/backend.hpp"

namespace quanta::cpu {

namespace {
constexpr int64_t kAnyM = std::numeric_limits<int32_t>::max();

// clang-format off
const KernelEntry kTable[] = {
  // name                   op                  device          M range    supports  matmul          dequantize          why
  {"matmul_generic",        Op::matmul,         Location::host, 1, kAnyM,  nullptr,  matmul_generic, nullptr,            "portable fallback: every format and layout"},
  {"gather_matmul_generic", Op::gather_matmul,  Location::host, 1, kAnyM,  nullptr,  matmul_generic, nullptr,            "portable fallback: rows grouped by expert"},
  {"dequantize_generic",    Op::dequantize,     Location::host, 0, 0,      nullptr,  nullptr,        dequantize_generic, "decode rows with the owner's rounding"},
};
// clang-format on
}  // namespace

std::span<const KernelEntry> kernels() {
  return kTable;
}

}  // namespace quanta::cpu
