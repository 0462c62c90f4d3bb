// Rows of x as the VNNI GEMVs take them (vnni_affine.hpp, vnni_kquant.hpp): a plain struct, so
// the per-ISA engine files may fill it.
#pragma once

#include <cstdint>

namespace quanta::cpu::vnni {

// Up to four rows of x, each split by its prep (affine_prep, prep): its planes (in the GEMV's
// xp buffer), its powers of two (per group for affine, per 256-element block for the K-quants)
// and its group or sub-block sums.
struct MultiPlanes {
  int m = 0;
  const uint8_t* planes[4] = {};
  const float* pow2[4] = {};
  const float* xs[4] = {};
};

}  // namespace quanta::cpu::vnni
