#include "core/validate.hpp"

#include <fmt/format.h>

#include <limits>

#include "quanta/error.hpp"

namespace quanta::detail {

void check_view(const ConstMatrixView& v, std::string_view op, std::string_view arg) {
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  if (v.rows <= 0 || v.rows > kMax || v.cols <= 0 || v.cols > kMax)
    throw Error(fmt::format("[quanta::{}] {}: shape [{} x {}] must have both dims in [1, {}]", op,
                            arg, v.rows, v.cols, kMax));
  std::size_t bytes;
  if (__builtin_mul_overflow(static_cast<std::size_t>(v.rows) * static_cast<std::size_t>(v.cols),
                             dtype_size(v.dtype), &bytes))
    throw Error(fmt::format("[quanta::{}] {}: [{} x {}] {} overflows size_t", op, arg, v.rows,
                            v.cols, dtype_name(v.dtype)));
  if (v.data == nullptr) throw Error(fmt::format("[quanta::{}] {}: data pointer is null", op, arg));
}

void check_location(Location found, Location wanted, std::string_view op, std::string_view arg) {
  if (found != wanted)
    throw Error(fmt::format("[quanta::{}] {}: buffer is in {} memory but must be in {} memory", op,
                            arg, location_name(found), location_name(wanted)));
}

void check_dtype(DType found, DType wanted, std::string_view op, std::string_view arg,
                 std::string_view why) {
  if (found != wanted)
    throw Error(fmt::format("[quanta::{}] {}: dtype {} must be {} ({})", op, arg, dtype_name(found),
                            dtype_name(wanted), why));
}

void check_dims(int64_t found, int64_t wanted, std::string_view op, std::string_view what) {
  if (found != wanted)
    throw Error(fmt::format("[quanta::{}] {} = {} must equal {}", op, what, found, wanted));
}

void check_matmul_args(const ConstMatrixView& x, const QuantizedMatrix& w, const MatrixView& y,
                       std::string_view op) {
  w.validate(op, "w");
  check_view(x, op, "x");
  check_view(y, op, "y");
  if (x.cols != w.k)
    throw Error(fmt::format("[quanta::{}] x: K = {} (columns of x) must equal K = {} of w ({})", op,
                            x.cols, w.k, w.describe()));
  if (y.rows != x.rows)
    throw Error(
        fmt::format("[quanta::{}] y: M = {} rows must equal M = {} rows of x", op, y.rows, x.rows));
  if (y.cols != w.n)
    throw Error(
        fmt::format("[quanta::{}] y: N = {} columns must equal N = {} of w", op, y.cols, w.n));
  check_dtype(y.dtype, x.dtype, op, "y", "the output takes the activation dtype");
  if (w.format.scheme == Scheme::affine)
    check_dtype(w.scale_dtype, x.dtype, op, "w.scales", "affine scales share x's dtype, as in MLX");
  check_location(x.location, w.location, op, "x");
  check_location(y.location, w.location, op, "y");
}

}  // namespace quanta::detail
