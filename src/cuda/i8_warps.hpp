// Warps per block for the integer-mma kernels (qmv_affine_i8, qmm_affine_i8): the block's warps
// split K in steps of 4 groups, and the count trades warps per SM against waves of blocks. Host
// code only, so the selection tests run without nvcc.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>

namespace quanta::cuda {

inline constexpr int kI8MaxWarps = 8;

// Warps per block (they split K): enough that the grid holds ~1280 warps, from min_warps (1, 2
// or 4) to 8, at most one per step of K; the environment variable `env` overrides it for tuning
// runs. The figures behind each caller's minimum are in docs/PERF.md.
inline int i8_warps_for(int tiles, int steps, int min_warps, const char* env) {
  int w = min_warps;
  while (w < kI8MaxWarps && w * tiles < 1280) w *= 2;
  if (const char* e = std::getenv(env)) w = std::atoi(e);
  if (w < 1 || w > kI8MaxWarps) w = 2;
  return std::min(w, std::max(1, steps));
}

// Warps per block (qmv_affine_i8 and qmm_affine_i8), from the instance's occupancy
// (blocks_per_sm[w - 1]: blocks of w warps resident per multiprocessor): the most, up to 8 and at
// most one per step, with which every block is resident at once (one wave); where no count >= 2
// does, `fallback` (qmv_affine_i8: qmv_i8_fallback_warps). H200, 2/4/8 bits x
// g32/64/128 on 14336x5120 / 5120x14336 / 27648x5120, counts 1/2/4/8 only: the best of them on 25
// of 27 cells and within 6% on the others; 1.04-1.60x faster than the doubling rule where the
// counts differ (2-bit g32, 4-bit g32 most; docs/perf-cuda-i8-widths.md). Counts between the powers
// of two (Dec 1): int4 g64 on 5120 x 14336 takes 5 (3 blocks, 15 warps per SM, where 4 left 9.7 on
// average and 6 did not fit): 1.11x (docs/PERF.md).
inline int i8_one_wave_warps(int tiles, int steps, int sms, const int (&blocks_per_sm)[kI8MaxWarps],
                             int fallback) {
  for (int w = kI8MaxWarps; w >= 2; --w)
    if (w <= steps && tiles <= sms * blocks_per_sm[w - 1]) return w;
  return fallback;
}

// The count w in [min_warps, max_warps] (max_warps <= 8) that minimises the waves of blocks times
// the steps each warp runs, ceil(tiles / (sms · blocks_per_sm)) · ceil(steps / w), since a partial
// last wave costs a whole one; on a tie the later (larger) count where tie_wins(its waves, the
// best's waves). 0 where no count has a resident block.
template <class TieWins>
int i8_least_cost_warps(int tiles, int steps, int sms, const int (&blocks_per_sm)[kI8MaxWarps],
                        int min_warps, int max_warps, TieWins tie_wins) {
  int best = 0;
  int64_t best_cost = 0, best_waves = 0;
  for (int w = min_warps; w <= std::min(max_warps, kI8MaxWarps); ++w) {
    const int64_t resident = static_cast<int64_t>(sms) * blocks_per_sm[w - 1];
    if (resident <= 0) continue;
    const int64_t waves = (tiles + resident - 1) / resident;
    const int64_t cost = waves * ((steps + w - 1) / w);
    if (best == 0 || cost < best_cost || (cost == best_cost && tie_wins(waves, best_waves)))
      best = w, best_cost = cost, best_waves = waves;
  }
  return best;
}

// qmv_affine_i8's warps per block where no count >= 2 fits one wave (its i8_one_wave_warps
// fallback). 8-bit codes take 8 (27648 x 5120, 20 steps, 78 registers: f16 M = 1 and 2 1.15-1.25x
// against 1 warp; bf16 1.06-1.09x against 4). The other widths take the count with the fewest
// waves times steps a warp (i8_least_cost_warps), 1-warp blocks among them, at least 2 steps a
// warp (one step leaves no load in flight behind the math: 2-bit g128 on 28672 x 4096, 8 warps
// of 1 step 19.4 us against 15.5 for 1 warp of 8), and on a tie the fewest waves (one wave of
// 1-warp blocks runs no tail and no reduction across warps: int4 g64 M = 2 on 27648 x 5120 29.2
// us against 32.1 with 4 warps). H100 bf16, 2-6 bits x g32/64/128, M = 1 and 2, counts 1..8
// forced on 27648 x 5120 and 14336 x 5120 (fitted), 18944 x 3584, 28672 x 4096 and 32000 x 4096
// (held out, then fitted), 24576 x 4096, 29568 x 8192 and 49152 x 2048 (held out): on the cells
// that fall back 1.01 / 1.03 / 1.02x the best count on geometric mean, at worst 1.12 / 1.19 /
// 1.16x, where the rule before (4 from 16 steps, 8 from 32, else 1) ran 1.04 / 1.06 / 1.06x and
// up to 1.34x (docs/PERF.md).
inline int qmv_i8_fallback_warps(int bits, int tiles, int steps, int sms,
                                 const int (&blocks_per_sm)[kI8MaxWarps]) {
  if (bits == 8) return kI8MaxWarps;
  const int w =
      i8_least_cost_warps(tiles, steps, sms, blocks_per_sm, 1, std::max(1, steps - 1),
                          [](int64_t waves, int64_t best_waves) { return waves < best_waves; });
  return w > 0 ? w : 1;
}

// Warps per block for a gather whose blocks do not fit one wave (gather_qmv_affine_i8: a grid row
// per row of x or pass): the largest power of two with at least 8 of K's steps a warp, at most 8.
// H100 bf16, 3/4/8-bit g64, 8 experts of 14336 x 4096 (16 steps) and 4096 x 14336 (56), 128 of
// 768 x 2048 (8) and 2048 x 768 (3), counts 1/2/4/8 forced: within 6% of the best count on every
// cell, where the one-wave rule's fallback (8 warps for 8-bit codes, else 1) ran up to 1.6x
// slower (8-bit on 2048 x 768: 5 of 8 warps idle; docs/PERF.md).
inline int i8_gather_warps(int steps) {
  int w = 1;
  while (2 * w <= kI8MaxWarps && 2 * w * 8 <= steps) w *= 2;
  return w;
}

// Warps per block from the instance's occupancy (blocks_per_sm[w - 1]: blocks of w warps resident
// per multiprocessor): the count w >= 2 (at most one per step) that minimises the waves of blocks
// times the steps each warp runs (i8_least_cost_warps); `fallback` where none fits. On a tie: one
// wave (the most warps that fit it, as i8_one_wave_warps), else for 2-bit codes the most warps and
// for the others the fewest waves. E.g. 4-bit g32 bf16 (6 blocks of 2 warps per SM, 4 of 3) on
// 14336x5120 takes 3 warps in 2 waves (14 steps a warp) over 2 in 2 (20 steps): 31 against 43 us.
// H200, M = 3, 4, 8, every width, three shapes (docs/PERF.md).
inline int xc_wave_warps(int bits, int tiles, int steps, int sms,
                         const int (&blocks_per_sm)[kI8MaxWarps], int fallback) {
  const int w = i8_least_cost_warps(
      tiles, steps, sms, blocks_per_sm, 2, steps, [bits](int64_t waves, int64_t best_waves) {
        return waves == 1 || (best_waves > 1 && (bits == 2 || waves < best_waves));
      });
  return w > 0 ? w : fallback;
}

}  // namespace quanta::cuda
