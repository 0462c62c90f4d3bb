// qmm_affine_ring: y[m, n] = Σ_k x[m, k] · (s[n, g]·q[n, k] + b[n, g]) for 4-bit affine weights
// [N, K], f16/bf16 activations, M <= 16, on mma.sync m16n8k16 with f32 accumulators.
//
// Why: qmm_affine_rf (the same arithmetic, qmm_affine_rf.cuh) holds its codes in a register ring
// two windows deep. Nsight put it at 0.37 issued instructions per scheduler and cycle, waiting on
// its loads (long scoreboard), and every deeper ring spilled: the depth costs registers that the
// warps per SM need. Here each warp keeps NS stages of its rows' codes, scales and biases in
// flight in shared memory, each stage one bulk tensor copy (TMA) per operand issued by one lane
// and completing on the warp's own mbarrier: the depth costs no registers and no load
// instructions. Measured on the H200 it is no faster than qmm_affine_rf (M = 9..16: 0.89-1.14x)
// and slower than qmm_affine_i8 / qmm_affine_rf at M <= 8, so the selector never picks it; it
// runs when forced (docs/PERF.md: the variants measured, and where the time goes).
//
// Layout of the work (as qmm_affine_rf, whose stream-K flush it shares):
//   unit  = [128 rows x 256 codes] of W; persistent CTAs own contiguous ranges of units (row tile
//           major), stream_k_flush sums a row tile split between CTAs.
//   CTA   = 4 warps; warp w owns rows 32w..32w+31 of the row tile (two 16-row A-tiles).
//   stage = a warp's 32 rows x 128 bytes of codes (the tensor copy's 128-byte swizzle: piece c
//           of row r at c ^ (r % 8)) and 32 rows x 8 entries of scales and of biases.
//   lane  = (g, q) takes piece 2q + h in window h (h = 0, 1) of rows g, g + 8 of both A-tiles:
//           the eight lanes of a quarter-warp then read eight distinct bank groups.
//   x     = rf_x_frags_kernel<T, 4, true> writes the mma's B fragments in that order, read
//           through L1 a whole unit ahead of their use.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/affine_unpack.cuh"
#include "cuda/common.cuh"
#include "cuda/mma.cuh"
#include "cuda/qmm_affine_rf.cuh"  // rf_x_frags_kernel, rf_mma_pairs
#include "cuda/qmm_affine_tc.cuh"  // TcArgs, first_unit, stream_k_flush

namespace quanta::cuda {

inline constexpr int kRingThreads = 128;
static_assert(kRingThreads == kTcThreads);  // stream_k_flush's CTA and row tile

// One stage of one warp in shared memory; slots stay 1024-byte aligned (the swizzle's period).
struct RingSlot {
  static constexpr int kCodeBytes = 32 * 128;
  static constexpr int kScaleBytes = 32 * 16;  // 8 entries a row (groups of 32 fill them)
  static constexpr int kBytes = kCodeBytes + 2 * kScaleBytes;
  __device__ static int code_offset(int row, int piece) {
    return row * 128 + ((piece ^ (row & 7)) << 4);
  }
};
static_assert(RingSlot::kBytes % 1024 == 0);

template <int NS>
inline constexpr int kRingSmemBytes = 4 * NS* RingSlot::kBytes + 1024;  // + alignment slack

// ---- mbarrier and bulk tensor copy (sm_90). Other targets compile traps: the supports rule
// declines without sm_90a code in the build.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#define QUANTA_RING_HAS_TMA 0
#else
#define QUANTA_RING_HAS_TMA 1
#endif
__device__ __forceinline__ void mbar_init(uint64_t* bar, uint32_t count) {
#if QUANTA_RING_HAS_TMA
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(count));
#else
  __trap();
#endif
}
__device__ __forceinline__ void mbar_expect_tx(uint64_t* bar, uint32_t bytes) {
#if QUANTA_RING_HAS_TMA
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_addr(bar)),
               "r"(bytes)
               : "memory");
#else
  __trap();
#endif
}
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
#if QUANTA_RING_HAS_TMA
  uint32_t done;
  do {
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        " selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(smem_addr(bar)), "r"(parity)
        : "memory");
  } while (!done);
#else
  __trap();
#endif
}
__device__ __forceinline__ void tma_load_2d(void* dst, const CUtensorMap* map, int x, int y,
                                            uint64_t* bar, uint64_t policy) {
#if QUANTA_RING_HAS_TMA
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
      " [%0], [%1, {%2, %3}], [%4], %5;\n" ::"r"(smem_addr(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(x), "r"(y), "r"(smem_addr(bar)), "l"(policy)
      : "memory");
#else
  __trap();
#endif
}
// L2 policies for the copies: the codes are read once, a scale box also holds the next stage's.
__device__ __forceinline__ uint64_t l2_policy(bool evict_first) {
  uint64_t p = 0;
  if (evict_first)
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(p));
  else
    asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;\n" : "=l"(p));
  return p;
}

struct RingMaps {
  CUtensorMap codes, scales, biases;
};

template <class T, int MT, int NS, int MINB>
__global__ void __launch_bounds__(kRingThreads, MINB)
    qmm_affine_ring_kernel(const TcArgs a, const __grid_constant__ RingMaps maps) {
  grid_dependency_release();  // the next call's pre-pass may launch (common.cuh)
  using V = typename Vec2<T>::type;
  extern __shared__ unsigned char ring_raw[];
  __shared__ uint64_t full[4][NS];
  __shared__ int is_last;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int g = lane / 4, q = lane % 4;
  const int64_t C = gridDim.x, c = blockIdx.x;
  const int64_t u_begin = first_unit(c, a.units, C), u_end = first_unit(c + 1, a.units, C);
  const int S = a.tile_stages;
  const int nu = static_cast<int>(u_end - u_begin);
  unsigned char* const wsmem =
      reinterpret_cast<unsigned char*>((reinterpret_cast<uintptr_t>(ring_raw) + 1023) &
                                       ~uintptr_t{1023}) +
      warp * NS * RingSlot::kBytes;

  int cur_rt = 0, cur_st = 0;
  if (nu > 0) {
    cur_rt = static_cast<int>(u_begin / S);
    cur_st = static_cast<int>(u_begin % S);
  }
  // ---- the copy side (lane 0 of each warp): stage i of this CTA's range into slot i % NS.
  int ld_rt = cur_rt, ld_st = cur_st;
  const int e = 256 >> a.log2_group;  // scale entries a stage
  uint64_t codes_policy = 0, scale_policy = 0;
  if (lane == 0) {
#pragma unroll
    for (int s = 0; s < NS; ++s) mbar_init(&full[warp][s], 1);
#if QUANTA_RING_HAS_TMA
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
    codes_policy = l2_policy(true);
    scale_policy = l2_policy(false);
  }
  __syncwarp();
  auto issue = [&](int i) {
    if (lane == 0 && i < nu) {
      unsigned char* slot = wsmem + (i % NS) * RingSlot::kBytes;
      uint64_t* bar = &full[warp][i % NS];
      const int row = ld_rt * kTcRows + 32 * warp;
      mbar_expect_tx(bar, RingSlot::kBytes);
      tma_load_2d(slot, &maps.codes, ld_st * 128, row, bar, codes_policy);
      // A box starts at the 16-byte boundary at or below the stage's first entry (the reader
      // offsets into it).
      tma_load_2d(slot + RingSlot::kCodeBytes, &maps.scales, (ld_st * e) & ~7, row, bar,
                  scale_policy);
      tma_load_2d(slot + RingSlot::kCodeBytes + RingSlot::kScaleBytes, &maps.biases,
                  (ld_st * e) & ~7, row, bar, scale_policy);
      if (++ld_st == S) {
        ld_st = 0;
        ++ld_rt;
      }
    }
  };

  float acc[2][MT][4];
  auto zero_acc = [&] {
#pragma unroll
    for (int at = 0; at < 2; ++at)
#pragma unroll
      for (int t = 0; t < MT; ++t)
#pragma unroll
        for (int e2 = 0; e2 < 4; ++e2) acc[at][t][e2] = 0.0f;
  };

  // W is no kernel's output, so its copies may start before the pre-pass is done.
#pragma unroll
  for (int i = 0; i < NS - 1; ++i) issue(i);
  grid_dependency_wait();  // x's fragments are complete past this point

  const uint4* xfrag = static_cast<const uint4*>(a.xfrag) + lane;
  // x's fragments of a unit, loaded a whole unit ahead (xnxt) of their use (xcur): two k16 steps
  // ahead, as in qmm_affine_rf, left them stalling the warps (long scoreboard) at M = 9..16.
  uint4 xcur[2][4][MT], xnxt[2][4][MT];
  auto load_x = [&](uint4(&dst)[2][4][MT], int st) {
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int jp = 0; jp < 4; ++jp)
#pragma unroll
        for (int t = 0; t < MT; ++t)
          dst[h][jp][t] =
              __ldg(xfrag + static_cast<int64_t>(2 * st + h) * MT * 128 + 32 * (4 * t + jp));
  };
  load_x(xcur, cur_st);
  zero_acc();
  int acc_rt = cur_rt;
  const uint32_t magic = magic_register(Magic<T>::kBits2);
  const V off = Magic<T>::offset2();

  for (int i = 0; i < nu; ++i) {
    __syncwarp();  // every lane has read slot (i - 1) % NS out
    issue(i + NS - 1);
    if (cur_rt != acc_rt) {  // a new row tile
      stream_k_flush<T, MT>(a, acc_rt, u_begin, u_end, acc, is_last);
      zero_acc();
      acc_rt = cur_rt;
    }
    mbar_wait(&full[warp][i % NS], static_cast<uint32_t>(i / NS) & 1u);
    const unsigned char* slot = wsmem + (i % NS) * RingSlot::kBytes;
    const unsigned char* scl = slot + RingSlot::kCodeBytes;
    load_x(xnxt, cur_st + 1 == S ? 0 : cur_st + 1);
    // The lane's codes of both windows: piece 2q + h of rows g, g + 8 of each A-tile.
    uint32_t w[2][2][2][4];  // [h][at][rho]
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int at = 0; at < 2; ++at)
#pragma unroll
        for (int rho = 0; rho < 2; ++rho) {
          const uint4 v = *reinterpret_cast<const uint4*>(
              slot + RingSlot::code_offset(16 * at + 8 * rho + g, 2 * q + h));
          w[h][at][rho][0] = v.x;
          w[h][at][rho][1] = v.y;
          w[h][at][rho][2] = v.z;
          w[h][at][rho][3] = v.w;
        }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      // The box starts at the 16-byte boundary at or below the stage's first entry (a tensor
      // copy's start must be 16-byte aligned).
      const int entry = ((cur_st * e) & 7) + ((32 * (2 * q + h)) >> a.log2_group);
      V s2[2][2], b2[2][2];
#pragma unroll
      for (int at = 0; at < 2; ++at)
#pragma unroll
        for (int rho = 0; rho < 2; ++rho) {
          const int off_e = (16 * at + 8 * rho + g) * 16 + 2 * entry;
          const T s = *reinterpret_cast<const T*>(scl + off_e);
          const T b = *reinterpret_cast<const T*>(scl + RingSlot::kScaleBytes + off_e);
          s2[at][rho].x = s2[at][rho].y = s;
          b2[at][rho].x = b2[at][rho].y = b;
        }
#pragma unroll
      for (int jp = 0; jp < 4; ++jp) {
        // A pairs 4jp..4jp+3 of the lane's four rows: s·q + b rounded once to T (MLX's rounding).
        uint32_t av[2][2][4];
#pragma unroll
        for (int at = 0; at < 2; ++at)
#pragma unroll
          for (int rho = 0; rho < 2; ++rho)
#pragma unroll
            for (int kk = 0; kk < 4; ++kk) {
              const uint32_t p = unpack_pair<4>(w[h][at][rho], 4 * jp + kk, magic);
              av[at][rho][kk] =
                  as_u32(__hfma2(__hsub2(as_vec2<T>(p), off), s2[at][rho], b2[at][rho]));
            }
#pragma unroll
        for (int t = 0; t < MT; ++t) {
          rf_mma_pairs<T>(acc[0][t], acc[1][t], av, xcur[h][jp][t]);
        }
      }
    }
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int jp = 0; jp < 4; ++jp)
#pragma unroll
        for (int t = 0; t < MT; ++t) xcur[h][jp][t] = xnxt[h][jp][t];
    if (++cur_st == S) {
      cur_st = 0;
      ++cur_rt;
    }
  }
  if (nu > 0) stream_k_flush<T, MT>(a, acc_rt, u_begin, u_end, acc, is_last);
}

// Stages a warp keeps in flight and CTAs per SM the registers are fitted to.
inline constexpr int kRingStages = 4;
inline constexpr int kRingMinBlocks = 2;

}  // namespace quanta::cuda
