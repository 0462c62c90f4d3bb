#include "format/decode.hpp"

#include <algorithm>
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
  for (int64_t i = 0; i < len; ++i) {
    const float v = element_value(info.code, affine_code(row, i, w.format.bits, len));
    const int64_t n = nk ? r : i, k = nk ? i : r;
    const auto si = static_cast<std::size_t>(nk ? n * groups + k / std::max<int64_t>(G, 1)
                                                : (k / std::max<int64_t>(G, 1)) * w.n + n);
    switch (info.family) {
      case Family::affine: {
        const float s = dense::load(w.scales, w.scale_dtype, si);
        const float b = dense::load(w.biases, w.scale_dtype, si);
        const float sq = dense::round_as(round_as, s * v);  // MLX: multiply, then add
        out[i] = dense::round_as(round_as, sq + b);
        break;
      }
      case Family::microscaled: {
        const uint8_t sb = reinterpret_cast<const uint8_t*>(w.scales)[si];
        const float s = info.scale == ScaleEncoding::e8m0 ? e8m0_to_float(sb) : e4m3_to_float(sb);
        out[i] = dense::round_as(round_as, v * s) * global;
        break;
      }
      case Family::fp8: {
        float s;
        const std::size_t idx =
            w.format.granularity == Granularity::channel ? static_cast<std::size_t>(n) : 0;
        std::memcpy(&s, w.scales + idx * sizeof s, sizeof s);
        out[i] = v * s;
        break;
      }
      case Family::gguf:
        break;
    }
  }
}

}  // namespace quanta::codec
