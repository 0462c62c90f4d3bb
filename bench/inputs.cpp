#include "inputs.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <exception>
#include <optional>
#include <thread>
#include <vector>

#include "format/dense.hpp"
#include "format/gguf.hpp"
#include "quanta/error.hpp"
#include "quanta/ops.hpp"

namespace quanta::bench {

namespace {

uint64_t splitmix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Irwin-Hall of four 16-bit uniforms, rescaled to unit variance: cheap, bounded (|v| < 3.5),
// never a denormal, and a pure function of (seed, index).
float normal_at(uint64_t seed, std::size_t i) {
  const uint64_t h = splitmix(seed * 0x632be59bd9b4e019ull + i);
  const float s =
      static_cast<float>((h & 0xffff) + ((h >> 16) & 0xffff) + ((h >> 32) & 0xffff) + (h >> 48));
  return (s / 65536.0f - 2.0f) * 1.7320508f;
}

// Runs body(begin, end) over [0, count) split into `threads` contiguous ranges.
template <class F>
void parallel_ranges(std::size_t count, int threads, F&& body) {
  const auto t = static_cast<std::size_t>(std::max(1, threads));
  if (t == 1 || count < 1 << 16) return body(std::size_t{0}, count);
  std::vector<std::thread> pool;
  const std::size_t per = (count + t - 1) / t;
  for (std::size_t b = 0; b < count; b += per)
    pool.emplace_back([&, b] { body(b, std::min(count, b + per)); });
  for (auto& th : pool) th.join();
}

// GGUF K-quants have no encoder yet: random block bytes with small, finite f16 scales.
void fill_kquant_blocks(const QuantizedMatrix& m, std::size_t bytes, uint64_t seed) {
  const SchemeInfo& info = m.format.info();
  auto* base = reinterpret_cast<uint8_t*>(m.codes);
  for (std::size_t i = 0; i < bytes; i += 8) {
    const uint64_t h = splitmix(seed + i);
    std::memcpy(base + i, &h, std::min<std::size_t>(8, bytes - i));
  }
  auto set_f16 = [&](std::size_t block, std::size_t offset, uint64_t salt) {
    const float v = 0.001f + 0.019f *
                                 static_cast<float>(splitmix(seed ^ (block * 4 + salt)) & 0xffff) /
                                 65536.0f;
    const uint16_t h = f32_to_f16_bits(v);
    std::memcpy(base + block * info.block_bytes + offset, &h, 2);
  };
  using namespace codec::gguf;
  for (std::size_t b = 0; b < bytes / info.block_bytes; ++b) {
    switch (m.format.scheme) {
      case Scheme::q2_K:
        set_f16(b, offsetof(block_q2_K, d), 0);
        set_f16(b, offsetof(block_q2_K, dmin), 1);
        break;
      case Scheme::q3_K:
        set_f16(b, offsetof(block_q3_K, d), 0);
        break;
      case Scheme::q4_K:
        set_f16(b, offsetof(block_q4_K, d), 0);
        set_f16(b, offsetof(block_q4_K, dmin), 1);
        break;
      case Scheme::q5_K:
        set_f16(b, offsetof(block_q5_K, d), 0);
        set_f16(b, offsetof(block_q5_K, dmin), 1);
        break;
      case Scheme::q6_K:
        set_f16(b, offsetof(block_q6_K, d), 0);
        break;
      default:
        throw Error(
            fmt::format("[quanta::bench] format: no random block maker for {}", m.format.name()));
    }
  }
}

// Whether storage rows can be quantized in independent chunks (every scale is local to a
// chunk of `quantum` storage rows): not for a per-tensor scale, nor per-channel in [K, N].
int64_t chunk_quantum(const Format& f, Layout layout) {
  if (f.granularity == Granularity::tensor) return 0;
  if (layout == Layout::nk) return 1;
  return f.granularity == Granularity::group ? f.group_size : 0;
}

}  // namespace

HostBuffer HostBuffer::allocate(std::size_t bytes) {
  HostBuffer b;
  b.data = std::shared_ptr<std::byte[]>(new std::byte[bytes ? bytes : 1]);
  b.bytes = bytes;
  return b;
}

HostMatrix HostMatrix::allocate(DType t, int64_t rows, int64_t cols) {
  HostMatrix m;
  m.buffer = HostBuffer::allocate(static_cast<std::size_t>(rows * cols) * dtype_size(t));
  m.dtype = t;
  m.rows = rows;
  m.cols = cols;
  return m;
}

void HostMatrix::poison() const {
  const auto n = static_cast<std::size_t>(rows * cols);
  for (std::size_t i = 0; i < n; ++i) dense::store(buffer.get(), dtype, i, NAN);
}

void fill_normal(void* data, DType t, std::size_t count, uint64_t seed, float scale, int threads) {
  parallel_ranges(count, threads, [&](std::size_t b, std::size_t e) {
    for (std::size_t i = b; i < e; ++i) dense::store(data, t, i, normal_at(seed, i) * scale);
  });
}

HostMatrix random_matrix(DType t, int64_t rows, int64_t cols, uint64_t seed, float scale,
                         int threads) {
  HostMatrix m = HostMatrix::allocate(t, rows, cols);
  fill_normal(m.buffer.get(), t, static_cast<std::size_t>(rows * cols), seed, scale, threads);
  return m;
}

QuantizedMatrix make_weights(const Format& f, DType t, int64_t n, int64_t k, Layout layout,
                             int64_t experts, uint64_t seed, int threads) {
  QuantizedMatrix stack = QuantizedMatrix::allocate_host(f, n, k, t, layout, experts);
  const Footprint fp = stack.footprint();
  const auto E = static_cast<std::size_t>(experts);
  if (!f.info().encode) {
    fill_kquant_blocks(stack, fp.code_bytes * E, seed);
    return stack;
  }
  // Stacked [N, K] matrices are one [E·N, K] matrix byte for byte (and stacked [K, N] ones one
  // [E·K, N]), since every scale stays inside its expert; only a per-tensor scale repeats.
  const bool nk = layout == Layout::nk;
  const int64_t rows = nk ? experts * n : experts * k, cols = nk ? k : n;
  const HostMatrix w = random_matrix(t, rows, cols, seed, 0.05f, threads);
  QuantizeOptions opts;
  opts.layout = layout;
  if (f.scheme == Scheme::nvfp4) {  // exercise the two-level (global) scale
    float amax = 0;
    for (int64_t i = 0; i < rows * cols; ++i)
      amax = std::max(amax, std::fabs(dense::load(w.buffer.get(), t, static_cast<std::size_t>(i))));
    opts.nvfp4_tensor_amax = amax;
  }
  const std::size_t esize = dtype_size(t);
  auto rows_view = [&](int64_t r0, int64_t r1) {
    return ConstMatrixView{w.buffer.get() + static_cast<std::size_t>(r0 * cols) * esize, t, r1 - r0,
                           cols};
  };
  const int64_t quantum = chunk_quantum(f, layout);
  if (quantum == 0) {
    // Scales span the whole matrix: quantize expert by expert, each with its own scales.
    const int64_t per = rows / experts;
    for (std::size_t e = 0; e < E; ++e) {
      const auto r0 = static_cast<int64_t>(e) * per;
      const QuantizedMatrix q = quantize(rows_view(r0, r0 + per), f, opts);
      std::memcpy(stack.codes + e * fp.code_bytes, q.codes, fp.code_bytes);
      if (fp.scale_bytes) std::memcpy(stack.scales + e * fp.scale_bytes, q.scales, fp.scale_bytes);
      if (fp.bias_bytes) std::memcpy(stack.biases + e * fp.bias_bytes, q.biases, fp.bias_bytes);
    }
    return stack;
  }
  // Chunks of whole quanta of storage rows, quantized in parallel and copied into place; the
  // bytes of a storage row range are contiguous in codes, scales and biases alike.
  const int64_t quanta_total = rows / quantum;
  const int64_t pieces = std::clamp<int64_t>(threads, 1, quanta_total);
  std::vector<std::thread> pool;
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(pieces));
  const std::size_t code_per_row = fp.code_bytes * E / static_cast<std::size_t>(rows);
  const std::size_t scale_per_quantum = fp.scale_bytes * E / static_cast<std::size_t>(quanta_total);
  const std::size_t bias_per_quantum = fp.bias_bytes * E / static_cast<std::size_t>(quanta_total);
  std::optional<float> global;
  for (int64_t p = 0; p < pieces; ++p) {
    const int64_t q0 = quanta_total * p / pieces, q1 = quanta_total * (p + 1) / pieces;
    auto work = [&, p, q0, q1] {
      try {
        const QuantizedMatrix q = quantize(rows_view(q0 * quantum, q1 * quantum), f, opts);
        const Footprint qf = q.footprint();
        const auto r0 = static_cast<std::size_t>(q0 * quantum), u0 = static_cast<std::size_t>(q0);
        std::memcpy(stack.codes + r0 * code_per_row, q.codes, qf.code_bytes);
        if (qf.scale_bytes)
          std::memcpy(stack.scales + u0 * scale_per_quantum, q.scales, qf.scale_bytes);
        if (qf.bias_bytes)
          std::memcpy(stack.biases + u0 * bias_per_quantum, q.biases, qf.bias_bytes);
        if (p == 0) global = q.global_scale;
      } catch (...) {
        errors[static_cast<std::size_t>(p)] = std::current_exception();
      }
    };
    if (pieces == 1)
      work();
    else
      pool.emplace_back(work);
  }
  for (auto& th : pool) th.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
  stack.global_scale = global;
  return stack;
}

QuantizedMatrix clone_host(const QuantizedMatrix& w) {
  QuantizedMatrix c =
      QuantizedMatrix::allocate_host(w.format, w.n, w.k, w.scale_dtype, w.layout, w.batch);
  const Footprint fp = w.footprint();
  const auto E = static_cast<std::size_t>(w.batch);
  std::memcpy(c.codes, w.codes, fp.code_bytes * E);
  if (fp.scale_bytes) std::memcpy(c.scales, w.scales, fp.scale_bytes * E);
  if (fp.bias_bytes) std::memcpy(c.biases, w.biases, fp.bias_bytes * E);
  c.global_scale = w.global_scale;
  return c;
}

}  // namespace quanta::bench
