// `quanta inspect FILE|DIR`: what a model file holds: tensors, shapes, formats, bits per
// weight and totals, plus a metadata summary (GGUF key/values, config.json highlights).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>

#include "commands.hpp"
#include "progress.hpp"
#include "quanta/error.hpp"
#include "quanta/io.hpp"

namespace quanta::cli {

namespace {

namespace fs = std::filesystem;

struct InspectOptions {
  std::string path;
  bool summary_only = false;
  std::string filter;
  std::size_t max_items = 6;
};

struct Totals {
  double params = 0, bytes = 0, quantized_params = 0;
  std::size_t count = 0, shown = 0;
  void add(double n, double b, bool q) {
    params += n, bytes += b, ++count;
    if (q) quantized_params += n;
  }
  void print() const {
    fmt::print(
        "total: {} params in {} tensors, {}, {:.3f} bits/weight ({} params quantized, {} "
        "dense)\n",
        human_count(params), count, human_bytes(bytes), params > 0 ? 8.0 * bytes / params : 0.0,
        human_count(quantized_params), human_count(params - quantized_params));
  }
};

std::string shape_text(std::span<const int64_t> s) {
  return s.empty() ? std::string("scalar") : fmt::format("{}", fmt::join(s, "x"));
}

bool is_gguf(const fs::path& p) {
  std::error_code ec;
  if (!fs::is_regular_file(p, ec)) return false;
  if (p.extension() == ".gguf") return true;
  char magic[4] = {};
  std::ifstream f(p, std::ios::binary);
  f.read(magic, 4);
  return f.gcount() == 4 && std::memcmp(magic, "GGUF", 4) == 0;
}

void print_config(const std::string& text) {
  if (text.empty()) return;
  const auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return;
  std::vector<std::string> parts;
  for (const char* key : {"model_type", "hidden_size", "intermediate_size", "num_hidden_layers",
                          "num_attention_heads", "num_key_value_heads", "num_local_experts",
                          "num_experts", "vocab_size", "torch_dtype", "tie_word_embeddings"}) {
    const auto it = j.find(key);
    if (it != j.end() && (it->is_primitive()))
      parts.push_back(
          fmt::format("{} {}", key, it->is_string() ? it->get<std::string>() : it->dump()));
  }
  fmt::print("config.json: {}\n",
             parts.empty() ? "(no model fields)" : fmt::format("{}", fmt::join(parts, ", ")));
}

void inspect_checkpoint(const InspectOptions& o, const std::optional<std::regex>& filter) {
  const io::Checkpoint c = io::Checkpoint::open(o.path);
  // MLX's quantized layout needs config.json to say how; without it, list what is stored.
  const auto scales = std::find_if(c.tensors().begin(), c.tensors().end(), [](const auto& t) {
    return t.name.size() > 7 && t.name.compare(t.name.size() - 7, 7, ".scales") == 0;
  });
  const bool raw = !c.quantization() && scales != c.tensors().end();
  std::vector<io::ModelTensor> tensors;
  if (raw) {
    for (const auto& t : c.tensors()) {
      io::ModelTensor m;
      m.name = t.name;
      m.shape = t.shape;
      m.dense = &t;
      m.stored_bytes = t.data.size();
      tensors.push_back(std::move(m));
    }
  } else {
    tensors = io::model_tensors(c);
  }
  fmt::print("checkpoint: {} ({} file{}, {} stored tensors)\n", c.name(), c.files().size(),
             c.files().size() == 1 ? "" : "s", c.tensors().size());
  print_config(c.config_json());
  if (const auto& q = c.quantization()) {
    std::string over;
    for (const auto& [m, f] : q->overrides)
      over += fmt::format("{}{} -> {}", over.empty() ? " (overrides: " : ", ", m,
                          f ? f->name() : std::string("dense"));
    fmt::print("quantization: {}{}\n", q->base.name(), over.empty() ? "" : over + ")");
  }
  if (raw)
    fmt::print(
        "note: {} is stored in MLX's quantized layout but there is no config.json with a "
        "\"quantization\" block; listing the stored tensors as they are\n",
        scales->name);
  for (const auto& f : c.files())
    for (const auto& [k, v] : f.metadata())
      fmt::print("__metadata__ {}: {} = {}\n", fs::path(f.name()).filename().string(), k, v);
  if (!o.summary_only)
    fmt::print("\n{:<52} {:<18} {:<20} {:>7} {:>11}\n", "tensor", "shape", "format", "bits/w",
               "bytes");
  Totals t;
  for (const auto& m : tensors) {
    if (filter && !std::regex_search(m.name, *filter)) continue;
    t.add(static_cast<double>(m.numel()), static_cast<double>(m.stored_bytes),
          m.quantized.has_value());
    if (!o.summary_only)
      fmt::print("{:<52} {:<18} {:<20} {:>7.3f} {:>11}\n", m.name, shape_text(m.shape),
                 m.format_name(), m.bits_per_weight(),
                 human_bytes(static_cast<double>(m.stored_bytes)));
  }
  t.print();
}

void inspect_gguf(const InspectOptions& o, const std::optional<std::regex>& filter) {
  const io::GgufFile g = io::GgufFile::open(o.path);
  fmt::print("gguf: {} (GGUF v{}, alignment {}, {} metadata entries, {} tensors)\n", g.name(),
             g.version(), g.alignment(), g.metadata().size(), g.tensors().size());
  for (const auto& [k, v] : g.metadata()) fmt::print("  {} = {}\n", k, v.summary(o.max_items));
  if (!o.summary_only)
    fmt::print("\n{:<40} {:<22} {:<8} {:>7} {:>11}  {}\n", "tensor", "ne (ggml order)", "type",
               "bits/w", "bytes", "quanta decodes");
  Totals t;
  for (const auto& x : g.tensors()) {
    if (filter && !std::regex_search(std::string(x.name), *filter)) continue;
    const double n = static_cast<double>(x.numel()), b = static_cast<double>(x.data.size());
    t.add(n, b, !x.type->dense);
    if (!o.summary_only)
      fmt::print("{:<40} {:<22} {:<8} {:>7.3f} {:>11}  {}\n", x.name, shape_text(x.ne),
                 x.type->name, n > 0 ? 8.0 * b / n : 0.0, human_bytes(b),
                 x.type->scheme  ? "yes"
                 : x.type->dense ? "dense"
                                 : "no (listed only)");
  }
  t.print();
}

void add_inspect_command(CLI::App& app) {
  auto o = std::make_shared<InspectOptions>();
  auto* cmd = app.add_subcommand(
      "inspect", "Show the tensors, formats, bits per weight and metadata of a model file");
  cmd->footer(
      "PATH is a .safetensors file, a checkpoint directory (sharded through\n"
      "model.safetensors.index.json or not; config.json is read) or a .gguf file. Example:\n"
      "  quanta inspect ./llama-4bit --filter 'layers\\.0\\.'");
  cmd->add_option("PATH", o->path, "FILE or DIR")->required();
  cmd->add_flag("--no-tensors", o->summary_only, "Print the summary and totals only");
  cmd->add_option("--filter", o->filter, "Only tensors whose name matches this regex");
  cmd->add_option("--max-items", o->max_items, "GGUF arrays: items shown per array")
      ->check(CLI::Range(0, 1000));
  cmd->callback([o] {
    std::optional<std::regex> filter;
    if (!o->filter.empty()) {
      try {
        filter.emplace(o->filter);
      } catch (const std::regex_error& e) {
        throw Error(fmt::format("[quanta::inspect] --filter '{}': not a valid regex ({})",
                                o->filter, e.what()));
      }
    }
    if (is_gguf(o->path))
      inspect_gguf(*o, filter);
    else
      inspect_checkpoint(*o, filter);
  });
}

const CommandRegistration kRegistration{"inspect", 10, add_inspect_command};

}  // namespace

}  // namespace quanta::cli
