// `quanta quantize`: dense safetensors checkpoint -> MLX-compatible quantized checkpoint.
// Streams tensor by tensor: the input stays memory-mapped (its pages released after use),
// each quantized tensor is built in one buffer and written with pwrite, so the working set is
// about one tensor plus its quantized form. Rows are quantized in parallel chunks with the
// bit-exact host quantizer (quanta::quantize), whose rows are independent.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "io/common.hpp"
#include "quanta/io.hpp"
#include "quanta/ops.hpp"

namespace quanta::io {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view kWhere = "quantize";

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

std::optional<std::string> dense_reason(const TensorInfo& t, const Format& f,
                                        const std::regex* skip) {
  if (!ends_with(t.name, ".weight")) return "not a .weight";
  if (!to_dtype(t.type)) return fmt::format("{} is not a float weight", elem_type_name(t.type));
  const bool stack = t.name.find("switch_mlp.") != std::string::npos ||
                     t.name.find("experts.") != std::string::npos;
  if (t.shape.size() != 2 && !(t.shape.size() == 3 && stack))
    return fmt::format("{} axes (norms, biases, convolutions stay dense)", t.shape.size());
  for (int64_t d : t.shape)
    if (d == 0) return std::string("empty");
  if (t.shape.back() % f.group_size != 0)
    return fmt::format("last axis {} is not a multiple of group {}", t.shape.back(), f.group_size);
  if (skip && std::regex_search(t.name, *skip)) return std::string("matches --skip");
  return std::nullopt;
}

std::string mode_name(const Format& f) {
  return std::string(f.info().name);
}

struct Output {
  TensorSpec spec;
  std::size_t shard = 0;
};

struct Plan {
  const TensorInfo* in;
  bool quantize;
  std::vector<std::size_t> outputs;  // indices into the output list
};

struct QuantBuffers {
  std::vector<std::byte> codes, scales, biases;
};

// Quantizes one tensor ([..., K] viewed as rows x K) into MLX's buffers, `threads` chunks at
// a time; `tick` reports input bytes done after each wave.
QuantBuffers quantize_tensor(const TensorInfo& t, const Format& f, int threads,
                             const std::function<void(uint64_t)>& tick, std::size_t& peak) {
  const DType dt = *to_dtype(t.type);
  const int64_t k = t.shape.back(), rows = t.numel() / k;
  const std::size_t esize = dtype_size(dt);
  const std::size_t code_row = static_cast<std::size_t>(k) * f.bits / 8;
  const std::size_t groups = static_cast<std::size_t>(k / f.group_size);
  const bool affine = f.info().family == Family::affine;
  const std::size_t scale_size = affine ? esize : 1;
  QuantBuffers out;
  out.codes.resize(static_cast<std::size_t>(rows) * code_row);
  out.scales.resize(static_cast<std::size_t>(rows) * groups * scale_size);
  if (affine) out.biases.resize(out.scales.size());

  const int nthreads = detail::resolve_threads(threads);
  // About 1M elements per chunk: small temporaries, enough chunks to balance the threads.
  const int64_t chunk = std::clamp<int64_t>((int64_t{1} << 20) / k, 1, std::max<int64_t>(rows, 1));
  const int64_t n_chunks = (rows + chunk - 1) / chunk;
  peak = out.codes.size() + out.scales.size() * (affine ? 2 : 1) +
         static_cast<std::size_t>(std::min<int64_t>(nthreads, n_chunks)) *
             static_cast<std::size_t>(chunk * k) * (esize + 1);
  const bool aligned = t.aligned();
  const int64_t wave = std::max<int64_t>(1, int64_t{nthreads} * 4);
  for (int64_t w0 = 0; w0 < n_chunks; w0 += wave) {
    const int64_t wn = std::min(wave, n_chunks - w0);
    detail::parallel_for(wn, nthreads, [&](int64_t i) {
      const int64_t r0 = (w0 + i) * chunk, nr = std::min(chunk, rows - r0);
      const std::byte* src = t.data.data() + static_cast<std::size_t>(r0 * k) * esize;
      std::vector<std::byte> copy;
      if (!aligned) {  // typed loads need alignment; the file did not give it
        copy.assign(src, src + static_cast<std::size_t>(nr * k) * esize);
        src = copy.data();
      }
      const QuantizedMatrix q = quantize(ConstMatrixView{src, dt, nr, k}, f);
      const Footprint fp = q.footprint();
      const auto r = static_cast<std::size_t>(r0);
      std::memcpy(out.codes.data() + r * code_row, q.codes, fp.code_bytes);
      std::memcpy(out.scales.data() + r * groups * scale_size, q.scales, fp.scale_bytes);
      if (affine) std::memcpy(out.biases.data() + r * groups * scale_size, q.biases, fp.bias_bytes);
    });
    const int64_t rows_done = std::min(rows, (w0 + wn) * chunk);
    tick(static_cast<uint64_t>(rows_done * k) * esize);
  }
  return out;
}

// The --skip regex, compiled once per distinct pattern.
const std::regex& compile_skip(std::string_view pattern) {
  thread_local std::string last;
  thread_local std::regex re;
  if (last != pattern || last.empty()) {
    try {
      re = std::regex(std::string(pattern));
    } catch (const std::regex_error& e) {
      throw Error(
          fmt::format("[quanta::quantize] --skip '{}': not a valid regex ({})", pattern, e.what()));
    }
    last = pattern;
  }
  return re;
}

std::span<const std::byte> as_bytes(const std::vector<std::byte>& v) {
  return {v.data(), v.size()};
}

// OUT may not be where the input lives (writing there would clobber the mapped input), and
// an old checkpoint in it is replaced only when asked.
void check_output_dir(const fs::path& out, const Checkpoint& src, bool overwrite) {
  const std::string name = out.string();
  std::error_code ec;
  if (!fs::exists(out, ec)) return;
  if (!fs::is_directory(out, ec)) detail::fail(kWhere, name, "OUT exists and is not a directory");
  for (const auto& f : src.files()) {
    const fs::path dir = fs::path(f.name()).parent_path();
    if (fs::equivalent(dir.empty() ? fs::path(".") : dir, out, ec))
      detail::fail(kWhere, name, "OUT must not be the input's directory (it would overwrite it)");
  }
  std::vector<fs::path> old;
  for (const auto& e : fs::directory_iterator(out, ec)) {
    const std::string fn = e.path().filename().string();
    if (e.path().extension() == ".safetensors" || fn == "model.safetensors.index.json" ||
        fn == "config.json")
      old.push_back(e.path());
  }
  if (old.empty()) return;
  if (!overwrite)
    detail::fail(kWhere, name,
                 fmt::format("OUT already holds a checkpoint ({}); remove it or pass --force",
                             old.front().filename().string()));
  for (const auto& p : old) fs::remove(p, ec);
}

}  // namespace

std::optional<std::string> keep_dense_reason(const TensorInfo& t, const Format& f,
                                             std::string_view skip_regex) {
  if (skip_regex.empty()) return dense_reason(t, f, nullptr);
  return dense_reason(t, f, &compile_skip(skip_regex));
}

QuantizeSummary quantize_checkpoint(const fs::path& in, const fs::path& out,
                                    const QuantizeCheckpointOptions& opts,
                                    const std::function<void(const QuantizeProgress&)>& progress) {
  const auto t0 = std::chrono::steady_clock::now();
  const Format& f = opts.format;
  validate_format(f, kWhere, "format");
  if (f.info().family != Family::affine && f.info().family != Family::microscaled)
    throw Error(
        fmt::format("[quanta::quantize] format: {} has no MLX checkpoint layout (affine, "
                    "mxfp4, mxfp8 and nvfp4 do)",
                    f.name()));
  std::optional<std::regex> skip;
  if (!opts.skip.empty()) skip = compile_skip(opts.skip);

  const Checkpoint src = Checkpoint::open(in);
  if (src.quantization())
    detail::fail(kWhere, src.name(),
                 "is already quantized (config.json has a \"quantization\" block); quantize "
                 "its dense source");
  check_output_dir(out, src, opts.overwrite);

  // Plan every output tensor first: the safetensors headers hold all offsets.
  std::vector<Output> outputs;
  std::vector<Plan> plans;
  std::set<std::string> names;
  auto add_output = [&](Plan& p, std::string name, ElemType type, std::vector<int64_t> shape) {
    if (!names.insert(name).second)
      detail::fail(kWhere, src.name(),
                   fmt::format("output tensor '{}' would be written twice (a dense tensor already "
                               "has that name)",
                               name));
    p.outputs.push_back(outputs.size());
    outputs.push_back({{std::move(name), type, std::move(shape)}, 0});
  };
  QuantizeSummary sum;
  uint64_t bytes_total = 0;
  for (const SafetensorsFile& file : src.files())
    for (const TensorInfo& t : file.tensors()) {
      Plan p{&t, !dense_reason(t, f, skip ? &*skip : nullptr), {}};
      bytes_total += t.data.size();
      sum.params += t.numel();
      if (!p.quantize) {
        add_output(p, t.name, t.type, t.shape);
      } else {
        const std::string module = t.name.substr(0, t.name.size() - 7);
        auto shape = t.shape;
        const int64_t k = shape.back();
        shape.back() = k * f.bits / 32;
        add_output(p, t.name, ElemType::u32, shape);
        shape.back() = k / f.group_size;
        const bool affine = f.info().family == Family::affine;
        add_output(p, module + ".scales", affine ? t.type : ElemType::u8, shape);
        if (affine) add_output(p, module + ".biases", t.type, shape);
      }
      plans.push_back(std::move(p));
    }

  // Shards of at most max_shard_bytes; a tensor's weight, scales and biases stay together.
  std::size_t shard = 0, in_shard = 0;
  for (const Plan& p : plans) {
    std::size_t bytes = 0;
    for (std::size_t o : p.outputs) bytes += outputs[o].spec.bytes();
    if (in_shard > 0 && in_shard + bytes > opts.max_shard_bytes) ++shard, in_shard = 0;
    in_shard += bytes;
    for (std::size_t o : p.outputs) outputs[o].shard = shard;
  }
  const std::size_t n_shards = plans.empty() ? 1 : shard + 1;
  auto shard_name = [&](std::size_t s) {
    return n_shards == 1 ? std::string("model.safetensors")
                         : fmt::format("model-{:05d}-of-{:05d}.safetensors", s + 1, n_shards);
  };
  {
    std::error_code ec;
    fs::create_directories(out, ec);
    if (ec) detail::fail(kWhere, out.string(), fmt::format("cannot create: {}", ec.message()));
  }
  std::vector<std::unique_ptr<SafetensorsWriter>> writers;
  for (std::size_t s = 0; s < n_shards; ++s) {
    std::vector<TensorSpec> specs;
    for (const auto& o : outputs)
      if (o.shard == s) specs.push_back(o.spec);
    writers.push_back(std::make_unique<SafetensorsWriter>(
        out / shard_name(s), std::move(specs),
        std::vector<std::pair<std::string, std::string>>{{"format", "mlx"}}));
  }

  QuantizeProgress prog{0, plans.size(), 0, bytes_total, {}};
  uint64_t bytes_before = 0;
  for (const Plan& p : plans) {
    const TensorInfo& t = *p.in;
    prog.current = t.name;
    if (progress) progress(prog);
    auto write = [&](std::size_t o, std::span<const std::byte> b) {
      writers[outputs[o].shard]->write(outputs[o].spec.name, b);
    };
    if (!p.quantize) {
      write(p.outputs[0], t.data);
      ++sum.kept;
    } else {
      std::size_t peak = 0;
      QuantBuffers q;
      try {
        q = quantize_tensor(
            t, f, opts.threads,
            [&](uint64_t done) {
              prog.bytes_done = bytes_before + done;
              if (progress) progress(prog);
            },
            peak);
      } catch (const Error& e) {
        detail::fail(kWhere, t.file, fmt::format("tensor '{}': {}", t.name, e.what()));
      }
      sum.peak_buffer_bytes = std::max(sum.peak_buffer_bytes, peak);
      write(p.outputs[0], as_bytes(q.codes));
      write(p.outputs[1], as_bytes(q.scales));
      if (p.outputs.size() > 2) write(p.outputs[2], as_bytes(q.biases));
      ++sum.quantized;
    }
    // The input's pages are not needed again: keep the resident set near one tensor.
    for (const auto& file : src.files())
      if (file.name() == t.file) file.file()->release(t.data);
    bytes_before += t.data.size();
    prog.bytes_done = bytes_before;
    ++prog.tensors_done;
    if (progress) progress(prog);
  }
  for (auto& w : writers) {
    w->finish();
    sum.bytes_out += w->file_size();
  }
  sum.bytes_in = bytes_total;
  sum.shards = n_shards;

  if (n_shards > 1) {
    nlohmann::json index;
    uint64_t total = 0;
    for (const auto& o : outputs) total += o.spec.bytes();
    index["metadata"]["total_size"] = total;
    for (const auto& o : outputs) index["weight_map"][o.spec.name] = shard_name(o.shard);
    std::ofstream index_file(out / "model.safetensors.index.json");
    index_file << index.dump(4) << "\n";
    if (!index_file)
      detail::fail(kWhere, (out / "model.safetensors.index.json").string(), "cannot write");
  }

  // config.json: the source's, plus the quantization block mlx-lm writes (utils.py
  // `quantize_model` sets "quantization" and copies it to "quantization_config").
  nlohmann::json config = nlohmann::json::object();
  if (!src.config_json().empty()) config = nlohmann::json::parse(src.config_json());
  const nlohmann::json q = {{"group_size", f.group_size}, {"bits", f.bits}, {"mode", mode_name(f)}};
  config["quantization"] = q;
  config["quantization_config"] = q;
  std::ofstream cfg(out / "config.json");
  cfg << config.dump(4) << "\n";
  if (!cfg) detail::fail(kWhere, (out / "config.json").string(), "cannot write");

  // Tokenizer and other side files travel with the checkpoint.
  std::error_code ec;
  if (fs::is_directory(in, ec))
    for (const auto& e : fs::directory_iterator(in, ec)) {
      const std::string fn = e.path().filename().string();
      if (!e.is_regular_file(ec) || e.path().extension() == ".safetensors" || fn == "config.json" ||
          fn == "model.safetensors.index.json" || ends_with(fn, ".partial"))
        continue;
      fs::copy_file(e.path(), out / fn, fs::copy_options::overwrite_existing, ec);
      if (ec) detail::fail(kWhere, e.path().string(), "cannot copy: " + ec.message());
    }
  sum.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return sum;
}

}  // namespace quanta::io
