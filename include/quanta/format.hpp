// How a quantized matrix is stored. Every fact about a scheme lives in one table
// (kSchemes, below); validation, dispatch, the bench's case list, `quanta formats` and
// docs/FORMATS.md all read it.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "quanta/dtype.hpp"

namespace quanta {

// Ids are stable: they may be written into files and bench output.
enum class Scheme : uint8_t {
  affine = 0,    // MLX mode "affine": w = scale * q + bias, q unsigned 2..8 bits
  mxfp4 = 1,     // MLX/OCP: E2M1 elements, E8M0 scale per 32
  mxfp8 = 2,     // MLX/OCP: E4M3 elements, E8M0 scale per 32
  nvfp4 = 3,     // MLX/NVIDIA: E2M1 elements, E4M3 scale per 16, optional f32 global scale
  fp8_e4m3 = 4,  // OCP E4M3FN weights, f32 scale per tensor or per output channel
  fp8_e5m2 = 5,  // OCP E5M2 weights, same scales
  q4_0 = 6,      // GGUF blocks (ggml-common.h) from here on
  q4_1 = 7,
  q5_0 = 8,
  q5_1 = 9,
  q8_0 = 10,
  q2_K = 11,
  q3_K = 12,
  q4_K = 13,
  q5_K = 14,
  q6_K = 15,
};

enum class Family : uint8_t { affine, microscaled, fp8, gguf };
enum class ElementCode : uint8_t { uint, e2m1, e4m3, e5m2, gguf_block };
enum class ScaleEncoding : uint8_t {
  activation_dtype,  // affine: scales and biases in the activation dtype (MLX)
  e8m0,              // one byte, 2^(e-127)
  e4m3,              // one OCP E4M3FN byte
  f32,               // fp8 weights: f32 per tensor or per channel
  in_block,          // GGUF: scales live inside each block
};
// Which elements share one scale. fp8 weights use `channel` (one f32 per output row n)
// or `tensor`; everything else uses `group` (group_size consecutive elements along K).
enum class Granularity : uint8_t { group, channel, tensor };
enum class Owner : uint8_t { mlx, ocp, ggml };

struct SchemeInfo {
  Scheme scheme;
  std::string_view name;  // the owner's spelling
  Family family;
  ElementCode code;
  ScaleEncoding scale;
  std::span<const int> bits;    // accepted bit widths
  std::span<const int> groups;  // accepted group sizes; {0} for channel/tensor scales
  bool bias;                    // a per-group bias (affine)
  bool global_scale;            // an optional f32 per-tensor multiplier (nvfp4)
  bool kn_layout;               // the [K, N] vecmat layout is supported
  bool encode;                  // quanta can quantize to this scheme
  int block_elems;              // GGUF block: elements and bytes (0 for packed schemes)
  int block_bytes;
  Owner owner;
  std::string_view owner_ref;  // what the codec is bit-exact with
};

namespace detail {
inline constexpr int kAffineBits[] = {2, 3, 4, 5, 6, 8};
inline constexpr int kAffineGroups[] = {32, 64, 128};
inline constexpr int k4[] = {4};
inline constexpr int k8[] = {8};
inline constexpr int k2[] = {2};
inline constexpr int k3[] = {3};
inline constexpr int k5[] = {5};
inline constexpr int k6[] = {6};
inline constexpr int k16[] = {16};
inline constexpr int k32[] = {32};
inline constexpr int k256[] = {256};
inline constexpr int kNoGroup[] = {0};
}  // namespace detail

// clang-format off
inline constexpr SchemeInfo kSchemes[] = {
  // scheme            name        family                  code                 scale                           bits                 groups                 bias   gscale kn     encode blk  bytes owner        owner_ref
  {Scheme::affine,   "affine",   Family::affine,      ElementCode::uint,   ScaleEncoding::activation_dtype, detail::kAffineBits, detail::kAffineGroups, true,  false, true,  true,  0,   0,   Owner::mlx,  "mlx.core.quantize(mode='affine')"},
  {Scheme::mxfp4,    "mxfp4",    Family::microscaled, ElementCode::e2m1,   ScaleEncoding::e8m0,             detail::k4,          detail::k32,           false, false, true,  true,  0,   0,   Owner::mlx,  "mlx.core.quantize(mode='mxfp4')"},
  {Scheme::mxfp8,    "mxfp8",    Family::microscaled, ElementCode::e4m3,   ScaleEncoding::e8m0,             detail::k8,          detail::k32,           false, false, true,  true,  0,   0,   Owner::mlx,  "mlx.core.quantize(mode='mxfp8')"},
  {Scheme::nvfp4,    "nvfp4",    Family::microscaled, ElementCode::e2m1,   ScaleEncoding::e4m3,             detail::k4,          detail::k16,           false, true,  true,  true,  0,   0,   Owner::mlx,  "mlx.core.quantize(mode='nvfp4')"},
  {Scheme::fp8_e4m3, "e4m3",     Family::fp8,         ElementCode::e4m3,   ScaleEncoding::f32,              detail::k8,          detail::kNoGroup,      false, false, true,  true,  0,   0,   Owner::ocp,  "OCP 8-bit FP v1.0 E4M3FN (ml_dtypes.float8_e4m3fn)"},
  {Scheme::fp8_e5m2, "e5m2",     Family::fp8,         ElementCode::e5m2,   ScaleEncoding::f32,              detail::k8,          detail::kNoGroup,      false, false, true,  true,  0,   0,   Owner::ocp,  "OCP 8-bit FP v1.0 E5M2 (ml_dtypes.float8_e5m2)"},
  {Scheme::q4_0,     "q4_0",     Family::gguf,        ElementCode::gguf_block, ScaleEncoding::in_block,     detail::k4,          detail::k32,           false, false, false, true,  32,  18,  Owner::ggml, "ggml quantize_row_q4_0_ref / gguf-py"},
  {Scheme::q4_1,     "q4_1",     Family::gguf,        ElementCode::gguf_block, ScaleEncoding::in_block,     detail::k4,          detail::k32,           false, false, false, true,  32,  20,  Owner::ggml, "ggml quantize_row_q4_1_ref / gguf-py"},
  {Scheme::q5_0,     "q5_0",     Family::gguf,        ElementCode::gguf_block, ScaleEncoding::in_block,     detail::k5,          detail::k32,           false, false, false, true,  32,  22,  Owner::ggml, "ggml quantize_row_q5_0_ref / gguf-py"},
  {Scheme::q5_1,     "q5_1",     Family::gguf,        ElementCode::gguf_block, ScaleEncoding::in_block,     detail::k5,          detail::k32,           false, false, false, true,  32,  24,  Owner::ggml, "ggml quantize_row_q5_1_ref / gguf-py"},
  {Scheme::q8_0,     "q8_0",     Family::gguf,        ElementCode::gguf_block, ScaleEncoding::in_block,     detail::k8,          detail::k32,           false, false, false, true,  32,  34,  Owner::ggml, "ggml quantize_row_q8_0_ref / gguf-py"},
  {Scheme::q2_K,     "q2_K",     Family::gguf,        ElementCode::gguf_block, ScaleEncoding::in_block,     detail::k2,          detail::k256,          false, false, false, false, 256, 84,  Owner::ggml, "ggml dequantize_row_q2_K / gguf-py"},
  {Scheme::q3_K,     "q3_K",     Family::gguf,        ElementCode::gguf_block, ScaleEncoding::in_block,     detail::k3,          detail::k256,          false, false, false, false, 256, 110, Owner::ggml, "ggml dequantize_row_q3_K / gguf-py"},
  {Scheme::q4_K,     "q4_K",     Family::gguf,        ElementCode::gguf_block, ScaleEncoding::in_block,     detail::k4,          detail::k256,          false, false, false, false, 256, 144, Owner::ggml, "ggml dequantize_row_q4_K / gguf-py"},
  {Scheme::q5_K,     "q5_K",     Family::gguf,        ElementCode::gguf_block, ScaleEncoding::in_block,     detail::k5,          detail::k256,          false, false, false, false, 256, 176, Owner::ggml, "ggml dequantize_row_q5_K / gguf-py"},
  {Scheme::q6_K,     "q6_K",     Family::gguf,        ElementCode::gguf_block, ScaleEncoding::in_block,     detail::k6,          detail::k256,          false, false, false, false, 256, 210, Owner::ggml, "ggml dequantize_row_q6_K / gguf-py"},
};
// clang-format on

constexpr const SchemeInfo& scheme_info(Scheme s) {
  return kSchemes[static_cast<int>(s)];
}
std::optional<Scheme> parse_scheme(std::string_view name);

// A complete storage format: scheme plus its parameters.
struct Format {
  Scheme scheme = Scheme::affine;
  int bits = 4;
  int group_size = 64;  // elements along K sharing one scale; 0 for fp8 channel/tensor scales
  Granularity granularity = Granularity::group;

  static constexpr Format affine(int bits, int group_size = 64) {
    return {Scheme::affine, bits, group_size, Granularity::group};
  }
  static constexpr Format mxfp4() { return {Scheme::mxfp4, 4, 32, Granularity::group}; }
  static constexpr Format mxfp8() { return {Scheme::mxfp8, 8, 32, Granularity::group}; }
  static constexpr Format nvfp4() { return {Scheme::nvfp4, 4, 16, Granularity::group}; }
  static constexpr Format fp8_e4m3(Granularity g = Granularity::channel) {
    return {Scheme::fp8_e4m3, 8, 0, g};
  }
  static constexpr Format fp8_e5m2(Granularity g = Granularity::channel) {
    return {Scheme::fp8_e5m2, 8, 0, g};
  }
  // The one valid Format of a GGUF block type.
  static constexpr Format gguf(Scheme s) {
    const SchemeInfo& i = scheme_info(s);
    return {s, i.bits[0], i.block_elems, Granularity::group};
  }

  constexpr const SchemeInfo& info() const { return scheme_info(scheme); }
  constexpr bool operator==(const Format&) const = default;

  // Readable and parseable: "affine-4b-g64", "mxfp4", "nvfp4", "e4m3-channel", "q4_K".
  std::string name() const;
  // Storage bits per weight, scales and biases included (scale_dtype matters for affine).
  double bits_per_weight(DType scale_dtype = DType::f16) const;
};

// Throws quanta::Error naming `op` and `arg` if the format is not one the table accepts.
void validate_format(const Format& f, std::string_view op, std::string_view arg);
// Inverse of Format::name(); nullopt if the text names no valid format.
std::optional<Format> parse_format(std::string_view text);

// Every valid format, in table order: all affine bits x groups, then the rest.
std::span<const Format> all_formats();

std::string_view element_code_name(ElementCode c);
std::string_view scale_encoding_name(ScaleEncoding s);

// A markdown table of kSchemes (docs/FORMATS.md embeds it; a test keeps them in step).
std::string formats_markdown_table();

}  // namespace quanta
