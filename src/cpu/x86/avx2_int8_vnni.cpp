// The avx2 level's packed GEMV on AVX-VNNI's vpdpbusd (avx2_int8_tile.hpp, kVnni), in a file of
// its own so that its instances build beside avx2_int8.cpp's.
#include "cpu/x86/avx2_int8.hpp"

#include "cpu/x86/avx2_int8_tile.hpp"

namespace quanta::cpu::avx2_int8 {

void packed_multi_vnni(const WeightPlan& w, const vnni::MultiPlanes& mp, int64_t n0, int64_t n1,
                       float* y, int64_t ldy) {
  packed_multi_on<true>(w, mp, n0, n1, y, ldy);
}

}  // namespace quanta::cpu::avx2_int8
