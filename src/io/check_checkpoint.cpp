// `quanta check`: each weight of a quantized checkpoint, dequantized (quanta::dequantize, in
// f32), against its dense source, accumulated in double: rel-L2, max |error|, SNR in dB.
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>

#include "io/common.hpp"
#include "quanta/io.hpp"
#include "quanta/numeric.hpp"
#include "quanta/ops.hpp"

namespace quanta::io {

namespace {

constexpr std::string_view kWhere = "check";

// Element i of a dense buffer of any float type, without alignment assumptions.
double load(const std::byte* p, ElemType t, std::size_t i) {
  switch (t) {
    case ElemType::f32: {
      float v;
      std::memcpy(&v, p + 4 * i, 4);
      return v;
    }
    case ElemType::f64: {
      double v;
      std::memcpy(&v, p + 8 * i, 8);
      return v;
    }
    case ElemType::f16:
    case ElemType::bf16: {
      uint16_t h;
      std::memcpy(&h, p + 2 * i, 2);
      return t == ElemType::f16 ? f16_bits_to_f32(h) : bf16_bits_to_f32(h);
    }
    default:
      return 0;
  }
}

bool is_float(ElemType t) {
  return t == ElemType::f32 || t == ElemType::f16 || t == ElemType::bf16 || t == ElemType::f64;
}

struct Sums {
  double ref2 = 0, err2 = 0, max_abs = 0;
  int64_t nonfinite = 0;
  void add(double ref, double got) {
    if (!std::isfinite(got)) {
      ++nonfinite;
      return;
    }
    const double e = got - ref;
    ref2 += ref * ref;
    err2 += e * e;
    max_abs = std::max(max_abs, std::fabs(e));
  }
  void merge(const Sums& o) {
    ref2 += o.ref2, err2 += o.err2, max_abs = std::max(max_abs, o.max_abs);
    nonfinite += o.nonfinite;
  }
};

void finish(TensorCheck& c, const Sums& s) {
  c.nonfinite = s.nonfinite;
  c.max_abs = s.max_abs;
  c.rel_l2 = s.ref2 > 0 ? std::sqrt(s.err2 / s.ref2) : (s.err2 > 0 ? INFINITY : 0.0);
  c.snr_db = s.err2 > 0 ? 10.0 * std::log10(s.ref2 / s.err2) : INFINITY;
  if (s.nonfinite) c.rel_l2 = NAN;
}

// Rows [r0, r0 + nr) of one expert of an [N, K] nk matrix, as a view.
QuantizedMatrix slice_rows(const QuantizedMatrix& w, int64_t r0, int64_t nr) {
  const Footprint fp = w.footprint();
  const auto n = static_cast<std::size_t>(w.n), r = static_cast<std::size_t>(r0);
  QuantizedMatrix s = w;
  s.n = nr;
  s.codes = w.codes + fp.code_bytes / n * r;
  if (w.scales) s.scales = w.scales + fp.scale_bytes / n * r;
  if (w.biases) s.biases = w.biases + fp.bias_bytes / n * r;
  return s;
}

Sums compare_quantized(const QuantizedMatrix& q, const TensorInfo& d, int threads) {
  const int64_t k = q.k, n = q.n;
  const int64_t chunk = std::clamp<int64_t>((int64_t{1} << 18) / k, 1, n);
  const int64_t per_expert = (n + chunk - 1) / chunk;
  const int64_t jobs = per_expert * q.batch;
  std::vector<Sums> partial(static_cast<std::size_t>(jobs));
  detail::parallel_for(jobs, threads, [&](int64_t j) {
    const int64_t e = j / per_expert, r0 = (j % per_expert) * chunk, nr = std::min(chunk, n - r0);
    const QuantizedMatrix part = slice_rows(q.expert(e), r0, nr);
    std::vector<float> got(static_cast<std::size_t>(nr * k));
    dequantize(part, MatrixView{got.data(), DType::f32, nr, k}, Context{1});
    Sums s;
    const auto base = static_cast<std::size_t>((e * n + r0) * k);
    for (std::size_t i = 0; i < got.size(); ++i)
      s.add(load(d.data.data(), d.type, base + i), got[i]);
    partial[static_cast<std::size_t>(j)] = s;
  });
  Sums all;
  for (const auto& s : partial) all.merge(s);
  return all;
}

// Streaming: pages of a tensor already compared are not needed again.
void release(const Checkpoint& c, const std::byte* p, std::size_t n) {
  if (!p) return;
  for (const auto& f : c.files()) {
    const auto b = f.file()->bytes();
    if (p >= b.data() && p < b.data() + b.size())
      f.file()->release(
          {p, std::min<std::size_t>(n, static_cast<std::size_t>(b.data() + b.size() - p))});
  }
}

}  // namespace

CheckSummary check_checkpoint(const std::filesystem::path& dense_path,
                              const std::filesystem::path& quantized_path, int threads,
                              const std::function<void(const QuantizeProgress&)>& progress) {
  const Checkpoint dense = Checkpoint::open(dense_path);
  const Checkpoint quant = Checkpoint::open(quantized_path);
  const std::vector<ModelTensor> tensors = model_tensors(quant);
  CheckSummary sum;
  Sums total;
  QuantizeProgress prog{0, tensors.size(), 0, 0, {}};
  for (const auto& m : tensors) prog.bytes_total += m.stored_bytes;
  for (const ModelTensor& m : tensors) {
    prog.current = m.name;
    if (progress) progress(prog);
    const TensorInfo* d = dense.find(m.name);
    if (!d) {
      sum.unexpected.push_back(m.name);
    } else {
      if (d->shape != m.shape)
        detail::fail(
            kWhere, quant.name(),
            fmt::format("tensor '{}' has shape {} but its dense source in {} has {}", m.name,
                        fmt::join(m.shape, "x"), dense.name(), fmt::join(d->shape, "x")));
      TensorCheck c;
      c.name = m.name;
      c.format = m.format_name();
      c.numel = m.numel();
      c.quantized = m.quantized.has_value();
      Sums s;
      if (m.quantized) {
        if (!is_float(d->type))
          detail::fail(kWhere, dense.name(),
                       fmt::format("tensor '{}' is {}, not a float weight", m.name,
                                   elem_type_name(d->type)));
        s = compare_quantized(*m.quantized, *d, threads);
        total.merge(s);
        sum.quantized_params += c.numel;
      } else if (is_float(d->type) && is_float(m.dense->type)) {
        for (std::size_t i = 0; i < static_cast<std::size_t>(c.numel); ++i)
          s.add(load(d->data.data(), d->type, i), load(m.dense->data.data(), m.dense->type, i));
      } else {
        const bool same = d->type == m.dense->type &&
                          std::equal(d->data.begin(), d->data.end(), m.dense->data.begin());
        s.ref2 = 1, s.err2 = same ? 0 : 1;
      }
      finish(c, s);
      if (c.quantized)
        sum.worst_rel_l2 = std::isnan(c.rel_l2) ? c.rel_l2 : std::max(sum.worst_rel_l2, c.rel_l2);
      sum.tensors.push_back(std::move(c));
    }
    if (d) release(dense, d->data.data(), d->data.size());
    if (m.quantized) {
      const Footprint fp = m.quantized->footprint();
      const auto b = static_cast<std::size_t>(m.quantized->batch);
      release(quant, m.quantized->codes, fp.code_bytes * b);
      release(quant, m.quantized->scales, fp.scale_bytes * b);
      release(quant, m.quantized->biases, fp.bias_bytes * b);
    } else if (m.dense) {
      release(quant, m.dense->data.data(), m.dense->data.size());
    }
    prog.bytes_done += m.stored_bytes;
    ++prog.tensors_done;
    if (progress) progress(prog);
  }
  std::set<std::string_view> seen;
  for (const ModelTensor& m : tensors) seen.insert(m.name);
  for (const TensorInfo& t : dense.tensors())
    if (!seen.count(t.name)) sum.missing.push_back(t.name);
  TensorCheck all;
  finish(all, total);
  sum.snr_db = all.snr_db;
  return sum;
}

}  // namespace quanta::io
