// qmm_affine_tc / qmv_affine_tc: y[m, n] = Σ_k x[m, k] · (s[n, g]·q[n, k] + b[n, g]) for affine
// weights [N, K], f16/bf16 activations, M <= 32, on tensor cores (mma.sync m16n8k16) with f32
// accumulators.
//
// Why tensor cores at M = 1: at the read roof the H200 streams ~7e12 int4 weights/s and issues
// ~33e12 thread-instructions/s. CUDA-core FMAs with an int->float conversion cost ~3.3
// instructions a weight (the whole budget); converting codes under a half2 magic number and
// letting mma.sync do the products and the f32 sums costs ~1-2.
//
// Two ways to apply scale and bias (template flag SPLIT):
//   M >= 1 (qmm): A = s·q + b rounded once to T in registers (HSUB2 removes the magic offset,
//           HFMA2 applies s, b); the mma's columns are the rows of x.
//   M = 1 (qmv, SPLIT): A = offset + q exactly (no per-element work past one LOP3); the mma's 8
//           columns are the stage's groups (B is x where a k-slot lies in the column's group,
//           else 0), one more mma with an all-ones A gives Σx per group, and per stage
//             y[n] += s[n, g]·C[n, g] + (b[n, g] - offset·s[n, g])·Σ_{k∈g} x[k]
//           in f32: MLX's scale·Σq·x + bias·Σx split (and no rounding of weights to T).
//
// Layout of the work:
//   unit  = [128 rows x 256 codes] of W + its scales/biases + [M x 256] of x: one stage of a
//           double-buffered cp.async ring (zero-filled past N and K; L2 prefetches 256 bytes).
//   grid  = persistent, stream-K: the units (row-tile major) are cut into one contiguous range
//           per resident CTA, so every CTA streams the same bytes, its pipeline does not drain
//           between row tiles, and there is no tail wave.
//   CTA   = 4 warps, 128 rows of W (32 a warp).
//   warp  = 2 A-tiles of 16 rows; lane (g = lane/4, q = lane%4) owns rows g, g+8 of each tile
//           and, per 128-code window, the 32-code chunk q of those rows: a chunk is 8 mma.sync
//           k16-steps (affine_unpack.cuh says which codes go where).
//   B     = x rows as the n8 columns (MT tiles of 8 rows); lanes past M read row M-1 and their
//           columns are never stored.
//   A row tile cut between CTAs: each stores its partial sums in its slot of a per-stream f32
//   workspace; the last to arrive (an atomic count) sums the slots in order, writes y and resets
//   the count. Slots follow the CTA order, so the result is deterministic.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/affine_simt.cuh"  // load_chunk
#include "cuda/affine_unpack.cuh"
#include "cuda/common.cuh"
#include "cuda/mma.cuh"
#include "cuda/runtime.cuh"

namespace quanta::cuda {

struct TcArgs {
  const uint8_t* codes;   // [N][K·bits/8]
  const uint8_t* scales;  // [N][K/G] of T
  const uint8_t* biases;
  const void* x;       // [M][K] of T
  void* y;             // [M][N] of T
  float* partials;     // [row tiles][max_contrib][M][128]
  uint32_t* counters;  // [row tiles], zero between launches
  int32_t m, n, k, log2_group;
  int32_t stage_bytes;  // TcGeom::stage_bytes(rows of x staged)
  int32_t tile_stages;  // S = ceil(K / kTcBK) units per row tile
  int32_t max_contrib;  // partial slots per row tile
  int64_t units;        // row tiles x S
  // qmm_scaled_rf (microscaled and fp8 codes): nvfp4's tensor scale; fp8 1 for an f32 scale a
  // row of W at `scales`, 0 for one scale of the tensor. The affine kernels ignore both.
  float global = 1.0f;
  int32_t per_row = 0;
  // qmm_affine_rf / qmm_scaled_rf: x as the mma's B fragments (rf_x_frags_kernel's layout).
  const void* xfrag = nullptr;
};

inline constexpr int kTcThreads = 128;
inline constexpr int kTcRows = 128;  // rows of W per CTA
inline constexpr int kTcBK = 256;    // codes of K per pipeline stage

template <int BITS, int MT>
struct TcGeom {
  static constexpr int kRowBytes = kTcBK * BITS / 8;
  // Row padding that makes the lanes' chunk loads conflict-free (simulated per width); 4-bit
  // rows use an XOR swizzle of their two 64-byte halves instead of a 50% pad.
  static constexpr int kPad = BITS == 2   ? 32
                              : BITS == 3 ? 16
                              : BITS == 5 ? 16
                              : BITS == 6 ? 32
                              : BITS == 8 ? 16
                                          : 0;
  static constexpr int kRowStride = kRowBytes + kPad;
  static constexpr int kCodeBytes = kTcRows * kRowStride;
  // Scales and biases of a stage row: 4-byte pieces (2 entries) interleaved as
  // [s0 s1 b0 b1][s2 s3 b2 b3]..., so one 8-byte load gives a lane (s, b) of two groups.
  static constexpr int kScaleRow = 32;  // kTcBK / 32 = 8 entries of s and of b at most
  static constexpr int kScaleBytes = kTcRows * kScaleRow;
  // x stage: [rows][256] with 16 bytes of padding after every 32 activations and 64 after the
  // row, so the lanes' 16-byte reads hit distinct banks (M = 1 reads broadcast). Only the
  // min(M, 8·MT) rows of x that exist are staged.
  static constexpr int kXRow = kTcBK / 32 * 80 + 64;
  static constexpr int stage_bytes(int x_rows) { return kCodeBytes + kScaleBytes + x_rows * kXRow; }
  // Double buffering: with ~5 CTAs resident per SM (int4, M = 1) that keeps ~100 KB of loads in
  // flight per SM, and the smaller footprint buys the warps that hide the math's latency.
  static constexpr int kStages = 2;
  static constexpr int smem_bytes(int x_rows) { return kStages * stage_bytes(x_rows); }
  static constexpr int kMaxSmemBytes = smem_bytes(8 * MT);

  // The XOR part of code_offset (4-bit rows only).
  __device__ static int swizzle(int row, int byte) {
    if constexpr (BITS == 4) byte ^= (row & 1) << 6;
    return byte;
  }
  __device__ static int code_offset(int row, int byte) {
    return row * kRowStride + swizzle(row, byte);
  }
  __device__ static int x_offset(int row, unsigned k) {
    return row * kXRow + (k / 32) * 80 + (k % 32) * 2;
  }
};

// CTA c of C owns units [c·U/C, (c+1)·U/C); unit u belongs to CTA ((u+1)·C - 1) / U. 32-bit
// arithmetic when units·ctas fits (a 64-bit division is a ~70-instruction subroutine).
__device__ __forceinline__ int64_t first_unit(int64_t c, int64_t units, int64_t ctas) {
  if (units * ctas < (int64_t{1} << 32))
    return static_cast<uint32_t>(c * units) / static_cast<uint32_t>(ctas);
  return c * units / ctas;
}
__device__ __forceinline__ int64_t cta_of_unit(int64_t u, int64_t units, int64_t ctas) {
  if (units * ctas < (int64_t{1} << 32))
    return static_cast<uint32_t>((u + 1) * ctas - 1) / static_cast<uint32_t>(units);
  return ((u + 1) * ctas - 1) / units;
}

// The end of row tile rt in the stream-K kernels (qmm_affine_tc, qmm_affine_rf: 128 rows, four
// warps of 32; acc[at][t][e] is row 32·warp + 16·at + g + 8·(e / 2) of the tile, column
// m = 8·t + 2q + e % 2). A CTA that ran the whole tile writes y. Otherwise each CTA stores its
// partial sums in its slot of a.partials; the last to arrive (an atomic count) sums the slots
// in order, so the result does not depend on the arrival order, writes y and resets the count.
// The sum reads float4 pieces four deep: one L2 round trip per element took ~15% of
// qmm_affine_rf's time at M = 16 (docs/PERF.md).
template <class T, int MT>
__device__ __forceinline__ void stream_k_flush(const TcArgs& a, int rt, int64_t u_begin,
                                               int64_t u_end, const float (&acc)[2][MT][4],
                                               int& is_last) {
  constexpr int kRows = kTcRows, kThreads = kTcThreads;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int g = lane / 4, q = lane % 4;
  const int64_t C = gridDim.x, c = blockIdx.x;
  const int S = a.tile_stages;
  const int n0 = rt * kRows;
  T* y = static_cast<T*>(a.y);
  const int64_t first = static_cast<int64_t>(rt) * S, last = first + S - 1;
  if (first >= u_begin && last < u_end) {  // this CTA ran the whole row tile
#pragma unroll
    for (int at = 0; at < 2; ++at)
#pragma unroll
      for (int t = 0; t < MT; ++t)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int n = n0 + 32 * warp + 16 * at + g + 8 * (e / 2), m = 8 * t + 2 * q + e % 2;
          if (n < a.n && m < a.m) y[static_cast<int64_t>(m) * a.n + n] = from_f32<T>(acc[at][t][e]);
        }
    return;
  }
  const int64_t c_first = cta_of_unit(first, a.units, C), c_last = cta_of_unit(last, a.units, C);
  const int64_t tile_slots = static_cast<int64_t>(rt) * a.max_contrib;
  float* part = a.partials + (tile_slots + (c - c_first)) * a.m * kRows;
#pragma unroll
  for (int at = 0; at < 2; ++at)
#pragma unroll
    for (int t = 0; t < MT; ++t)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = 32 * warp + 16 * at + g + 8 * (e / 2), m = 8 * t + 2 * q + e % 2;
        if (m < a.m) __stcg(part + m * kRows + r, acc[at][t][e]);
      }
  __threadfence();
  __syncthreads();
  if (tid == 0) is_last = atomicAdd(&a.counters[rt], 1u) == static_cast<uint32_t>(c_last - c_first);
  __syncthreads();
  if (!is_last) return;
  __threadfence();
  const int rows = min(kRows, a.n - n0);
  const int slots = static_cast<int>(c_last - c_first) + 1;
  const int pieces = a.m * (kRows / 4);
  for (int p0 = tid; p0 < pieces; p0 += 4 * kThreads) {
    float4 sum[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) sum[u] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    for (int sl = 0; sl < slots; ++sl) {
      const float4* src =
          reinterpret_cast<const float4*>(a.partials + (tile_slots + sl) * a.m * kRows);
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const int p = p0 + u * kThreads;
        if (p < pieces) {
          const float4 v = __ldcg(src + p);
          sum[u].x += v.x;
          sum[u].y += v.y;
          sum[u].z += v.z;
          sum[u].w += v.w;
        }
      }
    }
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const int p = p0 + u * kThreads;
      if (p >= pieces) continue;
      const int m = p / (kRows / 4), r = 4 * (p % (kRows / 4));
      T* yr = y + static_cast<int64_t>(m) * a.n + n0;
      const float v[4] = {sum[u].x, sum[u].y, sum[u].z, sum[u].w};
#pragma unroll
      for (int e = 0; e < 4; ++e)
        if (r + e < rows) yr[r + e] = from_f32<T>(v[e]);
    }
  }
  if (tid == 0) a.counters[rt] = 0;
}

template <class T, int BITS, int MT, bool SPLIT = false>
__global__ void __launch_bounds__(kTcThreads, MT == 1 ? 5 : 1)
    qmm_affine_tc_kernel(const TcArgs a) {
  static_assert(!SPLIT || MT == 1, "the split kernel serves M = 1");
  using Geo = TcGeom<BITS, MT>;
  extern __shared__ __align__(128) uint8_t smem[];
  __shared__ int is_last;
  __shared__ __align__(16) uint8_t zero_s[64];  // SPLIT: B of lanes outside their group
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int g = lane / 4, q = lane % 4;
  if (SPLIT && tid < 16) reinterpret_cast<uint32_t*>(zero_s)[tid] = 0;  // read after a barrier
  const int64_t C = gridDim.x, c = blockIdx.x;
  const int64_t u_begin = first_unit(c, a.units, C), u_end = first_unit(c + 1, a.units, C);
  const int S = a.tile_stages;
  const int64_t row_bytes = static_cast<int64_t>(a.k) * BITS / 8;
  const int groups = a.k >> a.log2_group;
  const T* x = static_cast<const T*>(a.x);
  const int xrows = min(a.m, 8 * MT);
  const int entries = kTcBK >> a.log2_group;  // scale entries per row and stage (2, 4, 8)

  // Copy assignments, fixed per row tile so a stage's copies are a base pointer plus constants.
  // Codes: thread pair (2r', 2r'+1) owns rows r' and r' + 64; in each row the pair copies 16-byte
  // units 2j + (tid & 1), so one warp instruction reads whole 32-byte sectors of 16 rows.
  // Scales: thread t owns row t and copies its E/2 pieces of s and of b.
  constexpr int kUnits = Geo::kRowBytes / 16;  // 16-byte units per row and stage (2·bits)
  const int half = tid & 1, prow = tid >> 1;
  const uint8_t* code_row[2] = {a.codes, a.codes};
  bool row_ok[2] = {false, false}, srow_ok = false;
  const uint8_t* s_row = a.scales;
  const uint8_t* b_row = a.biases;
  int tile_rt = -1;
  auto set_tile = [&](int rt) {  // this thread's source rows in row tile rt
    tile_rt = rt;
    const int n0 = rt * kTcRows;
#pragma unroll
    for (int ro = 0; ro < 2; ++ro) {
      const int n = n0 + prow + 64 * ro;
      row_ok[ro] = n < a.n;
      code_row[ro] = a.codes + static_cast<int64_t>(row_ok[ro] ? n : 0) * row_bytes + 16 * half;
    }
    const int n = n0 + tid;
    srow_ok = n < a.n;
    s_row = a.scales + static_cast<int64_t>(srow_ok ? n : 0) * groups * 2;
    b_row = a.biases + static_cast<int64_t>(srow_ok ? n : 0) * groups * 2;
  };

  // Issues the copies of unit (row tile rt, stage st) into ring slot `slot`.
  auto load_unit = [&](int rt, int st, int slot) {
    if (rt != tile_rt) set_tile(rt);
    uint8_t* base = smem + slot * a.stage_bytes;
    const int k0 = st * kTcBK;
    const int64_t kbyte = static_cast<int64_t>(k0) * BITS / 8;
    const bool full = k0 + kTcBK <= a.k;  // no K tail in this stage
    const int64_t left = row_bytes - kbyte;
    uint8_t* sbase = base + Geo::kCodeBytes + tid * Geo::kScaleRow;
    const int e0 = k0 >> a.log2_group;
    const uint8_t* ssrc = s_row + 2 * e0;
    const uint8_t* bsrc = b_row + 2 * e0;
    if (full && row_ok[0] && row_ok[1] && srow_ok) {  // the common case: nothing to predicate
#pragma unroll
      for (int ro = 0; ro < 2; ++ro) {
        const uint8_t* src = code_row[ro] + kbyte;
        uint8_t* dst = base + (prow + 64 * ro) * Geo::kRowStride;
#pragma unroll
        for (int j = 0; j < kUnits / 2; ++j)
          cp_async_16_l2(dst + Geo::swizzle(prow, 16 * (2 * j + half)), src + 32 * j, true);
      }
#pragma unroll
      for (int p = 0; p < 4; ++p) {
        if (2 * p >= entries) break;
        cp_async_4(sbase + 8 * p, ssrc + 4 * p, true);
        cp_async_4(sbase + 8 * p + 4, bsrc + 4 * p, true);
      }
    } else {
#pragma unroll
      for (int ro = 0; ro < 2; ++ro) {
        const int r = prow + 64 * ro;
        const uint8_t* src = code_row[ro] + kbyte;
#pragma unroll
        for (int j = 0; j < kUnits / 2; ++j) {
          const int col = 16 * (2 * j + half);
          const bool ok = row_ok[ro] && (full || col < left);
          cp_async_16_l2(base + Geo::code_offset(r, col), ok ? src + 32 * j : a.codes, ok);
        }
      }
#pragma unroll
      for (int p = 0; p < 4; ++p) {
        if (2 * p >= entries) break;
        const bool ok = srow_ok && (full || e0 + 2 * p < groups);
        cp_async_4(sbase + 8 * p, ok ? ssrc + 4 * p : a.scales, ok);
        cp_async_4(sbase + 8 * p + 4, ok ? bsrc + 4 * p : a.biases, ok);
      }
    }
    uint8_t* xbase = base + Geo::kCodeBytes + Geo::kScaleBytes;
    for (int v = tid; v < xrows * (kTcBK / 8); v += kTcThreads) {
      const int m = v >> 5, col = (v & 31) * 8;  // kTcBK / 8 = 32 copies per row of x
      const bool ok = full || k0 + col < a.k;
      cp_async_16(xbase + Geo::x_offset(m, col),
                  ok ? x + static_cast<int64_t>(m) * a.k + k0 + col : x, ok);
    }
  };

  // Two accumulators per fragment (even and odd k16 steps) halve the dependent mma.sync chains;
  // they are summed when the row tile is flushed.
  float acc[2][MT][4], acc_odd[2][MT][4];
  float racc[2][2];  // SPLIT: rows g, g+8 of each A-tile, over this lane's columns only
  auto zero_acc = [&] {
#pragma unroll
    for (int at = 0; at < 2; ++at) {
      racc[at][0] = racc[at][1] = 0.0f;
#pragma unroll
      for (int t = 0; t < MT; ++t)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[at][t][e] = acc_odd[at][t][e] = 0.0f;
    }
  };
  // acc[at][t][e]: row 32·warp + 16·at + g + 8·(e / 2) of the tile, column m = 8·t + 2q + e % 2.
  auto flush = [&](int rt) {
#pragma unroll
    for (int at = 0; at < 2; ++at) {
      if constexpr (SPLIT) {  // sum the quad's columns; lane q = 0 then holds the rows' totals
#pragma unroll
        for (int rr = 0; rr < 2; ++rr) {
          float v = racc[at][rr];
          v += __shfl_xor_sync(0xffffffffu, v, 1);
          v += __shfl_xor_sync(0xffffffffu, v, 2);
          acc[at][0][2 * rr] = v;  // column 2q: stored by q = 0 only
          acc[at][0][2 * rr + 1] = 0.0f;
        }
      } else {
#pragma unroll
        for (int t = 0; t < MT; ++t)
#pragma unroll
          for (int e = 0; e < 4; ++e) acc[at][t][e] += acc_odd[at][t][e];
      }
    }
    stream_k_flush<T, MT>(a, rt, u_begin, u_end, acc, is_last);
  };

  // (row tile, stage) of the next unit to load and of the unit being computed, advanced without
  // dividing.
  int load_rt, load_st;
  if (a.units < (int64_t{1} << 32)) {
    load_rt = static_cast<int>(static_cast<uint32_t>(u_begin) / static_cast<uint32_t>(S));
    load_st = static_cast<int>(static_cast<uint32_t>(u_begin) - static_cast<uint32_t>(load_rt) * S);
  } else {
    load_rt = static_cast<int>(u_begin / S);
    load_st = static_cast<int>(u_begin % S);
  }
  auto advance = [&](int& rt, int& st) {
    if (++st == S) {
      st = 0;
      ++rt;
    }
  };
  int cur_rt = load_rt, cur_st = load_st;
  if (u_begin < u_end) {
    load_unit(load_rt, load_st, 0);
    advance(load_rt, load_st);
  }
  cp_async_commit();
  zero_acc();
  int acc_rt = cur_rt;
  int slot = 0;
  for (int64_t u = u_begin; u < u_end; ++u) {
    cp_async_wait<0>();
    __syncthreads();  // stage u landed; every warp is done with the other slot
    if (u + 1 < u_end) {
      load_unit(load_rt, load_st, slot ^ 1);
      advance(load_rt, load_st);
    }
    cp_async_commit();
    if (cur_rt != acc_rt) {
      flush(acc_rt);
      zero_acc();
      acc_rt = cur_rt;
    }
    advance(cur_rt, cur_st);

    const uint8_t* base = smem + slot * a.stage_bytes;
    slot ^= 1;
    const uint8_t* sb_s = base + Geo::kCodeBytes;                    // [128][kScaleRow] s, b
    const uint8_t* x_s = base + Geo::kCodeBytes + Geo::kScaleBytes;  // [rows][kXRow]
    if constexpr (SPLIT) {
      float cst[2][4] = {}, cones[4] = {};  // this stage's per-group sums
      const uint32_t ones = as_u32(Magic<T>::one2());
#pragma unroll
      for (int v = 0; v < kTcBK / 128; ++v) {
        const unsigned kc = 128 * v + 32 * q;
        // B: x of this lane's chunk where the lane's column (g) is the chunk's group, else 0.
        const bool mine = static_cast<unsigned>(g) == (kc >> a.log2_group);
        const uint8_t* xr = mine ? x_s + Geo::x_offset(0, kc) : zero_s;
        uint32_t bp[16], xw[16];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const uint4 v4 = *reinterpret_cast<const uint4*>(xr + 16 * i);
          xw[4 * i] = v4.x;
          xw[4 * i + 1] = v4.y;
          xw[4 * i + 2] = v4.z;
          xw[4 * i + 3] = v4.w;
        }
        x_pairs<BITS>(xw, bp);
#pragma unroll
        for (int at = 0; at < 2; ++at) {
          uint32_t ap[2][16];
#pragma unroll
          for (int rho = 0; rho < 2; ++rho) {
            const int r = 32 * warp + 16 * at + 8 * rho + g;
            uint32_t w[BITS];
            load_chunk<BITS, ChunkLoad::plain>(base + Geo::code_offset(r, kc * BITS / 8), w);
            unpack_chunk<BITS>(w, ap[rho], Magic<T>::kBits2);
          }
#pragma unroll
          for (int j = 0; j < 8; ++j) {
            const uint32_t af[4] = {ap[0][2 * j], ap[1][2 * j], ap[0][2 * j + 1], ap[1][2 * j + 1]};
            const uint32_t bf[2] = {bp[2 * j], bp[2 * j + 1]};
            mma_16816<T>(cst[at], af, bf);
          }
        }
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          const uint32_t af[4] = {ones, ones, ones, ones};
          const uint32_t bf[2] = {bp[2 * j], bp[2 * j + 1]};
          mma_16816<T>(cones, af, bf);
        }
      }
      // cst[at][2·rr + e]: row 16·at + 8·rr + g of the warp, column (group) 2q + e. Lane q's
      // groups 2q, 2q + 1 are scale piece q of each row: one 8-byte load gives both (s, b).
      if (2 * q < entries) {
        const float offset = static_cast<float>(Magic<T>::kOffset);
#pragma unroll
        for (int at = 0; at < 2; ++at)
#pragma unroll
          for (int rr = 0; rr < 2; ++rr) {
            const int r = 32 * warp + 16 * at + 8 * rr + g;
            const uint2 sb = *reinterpret_cast<const uint2*>(sb_s + r * Geo::kScaleRow + 8 * q);
            const auto s2 = as_vec2<T>(sb.x), b2 = as_vec2<T>(sb.y);
            const float s0 = to_f32(s2.x), s1 = to_f32(s2.y);
            const float b0 = to_f32(b2.x), b1 = to_f32(b2.y);
            racc[at][rr] += fmaf(s0, cst[at][2 * rr], fmaf(-offset, s0, b0) * cones[0]);
            racc[at][rr] += fmaf(s1, cst[at][2 * rr + 1], fmaf(-offset, s1, b1) * cones[1]);
          }
      }
    } else {
#pragma unroll
      for (int v = 0; v < kTcBK / 128; ++v) {
        const unsigned kc = 128 * v + 32 * q;  // this lane's chunk within the stage
        // B: the chunk's activations of rows 8t + g, permuted into the A pairs' order.
        uint32_t bp[MT][16];
#pragma unroll
        for (int t = 0; t < MT; ++t) {
          const int m = min(8 * t + g, a.m - 1);
          uint32_t xw[16];
          const uint8_t* xr = x_s + Geo::x_offset(m, kc);
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            const uint4 v4 = *reinterpret_cast<const uint4*>(xr + 16 * i);
            xw[4 * i] = v4.x;
            xw[4 * i + 1] = v4.y;
            xw[4 * i + 2] = v4.z;
            xw[4 * i + 3] = v4.w;
          }
          x_pairs<BITS>(xw, bp[t]);
        }
        const int e = kc >> a.log2_group;  // the chunk's group within the stage
#pragma unroll
        for (int at = 0; at < 2; ++at) {
          uint32_t ap[2][16];
#pragma unroll
          for (int rho = 0; rho < 2; ++rho) {
            const int r = 32 * warp + 16 * at + 8 * rho + g;
            uint32_t w[BITS];
            load_chunk<BITS, ChunkLoad::plain>(base + Geo::code_offset(r, kc * BITS / 8), w);
            const uint8_t* sbp = sb_s + r * Geo::kScaleRow + 8 * (e >> 1) + 2 * (e & 1);
            dequant_chunk<T, BITS>(w, *reinterpret_cast<const T*>(sbp),
                                   *reinterpret_cast<const T*>(sbp + 4), ap[rho]);
          }
#pragma unroll
          for (int j = 0; j < 8; ++j) {
            const uint32_t af[4] = {ap[0][2 * j], ap[1][2 * j], ap[0][2 * j + 1], ap[1][2 * j + 1]};
#pragma unroll
            for (int t = 0; t < MT; ++t) {
              const uint32_t bf[2] = {bp[t][2 * j], bp[t][2 * j + 1]};
              mma_16816<T>(j % 2 ? acc_odd[at][t] : acc[at][t], af, bf);
            }
          }
        }
      }
    }
  }
  cp_async_wait<0>();
  if (u_begin < u_end) flush(acc_rt);
}

// Launches one instantiation; the kernels are instantiated once each, per width, in
// qmm_affine_tc_b*.cu (QUANTA_TC_INSTANTIATE), and declared extern everywhere else.
template <class T, int BITS, int MT, bool SPLIT>
void launch_qmm_affine_tc(const TcArgs& a, dim3 grid, cudaStream_t stream) {
  static const cudaError_t attr = cudaFuncSetAttribute(qmm_affine_tc_kernel<T, BITS, MT, SPLIT>,
                                                       cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                       TcGeom<BITS, MT>::kMaxSmemBytes);
  QUANTA_CUDA_CHECK(attr);
  const int smem = TcGeom<BITS, MT>::kStages * a.stage_bytes;
  qmm_affine_tc_kernel<T, BITS, MT, SPLIT><<<grid, kTcThreads, smem, stream>>>(a);
  QUANTA_CUDA_CHECK_LAUNCH();
}

// CTAs of one instantiation that fit on a multiprocessor with `x_rows` rows of x staged (the
// grid size of the persistent kernel); cached per row count.
template <class T, int BITS, int MT, bool SPLIT>
int occupancy_qmm_affine_tc(int x_rows) {
  static int cache[8 * MT + 1] = {};
  int& c = cache[x_rows];
  if (c == 0) {
    QUANTA_CUDA_CHECK(cudaFuncSetAttribute(qmm_affine_tc_kernel<T, BITS, MT, SPLIT>,
                                           cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           TcGeom<BITS, MT>::kMaxSmemBytes));
    int b = 0;
    QUANTA_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &b, qmm_affine_tc_kernel<T, BITS, MT, SPLIT>, kTcThreads,
        TcGeom<BITS, MT>::smem_bytes(x_rows)));
    c = b > 0 ? b : -1;
  }
  return c > 0 ? c : 1;
}

#define QUANTA_TC_ONE(EXTERN, T, BITS, MT, SPLIT)                                    \
  EXTERN template void launch_qmm_affine_tc<T, BITS, MT, SPLIT>(const TcArgs&, dim3, \
                                                                cudaStream_t);       \
  EXTERN template int occupancy_qmm_affine_tc<T, BITS, MT, SPLIT>(int);
#define QUANTA_TC_WIDTH(EXTERN, BITS)                  \
  QUANTA_TC_ONE(EXTERN, __half, BITS, 1, true)         \
  QUANTA_TC_ONE(EXTERN, __half, BITS, 1, false)        \
  QUANTA_TC_ONE(EXTERN, __half, BITS, 2, false)        \
  QUANTA_TC_ONE(EXTERN, __half, BITS, 4, false)        \
  QUANTA_TC_ONE(EXTERN, __nv_bfloat16, BITS, 1, true)  \
  QUANTA_TC_ONE(EXTERN, __nv_bfloat16, BITS, 1, false) \
  QUANTA_TC_ONE(EXTERN, __nv_bfloat16, BITS, 2, false) \
  QUANTA_TC_ONE(EXTERN, __nv_bfloat16, BITS, 4, false)
#define QUANTA_TC_INSTANTIATE(BITS) QUANTA_TC_WIDTH(, BITS)
#define QUANTA_TC_EXTERN_ALL \
  QUANTA_TC_WIDTH(extern, 2) \
  QUANTA_TC_WIDTH(extern, 3) \
  QUANTA_TC_WIDTH(extern, 4) \
  QUANTA_TC_WIDTH(extern, 5) \
  QUANTA_TC_WIDTH(extern, 6) \
  QUANTA_TC_WIDTH(extern, 8)

}  // namespace quanta::cuda
