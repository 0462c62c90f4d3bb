// Host quantizer: dense weights -> QuantizedMatrix, bit-exact with each format's owner.
// Work is split by output row; each row is gathered along K (the grouping axis) first.
#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "core/validate.hpp"
#include "cuda/backend.hpp"
#include "format/affine.hpp"
#include "format/dense.hpp"
#include "format/gguf.hpp"
#include "format/microscaled.hpp"
#include "quanta/error.hpp"
#include "quanta/ops.hpp"

namespace quanta {

namespace {

constexpr std::string_view kOp = "quantize";

// Where code (n, k) and scale (n, g) of one matrix go in storage.
struct Placement {
  Layout layout;
  int64_t n, k, groups;
  int bits;
  std::size_t row_bytes;  // bytes per storage row
  uint8_t* row_of(uint8_t* codes, int64_t n_idx, int64_t k_idx) const {
    return codes + (layout == Layout::nk ? n_idx : k_idx) * row_bytes;
  }
  int64_t index_in_row(int64_t n_idx, int64_t k_idx) const {
    return layout == Layout::nk ? k_idx : n_idx;
  }
  std::size_t scale_index(int64_t n_idx, int64_t g) const {
    return static_cast<std::size_t>(layout == Layout::nk ? n_idx * groups + g : g * n + n_idx);
  }
  void put(uint8_t* codes, int64_t n_idx, int64_t k_idx, uint32_t q) const {
    codec::affine_put_code(row_of(codes, n_idx, k_idx), index_in_row(n_idx, k_idx), bits, q);
  }
};

float amax_of(const float* v, int64_t count) {
  float a = 0.0f;
  for (int64_t i = 0; i < count; ++i) a = std::fmax(a, std::fabs(v[i]));
  return a;
}

void quantize_affine_row(const float* w, int64_t n, const Placement& p, QuantizedMatrix& m) {
  const int G = m.format.group_size, bits = m.format.bits;
  auto* codes = reinterpret_cast<uint8_t*>(m.codes);
  for (int64_t g = 0; g < p.groups; ++g) {
    const float* wg = w + g * G;
    float lo = INFINITY, hi = -INFINITY;
    for (int i = 0; i < G; ++i) {
      hi = std::max(hi, wg[i]);  // MLX: std::max / std::min over the f32 values
      lo = std::min(lo, wg[i]);
    }
    const codec::AffineParams par = codec::affine_params_mlx(lo, hi, bits);
    for (int i = 0; i < G; ++i)
      p.put(codes, n, g * G + i, codec::affine_encode_mlx(wg[i], par, bits));
    dense::store(m.scales, m.scale_dtype, p.scale_index(n, g), par.scale);
    dense::store(m.biases, m.scale_dtype, p.scale_index(n, g), par.bias);
  }
}

template <class T>
void quantize_micro_row(const float* w, int64_t n, const Placement& p, QuantizedMatrix& m,
                        float nv_encode) {
  const int G = m.format.group_size;
  auto* codes = reinterpret_cast<uint8_t*>(m.codes);
  auto* scales = reinterpret_cast<uint8_t*>(m.scales);
  for (int64_t g = 0; g < p.groups; ++g) {
    const float* wg = w + g * G;
    const float amax = amax_of(wg, G);
    codec::MicroScale s{};
    switch (m.format.scheme) {
      case Scheme::mxfp4:
        s = codec::mx_scale_mlx<T>(amax, codec::kE2M1Max);
        break;
      case Scheme::mxfp8:
        s = codec::mx_scale_mlx<T>(amax, codec::kE4M3Max);
        break;
      default:
        s = codec::nv_scale_mlx<T>(amax, nv_encode);
        break;
    }
    scales[p.scale_index(n, g)] = s.byte;
    for (int i = 0; i < G; ++i) {
      const uint32_t q = m.format.scheme == Scheme::mxfp8
                             ? codec::fp8_encode_mlx<T>(wg[i], s.divisor)
                             : codec::fp4_encode_mlx<T>(wg[i], s.divisor, nv_encode);
      p.put(codes, n, g * G + i, q);
    }
  }
}

void quantize_micro_row(const float* w, int64_t n, const Placement& p, QuantizedMatrix& m,
                        float nv_encode, DType t) {
  switch (t) {
    case DType::f32:
      return quantize_micro_row<float>(w, n, p, m, nv_encode);
    case DType::f16:
      return quantize_micro_row<f16>(w, n, p, m, nv_encode);
    case DType::bf16:
      return quantize_micro_row<bf16>(w, n, p, m, nv_encode);
  }
}

// fp8 weights: scale = amax / max_finite (1 for an all-zero row or tensor), code =
// saturating RNE of w / scale. No single owner fixes the scale; this is the common
// torchao / vLLM choice ("amax / finfo.max").
void quantize_fp8_row(const float* w, int64_t n, float scale, const Placement& p,
                      QuantizedMatrix& m) {
  auto* codes = reinterpret_cast<uint8_t*>(m.codes);
  const bool e4m3 = m.format.scheme == Scheme::fp8_e4m3;
  for (int64_t k = 0; k < m.k; ++k) {
    const float v = w[k] / scale;
    p.put(codes, n, k, e4m3 ? codec::float_to_e4m3(v) : codec::float_to_e5m2(v));
  }
}

float fp8_scale_for(float amax, Scheme s) {
  const float max_finite = s == Scheme::fp8_e4m3 ? codec::kE4M3Max : codec::kE5M2Max;
  return amax > 0.0f ? amax / max_finite : 1.0f;
}

}  // namespace

QuantizedMatrix quantize(ConstMatrixView w, const Format& format, const QuantizeOptions& opts,
                         const Context& ctx) {
#if defined(QUANTA_HAS_CUDA)
  // Device-resident weights are quantized on the device (src/cuda/quantize.cu).
  if (w.location == Location::device) return cuda::quantize(w, format, opts, ctx);
#else
  (void)ctx;
#endif
  detail::check_view(w, kOp, "w");
  detail::check_location(w.location, Location::host, kOp, "w");
  validate_format(format, kOp, "format");
  const SchemeInfo& info = format.info();
  if (!info.encode)
    throw NotSupported(
        fmt::format("[quanta::{}] format: encoding to {} is not implemented yet (decode is); see "
                    "docs/FORMATS.md",
                    kOp, info.name));
  if (opts.nvfp4_tensor_amax && format.scheme != Scheme::nvfp4)
    throw Error(
        fmt::format("[quanta::{}] nvfp4_tensor_amax: only nvfp4 takes a global scale, "
                    "format is {}",
                    kOp, format.name()));
  if (opts.nvfp4_tensor_amax &&
      !(std::isfinite(*opts.nvfp4_tensor_amax) && *opts.nvfp4_tensor_amax > 0.0f))
    throw Error(fmt::format("[quanta::{}] nvfp4_tensor_amax: {} must be finite and > 0", kOp,
                            *opts.nvfp4_tensor_amax));
  const bool nk = opts.layout == Layout::nk;
  const int64_t n = nk ? w.rows : w.cols;
  const int64_t k = nk ? w.cols : w.rows;

  (void)footprint(format, n, k, opts.layout, w.dtype, kOp);  // shape errors name this op
  QuantizedMatrix m = QuantizedMatrix::allocate_host(format, n, k, w.dtype, opts.layout);
  const Footprint fp = m.footprint();
  const Placement p{opts.layout,
                    n,
                    k,
                    format.group_size > 0 ? k / format.group_size : 1,
                    format.bits,
                    nk ? fp.code_bytes / static_cast<std::size_t>(n)
                       : fp.code_bytes / static_cast<std::size_t>(k)};

  float nv_encode = 1.0f;
  if (opts.nvfp4_tensor_amax) {
    nv_encode = codec::kNvfp4GlobalRange / *opts.nvfp4_tensor_amax;
    m.global_scale = *opts.nvfp4_tensor_amax / codec::kNvfp4GlobalRange;
  }

  std::vector<float> row(static_cast<std::size_t>(k));
  auto gather_row = [&](int64_t r) {
    for (int64_t i = 0; i < k; ++i) {
      const auto idx = static_cast<std::size_t>(nk ? r * k + i : i * n + r);
      row[static_cast<std::size_t>(i)] = dense::load(w.data, w.dtype, idx);
    }
  };

  float tensor_scale = 1.0f;
  if (info.family == Family::fp8 && format.granularity == Granularity::tensor) {
    float amax = 0.0f;
    for (int64_t r = 0; r < n; ++r) {
      gather_row(r);
      amax = std::fmax(amax, amax_of(row.data(), k));
    }
    tensor_scale = fp8_scale_for(amax, format.scheme);
    std::memcpy(m.scales, &tensor_scale, sizeof tensor_scale);
  }

  for (int64_t r = 0; r < n; ++r) {
    gather_row(r);
    switch (info.family) {
      case Family::affine:
        quantize_affine_row(row.data(), r, p, m);
        break;
      case Family::microscaled:
        quantize_micro_row(row.data(), r, p, m, nv_encode, w.dtype);
        break;
      case Family::fp8: {
        float s = tensor_scale;
        if (format.granularity == Granularity::channel) {
          s = fp8_scale_for(amax_of(row.data(), k), format.scheme);
          std::memcpy(m.scales + static_cast<std::size_t>(r) * sizeof s, &s, sizeof s);
        }
        quantize_fp8_row(row.data(), r, s, p, m);
        break;
      }
      case Family::gguf:
        codec::gguf::encode_row(format.scheme, row.data(), k,
                                reinterpret_cast<uint8_t*>(m.codes) + r * p.row_bytes);
        break;
    }
  }
  return m;
}

}  // namespace quanta
