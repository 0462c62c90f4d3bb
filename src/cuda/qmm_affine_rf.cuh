// qmm_affine_rf ("register-fed"): y[m, n] = Σ_k x[m, k] · (s[n, g]·q[n, k] + b[n, g]) for affine
// weights [N, K] of BITS = 2, 3, 4, 5, 6 or 8, f16/bf16 activations, M <= 32, on mma.sync m16n8k16
// with f32 accumulators.
//
// Why: qmm_affine_tc stages the codes through shared memory (cp.async, then shared loads), which
// puts every code byte twice on the MIO pipe; at M = 1 the register-direct qmv_affine_rd beat that
// by 1.5x. Here nothing goes through shared memory: each lane streams its codes and their scales
// straight into registers (16-byte streaming loads, a ring kRfDepth windows ahead) and reads x's
// ready-made B fragments through L1 (the CTA's four warps read the same ones). A first version
// staged x and the scales in shared memory (cp.async, double-buffered, a barrier per stage) and
// measured the same as x read in place (docs/PERF.md); the pre-pass's fragments measured 1.1-1.36x
// faster than x read in place at M = 9..32.
//
// Layout of the work:
//   unit   = [128 rows x 256 codes] of W (a CTA's rows x two windows).
//   window = 128 codes; a lane's codes of one window are 4 chunks of 4·BITS bytes (rows g, g + 8
//            of its warp's two 16-row A-tiles, chunk q of 32 codes) plus those rows' scale and
//            bias: one ring slot.
//   x      = a pre-pass (rf_x_frags_kernel, with programmatic dependent launch) writes the mma's
//            B fragments once per call in the order the lanes read them, so each lane takes a
//            fragment pair with one coalesced 16-byte load: the warp reads 512 contiguous bytes
//            instead of 16-byte pieces of eight rows of x, and needs no byte permutes, address
//            arithmetic or bounds checks (rows past M and chunks past K are zeros there). Each
//            step's fragment registers take those of the step two on as soon as its mma are
//            issued, so x's loads have half a window to land.
//   grid   = persistent, stream-K over the units (row-tile major), as qmm_affine_tc; a row tile
//            cut between CTAs is summed by its last CTA from a per-stream workspace, in slot
//            order (deterministic), with float4 loads four pieces deep (an element-wise sum
//            took ~15% of the kernel's samples at M = 16).
//   CTA    = 4 warps, 128 rows (32 a warp: two A-tiles of 16).
//   mma    = A: the codes dequantized as s·q + b rounded once to T (affine_unpack.cuh's pairs under
//            a magic number, HSUB2, HFMA2: MLX's rounding, as qmm_affine_tc; bf16 8-bit codes
//            through f32); B: rows of x as the n8 columns (MT tiles of 8 rows), each lane's pairs
//            matching its A pairs (rf_x_frag). Chunks past K load no codes (A = 0) and B = 0.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "cuda/affine_simt.cuh"  // load_chunk
#include "cuda/affine_unpack.cuh"
#include "cuda/common.cuh"
#include "cuda/mma.cuh"
#include "cuda/qmm_affine_tc.cuh"  // TcArgs, first_unit, cta_of_unit
#include "cuda/runtime.cuh"
#include "cuda/scaled_decode.cuh"
#include "cuda/workspace.hpp"

namespace quanta::cuda {

inline constexpr int kRfThreads = 128;
inline constexpr int kRfRows = 128;  // rows of W per CTA

inline constexpr int kRfBK = 256;  // codes of K per stage (two windows)
// The stream-K helpers (stream_k_flush, stream_k.hpp) use qmm_affine_tc's tile and stage.
static_assert(kRfRows == kTcRows && kRfThreads == kTcThreads && kRfBK == kTcBK);
inline constexpr int kRfMaxMT = 4;  // column tiles: M <= 32 (its table range)

// qmm_scaled_rf: pair i (0..15) of a chunk of microscaled or fp8 codes (the positions pair_lo /
// pair_hi of affine_unpack.cuh: (c, c + 4) for E2M1, (c, c + 2) for the 8-bit codes), as T's pair
// of v·s (fp8: v; its scale is applied to the sums). Exact: nvfp4's v·s has at most 6
// significant bits and stays within 2^-10..2688; E8M0 scales are powers of two that bf16 holds
// (qmm_scaled_rf_supports takes mxfp4 and mxfp8 with bf16 x only); fp8 values fit f16 and bf16.
template <class T, Scheme S, int BITS>
__device__ __forceinline__ uint32_t scaled_pair(const uint32_t (&w)[BITS], int i,
                                                typename Vec2<T>::type s2) {
  constexpr bool kBf16 = !std::is_same_v<T, __half>;
  constexpr bool kRowScale = S == Scheme::fp8_e4m3 || S == Scheme::fp8_e5m2;
  uint32_t v;
  if constexpr (BITS == 4) {  // E2M1 nibbles (i % 4, i % 4 + 4) of word i / 4
    const uint32_t sh = w[i / 4] >> (4 * (i % 4));
    if constexpr (kBf16) {
      // Magnitude under bf16's exponent and mantissa (bits 6-8), sign at 15: v · 2^-126 (0.5 a
      // subnormal), times 2^126 exactly.
      const uint32_t t = ((sh & 0x00070007u) << 6) | ((sh & 0x00080008u) << 12);
      v = as_u32(__hmul2(as_vec2<T>(t), __float2bfloat162_rn(0x1p126f)));
    } else {
      v = e2m1_pair(w[i / 4], i % 4);
    }
  } else {  // bytes (c, c + 2) of word i / 2, c = i % 2, as an exact f16 pair
    const uint32_t c = static_cast<uint32_t>(i % 2);
    uint32_t h;
    if constexpr (ScaledTraits<S>::kCode == ElementCode::e4m3) {
      const __half2_raw r = __nv_cvt_fp8x2_to_halfraw2(
          static_cast<__nv_fp8x2_storage_t>(__byte_perm(w[i / 2], 0u, c | (c + 2) << 4)),
          __NV_E4M3);
      h = static_cast<uint32_t>(r.x) | static_cast<uint32_t>(r.y) << 16;
    } else {  // E5M2: the byte is the top half of an f16
      h = __byte_perm(w[i / 2], 0u, 0x0404u | c << 4 | (c + 2) << 12);  // (0, c, 0, c + 2)
    }
    if constexpr (kBf16) {
      const float2 f = __half22float2(as_vec2<__half>(h));
      v = as_u32(__floats2bfloat162_rn(f.x, f.y));
    } else {
      v = h;
    }
  }
  if constexpr (kRowScale) return v;
  return as_u32(__hmul2(as_vec2<T>(v), s2));
}

// The B fragments of lane (g, q) for pairs 4jp..4jp+3 of its chunk (32 codes at k0) in row r of
// x: {b0, b1} of the k16 step of pairs 4jp, 4jp + 1 and of the step of 4jp + 2, 4jp + 3. The
// activations of a pair are at affine_unpack.cuh's positions: (c, c + 4) for 4 and 6 bits (and
// E2M1), (c, c + 2) for 8 bits (and fp8), (c, c + 8) for 2, 3 and 5 bits.
template <class T, int BITS>
__device__ __forceinline__ uint4 rf_x_frag(const T* xr, int jp) {
  constexpr bool kPlus8 = BITS == 2 || BITS == 3 || BITS == 5;
  uint32_t lo0, lo1, hi0, hi1;  // the pairs' first activations two by two, and their partners
  if constexpr (kPlus8) {       // x[c..c+3] and x[c+8..c+11], c = 16 (jp / 2) + 4 (jp % 2)
    const T* p = xr + 16 * (jp / 2) + 4 * (jp % 2);
    const uint2 u = *reinterpret_cast<const uint2*>(p);
    const uint2 v = *reinterpret_cast<const uint2*>(p + 8);
    lo0 = u.x, lo1 = u.y, hi0 = v.x, hi1 = v.y;
  } else {
    const uint4 v = *reinterpret_cast<const uint4*>(xr + 8 * jp);
    if constexpr (BITS == 8) {  // pairs (c, c + 2)
      lo0 = v.x, hi0 = v.y, lo1 = v.z, hi1 = v.w;
    } else {  // 4, 6 bits: pairs (c, c + 4)
      lo0 = v.x, lo1 = v.y, hi0 = v.z, hi1 = v.w;
    }
  }
  return make_uint4(__byte_perm(lo0, hi0, 0x5410), __byte_perm(lo0, hi0, 0x7632),
                    __byte_perm(lo1, hi1, 0x5410), __byte_perm(lo1, hi1, 0x7632));
}

// The four mma of pairs 4jp..4jp+3 of a lane's chunk for one column tile: av[at][rho][i] is pair
// 4jp + i of row g + 8·rho of A-tile at (two k16 steps: pairs i = 0, 1, then 2, 3), f the B
// fragments of those steps (rf_x_frag); acc0 / acc1 the accumulators of A-tiles 0 / 1.
template <class T>
__device__ __forceinline__ void rf_mma_pairs(float (&acc0)[4], float (&acc1)[4],
                                             const uint32_t (&av)[2][2][4], const uint4& f) {
  const uint32_t bf0[2] = {f.x, f.y}, bf1[2] = {f.z, f.w};
  const uint32_t a00[4] = {av[0][0][0], av[0][1][0], av[0][0][1], av[0][1][1]};
  const uint32_t a10[4] = {av[1][0][0], av[1][1][0], av[1][0][1], av[1][1][1]};
  mma_16816<T>(acc0, a00, bf0);
  mma_16816<T>(acc1, a10, bf0);
  const uint32_t a01[4] = {av[0][0][2], av[0][1][2], av[0][0][3], av[0][1][3]};
  const uint32_t a11[4] = {av[1][0][2], av[1][1][2], av[1][0][3], av[1][1][3]};
  mma_16816<T>(acc0, a01, bf1);
  mma_16816<T>(acc1, a11, bf1);
}

// Pre-pass of qmm_affine_rf: frag[((w·MT + t)·4 + jp)·32 + lane] = rf_x_frag of lane (g, q) for
// window w of K (128 codes), column tile t (row 8t + g of x) and jp; zeros for rows past M and
// chunks past K. One 16-byte fragment per thread. INTERLEAVED (qmm_affine_ring): lane (g, q) of
// window w takes chunk 2q + w % 2 of stage w / 2 (codes 256 (w / 2) + 32 (2q + w % 2) ..) instead
// of chunk q of window w.
template <class T, int BITS, bool INTERLEAVED = false>
__global__ void rf_x_frags_kernel(const T* x, uint4* frag, int m, int k, int mt, int64_t total) {
  grid_dependency_release();  // the main kernel may start loading codes now
  grid_dependency_wait();     // x and the scratch: behind the previous kernel (common.cuh)
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= total) return;
  const int lane = static_cast<int>(i % 32), jp = static_cast<int>(i / 32 % 4);
  const int t = static_cast<int>(i / 128 % mt);
  const int64_t w = i / (128 * mt);
  const int row = 8 * t + lane / 4;
  const int64_t k0 =
      INTERLEAVED ? 256 * (w / 2) + 32 * (2 * (lane % 4) + w % 2) : 128 * w + 32 * (lane % 4);
  uint4 f = make_uint4(0u, 0u, 0u, 0u);
  if (row < m && k0 < k) f = rf_x_frag<T, BITS>(x + row * static_cast<int64_t>(k) + k0, jp);
  frag[i] = f;
}

// S = affine: qmm_affine_rf. Any other scheme: qmm_scaled_rf, the same kernel on microscaled
// (mxfp4, nvfp4, mxfp8) and fp8 codes: A = v·s per pair (scaled_pair), no biases, nvfp4's tensor
// scale and fp8's row or tensor scale applied to the f32 sums before they are stored.
template <class T, int BITS, int MT, int D, int MINB, Scheme SCH = Scheme::affine>
__global__ void __launch_bounds__(kRfThreads, MINB) qmm_affine_rf_kernel(const TcArgs a) {
  grid_dependency_release();  // the next call's pre-pass may launch (common.cuh)
  constexpr bool kScaled = SCH != Scheme::affine;
  constexpr bool kRowScale = SCH == Scheme::fp8_e4m3 || SCH == Scheme::fp8_e5m2;
  constexpr int kSG = SCH == Scheme::nvfp4 ? 2 : 1;  // scales a chunk of 32 codes
  // bf16 has 7 mantissa bits: 8-bit codes are dequantized through f32 (as qmm_affine_tc).
  constexpr bool kF32Dequant = !kScaled && BITS == 8 && Magic<T>::kMantissa < 8;
  using V = typename Vec2<T>::type;
  __shared__ int is_last;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int g = lane / 4, q = lane % 4;
  const int64_t C = gridDim.x, c = blockIdx.x;
  const int64_t u_begin = first_unit(c, a.units, C), u_end = first_unit(c + 1, a.units, C);
  const int S = a.tile_stages;
  const int64_t row_bytes = static_cast<int64_t>(a.k) * BITS / 8;
  const int groups = a.k >> a.log2_group;

  // x's B fragments, per window of K: MT tiles x 4 steps of 32 lanes (rf_x_frags_kernel).
  const uint4* xfrag = static_cast<const uint4*>(a.xfrag) + lane;

  // ---- the ring: window li of this CTA's range (2 per unit), loaded D windows ahead: the
  // lane's codes (chunk q of rows g, g + 8 of both A-tiles) and those rows' scale and bias.
  const int64_t nwin = 2 * (u_end - u_begin);
  int64_t li = 0;        // next window to load
  int lrt = 0, lst = 0;  // its unit
  int lhalf = 0;         // and half
  int code_rt = -1;
  const uint8_t* crow[2][2] = {{a.codes, a.codes}, {a.codes, a.codes}};
  // The rows' scale entry of the lane's chunk in window 0 (entries of T, or bytes for the scaled
  // schemes); a window's entry is kc >> log2_group further. Biases sit bias_delta entries on.
  using ScaleEntry = std::conditional_t<kScaled, uint8_t, T>;
  const ScaleEntry* srow[2][2] = {{nullptr, nullptr}, {nullptr, nullptr}};
  const int64_t bias_delta =
      kScaled ? 0
              : (reinterpret_cast<intptr_t>(a.biases) - reinterpret_cast<intptr_t>(a.scales)) /
                    static_cast<int64_t>(sizeof(T));
  struct AffineSlot {
    uint32_t w[2][2][BITS];
    T s[2][2], b[2][2];
  };
  struct ScaledSlot {  // nvfp4: the chunk's two E4M3 scale bytes, converted when used
    uint32_t w[2][2][BITS];
    std::conditional_t<SCH == Scheme::nvfp4, uint32_t, T> s[2][2];
  };
  using Slot = std::conditional_t<kScaled, ScaledSlot, AffineSlot>;
  auto load_window = [&](Slot& r) {
    if (li < nwin) {
      if (lrt != code_rt) {
        code_rt = lrt;
#pragma unroll
        for (int at = 0; at < 2; ++at)
#pragma unroll
          for (int rho = 0; rho < 2; ++rho) {
            const int n = min(lrt * kRfRows + 32 * warp + 16 * at + 8 * rho + g, a.n - 1);
            crow[at][rho] = a.codes + static_cast<int64_t>(n) * row_bytes + 4 * BITS * q;
            srow[at][rho] = reinterpret_cast<const ScaleEntry*>(a.scales) +
                            static_cast<int64_t>(n) * groups + ((32 * q) >> a.log2_group);
          }
      }
      const int kc = lst * kRfBK + lhalf * 128;
      if (kc + 32 * q < a.k) {
        const ScaleEntry* sp[2][2];  // the window's scale entry of each row
#pragma unroll
        for (int at = 0; at < 2; ++at)
#pragma unroll
          for (int rho = 0; rho < 2; ++rho) sp[at][rho] = srow[at][rho] + (kc >> a.log2_group);
#pragma unroll
        for (int at = 0; at < 2; ++at)
#pragma unroll
          for (int rho = 0; rho < 2; ++rho) {
            load_chunk<BITS, ChunkLoad::stream_l2>(crow[at][rho] + kc / 8 * BITS, r.w[at][rho]);
            if constexpr (!kScaled) {
              r.s[at][rho] = *sp[at][rho];
              r.b[at][rho] = sp[at][rho][bias_delta];
            } else if constexpr (SCH == Scheme::nvfp4) {  // the chunk's two groups of 16
              r.s[at][rho] = *reinterpret_cast<const uint16_t*>(sp[at][rho]);
            } else if constexpr (!kRowScale) {  // one E8M0 scale for the chunk's group of 32
              r.s[at][rho] = from_f32<T>(codec::e8m0_to_float(*sp[at][rho]));
            }
          }
      } else {  // past K: A = 0·q + 0 (and B is zero there too)
#pragma unroll
        for (int at = 0; at < 2; ++at)
#pragma unroll
          for (int rho = 0; rho < 2; ++rho) {
#pragma unroll
            for (int i = 0; i < BITS; ++i) r.w[at][rho][i] = 0u;
            if constexpr (!kScaled) {
              r.s[at][rho] = from_f32<T>(0.0f);
              r.b[at][rho] = from_f32<T>(0.0f);
            } else {
              if constexpr (SCH == Scheme::nvfp4)
                r.s[at][rho] = 0u;
              else
                r.s[at][rho] = from_f32<T>(0.0f);
            }
          }
      }
      if (++lhalf == 2) {
        lhalf = 0;
        if (++lst == S) {
          lst = 0;
          ++lrt;
        }
      }
    }
    ++li;
  };

  float acc[2][MT][4];
  auto zero_acc = [&] {
#pragma unroll
    for (int at = 0; at < 2; ++at)
#pragma unroll
      for (int t = 0; t < MT; ++t)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[at][t][e] = 0.0f;
  };
  // acc[at][t][e]: row 32·warp + 16·at + g + 8·(e / 2) of the tile, column m = 8·t + 2q + e % 2.
  auto flush = [&](int rt) {
    if constexpr (SCH == Scheme::nvfp4) {  // the tensor scale
#pragma unroll
      for (int at = 0; at < 2; ++at)
#pragma unroll
        for (int t = 0; t < MT; ++t)
#pragma unroll
          for (int e = 0; e < 4; ++e) acc[at][t][e] *= a.global;
    } else if constexpr (kRowScale) {  // the row's (or the tensor's) f32 scale
      const float* rs = reinterpret_cast<const float*>(a.scales);
#pragma unroll
      for (int at = 0; at < 2; ++at)
#pragma unroll
        for (int rho = 0; rho < 2; ++rho) {
          const int n = min(rt * kRfRows + 32 * warp + 16 * at + 8 * rho + g, a.n - 1);
          const float sc = rs[a.per_row ? n : 0];
#pragma unroll
          for (int t = 0; t < MT; ++t) {
            acc[at][t][2 * rho] *= sc;
            acc[at][t][2 * rho + 1] *= sc;
          }
        }
    }
    stream_k_flush<T, MT>(a, rt, u_begin, u_end, acc, is_last);
  };

  // (row tile, stage) of the unit being computed.
  int cur_rt, cur_st;
  if (a.units < (int64_t{1} << 32)) {
    cur_rt = static_cast<int>(static_cast<uint32_t>(u_begin) / static_cast<uint32_t>(S));
    cur_st = static_cast<int>(static_cast<uint32_t>(u_begin) - static_cast<uint32_t>(cur_rt) * S);
  } else {
    cur_rt = static_cast<int>(u_begin / S);
    cur_st = static_cast<int>(u_begin % S);
  }
  lrt = cur_rt;
  lst = cur_st;

  Slot ring[D];
#pragma unroll
  for (int d = 0; d < D; ++d) load_window(ring[d]);
  grid_dependency_wait();  // the pre-pass's fragments are complete past this point
  // x's fragments of two steps (jp % 2), loaded two steps ahead of their use: as a step's mma are
  // issued, its registers take the fragments of the step two on (in the next window for 2, 3).
  uint4 xq[2][MT];
  {
    const uint4* x0 = xfrag + static_cast<int64_t>(2 * cur_st) * MT * 128;
#pragma unroll
    for (int jp = 0; jp < 2; ++jp)
#pragma unroll
      for (int t = 0; t < MT; ++t) xq[jp][t] = __ldg(x0 + 32 * (4 * t + jp));
  }
  zero_acc();
  int acc_rt = cur_rt;
  const uint32_t magic = magic_register(Magic<T>::kBits2);
  const V off = Magic<T>::offset2();

  for (int64_t wb = 0; wb < nwin; wb += D) {
#pragma unroll
    for (int d = 0; d < D; ++d) {
      const int64_t wi = wb + d;
      if (wi >= nwin) break;
      const int half = static_cast<int>(wi & 1);
      if (half == 0 && cur_rt != acc_rt) {  // a new row tile
        flush(acc_rt);
        zero_acc();
        acc_rt = cur_rt;
      }
      // x's fragments two steps ahead: steps 2, 3 of this window, then 0, 1 of the next.
      const uint4* xc = xfrag + static_cast<int64_t>(2 * cur_st + half) * MT * 128;
      if (half == 1 && ++cur_st == S) {
        cur_st = 0;
        ++cur_rt;
      }
      const uint4* xn = xfrag + static_cast<int64_t>(2 * cur_st + (half ^ 1)) * MT * 128;
      V s2[2][2][kSG], b2[2][2];
      float sf[2][2], bf[2][2];
#pragma unroll
      for (int at = 0; at < 2; ++at)
#pragma unroll
        for (int rho = 0; rho < 2; ++rho) {
          if constexpr (SCH == Scheme::nvfp4) {  // E4M3 pair -> exact f16 pair -> T
            const __half2_raw r = __nv_cvt_fp8x2_to_halfraw2(
                static_cast<__nv_fp8x2_storage_t>(ring[d].s[at][rho]), __NV_E4M3);
            uint32_t t = static_cast<uint32_t>(r.x) | static_cast<uint32_t>(r.y) << 16;
            if constexpr (!std::is_same_v<T, __half>) {
              const float2 f = __half22float2(as_vec2<__half>(t));
              t = as_u32(__floats2bfloat162_rn(f.x, f.y));
            }
            s2[at][rho][0] = as_vec2<T>(__byte_perm(t, 0u, 0x1010));
            s2[at][rho][1] = as_vec2<T>(__byte_perm(t, 0u, 0x3232));
          } else if constexpr (kScaled) {
            s2[at][rho][0].x = s2[at][rho][0].y = ring[d].s[at][rho];
          } else {
            s2[at][rho][0].x = s2[at][rho][0].y = ring[d].s[at][rho];
            b2[at][rho].x = b2[at][rho].y = ring[d].b[at][rho];
          }
          if constexpr (kF32Dequant) {
            sf[at][rho] = to_f32(ring[d].s[at][rho]);
            bf[at][rho] = to_f32(ring[d].b[at][rho]);
          }
        }
#pragma unroll
      for (int jp = 0; jp < 4; ++jp) {
        // A pairs 4jp..4jp+3 of the lane's four rows: s·q + b rounded once to T.
        uint32_t av[2][2][4];
#pragma unroll
        for (int at = 0; at < 2; ++at)
#pragma unroll
          for (int rho = 0; rho < 2; ++rho)
#pragma unroll
            for (int i = 0; i < 4; ++i) {
              const int pi = 4 * jp + i;
              if constexpr (kScaled) {  // nvfp4: pairs 0..7 are the chunk's first group
                av[at][rho][i] = scaled_pair<T, SCH, BITS>(ring[d].w[at][rho], pi,
                                                           s2[at][rho][kSG == 2 ? pi / 8 : 0]);
              } else if constexpr (kF32Dequant) {  // bytes (c, c + 2) of word pi / 2 as 2^23 + q
                const uint32_t wd = ring[d].w[at][rho][pi / 2], c0 = pi % 2;
                const float lo = __uint_as_float(__byte_perm(wd, 0x4B000000u, 0x7440 | c0));
                const float hi = __uint_as_float(__byte_perm(wd, 0x4B000000u, 0x7440 | (c0 + 2)));
                av[at][rho][i] =
                    as_u32(__floats2bfloat162_rn(fmaf(lo - 8388608.0f, sf[at][rho], bf[at][rho]),
                                                 fmaf(hi - 8388608.0f, sf[at][rho], bf[at][rho])));
              } else {
                const uint32_t p = unpack_pair<BITS>(ring[d].w[at][rho], pi, magic);
                av[at][rho][i] =
                    as_u32(__hfma2(__hsub2(as_vec2<T>(p), off), s2[at][rho][0], b2[at][rho]));
              }
            }
#pragma unroll
        for (int t = 0; t < MT; ++t) {
          rf_mma_pairs<T>(acc[0][t], acc[1][t], av, xq[jp % 2][t]);
          xq[jp % 2][t] = __ldg((jp < 2 ? xc : xn) + 32 * (4 * t + (jp + 2) % 4));
        }
      }
      load_window(ring[d]);  // refill this slot D windows ahead
    }
  }
  if (u_begin < u_end) flush(acc_rt);
}

// Windows of codes in flight per lane, and blocks per SM the registers are fitted to (launch
// bounds). 4-bit, ptxas (CUDA 13.0): MT = 1, 2 at 150-168 registers without spills (3 blocks, 12
// warps per SM), MT = 4 at 222 (2 blocks). Measured alternatives (docs/PERF.md): 4 blocks at 128
// registers (spilling at MT = 2) and a ring of 1 window were slower; 3 windows spill. Wider codes
// hold more ring registers (8 bits: 2 x 32 words a lane): 3 blocks where ptxas fits them in 168
// registers without spilling (2 bits, 3 bits at MT = 1; 3 bits at MT = 2 spilled 60 bytes), else
// 2 (5, 6, 8 bits: 201-255 registers, no spills).
inline constexpr int kRfDepth = 2;
template <int BITS, int MT>
inline constexpr int kRfMinBlocks = (BITS == 2 || BITS == 4) && MT <= 2 ? 3
                                    : BITS == 3 && MT == 1              ? 3
                                                                        : 2;

// The pre-pass (x's B fragments into the stream's scratch), then the kernel with programmatic
// dependent launch: its first code loads overlap the pre-pass.
template <class T, int BITS, int MT, Scheme SCH>
void launch_rf(TcArgs a, dim3 grid, cudaStream_t stream) {
  // Every window of the units, past K too, in 16-byte fragments.
  const int64_t windows = 2 * static_cast<int64_t>(a.tile_stages);
  const int64_t total = windows * MT * 128;
  auto* frag = static_cast<uint4*>(stream_scratch(stream, Scratch::rf_x_frags, total * 16));
  QUANTA_CUDA_CHECK(launch_prepass(rf_x_frags_kernel<T, BITS>,
                                   dim3(static_cast<unsigned>((total + 255) / 256)), dim3(256),
                                   stream, static_cast<const T*>(a.x), frag, a.m, a.k, MT, total));
  a.xfrag = frag;
  QUANTA_CUDA_CHECK(
      launch_dependent(qmm_affine_rf_kernel<T, BITS, MT, kRfDepth, kRfMinBlocks<BITS, MT>, SCH>,
                       grid, dim3(kRfThreads), 0, stream, a));
}

template <class T, int BITS, int MT>
void launch_qmm_affine_rf(const TcArgs& a, dim3 grid, cudaStream_t stream) {
  launch_rf<T, BITS, MT, Scheme::affine>(a, grid, stream);
}

// CTAs of one instantiation that fit on a multiprocessor (the persistent grid's size).
template <class T, int BITS, int MT>
int occupancy_qmm_affine_rf() {
  static const int c = [] {
    int b = 0;
    QUANTA_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &b, qmm_affine_rf_kernel<T, BITS, MT, kRfDepth, kRfMinBlocks<BITS, MT>>, kRfThreads, 0));
    return b > 0 ? b : 1;
  }();
  return c;
}

// qmm_scaled_rf's instances (qmm_scaled_rf_fp4.cu, qmm_scaled_rf_fp8.cu): the same kernel on
// microscaled and fp8 codes, 4-bit (E2M1) or 8-bit chunks, with affine's ring and launch bounds.
template <Scheme SCH>
inline constexpr int kScaledBits = ScaledTraits<SCH>::kCode == ElementCode::e2m1 ? 4 : 8;

template <class T, Scheme SCH, int MT>
void launch_qmm_scaled_rf(const TcArgs& a, dim3 grid, cudaStream_t stream) {
  launch_rf<T, kScaledBits<SCH>, MT, SCH>(a, grid, stream);
}

template <class T, Scheme SCH, int MT>
int occupancy_qmm_scaled_rf() {
  constexpr int B = kScaledBits<SCH>;
  static const int c = [] {
    int b = 0;
    QUANTA_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &b, qmm_affine_rf_kernel<T, B, MT, kRfDepth, kRfMinBlocks<B, MT>, SCH>, kRfThreads, 0));
    return b > 0 ? b : 1;
  }();
  return c;
}

#define QUANTA_SRF_ONE(EXTERN, T, SCH, MT)                                                  \
  EXTERN template void launch_qmm_scaled_rf<T, SCH, MT>(const TcArgs&, dim3, cudaStream_t); \
  EXTERN template int occupancy_qmm_scaled_rf<T, SCH, MT>();
#define QUANTA_SRF_TILES(EXTERN, T, SCH) \
  QUANTA_SRF_ONE(EXTERN, T, SCH, 1)      \
  QUANTA_SRF_ONE(EXTERN, T, SCH, 2)      \
  QUANTA_SRF_ONE(EXTERN, T, SCH, 4)
// E8M0-scaled codes run with bf16 x only (qmm_scaled_rf_supports).
#define QUANTA_SRF_FP4(EXTERN)                           \
  QUANTA_SRF_TILES(EXTERN, __nv_bfloat16, Scheme::mxfp4) \
  QUANTA_SRF_TILES(EXTERN, __half, Scheme::nvfp4)        \
  QUANTA_SRF_TILES(EXTERN, __nv_bfloat16, Scheme::nvfp4)
#define QUANTA_SRF_FP8(EXTERN)                              \
  QUANTA_SRF_TILES(EXTERN, __nv_bfloat16, Scheme::mxfp8)    \
  QUANTA_SRF_TILES(EXTERN, __half, Scheme::fp8_e4m3)        \
  QUANTA_SRF_TILES(EXTERN, __nv_bfloat16, Scheme::fp8_e4m3) \
  QUANTA_SRF_TILES(EXTERN, __half, Scheme::fp8_e5m2)        \
  QUANTA_SRF_TILES(EXTERN, __nv_bfloat16, Scheme::fp8_e5m2)

#define QUANTA_RF_ONE(EXTERN, T, BITS, MT)                                                   \
  EXTERN template void launch_qmm_affine_rf<T, BITS, MT>(const TcArgs&, dim3, cudaStream_t); \
  EXTERN template int occupancy_qmm_affine_rf<T, BITS, MT>();
// Column tiles with instances per width: 2 and 3 bits run M <= 8 only (qmm_affine_rf.cu).
template <int BITS>
inline constexpr int kRfTiles = BITS == 2 || BITS == 3 ? 1 : 3;
#define QUANTA_RF_DTYPE(EXTERN, T, BITS) \
  QUANTA_RF_ONE(EXTERN, T, BITS, 1)      \
  QUANTA_RF_ONE(EXTERN, T, BITS, 2)      \
  QUANTA_RF_ONE(EXTERN, T, BITS, 4)
#define QUANTA_RF_WIDTH(EXTERN, BITS)   \
  QUANTA_RF_DTYPE(EXTERN, __half, BITS) \
  QUANTA_RF_DTYPE(EXTERN, __nv_bfloat16, BITS)
#define QUANTA_RF_WIDTH_M8(EXTERN, BITS) \
  QUANTA_RF_ONE(EXTERN, __half, BITS, 1) \
  QUANTA_RF_ONE(EXTERN, __nv_bfloat16, BITS, 1)
// The instances: qmm_affine_rf_{f16,bf16}.cu (4 bits), qmm_affine_rf_b{2,3,6,8}.cu; 5 bits has
// none (it measured no faster than qmm_affine_tc).
#define QUANTA_RF_EXTERN_ALL                \
  QUANTA_RF_WIDTH_M8(extern, 2)             \
  QUANTA_RF_WIDTH_M8(extern, 3)             \
  QUANTA_RF_DTYPE(extern, __half, 4)        \
  QUANTA_RF_DTYPE(extern, __nv_bfloat16, 4) \
  QUANTA_RF_WIDTH(extern, 6)                \
  QUANTA_RF_WIDTH(extern, 8)

}  // namespace quanta::cuda
