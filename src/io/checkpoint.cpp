// Checkpoints (one file, a directory, sharded through model.safetensors.index.json), MLX's
// config.json "quantization" block, and MLX's quantized layout mapped onto QuantizedMatrix.
//
// MLX layout (mlx/ops.cpp `quantize`; mlx-lm `load_model._quantize`): module m stores
// `m.weight` (U32 [..., N, K*bits/32]), `m.scales` ([..., N, K/G]; the weight's dtype for
// affine, U8 for mxfp4/mxfp8/nvfp4) and for affine `m.biases` (like scales). mlx-lm
// quantizes module m when config.json's quantization block has an entry for m (a dict of
// parameters, or false) or, failing that, when `m.scales` exists.
#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "io/common.hpp"
#include "quanta/io.hpp"

namespace quanta::io {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr std::uintmax_t kMaxJsonFile = 64u << 20;

json parse_json_text(std::string_view text, std::string_view where, const std::string& file) {
  const json::parser_callback_t cb = [](int depth, json::parse_event_t, json&) {
    if (depth > 64) throw std::length_error("JSON nested deeper than 64 levels");
    return true;
  };
  try {
    return json::parse(text.begin(), text.end(), cb);
  } catch (const json::exception& e) {
    detail::fail(where, file, fmt::format("not valid JSON: {}", detail::printable(e.what(), 200)));
  } catch (const std::length_error& e) {
    detail::fail(where, file, e.what());
  }
}

std::string read_text(const fs::path& p, std::string_view where) {
  std::error_code ec;
  const auto size = fs::file_size(p, ec);
  if (ec) detail::fail(where, p.string(), fmt::format("cannot read: {}", ec.message()));
  if (size > kMaxJsonFile)
    detail::fail(where, p.string(), fmt::format("{} bytes is too large for a JSON file", size));
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  if (!f) detail::fail(where, p.string(), "cannot read");
  return ss.str();
}

// mlx.nn's defaults per mode (mlx/nn/layers/quantized.py `_defaults_for_mode`).
std::pair<int, int> mode_defaults(std::string_view mode) {
  if (mode == "mxfp4") return {32, 4};
  if (mode == "nvfp4") return {16, 4};
  if (mode == "mxfp8") return {32, 8};
  return {64, 4};
}

Format format_from(const json& q, const std::string& file, const std::string& who) {
  std::string mode = "affine";
  if (auto it = q.find("mode"); it != q.end() && !it->is_null()) {
    if (!it->is_string()) detail::fail("config", file, who + ": mode is not a string");
    mode = it->get<std::string>();
  }
  auto [group, bits] = mode_defaults(mode);
  auto get_int = [&](const char* key, int& out) {
    const auto it = q.find(key);
    if (it == q.end() || it->is_null()) return;
    if (!it->is_number_integer() || it->get<int64_t>() < 0 || it->get<int64_t>() > 1024)
      detail::fail("config", file, fmt::format("{}: {} is not a small integer", who, key));
    out = it->get<int>();
  };
  get_int("group_size", group);
  get_int("bits", bits);
  Format f;
  if (mode == "affine") {
    f = Format::affine(bits, group);
  } else if (mode == "mxfp4" || mode == "mxfp8" || mode == "nvfp4") {
    f = mode == "mxfp4" ? Format::mxfp4() : mode == "mxfp8" ? Format::mxfp8() : Format::nvfp4();
    if (f.bits != bits || f.group_size != group)
      detail::fail("config", file,
                   fmt::format("{}: mode {} takes bits {} and group_size {}, not {} and {}", who,
                               mode, f.bits, f.group_size, bits, group));
  } else {
    detail::fail("config", file,
                 fmt::format("{}: unknown mode '{}' (affine, mxfp4, mxfp8, nvfp4)", who,
                             detail::printable(mode)));
  }
  try {
    validate_format(f, "config", "quantization");
  } catch (const Error& e) {
    detail::fail("config", file, fmt::format("{}: {}", who, e.what()));
  }
  return f;
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

std::vector<TensorInfo> merge(const std::vector<SafetensorsFile>& files, const std::string& name) {
  std::vector<TensorInfo> all;
  for (const auto& f : files) all.insert(all.end(), f.tensors().begin(), f.tensors().end());
  std::sort(all.begin(), all.end(),
            [](const TensorInfo& a, const TensorInfo& b) { return a.name < b.name; });
  for (std::size_t i = 1; i < all.size(); ++i)
    if (all[i].name == all[i - 1].name)
      detail::fail("checkpoint", name,
                   fmt::format("tensor '{}' appears in both {} and {}",
                               detail::printable(all[i].name), all[i - 1].file, all[i].file));
  return all;
}

}  // namespace

// ---- quantization config -------------------------------------------------------------------

std::optional<Format> QuantizationConfig::for_module(std::string_view module) const {
  for (const auto& [m, f] : overrides)
    if (m == module) return f;
  return base;
}

std::optional<QuantizationConfig> parse_quantization_config(std::string_view config_json,
                                                            std::string_view file_name) {
  const std::string file(file_name);
  const json root = parse_json_text(config_json, "config", file);
  if (!root.is_object()) detail::fail("config", file, "not a JSON object");
  const auto q = root.find("quantization");
  if (q == root.end() || q->is_null()) return std::nullopt;
  if (!q->is_object()) detail::fail("config", file, "\"quantization\" is not a JSON object");
  QuantizationConfig c;
  c.base = format_from(*q, file, "quantization");
  for (const auto& [key, v] : q->items()) {
    if (key == "group_size" || key == "bits" || key == "mode") continue;
    const std::string who = fmt::format("quantization override '{}'", detail::printable(key));
    if (v.is_object())
      c.overrides.emplace_back(key, format_from(v, file, who));
    else if (v.is_boolean())
      c.overrides.emplace_back(key, v.get<bool>() ? std::optional<Format>(c.base) : std::nullopt);
    // Other scalars (e.g. "quant_method") are not module entries.
  }
  return c;
}

// ---- Checkpoint ------------------------------------------------------------------------------

Checkpoint Checkpoint::from_files(std::vector<SafetensorsFile> files, std::string config_json,
                                  std::string name) {
  Checkpoint c;
  c.name_ = std::move(name);
  c.tensors_ = merge(files, c.name_);
  c.files_ = std::move(files);
  c.config_json_ = std::move(config_json);
  if (!c.config_json_.empty())
    c.quantization_ = parse_quantization_config(c.config_json_, c.name_ + "/config.json");
  return c;
}

Checkpoint Checkpoint::open(const fs::path& path) {
  std::error_code ec;
  const auto st = fs::status(path, ec);
  if (ec || !fs::exists(st)) detail::fail("checkpoint", path.string(), "no such file or directory");
  fs::path dir = path;
  std::vector<fs::path> shards;
  fs::path index;
  if (fs::is_regular_file(st)) {
    dir = path.parent_path().empty() ? fs::path(".") : path.parent_path();
    if (path.filename() == "model.safetensors.index.json")
      index = path;
    else
      shards.push_back(path);
  } else if (fs::is_directory(st)) {
    if (fs::exists(path / "model.safetensors.index.json", ec))
      index = path / "model.safetensors.index.json";
    else if (fs::exists(path / "model.safetensors", ec))
      shards.push_back(path / "model.safetensors");
    else {
      for (const auto& e : fs::directory_iterator(path, ec))
        if (e.is_regular_file(ec) && e.path().extension() == ".safetensors")
          shards.push_back(e.path());
      std::sort(shards.begin(), shards.end());
      if (shards.empty())
        detail::fail("checkpoint", path.string(), "directory holds no .safetensors files");
    }
  } else {
    detail::fail("checkpoint", path.string(), "not a regular file or directory");
  }

  std::vector<std::pair<std::string, std::string>> weight_map;  // tensor -> shard file
  if (!index.empty()) {
    const std::string iname = index.string();
    const json j = parse_json_text(read_text(index, "checkpoint"), "checkpoint", iname);
    const auto wm = j.is_object() ? j.find("weight_map") : j.end();
    if (wm == j.end() || !wm->is_object())
      detail::fail("checkpoint", iname, "needs a \"weight_map\" object");
    std::set<std::string> files;
    for (const auto& [tensor, file] : wm->items()) {
      if (!file.is_string())
        detail::fail("checkpoint", iname,
                     fmt::format("weight_map['{}'] is not a file name", detail::printable(tensor)));
      const std::string f = file.get<std::string>();
      // Shards live beside the index: a path could reach any file on the machine.
      if (f.empty() || f == "." || f == ".." || f.find('/') != std::string::npos ||
          f.find('\\') != std::string::npos || f.find('\0') != std::string::npos)
        detail::fail("checkpoint", iname,
                     fmt::format("weight_map['{}'] = '{}' is not a file name in this directory",
                                 detail::printable(tensor), detail::printable(f)));
      weight_map.emplace_back(tensor, f);
      if (files.insert(f).second) shards.push_back(dir / f);
    }
    if (shards.empty()) detail::fail("checkpoint", iname, "weight_map lists no tensors");
  }

  std::vector<SafetensorsFile> files;
  for (const auto& s : shards) files.push_back(SafetensorsFile::open(s));
  std::string config;
  if (fs::is_regular_file(dir / "config.json", ec))
    config = read_text(dir / "config.json", "config");
  Checkpoint c = from_files(std::move(files), std::move(config), path.string());

  if (!index.empty()) {
    const std::string iname = index.string();
    for (const auto& [tensor, file] : weight_map) {
      const TensorInfo* t = c.find(tensor);
      if (!t || fs::path(t->file).filename() != file)
        detail::fail("checkpoint", iname,
                     fmt::format("tensor '{}' is listed in {} but not found there",
                                 detail::printable(tensor), file));
    }
    if (weight_map.size() != c.tensors_.size())
      detail::fail("checkpoint", iname,
                   fmt::format("the shards hold {} tensors but the index lists {}",
                               c.tensors_.size(), weight_map.size()));
  }
  return c;
}

const TensorInfo* Checkpoint::find(std::string_view name) const {
  const auto it =
      std::lower_bound(tensors_.begin(), tensors_.end(), name,
                       [](const TensorInfo& t, std::string_view n) { return t.name < n; });
  return it != tensors_.end() && it->name == name ? &*it : nullptr;
}

// ---- MLX quantized layout --------------------------------------------------------------------

namespace {

// Bytes of `t` for a QuantizedMatrix buffer: a view when aligned for `align`, else a copy
// kept alive by `owned`.
std::byte* buffer_of(const TensorInfo& t, std::size_t align,
                     std::vector<std::shared_ptr<std::byte[]>>& owned) {
  if (reinterpret_cast<uintptr_t>(t.data.data()) % align == 0)
    return const_cast<std::byte*>(t.data.data());  // read-only mapping: views are never written
  auto copy = std::shared_ptr<std::byte[]>(new std::byte[t.data.size()]);
  std::copy(t.data.begin(), t.data.end(), copy.get());
  owned.push_back(copy);
  return copy.get();
}

ModelTensor map_quantized(const Checkpoint& c, const std::string& module, const TensorInfo& w,
                          const TensorInfo& s, const TensorInfo* b, const Format& f) {
  const std::string file = w.file;
  const std::string who = fmt::format("'{}' ({})", detail::printable(module), f.name());
  auto fail = [&](std::string msg) { detail::fail("mlx", file, who + ": " + msg); };
  const SchemeInfo& info = f.info();
  if (w.type != ElemType::u32) fail("weight must be U32 packed codes");
  if (w.shape.size() < 2 || w.shape.size() > 3)
    fail(fmt::format("weight has {} axes; quantized weights have 2, or 3 for stacks",
                     w.shape.size()));
  const bool affine = info.family == Family::affine;
  DType scale_dtype = DType::f16;
  if (affine) {
    const auto d = to_dtype(s.type);
    if (!d)
      fail(fmt::format("scales are {}, affine needs F32, F16 or BF16", elem_type_name(s.type)));
    scale_dtype = *d;
    if (!b) fail("affine needs biases (" + module + ".biases)");
    if (b->type != s.type || b->shape != s.shape)
      fail("biases must match scales in dtype and shape");
  } else {
    if (s.type != ElemType::u8 && s.type != ElemType::f8_e8m0 && s.type != ElemType::f8_e4m3)
      fail(fmt::format("scales are {}, {} needs U8 scales", elem_type_name(s.type), info.name));
    if (b) fail(fmt::format("{} has no biases but {}.biases exists", info.name, module));
  }
  const int64_t batch = w.shape.size() == 3 ? w.shape[0] : 1;
  const int64_t n = w.shape[w.shape.size() - 2], packed = w.shape.back();
  if (packed <= 0 || n <= 0 || batch <= 0) fail("weight has an empty axis");
  if ((packed * 32) % f.bits != 0) fail("packed width is not whole codes");
  const int64_t k = packed * 32 / f.bits;
  std::vector<int64_t> want = w.shape;
  want.back() = k / f.group_size;
  if (s.shape != want)
    fail(fmt::format("scales shape {} does not match weight {}: expected {}", json(s.shape).dump(),
                     json(w.shape).dump(), json(want).dump()));

  ModelTensor m;
  m.name = module + ".weight";
  m.shape = w.shape;
  m.shape.back() = k;
  m.stored_bytes = w.data.size() + s.data.size() + (b ? b->data.size() : 0);
  std::vector<std::shared_ptr<std::byte[]>> owned;
  auto span_of = [&](const TensorInfo& t, std::size_t align) {
    return std::span<std::byte>(buffer_of(t, align, owned), t.data.size());
  };
  try {
    QuantizedMatrix q = QuantizedMatrix::wrap(
        f, n, k, scale_dtype, Layout::nk, Location::host, span_of(w, 4),
        span_of(s, elem_type_size(s.type)),
        b ? span_of(*b, elem_type_size(b->type)) : std::span<std::byte>{}, batch);
    // The matrix keeps the mapped files (and any aligned copies) alive.
    struct Keep {
      std::vector<std::shared_ptr<const MappedFile>> files;
      std::vector<std::shared_ptr<std::byte[]>> copies;
    };
    auto keep = std::make_shared<Keep>();
    for (const auto& sf : c.files()) keep->files.push_back(sf.file());
    keep->copies = std::move(owned);
    q.keepalive = keep;
    m.quantized = std::move(q);
  } catch (const Error& e) {
    fail(e.what());
  }
  return m;
}

}  // namespace

int64_t ModelTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

double ModelTensor::bits_per_weight() const {
  const int64_t n = numel();
  return n > 0 ? 8.0 * static_cast<double>(stored_bytes) / static_cast<double>(n) : 0.0;
}

std::string ModelTensor::format_name() const {
  if (quantized) {
    std::string s = quantized->format.name();
    if (quantized->format.scheme == Scheme::affine)
      s += fmt::format(" {}", dtype_name(quantized->scale_dtype));
    return s;
  }
  return dense ? std::string(elem_type_name(dense->type)) : "?";
}

std::vector<ModelTensor> model_tensors(const Checkpoint& c) {
  const auto& q = c.quantization();
  std::set<std::string> consumed;  // scales / biases that belong to a quantized weight
  std::vector<ModelTensor> out;
  for (const TensorInfo& t : c.tensors()) {
    if (!ends_with(t.name, ".weight")) continue;
    const std::string module = t.name.substr(0, t.name.size() - 7);
    const TensorInfo* s = c.find(module + ".scales");
    if (!s) continue;
    std::optional<Format> f;
    if (q) f = q->for_module(module);
    if (!q && t.type == ElemType::u32)
      detail::fail("mlx", c.name(),
                   fmt::format("'{}' is stored quantized ({}.scales) but there is no config.json "
                               "with a \"quantization\" block to say how",
                               detail::printable(module), detail::printable(module)));
    if (!f) continue;  // the config keeps this module dense
    const TensorInfo* b = c.find(module + ".biases");
    out.push_back(map_quantized(c, module, t, *s, b, *f));
    consumed.insert(t.name);
    consumed.insert(s->name);
    if (b) consumed.insert(b->name);
  }
  for (const TensorInfo& t : c.tensors()) {
    if (consumed.count(t.name)) continue;
    ModelTensor m;
    m.name = t.name;
    m.shape = t.shape;
    m.dense = &t;
    m.stored_bytes = t.data.size();
    out.push_back(std::move(m));
  }
  std::sort(out.begin(), out.end(),
            [](const ModelTensor& a, const ModelTensor& b) { return a.name < b.name; });
  return out;
}

}  // namespace quanta::io
