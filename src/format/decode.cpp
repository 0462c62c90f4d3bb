#include "format/decode.hpp"

#include <algorithm>
#include <array>
#include <cstring>

#include "format/affine.hpp"
#include "format/dense.hpp"
#include "format/gguf.hpp"
#include "format/minifloat.hpp"

namespace quanta::codec {

namespace {

float element_value(ElementCode c, uint32_t q) {
  switch (c) {
    case ElementCode::uint:
      return static_cast<float>(q);
    case ElementCode::e2m1:
      return e2m1_to_float(static_cast<uint8_t>(q));
    case ElementCode::e4m3:
      return e4m3_to_float(static_cast<uint8_t>(q));
    case ElementCode::e5m2:
      return e5m2_to_float(static_cast<uint8_t>(q));
    case ElementCode::gguf_block:
      break;
  }
  return 0;
}

// element_value for every code (at most 8 bits), made once: a table lookup per element instead
// of the minifloat decoders' branches, which random codes mispredict (mxfp4 rows decoded at
// ~15 ns per element through them).
const float* element_table(ElementCode c) {
  using Table = std::array<float, 256>;
  static const std::array<Table, 4> tables = [] {
    std::array<Table, 4> t{};
    for (int e = 0; e < 4; ++e)
      for (uint32_t q = 0; q < 256; ++q)
        t[static_cast<std::size_t>(e)][q] = element_value(static_cast<ElementCode>(e), q);
    return t;
  }();
  return tables[static_cast<std::size_t>(c)].data();
}

}  // namespace

void decode_storage_row(const QuantizedMatrix& w, int64_t r, float* out, DType round_as) {
  const SchemeInfo& info = w.format.info();
  const Footprint fp = w.footprint();
  const int64_t rows = storage_rows(w), len = storage_cols(w);
  const std::size_t row_bytes = fp.code_bytes / static_cast<std::size_t>(rows);
  const auto* row =
      reinterpret_cast<const uint8_t*>(w.codes) + static_cast<std::size_t>(r) * row_bytes;

  if (info.family == Family::gguf) {
    for (int64_t b = 0; b < len / info.block_elems; ++b)
      gguf::decode_block(w.format.scheme, row + b * info.block_bytes, out + b * info.block_elems);
    return;
  }
  const bool nk = w.layout == Layout::nk;
  const int64_t G = w.format.group_size, groups = G > 0 ? w.k / G : 1;
  const float global = w.global_scale ? *w.global_scale : 1.0f;
  const float* values = element_table(info.code);
  const int bits = w.format.bits;
  // Runs of elements that share a scale: a group along an [N, K] row (the whole row for fp8),
  // single elements along a [K, N] row. Each run's scale (and bias) is read once; the rounding
  // is chosen once per row (`rnd`).
  const int64_t run = nk ? (G > 0 ? G : len) : 1;
  auto rows_with = [&](auto rnd) {
    for (int64_t i0 = 0; i0 < len; i0 += run) {
      const int64_t n = nk ? r : i0, k = nk ? i0 : r;
      const auto si = static_cast<std::size_t>(nk ? n * groups + k / std::max<int64_t>(G, 1)
                                                  : (k / std::max<int64_t>(G, 1)) * w.n + n);
      const int64_t i1 = i0 + run;
      switch (info.family) {
        case Family::affine: {
          const float s = dense::load(w.scales, w.scale_dtype, si);
          const float b = dense::load(w.biases, w.scale_dtype, si);
          for (int64_t i = i0; i < i1; ++i)  // MLX: multiply, then add, each rounded
            out[i] = rnd(rnd(s * values[affine_code(row, i, bits, len)]) + b);
          break;
        }
        case Family::microscaled: {
          const uint8_t sb = reinterpret_cast<const uint8_t*>(w.scales)[si];
          const float s = info.scale == ScaleEncoding::e8m0 ? e8m0_to_float(sb) : e4m3_to_float(sb);
          for (int64_t i = i0; i < i1; ++i)
            out[i] = rnd(values[affine_code(row, i, bits, len)] * s) * global;
          break;
        }
        case Family::fp8: {
          float s;
          const std::size_t idx =
              w.format.granularity == Granularity::channel ? static_cast<std::size_t>(n) : 0;
          std::memcpy(&s, w.scales + idx * sizeof s, sizeof s);
          for (int64_t i = i0; i < i1; ++i) out[i] = values[affine_code(row, i, bits, len)] * s;
          break;
        }
        case Family::gguf:
          break;
      }
    }
  };
  switch (round_as) {
    case DType::f32:
      return rows_with([](float v) { return v; });
    case DType::f16:
      return rows_with([](float v) { return dense::round_as(DType::f16, v); });
    case DType::bf16:
      return rows_with([](float v) { return dense::round_as(DType::bf16, v); });
  }
}

}  // namespace quanta::codec
