#include "suites.hpp"

#include <fmt/format.h>

#include <charconv>

#include "quanta/error.hpp"

namespace quanta::bench {

namespace {

// Formats as shipped by the owners: MLX's defaults (affine 4/8-bit group 64, the MX and NV fp4/
// fp8 modes), OCP fp8 per channel, and the GGUF types llama.cpp users download most.
std::vector<Format> shipped_formats() {
  return {Format::affine(4, 64),
          Format::affine(8, 64),
          Format::mxfp4(),
          Format::nvfp4(),
          Format::mxfp8(),
          Format::fp8_e4m3(),
          Format::gguf(Scheme::q4_0),
          Format::gguf(Scheme::q8_0),
          Format::gguf(Scheme::q4_K),
          Format::gguf(Scheme::q6_K)};
}

// Weight shapes of real models, from each model's config.json on Hugging Face (W is [N, K],
// K the input features). Attention K/V projections are num_key_value_heads * head_dim wide.
std::vector<Shape> model_shapes() {
  const std::string llama =
      "meta-llama/Meta-Llama-3-8B config.json: hidden_size 4096, "
      "intermediate_size 14336, num_key_value_heads 8, head_dim 128";
  const std::string qwen8 =
      "Qwen/Qwen3-8B config.json: hidden_size 4096, intermediate_size "
      "12288, num_key_value_heads 8, head_dim 128";
  const std::string qwen32 =
      "Qwen/Qwen2.5-32B config.json: hidden_size 5120, intermediate_size "
      "27648, num_attention_heads 40, num_key_value_heads 8";
  const std::string moe =
      "Qwen/Qwen3-30B-A3B config.json: hidden_size 2048, "
      "moe_intermediate_size 768, num_experts 128, num_experts_per_tok 8, "
      "num_attention_heads 32, num_key_value_heads 4, head_dim 128";
  return {
      {"llama3-8b.q_o", llama, 4096, 4096},
      {"llama3-8b.k_v", llama, 1024, 4096},
      {"llama3-8b.gate_up", llama, 14336, 4096},
      {"llama3-8b.down", llama, 4096, 14336},
      {"qwen3-8b.k_v", qwen8, 1024, 4096},
      {"qwen3-8b.gate_up", qwen8, 12288, 4096},
      {"qwen3-8b.down", qwen8, 4096, 12288},
      {"qwen2.5-32b.q_o", qwen32, 5120, 5120},
      {"qwen2.5-32b.gate_up", qwen32, 27648, 5120},
      {"qwen2.5-32b.down", qwen32, 5120, 27648},
      {"qwen3-30b-a3b.q", moe, 4096, 2048},
      {"qwen3-30b-a3b.o", moe, 2048, 4096},
      {"qwen3-30b-a3b.k_v", moe, 512, 2048},
      {"qwen3-30b-a3b.experts.gate_up", moe, 768, 2048, 128},
      {"qwen3-30b-a3b.experts.down", moe, 2048, 768, 128},
  };
}

std::vector<Shape> seed_shapes() {
  const std::string src = "seeds: the shapes the seed benches and h200-baselines.md report";
  return {{"seed.4096x4096", src, 4096, 4096},
          {"seed.5120x5120", src, 5120, 5120},
          {"seed.14336x5120", src, 14336, 5120},
          {"seed.5120x14336", src, 5120, 14336},
          {"seed.27648x5120", src, 27648, 5120}};
}

const std::vector<DType> kAll = {DType::f32, DType::f16, DType::bf16};

}  // namespace

const std::vector<int64_t>& default_ms() {
  static const std::vector<int64_t> ms = {1, 2, 4, 8, 16, 32, 64, 128, 512, 2048};
  return ms;
}

const std::vector<int64_t>& check_ms() {
  static const std::vector<int64_t> ms = {1, 2, 3, 7, 16, 33, 128};
  return ms;
}

std::optional<Suite> find_suite(std::string_view name) {
  if (name == "quick") {
    // Sized for the 2-core CI machine: every shipped format once per dtype at decode and a
    // small batch, one small MoE stack; the kernel the selector picks for each, so adding a
    // kernel to a table changes what runs, not how long.
    Suite s{"quick",
            "CI smoke: shipped formats on a 1024x2048 projection and an 8-expert stack, M = 1, 8",
            {{"quick.1024x2048", "a small projection (CI-sized)", 1024, 2048},
             {"quick.moe8x256x1024", "a small 8-expert MoE stack (CI-sized)", 256, 1024, 8}},
            {1, 8},
            shipped_formats(),
            {DType::f32, DType::bf16},
            {Layout::nk},
            /*automatic=*/true};
    return s;
  }
  if (name == "seeds")
    return Suite{"seeds",           "the seeds' N x K shapes over the M sweep",
                 seed_shapes(),     default_ms(),
                 shipped_formats(), kAll,
                 {Layout::nk}};
  if (name == "models")
    return Suite{"models",          "projection shapes of real models over the M sweep",
                 model_shapes(),    default_ms(),
                 shipped_formats(), kAll,
                 {Layout::nk}};
  if (name == "full") {
    Suite s{"full",
            "every format, dtype and layout on the seeds' and the models' shapes",
            seed_shapes(),
            default_ms(),
            {},
            kAll,
            {Layout::nk, Layout::kn}};
    for (Shape& m : model_shapes()) s.shapes.push_back(m);
    return s;
  }
  return std::nullopt;
}

std::vector<std::string> suite_names() {
  return {"quick", "seeds", "models", "full"};
}

std::vector<int64_t> parse_m_list(std::string_view text) {
  std::vector<int64_t> out;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const std::size_t comma = std::min(text.find(',', pos), text.size());
    const std::string_view item = text.substr(pos, comma - pos);
    int64_t v = 0;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (item.empty() || ec != std::errc() || end != item.data() + item.size() || v < 1 ||
        v > (1 << 20))
      throw Error(fmt::format(
          "[quanta::bench] --m: '{}' must be a comma-separated list of integers in [1, {}]", text,
          1 << 20));
    out.push_back(v);
    pos = comma + 1;
  }
  return out;
}

std::vector<DType> parse_dtype_list(std::string_view text) {
  std::vector<DType> out;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const std::size_t comma = std::min(text.find(',', pos), text.size());
    const auto t = parse_dtype(text.substr(pos, comma - pos));
    if (!t)
      throw Error(fmt::format("[quanta::bench] --dtype: '{}' must list f32, f16 or bf16", text));
    out.push_back(*t);
    pos = comma + 1;
  }
  return out;
}

}  // namespace quanta::bench
