// Pieces the VNNI GEMVs (vnni_kquant.cpp, vnni_affine.cpp) share. Included only by those files,
// which are built with the same VNNI/VBMI flags, so these inline functions have one meaning.
#pragma once

// GCC 12's AVX-512 headers build masked builtins on _mm512_undefined_*, which
// -W(maybe-)uninitialized reports at inlined call sites (a false positive, GCC bug 105593).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>

#include <cmath>
#include <cstdint>

#include "cpu/plan.hpp"

namespace quanta::cpu::vnni {

// Storage row r (rows near the end of the buffer come from the padded tail copy).
inline const uint8_t* row_at(const WeightPlan& w, int64_t r) {
  return r < w.tail_row ? w.codes + r * w.row_bytes : w.tail_codes + (r - w.tail_row) * w.row_bytes;
}

inline __m512 round_even(__m512 v) {
  return _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}

// The largest |x| of every block of ELEMS into big[b]; false if a block cannot be split into
// planes: a NaN, an infinity, or a nonzero largest |x| below 2^-96 (its 2^e would leave the
// normal range). The caller then runs the float kernel.
template <int64_t ELEMS>
bool block_max(const float* x, int64_t blocks, float* big) {
  const __m512 sign = _mm512_set1_ps(-0.0f);
  for (int64_t b = 0; b < blocks; ++b) {
    __m512 mx = _mm512_setzero_ps();
    for (int64_t v = 0; v < ELEMS / 16; ++v) {
      const __m512 xv = _mm512_loadu_ps(x + b * ELEMS + 16 * v);
      if (_mm512_cmp_ps_mask(xv, xv, _CMP_UNORD_Q) != 0) return false;  // NaN
      mx = _mm512_max_ps(mx, _mm512_andnot_ps(sign, xv));
    }
    big[b] = _mm512_reduce_max_ps(mx);
    if (!std::isfinite(big[b]) || (big[b] != 0.0f && big[b] < 0x1p-96f)) return false;
  }
  return true;
}

// x's int8 planes in use: 3 (21 bits below each block's largest |x|), or 2 (14 bits) when x
// arrived as bf16 (8 significant bits; WeightPlan::x_bf16). Two planes' sum p0·2^7 + p1 is 2^7
// less than three planes' p0·2^14 + p1·2^7 + p2: the scales that carry x's 2^e take
// kPlaneUnit<P> with it.
template <int P>
inline constexpr float kPlaneUnit = P == 2 ? 128.0f : 1.0f;

// fn.template operator()<P>() with x's plane count: 2 for bf16 x, else 3.
template <class Fn>
void with_planes(const WeightPlan& w, Fn&& fn) {
  if (w.x_bf16)
    fn.template operator()<2>();
  else
    fn.template operator()<3>();
}

}  // namespace quanta::cpu::vnni
