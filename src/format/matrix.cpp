// QuantizedMatrix geometry: byte counts (overflow-checked), validation, views and allocation.
#include <fmt/format.h>

#include <cstring>
#include <limits>

#include "quanta/error.hpp"
#include "quanta/matrix.hpp"

namespace quanta {

namespace {

constexpr int64_t kMaxDim = std::numeric_limits<int32_t>::max();  // kernels index with int32

std::size_t checked_mul(std::size_t a, std::size_t b, std::string_view op, std::string_view what) {
  std::size_t r;
  if (__builtin_mul_overflow(a, b, &r))
    throw Error(fmt::format("[quanta::{}] {}: size {} x {} overflows size_t", op, what, a, b));
  return r;
}

}  // namespace

Footprint footprint(const Format& f, int64_t n, int64_t k, Layout layout, DType scale_dtype,
                    std::string_view op) {
  validate_format(f, op, "format");
  const SchemeInfo& info = f.info();
  if (n <= 0 || n > kMaxDim)
    throw Error(fmt::format("[quanta::{}] w: N = {} must be in [1, {}]", op, n, kMaxDim));
  if (k <= 0 || k > kMaxDim)
    throw Error(fmt::format("[quanta::{}] w: K = {} must be in [1, {}]", op, k, kMaxDim));
  if (f.group_size > 0 && k % f.group_size != 0)
    throw Error(fmt::format("[quanta::{}] w: K = {} is not a multiple of group_size = {} ({})", op,
                            k, f.group_size, f.name()));
  if (layout == Layout::kn) {
    if (!info.kn_layout)
      throw Error(
          fmt::format("[quanta::{}] w: the [K, N] layout is not available for {}", op, info.name));
    if ((n * f.bits) % 32 != 0)
      throw Error(fmt::format(
          "[quanta::{}] w: N = {} must make whole 32-bit words per K-row in the [K, N] layout "
          "(N * bits % 32 == 0, bits = {})",
          op, n, f.bits));
  }
  const auto N = static_cast<std::size_t>(n), K = static_cast<std::size_t>(k);
  const std::size_t elems = checked_mul(N, K, op, "w");
  Footprint fp;
  if (info.family == Family::gguf) {
    fp.code_bytes =
        checked_mul(checked_mul(N, K / info.block_elems, op, "w"), info.block_bytes, op, "w");
    return fp;
  }
  fp.code_bytes = checked_mul(elems, static_cast<std::size_t>(f.bits), op, "w") / 8;
  switch (info.family) {
    case Family::affine:
      fp.scale_count = elems / f.group_size;
      fp.scale_bytes = checked_mul(fp.scale_count, dtype_size(scale_dtype), op, "scales");
      fp.bias_bytes = fp.scale_bytes;
      break;
    case Family::microscaled:
      fp.scale_count = elems / f.group_size;
      fp.scale_bytes = fp.scale_count;  // one byte each
      break;
    case Family::fp8:
      fp.scale_count = f.granularity == Granularity::channel ? N : 1;
      fp.scale_bytes = fp.scale_count * sizeof(float);
      break;
    case Family::gguf:
      break;
  }
  return fp;
}

Footprint QuantizedMatrix::footprint() const {
  return quanta::footprint(format, n, k, layout, scale_dtype);
}

QuantizedMatrix QuantizedMatrix::expert(int64_t e) const {
  if (e < 0 || e >= batch)
    throw Error(
        fmt::format("[quanta::expert] e = {} is outside the stack of {} matrices", e, batch));
  const Footprint fp = footprint();
  QuantizedMatrix m = *this;
  m.batch = 1;
  m.host_pack = nullptr;  // packs the whole stack
  m.device_pack = nullptr;
  const auto off = static_cast<std::size_t>(e);
  m.codes = codes ? codes + off * fp.code_bytes : nullptr;
  m.scales = scales ? scales + off * fp.scale_bytes : nullptr;
  m.biases = biases ? biases + off * fp.bias_bytes : nullptr;
  return m;
}

QuantizedMatrix QuantizedMatrix::allocate_host(const Format& f, int64_t n, int64_t k,
                                               DType scale_dtype, Layout layout, int64_t batch) {
  const Footprint fp = quanta::footprint(f, n, k, layout, scale_dtype, "allocate_host");
  if (batch <= 0 || batch > kMaxDim)
    throw Error(
        fmt::format("[quanta::allocate_host] batch = {} must be in [1, {}]", batch, kMaxDim));
  const std::size_t b = static_cast<std::size_t>(batch);
  const std::size_t total = checked_mul(fp.total(), b, "allocate_host", "w");
  auto storage = std::shared_ptr<std::byte[]>(new std::byte[total ? total : 1]());
  QuantizedMatrix m;
  m.format = f;
  m.layout = layout;
  m.scale_dtype = scale_dtype;
  m.location = Location::host;
  m.batch = batch;
  m.n = n;
  m.k = k;
  m.codes = storage.get();
  m.scales = fp.scale_bytes ? m.codes + fp.code_bytes * b : nullptr;
  m.biases = fp.bias_bytes ? m.codes + (fp.code_bytes + fp.scale_bytes) * b : nullptr;
  m.keepalive = storage;
  return m;
}

QuantizedMatrix QuantizedMatrix::wrap(const Format& f, int64_t n, int64_t k, DType scale_dtype,
                                      Layout layout, Location location, std::span<std::byte> codes,
                                      std::span<std::byte> scales, std::span<std::byte> biases,
                                      int64_t batch, std::optional<float> global_scale) {
  const Footprint fp = quanta::footprint(f, n, k, layout, scale_dtype, "wrap");
  if (batch <= 0 || batch > kMaxDim)
    throw Error(fmt::format("[quanta::wrap] batch = {} must be in [1, {}]", batch, kMaxDim));
  const std::size_t b = static_cast<std::size_t>(batch);
  auto check = [&](std::span<std::byte> s, std::size_t need, std::string_view name) {
    if (need == 0) return;
    const std::size_t total = checked_mul(need, b, "wrap", name);
    if (s.data() == nullptr)
      throw Error(
          fmt::format("[quanta::wrap] {}: null buffer, {} needs {} bytes", name, f.name(), total));
    if (s.size() < total)
      throw Error(
          fmt::format("[quanta::wrap] {}: buffer of {} bytes is too short, {} [{} x {}] x {} "
                      "needs {}",
                      name, s.size(), f.name(), n, k, batch, total));
  };
  check(codes, fp.code_bytes, "codes");
  check(scales, fp.scale_bytes, "scales");
  check(biases, fp.bias_bytes, "biases");
  if (global_scale && !f.info().global_scale)
    throw Error(fmt::format("[quanta::wrap] global_scale: {} has no global scale", f.name()));
  QuantizedMatrix m;
  m.format = f;
  m.layout = layout;
  m.scale_dtype = scale_dtype;
  m.location = location;
  m.batch = batch;
  m.n = n;
  m.k = k;
  m.codes = codes.data();
  m.scales = fp.scale_bytes ? scales.data() : nullptr;
  m.biases = fp.bias_bytes ? biases.data() : nullptr;
  m.global_scale = global_scale;
  return m;
}

void QuantizedMatrix::validate(std::string_view op, std::string_view arg) const {
  const Footprint fp = quanta::footprint(format, n, k, layout, scale_dtype, op);
  if (batch <= 0 || batch > kMaxDim)
    throw Error(
        fmt::format("[quanta::{}] {}: batch = {} must be in [1, {}]", op, arg, batch, kMaxDim));
  if (codes == nullptr) throw Error(fmt::format("[quanta::{}] {}: codes buffer is null", op, arg));
  if (fp.scale_bytes && scales == nullptr)
    throw Error(fmt::format("[quanta::{}] {}: scales buffer is null ({} needs {} scales)", op, arg,
                            format.name(), fp.scale_count));
  if (fp.bias_bytes && biases == nullptr)
    throw Error(fmt::format("[quanta::{}] {}: biases buffer is null ({} needs biases)", op, arg,
                            format.name()));
  if (global_scale && !format.info().global_scale)
    throw Error(fmt::format("[quanta::{}] {}: {} has no global scale", op, arg, format.name()));
}

std::string QuantizedMatrix::describe() const {
  std::string s = fmt::format("{} [{} x {}]{} {}", format.name(), layout == Layout::nk ? n : k,
                              layout == Layout::nk ? k : n, layout == Layout::nk ? " nk" : " kn",
                              location_name(location));
  if (format.scheme == Scheme::affine) s += fmt::format(" scales {}", dtype_name(scale_dtype));
  if (batch > 1) s += fmt::format(" x{} experts", batch);
  if (host_pack || device_pack) s += " packed";
  return s;
}

}  // namespace quanta
