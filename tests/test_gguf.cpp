// GGUF block codecs against gguf-py 0.19 golden vectors (scripts/golden/make_gguf_goldens.py)
// and against blocks packed by hand from the layouts in formats-and-cpu.md §1.3.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "format/gguf.hpp"
#include "quanta/error.hpp"
#include "quanta/format.hpp"
#include "quanta/numeric.hpp"

namespace quanta::codec::gguf {
namespace {

static_assert(std::endian::native == std::endian::little, "golden files are little-endian");

constexpr Scheme kEncodable[] = {Scheme::q4_0, Scheme::q4_1, Scheme::q5_0, Scheme::q5_1,
                                 Scheme::q8_0};
constexpr Scheme kKQuants[] = {Scheme::q2_K, Scheme::q3_K, Scheme::q4_K, Scheme::q5_K,
                               Scheme::q6_K};
constexpr Scheme kAll[] = {Scheme::q4_0, Scheme::q4_1, Scheme::q5_0, Scheme::q5_1, Scheme::q8_0,
                           Scheme::q2_K, Scheme::q3_K, Scheme::q4_K, Scheme::q5_K, Scheme::q6_K};

std::string name_of(Scheme s) {
  return std::string(scheme_info(s).name);
}

std::vector<uint8_t> read_bytes(const std::string& file) {
  const std::string path = std::string(QUANTA_GOLDEN_DIR) + "/gguf/" + file;
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open golden file " + path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::vector<float> read_f32(const std::string& file) {
  const std::vector<uint8_t> bytes = read_bytes(file);
  if (bytes.size() % sizeof(float) != 0) throw std::runtime_error(file + ": not f32 data");
  std::vector<float> v(bytes.size() / sizeof(float));
  std::memcpy(v.data(), bytes.data(), bytes.size());
  return v;
}

struct Golden {
  std::vector<float> input;  // empty for the decode-only K-quants
  std::vector<uint8_t> quant;
  std::vector<float> dequant;
  size_t n_blocks = 0;
};

Golden load(Scheme s) {
  const SchemeInfo& info = scheme_info(s);
  Golden g;
  if (info.encode) g.input = read_f32(name_of(s) + ".input.f32");
  g.quant = read_bytes(name_of(s) + ".quant.bin");
  g.dequant = read_f32(name_of(s) + ".dequant.f32");
  g.n_blocks = g.dequant.size() / info.block_elems;
  EXPECT_EQ(g.dequant.size() % info.block_elems, 0u);
  EXPECT_EQ(g.quant.size(), g.n_blocks * info.block_bytes) << "golden quant/dequant disagree";
  if (info.encode) {
    EXPECT_EQ(g.input.size(), g.dequant.size());
  }
  return g;
}

std::string scheme_param_name(const testing::TestParamInfo<Scheme>& p) {
  return name_of(p.param);
}

// ---- goldens -------------------------------------------------------------------------------

class GgufEncodable : public testing::TestWithParam<Scheme> {};
class GgufAll : public testing::TestWithParam<Scheme> {};
class GgufKQuant : public testing::TestWithParam<Scheme> {};

TEST_P(GgufEncodable, EncodeMatchesGgufPyBytes) {
  const Scheme s = GetParam();
  const Golden g = load(s);
  std::vector<uint8_t> out(g.quant.size(), 0xAA);
  encode_row(s, g.input.data(), static_cast<int64_t>(g.input.size()), out.data());
  const size_t bytes = scheme_info(s).block_bytes;
  int bad_blocks = 0;
  for (size_t b = 0; b < g.n_blocks; ++b) {
    if (std::memcmp(out.data() + b * bytes, g.quant.data() + b * bytes, bytes) == 0) continue;
    if (++bad_blocks <= 3) ADD_FAILURE() << name_of(s) << ": block " << b << " differs";
  }
  EXPECT_EQ(bad_blocks, 0);
}

TEST_P(GgufEncodable, EncodeRowByRowMatchesWholeBuffer) {
  const Scheme s = GetParam();
  const Golden g = load(s);
  const int64_t row = 64;  // two blocks: rows are independent runs of blocks
  const size_t row_bytes = static_cast<size_t>(row) / kQK * scheme_info(s).block_bytes;
  std::vector<uint8_t> out(g.quant.size());
  for (size_t r = 0; r * row < g.input.size(); ++r) {
    encode_row(s, g.input.data() + r * row, row, out.data() + r * row_bytes);
  }
  EXPECT_EQ(out, g.quant);
}

// gguf-py's dequantize and ggml's dequantize_row_* compute the same f32 expressions, and every
// product is exact (gguf.hpp), so the golden values are matched bit for bit, no tolerance.
TEST_P(GgufAll, DecodeMatchesGgufPyBitExact) {
  const Scheme s = GetParam();
  const Golden g = load(s);
  const SchemeInfo& info = scheme_info(s);
  std::vector<float> y(info.block_elems);
  int bad = 0;
  for (size_t b = 0; b < g.n_blocks; ++b) {
    decode_block(s, g.quant.data() + b * info.block_bytes, y.data());
    for (int i = 0; i < info.block_elems; ++i) {
      const float want = g.dequant[b * info.block_elems + i];
      if (float_bits(y[i]) == float_bits(want)) continue;
      if (++bad <= 5) {
        ADD_FAILURE() << name_of(s) << " block " << b << " elem " << i << ": got " << y[i]
                      << " want " << want;
      }
    }
  }
  EXPECT_EQ(bad, 0);
}

// The f64 oracle computes the same formula in double; f32 rounds once at the end (gguf.hpp),
// so the two agree to f32's half ulp, well inside 1e-6 relative, zeros included.
TEST_P(GgufAll, DecodeF64AgreesWithF32) {
  const Scheme s = GetParam();
  const Golden g = load(s);
  const SchemeInfo& info = scheme_info(s);
  std::vector<float> y(info.block_elems);
  std::vector<double> y64(info.block_elems);
  int bad = 0;
  for (size_t b = 0; b < g.n_blocks; ++b) {
    decode_block(s, g.quant.data() + b * info.block_bytes, y.data());
    decode_block_f64(s, g.quant.data() + b * info.block_bytes, y64.data());
    for (int i = 0; i < info.block_elems; ++i) {
      if (std::abs(static_cast<double>(y[i]) - y64[i]) <= 1e-6 * std::abs(y64[i])) continue;
      if (++bad <= 5) {
        ADD_FAILURE() << name_of(s) << " block " << b << " elem " << i << ": f32 " << y[i]
                      << " f64 " << y64[i];
      }
    }
  }
  EXPECT_EQ(bad, 0);
}

TEST_P(GgufAll, BlockSizesMatchSchemeInfo) {
  const Scheme s = GetParam();
  size_t size = 0;
  int elems = 0;
  switch (s) {
    case Scheme::q4_0:
      size = sizeof(block_q4_0), elems = kQK;
      break;
    case Scheme::q4_1:
      size = sizeof(block_q4_1), elems = kQK;
      break;
    case Scheme::q5_0:
      size = sizeof(block_q5_0), elems = kQK;
      break;
    case Scheme::q5_1:
      size = sizeof(block_q5_1), elems = kQK;
      break;
    case Scheme::q8_0:
      size = sizeof(block_q8_0), elems = kQK;
      break;
    case Scheme::q2_K:
      size = sizeof(block_q2_K), elems = kQK_K;
      break;
    case Scheme::q3_K:
      size = sizeof(block_q3_K), elems = kQK_K;
      break;
    case Scheme::q4_K:
      size = sizeof(block_q4_K), elems = kQK_K;
      break;
    case Scheme::q5_K:
      size = sizeof(block_q5_K), elems = kQK_K;
      break;
    case Scheme::q6_K:
      size = sizeof(block_q6_K), elems = kQK_K;
      break;
    default:
      FAIL() << "not a GGUF scheme";
  }
  EXPECT_EQ(size, static_cast<size_t>(scheme_info(s).block_bytes));
  EXPECT_EQ(elems, scheme_info(s).block_elems);
}

TEST_P(GgufKQuant, EncodeThrowsNotImplemented) {
  const Scheme s = GetParam();
  std::vector<float> x(kQK_K, 1.0f);
  std::vector<uint8_t> out(scheme_info(s).block_bytes);
  try {
    encode_row(s, x.data(), kQK_K, out.data());
    FAIL() << "encode_row(" << name_of(s) << ") did not throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not implemented"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(name_of(s)), std::string::npos) << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(Gguf, GgufEncodable, testing::ValuesIn(kEncodable), scheme_param_name);
INSTANTIATE_TEST_SUITE_P(Gguf, GgufAll, testing::ValuesIn(kAll), scheme_param_name);
INSTANTIATE_TEST_SUITE_P(Gguf, GgufKQuant, testing::ValuesIn(kKQuants), scheme_param_name);

TEST(GgufErrors, RejectsBadArguments) {
  float x[kQK] = {};
  uint8_t out[64] = {};
  float y[kQK_K];
  double y64[kQK_K];
  EXPECT_THROW(encode_row(Scheme::q4_0, x, 31, out), Error);
  EXPECT_THROW(encode_row(Scheme::affine, x, kQK, out), Error);
  EXPECT_THROW(decode_block(Scheme::mxfp4, out, y), Error);
  EXPECT_THROW(decode_block_f64(Scheme::nvfp4, out, y64), Error);
  EXPECT_NO_THROW(encode_row(Scheme::q8_0, x, 0, out));
}

// ---- encoder edge cases, values worked out by hand from ggml quantize_row_*_ref -----------

TEST(GgufEncode, Q8_0RoundsHalfAwayFromZero) {
  float x[kQK] = {127.0f, 2.5f, -2.5f, 0.5f, -0.5f, 1.5f, -126.5f};  // d = 1, id = 1
  block_q8_0 b;
  encode_row(Scheme::q8_0, x, kQK, reinterpret_cast<uint8_t*>(&b));
  EXPECT_EQ(b.d, 0x3C00);  // f16 1.0
  const int want[] = {127, 3, -3, 1, -1, 2, -127, 0};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(b.qs[i], want[i]) << i;
}

TEST(GgufEncode, Q4_0SignedMaxAndZeroBlock) {
  // max |x| is -8 (first of the tie with +8), so d = -8 / -8 = 1, q = trunc(x + 8.5) <= 15.
  float x[kQK] = {0.0f, -8.0f, 8.0f, 7.4f, -0.6f, 0.49f};
  block_q4_0 b;
  encode_row(Scheme::q4_0, x, kQK, reinterpret_cast<uint8_t*>(&b));
  EXPECT_EQ(b.d, 0x3C00);
  const int want[] = {8, 0, 15, 15, 7, 8};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(b.qs[i] & 0xF, want[i]) << i;
  // All zero: d = 0 / -8 = -0 (f16 0x8000, as ggml and gguf-py store it), id = 0, q = 8.
  float z[kQK] = {};
  encode_row(Scheme::q4_0, z, kQK, reinterpret_cast<uint8_t*>(&b));
  EXPECT_EQ(b.d, 0x8000);
  for (int j = 0; j < kQK / 2; ++j) EXPECT_EQ(b.qs[j], 0x88);
}

// x[1] * id lands just below 0.5: rounded to f32 first (gguf-py, ggml without contraction)
// then + 8.5 truncates to 9; one fused x * id + 8.5 would give 8. Found by search; the
// expected byte is gguf.quantize's. Guards the encoder against FMA contraction.
TEST(GgufEncode, Q4_0ProductIsRoundedBeforeTheOffset) {
  float x[kQK] = {-0x1.a30fecp+0f, 0x1.a30fd2p-4f};
  block_q4_0 b;
  encode_row(Scheme::q4_0, x, kQK, reinterpret_cast<uint8_t*>(&b));
  EXPECT_EQ(b.d, 12940);
  EXPECT_EQ(b.qs[0], 0x80);
  EXPECT_EQ(b.qs[1], 0x89);
}

// ---- hand-built blocks: pack codes by the §1.3 layout, decode, compare with the formula ---
// Scales are powers of two, so every expected value is exact in f32. Codes come from a hash,
// not i * c % m: a periodic pattern can repeat across the 16/32/64 strides and hide a swap.

int code(int i, int mod) {
  uint32_t h = static_cast<uint32_t>(i + 1) * 0x9E3779B1u;
  h ^= h >> 15;
  h *= 0x85EBCA77u;
  h ^= h >> 13;
  return static_cast<int>(h % static_cast<uint32_t>(mod));
}

TEST(GgufHandBuilt, Q4_0) {
  block_q4_0 b{};
  const float d = -0.5f;
  b.d = f32_to_f16_bits(d);
  int q[kQK];
  for (int i = 0; i < kQK; ++i) q[i] = code(i, 16);
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(q[j] | q[j + 16] << 4);
  float y[kQK];
  dequantize_block_q4_0(b, y);
  for (int i = 0; i < kQK; ++i) EXPECT_EQ(y[i], (q[i] - 8) * d) << i;
}

TEST(GgufHandBuilt, Q5_0) {
  block_q5_0 b{};
  const float d = 0.25f;
  b.d = f32_to_f16_bits(d);
  int q[kQK];
  uint32_t qh = 0;
  for (int i = 0; i < kQK; ++i) {
    q[i] = code(i, 32);
    qh |= static_cast<uint32_t>(q[i] >> 4) << i;  // bit i of the LE u32
  }
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>((q[j] & 15) | (q[j + 16] & 15) << 4);
  for (int k = 0; k < 4; ++k) b.qh[k] = static_cast<uint8_t>(qh >> (8 * k));
  float y[kQK];
  dequantize_block_q5_0(b, y);
  for (int i = 0; i < kQK; ++i) EXPECT_EQ(y[i], (q[i] - 16) * d) << i;
}

TEST(GgufHandBuilt, Q8_0) {
  block_q8_0 b{};
  const float d = 0.125f;
  b.d = f32_to_f16_bits(d);
  for (int i = 0; i < kQK; ++i) b.qs[i] = static_cast<int8_t>(i * 8 - 128);
  float y[kQK];
  dequantize_block_q8_0(b, y);
  for (int i = 0; i < kQK; ++i) EXPECT_EQ(y[i], (i * 8 - 128) * d) << i;
}

// Q4_K/Q5_K 6-bit scale/min packing, the inverse of §1.3's get_scale_min_k4.
void pack_scale_min_k4(const int* sc, const int* m, uint8_t* q) {
  for (int j = 0; j < 4; ++j) {
    q[j] = static_cast<uint8_t>((sc[j] & 63) | (sc[j + 4] >> 4) << 6);
    q[j + 4] = static_cast<uint8_t>((m[j] & 63) | (m[j + 4] >> 4) << 6);
    q[j + 8] = static_cast<uint8_t>((sc[j + 4] & 15) | (m[j + 4] & 15) << 4);
  }
}

constexpr int kSc[8] = {1, 17, 33, 63, 5, 40, 22, 48};
constexpr int kMin[8] = {2, 60, 7, 31, 45, 0, 13, 63};

TEST(GgufHandBuilt, Q4_K) {
  block_q4_K b{};
  const float d = 0.5f, dmin = 0.25f;
  b.d = f32_to_f16_bits(d);
  b.dmin = f32_to_f16_bits(dmin);
  pack_scale_min_k4(kSc, kMin, b.scales);
  int q[kQK_K];
  for (int i = 0; i < kQK_K; ++i) q[i] = code(i, 16);
  // chunk c: qs[32c + l] = element 64c + l (low nibble) | element 64c + 32 + l (high nibble)
  for (int c = 0; c < 4; ++c) {
    for (int l = 0; l < 32; ++l) {
      b.qs[32 * c + l] = static_cast<uint8_t>(q[64 * c + l] | q[64 * c + 32 + l] << 4);
    }
  }
  float y[kQK_K];
  dequantize_block_q4_K(b, y);
  for (int i = 0; i < kQK_K; ++i) {
    const int j = i / 32;  // sub-block
    EXPECT_EQ(y[i], d * kSc[j] * q[i] - dmin * kMin[j]) << i;
  }
}

TEST(GgufHandBuilt, Q5_K) {
  block_q5_K b{};
  const float d = 0.25f, dmin = 0.5f;
  b.d = f32_to_f16_bits(d);
  b.dmin = f32_to_f16_bits(dmin);
  pack_scale_min_k4(kSc, kMin, b.scales);
  int q[kQK_K];
  for (int i = 0; i < kQK_K; ++i) q[i] = code(i, 32);
  for (int c = 0; c < 4; ++c) {
    for (int l = 0; l < 32; ++l) {
      const int lo = q[64 * c + l], hi = q[64 * c + 32 + l];
      b.qs[32 * c + l] = static_cast<uint8_t>((lo & 15) | (hi & 15) << 4);
      b.qh[l] |= static_cast<uint8_t>((lo >> 4) << (2 * c) | (hi >> 4) << (2 * c + 1));
    }
  }
  float y[kQK_K];
  dequantize_block_q5_K(b, y);
  for (int i = 0; i < kQK_K; ++i) {
    const int j = i / 32;
    EXPECT_EQ(y[i], d * kSc[j] * q[i] - dmin * kMin[j]) << i;
  }
}

TEST(GgufHandBuilt, Q6_K) {
  block_q6_K b{};
  const float d = 0.0625f;
  b.d = f32_to_f16_bits(d);
  int sc[16];
  for (int s = 0; s < 16; ++s) {
    sc[s] = (s * 37) % 256 - 128;  // int8, negatives included
    b.scales[s] = static_cast<int8_t>(sc[s]);
  }
  int u[kQK_K];  // stored 6-bit codes; value = u - 32
  for (int i = 0; i < kQK_K; ++i) u[i] = code(i, 64);
  // half n, group g (32 elems), l: low nibble -> ql[64n + l + 32(g & 1)] (low for g < 2, high
  // for g >= 2); top 2 bits -> qh[32n + l] at shift 2g.
  for (int n = 0; n < 2; ++n) {
    for (int g = 0; g < 4; ++g) {
      for (int l = 0; l < 32; ++l) {
        const int v = u[128 * n + 32 * g + l];
        b.ql[64 * n + l + 32 * (g & 1)] |= static_cast<uint8_t>((v & 15) << (4 * (g >> 1)));
        b.qh[32 * n + l] |= static_cast<uint8_t>((v >> 4) << (2 * g));
      }
    }
  }
  float y[kQK_K];
  dequantize_block_q6_K(b, y);
  for (int i = 0; i < kQK_K; ++i) EXPECT_EQ(y[i], d * sc[i / 16] * (u[i] - 32)) << i;
}

TEST(GgufHandBuilt, Q2_K) {
  block_q2_K b{};
  const float d = 0.5f, dmin = 0.125f;
  b.d = f32_to_f16_bits(d);
  b.dmin = f32_to_f16_bits(dmin);
  for (int s = 0; s < 16; ++s) b.scales[s] = static_cast<uint8_t>((s * 5 + 1) % 16 | (15 - s) << 4);
  int q[kQK_K];
  for (int i = 0; i < kQK_K; ++i) q[i] = code(i, 4);
  // element 128h + 32j + l: bits 2j..2j+1 of qs[32h + l]
  for (int i = 0; i < kQK_K; ++i) {
    b.qs[32 * (i / 128) + i % 32] |= static_cast<uint8_t>(q[i] << (2 * ((i % 128) / 32)));
  }
  float y[kQK_K];
  dequantize_block_q2_K(b, y);
  for (int i = 0; i < kQK_K; ++i) {
    const int s = b.scales[i / 16];
    EXPECT_EQ(y[i], d * (s & 15) * q[i] - dmin * (s >> 4)) << i;
  }
}

TEST(GgufHandBuilt, Q3_K) {
  block_q3_K b{};
  const float d = 0.25f;
  b.d = f32_to_f16_bits(d);
  int sc[16];  // stored 6-bit scales, value = sc - 32
  for (int s = 0; s < 16; ++s) {
    sc[s] = (s * 29 + 3) % 64;
    if (s < 8)
      b.scales[s] |= static_cast<uint8_t>(sc[s] & 15);
    else
      b.scales[s - 8] |= static_cast<uint8_t>((sc[s] & 15) << 4);
    b.scales[8 + s % 4] |= static_cast<uint8_t>((sc[s] >> 4) << (2 * (s / 4)));
  }
  int q[kQK_K];  // value in -4..3: low 2 bits in qs, hmask bit set means "no -4"
  for (int i = 0; i < kQK_K; ++i) q[i] = code(i, 8) - 4;
  for (int i = 0; i < kQK_K; ++i) {
    const int h = i / 128, j = (i % 128) / 32, l = i % 32;
    const int u = q[i] + 4;
    b.qs[32 * h + l] |= static_cast<uint8_t>((u & 3) << (2 * j));
    if (u >= 4) b.hmask[l] |= static_cast<uint8_t>(1 << (4 * h + j));
  }
  float y[kQK_K];
  dequantize_block_q3_K(b, y);
  for (int i = 0; i < kQK_K; ++i) EXPECT_EQ(y[i], d * (sc[i / 16] - 32) * q[i]) << i;
}

}  // namespace
}  // namespace quanta::codec::gguf
