// Per-stream scratch memory owned by the backend: split-K partial sums and arrival counters,
// and the bad-expert-id flag. Allocated on first use and grown on demand (never while the
// stream is being captured into a graph: warm up before capturing).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace quanta::cuda {

enum class Scratch : int {
  split_partials = 0,  // f32 partial sums of split-K kernels
  split_counters = 1,  // one u32 per output tile; kernels leave them zero again
  expert_flag = 2,     // one int set by gather kernels on an out-of-range id
  x_planes = 3,        // qmv_affine_i8 / qmv_gguf: x as int8 planes and their per-group sums
  dense_slab = 4,      // qmm_affine_dq: a slab of dequantized weight rows
  cublas = 5,          // qmm_affine_dq: cuBLAS's workspace (explicit, so graphs can capture it)
  scales_t = 6,        // qmm_affine_wgmma: scales and biases transposed to [K/G, N]
  gemm_workspace = 7,  // qmm_affine_wgmma: CUTLASS's stream-K partials and flags
  dense_sums = 8,      // qmm_affine_dq / qmm_generic_dq, [K, N]: f32 sums of the slabs' GEMMs
  kn_repack = 9,       // qmm_affine_repack: the [N, K] copy of a [K, N] matrix
  rf_x_frags = 10,     // qmm_affine_rf / qmm_scaled_rf: x as B fragments in the kernel's order
  wgrf_x_image = 11,   // qmm_affine_wgrf: x as the kernel's shared-memory image per k-block
  expert_passes = 12,  // group_rows_by_expert: the rows of x grouped by expert, and their passes
};

// At least `bytes` of device memory for (stream, slot). Zero-filled when (re)allocated; callers
// keep any invariant they need afterwards. Throws quanta::Error on growth during capture.
void* stream_scratch(cudaStream_t stream, Scratch slot, std::size_t bytes);

}  // namespace quanta::cuda
