// GGUF v2/v3 (ggml/docs/gguf.md; ggml/src/gguf.cpp; gguf-py gguf_reader.py):
//   "GGUF" u32 version, u64 tensor_count, u64 kv_count,
//   kv_count x (string key, u32 type, value), tensor_count x (string name, u32 n_dims,
//   u64 ne[n_dims], u32 ggml_type, u64 offset), padding to general.alignment (default 32),
//   then the data section; tensor offsets are relative to it and multiples of the alignment.
// Strings are u64 length + bytes. Everything little-endian.
#include <algorithm>
#include <cstring>
#include <unordered_set>

#include "io/common.hpp"
#include "quanta/io.hpp"

namespace quanta::io {

namespace {

constexpr std::string_view kWhere = "gguf";
constexpr int kMaxArrayDepth = 8;
constexpr uint32_t kMaxDims = 4;  // GGML_MAX_DIMS

constexpr GgmlTypeInfo known(uint32_t id, std::string_view name, Scheme s) {
  const SchemeInfo& i = scheme_info(s);  // block geometry from the format table
  return {id, name, i.block_elems, i.block_bytes, s, std::nullopt};
}
constexpr GgmlTypeInfo dense(uint32_t id, std::string_view name, ElemType t, int bytes) {
  return {id, name, 1, bytes, std::nullopt, t};
}
constexpr GgmlTypeInfo other(uint32_t id, std::string_view name, int elems, int bytes) {
  return {id, name, elems, bytes, std::nullopt, std::nullopt};
}

// ggml/include/ggml.h `enum ggml_type` ids (never renumbered; gaps are removed types) and
// block sizes from ggml-common.h (gguf-py GGML_QUANT_SIZES agrees except Q8_1, which it
// lists as 40 bytes from an older f32 layout; ggml's block_q8_1 is 36).
constexpr GgmlTypeInfo kGgmlTypes[] = {
    dense(0, "F32", ElemType::f32, 4),    dense(1, "F16", ElemType::f16, 2),
    known(2, "Q4_0", Scheme::q4_0),       known(3, "Q4_1", Scheme::q4_1),
    known(6, "Q5_0", Scheme::q5_0),       known(7, "Q5_1", Scheme::q5_1),
    known(8, "Q8_0", Scheme::q8_0),       other(9, "Q8_1", 32, 36),
    known(10, "Q2_K", Scheme::q2_K),      known(11, "Q3_K", Scheme::q3_K),
    known(12, "Q4_K", Scheme::q4_K),      known(13, "Q5_K", Scheme::q5_K),
    known(14, "Q6_K", Scheme::q6_K),      other(15, "Q8_K", 256, 292),
    other(16, "IQ2_XXS", 256, 66),        other(17, "IQ2_XS", 256, 74),
    other(18, "IQ3_XXS", 256, 98),        other(19, "IQ1_S", 256, 50),
    other(20, "IQ4_NL", 32, 18),          other(21, "IQ3_S", 256, 110),
    other(22, "IQ2_S", 256, 82),          other(23, "IQ4_XS", 256, 136),
    dense(24, "I8", ElemType::i8, 1),     dense(25, "I16", ElemType::i16, 2),
    dense(26, "I32", ElemType::i32, 4),   dense(27, "I64", ElemType::i64, 8),
    dense(28, "F64", ElemType::f64, 8),   other(29, "IQ1_M", 256, 56),
    dense(30, "BF16", ElemType::bf16, 2), other(34, "TQ1_0", 256, 54),
    other(35, "TQ2_0", 256, 66),          other(39, "MXFP4", 32, 17),
    other(40, "NVFP4", 64, 36),           other(41, "Q1_0", 128, 18),
};

constexpr std::string_view kTypeNames[] = {"u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
                                           "bool", "string", "array", "u64", "i64", "f64"};

bool valid_type(uint32_t t) {
  return t <= 12;
}

}  // namespace

// Bytes of one scalar value; 0 for string / array.
std::size_t detail::gguf_scalar_size(GgufType t) {
  switch (t) {
    case GgufType::u8:
    case GgufType::i8:
    case GgufType::boolean:
      return 1;
    case GgufType::u16:
    case GgufType::i16:
      return 2;
    case GgufType::u32:
    case GgufType::i32:
    case GgufType::f32:
      return 4;
    case GgufType::u64:
    case GgufType::i64:
    case GgufType::f64:
      return 8;
    default:
      return 0;
  }
}

namespace {

using detail::gguf_scalar_size;

// Decodes one scalar of type t from p (size checked by the caller).
GgufValue decode_scalar(GgufType t, const std::byte* p) {
  GgufValue v;
  v.type = t;
  auto load = [&](auto x) {
    std::memcpy(&x, p, sizeof x);
    return x;
  };
  switch (t) {
    case GgufType::u8:
    case GgufType::boolean:
      v.u = load(uint8_t{});
      break;
    case GgufType::u16:
      v.u = load(uint16_t{});
      break;
    case GgufType::u32:
      v.u = load(uint32_t{});
      break;
    case GgufType::u64:
      v.u = load(uint64_t{});
      break;
    case GgufType::i8:
      v.i = load(int8_t{});
      break;
    case GgufType::i16:
      v.i = load(int16_t{});
      break;
    case GgufType::i32:
      v.i = load(int32_t{});
      break;
    case GgufType::i64:
      v.i = load(int64_t{});
      break;
    case GgufType::f32:
      v.f = load(float{});
      break;
    case GgufType::f64:
      v.f = load(double{});
      break;
    default:
      break;
  }
  return v;
}

class Cursor {
 public:
  Cursor(std::span<const std::byte> b, const std::string& file) : b_(b), file_(file) {}

  [[noreturn]] void bad(std::string msg) const { detail::fail(kWhere, file_, std::move(msg)); }
  std::size_t pos() const { return pos_; }
  std::size_t left() const { return b_.size() - pos_; }
  void need(uint64_t n, std::string_view what) const {
    if (n > left())
      bad(fmt::format("truncated: {} needs {} bytes at offset {}, the file has {} left", what, n,
                      pos_, left()));
  }
  std::span<const std::byte> take(uint64_t n, std::string_view what) {
    need(n, what);
    auto s = b_.subspan(pos_, static_cast<std::size_t>(n));
    pos_ += static_cast<std::size_t>(n);
    return s;
  }
  template <class T>
  T read(std::string_view what) {
    T v;
    std::memcpy(&v, take(sizeof v, what).data(), sizeof v);
    return v;
  }
  std::string_view str(std::string_view what) {
    const uint64_t n = read<uint64_t>(what);
    const auto s = take(n, what);
    return {reinterpret_cast<const char*>(s.data()), s.size()};
  }

 private:
  std::span<const std::byte> b_;
  const std::string& file_;
  std::size_t pos_ = 0;
};

GgufValue read_value(Cursor& c, GgufType t, int depth, const std::string& who) {
  if (const std::size_t sz = gguf_scalar_size(t)) {
    GgufValue v = decode_scalar(t, c.take(sz, who).data());
    if (t == GgufType::boolean && v.u > 1)
      c.bad(fmt::format("{}: bool value {} is not 0 or 1", who, v.u));
    return v;
  }
  GgufValue v;
  v.type = t;
  if (t == GgufType::string) {
    v.s = c.str(who);
    return v;
  }
  const uint32_t elem = c.read<uint32_t>(who);
  if (!valid_type(elem)) c.bad(fmt::format("{}: unknown array element type {}", who, elem));
  v.elem = static_cast<GgufType>(elem);
  v.count = c.read<uint64_t>(who);
  if (const std::size_t sz = gguf_scalar_size(v.elem)) {
    uint64_t bytes;
    if (!detail::mul_ok(v.count, sz, bytes))
      c.bad(fmt::format("{}: array of {} x {} bytes overflows", who, v.count, sz));
    v.raw = c.take(bytes, who);
    return v;
  }
  if (v.elem == GgufType::array && depth >= kMaxArrayDepth)
    c.bad(fmt::format("{}: arrays nested deeper than {} levels", who, kMaxArrayDepth));
  // Each string item takes >= 8 bytes, each array item >= 12: bound the count before looping.
  const uint64_t min_item = v.elem == GgufType::string ? 8 : 12;
  if (v.count > c.left() / min_item)
    c.bad(fmt::format("truncated: {} declares {} items but only {} bytes are left", who, v.count,
                      c.left()));
  v.items.reserve(static_cast<std::size_t>(v.count));
  for (uint64_t i = 0; i < v.count; ++i) v.items.push_back(read_value(c, v.elem, depth + 1, who));
  return v;
}

std::string quoted(std::string_view s) {
  return fmt::format("\"{}\"", detail::printable(s, 60));
}

}  // namespace

std::string_view gguf_type_name(GgufType t) {
  const auto i = static_cast<uint32_t>(t);
  return valid_type(i) ? kTypeNames[i] : "?";
}

const GgmlTypeInfo* ggml_type_info(uint32_t id) {
  for (const auto& t : kGgmlTypes)
    if (t.id == id) return &t;
  return nullptr;
}

std::span<const GgmlTypeInfo> ggml_types() {
  return kGgmlTypes;
}

// ---- values ----------------------------------------------------------------------------------

GgufValue GgufValue::at(uint64_t index) const {
  if (type != GgufType::array || index >= count)
    throw Error(fmt::format("[quanta::gguf] value: index {} outside an array of {}", index,
                            type == GgufType::array ? count : 0));
  if (const std::size_t sz = gguf_scalar_size(elem))
    return decode_scalar(elem, raw.data() + static_cast<std::size_t>(index) * sz);
  return items[static_cast<std::size_t>(index)];
}

std::optional<uint64_t> GgufValue::as_uint() const {
  switch (type) {
    case GgufType::u8:
    case GgufType::u16:
    case GgufType::u32:
    case GgufType::u64:
    case GgufType::boolean:
      return u;
    case GgufType::i8:
    case GgufType::i16:
    case GgufType::i32:
    case GgufType::i64:
      if (i >= 0) return static_cast<uint64_t>(i);
      return std::nullopt;
    default:
      return std::nullopt;
  }
}

std::string GgufValue::summary(std::size_t max_items) const {
  switch (type) {
    case GgufType::u8:
    case GgufType::u16:
    case GgufType::u32:
    case GgufType::u64:
      return fmt::format("{}", u);
    case GgufType::i8:
    case GgufType::i16:
    case GgufType::i32:
    case GgufType::i64:
      return fmt::format("{}", i);
    case GgufType::f32:
    case GgufType::f64:
      return fmt::format("{:g}", f);
    case GgufType::boolean:
      return u ? "true" : "false";
    case GgufType::string:
      return quoted(s);
    case GgufType::array: {
      std::string out = fmt::format("[{} x {}", gguf_type_name(elem), count);
      for (uint64_t k = 0; k < count && k < max_items; ++k)
        out += (k ? ", " : ": ") + at(k).summary(max_items);
      if (count > max_items) out += ", ...";
      return out + "]";
    }
  }
  return "?";
}

int64_t GgufTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : ne) n *= d;
  return n;
}

// ---- reader ----------------------------------------------------------------------------------

GgufFile GgufFile::open(const std::filesystem::path& path) {
  return parse(MappedFile::open(path));
}

GgufFile GgufFile::parse(std::shared_ptr<const MappedFile> file) {
  const std::string& name = file->name();
  Cursor c(file->bytes(), name);
  GgufFile g;
  if (file->bytes().size() < 4 || std::memcmp(file->bytes().data(), "GGUF", 4) != 0) {
    const auto head = file->bytes().first(std::min<std::size_t>(4, file->bytes().size()));
    c.bad(
        fmt::format("wrong magic '{}': not a GGUF file",
                    detail::printable({reinterpret_cast<const char*>(head.data()), head.size()})));
  }
  c.take(4, "magic");
  g.version_ = c.read<uint32_t>("version");
  if (g.version_ != 2 && g.version_ != 3) {
    const uint32_t swapped = __builtin_bswap32(g.version_);
    if (swapped >= 1 && swapped <= 3)
      c.bad(fmt::format("big-endian GGUF (version {}) is not supported", swapped));
    if (g.version_ == 1) c.bad("GGUF version 1 is not supported (2 and 3 are)");
    c.bad(fmt::format("unknown GGUF version {} (2 and 3 are supported)", g.version_));
  }
  const uint64_t n_tensors = c.read<uint64_t>("tensor count");
  const uint64_t n_kv = c.read<uint64_t>("metadata count");
  // Smallest possible entries: a kv is 8 + 4 + 1 bytes, a tensor info 8 + 4 + 8 + 4 + 8.
  if (n_kv > c.left() / 13)
    c.bad(fmt::format("truncated: {} metadata entries cannot fit in {} bytes", n_kv, c.left()));
  if (n_tensors > c.left() / 32)
    c.bad(fmt::format("truncated: {} tensor infos cannot fit in {} bytes", n_tensors, c.left()));

  std::unordered_set<std::string_view> keys;
  g.metadata_.reserve(static_cast<std::size_t>(n_kv));
  for (uint64_t i = 0; i < n_kv; ++i) {
    const std::string_view key = c.str(fmt::format("metadata key {}", i));
    if (key.empty() || !detail::valid_utf8(key))
      c.bad(fmt::format("metadata key {} '{}' is empty or not UTF-8", i, detail::printable(key)));
    if (!keys.insert(key).second)
      c.bad(fmt::format("metadata key '{}' appears twice", detail::printable(key)));
    const std::string who = fmt::format("metadata '{}'", detail::printable(key));
    const uint32_t type = c.read<uint32_t>(who);
    if (!valid_type(type)) c.bad(fmt::format("{}: unknown value type {}", who, type));
    g.metadata_.emplace_back(key, read_value(c, static_cast<GgufType>(type), 0, who));
    if (key == "general.alignment") {
      const GgufValue& a = g.metadata_.back().second;
      if (a.type != GgufType::u32 || a.u == 0 || (a.u & (a.u - 1)) != 0)
        c.bad(fmt::format("general.alignment must be a u32 power of two, found {} {}",
                          gguf_type_name(a.type), a.summary()));
      g.alignment_ = a.u;
    }
  }

  std::unordered_set<std::string_view> names;
  std::vector<uint64_t> sizes;
  g.tensors_.reserve(static_cast<std::size_t>(n_tensors));
  for (uint64_t i = 0; i < n_tensors; ++i) {
    GgufTensor t;
    t.name = c.str(fmt::format("tensor info {}", i));
    if (!detail::valid_utf8(t.name))
      c.bad(fmt::format("tensor {} name '{}' is not UTF-8", i, detail::printable(t.name)));
    if (!names.insert(t.name).second)
      c.bad(fmt::format("tensor '{}' appears twice", detail::printable(t.name)));
    const std::string who = fmt::format("tensor '{}'", detail::printable(t.name));
    const uint32_t n_dims = c.read<uint32_t>(who);
    if (n_dims < 1 || n_dims > kMaxDims)
      c.bad(fmt::format("{}: {} dimensions (1 to {} allowed)", who, n_dims, kMaxDims));
    // The product of the nonzero dims must fit too: with an empty axis the element count
    // is 0, but partial products (rows x experts, ...) must still not overflow.
    uint64_t numel = 1, span = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      const uint64_t ne = c.read<uint64_t>(who);
      if (ne > static_cast<uint64_t>(INT64_MAX) || !detail::mul_ok(numel, ne, numel) ||
          !detail::mul_ok(span, std::max<uint64_t>(ne, 1), span) ||
          span > static_cast<uint64_t>(INT64_MAX))
        c.bad(fmt::format("{}: dimension {} = {} makes the element count overflow", who, d, ne));
      t.ne.push_back(static_cast<int64_t>(ne));
    }
    const uint32_t type = c.read<uint32_t>(who);
    t.type = ggml_type_info(type);
    if (!t.type) c.bad(fmt::format("{}: unknown ggml type id {}", who, type));
    if (t.ne[0] % t.type->block_elems != 0)
      c.bad(fmt::format("{}: row length ne[0] = {} is not a multiple of the {} block ({})", who,
                        t.ne[0], t.type->name, t.type->block_elems));
    uint64_t bytes;
    if (!detail::mul_ok(numel / static_cast<uint64_t>(t.type->block_elems),
                        static_cast<uint64_t>(t.type->block_bytes), bytes))
      c.bad(fmt::format("{}: byte size overflows", who));
    t.offset = c.read<uint64_t>(who);
    if (t.offset % g.alignment_ != 0)
      c.bad(fmt::format("{}: data offset {} is not a multiple of the alignment {}", who, t.offset,
                        g.alignment_));
    sizes.push_back(bytes);
    g.tensors_.push_back(std::move(t));
  }

  // The data section starts at the next multiple of the alignment.
  const uint64_t pos = c.pos(), size = file->bytes().size();
  uint64_t start;
  if (!detail::add_ok(pos, g.alignment_ - 1, start)) c.bad("data section offset overflows");
  start -= start % g.alignment_;
  std::vector<std::size_t> order(g.tensors_.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  for (std::size_t i : order) {
    GgufTensor& t = g.tensors_[i];
    uint64_t begin, end;
    if (!detail::add_ok(start, t.offset, begin) || !detail::add_ok(begin, sizes[i], end) ||
        end > size)
      c.bad(
          fmt::format("tensor '{}': {} bytes at data offset {} end past the end of the file "
                      "({} bytes, data section at {})",
                      detail::printable(t.name), sizes[i], t.offset, size, start));
    t.data =
        file->bytes().subspan(static_cast<std::size_t>(begin), static_cast<std::size_t>(sizes[i]));
  }
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return g.tensors_[a].offset < g.tensors_[b].offset;
  });
  for (std::size_t k = 1; k < order.size(); ++k) {
    const GgufTensor &a = g.tensors_[order[k - 1]], &b = g.tensors_[order[k]];
    if (a.offset + sizes[order[k - 1]] > b.offset && sizes[order[k]] > 0)
      c.bad(fmt::format("tensors '{}' and '{}' overlap in the data section",
                        detail::printable(a.name), detail::printable(b.name)));
  }
  g.file_ = std::move(file);
  return g;
}

const GgufValue* GgufFile::find(std::string_view key) const {
  for (const auto& [k, v] : metadata_)
    if (k == key) return &v;
  return nullptr;
}

const GgufTensor* GgufFile::find_tensor(std::string_view name) const {
  for (const auto& t : tensors_)
    if (t.name == name) return &t;
  return nullptr;
}

QuantizedMatrix GgufFile::matrix(const GgufTensor& t) const {
  const std::string who = fmt::format("tensor '{}'", detail::printable(t.name));
  if (t.type->dense)
    detail::fail(kWhere, name(),
                 fmt::format("{} is dense {}; read its bytes, it is not a quantized matrix", who,
                             t.type->name));
  if (!t.type->scheme)
    throw NotSupported(fmt::format(
        "[quanta::gguf] {}: {} is {}, which quanta lists but does not decode (decoded: Q4_0, "
        "Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K)",
        name(), who, t.type->name));
  const int64_t k = t.ne[0], n = t.ne.size() > 1 ? t.ne[1] : 1;
  int64_t batch = 1;
  for (std::size_t d = 2; d < t.ne.size(); ++d) batch *= t.ne[d];
  try {
    QuantizedMatrix q = QuantizedMatrix::wrap(
        Format::gguf(*t.type->scheme), n, k, DType::f16, Layout::nk, Location::host,
        std::span<std::byte>(const_cast<std::byte*>(t.data.data()), t.data.size()), {}, {}, batch);
    q.keepalive = std::shared_ptr<void>(file_, nullptr);  // read-only: never written
    return q;
  } catch (const Error& e) {
    detail::fail(kWhere, name(), fmt::format("{}: {}", who, e.what()));
  }
}

}  // namespace quanta::io
