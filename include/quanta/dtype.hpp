// Activation (and affine scale) element types.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace quanta {

enum class DType : uint8_t { f32, f16, bf16 };

inline constexpr DType kAllDTypes[] = {DType::f32, DType::f16, DType::bf16};

constexpr std::size_t dtype_size(DType t) {
  return t == DType::f32 ? 4 : 2;
}

constexpr std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::f32:
      return "f32";
    case DType::f16:
      return "f16";
    case DType::bf16:
      return "bf16";
  }
  return "?";
}

std::optional<DType> parse_dtype(std::string_view name);

// Relative L2 error a kernel with activations of this type must meet against the
// fp64 oracle (DESIGN.md numerics contract).
constexpr double rel_l2_bound(DType t) {
  switch (t) {
    case DType::f32:
      return 1e-5;
    case DType::f16:
      return 2e-3;
    case DType::bf16:
      return 1e-2;
  }
  return 0;
}

}  // namespace quanta
