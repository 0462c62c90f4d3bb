// dst = srcᵀ for two R x C matrices at once (a weight's scales and biases), used where a kernel
// needs the side arrays in the other orientation than the stored one: qmm_affine_wgmma (CUTLASS
// reads [K/G, N]) and qmm_affine_repack ([K, N] weights run by the [N, K] kernels).
//
// A block of 32 x 8 threads moves a 64-row x 32-column tile of both arrays through padded shared
// tiles, so that reads and writes are both coalesced. Every load of a thread is issued before its
// first shared store (16 in flight): a loop of dependent load -> store rounds, one array and 32
// rows per block, left the H200 latency-bound (10.3 us against 5.2-5.7 for int4 g64 14336 x
// 5120's 4.6 MB, docs/PERF.md).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "cuda/runtime.cuh"  // QUANTA_CUDA_CHECK_LAUNCH
#include "quanta/error.hpp"

namespace quanta::cuda {

namespace transpose_detail {

constexpr int kRows = 64, kCols = 32, kThreadRows = 8;

// Tiles are numbered row-major over a flat grid, so no grid dimension limits R or C.
template <class E>
__global__ void __launch_bounds__(kCols* kThreadRows)
    transpose_pair_kernel(const E* __restrict__ src0, const E* __restrict__ src1,
                          E* __restrict__ dst0, E* __restrict__ dst1, int rows, int cols,
                          int col_tiles) {
  constexpr int kLoads = kRows / kThreadRows;   // rows of the tile each thread loads
  constexpr int kStores = kCols / kThreadRows;  // columns of the tile each thread stores
  __shared__ E tile[2][kRows][kCols + 1];
  const int tx = static_cast<int>(threadIdx.x), ty = static_cast<int>(threadIdx.y);
  const int r0 = static_cast<int>(blockIdx.x) / col_tiles * kRows;
  const int c0 = static_cast<int>(blockIdx.x) % col_tiles * kCols;
  E v[2][kLoads];
#pragma unroll
  for (int i = 0; i < kLoads; ++i) {
    const int r = r0 + ty + kThreadRows * i, c = c0 + tx;
    const bool in = r < rows && c < cols;
    const int64_t at = static_cast<int64_t>(r) * cols + c;
    v[0][i] = in ? src0[at] : E{};
    v[1][i] = in ? src1[at] : E{};
  }
#pragma unroll
  for (int i = 0; i < kLoads; ++i) {
    tile[0][ty + kThreadRows * i][tx] = v[0][i];
    tile[1][ty + kThreadRows * i][tx] = v[1][i];
  }
  __syncthreads();
#pragma unroll
  for (int i = 0; i < kStores; ++i) {
    const int c = c0 + ty + kThreadRows * i;
#pragma unroll
    for (int h = 0; h < kRows; h += 32) {
      const int r = r0 + h + tx;
      if (r < rows && c < cols) {
        const int64_t at = static_cast<int64_t>(c) * rows + r;
        dst0[at] = tile[0][h + tx][ty + kThreadRows * i];
        dst1[at] = tile[1][h + tx][ty + kThreadRows * i];
      }
    }
  }
}

}  // namespace transpose_detail

// dst0 = src0ᵀ and dst1 = src1ᵀ, each src R x C row-major (R = rows), each dst C x R. E is the
// element's storage type (2 or 4 bytes: the values are moved, never converted).
template <class E>
void transpose_pair(const void* src0, const void* src1, void* dst0, void* dst1, int64_t rows,
                    int64_t cols, cudaStream_t stream) {
  using namespace transpose_detail;
  const int64_t row_tiles = (rows + kRows - 1) / kRows, col_tiles = (cols + kCols - 1) / kCols;
  if (rows > INT32_MAX || cols > INT32_MAX || row_tiles * col_tiles > INT32_MAX)
    throw Error("[quanta] transpose_pair: a " + std::to_string(rows) + " x " +
                std::to_string(cols) + " matrix is past the transpose's int32 grid");
  if (rows == 0 || cols == 0) return;
  transpose_pair_kernel<E>
      <<<static_cast<unsigned>(row_tiles * col_tiles), dim3(kCols, kThreadRows), 0, stream>>>(
          static_cast<const E*>(src0), static_cast<const E*>(src1), static_cast<E*>(dst0),
          static_cast<E*>(dst1), static_cast<int>(rows), static_cast<int>(cols),
          static_cast<int>(col_tiles));
  QUANTA_CUDA_CHECK_LAUNCH();
}

}  // namespace quanta::cuda
