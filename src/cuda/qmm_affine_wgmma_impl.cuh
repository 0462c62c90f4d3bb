// qmm_affine_wgmma's CUTLASS instances (see qmm_affine_wgmma.cuh for the design). Included only
// by the instance files (one per dtype and width, so nvcc can run them in parallel): each
// instance costs about 20 s of nvcc.
#pragma once

#include <cutlass/cutlass.h>
#include <cutlass/gemm/device/gemm_universal_adapter.h>
#include <cstdint>
#include <type_traits>

#include <cute/tensor.hpp>
#include <cutlass/epilogue/collective/collective_builder.hpp>
#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/gemm/kernel/gemm_universal.hpp>
#include <cutlass/util/mixed_dtype_utils.hpp>  // the reordered code layout
#include <cutlass/util/packed_stride.hpp>

#include "cuda/qmm_affine_wgmma.cuh"

namespace quanta::cuda {
namespace wgmma_detail {

template <class T>
struct CutlassType;
template <>
struct CutlassType<__half> {
  using type = cutlass::half_t;
};
template <>
struct CutlassType<__nv_bfloat16> {
  using type = cutlass::bfloat16_t;
};

template <int BITS>
using CodeType = std::conditional_t<BITS == 2, cutlass::uint2b_t,
                                    std::conditional_t<BITS == 4, cutlass::uint4b_t, uint8_t>>;

// CLUSTER: CTAs per cluster along W's rows; they share each x tile (TMA multicast). REORDER: W's
// codes in CUTLASS's reordered layout (each thread's values of a wgmma operand contiguous, so the
// shared-memory loads of the codes vectorize and their conversion needs no register shuffles;
// H200 int4 g64 M = 1024..4096: 1.04-1.11x, docs/PERF.md), made once by reorder_codes.
template <class T, int BITS, int TOKENS, int CLUSTER = 1, bool REORDER = false>
struct Gemm {
  using Act = typename CutlassType<T>::type;
  using Codes = CodeType<BITS>;
  using StrideA0 = cutlass::detail::TagToStrideA_t<cutlass::layout::RowMajor>;
  // 4-bit codes also permuted within each thread's 8 (order 0 2 4 6 1 3 5 7), which CUTLASS
  // converts with 1 shift + 4 LOP3 + 4 half2 ops per 8 codes instead of 4 PRMT + 4 LOP3 + 4
  // (H200 f16 M = 64..128: 1.09-1.18x; bf16 1.00-1.05x; docs/PERF.md).
  using ValueOrder = std::conditional_t<
      BITS == 4, cute::Layout<cute::Shape<cute::_2, cute::_4>, cute::Stride<cute::_4, cute::_1>>,
      cute::Layout<cute::_1>>;
  using AtomQ =
      decltype(cutlass::compute_memory_reordering_atom<Act, cute::Layout<cute::_1>, ValueOrder>());
  using LayoutAR =
      decltype(cute::tile_to_shape(AtomQ{}, cute::Layout<cute::Shape<int, int, int>, StrideA0>{}));
  using LayoutATag = std::conditional_t<REORDER, LayoutAR, cutlass::layout::RowMajor>;
  using Tile = cute::Shape<cute::_128, cute::Int<TOKENS>, cute::_64>;
  using Cluster = cute::Shape<cute::Int<CLUSTER>, cute::_1, cute::_1>;
  // y^T [N, M] column-major is y [M, N] row-major. No C operand (beta = 0).
  using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Tile, Cluster,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float, void,
      cutlass::layout::ColumnMajor, 8, Act, cutlass::layout::ColumnMajor, 8,
      cutlass::epilogue::TmaWarpSpecializedCooperative>::CollectiveOp;
  // A = W: unsigned codes, row-major [N, K] (K-major), 16-byte aligned runs, with scales and
  // zero points ("biases") of Act; B = x^T: column-major [K, M], i.e. x row-major.
  using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, cute::tuple<Codes, Act, Act>, LayoutATag,
      128 / BITS, Act, cutlass::layout::ColumnMajor, 8, float, Tile, Cluster,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename Epilogue::SharedStorage))>,
      cutlass::gemm::KernelTmaWarpSpecializedCooperative>::CollectiveOp;
  using Kernel = cutlass::gemm::kernel::GemmUniversal<cute::Shape<int, int, int, int>, Mainloop,
                                                      Epilogue, cutlass::gemm::StreamKScheduler>;
  using Adapter = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;

  static typename Adapter::Arguments arguments(const WgmmaArgs& a) {
    using StrideB = typename Kernel::StrideB;
    using StrideD = typename Kernel::StrideD;
    using StrideS = typename Mainloop::StrideScale;
    const auto sa0 = cutlass::make_cute_packed_stride(StrideA0{}, cute::make_shape(a.n, a.k, 1));
    const auto sa = [&] {
      if constexpr (REORDER)
        return cute::tile_to_shape(AtomQ{}, cute::make_layout(cute::make_shape(a.n, a.k, 1), sa0));
      else
        return sa0;
    }();
    const auto sb = cutlass::make_cute_packed_stride(StrideB{}, cute::make_shape(a.m, a.k, 1));
    const auto sd = cutlass::make_cute_packed_stride(StrideD{}, cute::make_shape(a.n, a.m, 1));
    const auto ss =
        cutlass::make_cute_packed_stride(StrideS{}, cute::make_shape(a.n, a.k / a.group, 1));
    typename Adapter::Arguments args{
        cutlass::gemm::GemmUniversalMode::kGemm,
        {a.n, a.m, a.k, 1},
        {static_cast<const Codes*>(a.codes), sa, static_cast<const Act*>(a.x), sb,
         static_cast<const Act*>(a.scales_t), ss, a.group, static_cast<const Act*>(a.biases_t)},
        {{1.0f, 0.0f}, nullptr, sd, static_cast<Act*>(a.y), sd}};
    using Mode = cutlass::gemm::kernel::detail::DecompositionMode;
    args.scheduler.splits = a.splits;
    args.scheduler.decomposition_mode = a.splits > 1           ? Mode::SplitK
                                        : a.decomposition == 1 ? Mode::DataParallel
                                        : a.decomposition == 2 ? Mode::StreamK
                                                               : Mode::Heuristic;
    using Raster = decltype(args.scheduler.raster_order);
    args.scheduler.max_swizzle_size = a.swizzle;
    args.scheduler.raster_order = a.raster == 1   ? Raster::AlongM
                                  : a.raster == 2 ? Raster::AlongN
                                                  : Raster::Heuristic;
    return args;
  }
};

// Runs GEMM G on `stream`: null on success, else CUTLASS's reason.
template <class G>
const char* run(const WgmmaArgs& a, void* workspace, cudaStream_t stream) {
  const auto args = G::arguments(a);
  typename G::Adapter gemm;
  cutlass::Status s = gemm.can_implement(args);
  if (s == cutlass::Status::kSuccess) s = gemm.initialize(args, workspace, stream);
  if (s == cutlass::Status::kSuccess) s = gemm.run(stream);
  return s == cutlass::Status::kSuccess ? nullptr : cutlass::cutlassGetStatusString(s);
}

}  // namespace wgmma_detail

template <class T, int BITS, int TOKENS, int CLUSTER>
std::size_t qmm_affine_wgmma_workspace(const WgmmaArgs& a) {
  using G = wgmma_detail::Gemm<T, BITS, TOKENS, CLUSTER>;
  return G::Adapter::get_workspace_size(G::arguments(a));
}

template <class T, int BITS, int TOKENS, int CLUSTER>
const char* launch_qmm_affine_wgmma(const WgmmaArgs& a, void* workspace, cudaStream_t stream) {
  return wgmma_detail::run<wgmma_detail::Gemm<T, BITS, TOKENS, CLUSTER>>(a, workspace, stream);
}

template <class T, int BITS, int TOKENS, int CLUSTER>
std::size_t qmm_affine_wgmma_workspace_packed(const WgmmaArgs& a) {
  using G = wgmma_detail::Gemm<T, BITS, TOKENS, CLUSTER, true>;
  return G::Adapter::get_workspace_size(G::arguments(a));
}

template <class T, int BITS, int TOKENS, int CLUSTER>
const char* launch_qmm_affine_wgmma_packed(const WgmmaArgs& a, void* workspace,
                                           cudaStream_t stream) {
  return wgmma_detail::run<wgmma_detail::Gemm<T, BITS, TOKENS, CLUSTER, true>>(a, workspace,
                                                                               stream);
}

// CUTLASS's reorder_tensor (cutlass/util/mixed_dtype_utils.hpp) on `stream` (that one
// synchronizes the device): a copy through cute layouts, one byte per thread and access; ~0.1-0.3
// ms for 14336 x 5120 int4 on the H200, paid once per matrix.
template <class T, int BITS>
void reorder_codes(const void* src, void* dst, int n, int k, cudaStream_t stream) {
  using namespace cute;
  using G = wgmma_detail::Gemm<T, BITS, 256, 2, true>;
  using Codes = typename G::Codes;
  const auto sa0 =
      cutlass::make_cute_packed_stride(typename G::StrideA0{}, cute::make_shape(n, k, 1));
  const auto layout_src = make_layout(make_shape(n, k, 1), sa0);
  const auto layout_dst = tile_to_shape(typename G::AtomQ{}, layout_src);
  auto S = make_tensor(make_gmem_ptr<const Codes>(static_cast<const Codes*>(src)), layout_src);
  auto D = make_tensor(make_gmem_ptr<Codes>(static_cast<Codes*>(dst)), layout_dst);
  using LayoutDst = decltype(layout_dst);
  auto has_major_mode = [](auto st) {
    return any_of(flatten(st), [](auto v) { return is_constant<1, decltype(v)>{}; });
  };
  constexpr int NV = shape_div(Int<8>{}, Int<sizeof_bits_v<Codes>>{});
  auto val_layout = conditional_return<has_major_mode(stride<0>(LayoutDst{}))>(
      make_layout(make_shape(Int<NV>{}, Int<1>{}), GenColMajor{}),
      make_layout(make_shape(Int<1>{}, Int<NV>{}), GenRowMajor{}));
  constexpr int NumThreads = 128;
  auto const thr_layout = make_layout(make_shape(Int<1>{}, Int<NumThreads>{}));
  auto tiled_copy = make_tiled_copy(Copy_Atom<DefaultCopy, Codes>{}, thr_layout, val_layout);
  using TileShape = Shape<_16>;
  auto tiled_D = group_modes<3, rank_v<LayoutDst>>(tiled_divide(D, TileShape{}));
  dim3 blocks{unsigned(size<1>(tiled_D)), 1u, unsigned(size<3>(tiled_D))};
  cutlass::reorder_tensor_kernel<TileShape><<<blocks, NumThreads, 0, stream>>>(S, D, tiled_copy);
}

}  // namespace quanta::cuda
