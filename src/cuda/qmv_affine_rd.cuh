// qmv_affine_rd: affine nk, M = 1, f16/bf16 activations, codes streamed register-direct.
//
//   y[n] = Σ_g s[n,g]·C[n,g] + (b[n,g] − off·s[n,g])·X[g]
//   C[n,g] = Σ_{k∈g} (off + q[n,k])·x[k]      (codes under a half2 magic number: off = 1024 f16,
//   X[g]   = Σ_{k∈g} x[k]                      128 bf16; exact in T, products exact in f32)
//
// Why this shape: at M = 1 the kernel must stream ~35 codes per cycle per SM to stay on the
// H200's memory roof, which leaves ~3 CUDA-core instructions per code: too few for f32 decode +
// FMA, enough for one LOP3 per code pair feeding mma.sync. The earlier qmv_affine_tc staged codes
// through shared memory with cp.async and sat on the MIO pipe at ~30% of the roof
// (docs/PERF.md); here each lane loads its codes with 16-byte streaming loads straight into
// registers, kRdDepth steps ahead, while x (as ready B pairs) and the block's scales sit in
// shared memory, filled once per block.
//
// Tile: a block owns 16 rows (the mma's M); its warps split K in steps of 128. In a step lane
// (g = lane/4, q = lane%4) holds chunk q (32 codes) of rows g and g+8; chunk q belongs to group
// column col(q) = 32q/G of the step. A = codes (16 rows x 16 k per mma, 8 mmas per step);
// B = x placed in column col(q) only, so C's columns are the step's groups; a second mma with
// A = 1 gives X per column. Scales apply per (row, group) in f32 after each step.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "cuda/affine_simt.cuh"  // load_chunk
#include "cuda/affine_unpack.cuh"
#include "cuda/common.cuh"
#include "cuda/mma.cuh"

namespace quanta::cuda {

inline constexpr int kRdRows = 16;    // rows per block (the mma's M)
inline constexpr int kRdStepK = 128;  // K per step: 4 chunk lanes x 32 codes
inline constexpr int kRdMaxWarps = 16;

struct RdArgs {
  const uint8_t* codes;
  const void* scales;  // T [N, K/G]
  const void* biases;  // T [N, K/G]
  const void* x;       // T [K], 16-byte aligned
  void* y;             // T [N]
  int32_t n, k;
  int64_t row_bytes;
};

template <int BITS>
struct RdChunks {
  uint32_t lo[BITS];  // row g
  uint32_t hi[BITS];  // row g + 8
};

// Shared memory of one block: the B pairs of every (step, chunk) of x, and per (row, group)
// the scale and bias as T. At most K·2 + 16·(K/32)·4 bytes: 57 KB for K = 14336, G = 32.
inline std::size_t rd_smem_bytes(int k, int group, int t_size) {
  return static_cast<std::size_t>(k) * 2 +
         static_cast<std::size_t>(kRdRows) * (k / group) * 2 * static_cast<std::size_t>(t_size);
}

template <class T, int BITS, int G, int D>
__global__ void __launch_bounds__(kRdMaxWarps * 32) qmv_affine_rd_kernel(RdArgs a) {
  constexpr int kChunkBytes = 4 * BITS;
  constexpr int kStepBytes = 4 * kChunkBytes;
  constexpr int kCols = kRdStepK / G;  // groups per step: 4, 2 or 1
  extern __shared__ __align__(16) uint8_t smem[];
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const int warp = static_cast<int>(threadIdx.x) >> 5;
  const int warps = static_cast<int>(blockDim.x) >> 5;
  const int g = lane >> 2, q = lane & 3;
  const int row0 = static_cast<int>(blockIdx.x) * kRdRows;
  // Rows past N read the last row (in bounds) and are never stored.
  const int r_lo = min(row0 + g, a.n - 1), r_hi = min(row0 + g + 8, a.n - 1);
  const bool x_lane = g == (32 * q) / G;  // this lane's B column is its chunk's group
  const int steps = a.k / kRdStepK, groups = a.k / G;

  const uint8_t* w_lo = a.codes + static_cast<int64_t>(r_lo) * a.row_bytes + q * kChunkBytes;
  const uint8_t* w_hi = a.codes + static_cast<int64_t>(r_hi) * a.row_bytes + q * kChunkBytes;
  auto load = [&](int s, RdChunks<BITS>& c) {
    if (s < steps) {
      load_chunk<BITS, ChunkLoad::stream>(w_lo + static_cast<int64_t>(s) * kStepBytes, c.lo);
      load_chunk<BITS, ChunkLoad::stream>(w_hi + static_cast<int64_t>(s) * kStepBytes, c.hi);
    }
  };

  // Codes run D steps ahead in registers, issued before the shared-memory fill below.
  RdChunks<BITS> ring[D];
#pragma unroll
  for (int u = 0; u < D; ++u) load(warp + u * warps, ring[u]);

  // Fill: B pairs [step][chunk][16 words] of x; scale and bias [row][group] of the block's rows.
  uint32_t* bp_smem = reinterpret_cast<uint32_t*>(smem);                        // [steps * 4][16]
  T* sb_smem = reinterpret_cast<T*>(smem + static_cast<std::size_t>(a.k) * 2);  // [16][groups][2]
  const T* x = static_cast<const T*>(a.x);
  for (int i = static_cast<int>(threadIdx.x); i < steps * 4; i += static_cast<int>(blockDim.x)) {
    uint32_t xw[16], bp[16];
    const uint4* xs = reinterpret_cast<const uint4*>(x + i * 32);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const uint4 v = xs[j];
      xw[4 * j] = v.x;
      xw[4 * j + 1] = v.y;
      xw[4 * j + 2] = v.z;
      xw[4 * j + 3] = v.w;
    }
    x_pairs<BITS>(xw, bp);
    uint4* dst = reinterpret_cast<uint4*>(bp_smem + i * 16);
#pragma unroll
    for (int j = 0; j < 4; ++j)
      dst[j] = make_uint4(bp[4 * j], bp[4 * j + 1], bp[4 * j + 2], bp[4 * j + 3]);
  }
  const T* scales = static_cast<const T*>(a.scales);
  const T* biases = static_cast<const T*>(a.biases);
  for (int i = static_cast<int>(threadIdx.x); i < kRdRows * groups;
       i += static_cast<int>(blockDim.x)) {
    const int r = min(row0 + i / groups, a.n - 1), grp = i % groups;
    sb_smem[2 * i] = scales[static_cast<int64_t>(r) * groups + grp];
    sb_smem[2 * i + 1] = biases[static_cast<int64_t>(r) * groups + grp];
  }
  __syncthreads();

  const uint32_t magic = magic_register(Magic<T>::kBits2);
  uint32_t ones;
  {
    const auto o = Magic<T>::one2();
    ones = as_u32(o);
  }
  constexpr float kOff = static_cast<float>(Magic<T>::kOffset);
  float acc_lo = 0.0f, acc_hi = 0.0f;

  for (int s0 = warp; s0 < steps; s0 += D * warps) {
#pragma unroll
    for (int u = 0; u < D; ++u) {
      const int s = s0 + u * warps;
      if (s >= steps) break;  // uniform across the warp
      // B: x pairs of this lane's chunk, only in its group's column (zero elsewhere).
      uint32_t bp[16];
      const uint4* src = reinterpret_cast<const uint4*>(bp_smem + (s * 4 + q) * 16);
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const uint4 v = x_lane ? src[j] : make_uint4(0u, 0u, 0u, 0u);
        bp[4 * j] = v.x;
        bp[4 * j + 1] = v.y;
        bp[4 * j + 2] = v.z;
        bp[4 * j + 3] = v.w;
      }
      // Two accumulator chains each for C and X halve the dependent mma latency per step.
      float c[2][4] = {}, cx[2][4] = {};
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const uint32_t af[4] = {unpack_pair<BITS>(ring[u].lo, 2 * j, magic),
                                unpack_pair<BITS>(ring[u].hi, 2 * j, magic),
                                unpack_pair<BITS>(ring[u].lo, 2 * j + 1, magic),
                                unpack_pair<BITS>(ring[u].hi, 2 * j + 1, magic)};
        const uint32_t bf[2] = {bp[2 * j], bp[2 * j + 1]};
        const uint32_t of[4] = {ones, ones, ones, ones};
        mma_16816<T>(c[j & 1], af, bf);
        mma_16816<T>(cx[j & 1], of, bf);
      }
      load(s + D * warps, ring[u]);  // refill this slot D steps ahead
                                     // This lane's columns 2q, 2q+1 that are groups of the step.
#pragma unroll
      for (int cc = 0; cc < 2; ++cc) {
        if (2 * q + cc < kCols) {
          const int grp = s * kCols + 2 * q + cc;
          const float sl = to_f32(sb_smem[2 * (g * groups + grp)]);
          const float bl = to_f32(sb_smem[2 * (g * groups + grp) + 1]);
          const float sh = to_f32(sb_smem[2 * ((g + 8) * groups + grp)]);
          const float bh = to_f32(sb_smem[2 * ((g + 8) * groups + grp) + 1]);
          const float xl = cx[0][cc] + cx[1][cc], xh = cx[0][2 + cc] + cx[1][2 + cc];
          acc_lo = fmaf(sl, c[0][cc] + c[1][cc], fmaf(bl - kOff * sl, xl, acc_lo));
          acc_hi = fmaf(sh, c[0][2 + cc] + c[1][2 + cc], fmaf(bh - kOff * sh, xh, acc_hi));
        }
      }
    }
  }

  store_row_tile<T>(acc_lo, acc_hi, smem, row0, a.n, static_cast<T*>(a.y));
}

// Steps of codes in flight per warp: loaded HBM latency on the H200 is long enough that two
// steps (2 KB a warp) left the kernel at ~40% of the read roof.
inline constexpr int kRdDepth = 4;

template <class T, int BITS, int G>
void launch_qmv_affine_rd(const RdArgs& a, int warps, cudaStream_t stream) {
  const unsigned blocks = static_cast<unsigned>((a.n + kRdRows - 1) / kRdRows);
  const std::size_t smem = rd_smem_bytes(a.k, G, static_cast<int>(sizeof(T)));
  auto kernel = qmv_affine_rd_kernel<T, BITS, G, kRdDepth>;
  if (smem > 48 * 1024)
    cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         static_cast<int>(smem));
  kernel<<<blocks, static_cast<unsigned>(warps * 32), smem, stream>>>(a);
}

}  // namespace quanta::cuda
