// Files written by the owners' own tools (scripts/fixtures/make_io_fixtures.py): an MLX
// checkpoint (mlx.core) and a GGUF file (gguf-py), read by quanta and decoded to the owners'
// own dequantized values, bit for bit. Plus, when mlx is importable, a checkpoint written by
// `quanta quantize` loaded and dequantized by MLX itself.
#include <gtest/gtest.h>

#include <cstdlib>

#include "quanta/numeric.hpp"
#include "quanta/ops.hpp"
#include "quanta/reference.hpp"
#include "test_io_util.hpp"

namespace quanta {
namespace {

namespace fs = std::filesystem;
using io::ElemType;

const fs::path kFixtures = QUANTA_FIXTURE_DIR;

// Dequantizes `q` into `dtype` and returns the raw bytes.
std::vector<std::byte> dequantized_bytes(const QuantizedMatrix& q, DType dtype) {
  const int64_t rows = q.batch * q.n;
  std::vector<std::byte> out(static_cast<std::size_t>(rows * q.k) * dtype_size(dtype));
  dequantize(q, MatrixView{out.data(), dtype, rows, q.k});
  return out;
}

TEST(IoFixtures, MlxCheckpointDequantizesLikeMlx) {
  const auto ck = io::Checkpoint::open(kFixtures / "mlx" / "tiny");
  const auto expected =
      io::SafetensorsFile::open(kFixtures / "mlx" / "tiny" / "expected.safetensors");
  const auto ms = io::model_tensors(ck);
  std::size_t quantized = 0;
  for (const auto& m : ms) {
    if (!m.quantized) continue;
    ++quantized;
    const io::TensorInfo* e = expected.find(m.name);
    ASSERT_NE(e, nullptr) << m.name;
    EXPECT_EQ(e->shape, m.shape) << m.name;
    // Zero-copy: the codes are the file's bytes.
    const auto file = ck.files()[0].file()->bytes();
    const auto* codes = reinterpret_cast<const std::byte*>(m.quantized->codes);
    EXPECT_TRUE(codes >= file.data() && codes < file.data() + file.size()) << m.name;
    const auto got = dequantized_bytes(*m.quantized, *io::to_dtype(e->type));
    ASSERT_EQ(got.size(), e->data.size()) << m.name;
    std::size_t diff = 0;
    for (std::size_t i = 0; i < got.size(); ++i) diff += got[i] != e->data[i];
    EXPECT_EQ(diff, 0u) << m.name << " (" << m.format_name() << ") differs from mx.dequantize";
  }
  EXPECT_EQ(quantized, 8u);
  const auto lm =
      std::find_if(ms.begin(), ms.end(), [](const auto& m) { return m.name == "lm_head.weight"; });
  ASSERT_NE(lm, ms.end());
  EXPECT_FALSE(lm->quantized);  // "lm_head": false in config.json
  EXPECT_EQ(ck.quantization()->for_module("model.layers.0.self_attn.k_proj"), Format::nvfp4());
}

float load_f32(const io::TensorInfo& t, std::size_t i) {
  if (t.type == ElemType::f32) {
    float v;
    std::memcpy(&v, t.data.data() + 4 * i, 4);
    return v;
  }
  uint16_t h;
  std::memcpy(&h, t.data.data() + 2 * i, 2);
  return t.type == ElemType::f16 ? f16_bits_to_f32(h) : bf16_bits_to_f32(h);
}

TEST(IoFixtures, GgufFileReadsLikeGgufPy) {
  const auto g = io::GgufFile::open(kFixtures / "gguf" / "tiny.gguf");
  const auto expected = io::SafetensorsFile::open(kFixtures / "gguf" / "tiny.expected.safetensors");
  EXPECT_EQ(g.version(), 3u);
  EXPECT_EQ(g.find("general.architecture")->s, "llama");
  EXPECT_EQ(g.find("test.u8")->u, 200u);
  EXPECT_EQ(g.find("test.i8")->i, -100);
  EXPECT_EQ(g.find("test.u16")->u, 60000u);
  EXPECT_EQ(g.find("test.i16")->i, -30000);
  EXPECT_EQ(g.find("test.u32")->u, 4000000000u);
  EXPECT_EQ(g.find("test.i32")->i, -2000000000);
  EXPECT_EQ(g.find("test.f32")->f, 1.5);
  EXPECT_EQ(g.find("test.bool")->u, 1u);
  EXPECT_EQ(g.find("test.string")->s, "héllo ✓");
  EXPECT_EQ(g.find("test.u64")->u, (uint64_t{1} << 63) + 5);
  EXPECT_EQ(g.find("test.i64")->i, -(int64_t{1} << 62));
  EXPECT_EQ(g.find("test.f64")->f, -2.25);
  EXPECT_EQ(g.find("test.array_i32")->summary(), "[i32 x 3: 1, -2, 3]");
  EXPECT_EQ(g.find("test.array_f32")->summary(), "[f32 x 2: 0.5, 1.5]");
  EXPECT_EQ(g.find("test.array_str")->summary(), "[string x 3: \"a\", \"bc\", \"\"]");
  EXPECT_EQ(g.find("test.array_nested")->summary(), "[array x 2: [i32 x 2: 1, 2], [i32 x 1: 3]]");
  EXPECT_EQ(g.find("tokenizer.ggml.tokens")->at(3).s, "hello");

  ASSERT_EQ(g.tensors().size(), 9u);
  for (const auto& t : g.tensors()) {
    const io::TensorInfo* e = expected.find(t.name);
    ASSERT_NE(e, nullptr) << t.name;
    ASSERT_EQ(e->numel(), t.numel()) << t.name;
    if (t.type->dense) {
      io::TensorInfo view{std::string(t.name), *t.type->dense, {t.numel()}, t.data, ""};
      for (std::size_t i = 0; i < static_cast<std::size_t>(t.numel()); ++i)
        ASSERT_EQ(load_f32(view, i), load_f32(*e, i)) << t.name << " element " << i;
      continue;
    }
    if (!t.type->scheme) {
      EXPECT_EQ(t.type->name, "IQ4_NL");
      EXPECT_THROW(g.matrix(t), NotSupported);
      continue;
    }
    const QuantizedMatrix q = g.matrix(t);
    const auto got = dequantized_bytes(q, DType::f32);
    ASSERT_EQ(got.size(), e->data.size());
    EXPECT_TRUE(std::equal(got.begin(), got.end(), e->data.begin()))
        << t.name << " (" << t.type->name << ") differs from gguf.dequantize";
  }
  EXPECT_EQ(g.matrix(*g.find_tensor("blk.0.experts_q8_0")).batch, 2);
}

// A checkpoint written by quanta::io::quantize_checkpoint, loaded by MLX: mx.quantize of the
// dense source gives the same bytes and mx.dequantize the same values as quanta.
TEST(IoFixtures, MlxLoadsQuantaCheckpoints) {
  if (std::system("python3 -c 'import mlx.core' > /dev/null 2>&1") != 0)
    GTEST_SKIP() << "mlx is not importable (pip install 'mlx[cpu]')";
  test::TempDir dir;
  const std::string script =
      std::string(QUANTA_SOURCE_DIR) + "/scripts/fixtures/mlx_interop_check.py";
  const std::string synth = std::string(QUANTA_SOURCE_DIR) + "/scripts/synth_checkpoint.py";
  ASSERT_EQ(std::system(("python3 " + synth + " " + (dir / "dense").string() +
                         " --layers 1 --hidden 128 --intermediate 256 --vocab 512 --heads 2 "
                         "--kv-heads 1 --shards 2 > /dev/null")
                            .c_str()),
            0);
  for (const Format& f : {Format::affine(4, 64), Format::affine(3, 32), Format::affine(8, 128),
                          Format::mxfp4(), Format::mxfp8(), Format::nvfp4()}) {
    const auto out = dir / f.name();
    io::QuantizeCheckpointOptions o;
    o.format = f;
    io::quantize_checkpoint(dir / "dense", out, o);
    // quanta's own dequantization, for MLX to compare with.
    std::vector<std::pair<io::TensorSpec, std::vector<std::byte>>> deq;
    for (const auto& m : io::model_tensors(io::Checkpoint::open(out)))
      if (m.quantized) {
        const DType t = f.scheme == Scheme::affine ? m.quantized->scale_dtype : DType::f32;
        deq.push_back({{m.name, io::to_elem_type(t), m.shape}, dequantized_bytes(*m.quantized, t)});
      }
    std::vector<io::TensorData> td;
    for (const auto& [s, b] : deq) td.push_back({s, b});
    io::write_safetensors(dir / (f.name() + ".dequant.safetensors"), td);
    const std::string cmd = "python3 " + script + " " + (dir / "dense").string() + " " +
                            out.string() + " " +
                            (dir / (f.name() + ".dequant.safetensors")).string();
    const int rc = std::system(cmd.c_str());
    ASSERT_TRUE(WIFEXITED(rc));
    EXPECT_EQ(WEXITSTATUS(rc), 0) << f.name() << ": " << cmd;
  }
}

}  // namespace
}  // namespace quanta
