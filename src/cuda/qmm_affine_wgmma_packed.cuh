// The packed qmm_affine_wgmma instances of one dtype and width at every token tile (256 in
// clusters of 1 and 2), and its reorder: one instance file per dtype for 2- and 8-bit codes
// (qmm_affine_wgmma_packed_{f16,bf16}_b{2,8}.cu). 4-bit codes are split over two files per dtype
// for compile time.
#pragma once

#include "cuda/qmm_affine_wgmma_impl.cuh"

// clang-format off
#define QUANTA_WGMMA_PACKED_INSTANCES(T, BITS) \
  template std::size_t qmm_affine_wgmma_workspace_packed<T, BITS, 64, 1>(const WgmmaArgs&); \
  template std::size_t qmm_affine_wgmma_workspace_packed<T, BITS, 128, 1>(const WgmmaArgs&); \
  template std::size_t qmm_affine_wgmma_workspace_packed<T, BITS, 256, 1>(const WgmmaArgs&); \
  template std::size_t qmm_affine_wgmma_workspace_packed<T, BITS, 256, 2>(const WgmmaArgs&); \
  template const char* launch_qmm_affine_wgmma_packed<T, BITS, 64, 1>(const WgmmaArgs&, void*, cudaStream_t); \
  template const char* launch_qmm_affine_wgmma_packed<T, BITS, 128, 1>(const WgmmaArgs&, void*, cudaStream_t); \
  template const char* launch_qmm_affine_wgmma_packed<T, BITS, 256, 1>(const WgmmaArgs&, void*, cudaStream_t); \
  template const char* launch_qmm_affine_wgmma_packed<T, BITS, 256, 2>(const WgmmaArgs&, void*, cudaStream_t); \
  template void reorder_codes<T, BITS>(const void*, void*, int, int, cudaStream_t);
// clang-format on
