// `quanta check DENSE QUANTIZED`: per-tensor error of a quantized checkpoint against its dense
// source (rel-L2, max |error|, SNR in dB) and a summary line.
#include <fmt/format.h>

#include <cmath>
#include <memory>

#include "commands.hpp"
#include "progress.hpp"
#include "quanta/error.hpp"
#include "quanta/io.hpp"

namespace quanta::cli {

namespace {

struct CheckCliOptions {
  std::string dense, quantized;
  int threads = 0;
  bool all = false, quiet = false;
  double max_rel_l2 = 0;
};

std::string db(double v) {
  return std::isinf(v) ? std::string("exact") : fmt::format("{:.2f}", v);
}

void run_check(const CheckCliOptions& o) {
  ProgressBar bar("check", !o.quiet);
  const io::CheckSummary s = io::check_checkpoint(
      o.dense, o.quantized, o.threads, [&](const io::QuantizeProgress& p) { bar.update(p); });
  bar.finish();
  fmt::print("{:<52} {:<20} {:>10} {:>10} {:>10} {:>8}\n", "tensor", "format", "params", "rel-L2",
             "max abs", "SNR dB");
  std::size_t dense_same = 0, dense_diff = 0, quantized = 0, nonfinite = 0;
  const io::TensorCheck* worst = nullptr;
  for (const auto& t : s.tensors) {
    if (t.quantized) {
      ++quantized;
      nonfinite += t.nonfinite > 0;
      if (!worst || !(t.rel_l2 <= worst->rel_l2)) worst = &t;
    } else {
      (t.rel_l2 == 0 ? dense_same : dense_diff)++;
    }
    if (t.quantized || o.all || t.rel_l2 != 0)
      fmt::print("{:<52} {:<20} {:>10} {:>10.4g} {:>10.4g} {:>8}\n", t.name, t.format,
                 human_count(static_cast<double>(t.numel)), t.rel_l2, t.max_abs, db(t.snr_db));
  }
  for (const auto& m : s.missing) fmt::print("{:<52} missing from {}\n", m, o.quantized);
  for (const auto& m : s.unexpected) fmt::print("{:<52} has no dense source in {}\n", m, o.dense);
  fmt::print(
      "check: {} quantized tensors ({} params), worst rel-L2 {:.4g}{}, SNR {} dB over all "
      "quantized weights; {} dense tensors identical, {} differ; {} missing, {} without source\n",
      quantized, human_count(static_cast<double>(s.quantized_params)), s.worst_rel_l2,
      worst ? fmt::format(" ({})", worst->name) : std::string(), db(s.snr_db), dense_same,
      dense_diff, s.missing.size(), s.unexpected.size());
  if (nonfinite)
    throw Error(fmt::format("[quanta::check] {}: {} tensor(s) dequantize to NaN or Inf",
                            o.quantized, nonfinite));
  if (o.max_rel_l2 > 0 && !(s.worst_rel_l2 <= o.max_rel_l2))
    throw Error(fmt::format("[quanta::check] {}: worst rel-L2 {:.4g} exceeds --max-rel-l2 {:g}",
                            o.quantized, s.worst_rel_l2, o.max_rel_l2));
}

void add_check_command(CLI::App& app) {
  auto o = std::make_shared<CheckCliOptions>();
  auto* cmd = app.add_subcommand(
      "check", "Compare a quantized checkpoint with its dense source, tensor by tensor");
  cmd->footer(
      "Dequantizes every quantized weight and reports rel-L2 (||w - q|| / ||w||), max |w - q|\n"
      "and SNR in dB per tensor, then a summary line. Example:\n"
      "  quanta check ./llama ./llama-4bit --max-rel-l2 0.15");
  cmd->add_option("DENSE", o->dense, "the dense checkpoint (file or directory)")->required();
  cmd->add_option("QUANTIZED", o->quantized, "the quantized checkpoint")->required();
  cmd->add_option("--threads", o->threads, "worker threads (0 = all cores)")
      ->check(CLI::Range(0, 4096));
  cmd->add_flag("--all", o->all, "list dense (copied) tensors too");
  cmd->add_option("--max-rel-l2", o->max_rel_l2,
                  "fail (exit 2) when any tensor's rel-L2 is above this");
  cmd->add_flag("-q,--quiet", o->quiet, "no progress bar");
  cmd->callback([o] { run_check(*o); });
}

const CommandRegistration kRegistration{"check", 30, add_check_command};

}  // namespace

}  // namespace quanta::cli
