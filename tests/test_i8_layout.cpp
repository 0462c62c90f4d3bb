// The integer-mma kernels' code order (cuda/i8_layout.hpp) on the host: for every width the
// unpack of MLX-packed codes puts code i8_pos(r, t) into byte t of register r, and i8_pos covers
// every position once (x's planes are written in that order, so a miss or a repeat would be
// a wrong dot product). Needs no GPU.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "cuda/i8_layout.hpp"
#include "format/affine.hpp"

namespace quanta {
namespace {

template <int BITS>
void check_width() {
  using U = cuda::I8Unit<BITS>;
  constexpr int kUnits = 4, kWords = kUnits * U::kWords, kCodes = kUnits * U::kCodes;
  static_assert(kCodes * BITS == kWords * 32 && U::kCodes % 4 == 0);
  std::vector<int> seen(kCodes, 0);
  for (int r = 0; r < kUnits * U::kRegs; ++r)
    for (int t = 0; t < 4; ++t) {
      const int pos = cuda::i8_pos<BITS>(r, t);
      ASSERT_GE(pos, 0);
      ASSERT_LT(pos, kCodes);
      ++seen[pos];
    }
  for (int i = 0; i < kCodes; ++i) EXPECT_EQ(seen[i], 1) << BITS << "-bit position " << i;

  std::mt19937 rng(BITS);
  for (int trial = 0; trial < 64; ++trial) {
    std::vector<uint32_t> codes(kCodes);
    uint8_t bytes[kWords * 4] = {};
    for (int i = 0; i < kCodes; ++i) {
      // Extremes first, so every bit of every code is set somewhere.
      codes[i] = trial == 0 ? (1u << BITS) - 1u : trial == 1 ? 0u : rng() & ((1u << BITS) - 1u);
      codec::affine_put_code(bytes, i, BITS, codes[i]);
    }
    uint32_t w[kWords];
    std::memcpy(w, bytes, sizeof w);  // little-endian words, as the kernels load them
    uint32_t a[kCodes / 4];
    cuda::i8_unpack<BITS, kWords>(w, a);
    for (int r = 0; r < kCodes / 4; ++r)
      for (int t = 0; t < 4; ++t)
        ASSERT_EQ((a[r] >> (8 * t)) & 0xffu, codes[cuda::i8_pos<BITS>(r, t)])
            << BITS << "-bit register " << r << " byte " << t << " trial " << trial;
  }
}

TEST(I8Layout, EveryWidthUnpacksInPositionOrder) {
  check_width<2>();
  check_width<3>();
  check_width<4>();
  check_width<5>();
  check_width<6>();
  check_width<8>();
}

TEST(I8Layout, PrmtMatchesPtx) {
  // PRMT's default mode: byte i of the result is byte sel[4i+2:4i] of {b, a}.
  EXPECT_EQ(cuda::i8_prmt(0x03020100u, 0x07060504u, 0x7654u), 0x07060504u);
  EXPECT_EQ(cuda::i8_prmt(0x03020100u, 0x07060504u, 0x0630u), 0x00060300u);
  EXPECT_EQ(cuda::i8_prmt(0x03020100u, 0x07060504u, 0x5210u), 0x05020100u);
}

}  // namespace
}  // namespace quanta
