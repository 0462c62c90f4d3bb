// A dense f32 matrix stored in another dtype: the f32 sums of qmm_dq.cpp's [K, N] slabs, added
// by cuBLAS in f32 and rounded to x's dtype once at the end (as one GEMM would round them).
#include <algorithm>

#include "cuda/common.cuh"
#include "cuda/families.hpp"
#include "cuda/runtime.cuh"

namespace quanta::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 4096;  // a grid-stride loop: enough blocks to fill any GPU

template <class T>
__global__ void __launch_bounds__(kThreads)
    store_from_f32_kernel(const float* __restrict__ src, T* __restrict__ dst, int64_t count) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kThreads;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; i < count;
       i += stride)
    dst[i] = from_f32<T>(src[i]);
}

}  // namespace

void store_from_f32(const float* src, MatrixView dst, const Context& ctx) {
  const int64_t count = dst.rows * dst.cols;
  if (count == 0) return;
  const auto grid =
      static_cast<unsigned>(std::min<int64_t>((count + kThreads - 1) / kThreads, kMaxBlocks));
  const cudaStream_t stream = stream_of(ctx);
  switch (dst.dtype) {
    case DType::f16:
      store_from_f32_kernel<<<grid, kThreads, 0, stream>>>(src, static_cast<__half*>(dst.data),
                                                           count);
      break;
    case DType::bf16:
      store_from_f32_kernel<<<grid, kThreads, 0, stream>>>(
          src, static_cast<__nv_bfloat16*>(dst.data), count);
      break;
    default:
      store_from_f32_kernel<<<grid, kThreads, 0, stream>>>(src, static_cast<float*>(dst.data),
                                                           count);
      break;
  }
  QUANTA_CUDA_CHECK_LAUNCH();
}

}  // namespace quanta::cuda
