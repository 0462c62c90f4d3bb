// Checkpoints: config.json quantization blocks, sharded directories, MLX's quantized layout on
// QuantizedMatrix, and the quantize / check jobs (bit-exact with quanta::quantize).
#include <gtest/gtest.h>

#include <fmt/ranges.h>

#include <nlohmann/json.hpp>

#include "quanta/ops.hpp"
#include "quanta/reference.hpp"
#include "test_io_util.hpp"
#include "test_util.hpp"

namespace quanta {
namespace {

namespace fs = std::filesystem;
using io::ElemType;
using nlohmann::json;

TEST(IoCheckpoint, QuantizationConfig) {
  const auto c = io::parse_quantization_config(
      R"({"model_type":"llama","quantization":{"group_size":32,"bits":3,"mode":"affine",
          "lm_head":{"group_size":64,"bits":8},"a.q":{"mode":"mxfp4"},"a.k":{"mode":"nvfp4",
          "group_size":16,"bits":4},"a.v":false,"a.o":true,"quant_method":"x"}})",
      "config.json");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->base, Format::affine(3, 32));
  EXPECT_EQ(c->for_module("lm_head"), Format::affine(8, 64));
  EXPECT_EQ(c->for_module("a.q"), Format::mxfp4());
  EXPECT_EQ(c->for_module("a.k"), Format::nvfp4());
  EXPECT_EQ(c->for_module("a.v"), std::nullopt);
  EXPECT_EQ(c->for_module("a.o"), Format::affine(3, 32));
  EXPECT_EQ(c->for_module("other"), Format::affine(3, 32));
  // Missing keys take MLX's defaults for the mode.
  EXPECT_EQ(io::parse_quantization_config(R"({"quantization":{}})", "c")->base,
            Format::affine(4, 64));
  EXPECT_EQ(io::parse_quantization_config(R"({"quantization":{"mode":"mxfp8"}})", "c")->base,
            Format::mxfp8());
  EXPECT_FALSE(io::parse_quantization_config(R"({"hidden_size":4})", "c"));

  EXPECT_FILE_ERROR(io::parse_quantization_config("{", "cfg.json"), "cfg.json", "not valid JSON");
  EXPECT_FILE_ERROR(io::parse_quantization_config("[]", "cfg.json"), "cfg.json",
                    "not a JSON object");
  EXPECT_FILE_ERROR(io::parse_quantization_config(R"({"quantization":3})", "cfg.json"), "cfg.json",
                    "not a JSON object");
  EXPECT_FILE_ERROR(io::parse_quantization_config(R"({"quantization":{"bits":7}})", "cfg.json"),
                    "cfg.json", "bits");
  EXPECT_FILE_ERROR(
      io::parse_quantization_config(R"({"quantization":{"mode":"q4_0"}})", "cfg.json"), "cfg.json",
      "unknown mode");
  EXPECT_FILE_ERROR(
      io::parse_quantization_config(R"({"quantization":{"mode":"mxfp4","bits":8}})", "cfg.json"),
      "cfg.json", "takes bits 4");
  EXPECT_FILE_ERROR(
      io::parse_quantization_config(R"({"quantization":{"x":{"bits":"4"}}})", "cfg.json"),
      "cfg.json", "override 'x'");
}

// A dense bf16 tensor of random values.
struct DenseTensor {
  std::string name;
  test::Dense d;
  std::vector<int64_t> shape;
};
DenseTensor dense_tensor(std::string name, std::vector<int64_t> shape, uint32_t seed,
                         DType t = DType::bf16) {
  int64_t rows = 1;
  for (std::size_t i = 0; i + 1 < shape.size(); ++i) rows *= shape[i];
  return {std::move(name),
          test::random_dense(t, rows, shape.empty() ? 1 : shape.back(), seed, 0.05f),
          std::move(shape)};
}
io::TensorData data_of(const DenseTensor& t) {
  return {{t.name, io::to_elem_type(t.d.dtype), t.shape}, test::byte_span(t.d.bytes)};
}

// A Llama-like dense checkpoint in `dir`, in `shards` files with an index when > 1.
std::vector<DenseTensor> make_dense(const fs::path& dir, int shards) {
  std::vector<DenseTensor> ts;
  ts.push_back(dense_tensor("model.embed_tokens.weight", {96, 64}, 1));
  ts.push_back(dense_tensor("model.layers.0.self_attn.q_proj.weight", {64, 64}, 2));
  ts.push_back(dense_tensor("model.layers.0.mlp.up_proj.weight", {128, 64}, 3, DType::f32));
  ts.push_back(dense_tensor("model.layers.0.mlp.down_proj.weight", {64, 128}, 4, DType::f16));
  ts.push_back(dense_tensor("model.layers.0.mlp.switch_mlp.gate_proj.weight", {2, 32, 64}, 5));
  ts.push_back(dense_tensor("model.layers.0.input_layernorm.weight", {64}, 6));
  ts.push_back(dense_tensor("model.layers.0.self_attn.q_proj.bias", {64}, 7));
  ts.push_back(dense_tensor("model.layers.0.odd.weight", {8, 48}, 8));  // 48 % 64 != 0
  ts.push_back(dense_tensor("lm_head.weight", {96, 64}, 9));
  fs::create_directories(dir);
  json index;
  for (int s = 0; s < shards; ++s) {
    std::vector<io::TensorData> part;
    const std::string file = shards == 1
                                 ? "model.safetensors"
                                 : fmt::format("model-{:05d}-of-{:05d}.safetensors", s + 1, shards);
    for (std::size_t i = static_cast<std::size_t>(s); i < ts.size();
         i += static_cast<std::size_t>(shards)) {
      part.push_back(data_of(ts[i]));
      index["weight_map"][ts[i].name] = file;
    }
    io::write_safetensors(dir / file, part);
  }
  if (shards > 1) test::write_text(dir / "model.safetensors.index.json", index.dump());
  test::write_text(dir / "config.json", R"({"model_type":"llama","hidden_size":64})");
  test::write_text(dir / "tokenizer.json", R"({"x":1})");
  return ts;
}

TEST(IoCheckpoint, OpensFilesDirectoriesAndShards) {
  test::TempDir dir;
  const auto ts = make_dense(dir / "sharded", 3);
  const auto c = io::Checkpoint::open(dir / "sharded");
  EXPECT_EQ(c.files().size(), 3u);
  EXPECT_EQ(c.tensors().size(), ts.size());
  for (const auto& t : ts) {
    const io::TensorInfo* r = c.find(t.name);
    ASSERT_NE(r, nullptr) << t.name;
    EXPECT_TRUE(std::equal(r->data.begin(), r->data.end(), test::byte_span(t.d.bytes).begin()));
  }
  EXPECT_FALSE(c.quantization());
  EXPECT_NE(c.config_json().find("llama"), std::string::npos);
  // The index file itself, one shard file, and a directory of shards without an index.
  EXPECT_EQ(io::Checkpoint::open(dir / "sharded" / "model.safetensors.index.json").tensors().size(),
            ts.size());
  EXPECT_EQ(
      io::Checkpoint::open(dir / "sharded" / "model-00002-of-00003.safetensors").files().size(),
      1u);
  fs::remove(dir / "sharded" / "model.safetensors.index.json");
  EXPECT_EQ(io::Checkpoint::open(dir / "sharded").tensors().size(), ts.size());
  make_dense(dir / "single", 1);
  EXPECT_EQ(io::Checkpoint::open(dir / "single").files().size(), 1u);
}

TEST(IoCheckpoint, BadDirectoriesAndIndexes) {
  test::TempDir dir;
  make_dense(dir / "c", 2);
  const auto idx = dir / "c" / "model.safetensors.index.json";
  const std::string name = idx.string();
  EXPECT_FILE_ERROR(io::Checkpoint::open(dir / "nope"), "nope", "no such file");
  fs::create_directories(dir / "empty");
  EXPECT_FILE_ERROR(io::Checkpoint::open(dir / "empty"), "empty", "no .safetensors");
  test::write_text(idx, R"({"weight_map":{"a":"../../etc/passwd"}})");
  EXPECT_FILE_ERROR(io::Checkpoint::open(dir / "c"), name, "not a file name in this directory");
  test::write_text(idx, R"({"weight_map":{"a":"missing.safetensors"}})");
  EXPECT_FILE_ERROR(io::Checkpoint::open(dir / "c"), "missing.safetensors", "cannot open");
  test::write_text(idx, R"({"weight_map":{"nope":"model-00001-of-00002.safetensors"}})");
  EXPECT_FILE_ERROR(io::Checkpoint::open(dir / "c"), name, "'nope' is listed");
  test::write_text(idx, R"({"weight_map":{"lm_head.weight":"model-00001-of-00002.safetensors"}})");
  EXPECT_FILE_ERROR(io::Checkpoint::open(dir / "c"), name, "the index lists 1");
  test::write_text(idx, R"({"weights":{}})");
  EXPECT_FILE_ERROR(io::Checkpoint::open(dir / "c"), name, "weight_map");
  fs::remove(idx);
  test::write_text(dir / "c" / "config.json", "{not json");
  EXPECT_FILE_ERROR(io::Checkpoint::open(dir / "c"), "config.json", "not valid JSON");
  // The same tensor in two shards.
  test::write_text(dir / "c" / "config.json", "{}");
  std::vector<float> v(4);
  io::write_safetensors(
      dir / "c" / "model-extra.safetensors",
      std::vector<io::TensorData>{{{"lm_head.weight", ElemType::f32, {4}}, test::byte_span(v)}});
  EXPECT_FILE_ERROR(io::Checkpoint::open(dir / "c"), "c", "appears in both");
}

// Quantizes `t` with quanta::quantize and returns MLX's tensors for it.
std::vector<std::pair<io::TensorSpec, std::vector<std::byte>>> mlx_tensors(const DenseTensor& t,
                                                                           const Format& f) {
  const QuantizedMatrix q = quantize(t.d.view(), f);
  const Footprint fp = q.footprint();
  const std::string m = t.name.substr(0, t.name.size() - 7);
  auto shape = t.shape;
  const int64_t k = shape.back();
  std::vector<std::pair<io::TensorSpec, std::vector<std::byte>>> out;
  shape.back() = k * f.bits / 32;
  out.push_back({{t.name, ElemType::u32, shape}, {q.codes, q.codes + fp.code_bytes}});
  shape.back() = k / f.group_size;
  const bool affine = f.scheme == Scheme::affine;
  out.push_back({{m + ".scales", affine ? io::to_elem_type(t.d.dtype) : ElemType::u8, shape},
                 {q.scales, q.scales + fp.scale_bytes}});
  if (affine)
    out.push_back({{m + ".biases", io::to_elem_type(t.d.dtype), shape},
                   {q.biases, q.biases + fp.bias_bytes}});
  return out;
}

TEST(IoCheckpoint, MlxLayoutMapsOntoQuantizedMatrix) {
  test::TempDir dir;
  const auto a = dense_tensor("m.a.weight", {16, 128}, 1);
  const auto b = dense_tensor("m.b.weight", {2, 8, 64}, 2, DType::f16);  // stacked experts
  const auto c = dense_tensor("m.c.weight", {8, 64}, 3);
  std::vector<std::pair<io::TensorSpec, std::vector<std::byte>>> all;
  for (auto&& x : mlx_tensors(a, Format::affine(3, 64))) all.push_back(x);
  for (auto&& x : mlx_tensors(b, Format::affine(4, 32))) all.push_back(x);
  for (auto&& x : mlx_tensors(c, Format::nvfp4())) all.push_back(x);
  std::vector<io::TensorData> td;
  for (const auto& [s, bytes] : all) td.push_back({s, bytes});
  const auto norm = dense_tensor("m.norm.weight", {64}, 4);
  td.push_back(data_of(norm));
  io::write_safetensors(dir / "model.safetensors", td);
  test::write_text(dir / "config.json",
                   R"({"quantization":{"group_size":64,"bits":3,"m.b":{"group_size":32,"bits":4},
                       "m.c":{"mode":"nvfp4"}}})");
  const auto ck = io::Checkpoint::open(dir.path);
  const auto ms = io::model_tensors(ck);
  ASSERT_EQ(ms.size(), 4u);
  const auto& qa = ms[0];
  EXPECT_EQ(qa.name, "m.a.weight");
  ASSERT_TRUE(qa.quantized);
  EXPECT_EQ(qa.shape, (std::vector<int64_t>{16, 128}));
  EXPECT_EQ(qa.format_name(), "affine-3b-g64 bf16");
  EXPECT_EQ(ref::dequantize(*qa.quantized),
            ref::dequantize(quantize(a.d.view(), Format::affine(3, 64))));
  EXPECT_EQ(reinterpret_cast<const std::byte*>(qa.quantized->codes),
            ck.find("m.a.weight")->data.data());
  EXPECT_NEAR(qa.bits_per_weight(), Format::affine(3, 64).bits_per_weight(DType::bf16), 1e-12);
  const auto& qb = ms[1];
  ASSERT_TRUE(qb.quantized);
  EXPECT_EQ(qb.quantized->batch, 2);
  EXPECT_EQ(qb.quantized->n, 8);
  const auto whole = ref::dequantize(quantize(b.d.view(), Format::affine(4, 32)));
  EXPECT_EQ(ref::dequantize(*qb.quantized, 1),
            std::vector<double>(whole.begin() + 8 * 64, whole.end()));
  EXPECT_EQ(ms[2].quantized->format, Format::nvfp4());
  EXPECT_EQ(ms[3].dense, ck.find("m.norm.weight"));
}

TEST(IoCheckpoint, MisalignedBuffersAreCopied) {
  // A 1-byte tensor first puts the U32 codes at an odd offset.
  const auto a = dense_tensor("m.weight", {2, 64}, 1, DType::f16);
  const auto parts = mlx_tensors(a, Format::affine(4, 64));
  std::string header = R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]})";
  std::vector<std::byte> data(1);
  for (const auto& [s, b] : parts) {
    header += fmt::format(R"(,"{}":{{"dtype":"{}","shape":[{}],"data_offsets":[{},{}]}})", s.name,
                          io::elem_type_name(s.type), fmt::join(s.shape, ","), data.size(),
                          data.size() + b.size());
    data.insert(data.end(), b.begin(), b.end());
  }
  header += "}";
  header.append((8 - header.size() % 8) % 8, ' ');
  const auto bytes = test::safetensors_bytes(header, data);
  std::vector<io::SafetensorsFile> files;
  files.push_back(test::parse_st(bytes));
  const auto ck = io::Checkpoint::from_files(std::move(files), R"({"quantization":{}})", "mem");
  EXPECT_FALSE(ck.find("m.weight")->aligned());
  const auto ms = io::model_tensors(ck);
  ASSERT_TRUE(ms[1].quantized);
  EXPECT_NE(reinterpret_cast<const std::byte*>(ms[1].quantized->codes),
            ck.find("m.weight")->data.data());
  EXPECT_EQ(ref::dequantize(*ms[1].quantized),
            ref::dequantize(quantize(a.d.view(), Format::affine(4, 64))));
}

TEST(IoCheckpoint, BadMlxLayouts) {
  test::TempDir dir;
  const auto a = dense_tensor("m.weight", {4, 64}, 1);
  auto parts = mlx_tensors(a, Format::affine(4, 64));
  auto write = [&](std::string config, auto edit) {
    auto p = parts;
    edit(p);
    std::vector<io::TensorData> td;
    for (const auto& [s, b] : p) td.push_back({s, b});
    fs::remove_all(dir.path);
    fs::create_directories(dir.path);
    io::write_safetensors(dir / "model.safetensors", td);
    if (!config.empty()) test::write_text(dir / "config.json", config);
    return io::Checkpoint::open(dir.path);
  };
  const std::string q4 = R"({"quantization":{"group_size":64,"bits":4}})";
  EXPECT_FILE_ERROR(io::model_tensors(write("", [](auto&) {})), "", "no config.json");
  EXPECT_FILE_ERROR(io::model_tensors(write(q4, [](auto& p) { p.pop_back(); })),
                    "model.safetensors", "affine needs biases");
  EXPECT_FILE_ERROR(io::model_tensors(write(q4,
                                            [](auto& p) {
                                              p[1].first.shape = {2, 2};
                                              p[1].second.resize(8);
                                              p[2].first.shape = {2, 2};
                                              p[2].second.resize(8);
                                            })),
                    "model.safetensors", "scales shape");
  EXPECT_FILE_ERROR(
      io::model_tensors(write(R"({"quantization":{"group_size":64,"bits":8}})", [](auto&) {})),
      "model.safetensors", "scales shape");
  EXPECT_FILE_ERROR(io::model_tensors(write(q4, [](auto& p) { p[0].first.type = ElemType::i32; })),
                    "model.safetensors", "U32");
  EXPECT_FILE_ERROR(io::model_tensors(write(R"({"quantization":{"mode":"mxfp4"}})",
                                            [](auto& p) { p.pop_back(); })),
                    "model.safetensors", "needs U8 scales");
}

TEST(IoCheckpoint, KeepDenseRuleFollowsMlxLm) {
  const Format f = Format::affine(4, 64);
  auto info = [](std::string name, std::vector<int64_t> shape, ElemType t = ElemType::bf16) {
    io::TensorInfo i;
    i.name = std::move(name);
    i.shape = std::move(shape);
    i.type = t;
    return i;
  };
  EXPECT_FALSE(io::keep_dense_reason(info("model.embed_tokens.weight", {100, 64}), f));
  EXPECT_FALSE(io::keep_dense_reason(info("lm_head.weight", {100, 64}), f));
  EXPECT_FALSE(io::keep_dense_reason(info("l.mlp.switch_mlp.up_proj.weight", {4, 8, 64}), f));
  EXPECT_FALSE(io::keep_dense_reason(info("l.mlp.experts.up_proj.weight", {4, 8, 64}), f));
  EXPECT_TRUE(io::keep_dense_reason(info("l.conv1d.weight", {4, 8, 64}), f));
  EXPECT_TRUE(io::keep_dense_reason(info("l.norm.weight", {64}), f));
  EXPECT_TRUE(io::keep_dense_reason(info("l.q_proj.bias", {64, 64}), f));
  EXPECT_TRUE(io::keep_dense_reason(info("l.q_proj.weight", {64, 96}), f));
  EXPECT_TRUE(io::keep_dense_reason(info("l.q_proj.weight", {64, 64}, ElemType::i8), f));
  EXPECT_TRUE(io::keep_dense_reason(info("l.q_proj.weight", {0, 64}), f));
  EXPECT_EQ(io::keep_dense_reason(info("model.embed_tokens.weight", {100, 64}), f, "embed"),
            "matches --skip");
  EXPECT_THROW(io::keep_dense_reason(info("x.weight", {8, 64}), f, "("), Error);
}

class IoQuantize : public ::testing::TestWithParam<Format> {};

TEST_P(IoQuantize, CheckpointIsBitExactWithQuantize) {
  const Format f = GetParam();
  test::TempDir dir;
  const auto ts = make_dense(dir / "dense", 2);
  io::QuantizeCheckpointOptions o;
  o.format = f;
  o.threads = 3;
  o.max_shard_bytes = 12000;  // several output shards
  std::size_t calls = 0;
  const auto s =
      io::quantize_checkpoint(dir / "dense", dir / "q", o, [&](const io::QuantizeProgress& p) {
        ++calls;
        EXPECT_LE(p.bytes_done, p.bytes_total);
      });
  EXPECT_GT(calls, ts.size());
  EXPECT_GT(s.shards, 1u);
  EXPECT_TRUE(fs::exists(dir / "q" / "model.safetensors.index.json"));
  EXPECT_TRUE(fs::exists(dir / "q" / "tokenizer.json"));
  const auto ck = io::Checkpoint::open(dir / "q");
  ASSERT_TRUE(ck.quantization());
  EXPECT_EQ(ck.quantization()->base, f);
  const json config = json::parse(ck.config_json());
  EXPECT_EQ(config["model_type"], "llama");
  EXPECT_EQ(config["quantization_config"], config["quantization"]);
  const auto ms = io::model_tensors(ck);
  std::size_t quantized = 0;
  for (const auto& t : ts) {
    const auto it =
        std::find_if(ms.begin(), ms.end(), [&](const auto& m) { return m.name == t.name; });
    ASSERT_NE(it, ms.end()) << t.name;
    EXPECT_EQ(it->shape, t.shape);
    const io::TensorInfo info{t.name, io::to_elem_type(t.d.dtype), t.shape, {}, ""};
    if (io::keep_dense_reason(info, f)) {
      ASSERT_FALSE(it->quantized) << t.name;
      EXPECT_TRUE(std::equal(it->dense->data.begin(), it->dense->data.end(),
                             test::byte_span(t.d.bytes).begin()));
      continue;
    }
    ++quantized;
    ASSERT_TRUE(it->quantized) << t.name;
    const QuantizedMatrix want = quantize(t.d.view(), f);
    const Footprint fp = want.footprint();
    const QuantizedMatrix& got = *it->quantized;
    const std::size_t b = static_cast<std::size_t>(got.batch);
    EXPECT_EQ(std::memcmp(got.codes, want.codes, fp.code_bytes), 0) << t.name;
    EXPECT_EQ(fp.code_bytes, got.footprint().code_bytes * b);
    EXPECT_EQ(std::memcmp(got.scales, want.scales, fp.scale_bytes), 0) << t.name;
    if (fp.bias_bytes) {
      EXPECT_EQ(std::memcmp(got.biases, want.biases, fp.bias_bytes), 0) << t.name;
    }
  }
  EXPECT_EQ(quantized, s.quantized);
  // embed, q, up, down, switch_mlp, lm_head; nvfp4's group of 16 also takes the 48-wide one.
  EXPECT_EQ(quantized, f.group_size == 16 ? 7u : 6u);
}

INSTANTIATE_TEST_SUITE_P(Formats, IoQuantize,
                         ::testing::Values(Format::affine(4, 64), Format::affine(3, 32),
                                           Format::mxfp4(), Format::mxfp8(), Format::nvfp4()),
                         [](const auto& i) {
                           std::string n = i.param.name();
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

TEST(IoQuantizeJob, SkipForceAndRefusals) {
  test::TempDir dir;
  make_dense(dir / "dense", 1);
  io::QuantizeCheckpointOptions o;
  o.skip = "embed_tokens|lm_head";
  auto s = io::quantize_checkpoint(dir / "dense", dir / "q", o);
  EXPECT_EQ(s.quantized, 4u);
  EXPECT_EQ(s.shards, 1u);
  EXPECT_FALSE(io::model_tensors(io::Checkpoint::open(dir / "q"))[0].quantized);  // lm_head
  // OUT holds a checkpoint: refused without overwrite, replaced with it.
  EXPECT_FILE_ERROR(io::quantize_checkpoint(dir / "dense", dir / "q", {}), "q", "--force");
  o.overwrite = true;
  o.skip.clear();
  s = io::quantize_checkpoint(dir / "dense", dir / "q", o);
  EXPECT_EQ(s.quantized, 6u);
  // Quantized input, OUT = IN, non-MLX formats, bad regex.
  EXPECT_FILE_ERROR(io::quantize_checkpoint(dir / "q", dir / "q2", {}), "q", "already quantized");
  EXPECT_FILE_ERROR(io::quantize_checkpoint(dir / "dense", dir / "dense", o), "dense",
                    "input's directory");
  io::QuantizeCheckpointOptions fp8;
  fp8.format = Format::fp8_e4m3();
  EXPECT_THROW(io::quantize_checkpoint(dir / "dense", dir / "q3", fp8), Error);
  io::QuantizeCheckpointOptions bad;
  bad.skip = "[";
  EXPECT_THROW(io::quantize_checkpoint(dir / "dense", dir / "q3", bad), Error);
  EXPECT_FALSE(fs::exists(dir / "q3" / "model.safetensors"));
}

TEST(IoCheckJob, ReportsErrorPerTensor) {
  test::TempDir dir;
  const auto ts = make_dense(dir / "dense", 1);
  io::QuantizeCheckpointOptions o;
  io::quantize_checkpoint(dir / "dense", dir / "q", o);
  const auto c = io::check_checkpoint(dir / "dense", dir / "q", 2);
  EXPECT_EQ(c.tensors.size(), ts.size());
  EXPECT_TRUE(c.missing.empty());
  EXPECT_TRUE(c.unexpected.empty());
  for (const auto& t : c.tensors) {
    if (!t.quantized) {
      EXPECT_EQ(t.rel_l2, 0.0) << t.name;
      EXPECT_TRUE(std::isinf(t.snr_db));
      continue;
    }
    // 4-bit affine on Gaussian weights: about 0.1 relative error, ~20 dB.
    EXPECT_GT(t.rel_l2, 0.03) << t.name;
    EXPECT_LT(t.rel_l2, 0.2) << t.name;
    EXPECT_NEAR(t.snr_db, -20 * std::log10(t.rel_l2), 1e-9);
    EXPECT_EQ(t.nonfinite, 0);
  }
  EXPECT_GT(c.snr_db, 14);
  // The dense q_proj against its own dequantization: exact match with the oracle's numbers.
  const auto ms = io::model_tensors(io::Checkpoint::open(dir / "q"));
  const auto& q = *std::find_if(ms.begin(), ms.end(), [](const auto& m) {
                     return m.name == "model.layers.0.self_attn.q_proj.weight";
                   })->quantized;
  const auto deq = ref::dequantize(q);
  const auto src = ref::to_double(ts[1].d.view());
  double e2 = 0, r2 = 0;
  for (std::size_t i = 0; i < deq.size(); ++i)
    e2 += (deq[i] - src[i]) * (deq[i] - src[i]), r2 += src[i] * src[i];
  const auto it = std::find_if(c.tensors.begin(), c.tensors.end(), [](const auto& t) {
    return t.name == "model.layers.0.self_attn.q_proj.weight";
  });
  EXPECT_NEAR(it->rel_l2, std::sqrt(e2 / r2), 1e-6);
  // A checkpoint with a tensor missing and one too many.
  make_dense(dir / "other", 1);
  std::vector<float> v(4);
  io::write_safetensors(
      dir / "other" / "model.safetensors",
      std::vector<io::TensorData>{{{"extra.weight", ElemType::f32, {4}}, test::byte_span(v)}});
  const auto c2 = io::check_checkpoint(dir / "dense", dir / "other");
  EXPECT_EQ(c2.unexpected, std::vector<std::string>{"extra.weight"});
  EXPECT_EQ(c2.missing.size(), ts.size());
}

}  // namespace
}  // namespace quanta
