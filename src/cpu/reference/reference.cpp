// The fp64 oracle. Every element is decoded on its own with the format's codec (no group
// hoisting, no bias folding) into double, and products are summed in double.
#include "quanta/reference.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/validate.hpp"
#include "cpu/pool.hpp"
#include "format/affine.hpp"
#include "format/dense.hpp"
#include "format/gguf.hpp"
#include "format/minifloat.hpp"
#include "quanta/error.hpp"

namespace quanta::ref {

namespace {

constexpr std::string_view kOp = "ref";

double load_scale(const QuantizedMatrix& w, std::size_t i) {
  switch (w.format.info().scale) {
    case ScaleEncoding::activation_dtype:
      return dense::load(w.scales, w.scale_dtype, i);
    case ScaleEncoding::e8m0:
      return codec::e8m0_to_float(reinterpret_cast<const uint8_t*>(w.scales)[i]);
    case ScaleEncoding::e4m3:
      return codec::e4m3_to_float(reinterpret_cast<const uint8_t*>(w.scales)[i]);
    case ScaleEncoding::f32: {
      float s;
      std::memcpy(&s, w.scales + i * sizeof s, sizeof s);
      return s;
    }
    case ScaleEncoding::in_block:
      break;
  }
  return 1.0;
}

double decode_element(const QuantizedMatrix& w, uint32_t code) {
  switch (w.format.info().code) {
    case ElementCode::uint:
      return code;
    case ElementCode::e2m1:
      return codec::e2m1_to_float(static_cast<uint8_t>(code));
    case ElementCode::e4m3:
      return codec::e4m3_to_float(static_cast<uint8_t>(code));
    case ElementCode::e5m2:
      return codec::e5m2_to_float(static_cast<uint8_t>(code));
    case ElementCode::gguf_block:
      break;
  }
  return 0;
}

void check_host(const QuantizedMatrix& w) {
  w.validate(kOp);
  detail::check_location(w.location, Location::host, kOp, "w");
}

}  // namespace

std::vector<double> dequantize(const QuantizedMatrix& stack, int64_t expert) {
  check_host(stack);
  const QuantizedMatrix w = stack.expert(expert);
  const Footprint fp = w.footprint();
  const int64_t N = w.n, K = w.k;
  std::vector<double> out(static_cast<std::size_t>(N * K));
  const auto* codes = reinterpret_cast<const uint8_t*>(w.codes);
  const SchemeInfo& info = w.format.info();

  if (info.family == Family::gguf) {
    const std::size_t row_bytes = fp.code_bytes / static_cast<std::size_t>(N);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t b = 0; b < K / info.block_elems; ++b)
        codec::gguf::decode_block_f64(w.format.scheme, codes + n * row_bytes + b * info.block_bytes,
                                      &out[static_cast<std::size_t>(n * K + b * info.block_elems)]);
    return out;
  }

  const bool nk = w.layout == Layout::nk;
  const int64_t row_len = nk ? K : N;  // codes per storage row
  const std::size_t row_bytes = fp.code_bytes / static_cast<std::size_t>(nk ? N : K);
  const int64_t G = w.format.group_size, groups = G > 0 ? K / G : 1;
  const double global = w.global_scale ? *w.global_scale : 1.0;
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t k = 0; k < K; ++k) {
      const uint8_t* row = codes + (nk ? n : k) * row_bytes;
      const uint32_t q = codec::affine_code(row, nk ? k : n, w.format.bits, row_len);
      double v = decode_element(w, q);
      switch (info.family) {
        case Family::affine: {
          const auto si = static_cast<std::size_t>(nk ? n * groups + k / G : (k / G) * N + n);
          v = load_scale(w, si) * v + dense::load(w.biases, w.scale_dtype, si);
          break;
        }
        case Family::microscaled: {
          const auto si = static_cast<std::size_t>(nk ? n * groups + k / G : (k / G) * N + n);
          v = v * load_scale(w, si) * global;
          break;
        }
        case Family::fp8:
          v *= load_scale(w, w.format.granularity == Granularity::channel ? n : 0);
          break;
        case Family::gguf:
          break;
      }
      out[static_cast<std::size_t>(n * K + k)] = v;
    }
  }
  return out;
}

std::vector<double> to_double(ConstMatrixView x) {
  detail::check_view(x, kOp, "x");
  detail::check_location(x.location, Location::host, kOp, "x");
  std::vector<double> v(static_cast<std::size_t>(x.rows * x.cols));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = dense::load(x.data, x.dtype, i);
  return v;
}

namespace {

// y[n] for n in [n0, n1): x · row n of W, summed in order along K.
void accumulate_row(const double* x, const double* W, int64_t n0, int64_t n1, int64_t K,
                    double* y) {
  for (int64_t n = n0; n < n1; ++n) {
    double acc = 0;
    for (int64_t k = 0; k < K; ++k) acc += x[k] * W[n * K + k];
    y[n] = acc;
  }
}

// row(m, n0, n1) for every row m < M of y, in pieces of kCols outputs spread over the machine's
// threads (the CPU backend's pool only hands out the pieces). Each output is still one sum in
// order along K, so the result does not depend on the thread count; small products stay on the
// calling thread. (The GPU tests' oracle on M x N x K up to 1024 x 256 x 4224 took a third of
// their time on one thread.)
template <class Row>
void for_each_row(int64_t M, int64_t N, int64_t K, Row&& row) {
  constexpr int64_t kCols = 256, kSerialMacs = int64_t{1} << 22;
  const int64_t per_row = (N + kCols - 1) / kCols;
  cpu::parallel_for(M * per_row, M * N * K < kSerialMacs ? 1 : cpu::hardware_threads(),
                    [&](int64_t i, int) {
                      const int64_t m = i / per_row, n0 = i % per_row * kCols;
                      row(m, n0, std::min(N, n0 + kCols));
                    });
}

}  // namespace

std::vector<double> matmul(ConstMatrixView x, const QuantizedMatrix& w) {
  check_host(w);
  if (x.cols != w.k)
    throw Error(fmt::format("[quanta::ref] x: K = {} must equal K = {} of w", x.cols, w.k));
  const std::vector<double> xd = to_double(x);
  const std::vector<double> W = dequantize(w, 0);
  std::vector<double> y(static_cast<std::size_t>(x.rows * w.n));
  for_each_row(x.rows, w.n, w.k, [&](int64_t m, int64_t n0, int64_t n1) {
    accumulate_row(&xd[m * w.k], W.data(), n0, n1, w.k, &y[m * w.n]);
  });
  return y;
}

std::vector<double> gather_matmul(ConstMatrixView x, const QuantizedMatrix& w,
                                  std::span<const int32_t> ids) {
  check_host(w);
  if (x.cols != w.k)
    throw Error(fmt::format("[quanta::ref] x: K = {} must equal K = {} of w", x.cols, w.k));
  if (static_cast<int64_t>(ids.size()) != x.rows)
    throw Error(
        fmt::format("[quanta::ref] expert_ids: {} ids for {} rows of x", ids.size(), x.rows));
  const std::vector<double> xd = to_double(x);
  std::vector<std::vector<double>> experts(static_cast<std::size_t>(w.batch));
  std::vector<double> y(static_cast<std::size_t>(x.rows * w.n));
  for (int64_t m = 0; m < x.rows; ++m) {  // every expert a row uses, decoded before the sums
    const int32_t e = ids[static_cast<std::size_t>(m)];
    if (e < 0 || e >= w.batch)
      throw Error(
          fmt::format("[quanta::ref] expert_ids[{}] = {} is outside [0, {})", m, e, w.batch));
    auto& W = experts[static_cast<std::size_t>(e)];
    if (W.empty()) W = dequantize(w, e);
  }
  for_each_row(x.rows, w.n, w.k, [&](int64_t m, int64_t n0, int64_t n1) {
    const auto& W = experts[static_cast<std::size_t>(ids[static_cast<std::size_t>(m)])];
    accumulate_row(&xd[m * w.k], W.data(), n0, n1, w.k, &y[m * w.n]);
  });
  return y;
}

Comparison compare(std::span<const double> y, std::span<const double> expected, double bound) {
  if (y.size() != expected.size())
    throw Error(fmt::format("[quanta::ref::compare] {} results for {} expected values", y.size(),
                            expected.size()));
  Comparison c;
  double diff2 = 0, ref2 = 0, y2 = 0, dot = 0;
  for (std::size_t i = 0; i < y.size(); ++i) {
    if (!std::isfinite(y[i])) {
      ++c.nonfinite;
      continue;
    }
    const double d = y[i] - expected[i];
    c.max_abs = std::max(c.max_abs, std::fabs(d));
    diff2 += d * d;
    ref2 += expected[i] * expected[i];
    y2 += y[i] * y[i];
    dot += y[i] * expected[i];
  }
  c.rel_l2 = ref2 > 0 ? std::sqrt(diff2 / ref2) : std::sqrt(diff2);
  c.cosine = (y2 > 0 && ref2 > 0) ? dot / std::sqrt(y2 * ref2) : (y2 == ref2 ? 1.0 : 0.0);
  if (c.nonfinite) c.rel_l2 = c.max_abs = INFINITY;
  c.pass = c.nonfinite == 0 && c.rel_l2 <= bound;
  return c;
}

Comparison compare(ConstMatrixView y, std::span<const double> expected, DType bound_dtype) {
  return compare(to_double(y), expected, rel_l2_bound(bound_dtype));
}

}  // namespace quanta::ref
