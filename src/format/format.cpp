// Format names, parsing, validation and the list of every valid format, all read off kSchemes.
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <vector>

#include "quanta/error.hpp"
#include "quanta/format.hpp"

namespace quanta {

std::optional<DType> parse_dtype(std::string_view name) {
  for (DType t : kAllDTypes)
    if (dtype_name(t) == name) return t;
  return std::nullopt;
}

std::optional<Scheme> parse_scheme(std::string_view name) {
  for (const SchemeInfo& i : kSchemes)
    if (i.name == name) return i.scheme;
  return std::nullopt;
}

namespace {

std::string_view granularity_name(Granularity g) {
  switch (g) {
    case Granularity::group:
      return "group";
    case Granularity::channel:
      return "channel";
    case Granularity::tensor:
      return "tensor";
  }
  return "?";
}

std::string join(std::span<const int> v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s;
}

bool contains(std::span<const int> v, int x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

std::optional<int> to_int(std::string_view s) {
  int v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

}  // namespace

std::string Format::name() const {
  const SchemeInfo& i = info();
  switch (i.family) {
    case Family::affine:
      return fmt::format("affine-{}b-g{}", bits, group_size);
    case Family::fp8:
      return fmt::format("{}-{}", i.name, granularity_name(granularity));
    default:
      return std::string(i.name);
  }
}

double Format::bits_per_weight(DType scale_dtype) const {
  const SchemeInfo& i = info();
  switch (i.family) {
    case Family::affine:
      return bits + 2.0 * 8.0 * static_cast<double>(dtype_size(scale_dtype)) / group_size;
    case Family::microscaled:
      return bits + 8.0 / group_size;
    case Family::fp8:
      return 8.0;  // plus one f32 per row or per tensor
    case Family::gguf:
      return 8.0 * i.block_bytes / i.block_elems;
  }
  return 0;
}

void validate_format(const Format& f, std::string_view op, std::string_view arg) {
  if (static_cast<size_t>(f.scheme) >= std::size(kSchemes))
    throw Error(
        fmt::format("[quanta::{}] {}: unknown scheme id {}", op, arg, static_cast<int>(f.scheme)));
  const SchemeInfo& i = f.info();
  if (!contains(i.bits, f.bits))
    throw Error(fmt::format("[quanta::{}] {}: bits = {} is not supported by {} (accepted: {})", op,
                            arg, f.bits, i.name, join(i.bits)));
  if (!contains(i.groups, f.group_size))
    throw Error(
        fmt::format("[quanta::{}] {}: group_size = {} is not supported by {} (accepted: {})", op,
                    arg, f.group_size, i.name, join(i.groups)));
  const bool per_group = i.family != Family::fp8;
  if (per_group && f.granularity != Granularity::group)
    throw Error(fmt::format("[quanta::{}] {}: {} scales are per group, not per {}", op, arg, i.name,
                            granularity_name(f.granularity)));
  if (!per_group && f.granularity == Granularity::group)
    throw Error(fmt::format(
        "[quanta::{}] {}: {} weights take a per-channel or per-tensor f32 scale, not per group", op,
        arg, i.name));
}

std::optional<Format> parse_format(std::string_view text) {
  for (const Format& f : all_formats())
    if (f.name() == text) return f;
  // Also accept "affine:BITS:GROUP" and "affine-BITS" (group 64, MLX's default).
  if (text.starts_with("affine:")) {
    auto rest = text.substr(7);
    auto colon = rest.find(':');
    auto b = to_int(rest.substr(0, colon));
    auto g =
        colon == std::string_view::npos ? std::optional<int>(64) : to_int(rest.substr(colon + 1));
    if (b && g) {
      Format f = Format::affine(*b, *g);
      if (contains(f.info().bits, *b) && contains(f.info().groups, *g)) return f;
    }
  }
  if (auto s = parse_scheme(text)) {  // a bare scheme name: its default parameters
    if (*s == Scheme::affine) return Format::affine(4, 64);
    if (*s == Scheme::fp8_e4m3) return Format::fp8_e4m3();
    if (*s == Scheme::fp8_e5m2) return Format::fp8_e5m2();
    const SchemeInfo& i = scheme_info(*s);
    return Format{*s, i.bits[0], i.groups[0], Granularity::group};
  }
  return std::nullopt;
}

std::span<const Format> all_formats() {
  static const std::vector<Format> formats = [] {
    std::vector<Format> v;
    for (const SchemeInfo& i : kSchemes) {
      if (i.family == Family::fp8) {
        v.push_back({i.scheme, 8, 0, Granularity::channel});
        v.push_back({i.scheme, 8, 0, Granularity::tensor});
        continue;
      }
      for (int b : i.bits)
        for (int g : i.groups) v.push_back({i.scheme, b, g, Granularity::group});
    }
    return v;
  }();
  return formats;
}

std::string_view element_code_name(ElementCode c) {
  switch (c) {
    case ElementCode::uint:
      return "uint";
    case ElementCode::e2m1:
      return "E2M1";
    case ElementCode::e4m3:
      return "E4M3FN";
    case ElementCode::e5m2:
      return "E5M2";
    case ElementCode::gguf_block:
      return "block";
  }
  return "?";
}

std::string_view scale_encoding_name(ScaleEncoding s) {
  switch (s) {
    case ScaleEncoding::activation_dtype:
      return "f32/f16/bf16 (= x)";
    case ScaleEncoding::e8m0:
      return "E8M0";
    case ScaleEncoding::e4m3:
      return "E4M3FN";
    case ScaleEncoding::f32:
      return "f32 per row or tensor";
    case ScaleEncoding::in_block:
      return "f16 in block";
  }
  return "?";
}

namespace {

std::string bpw_list(const SchemeInfo& i) {
  // Bits per weight for each accepted (bits, group); affine with f16 scales.
  std::string s;
  for (int b : i.bits)
    for (int g : i.groups) {
      const Format f{i.scheme, b, g,
                     i.family == Family::fp8 ? Granularity::channel : Granularity::group};
      if (!s.empty()) s += ", ";
      s += fmt::format("{:g}", f.bits_per_weight(DType::f16));
    }
  return s;
}

}  // namespace

std::string formats_markdown_table() {
  std::string t =
      "| scheme | bits | group | element | scale | bias | bits/weight | [K,N] | encode | bit-exact "
      "with |\n|---|---|---|---|---|---|---|---|---|---|\n";
  for (const SchemeInfo& i : kSchemes)
    t += fmt::format("| `{}` | {} | {} | {} | {}{} | {} | {} | {} | {} | {} |\n", i.name,
                     join(i.bits), i.family == Family::fp8 ? std::string("-") : join(i.groups),
                     element_code_name(i.code), scale_encoding_name(i.scale),
                     i.global_scale ? " + optional f32 global" : "", i.bias ? "yes" : "no",
                     bpw_list(i), i.kn_layout ? "yes" : "no", i.encode ? "yes" : "decode only",
                     i.owner_ref);
  return t;
}

}  // namespace quanta
