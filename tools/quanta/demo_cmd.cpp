// `quanta demo`: quantize random weights in every format, multiply on the CPU and report the
// error against the fp64 oracle and against the dense product, with bits per weight.
#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <random>
#include <vector>

#include "commands.hpp"
#include "format/dense.hpp"
#include "quanta/error.hpp"
#include "quanta/ops.hpp"
#include "quanta/reference.hpp"

namespace quanta::cli {

namespace {

struct DemoOptions {
  int64_t m = 4, n = 256, k = 1024;
  std::string dtype = "f32";
  unsigned seed = 1;
};

void run_demo(const DemoOptions& o) {
  const DType dt = *parse_dtype(o.dtype);
  std::mt19937 rng(o.seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<unsigned char> w(static_cast<size_t>(o.n * o.k) * dtype_size(dt));
  std::vector<unsigned char> x(static_cast<size_t>(o.m * o.k) * dtype_size(dt));
  for (int64_t i = 0; i < o.n * o.k; ++i)
    dense::store(w.data(), dt, static_cast<size_t>(i), normal(rng) * 0.05f);
  for (int64_t i = 0; i < o.m * o.k; ++i)
    dense::store(x.data(), dt, static_cast<size_t>(i), normal(rng));
  const ConstMatrixView wv{w.data(), dt, o.n, o.k}, xv{x.data(), dt, o.m, o.k};

  // The dense product in fp64: what quantization error is measured against.
  const auto wd = ref::to_double(wv), xd = ref::to_double(xv);
  std::vector<double> dense_y(static_cast<size_t>(o.m * o.n));
  for (int64_t i = 0; i < o.m; ++i)
    for (int64_t j = 0; j < o.n; ++j) {
      double acc = 0;
      for (int64_t kk = 0; kk < o.k; ++kk) acc += xd[i * o.k + kk] * wd[j * o.k + kk];
      dense_y[static_cast<size_t>(i * o.n + j)] = acc;
    }

  fmt::print("quanta demo: x [{} x {}] · Wᵀ, W [{} x {}], {} activations, CPU backend\n", o.m, o.k,
             o.n, o.k, o.dtype);
  fmt::print("{:<16} {:>7} {:>12} {:>12} {:>10} {:>9}  {}\n", "format", "bits/w", "kernel rel-L2",
             "quant rel-L2", "cosine", "ms", "check");
  int failures = 0;
  for (const Format& f : all_formats()) {
    if (f.info().family == Family::gguf && (o.k % f.group_size)) continue;
    if (!f.info().encode) continue;  // K-quants are decode-only for now
    QuantizeOptions qo;
    if (f.scheme == Scheme::nvfp4) qo.nvfp4_tensor_amax = 0.05f * 6;  // exercise the global scale
    const QuantizedMatrix q = quantize(wv, f, qo);
    std::vector<unsigned char> y(static_cast<size_t>(o.m * o.n) * dtype_size(dt));
    const auto t0 = std::chrono::steady_clock::now();
    matmul(xv, q, MatrixView{y.data(), dt, o.m, o.n});
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    const auto oracle = ref::matmul(xv, q);
    const auto kernel = ref::compare(ConstMatrixView{y.data(), dt, o.m, o.n}, oracle, dt);
    const auto quant = ref::compare(std::span<const double>(oracle), dense_y, 1.0);
    failures += !kernel.pass;
    fmt::print("{:<16} {:>7.3f} {:>12.2e} {:>12.2e} {:>10.6f} {:>9.2f}  {}\n", f.name(),
               f.bits_per_weight(dt), kernel.rel_l2, quant.rel_l2, kernel.cosine, ms,
               kernel.pass ? "pass" : "FAIL");
  }
  fmt::print(
      "kernel rel-L2: CPU result vs the fp64 oracle on the same quantized weights (bound {:g});\n"
      "quant rel-L2: the oracle vs the dense fp64 product (the format's own error).\n",
      rel_l2_bound(dt));
  if (failures)
    throw Error(fmt::format("[quanta::demo] {} format(s) failed the oracle check", failures));
}

}  // namespace

namespace {
void add_demo_command(CLI::App& app) {
  auto opts = std::make_shared<DemoOptions>();
  auto* cmd = app.add_subcommand(
      "demo", "Quantize random weights in every format and check the CPU matmul");
  cmd->add_option("-m", opts->m, "rows of x")->check(CLI::Range(1, 4096));
  cmd->add_option("-n", opts->n, "output features")->check(CLI::Range(1, 1 << 16));
  cmd->add_option("-k", opts->k, "reduction length (multiple of 256)")
      ->check(CLI::Range(256, 1 << 16));
  cmd->add_option("--dtype", opts->dtype, "activation dtype")
      ->check(CLI::IsMember({"f32", "f16", "bf16"}));
  cmd->add_option("--seed", opts->seed, "random seed");
  cmd->callback([opts] { run_demo(*opts); });
}

const CommandRegistration kRegistration{"demo", 80, add_demo_command};
}  // namespace

}  // namespace quanta::cli
