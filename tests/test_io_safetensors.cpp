// safetensors: write -> read round trips, and every kind of bad file raising one clear error.
#include <gtest/gtest.h>
#include <unistd.h>

#include <numeric>

#include "test_io_util.hpp"

namespace quanta {
namespace {

using io::ElemType;
using test::parse_st;
using test::safetensors_bytes;

TEST(IoSafetensors, ElemTypeTable) {
  for (auto t :
       {ElemType::boolean, ElemType::u8, ElemType::i8, ElemType::f8_e5m2, ElemType::f8_e4m3,
        ElemType::f8_e8m0, ElemType::i16, ElemType::u16, ElemType::f16, ElemType::bf16,
        ElemType::i32, ElemType::u32, ElemType::f32, ElemType::f64, ElemType::i64, ElemType::u64}) {
    EXPECT_EQ(io::parse_elem_type(io::elem_type_name(t)), t);
  }
  EXPECT_EQ(io::elem_type_size(ElemType::bf16), 2u);
  EXPECT_EQ(io::elem_type_size(ElemType::u64), 8u);
  EXPECT_FALSE(io::parse_elem_type("F4"));
  EXPECT_EQ(io::to_dtype(ElemType::bf16), DType::bf16);
  EXPECT_FALSE(io::to_dtype(ElemType::u32));
}

TEST(IoSafetensors, WriteReadRoundTrip) {
  test::TempDir dir;
  std::vector<uint8_t> a(7);
  std::iota(a.begin(), a.end(), 1);
  std::vector<float> b(6);
  std::iota(b.begin(), b.end(), 0.5f);
  std::vector<uint16_t> c(4, 0x3c00);
  std::vector<double> d(3, -2.0);
  std::vector<io::TensorData> ts = {
      {{"a.u8", ElemType::u8, {7}}, test::byte_span(a)},
      {{"b.f32", ElemType::f32, {2, 3}}, test::byte_span(b)},
      {{"c.f16", ElemType::f16, {2, 1, 2}}, test::byte_span(c)},
      {{"d.f64", ElemType::f64, {3}}, test::byte_span(d)},
      {{"empty", ElemType::bf16, {0, 4}}, {}},
      {{"scalar", ElemType::u8, {}}, test::byte_span(a).first(1)},
  };
  const auto path = dir / "rt.safetensors";
  io::write_safetensors(path, ts, {{"format", "mlx"}, {"note", "héllo"}});
  EXPECT_FALSE(std::filesystem::exists(dir / "rt.safetensors.partial"));

  const auto f = io::SafetensorsFile::open(path);
  ASSERT_EQ(f.tensors().size(), ts.size());
  for (const auto& t : ts) {
    const io::TensorInfo* r = f.find(t.spec.name);
    ASSERT_NE(r, nullptr) << t.spec.name;
    EXPECT_EQ(r->type, t.spec.type);
    EXPECT_EQ(r->shape, t.spec.shape);
    EXPECT_TRUE(r->aligned()) << t.spec.name;
    ASSERT_EQ(r->data.size(), t.bytes.size());
    EXPECT_TRUE(std::equal(r->data.begin(), r->data.end(), t.bytes.begin()));
    EXPECT_EQ(r->file, path.string());
  }
  // Decreasing element size, then name: the reference writer's order.
  EXPECT_EQ(f.tensors()[0].name, "d.f64");
  EXPECT_EQ(f.tensors()[1].name, "b.f32");
  ASSERT_EQ(f.metadata().size(), 2u);
  EXPECT_EQ(f.metadata()[1].second, "héllo");
  // The header is padded to 8 bytes.
  uint64_t n;
  std::memcpy(&n, f.file()->bytes().data(), 8);
  EXPECT_EQ(n % 8, 0u);
}

TEST(IoSafetensors, WriterStreamsInAnyOrderAndCleansUp) {
  test::TempDir dir;
  std::vector<float> x(8, 1.0f), y(4, 2.0f);
  {
    io::SafetensorsWriter w(dir / "s.safetensors",
                            {{"x", ElemType::f32, {8}}, {"y", ElemType::f32, {4}}});
    w.write("y", test::byte_span(y));
    EXPECT_NE(test::error_of([&] { w.write("y", test::byte_span(y)); }).find("twice"),
              std::string::npos);
    EXPECT_NE(test::error_of([&] { w.write("x", test::byte_span(y)); }).find("declared"),
              std::string::npos);
    EXPECT_NE(test::error_of([&] { w.write("z", test::byte_span(y)); }).find("not declared"),
              std::string::npos);
    EXPECT_NE(test::error_of([&] { w.finish(); }).find("never written"), std::string::npos);
  }  // destroyed unfinished: nothing left behind
  EXPECT_FALSE(std::filesystem::exists(dir / "s.safetensors"));
  EXPECT_FALSE(std::filesystem::exists(dir / "s.safetensors.partial"));
  EXPECT_NE(test::error_of([&] {
              io::SafetensorsWriter w(dir / "t.safetensors",
                                      {{"x", ElemType::f32, {1}}, {"x", ElemType::f32, {1}}});
            }).find("repeated"),
            std::string::npos);
}

TEST(IoSafetensors, ParsesTheReferenceExample) {
  // The serialization example of huggingface/safetensors tensor.rs `test_serialization`.
  std::vector<float> v = {0, 1, 2, 3, 4, 5};
  const auto b = safetensors_bytes(
      R"({"attn.0":{"dtype":"F32","shape":[1,2,3],"data_offsets":[0,24]}})",
      {reinterpret_cast<std::byte*>(v.data()), reinterpret_cast<std::byte*>(v.data()) + 24});
  const auto f = parse_st(b);
  ASSERT_EQ(f.tensors().size(), 1u);
  EXPECT_EQ(f.tensors()[0].shape, (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(f.tensors()[0].numel(), 6);
  // An empty file of tensors is valid too, and MLX writes a null __metadata__.
  EXPECT_TRUE(parse_st(safetensors_bytes("{}      ")).tensors().empty());
  EXPECT_TRUE(parse_st(safetensors_bytes(R"({"__metadata__":null})")).metadata().empty());
}

std::vector<std::byte> zeros(std::size_t n) {
  return std::vector<std::byte>(n);
}

TEST(IoSafetensors, BadFilesRaiseOneClearError) {
  const std::string f = "crafted.safetensors";
  // Truncated before the header length, header longer than the file.
  EXPECT_FILE_ERROR(parse_st(test::to_bytes("abc")), f, "too short");
  EXPECT_FILE_ERROR(parse_st(test::to_bytes(std::string("\xff\xff\xff\xff\xff\xff\xff\xff{}", 10))),
                    f, "longer than the file");
  auto longer = safetensors_bytes("{}");
  longer[0] = std::byte{40};
  EXPECT_FILE_ERROR(parse_st(longer), f, "longer than the file");
  // Invalid UTF-8, invalid JSON, not an object, too deep.
  EXPECT_FILE_ERROR(parse_st(safetensors_bytes("{\"a\xff\":1}")), f, "UTF-8");
  EXPECT_FILE_ERROR(parse_st(safetensors_bytes("{\"a\": ")), f, "not valid JSON");
  EXPECT_FILE_ERROR(parse_st(safetensors_bytes("[1,2]")), f, "not a JSON object");
  EXPECT_FILE_ERROR(parse_st(safetensors_bytes(std::string(40, '[') + std::string(40, ']'))), f,
                    "deeply nested");
  // Entries.
  const std::string ok = R"("dtype":"F32","shape":[2],"data_offsets":[0,8])";
  EXPECT_FILE_ERROR(parse_st(safetensors_bytes(
                        R"({"t":{"dtype":"F4","shape":[2],"data_offsets":[0,1]}})", zeros(1))),
                    f, "unknown dtype 'F4'");
  EXPECT_FILE_ERROR(
      parse_st(safetensors_bytes(R"({"t":{"shape":[2],"data_offsets":[0,8]}})", zeros(8))), f,
      "needs \"dtype\"");
  EXPECT_FILE_ERROR(parse_st(safetensors_bytes(R"({"t":[]})")), f, "not a JSON object");
  EXPECT_FILE_ERROR(parse_st(safetensors_bytes(
                        R"({"t":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", zeros(8))),
                    f, "non-negative integer");
  EXPECT_FILE_ERROR(parse_st(safetensors_bytes(
                        R"({"t":{"dtype":"F32","shape":[2.5],"data_offsets":[0,8]}})", zeros(8))),
                    f, "non-negative integer");
  // Absurd dims and size arithmetic that would overflow.
  EXPECT_FILE_ERROR(
      parse_st(safetensors_bytes(
          R"({"t":{"dtype":"U8","shape":[18446744073709551615],"data_offsets":[0,8]}})", zeros(8))),
      f, "absurd");
  EXPECT_FILE_ERROR(
      parse_st(safetensors_bytes(
          R"({"t":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})",
          zeros(8))),
      f, "overflows");
  EXPECT_FILE_ERROR(
      parse_st(safetensors_bytes(
          R"({"t":{"dtype":"F64","shape":[4611686018427387904],"data_offsets":[0,8]}})", zeros(8))),
      f, "overflows");
  // An empty axis makes the count 0, but the other axes' product must still fit (found by
  // fuzzing the GGUF reader: the same rule holds in both).
  EXPECT_FILE_ERROR(
      parse_st(safetensors_bytes(
          R"({"t":{"dtype":"U8","shape":[0,4294967296,4294967296],"data_offsets":[0,0]}})")),
      f, "overflows");
  // Offsets out of range, reversed, not matching the shape, overlapping, with gaps, trailing.
  EXPECT_FILE_ERROR(parse_st(safetensors_bytes("{\"t\":{" + ok + "}}", zeros(4))), f,
                    "past the data section");
  EXPECT_FILE_ERROR(parse_st(safetensors_bytes(
                        R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", zeros(8))),
                    f, "end before they begin");
  EXPECT_FILE_ERROR(parse_st(safetensors_bytes(
                        R"({"t":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", zeros(8))),
                    f, "needs 12");
  EXPECT_FILE_ERROR(
      parse_st(safetensors_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                 R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                                 zeros(12))),
      f, "overlap");
  EXPECT_FILE_ERROR(parse_st(safetensors_bytes(
                        R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", zeros(12))),
                    f, "gap");
  EXPECT_FILE_ERROR(parse_st(safetensors_bytes("{\"t\":{" + ok + "}}", zeros(9))), f, "trailing");
  EXPECT_FILE_ERROR(parse_st(safetensors_bytes(
                        R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0]}})", zeros(8))),
                    f, "two integers");
  // Duplicate names and bad metadata.
  EXPECT_FILE_ERROR(
      parse_st(safetensors_bytes("{\"t\":{" + ok + "},\"t\":{" + ok + "}}", zeros(8))), f, "twice");
  EXPECT_FILE_ERROR(parse_st(safetensors_bytes(R"({"__metadata__":{"a":1}})")), f, "not a string");
  // Names and values in messages are escaped: still one line.
  EXPECT_FILE_ERROR(
      parse_st(safetensors_bytes(R"({"a\nb":{"dtype":"X\n","shape":[],"data_offsets":[0,0]}})")), f,
      "\\x0a");
}

TEST(IoSafetensors, HeaderSizeLimit) {
  // A header length above the reference's 100 MB limit (a sparse file: no disk used).
  test::TempDir dir;
  const auto p = dir / "big.safetensors";
  const uint64_t n = 100'000'001;
  test::write_file(p, std::vector<std::byte>(reinterpret_cast<const std::byte*>(&n),
                                             reinterpret_cast<const std::byte*>(&n) + 8));
  ASSERT_EQ(::truncate(p.c_str(), static_cast<off_t>(n + 8)), 0);
  EXPECT_FILE_ERROR(io::SafetensorsFile::open(p), p.string(), "limit");
}

TEST(IoSafetensors, EveryTruncationIsAnError) {
  test::TempDir dir;
  std::vector<float> v(16, 1.0f);
  std::vector<io::TensorData> ts = {{{"w", ElemType::f32, {4, 4}}, test::byte_span(v)},
                                    {{"b", ElemType::f32, {4}}, test::byte_span(v).first(16)}};
  io::write_safetensors(dir / "t.safetensors", ts);
  const auto full = io::MappedFile::open(dir / "t.safetensors");
  const auto bytes = full->bytes();
  for (std::size_t len = 0; len < bytes.size(); ++len) {
    std::vector<std::byte> cut(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(len));
    EXPECT_THROW(parse_st(cut), Error) << "length " << len;
  }
}

TEST(IoSafetensors, MissingFileIsAnError) {
  EXPECT_FILE_ERROR(io::SafetensorsFile::open("/nonexistent/x.safetensors"),
                    "/nonexistent/x.safetensors", "cannot open");
  test::TempDir dir;
  EXPECT_FILE_ERROR(io::SafetensorsFile::open(dir.path), dir.path.string(), "not a regular file");
}

}  // namespace
}  // namespace quanta
