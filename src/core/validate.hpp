// Argument checks shared by every op boundary. Each throws quanta::Error naming the op,
// the argument, the value found and the rule it broke.
#pragma once

#include <string_view>

#include "quanta/matrix.hpp"

namespace quanta::detail {

// Non-null, positive dims within int32, byte size representable.
void check_view(const ConstMatrixView& v, std::string_view op, std::string_view arg);
void check_location(Location found, Location wanted, std::string_view op, std::string_view arg);
void check_dtype(DType found, DType wanted, std::string_view op, std::string_view arg,
                 std::string_view why);
void check_dims(int64_t found, int64_t wanted, std::string_view op, std::string_view what);

// matmul / gather_matmul shape rules: x [M, K], y [M, N] against w.
void check_matmul_args(const ConstMatrixView& x, const QuantizedMatrix& w, const MatrixView& y,
                       std::string_view op);

}  // namespace quanta::detail
