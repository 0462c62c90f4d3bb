// qmm_affine_i8: affine nk, small M (up to 16 rows of x), f16/bf16 activations, 2-6 and 8-bit
// codes, on integer mma with the rows of x as the mma's columns.
//
// The arithmetic is qmv_affine_i8's (x as two int8 planes per group, codes as u8 operands of
// mma m16n8k32, y = Σ_g s·d_g·(H + L/256) + b·X_g), the tiling is not: there the 8 mma columns
// are 4 groups x 2 planes of one row of x, so every extra row of x costs a full set of mma and B
// loads; here they are 4 rows of x x 2 planes of one group, so one mma serves 4 rows of x and
// further column tiles (NT = 1, 2 or 4) serve rows 4-7, 8-15 off the same code registers.
// Four tiles (M = 9..16) exist for 5-bit g128 and 8-bit g64 only (xc_four_tiles): elsewhere
// qmm_affine_tc ran M = 9..16 faster on the H200 (docs/perf-cuda-i8-widths.md).
//
// Tile: a block owns 16 rows of W (the mma's M); its warps split K in steps of 4 consecutive
// groups (so each lane's scales and biases of a step are one 8-byte load). For a group, the
// quad of lanes (g = lane/4, q = lane%4) holds its codes for rows g and g+8, lane q the q-th
// quarter (G/4 codes, G·BITS/32 bytes); the group is G/32 mma k32 slices. A quarter must be whole
// unpack units (cuda/i8_layout.hpp: a word for 2/4/8 bits, 32 codes for 3/5 bits, 16 for 6), so
// 3/5-bit codes need groups of 128 and 6-bit of 64 or 128; their codes are gathered by byte
// permutes in i8_pos order, which the pre-pass follows.
// B column n of tile t is row 4t + n/2 of x, plane n%2; C[g][2q..2q+1] held by lane (g, q) is
// (H, L) of row 4t+q of x, so every lane applies the scale of its rows of W to its rows of x.
// x's planes come from a pre-pass (qmm_x_planes) in that B order. At M = 3..4 they are as many
// bytes as the codes, read through L1 at every step: codes are marked for eviction first (one and
// two column tiles), and for 4-bit groups of 64 a step's B fragments load one step ahead
// (xc_evict_first, xc_b_ahead). With four tiles, a sum c of the mma (|c| <= 255 * 127 * 128 < 2^22)
// plus 0x4B400000 reads as the f32 1.5 * 2^23 + c, so H + L/256 is two IADD, one FADD and one FMA,
// rounded once as fmaf(float(L), 1/256, float(H)): the four I2F per group and tile run at 1/8 of
// the FP32 rate. (At M = 3..8 it ran 0.74-1.39x the speed, median 1.00, int4 g64 f16 3-4% slower:
// not taken.)
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "cuda/common.cuh"
#include "cuda/i8_warps.hpp"
#include "cuda/qmv_affine_i8.cuh"  // i8_pos, unpacks, loads, imma_16832, grid dependency

namespace quanta::cuda {

inline constexpr int kXcRows = 16;               // rows of W per block (the mma's M)
inline constexpr int kXcMaxWarps = kI8MaxWarps;  // warps per block (they split K)
inline constexpr int kXcMaxM = 16;               // rows of x: up to four column tiles of 4

struct XcArgs {
  const uint8_t* codes;
  const void* scales;  // T [N, K/G]
  const void* biases;  // T [N, K/G]
  const void* x;       // T [M, K]
  void* y;             // T [M, N]
  uint32_t* planes;    // [M][K/G][G/2 words], written by the pre-pass (XcGeom order)
  float2* gx;          // [M][K/G]: (d_g, X_g), written by the pre-pass
  int32_t m, n, k;
  int64_t row_bytes;
};

// Whether a lane's quarter of a group is whole unpack units (the instances that exist).
constexpr bool xc_serves(int bits, int group) {
  return (group / 4) % i8_unit_codes(bits) == 0;
}

// The widths with four-tile instances (M = 9..16): the ones that beat qmm_affine_tc there.
constexpr bool xc_four_tiles(int bits, int group) {
  return (bits == 5 && group == 128) || (bits == 8 && group == 64);
}

// The group of the geometry that runs a matrix with groups of `group` on NT column tiles: groups
// of 128 of 8-bit codes, and of 2-bit codes on two tiles (M = 5..8), as two groups of 64 sharing
// a scale and bias (x's planes and sums per 64). H200 f16, M = 3, 4, 8 on 14336 x 5120 /
// 5120 x 14336 / 27648 x 5120 (docs/PERF.md): 8-bit 1.05-1.16x at M = 3, 4 and 1.58-1.86x at
// M = 8; 2-bit 1.04-1.32x at M = 8 (0.88-1.10x at M = 3, 4). 4-bit (0.69-1.06x) and 6-bit
// (0.58-0.90x) keep their groups.
constexpr int xc_run_group(int bits, int group, int nt) {
  const bool halve = bits == 8 || (bits == 2 && nt >= 2);
  return group == 128 && halve ? 64 : group;
}

template <int BITS, int G>
struct XcGeom {
  static constexpr bool kWholeBytes = BITS == 2 || BITS == 4 || BITS == 8;
  static constexpr int kGroupBytes = G * BITS / 8;
  static constexpr int kLaneBytes = kGroupBytes / 4;  // one quarter of a group's row
  static constexpr int kLaneWords = kLaneBytes / 4;
  // Loads as wide as every lane's offset allows (quarters of 12 or 20 bytes are 4-byte aligned).
  static constexpr int kLoadWords = kLaneWords % 4 == 0 ? 4 : kLaneWords % 2 == 0 ? 2 : 1;
  static constexpr int kRegs = G / 16;    // u8x4 registers: G/4 codes per lane and row
  static constexpr int kSlices = G / 32;  // mma k32 per group
  // Steps (4 consecutive groups) held in registers ahead of use: 128 bytes of codes per lane in
  // flight (more where a single step is already larger: 160-256 bytes for 5-bit g128, 6-bit g128
  // and 8-bit g128; 3-bit g128 and 6-bit g64 hold one step of 96).
  static constexpr int kDepth = std::max(1, std::min(4, 16 / kLaneBytes));
  static_assert(xc_serves(BITS, G), "a lane's quarter of a group must be whole unpack units");
  static_assert(kLaneWords % I8Unit<BITS>::kWords == 0);
  static_assert(kRegs == 2 * kSlices);
  // B words of one (row of x, group): [q][plane][slice][2].
  static constexpr int kPlaneWords = G / 2;
};

// Pre-pass: one thread per (row of x, group, quarter q); the group's max |x| and sum by
// shuffles among its 4 threads (consecutive lanes). Writes the B words lane q of a column reads.
template <class T, int BITS, int G>
__global__ void qmm_x_planes_kernel(const T* x_rows, uint32_t* planes_rows, float2* gx_rows,
                                    int k) {
  using Geom = XcGeom<BITS, G>;
  constexpr int kPer = G / 4;  // elements of x per thread
  const int groups = k / G;
  const T* x = x_rows + static_cast<int64_t>(blockIdx.y) * k;
  uint32_t* planes = planes_rows + static_cast<int64_t>(blockIdx.y) * groups * Geom::kPlaneWords;
  float2* gx = gx_rows + static_cast<int64_t>(blockIdx.y) * groups;
  grid_dependency_release();  // the main kernel may start loading codes now
  grid_dependency_wait();     // x and the scratch: behind the previous kernel (common.cuh)
  const int t = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  const bool live = t < groups * 4;
  const int grp = live ? t / 4 : 0, q = t % 4;
  const T* src = x + static_cast<int64_t>(grp) * G + q * kPer;
  float v[kPer];
#pragma unroll
  for (int i = 0; i < kPer; ++i) v[i] = to_f32(src[i]);
  float amax = 0.0f, sum = 0.0f;
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    amax = fmaxf(amax, fabsf(v[i]));
    sum += v[i];
  }
#pragma unroll
  for (int o = 1; o < 4; o <<= 1) {
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    sum += __shfl_xor_sync(0xffffffffu, sum, o);
  }
  if (!live) return;
  const float d = amax > 0.0f ? amax / 127.0f : 1.0f;
  const float inv = 1.0f / d;
  if (q == 0) gx[grp] = make_float2(d, sum);
  uint32_t* out = planes + static_cast<int64_t>(grp) * Geom::kPlaneWords;
#pragma unroll
  for (int r = 0; r < Geom::kRegs; ++r) {  // register r of the lane's codes: slice r/2, half r%2
    uint32_t wh = 0, wl = 0;
#pragma unroll
    for (int b = 0; b < 4; ++b) {
      const float xv = v[i8_pos<BITS>(r, b)];
      const float h = fminf(fmaxf(rintf(xv * inv), -127.0f), 127.0f);
      const float res = fmaf(-h, d, xv);  // |res| <= d/2
      const float l = fminf(fmaxf(rintf(res * inv * 256.0f), -127.0f), 127.0f);
      wh |= (static_cast<uint32_t>(static_cast<int32_t>(h)) & 0xffu) << (8 * b);
      wl |= (static_cast<uint32_t>(static_cast<int32_t>(l)) & 0xffu) << (8 * b);
    }
    out[(q * 2 + 0) * Geom::kRegs + r] = wh;
    out[(q * 2 + 1) * Geom::kRegs + r] = wl;
  }
}

// Codes loaded L1::evict_first, so x's planes (as many bytes as the codes at M = 4, twice as many
// at M = 8) stay in L1: every width on one and two column tiles. H100 (docs/PERF.md): 4-bit,
// M = 3, 4, the three headline shapes, 0.99-1.09x (geometric mean 1.04x); the other widths and
// two tiles, M = 4 and 8, bf16, 0.96-1.21x (geometric mean 1.04x). Four tiles: not measured.
constexpr bool xc_evict_first(int nt) {
  return nt <= 2;
}

// B fragments and (d, X) of a warp's next step loaded during this one, the code ring halved to
// pay for their registers (120-124, was 128): 4-bit groups of 64 on one column tile. With the
// eviction hint, against it alone: 1.02-1.12x where K = 5120, 0.94-0.98x at 5120 x 14336; groups
// of 128 and 32 lost (0.79-1.0x).
constexpr bool xc_b_ahead(int bits, int group, int nt) {
  return bits == 4 && group == 64 && nt == 1;
}

// Register caps (blocks of 8 warps resident per SM): two and four column tiles at 128. Two
// uncapped took 140 and ran 13% slower on 14336 x 5120 (docs/PERF.md); four spill 16-80 bytes
// at 128 and take 140 uncapped, where 5-bit f16 ran 1.7x slower on two of the three shapes.
// One tile at 128 where that spills at most 8 bytes: 4-bit groups of 128 (136 registers, no
// spill; H100, M = 3..4, three shapes: f16 1.05-1.23x, bf16 0.97-1.13x, 5.6% less time summed)
// and f16 2-bit groups of 64 (136, 8 bytes; 1.08-1.30x). bf16 2-bit g64 (168) and 4-bit g32
// (154) spill 80 / 64 bytes there and ran 0.88-0.97x; f16 2-bit g128 (140) ran 0.79-1.17x;
// the rest take <= 128 uncapped.
template <class T, int BITS, int G, int NT>
constexpr int xc_min_blocks() {
  if constexpr (NT == 1)
    return (BITS == 4 && G == 128) || (BITS == 2 && G == 64 && std::is_same_v<T, __half>) ? 2 : 0;
  else
    return 2;
}

// G: the geometry's group (codes, x's planes and (d, X) per group of G); SG: the matrix's group,
// G or 2G, whose scale and bias serve SG / G consecutive groups of the geometry.
template <class T, int BITS, int G, int NT, int SG = G>
__global__ void __launch_bounds__(kXcMaxWarps * 32, xc_min_blocks<T, BITS, G, NT>())
    qmm_affine_i8_kernel(XcArgs a) {
  constexpr bool BA = xc_b_ahead(BITS, G, NT), kEF = xc_evict_first(NT);
  grid_dependency_release();  // the next call's pre-pass may launch (common.cuh)
  using Geom = XcGeom<BITS, G>;
  constexpr int W = Geom::kLaneWords, DS = BA ? std::max(1, Geom::kDepth / 2) : Geom::kDepth,
                R = Geom::kRegs, LW = Geom::kLoadWords;
  // 3/5/6 bits, and four column tiles, unpack and refill a group at a time: all four groups
  // unpacked before the refill spilled 88-272 bytes at 3/5/6 bits with two column tiles, and
  // 136-152 bytes (8-bit g64, 4-bit g64) with four.
  static_assert(NT != 4 || xc_four_tiles(BITS, G), "four tiles: see xc_four_tiles");
  constexpr bool kPerGroup = !Geom::kWholeBytes || NT > 2;
  constexpr int kMagic = 0x4B400000;  // 1.5 * 2^23 as f32: see the header
  constexpr float kMagicHL = 12582912.0f * (1.0f + 1.0f / 256.0f);  // both biases, L's / 256
  extern __shared__ __align__(16) uint8_t smem[];
  const int lane = static_cast<int>(threadIdx.x) & 31, warp = static_cast<int>(threadIdx.x) >> 5;
  const int warps = static_cast<int>(blockDim.x) >> 5;
  const int g = lane >> 2, q = lane & 3;
  const int row0 = static_cast<int>(blockIdx.x) * kXcRows;
  const int r_lo = min(row0 + g, a.n - 1), r_hi = min(row0 + g + 8, a.n - 1);  // past N: not stored
  const int groups = a.k / G;

  // Codes, scales and biases of this warp's steps (warp, warp + warps, ...) run DS steps ahead in
  // registers, issued before waiting for the pre-pass.
  const int steps = groups / 4;
  const uint8_t* w_lo = a.codes + static_cast<int64_t>(r_lo) * a.row_bytes + q * Geom::kLaneBytes;
  const uint8_t* w_hi = a.codes + static_cast<int64_t>(r_hi) * a.row_bytes + q * Geom::kLaneBytes;
  const uint8_t* scales = static_cast<const uint8_t*>(a.scales);
  const uint8_t* biases = static_cast<const uint8_t*>(a.biases);
  static_assert(SG == G || SG == 2 * G);
  constexpr int kShare = SG / G;  // groups of the geometry per scale and bias
  const int64_t sb_lo = static_cast<int64_t>(r_lo) * (a.k / SG) * 2,
                sb_hi = static_cast<int64_t>(r_hi) * (a.k / SG) * 2;
  uint32_t ring_lo[DS][4][W], ring_hi[DS][4][W];
  uint2 ring_sb[DS][4];                         // s and b of rows g, g+8: 4 values of T each
  auto load_group = [&](int s, int u, int i) {  // codes of group i of step s
    const int64_t off = static_cast<int64_t>(4 * s + i) * Geom::kGroupBytes;
    i8_load_piece<W, LW, kEF>(w_lo + off, ring_lo[u][i]);
    i8_load_piece<W, LW, kEF>(w_hi + off, ring_hi[u][i]);
  };
  auto load_sb = [&](int s, int u) {  // a step's 4 / kShare values of T of each
    const int64_t off = static_cast<int64_t>(s) * 8 / kShare;
    const uint8_t* src[4] = {scales + sb_lo + off, biases + sb_lo + off, scales + sb_hi + off,
                             biases + sb_hi + off};
#pragma unroll
    for (int v = 0; v < 4; ++v) {
      if constexpr (kShare == 1)
        ring_sb[u][v] = *reinterpret_cast<const uint2*>(src[v]);
      else
        ring_sb[u][v].x = *reinterpret_cast<const uint32_t*>(src[v]);
    }
  };
  auto load = [&](int s, int u) {
    if (s < steps) {
#pragma unroll
      for (int i = 0; i < 4; ++i) load_group(s, u, i);
      load_sb(s, u);
    }
  };
  auto unpack = [](const uint32_t(&piece)[W], uint32_t(&regs)[R]) {
    if constexpr (Geom::kWholeBytes) {
#pragma unroll
      for (int r = 0; r < R; ++r) regs[r] = i8_code_reg<BITS, W>(piece, r);
    } else {
      i8_unpack<BITS, W>(piece, regs);
    }
  };
#pragma unroll
  for (int u = 0; u < DS; ++u) load(warp + u * warps, u);

  grid_dependency_wait();  // the pre-pass's planes and (d, X) are complete past this point
  // B column g of tile t: row 4t + g/2 of x, plane g%2.
  const uint32_t* b_src[NT];
  bool b_live[NT];
#pragma unroll
  for (int t = 0; t < NT; ++t) {
    const int m = 4 * t + (g >> 1);
    b_live[t] = m < a.m;
    b_src[t] = a.planes + (static_cast<int64_t>(b_live[t] ? m : 0) * groups) * Geom::kPlaneWords +
               (q * 2 + (g & 1)) * R;
  }
  auto load_b = [&](int t, int grp, uint32_t(&b)[R]) {  // B fragment of tile t, group grp
    const uint32_t* bs = b_src[t] + static_cast<int64_t>(grp) * Geom::kPlaneWords;
    if constexpr (R % 4 == 0) {
#pragma unroll
      for (int j = 0; j < R; j += 4) {
        const uint4 v =
            b_live[t] ? *reinterpret_cast<const uint4*>(bs + j) : make_uint4(0u, 0u, 0u, 0u);
        b[j] = v.x, b[j + 1] = v.y, b[j + 2] = v.z, b[j + 3] = v.w;
      }
    } else {
      static_assert(R == 2);
      const uint2 v = b_live[t] ? *reinterpret_cast<const uint2*>(bs) : make_uint2(0u, 0u);
      b[0] = v.x, b[1] = v.y;
    }
  };
  // BA: B fragments and (d, X) of the warp's next step load during this one (one tile only).
  uint32_t b_now[BA ? 4 : 1][BA ? R : 1];
  float2 dx_now[BA ? 4 : 1];
  auto load_step_b = [&](int s, uint32_t(&bb)[BA ? 4 : 1][BA ? R : 1], float2(&dd)[BA ? 4 : 1]) {
    if constexpr (BA) {
      const bool live = q < a.m;
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        load_b(0, 4 * s + i, bb[i]);
        dd[i] = live ? a.gx[static_cast<int64_t>(q) * groups + 4 * s + i] : make_float2(0.f, 0.f);
      }
    }
  };
  if constexpr (BA) {
    if (warp < steps) load_step_b(warp, b_now, dx_now);
  }
  // The i-th value of T in a uint2 of 4, as f32. bf16 through the intrinsic in groups of 32, and
  // on two tiles for 2- and 3-bit groups of 128: ptxas then holds 4-bit g32's one tile in 128
  // registers (was 154) and its two tiles' stack frame in 24 bytes (was 88). H100, three
  // shapes: 4-bit g32 1.09-1.22x at M = 3 / 4 / 8, 8-bit g32 1.01-1.18x, 2- and 3-bit g128 at
  // M = 8 1.02-1.11x; elsewhere it ran 0.84-1.12x (docs/PERF.md), so there the shift.
  auto value = [](const uint2& v, int i) {
    const uint32_t w = i < 2 ? v.x : v.y;
    const uint32_t bits = i % 2 ? w >> 16 : w & 0xffffu;
    if constexpr (std::is_same_v<T, __half>)
      return __half2float(__ushort_as_half(static_cast<unsigned short>(bits)));
    else if constexpr (G == 32 || (NT == 2 && SG == 128 && BITS <= 3))
      return __bfloat162float(__ushort_as_bfloat16(static_cast<unsigned short>(bits)));
    else
      return __uint_as_float(bits << 16);  // bf16 is the upper half of an f32
  };
  float acc[NT][2] = {};  // rows g, g+8 of W; row 4t + q of x
  for (int s0 = warp; s0 < steps; s0 += DS * warps) {
#pragma unroll
    for (int u = 0; u < DS; ++u) {
      const int s = s0 + u * warps;
      if (s >= steps) break;  // uniform across the warp
      uint32_t a_lo[4][R], a_hi[4][R];
      float sb[4][4];  // [group][s_lo, b_lo, s_hi, b_hi]
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        if constexpr (!kPerGroup) {
#pragma unroll
          for (int r = 0; r < R; ++r) {
            a_lo[i][r] = i8_code_reg<BITS, W>(ring_lo[u][i], r);
            a_hi[i][r] = i8_code_reg<BITS, W>(ring_hi[u][i], r);
          }
        }
#pragma unroll
        for (int v = 0; v < 4; ++v) sb[i][v] = value(ring_sb[u][v], i / kShare);
      }
      uint32_t b_next[BA ? 4 : 1][BA ? R : 1];
      float2 dx_next[BA ? 4 : 1];
      if constexpr (BA) {
        if (s + warps < steps) load_step_b(s + warps, b_next, dx_next);
      }
      const int next = s + DS * warps;
      if constexpr (!kPerGroup) {
        load(next, u);  // refill, DS steps ahead
      } else if (next < steps) {
        load_sb(next, u);
      }
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int grp = 4 * s + i;
        if constexpr (kPerGroup) {
          unpack(ring_lo[u][i], a_lo[i]);
          unpack(ring_hi[u][i], a_hi[i]);
          if (next < steps) load_group(next, u, i);
        }
        // A tile without rows of x (M = 9..12) runs on zero B rather than break out: the branch
        // kept each tile's B loads from issuing early, and int4 g64 M = 9 ran 59 us against 49.
#pragma unroll
        for (int t = 0; t < NT; ++t) {
          uint32_t b[R];
          if constexpr (BA) {
#pragma unroll
            for (int r = 0; r < R; ++r) b[r] = b_now[i][r];
          } else {
            load_b(t, grp, b);
          }
          int c[4] = {};
#pragma unroll
          for (int j = 0; j < Geom::kSlices; ++j)
            imma_16832(c, a_lo[i][2 * j], a_hi[i][2 * j], a_lo[i][2 * j + 1], a_hi[i][2 * j + 1],
                       b[2 * j], b[2 * j + 1]);
          // c[0], c[1] = H, L of row g of W and row 4t + q of x; c[2], c[3] of row g + 8.
          const int m = 4 * t + q;
          if (m < a.m) {
            const float2 dx = BA ? dx_now[i] : a.gx[static_cast<int64_t>(m) * groups + grp];
            float v_lo, v_hi;
            if constexpr (NT > 2) {  // the I2F-free sums (header)
              v_lo = dx.x * fmaf(__int_as_float(c[1] + kMagic), 1.0f / 256.0f,
                                 __int_as_float(c[0] + kMagic) - kMagicHL);
              v_hi = dx.x * fmaf(__int_as_float(c[3] + kMagic), 1.0f / 256.0f,
                                 __int_as_float(c[2] + kMagic) - kMagicHL);
            } else {  // M <= 8: I2F kept (the sums above ran 0.74-1.39x the speed there)
              v_lo = dx.x * fmaf(static_cast<float>(c[1]), 1.0f / 256.0f, static_cast<float>(c[0]));
              v_hi = dx.x * fmaf(static_cast<float>(c[3]), 1.0f / 256.0f, static_cast<float>(c[2]));
            }
            acc[t][0] = fmaf(sb[i][0], v_lo, fmaf(sb[i][1], dx.y, acc[t][0]));
            acc[t][1] = fmaf(sb[i][2], v_hi, fmaf(sb[i][3], dx.y, acc[t][1]));
          }
        }
      }
      if constexpr (BA) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          dx_now[i] = dx_next[i];
#pragma unroll
          for (int r = 0; r < R; ++r) b_now[i][r] = b_next[i][r];
        }
      }
    }
  }

  // Sum over the warps through shared memory ([warp][row of x][16 rows of W]).
  float* part = reinterpret_cast<float*>(smem);
#pragma unroll
  for (int t = 0; t < NT; ++t) {
    const int m = 4 * t + q;
    part[(warp * 4 * NT + m) * kXcRows + g] = acc[t][0];
    part[(warp * 4 * NT + m) * kXcRows + g + 8] = acc[t][1];
  }
  __syncthreads();
  T* y = static_cast<T*>(a.y);
  for (int i = static_cast<int>(threadIdx.x); i < a.m * kXcRows;
       i += static_cast<int>(blockDim.x)) {
    const int m = i / kXcRows, r = i % kXcRows, row = row0 + r;
    float sum = 0.0f;
    for (int w = 0; w < warps; ++w) sum += part[(w * 4 * NT + m) * kXcRows + r];
    if (row < a.n) y[static_cast<int64_t>(m) * a.n + row] = from_f32<T>(sum);
  }
}

// Pre-pass (a grid row per row of x), then the main kernel with programmatic dependent launch.
// one_wave: xc_wave_warps at this instance's occupancy (queried once per process), with `warps`
// where no count >= 2 is possible; else `warps` as given.
// On the geometry of groups of RG for a matrix with groups of G (xc_run_group).
template <class T, int BITS, int RG, int NT, int G>
cudaError_t launch_qmm_affine_i8_on(const XcArgs& a, int warps, bool one_wave,
                                    cudaStream_t stream) {
  const int tiles = (a.n + kXcRows - 1) / kXcRows;
  if (one_wave) {
    static const I8Occupancy occ =
        i8_occupancy(qmm_affine_i8_kernel<T, BITS, RG, NT, G>, 4 * NT * kXcRows * sizeof(float));
    if (occ.error != cudaSuccess) return occ.error;
    warps = xc_wave_warps(BITS, tiles, a.k / RG / 4, occ.sms, occ.blocks_per_sm, warps);
  }
  const int threads = a.k / RG * 4;
  if (cudaError_t e =
          launch_prepass(qmm_x_planes_kernel<T, BITS, RG>, dim3((threads + 127) / 128, a.m),
                         dim3(128), stream, static_cast<const T*>(a.x), a.planes, a.gx, a.k);
      e != cudaSuccess)
    return e;
  return launch_dependent(
      qmm_affine_i8_kernel<T, BITS, RG, NT, G>, dim3(static_cast<unsigned>(tiles)),
      dim3(static_cast<unsigned>(warps * 32)),
      static_cast<std::size_t>(warps) * 4 * NT * kXcRows * sizeof(float), stream, a);
}

// The matrix's groups of G on the geometry xc_run_group picks.
template <class T, int BITS, int G, int NT>
cudaError_t launch_qmm_affine_i8(const XcArgs& a, int warps, bool one_wave, cudaStream_t stream) {
  return launch_qmm_affine_i8_on<T, BITS, xc_run_group(BITS, G, NT), NT, G>(a, warps, one_wave,
                                                                            stream);
}

}  // namespace quanta::cuda
