// Portable CPU kernels: decode one stored row to f32, then multiply-accumulate in f32.
// Correct for every format and layout; the SIMD kernels (src/cpu/*) take over the hot cases.
#include <algorithm>
#include <vector>

#include "cpu/backend.hpp"
#include "cpu/pool.hpp"
#include "format/decode.hpp"
#include "format/dense.hpp"

namespace quanta::cpu {

namespace {

// y[rows_of_x, :] += x[:, k] * W[k, :] (kn) or y[:, n] = x · W[n, :] (nk), for the rows of x
// listed in `rows` (all rows when empty), with W one matrix of the stack.
void matmul_rows(ConstMatrixView x, const QuantizedMatrix& w, MatrixView y,
                 const std::vector<int64_t>& rows) {
  const int64_t R = codec::storage_rows(w), C = codec::storage_cols(w);
  std::vector<float> row(static_cast<std::size_t>(C));
  std::vector<float> xr(static_cast<std::size_t>(x.cols));
  if (w.layout == Layout::nk) {
    // One decoded output row at a time; every x row dots it.
    std::vector<std::vector<float>> xs;
    for (int64_t m : rows) {
      for (int64_t k = 0; k < x.cols; ++k)
        xr[static_cast<std::size_t>(k)] =
            dense::load(x.data, x.dtype, static_cast<std::size_t>(m * x.cols + k));
      xs.push_back(xr);
    }
    for (int64_t n = 0; n < R; ++n) {
      codec::decode_storage_row(w, n, row.data());
      for (std::size_t i = 0; i < rows.size(); ++i) {
        float acc = 0;
        for (int64_t k = 0; k < C; ++k)
          acc += xs[i][static_cast<std::size_t>(k)] * row[static_cast<std::size_t>(k)];
        dense::store(y.data, y.dtype, static_cast<std::size_t>(rows[i] * y.cols + n), acc);
      }
    }
    return;
  }
  // kn: accumulate rank-1 updates over the K storage rows.
  std::vector<std::vector<float>> acc(rows.size(),
                                      std::vector<float>(static_cast<std::size_t>(C), 0.0f));
  for (int64_t k = 0; k < R; ++k) {
    codec::decode_storage_row(w, k, row.data());
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const float xv = dense::load(x.data, x.dtype, static_cast<std::size_t>(rows[i] * x.cols + k));
      for (int64_t n = 0; n < C; ++n)
        acc[i][static_cast<std::size_t>(n)] += xv * row[static_cast<std::size_t>(n)];
    }
  }
  for (std::size_t i = 0; i < rows.size(); ++i)
    for (int64_t n = 0; n < C; ++n)
      dense::store(y.data, y.dtype, static_cast<std::size_t>(rows[i] * y.cols + n),
                   acc[i][static_cast<std::size_t>(n)]);
}

}  // namespace

// Storage rows in blocks over the thread pool (each output row is written by one task). f32 rows
// are decoded in place; f16/bf16 rows hold values already rounded to the dtype (the owner's
// arithmetic), so converting them is exact.
void dequantize_generic(const QuantizedMatrix& w, MatrixView out, const Context& ctx) {
  const int64_t R = codec::storage_rows(w), C = codec::storage_cols(w);
  const int64_t rows = w.batch * R;
  const int workers = resolve_threads(ctx.threads);
  std::vector<QuantizedMatrix> experts;
  for (int64_t e = 0; e < w.batch; ++e) experts.push_back(w.expert(e));
  std::vector<std::vector<float>> bufs(  // a row per worker for f16/bf16 (the tasks never allocate)
      static_cast<std::size_t>(workers),
      std::vector<float>(out.dtype == DType::f32 ? 0 : static_cast<std::size_t>(C)));
  constexpr int64_t kRowsPerTask = 8;
  parallel_for((rows + kRowsPerTask - 1) / kRowsPerTask, workers, [&](int64_t task, int worker) {
    float* row = bufs[static_cast<std::size_t>(worker)].data();
    for (int64_t i = task * kRowsPerTask; i < std::min(rows, (task + 1) * kRowsPerTask); ++i) {
      const QuantizedMatrix& m = experts[static_cast<std::size_t>(i / R)];
      const auto base = static_cast<std::size_t>(i * C);
      if (out.dtype == DType::f32) {
        codec::decode_storage_row(m, i % R, static_cast<float*>(out.data) + base);
        continue;
      }
      codec::decode_storage_row(m, i % R, row, out.dtype);
      auto* dst = static_cast<uint16_t*>(out.data) + base;
      if (out.dtype == DType::f16)
        for (int64_t c = 0; c < C; ++c) dst[c] = f32_to_f16_bits(row[c]);
      else
        for (int64_t c = 0; c < C; ++c) dst[c] = f32_to_bf16_bits(row[c]);
    }
  });
}

void matmul_generic(ConstMatrixView x, const QuantizedMatrix& w, const int32_t* ids, MatrixView y,
                    const Context&) {
  if (ids == nullptr) {
    std::vector<int64_t> rows(static_cast<std::size_t>(x.rows));
    for (int64_t m = 0; m < x.rows; ++m) rows[static_cast<std::size_t>(m)] = m;
    return matmul_rows(x, w.expert(0), y, rows);
  }
  // Group rows by expert so each expert's weights are decoded once.
  std::vector<std::vector<int64_t>> by_expert(static_cast<std::size_t>(w.batch));
  for (int64_t m = 0; m < x.rows; ++m) by_expert[static_cast<std::size_t>(ids[m])].push_back(m);
  for (int64_t e = 0; e < w.batch; ++e)
    if (!by_expert[static_cast<std::size_t>(e)].empty())
      matmul_rows(x, w.expert(e), y, by_expert[static_cast<std::size_t>(e)]);
}

}  // namespace quanta::cpu
