// GGUF: write -> read round trips (every value type, nested arrays, quantized tensors as
// zero-copy matrices) and every kind of bad file raising one clear error.
#include <gtest/gtest.h>

#include <cmath>

#include "quanta/ops.hpp"
#include "quanta/reference.hpp"
#include "test_io_util.hpp"
#include "test_util.hpp"

namespace quanta {
namespace {

using io::GgufType;
using io::GgufWriter;
using test::parse_gguf;

template <class T>
std::vector<std::byte> le(std::initializer_list<T> v) {
  std::vector<std::byte> out(v.size() * sizeof(T));
  std::memcpy(out.data(), std::data(v), out.size());
  return out;
}

std::vector<std::byte> cat(std::initializer_list<std::vector<std::byte>> parts) {
  std::vector<std::byte> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

TEST(IoGguf, GgmlTypeTable) {
  // Block geometry of the types quanta decodes comes from the format table.
  for (const auto& t : io::ggml_types()) {
    EXPECT_EQ(io::ggml_type_info(t.id), &t);
    if (t.scheme) {
      EXPECT_EQ(t.block_elems, scheme_info(*t.scheme).block_elems) << t.name;
      EXPECT_EQ(t.block_bytes, scheme_info(*t.scheme).block_bytes) << t.name;
    }
  }
  EXPECT_EQ(io::ggml_type_info(12)->name, "Q4_K");
  EXPECT_EQ(io::ggml_type_info(30)->dense, io::ElemType::bf16);
  EXPECT_EQ(io::ggml_type_info(4), nullptr);  // removed Q4_2
  EXPECT_EQ(io::ggml_type_info(99), nullptr);
}

TEST(IoGguf, EveryValueTypeRoundTrips) {
  GgufWriter w;
  w.add_uint("u8", GgufType::u8, 250);
  w.add_int("i8", GgufType::i8, -7);
  w.add_uint("u16", GgufType::u16, 65535);
  w.add_int("i16", GgufType::i16, -32768);
  w.add_uint("u32", GgufType::u32, 4294967295u);
  w.add_int("i32", GgufType::i32, -5);
  w.add_float("f32", GgufType::f32, 0.25);
  w.add_uint("bool", GgufType::boolean, 1);
  w.add_string("string", "ünïcode");
  w.add_uint("u64", GgufType::u64, ~uint64_t{0});
  w.add_int("i64", GgufType::i64, INT64_MIN);
  w.add_float("f64", GgufType::f64, 1e300);
  const auto ints = le<int16_t>({-1, 2, -3});
  w.add_array("arr.i16", GgufType::i16, 3, ints);
  const auto f64s = le<double>({0.5, -1.5});
  w.add_array("arr.f64", GgufType::f64, 2, f64s);
  const std::vector<std::string> strs = {"x", "", "yz"};
  w.add_string_array("arr.str", strs);
  // [[u8: 1, 2], [u8:]] encoded by hand: nested arrays.
  w.add_encoded("arr.nested", cat({le<uint32_t>({9}), le<uint32_t>({9}), le<uint64_t>({2}),
                                   le<uint32_t>({0}), le<uint64_t>({2}), le<uint8_t>({1, 2}),
                                   le<uint32_t>({0}), le<uint64_t>({0})}));
  w.add_array("arr.empty", GgufType::u32, 0, {});
  const auto bytes = w.bytes();  // parse_gguf borrows: the bytes must outlive the file
  const auto g = parse_gguf(bytes);
  EXPECT_EQ(g.version(), 3u);
  EXPECT_EQ(g.metadata().size(), 17u);
  EXPECT_EQ(g.find("u8")->u, 250u);
  EXPECT_EQ(g.find("i8")->i, -7);
  EXPECT_EQ(g.find("u16")->u, 65535u);
  EXPECT_EQ(g.find("i16")->i, -32768);
  EXPECT_EQ(g.find("u32")->u, 4294967295u);
  EXPECT_EQ(g.find("i32")->i, -5);
  EXPECT_EQ(g.find("f32")->f, 0.25);
  EXPECT_EQ(g.find("bool")->summary(), "true");
  EXPECT_EQ(g.find("string")->s, "ünïcode");
  EXPECT_EQ(g.find("u64")->u, ~uint64_t{0});
  EXPECT_EQ(g.find("i64")->i, INT64_MIN);
  EXPECT_EQ(g.find("f64")->f, 1e300);
  EXPECT_EQ(g.find("arr.i16")->count, 3u);
  EXPECT_EQ(g.find("arr.i16")->at(2).i, -3);
  EXPECT_EQ(g.find("arr.f64")->at(1).f, -1.5);
  EXPECT_EQ(g.find("arr.str")->at(2).s, "yz");
  EXPECT_EQ(g.find("arr.nested")->summary(), "[array x 2: [u8 x 2: 1, 2], [u8 x 0]]");
  EXPECT_EQ(g.find("arr.empty")->count, 0u);
  EXPECT_EQ(g.find("u32")->as_uint(), 4294967295u);
  EXPECT_FALSE(g.find("i32")->as_uint());
  EXPECT_THROW(g.find("arr.i16")->at(3), Error);
  EXPECT_EQ(g.find("missing"), nullptr);
}

TEST(IoGguf, QuantizedTensorsAreZeroCopyMatrices) {
  const auto w = test::random_dense(DType::f32, 6, 64, 3);
  const QuantizedMatrix q = quantize(w.view(), Format::gguf(Scheme::q4_0));
  const auto stack = test::random_dense(DType::f32, 2 * 3, 32, 4);  // 2 experts of [3, 32]
  const QuantizedMatrix qs = quantize(stack.view(), Format::gguf(Scheme::q8_0));
  GgufWriter gw(2);
  gw.set_alignment(64);
  gw.add_string("general.architecture", "test");
  gw.add_tensor("w.q4_0", 2, {64, 6}, {q.codes, q.footprint().code_bytes});
  gw.add_tensor("dense", 0, {64, 6}, test::byte_span(w.bytes));
  gw.add_tensor("experts.q8_0", 8, {32, 3, 2}, {qs.codes, qs.footprint().code_bytes});
  gw.add_tensor("iq", 16, {256}, std::vector<std::byte>(66));
  const auto bytes = gw.bytes();
  const auto g = parse_gguf(bytes);
  EXPECT_EQ(g.version(), 2u);
  EXPECT_EQ(g.alignment(), 64u);
  ASSERT_EQ(g.tensors().size(), 4u);
  for (const auto& t : g.tensors())
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data.data()) % 64,
              reinterpret_cast<uintptr_t>(bytes.data()) % 64);

  const io::GgufTensor* t = g.find_tensor("w.q4_0");
  ASSERT_NE(t, nullptr);
  const QuantizedMatrix m = g.matrix(*t);
  EXPECT_EQ(m.n, 6);
  EXPECT_EQ(m.k, 64);
  EXPECT_EQ(reinterpret_cast<const std::byte*>(m.codes), t->data.data());  // zero-copy
  EXPECT_EQ(ref::dequantize(m), ref::dequantize(q));

  const QuantizedMatrix e = g.matrix(*g.find_tensor("experts.q8_0"));
  EXPECT_EQ(e.batch, 2);
  EXPECT_EQ(e.n, 3);
  std::vector<double> all = ref::dequantize(qs);
  std::vector<double> second(all.begin() + 3 * 32, all.end());
  EXPECT_EQ(ref::dequantize(e, 1), second);

  EXPECT_FILE_ERROR(g.matrix(*g.find_tensor("dense")), "crafted.gguf", "dense F32");
  EXPECT_THROW(g.matrix(*g.find_tensor("iq")), NotSupported);
  EXPECT_FILE_ERROR(g.matrix(*g.find_tensor("iq")), "crafted.gguf", "IQ2_XXS");
}

// A valid header up to the tensor infos, for crafting bad files.
std::vector<std::byte> header(uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
  return cat({test::to_bytes("GGUF"), le<uint32_t>({version}), le<uint64_t>({n_tensors}),
              le<uint64_t>({n_kv})});
}
std::vector<std::byte> str(std::string_view s) {
  return cat({le<uint64_t>({s.size()}), test::to_bytes(s)});
}
std::vector<std::byte> tensor_info(std::string_view name, std::vector<uint64_t> ne, uint32_t type,
                                   uint64_t offset) {
  std::vector<std::byte> out = cat({str(name), le<uint32_t>({static_cast<uint32_t>(ne.size())})});
  for (uint64_t d : ne) out = cat({out, le<uint64_t>({d})});
  return cat({out, le<uint32_t>({type}), le<uint64_t>({offset})});
}
std::vector<std::byte> padded(std::vector<std::byte> b, std::size_t data_bytes) {
  b.resize((b.size() + 31) / 32 * 32 + data_bytes);
  return b;
}

TEST(IoGguf, BadFilesRaiseOneClearError) {
  const std::string f = "crafted.gguf";
  EXPECT_FILE_ERROR(parse_gguf(test::to_bytes("GGU")), f, "wrong magic");
  EXPECT_FILE_ERROR(parse_gguf(test::to_bytes("PK\x03\x04 zip")), f, "wrong magic 'PK\\x03\\x04'");
  EXPECT_FILE_ERROR(parse_gguf(header(1, 0, 0)), f, "version 1");
  EXPECT_FILE_ERROR(parse_gguf(header(0x03000000, 0, 0)), f, "big-endian");
  EXPECT_FILE_ERROR(parse_gguf(header(7, 0, 0)), f, "unknown GGUF version 7");
  EXPECT_FILE_ERROR(parse_gguf(cat({test::to_bytes("GGUF"), le<uint32_t>({3})})), f, "truncated");
  // Counts that cannot fit are refused before anything is allocated.
  EXPECT_FILE_ERROR(parse_gguf(header(3, 0, uint64_t{1} << 60)), f, "cannot fit");
  EXPECT_FILE_ERROR(parse_gguf(header(3, uint64_t{1} << 60, 0)), f, "cannot fit");
  // Metadata.
  auto kv = [](std::string_view key, std::vector<std::byte> typed_value) {
    return cat({header(3, 0, 1), str(key), typed_value});
  };
  EXPECT_FILE_ERROR(parse_gguf(kv("k", le<uint32_t>({13}))), f, "unknown value type 13");
  EXPECT_FILE_ERROR(parse_gguf(kv("k", cat({le<uint32_t>({8}), le<uint64_t>({1000})}))), f,
                    "truncated");
  EXPECT_FILE_ERROR(parse_gguf(kv("k", cat({le<uint32_t>({7}), le<uint8_t>({2})}))), f,
                    "bool value 2");
  EXPECT_FILE_ERROR(
      parse_gguf(kv("k", cat({le<uint32_t>({9}), le<uint32_t>({77}), le<uint64_t>({0})}))), f,
      "unknown array element type 77");
  EXPECT_FILE_ERROR(parse_gguf(kv("k", cat({le<uint32_t>({9}), le<uint32_t>({12}),
                                            le<uint64_t>({uint64_t{1} << 62})}))),
                    f, "overflows");
  EXPECT_FILE_ERROR(parse_gguf(kv("k", cat({le<uint32_t>({9}), le<uint32_t>({8}),
                                            le<uint64_t>({uint64_t{1} << 40})}))),
                    f, "declares");
  std::vector<std::byte> deep = le<uint32_t>({9});
  for (int i = 0; i < 12; ++i) deep = cat({deep, le<uint32_t>({9}), le<uint64_t>({1})});
  EXPECT_FILE_ERROR(parse_gguf(kv("k", deep)), f, "nested deeper");
  EXPECT_FILE_ERROR(parse_gguf(kv("", cat({le<uint32_t>({0}), le<uint8_t>({1})}))), f,
                    "empty or not UTF-8");
  EXPECT_FILE_ERROR(parse_gguf(kv("k\xc0", cat({le<uint32_t>({0}), le<uint8_t>({1})}))), f,
                    "not UTF-8");
  EXPECT_FILE_ERROR(parse_gguf(cat({header(3, 0, 2), str("k"), le<uint32_t>({0}), le<uint8_t>({1}),
                                    str("k"), le<uint32_t>({0}), le<uint8_t>({1})})),
                    f, "appears twice");
  EXPECT_FILE_ERROR(
      parse_gguf(kv("general.alignment", cat({le<uint32_t>({4}), le<uint32_t>({48})}))), f,
      "power of two");
  EXPECT_FILE_ERROR(
      parse_gguf(kv("general.alignment", cat({le<uint32_t>({10}), le<uint64_t>({32})}))), f,
      "power of two");
  // Tensor infos.
  auto one = [](std::vector<std::byte> info, std::size_t data) {
    return padded(cat({header(3, 1, 0), info}), data);
  };
  EXPECT_FILE_ERROR(parse_gguf(one(tensor_info("t", {}, 0, 0), 0)), f, "0 dimensions");
  EXPECT_FILE_ERROR(parse_gguf(one(tensor_info("t", {1, 1, 1, 1, 1}, 0, 0), 4)), f, "5 dimensions");
  EXPECT_FILE_ERROR(
      parse_gguf(one(tensor_info("t", {uint64_t{1} << 32, uint64_t{1} << 32}, 0, 0), 0)), f,
      "overflow");
  EXPECT_FILE_ERROR(parse_gguf(one(tensor_info("t", {~uint64_t{0}}, 0, 0), 0)), f, "overflow");
  // An empty row with absurd other dims (fuzzer find: batch = ne[2] * ne[3] overflowed).
  EXPECT_FILE_ERROR(
      parse_gguf(one(tensor_info("t", {0, 1, uint64_t{1} << 40, uint64_t{1} << 40}, 8, 0), 0)), f,
      "overflow");
  EXPECT_FILE_ERROR(parse_gguf(one(tensor_info("t", {32}, 31, 0), 18)), f,
                    "unknown ggml type id 31");
  EXPECT_FILE_ERROR(parse_gguf(one(tensor_info("t", {48}, 2, 0), 36)), f, "not a multiple");
  EXPECT_FILE_ERROR(parse_gguf(one(tensor_info("t", {32}, 2, 16), 64)), f, "alignment");
  EXPECT_FILE_ERROR(parse_gguf(one(tensor_info("t", {32}, 2, 0), 17)), f, "past the end");
  EXPECT_FILE_ERROR(parse_gguf(one(tensor_info("t", {8}, 0, ~uint64_t{0} - 31), 64)), f,
                    "past the end");
  EXPECT_FILE_ERROR(parse_gguf(one(tensor_info("t", {uint64_t{1} << 62}, 0, 0), 64)), f,
                    "overflows");
  EXPECT_FILE_ERROR(
      parse_gguf(padded(
          cat({header(3, 2, 0), tensor_info("a", {16}, 0, 0), tensor_info("b", {16}, 0, 32)}), 96)),
      f, "overlap");
  EXPECT_FILE_ERROR(
      parse_gguf(padded(
          cat({header(3, 2, 0), tensor_info("a", {8}, 0, 0), tensor_info("a", {8}, 0, 32)}), 64)),
      f, "appears twice");
}

TEST(IoGguf, EveryTruncationIsAnError) {
  GgufWriter w;
  w.add_string("general.architecture", "llama");
  const std::vector<std::string> toks = {"a", "b"};
  w.add_string_array("tokenizer.ggml.tokens", toks);
  w.add_tensor("t", 8, {32, 2}, std::vector<std::byte>(68));
  const auto full = w.bytes();
  // Padding after the last tensor's data is optional, so cuts there are valid files.
  const auto end = static_cast<std::size_t>(parse_gguf(full).tensors()[0].data.data() + 68 -
                                            parse_gguf(full).file()->bytes().data());
  for (std::size_t len = 0; len < end; ++len) {
    std::vector<std::byte> cut(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(len));
    EXPECT_THROW(parse_gguf(cut), Error) << "length " << len;
  }
}

TEST(IoGguf, OpenAndWriteFiles) {
  test::TempDir dir;
  GgufWriter w;
  w.add_uint("general.alignment", GgufType::u32, 32);
  w.write(dir / "x.gguf");
  EXPECT_EQ(io::GgufFile::open(dir / "x.gguf").metadata().size(), 1u);
  EXPECT_FILE_ERROR(io::GgufFile::open(dir / "missing.gguf"), "missing.gguf", "cannot open");
}

}  // namespace
}  // namespace quanta
