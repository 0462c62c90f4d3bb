// Split-K finish, shared by the kernels that split the reduction over CTAs. Each CTA stores its
// f32 partial y tile into partials[split][m][n]; the last CTA of an output tile (counted with
// an atomic on counters[tile]) sums the partials of every split in split order (so the result
// does not depend on which CTA finished last), writes y and resets its counter to zero for the
// next launch on the stream.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "cuda/common.cuh"
#include "cuda/workspace.hpp"

namespace quanta::cuda {

struct SplitTile {
  float* partials;     // [splits][M][N]
  uint32_t* counters;  // one per output tile
  int32_t splits, m, n;
};

// A launch's split-K state: with splits > 1, its partial y tiles and one counter per output tile
// from the stream's scratch (the counters are zero between launches: each last CTA resets its).
inline SplitTile split_tile(int splits, int m, int n, int tiles, cudaStream_t stream) {
  SplitTile s{nullptr, nullptr, splits, m, n};
  if (splits > 1) {
    s.partials = static_cast<float*>(stream_scratch(
        stream, Scratch::split_partials,
        sizeof(float) * static_cast<std::size_t>(splits) * static_cast<std::size_t>(m) * n));
    s.counters = static_cast<uint32_t*>(stream_scratch(
        stream, Scratch::split_counters, sizeof(uint32_t) * static_cast<std::size_t>(tiles)));
  }
  return s;
}

// Call with every thread of the CTA after this CTA's partials are stored. Columns
// [n0, n0 + cols) of rows [m0, m1) form this CTA's tile.
template <class T>
__device__ __forceinline__ void split_finish(const SplitTile& s, int tile, int m0, int m1, int n0,
                                             int cols, T* y) {
  __shared__ int is_last;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0)
    is_last = atomicAdd(&s.counters[tile], 1u) == static_cast<uint32_t>(s.splits - 1);
  __syncthreads();
  if (!is_last) return;
  __threadfence();
  cols = min(cols, s.n - n0);
  // Eight splits' loads in flight per element (one at a time left qvm_affine's last CTA
  // waiting an L2 round trip per split); the sum stays in split order.
  constexpr int kInFlight = 8;
  const int64_t split_stride = static_cast<int64_t>(s.m) * s.n;
  for (int i = threadIdx.x; i < (m1 - m0) * cols; i += blockDim.x) {
    const int m = m0 + i / cols, n = n0 + i % cols;
    const float* src = s.partials + static_cast<int64_t>(m) * s.n + n;
    float sum = 0.0f;
    for (int k0 = 0; k0 < s.splits; k0 += kInFlight) {
      float v[kInFlight];
#pragma unroll
      for (int j = 0; j < kInFlight; ++j)
        v[j] = k0 + j < s.splits ? __ldcg(src + (k0 + j) * split_stride) : 0.0f;
#pragma unroll
      for (int j = 0; j < kInFlight; ++j)
        if (k0 + j < s.splits) sum += v[j];
    }
    y[static_cast<int64_t>(m) * s.n + n] = from_f32<T>(sum);
  }
  if (threadIdx.x == 0) s.counters[tile] = 0;
}

}  // namespace quanta::cuda
