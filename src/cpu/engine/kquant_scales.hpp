// Byte-shuffle controls, shifts and masks that decode the packed K-quant sub-block scales with
// one shuffle and one variable shift per vector of 16 int32 lanes. Plain constexpr tables (no
// vector types), shared by the engine of every ISA level and by the VNNI kernels.
#pragma once

#include <cstdint>

namespace quanta::cpu::kquant {

// Shuffle control and shifts that put Q3_K scale i in lane i (gguf_dot.hpp's Dot<Q3_K>::scales,
// vnni_kquant.cpp).
struct Q3Ctl {
  uint8_t ctl[64] = {};
  uint32_t lo[16] = {}, hi[16] = {};
  constexpr Q3Ctl() {
    for (int i = 0; i < 16; ++i) {
      ctl[4 * i] = static_cast<uint8_t>(i % 8);
      ctl[4 * i + 1] = static_cast<uint8_t>(8 + i % 4);
      ctl[4 * i + 2] = ctl[4 * i + 3] = 0x80;
      lo[i] = 4 * (i / 8);
      hi[i] = 4 + 2 * (i / 4);  // bits 8 + 2 (i / 4) .. + 1 to bits 4..5
    }
  }
};
alignas(64) inline constexpr Q3Ctl kQ3Ctl{};

// Shuffle control, shifts and masks that put the Q4_K/Q5_K 6-bit scale j in lane j and min j
// in lane 8 + j (get_scale_min_k4: for j >= 4 the low 4 bits come from byte j + 4, the top 2
// from bits 6-7 of byte j - 4 (scale) or j (min)); kMul puts 1/16 on the odd sub-blocks,
// whose codes are the high nibbles taken in place (16 · q).
struct QK45Ctl {
  uint8_t ctl[64] = {};
  uint32_t sh[16] = {}, mask[16] = {};
  float mul[16] = {};
  constexpr QK45Ctl() {
    for (int i = 0; i < 16; ++i) {
      const int j = i % 8;
      const bool min = i >= 8;
      ctl[4 * i + 2] = ctl[4 * i + 3] = 0x80;
      if (j < 4) {
        ctl[4 * i] = static_cast<uint8_t>(min ? j + 4 : j);
        ctl[4 * i + 1] = 0x80;
        mask[i] = 63;
      } else {
        ctl[4 * i] = static_cast<uint8_t>(j + 4);
        ctl[4 * i + 1] = static_cast<uint8_t>(min ? j : j - 4);
        sh[i] = min ? 4 : 0;
        mask[i] = 15;
      }
      mul[i] = !min && j % 2 ? 0.0625f : 1.0f;
    }
  }
};
alignas(64) inline constexpr QK45Ctl kQK45Ctl{};

}  // namespace quanta::cpu::kquant
