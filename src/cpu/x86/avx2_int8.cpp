// The avx2 level's packed GEMV on vpmaddubsw / vpmaddwd, x's planes, and the choice of the
// instances on AVX-VNNI (avx2_int8_vnni.cpp); see avx2_int8.hpp.
#include "cpu/x86/avx2_int8.hpp"

#include "cpu/x86/avx2_int8_tile.hpp"

namespace quanta::cpu::avx2_int8 {

bool prep(const WeightPlan& w, const float* x, uint8_t* planes, float* group_pow2) {
  const int64_t blocks = w.k / kBlock, per_block = kBlock / w.group;
  // blocks <= groups: each block's 2^e first, spread over its groups at the end.
  float* block_pow2 = group_pow2;
  if (!split_blocks<kBlock, kPlaneBytes>(x, blocks, planes, block_pow2, quad_planes)) return false;
  for (int64_t b = blocks - 1; b >= 0; --b) {  // every group takes its block's 2^e
    const float p = block_pow2[b];
    for (int64_t j = per_block - 1; j >= 0; --j) group_pow2[b * per_block + j] = p;
  }
  return true;
}

void packed_multi(const WeightPlan& w, const vnni::MultiPlanes& mp, int64_t n0, int64_t n1,
                  float* y, int64_t ldy) {
  if (w.avx_vnni) return packed_multi_vnni(w, mp, n0, n1, y, ldy);
  packed_multi_on<false>(w, mp, n0, n1, y, ldy);
}

}  // namespace quanta::cpu::avx2_int8
