// GgufWriter: builds GGUF v2/v3 files in memory (tests, fixtures, fuzz seeds), in the layout
// gguf.cpp reads: header, key/values, tensor infos, padding to the alignment, data.
#include <cstring>
#include <fstream>

#include "io/common.hpp"
#include "quanta/io.hpp"

namespace quanta::io {

namespace {

void put_bytes(std::vector<std::byte>& out, const void* p, std::size_t n) {
  // resize + memcpy rather than insert: GCC 12 raises a false -Wstringop-overflow on insert.
  if (n == 0) return;
  const std::size_t old = out.size();
  out.resize(old + n);
  std::memcpy(out.data() + old, p, n);
}
template <class T>
void put(std::vector<std::byte>& out, T v) {
  put_bytes(out, &v, sizeof v);
}
void put_str(std::vector<std::byte>& out, std::string_view s) {
  put<uint64_t>(out, s.size());
  put_bytes(out, s.data(), s.size());
}

}  // namespace

void GgufWriter::add_uint(std::string_view key, GgufType type, uint64_t v) {
  put_str(kv_, key);
  put(kv_, static_cast<uint32_t>(type));
  switch (type) {
    case GgufType::u8:
    case GgufType::boolean:
      put(kv_, static_cast<uint8_t>(v));
      break;
    case GgufType::u16:
      put(kv_, static_cast<uint16_t>(v));
      break;
    case GgufType::u32:
      put(kv_, static_cast<uint32_t>(v));
      break;
    case GgufType::u64:
      put(kv_, v);
      break;
    default:
      throw Error(
          fmt::format("[quanta::gguf] writer: {} is not an unsigned type", gguf_type_name(type)));
  }
  ++kv_count_;
}

void GgufWriter::add_int(std::string_view key, GgufType type, int64_t v) {
  put_str(kv_, key);
  put(kv_, static_cast<uint32_t>(type));
  switch (type) {
    case GgufType::i8:
      put(kv_, static_cast<int8_t>(v));
      break;
    case GgufType::i16:
      put(kv_, static_cast<int16_t>(v));
      break;
    case GgufType::i32:
      put(kv_, static_cast<int32_t>(v));
      break;
    case GgufType::i64:
      put(kv_, v);
      break;
    default:
      throw Error(
          fmt::format("[quanta::gguf] writer: {} is not a signed type", gguf_type_name(type)));
  }
  ++kv_count_;
}

void GgufWriter::add_float(std::string_view key, GgufType type, double v) {
  if (type != GgufType::f32 && type != GgufType::f64)
    throw Error(fmt::format("[quanta::gguf] writer: {} is not a float type", gguf_type_name(type)));
  put_str(kv_, key);
  put(kv_, static_cast<uint32_t>(type));
  if (type == GgufType::f32)
    put(kv_, static_cast<float>(v));
  else
    put(kv_, v);
  ++kv_count_;
}

void GgufWriter::add_string(std::string_view key, std::string_view v) {
  put_str(kv_, key);
  put(kv_, static_cast<uint32_t>(GgufType::string));
  put_str(kv_, v);
  ++kv_count_;
}

void GgufWriter::add_array(std::string_view key, GgufType elem, uint64_t count,
                           std::span<const std::byte> encoded) {
  if (detail::gguf_scalar_size(elem) == 0 ||
      encoded.size() != count * detail::gguf_scalar_size(elem))
    throw Error("[quanta::gguf] writer: add_array takes numbers, count x element size bytes");
  put_str(kv_, key);
  put(kv_, static_cast<uint32_t>(GgufType::array));
  put(kv_, static_cast<uint32_t>(elem));
  put(kv_, count);
  put_bytes(kv_, encoded.data(), encoded.size());
  ++kv_count_;
}

void GgufWriter::add_string_array(std::string_view key, std::span<const std::string> v) {
  put_str(kv_, key);
  put(kv_, static_cast<uint32_t>(GgufType::array));
  put(kv_, static_cast<uint32_t>(GgufType::string));
  put<uint64_t>(kv_, v.size());
  for (const auto& s : v) put_str(kv_, s);
  ++kv_count_;
}

void GgufWriter::add_encoded(std::string_view key, std::span<const std::byte> type_and_value) {
  put_str(kv_, key);
  put_bytes(kv_, type_and_value.data(), type_and_value.size());
  ++kv_count_;
}

void GgufWriter::set_alignment(uint32_t a) {
  alignment_ = a;
  add_uint("general.alignment", GgufType::u32, a);
}

void GgufWriter::add_tensor(std::string_view name, uint32_t ggml_type, std::vector<int64_t> ne,
                            std::span<const std::byte> data) {
  tensors_.push_back({std::string(name), ggml_type, std::move(ne), {data.begin(), data.end()}});
}

std::vector<std::byte> GgufWriter::bytes() const {
  std::vector<std::byte> out;
  put_bytes(out, "GGUF", 4);
  put(out, version_);
  put<uint64_t>(out, tensors_.size());
  put(out, kv_count_);
  put_bytes(out, kv_.data(), kv_.size());
  const uint64_t a = alignment_ ? alignment_ : 1;
  auto pad = [a](uint64_t x) { return (x + a - 1) / a * a; };
  uint64_t offset = 0;
  for (const auto& t : tensors_) {
    put_str(out, t.name);
    put<uint32_t>(out, static_cast<uint32_t>(t.ne.size()));
    for (int64_t d : t.ne) put<uint64_t>(out, static_cast<uint64_t>(d));
    put(out, t.type);
    put(out, offset);
    offset = pad(offset + t.data.size());
  }
  out.resize(pad(out.size()));
  for (const auto& t : tensors_) {
    out.insert(out.end(), t.data.begin(), t.data.end());
    out.resize(pad(out.size()));
  }
  return out;
}

void GgufWriter::write(const std::filesystem::path& path) const {
  const auto b = bytes();
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
  if (!f) detail::fail("gguf", path.string(), "cannot write");
}

}  // namespace quanta::io
