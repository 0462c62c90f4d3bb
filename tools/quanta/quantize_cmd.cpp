// `quanta quantize IN OUT`: a dense safetensors checkpoint to an MLX-compatible quantized one,
// on all cores, tensor by tensor, with a progress bar.
#include <fmt/format.h>

#include <memory>
#include <optional>
#include <regex>

#include "commands.hpp"
#include "progress.hpp"
#include "quanta/error.hpp"
#include "quanta/io.hpp"

namespace quanta::cli {

namespace {

struct QuantizeCliOptions {
  std::string in, out, mode = "affine", skip;
  std::optional<int> bits, group;
  int threads = 0;
  double shard_gb = 5.0;
  bool force = false, quiet = false, dry_run = false;
};

// mlx-lm's defaults per mode (bits, group) unless given; the format table validates the rest.
Format format_of(const QuantizeCliOptions& o) {
  Format f;
  if (o.mode == "affine") {
    f = Format::affine(o.bits.value_or(4), o.group.value_or(64));
  } else {
    f = o.mode == "mxfp4" ? Format::mxfp4() : o.mode == "mxfp8" ? Format::mxfp8() : Format::nvfp4();
    if (o.bits && *o.bits != f.bits)
      throw Error(fmt::format("[quanta::quantize] --bits {}: {} elements have {} bits", *o.bits,
                              o.mode, f.bits));
    if (o.group && *o.group != f.group_size)
      throw Error(fmt::format("[quanta::quantize] --group {}: {} uses groups of {}", *o.group,
                              o.mode, f.group_size));
  }
  validate_format(f, "quantize", "--bits/--group");
  return f;
}

void dry_run(const QuantizeCliOptions& o, const Format& f) {
  const io::Checkpoint c = io::Checkpoint::open(o.in);
  std::size_t q = 0;
  for (const auto& t : c.tensors()) {
    const auto why = io::keep_dense_reason(t, f, o.skip);
    q += !why;
    fmt::print("{:<10} {:<52} {}\n", why ? "dense" : f.name(), t.name, why ? *why : "");
  }
  fmt::print("dry run: {} of {} tensors would be quantized to {}\n", q, c.tensors().size(),
             f.name());
}

void run_quantize(const QuantizeCliOptions& o) {
  const Format f = format_of(o);
  if (o.dry_run) return dry_run(o, f);
  io::QuantizeCheckpointOptions qo;
  qo.format = f;
  qo.skip = o.skip;
  qo.threads = o.threads;
  qo.overwrite = o.force;
  qo.max_shard_bytes = static_cast<std::size_t>(o.shard_gb * 1e9);
  ProgressBar bar("quantize", !o.quiet);
  const io::QuantizeSummary s = io::quantize_checkpoint(
      o.in, o.out, qo, [&](const io::QuantizeProgress& p) { bar.update(p); });
  bar.finish();
  const double params = static_cast<double>(s.params);
  fmt::print(
      "quantized {} of {} tensors to {} ({} kept dense) in {:.2f} s: {} -> {} ({:.3f} bits per "
      "weight over all {} params), {}/s, peak working buffer {}; wrote {} ({} file{})\n",
      s.quantized, s.quantized + s.kept, f.name(), s.kept, s.seconds,
      human_bytes(static_cast<double>(s.bytes_in)), human_bytes(static_cast<double>(s.bytes_out)),
      params > 0 ? 8.0 * static_cast<double>(s.bytes_out) / params : 0.0, human_count(params),
      human_bytes(s.seconds > 0 ? static_cast<double>(s.bytes_in) / s.seconds : 0.0),
      human_bytes(static_cast<double>(s.peak_buffer_bytes)), o.out, s.shards,
      s.shards == 1 ? "" : "s");
}

void add_quantize_command(CLI::App& app) {
  auto o = std::make_shared<QuantizeCliOptions>();
  auto* cmd = app.add_subcommand(
      "quantize", "Quantize a dense safetensors checkpoint into an MLX-compatible one");
  cmd->footer(
      "Reads a .safetensors file or a checkpoint directory (sharded or not) tensor by tensor\n"
      "and writes <m>.weight (U32 codes), <m>.scales [, <m>.biases] and config.json with a\n"
      "\"quantization\" block, as mlx-lm does. Like mlx-lm, every 2-D .weight (linear layers\n"
      "and embeddings; 3-D under switch_mlp./experts.) whose last axis is a multiple of the\n"
      "group is quantized; norms, biases and the rest are copied. Example:\n"
      "  quanta quantize ./llama ./llama-4bit --bits 4 --group 64 --skip 'embed_tokens'");
  cmd->add_option("IN", o->in, "dense checkpoint: .safetensors file or directory")->required();
  cmd->add_option("OUT", o->out, "output directory (created)")->required();
  cmd->add_option("--mode", o->mode, "quantization mode (MLX's)")
      ->check(CLI::IsMember({"affine", "mxfp4", "mxfp8", "nvfp4"}))
      ->capture_default_str();
  cmd->add_option("--bits", o->bits, "bits per weight (affine: 2,3,4,5,6,8; default 4)");
  cmd->add_option("--group", o->group, "group size along K (affine: 32,64,128; default 64)");
  cmd->add_option("--skip", o->skip, "regex: tensors whose name matches stay dense");
  cmd->add_option("--threads", o->threads, "worker threads (0 = all cores)")
      ->check(CLI::Range(0, 4096))
      ->capture_default_str();
  cmd->add_option("--shard-size", o->shard_gb, "largest output file in GB")
      ->check(CLI::Range(0.001, 1e6))
      ->capture_default_str();
  cmd->add_flag("--force", o->force, "replace a checkpoint already in OUT");
  cmd->add_flag("--dry-run", o->dry_run, "list which tensors would be quantized, write nothing");
  cmd->add_flag("-q,--quiet", o->quiet, "no progress bar");
  cmd->callback([o] { run_quantize(*o); });
}

const CommandRegistration kRegistration{"quantize", 20, add_quantize_command};

}  // namespace

}  // namespace quanta::cli
