// qmm_affine_ring host side: the supports rule, the tensor maps of W's codes, scales and biases,
// the stream-K grid, the pre-pass and the dispatch to the instances (f16, bf16). Kernel:
// qmm_affine_ring.cuh.
#include <cudaTypedefs.h>  // PFN_cuTensorMapEncodeTiled

#include <string>

#include "cuda/checks.hpp"
#include "cuda/families.hpp"
#include "cuda/qmm_affine_ring.cuh"
#include "cuda/stream_k.hpp"
#include "cuda/workspace.hpp"
#include "quanta/error.hpp"

namespace quanta::cuda {
namespace {

// The driver's tensor-map encoder, through the runtime (no link against libcuda).
PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static const PFN_cuTensorMapEncodeTiled_v12000 f = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q{};
    QUANTA_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000,
                                                       cudaEnableDefault, &q));
    if (q != cudaDriverEntryPointSuccess || p == nullptr)
      throw Error("[quanta::matmul] qmm_affine_ring: the driver has no cuTensorMapEncodeTiled");
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
  }();
  return f;
}

// A 2D map of `rows` rows of `cols` elements (`row_bytes` apart), read in boxes of box_cols x 32
// rows; elements past either end read as zeros.
CUtensorMap tensor_map_2d(const void* base, CUtensorMapDataType type, int64_t cols, int64_t rows,
                          int64_t row_bytes, uint32_t box_cols, CUtensorMapSwizzle swizzle,
                          const char* what) {
  CUtensorMap m{};
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(row_bytes)};
  const cuuint32_t box[2] = {box_cols, 32};
  const cuuint32_t elem[2] = {1, 1};
  const CUresult r = tensor_map_encoder()(
      &m, type, 2, const_cast<void*>(base), dims, strides, box, elem, CU_TENSOR_MAP_INTERLEAVE_NONE,
      swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    throw Error(
        std::string("[quanta::matmul] qmm_affine_ring: cuTensorMapEncodeTiled failed for ") + what +
        " (CUresult " + std::to_string(static_cast<int>(r)) + ")");
  return m;
}

template <class T>
void run_ring(TcArgs a, const RingMaps& maps, cudaStream_t stream) {
  constexpr int MT = 2;  // two column tiles: M <= 16
  auto* kernel = qmm_affine_ring_kernel<T, MT, kRingStages, kRingMinBlocks>;
  constexpr int smem = kRingSmemBytes<kRingStages>;
  static const int occupancy = [&] {
    QUANTA_CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    int b = 0;
    QUANTA_CUDA_CHECK(
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&b, kernel, kRingThreads, smem));
    return b > 0 ? b : 1;
  }();
  const int ctas = choose_stream_k_grid(a, occupancy);
  stream_k_scratch(a, stream);
  const int64_t total = 2 * static_cast<int64_t>(a.tile_stages) * MT * 128;
  auto* frag = static_cast<uint4*>(stream_scratch(stream, Scratch::rf_x_frags, total * 16));
  QUANTA_CUDA_CHECK(launch_prepass(rf_x_frags_kernel<T, 4, true>,
                                   dim3(static_cast<unsigned>((total + 255) / 256)), dim3(256),
                                   stream, static_cast<const T*>(a.x), frag, a.m, a.k, MT, total));
  a.xfrag = frag;
  QUANTA_CUDA_CHECK(launch_dependent(kernel, dim3(static_cast<unsigned>(ctas)), dim3(kRingThreads),
                                     smem, stream, a, maps));
}

}  // namespace

std::string qmm_affine_ring_supports(const Problem& p) {
  if (p.format.scheme != Scheme::affine) return "needs the affine format";
  if (p.format.bits != 4) return "serves 4-bit codes";
  if (p.format.group_size < 32 || p.format.group_size > 128) return "needs groups of 32, 64 or 128";
  if (p.layout != Layout::nk) return "needs the [N, K] layout (qvm_affine serves [K, N])";
  if (p.dtype == DType::f32) return "needs f16 or bf16 activations (tensor cores)";
#ifndef QUANTA_CUDA_SM90A
  return "this build has no sm_90a code (add 90a to CMAKE_CUDA_ARCHITECTURES)";
#endif
  if (p.compute_capability != 0 && p.compute_capability < 90)
    return "needs sm_90 or newer (bulk tensor copies)";
  if (p.m > 16) return "serves M <= 16 (two column tiles), M = " + std::to_string(p.m);
  if (p.k % 32 != 0) return "needs K % 32 == 0 (16-byte code rows), K = " + std::to_string(p.k);
  if ((p.k / p.format.group_size) % 8 != 0)
    return "needs K / group % 8 == 0 (16-byte scale rows for the tensor copy), K / group = " +
           std::to_string(p.k / p.format.group_size);
  return {};
}

void qmm_affine_ring(ConstMatrixView x, const QuantizedMatrix& w, const int32_t*, MatrixView y,
                     const Context& ctx) {
  constexpr std::string_view kName = "qmm_affine_ring", kOp = "matmul";
  if (!stream_k_operands_ok(x, w, y, ctx, kName) ||
      !alignment_ok(w.scales, 16, ctx, kName, kOp, "w.scales") ||
      !alignment_ok(w.biases, 16, ctx, kName, kOp, "w.biases"))
    return matmul_generic(x, w, nullptr, y, ctx);
  if (w.format.bits != 4 || x.rows > 16)
    throw Error("[quanta::matmul] qmm_affine_ring: serves 4-bit codes at M <= 16 (w bits " +
                std::to_string(w.format.bits) + ", M = " + std::to_string(x.rows) + ")");
  TcArgs a = stream_k_args(x, w, y);
  const int64_t groups = w.k / w.format.group_size;
  RingMaps maps;
  maps.codes = tensor_map_2d(w.codes, CU_TENSOR_MAP_DATA_TYPE_UINT8, w.k / 2, w.n, w.k / 2, 128,
                             CU_TENSOR_MAP_SWIZZLE_128B, "w.codes");
  maps.scales = tensor_map_2d(w.scales, CU_TENSOR_MAP_DATA_TYPE_UINT16, groups, w.n, groups * 2, 8,
                              CU_TENSOR_MAP_SWIZZLE_NONE, "w.scales");
  maps.biases = tensor_map_2d(w.biases, CU_TENSOR_MAP_DATA_TYPE_UINT16, groups, w.n, groups * 2, 8,
                              CU_TENSOR_MAP_SWIZZLE_NONE, "w.biases");
  const cudaStream_t stream = stream_of(ctx);
  // One instance per dtype: two column tiles, 4 stages, 2 CTAs per SM (3 stages at 3 CTAs an SM,
  // and x two k16 steps ahead, measured slower at M = 16: docs/PERF.md).
  dispatch_half_dtype(x.dtype, [&]<class T>() { run_ring<T>(a, maps, stream); });
}

}  // namespace quanta::cuda
