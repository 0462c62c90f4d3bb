// The entry points every ISA level exports (defined by entry_gemv.inc / entry_tile.inc in that
// level's namespace; collected into its IsaKernels table).
#pragma once

#include "cpu/plan.hpp"

namespace quanta::cpu::QUANTA_ISA {

int64_t entry_gemv_xs_count(const WeightPlan& w);
void entry_gemv_prep(const WeightPlan& w, const float* x, float* xp, float* xs);
void entry_gemv_nk(const WeightPlan& w, const float* xp, const float* xs, float* y, int64_t n0,
                   int64_t n1, int64_t k0, int64_t k1);
void entry_gemv_nk_multi(const WeightPlan& w, const float* const* xp, const float* const* xs, int m,
                         float* y, int64_t ldy, int64_t n0, int64_t n1);
void entry_gemv_kn(const WeightPlan& w, const float* x, int64_t ldx, int64_t m, float* y,
                   int64_t ldy, int64_t n0, int64_t n1, int64_t k0, int64_t k1);
int64_t entry_gemv_kn_ylen(const WeightPlan& w);
void entry_gemv_kn_finish(const WeightPlan& w, const float* sum, float* y);
void entry_decode_nk(const WeightPlan& w, int64_t n0, int64_t rows, int64_t k0, int64_t kc,
                     float* tile, int64_t ld);
void entry_decode_kn(const WeightPlan& w, int64_t k0, int64_t rows, int64_t n0, int64_t nc,
                     float* tile, int64_t ld);
void entry_gemm_nk(const float* x, int64_t ldx, int64_t m, const float* t, int64_t ld, int64_t nt,
                   int64_t kc, float* c, int64_t ldc, bool accumulate);
void entry_gemm_kn(const float* x, int64_t ldx, int64_t m, const float* t, int64_t ld, int64_t nt,
                   int64_t kc, float* c, int64_t ldc, bool accumulate);
void entry_pack_nk(const WeightPlan& w, int64_t n0, int64_t rows, int64_t k0, int64_t kc,
                   float* scratch, float* packed);
void entry_gemm_packed(const float* x, int64_t ldx, int64_t m, const float* p, int64_t nt,
                       int64_t kc, float* c, int64_t ldc, bool accumulate);
void entry_dequantize_nk(const WeightPlan& w, int64_t n0, int64_t rows, void* out, DType dt);

}  // namespace quanta::cpu::QUANTA_ISA
