// qmm_affine_wgmma: 2/4/8-bit affine W times f16/bf16 activations on Hopper's warpgroup MMA,
// through CUTLASS's mixed-input GEMM (sm_90a): TMA brings code, x and scale tiles into shared
// memory, a producer warp keeps a multi-stage ring full, and two consumer warpgroups convert each
// code tile in registers to scale * q + bias (the dtype's fma, rounded once, as MLX's dequantize)
// before it enters wgmma as the register operand; f32 accumulation; stream-K tile scheduling.
//
// The GEMM is y^T = W x^T: W's rows are CUTLASS's M (K-major, as MLX stores them) and the rows
// of x its N, so the token count picks the tile width. CUTLASS reads scales N-major
// ([K/G, N]); the launcher transposes MLX's [N, K/G] scales and biases into scratch first.
//
// Host-visible part: no CUTLASS types (those live in qmm_affine_wgmma_impl.cuh).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>

namespace quanta::cuda {

struct WgmmaArgs {
  const void* codes;     // [N, K * bits / 8 bytes], element 0 in the lowest bits (MLX)
  const void* scales_t;  // T [K / group, N]
  const void* biases_t;  // T [K / group, N]
  const void* x;         // T [M, K]
  void* y;               // T [M, N]
  int n, m, k, group;
  int splits = 1;         // > 1: split-K into this many slices of K (reduced in the workspace)
  int decomposition = 0;  // splits == 1: 0 CUTLASS's heuristic, 1 data-parallel, 2 stream-K
  int swizzle = 1;        // CUTLASS's max_swizzle_size (1, 2, 4 or 8 tiles)
  int raster = 0;         // 0 CUTLASS's heuristic, 1 along W's rows, 2 along x's rows
};

// Code widths (CUTLASS's uint2b_t, uint4b_t, uint8_t) and token-tile widths built (CUTLASS's
// tile is 128 rows of W x TOKENS rows of x x 64 along K; 192 in qmm_affine_wgmma{,_packed}_192.cu);
// 256-token tiles also come in clusters of 2 CTAs along W's rows, which share each x tile (TMA
// multicast).
inline constexpr int kWgmmaBits[] = {2, 4, 8};
inline constexpr int kWgmmaTokenTiles[] = {64, 128, 192, 256};

// Bytes of global workspace the instance needs for these arguments (stream-K partial tiles).
template <class T, int BITS, int TOKENS, int CLUSTER = 1>
std::size_t qmm_affine_wgmma_workspace(const WgmmaArgs& a);

// Launches on `stream`. Returns null on success, else CUTLASS's reason (can_implement or
// initialize failed); launch errors are left for cudaGetLastError.
template <class T, int BITS, int TOKENS, int CLUSTER = 1>
const char* launch_qmm_affine_wgmma(const WgmmaArgs& a, void* workspace, cudaStream_t stream);

// The same GEMM on codes in CUTLASS's reordered layout (a.codes from reorder_codes: a device
// pack, quanta::prepack). Instances: 2/4/8-bit, every token tile (256 in clusters of 1 and 2)
// (qmm_affine_wgmma_packed_*.cu).
template <class T, int BITS, int TOKENS, int CLUSTER>
std::size_t qmm_affine_wgmma_workspace_packed(const WgmmaArgs& a);
template <class T, int BITS, int TOKENS, int CLUSTER>
const char* launch_qmm_affine_wgmma_packed(const WgmmaArgs& a, void* workspace,
                                           cudaStream_t stream);
// W's [N, K] codes (src) into that layout (dst, as many bytes), on `stream`.
template <class T, int BITS>
void reorder_codes(const void* src, void* dst, int n, int k, cudaStream_t stream);

// The instances of one dtype and width (EXTERN: `extern` to declare, empty to define).
#define QUANTA_WGMMA_INSTANCES(EXTERN, T, BITS)                                                 \
  EXTERN template std::size_t qmm_affine_wgmma_workspace<T, BITS, 64>(const WgmmaArgs&);        \
  EXTERN template std::size_t qmm_affine_wgmma_workspace<T, BITS, 128>(const WgmmaArgs&);       \
  EXTERN template std::size_t qmm_affine_wgmma_workspace<T, BITS, 256>(const WgmmaArgs&);       \
  EXTERN template const char* launch_qmm_affine_wgmma<T, BITS, 64>(const WgmmaArgs&, void*,     \
                                                                   cudaStream_t);               \
  EXTERN template const char* launch_qmm_affine_wgmma<T, BITS, 128>(const WgmmaArgs&, void*,    \
                                                                    cudaStream_t);              \
  EXTERN template const char* launch_qmm_affine_wgmma<T, BITS, 256>(const WgmmaArgs&, void*,    \
                                                                    cudaStream_t);              \
  EXTERN template std::size_t qmm_affine_wgmma_workspace<T, BITS, 256, 2>(const WgmmaArgs&);    \
  EXTERN template const char* launch_qmm_affine_wgmma<T, BITS, 256, 2>(const WgmmaArgs&, void*, \
                                                                       cudaStream_t);

}  // namespace quanta::cuda
