// safetensors: an 8-byte little-endian header length N, N bytes of UTF-8 JSON
// ({"name": {"dtype", "shape", "data_offsets": [begin, end)}, "__metadata__": {...}}), then
// the data section. Validation follows the reference implementation
// (huggingface/safetensors safetensors/src/tensor.rs `read_metadata`, `Metadata::validate`).
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>
#include <unordered_map>

#include "io/common.hpp"
#include "quanta/io.hpp"

namespace quanta::io {

namespace {

constexpr std::string_view kWhere = "safetensors";
constexpr uint64_t kMaxHeader = 100'000'000;  // the reference's MAX_HEADER_SIZE
constexpr int kMaxJsonDepth = 16;             // tensor entries sit at depth 3
constexpr std::size_t kMaxRank = 32;

using nlohmann::json;

[[noreturn]] void bad(const std::string& file, std::string msg) {
  detail::fail(kWhere, file, std::move(msg));
}

uint64_t json_uint(const json& v, const std::string& file, const std::string& what) {
  if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0))
    bad(file, fmt::format("{}: {} is not a non-negative integer", what,
                          detail::printable(v.dump(-1, ' ', true))));
  return v.get<uint64_t>();
}

struct Parsed {
  TensorInfo info;
  uint64_t begin, end;
};

Parsed parse_entry(const std::string& key, const json& v, std::span<const std::byte> data,
                   const std::string& file) {
  const std::string who = fmt::format("tensor '{}'", detail::printable(key));
  if (!v.is_object()) bad(file, who + ": entry is not a JSON object");
  const auto dt = v.find("dtype"), sh = v.find("shape"), off = v.find("data_offsets");
  if (dt == v.end() || sh == v.end() || off == v.end())
    bad(file, who + ": entry needs \"dtype\", \"shape\" and \"data_offsets\"");
  if (!dt->is_string()) bad(file, who + ": dtype is not a string");
  const auto type = parse_elem_type(dt->get_ref<const std::string&>());
  if (!type)
    bad(file, fmt::format("{}: unknown dtype '{}' (known: BOOL, U8, I8, F8_E5M2, F8_E4M3, "
                          "F8_E8M0, I16, U16, F16, BF16, I32, U32, F32, F64, I64, U64)",
                          who, detail::printable(dt->get_ref<const std::string&>())));
  if (!sh->is_array()) bad(file, who + ": shape is not an array");
  if (sh->size() > kMaxRank)
    bad(file, fmt::format("{}: shape has {} axes (at most {})", who, sh->size(), kMaxRank));
  Parsed p;
  p.info.name = key;
  p.info.type = *type;
  p.info.file = file;
  uint64_t numel = 1, span = 1;  // span: product of the nonzero dims (partial products fit)
  for (const json& d : *sh) {
    const uint64_t dim = json_uint(d, file, who + " shape");
    if (dim > static_cast<uint64_t>(INT64_MAX))
      bad(file, fmt::format("{}: dimension {} is absurd", who, dim));
    if (!detail::mul_ok(numel, dim, numel) ||
        !detail::mul_ok(span, std::max<uint64_t>(dim, 1), span) ||
        span > static_cast<uint64_t>(INT64_MAX))
      bad(file, who + ": the element count of shape overflows 64 bits");
    p.info.shape.push_back(static_cast<int64_t>(dim));
  }
  uint64_t nbytes;
  if (numel > static_cast<uint64_t>(INT64_MAX) ||
      !detail::mul_ok(numel, elem_type_size(*type), nbytes))
    bad(file, who + ": shape x dtype size overflows 64 bits");
  if (!off->is_array() || off->size() != 2)
    bad(file, who + ": data_offsets is not an array of two integers");
  p.begin = json_uint((*off)[0], file, who + " data_offsets");
  p.end = json_uint((*off)[1], file, who + " data_offsets");
  if (p.end < p.begin)
    bad(file, fmt::format("{}: data_offsets [{}, {}) end before they begin", who, p.begin, p.end));
  if (p.end > data.size())
    bad(file, fmt::format("{}: data_offsets [{}, {}) end past the data section ({} bytes)", who,
                          p.begin, p.end, data.size()));
  if (p.end - p.begin != nbytes)
    bad(file, fmt::format("{}: data_offsets [{}, {}) hold {} bytes but {} {} needs {}", who,
                          p.begin, p.end, p.end - p.begin, elem_type_name(*type),
                          json(p.info.shape).dump(), nbytes));
  p.info.data =
      data.subspan(static_cast<std::size_t>(p.begin), static_cast<std::size_t>(p.end - p.begin));
  return p;
}

}  // namespace

SafetensorsFile SafetensorsFile::open(const std::filesystem::path& path) {
  return parse(MappedFile::open(path));
}

SafetensorsFile SafetensorsFile::parse(std::shared_ptr<const MappedFile> file) {
  const std::string& name = file->name();
  const auto bytes = file->bytes();
  if (bytes.size() < 8)
    bad(name, fmt::format("file is {} bytes, too short for the 8-byte header length (truncated "
                          "or not safetensors)",
                          bytes.size()));
  uint64_t n;
  std::memcpy(&n, bytes.data(), 8);
  if (n > bytes.size() - 8)
    bad(name, fmt::format("header length {} is longer than the file ({} bytes): truncated or "
                          "not safetensors",
                          n, bytes.size()));
  if (n > kMaxHeader)
    bad(name,
        fmt::format("header length {} exceeds the format's limit of {} bytes", n, kMaxHeader));
  const std::string_view header(reinterpret_cast<const char*>(bytes.data()) + 8,
                                static_cast<std::size_t>(n));
  if (!detail::valid_utf8(header)) bad(name, "header is not valid UTF-8");
  const auto data = bytes.subspan(8 + static_cast<std::size_t>(n));

  // Depth limit and duplicate keys are caught while parsing (nlohmann keeps the last of
  // duplicate keys silently).
  std::set<std::string> seen;
  std::string duplicate;
  const json::parser_callback_t cb = [&](int depth, json::parse_event_t ev, json& parsed) {
    if (depth > kMaxJsonDepth) throw std::length_error("nesting deeper than 16 levels");
    if (ev == json::parse_event_t::key && depth == 1 && duplicate.empty() &&
        !seen.insert(parsed.get<std::string>()).second)
      duplicate = parsed.get<std::string>();
    return true;
  };
  json root;
  try {
    root = json::parse(header.begin(), header.end(), cb);
  } catch (const json::exception& e) {
    bad(name, fmt::format("header is not valid JSON: {}", detail::printable(e.what(), 200)));
  } catch (const std::length_error& e) {
    bad(name, fmt::format("header JSON is too deeply nested: {}", e.what()));
  }
  if (!root.is_object()) bad(name, "header is not a JSON object");
  if (!duplicate.empty())
    bad(name, fmt::format("header names '{}' twice", detail::printable(duplicate)));

  SafetensorsFile f;
  f.file_ = std::move(file);
  std::vector<Parsed> entries;
  for (const auto& [key, v] : root.items()) {
    if (key == "__metadata__") {
      if (v.is_null()) continue;  // MLX writes null when there is none (the reference's None)
      if (!v.is_object()) bad(name, "__metadata__ is not a JSON object");
      for (const auto& [mk, mv] : v.items()) {
        if (!mv.is_string())
          bad(name, fmt::format("__metadata__ '{}' is not a string", detail::printable(mk)));
        f.metadata_.emplace_back(mk, mv.get<std::string>());
      }
      continue;
    }
    entries.push_back(parse_entry(key, v, data, name));
  }
  // The data section is covered exactly: contiguous ranges from 0 to its end.
  std::sort(entries.begin(), entries.end(), [](const Parsed& a, const Parsed& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t pos = 0;
  for (const Parsed& p : entries) {
    if (p.begin < pos)
      bad(name, fmt::format("tensor '{}': data_offsets [{}, {}) overlap the previous tensor, "
                            "which ends at {}",
                            detail::printable(p.info.name), p.begin, p.end, pos));
    if (p.begin > pos)
      bad(name, fmt::format("tensor '{}': data_offsets start at {}, leaving a gap after {}",
                            detail::printable(p.info.name), p.begin, pos));
    pos = p.end;
  }
  if (pos != data.size())
    bad(name, fmt::format("tensors cover {} bytes but the data section has {}: truncated or "
                          "trailing bytes",
                          pos, data.size()));
  f.tensors_.reserve(entries.size());
  for (Parsed& p : entries) f.tensors_.push_back(std::move(p.info));
  return f;
}

const TensorInfo* SafetensorsFile::find(std::string_view name) const {
  for (const auto& t : tensors_)
    if (t.name == name) return &t;
  return nullptr;
}

// ---- writer ----------------------------------------------------------------------------------

SafetensorsWriter::SafetensorsWriter(std::filesystem::path path, std::vector<TensorSpec> tensors,
                                     std::vector<std::pair<std::string, std::string>> metadata)
    : path_(std::move(path)) {
  const std::string file = path_.string();
  partial_ = path_;
  partial_ += ".partial";
  std::set<std::string_view> names;
  for (const auto& t : tensors) {
    if (!detail::valid_utf8(t.name))
      bad(file, fmt::format("tensor name '{}' is not valid UTF-8", detail::printable(t.name)));
    if (t.name == "__metadata__" || !names.insert(t.name).second)
      bad(file, fmt::format("tensor name '{}' is reserved or repeated", t.name));
  }
  for (auto& t : tensors) slots_.push_back({std::move(t), 0, false});
  std::stable_sort(slots_.begin(), slots_.end(), [](const Slot& a, const Slot& b) {
    const auto sa = elem_type_size(a.spec.type), sb = elem_type_size(b.spec.type);
    return sa != sb ? sa > sb : a.spec.name < b.spec.name;
  });
  by_name_.resize(slots_.size());
  for (std::size_t i = 0; i < slots_.size(); ++i) by_name_[i] = i;
  std::sort(by_name_.begin(), by_name_.end(), [&](std::size_t a, std::size_t b) {
    return slots_[a].spec.name < slots_[b].spec.name;
  });
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    auto& m = header["__metadata__"];
    for (auto& [k, v] : metadata) m[k] = v;
  }
  uint64_t offset = 0;
  for (auto& s : slots_) {
    s.offset = static_cast<std::size_t>(offset);
    uint64_t end;
    if (!detail::add_ok(offset, s.spec.bytes(), end)) bad(file, "total size overflows");
    header[s.spec.name] = {{"dtype", elem_type_name(s.spec.type)},
                           {"shape", s.spec.shape},
                           {"data_offsets", {offset, end}}};
    offset = end;
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::json::exception& e) {
    bad(file, fmt::format("cannot encode the header: {}", e.what()));
  }
  text.append((8 - text.size() % 8) % 8, ' ');  // tensors start 8-byte aligned
  const uint64_t n = text.size();
  const std::size_t data_start = 8 + text.size();
  for (auto& s : slots_) s.offset += data_start;
  file_size_ = data_start + static_cast<std::size_t>(offset);

  fd_ = ::open(partial_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0)
    detail::fail("safetensors", partial_.string(),
                 fmt::format("cannot create: {}", std::strerror(errno)));
  std::string head(8, '\0');
  std::memcpy(head.data(), &n, 8);
  head += text;
  if (::pwrite(fd_, head.data(), head.size(), 0) != static_cast<ssize_t>(head.size()) ||
      ::ftruncate(fd_, static_cast<off_t>(file_size_)) != 0) {
    const int e = errno;
    ::close(fd_);
    ::unlink(partial_.c_str());
    fd_ = -1;
    detail::fail("safetensors", partial_.string(),
                 fmt::format("cannot write the header: {}", std::strerror(e)));
  }
}

SafetensorsWriter::~SafetensorsWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!finished_) ::unlink(partial_.c_str());
}

void SafetensorsWriter::write(std::string_view name, std::span<const std::byte> bytes) {
  const auto it =
      std::lower_bound(by_name_.begin(), by_name_.end(), name,
                       [&](std::size_t i, std::string_view n) { return slots_[i].spec.name < n; });
  Slot* slot = it != by_name_.end() && slots_[*it].spec.name == name ? &slots_[*it] : nullptr;
  const std::string file = partial_.string();
  if (!slot) bad(file, fmt::format("tensor '{}' was not declared", name));
  if (slot->written) bad(file, fmt::format("tensor '{}' written twice", name));
  if (bytes.size() != slot->spec.bytes())
    bad(file, fmt::format("tensor '{}': {} bytes given, {} declared", name, bytes.size(),
                          slot->spec.bytes()));
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t w = ::pwrite(fd_, bytes.data() + done, bytes.size() - done,
                               static_cast<off_t>(slot->offset + done));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) bad(file, fmt::format("writing '{}' failed: {}", name, std::strerror(errno)));
    done += static_cast<std::size_t>(w);
  }
  slot->written = true;
}

void SafetensorsWriter::finish() {
  const std::string file = partial_.string();
  for (const auto& s : slots_)
    if (!s.written)
      bad(file, fmt::format("tensor '{}' was declared but never written", s.spec.name));
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) bad(file, fmt::format("closing failed: {}", std::strerror(errno)));
  std::error_code ec;
  std::filesystem::rename(partial_, path_, ec);
  if (ec) bad(file, fmt::format("cannot rename to {}: {}", path_.string(), ec.message()));
  finished_ = true;
}

void write_safetensors(const std::filesystem::path& path, std::span<const TensorData> tensors,
                       std::vector<std::pair<std::string, std::string>> metadata) {
  std::vector<TensorSpec> specs;
  for (const auto& t : tensors) specs.push_back(t.spec);
  SafetensorsWriter w(path, std::move(specs), std::move(metadata));
  for (const auto& t : tensors) w.write(t.spec.name, t.bytes);
  w.finish();
}

}  // namespace quanta::io
