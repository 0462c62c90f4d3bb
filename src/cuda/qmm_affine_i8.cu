// qmm_affine_i8: the launcher, its `supports` rule and the dispatch over dtype x bits x group x
// column tiles. Kernels and rationale: qmm_affine_i8.cuh. Instances: qmm_affine_i8_b*.cu.
#include <algorithm>
#include <cstdlib>
#include <iterator>
#include <string>

#include "cuda/checks.hpp"
#include "cuda/families.hpp"
#include "cuda/qmm_affine_i8.cuh"
#include "cuda/runtime.cuh"
#include "cuda/workspace.hpp"

namespace quanta::cuda {

// clang-format off
extern template cudaError_t launch_qmm_affine_i8<__half, 2, 64, 1>(const XcArgs&, int, bool, cudaStream_t);
extern template cudaError_t launch_qmm_affine_i8<__half, 2, 64, 2>(const XcArgs&, int, bool, cudaStream_t);
extern template cudaError_t launch_qmm_affine_i8<__half, 2, 128, 1>(const XcArgs&, int, bool, cudaStream_t);
extern template cudaError_t launch_qmm_affine_i8<__half, 2, 128, 2>(const XcArgs&, int, bool, cudaStream_t);
extern template cudaError_t launch_qmm_affine_i8<__nv_bfloat16, 2, 64, 1>(const XcArgs&, int, bool, cudaStream_t);
extern template cudaError_t launch_qmm_affine_i8<__nv_bfloat16, 2, 64, 2>(const XcArgs&, int, bool, cudaStream_t);
extern template cudaError_t launch_qmm_affine_i8<__nv_bfloat16, 2, 128, 1>(const XcArgs&, int, bool, cudaStream_t);
extern template cudaError_t launch_qmm_affine_i8<__nv_bfloat16, 2, 128, 2>(const XcArgs&, int, bool, cudaStream_t);
extern template cudaError_t launch_qmm_affine_i8<__half, 3, 128, 1>(const XcArgs&, int, bool, cudaStream_t);
extern template cudaError_t launch_qmm_affine_i8<__half, 3, 128, 2>(const XcArgs&, int, bool, cudaStream_t);
extern template cudaError_t launch_qmm_affine_i8<__nv_bfloat16, 3, 128, 1>(const XcArgs&, int, bool, cudaStream_t);
extern template cudaError_t launch_qmm_affine_i8<__nv_bfloat16, 3, 128, 2>(const XcArgs&, int, bool, cudaStream_t);
extern template cudaError_t launch_qmm_affine_i8<__half, 4, 32, 1>(const XcArgs&, int, bool, cudaStream_t);
extern template cudaError_t launch_qmm_affine_i8<__half, 4, 32, 2>(const XcArgs&, int, bool, cudaStream_t);
extern template cudaError_t launch_qmm_affine_i8<__half, 4, 64, 1>(const XcArgs&, int, bool, cudaStream_t);
extern template cudaError_t launch_qmm_affine_i8<__half, 4, 64, 2>(const XcArgs&, int, bool, cudaStream_t);
extern template cudaError_t launch_qmm_affine_i8<__half, 4, 128, 1>(const XcArgs&, int, bool, cudaStream_t);
extern template cudaError_t launch_qmm_affine_i8<__half, 4, 128, 2>(const XcArgs&, int, bool, cudaStream_t);
extern template cudaError_t launch_qmm_affine_i8<__nv_bfloat16, 4, 32, 1>(const XcArgs&, int, bool, cudaStream_t);
extern template cudaError_t launch_qmm_affine_i8<__nv_bfloat16, 4, 32, 2>(const XcArgs&, int, bool, cudaStream_t);
extern template cudaError_t launch_qmm_affine_i8<__nv_bfloat16, 4, 64, 1>(const XcArgs&, int, bool, cudaStream_t);
extern template cudaError_t launch_qmm_affine_i8<__nv_bfloat16, 4, 64, 2>(const XcArgs&, int, bool, cudaStream_t);
extern template cudaError_t launch_qmm_affine_i8<__nv_bfloat16, 4, 128, 1>(const XcArgs&, int, bool, cudaStream_t);
extern template cudaError_t launch_qmm_affine_i8<__nv_bfloat16, 4, 128, 2>(const XcArgs&, int, bool, cudaStream_t);
extern template cudaError_t launch_qmm_affine_i8<__half, 5, 128, 1>(const XcArgs&, int, bool, cudaStream_t);
extern template cudaError_t launch_qmm_affine_i8<__half, 5, 128, 2>(const XcArgs&, int, bool, cudaStream_t);
extern template cudaError_t launch_qmm_affine_i8<__half, 5, 128, 4>(const XcArgs&, int, bool, cudaStream_t);
extern template cudaError_t launch_qmm_affine_i8<__nv_bfloat16, 5, 128, 1>(const XcArgs&, int, bool, cudaStream_t);
extern template cudaError_t launch_qmm_affine_i8<__nv_bfloat16, 5, 128, 2>(const XcArgs&, int, bool, cudaStream_t);
extern template cudaError_t launch_qmm_affine_i8<__nv_bfloat16, 5, 128, 4>(const XcArgs&, int, bool, cudaStream_t);
extern template cudaError_t launch_qmm_affine_i8<__half, 6, 64, 1>(const XcArgs&, int, bool, cudaStream_t);
extern template cudaError_t launch_qmm_affine_i8<__half, 6, 64, 2>(const XcArgs&, int, bool, cudaStream_t);
extern template cudaError_t launch_qmm_affine_i8<__half, 6, 128, 1>(const XcArgs&, int, bool, cudaStream_t);
extern template cudaError_t launch_qmm_affine_i8<__half, 6, 128, 2>(const XcArgs&, int, bool, cudaStream_t);
extern template cudaError_t launch_qmm_affine_i8<__nv_bfloat16, 6, 64, 1>(const XcArgs&, int, bool, cudaStream_t);
extern template cudaError_t launch_qmm_affine_i8<__nv_bfloat16, 6, 64, 2>(const XcArgs&, int, bool, cudaStream_t);
extern template cudaError_t launch_qmm_affine_i8<__nv_bfloat16, 6, 128, 1>(const XcArgs&, int, bool, cudaStream_t);
extern template cudaError_t launch_qmm_affine_i8<__nv_bfloat16, 6, 128, 2>(const XcArgs&, int, bool, cudaStream_t);
extern template cudaError_t launch_qmm_affine_i8<__half, 8, 32, 1>(const XcArgs&, int, bool, cudaStream_t);
extern template cudaError_t launch_qmm_affine_i8<__half, 8, 32, 2>(const XcArgs&, int, bool, cudaStream_t);
extern template cudaError_t launch_qmm_affine_i8<__half, 8, 64, 1>(const XcArgs&, int, bool, cudaStream_t);
extern template cudaError_t launch_qmm_affine_i8<__half, 8, 64, 2>(const XcArgs&, int, bool, cudaStream_t);
extern template cudaError_t launch_qmm_affine_i8<__half, 8, 64, 4>(const XcArgs&, int, bool, cudaStream_t);
extern template cudaError_t launch_qmm_affine_i8<__half, 8, 128, 1>(const XcArgs&, int, bool, cudaStream_t);
extern template cudaError_t launch_qmm_affine_i8<__half, 8, 128, 2>(const XcArgs&, int, bool, cudaStream_t);
extern template cudaError_t launch_qmm_affine_i8<__nv_bfloat16, 8, 32, 1>(const XcArgs&, int, bool, cudaStream_t);
extern template cudaError_t launch_qmm_affine_i8<__nv_bfloat16, 8, 32, 2>(const XcArgs&, int, bool, cudaStream_t);
extern template cudaError_t launch_qmm_affine_i8<__nv_bfloat16, 8, 64, 1>(const XcArgs&, int, bool, cudaStream_t);
extern template cudaError_t launch_qmm_affine_i8<__nv_bfloat16, 8, 64, 2>(const XcArgs&, int, bool, cudaStream_t);
extern template cudaError_t launch_qmm_affine_i8<__nv_bfloat16, 8, 64, 4>(const XcArgs&, int, bool, cudaStream_t);
extern template cudaError_t launch_qmm_affine_i8<__nv_bfloat16, 8, 128, 1>(const XcArgs&, int, bool, cudaStream_t);
extern template cudaError_t launch_qmm_affine_i8<__nv_bfloat16, 8, 128, 2>(const XcArgs&, int, bool, cudaStream_t);
// clang-format on

std::string qmm_affine_i8_supports(const Problem& p) {
  if (p.format.scheme != Scheme::affine) return "affine only";
  if (std::ranges::find(kI8Bits, p.format.bits) == std::end(kI8Bits)) return "2-6 or 8-bit codes";
  // A lane unpacks a quarter of each group: 2/4/8 bits need group * bits >= 128 (a 32-bit word),
  // 3/5 bits groups of 128 and 6 bits 64 or 128 (whole 32 and 16-code units of byte permutes).
  if (!xc_serves(p.format.bits, p.format.group_size))
    return "needs a lane's quarter of a group to be whole unpack units (group * bits >= 128 for "
           "2/4/8 bits, groups of 128 for 3/5 bits, of 64 or 128 for 6 bits)";
  // H200 f16, M = 8, 14336x5120 / 5120x14336 / 27648x5120: qmm_affine_tc 36.2 / 38.2 / 56.6 us,
  // this kernel 35.2 / 36.5 / 64.8 at its best warps: 131 us in all against 136
  // (docs/perf-cuda-i8-widths.md). Everywhere else at 3/5/6 bits it is 1.02-1.78x faster.
  if (p.format.bits == 6 && p.format.group_size == 64 && p.m == 8)
    return "6-bit groups of 64 at M = 8: qmm_affine_tc is faster on the larger shapes (H200: "
           "56.6 against 64.8 us on 27648x5120, within 5% on the others)";
  if (p.layout != Layout::nk) return "the [N, K] layout only";
  if (p.dtype == DType::f32) return "f16/bf16 activations only (x as two int8 planes)";
  if (p.batch != 1) return "one matrix (no expert stack)";
  if (p.m > kXcMaxM)
    return "M <= " + std::to_string(kXcMaxM) + " (four column tiles of 4 rows of x)";
  // H200, M = 9..16 on 14336x5120 / 5120x14336 / 27648x5120: 5-bit g128 1.02-1.25x and 8-bit g64
  // 1.00-1.42x faster than qmm_affine_tc; every other width slower on at least two shapes (int4
  // g64 0.57-0.74x: 48-58 / 63-80 / 89-110 us against 32-40 / 36-47 / 55-70; 4-bit g128 faster
  // only on 5120x14336), docs/perf-cuda-i8-widths.md.
  if (p.m > 8 && !xc_four_tiles(p.format.bits, p.format.group_size))
    return "M > 8 only for 5-bit groups of 128 and 8-bit groups of 64 (qmm_affine_tc is faster "
           "for the others on the H200: int4 g64 48-110 against 32-70 us)";
  if (p.k % (4 * p.format.group_size) != 0)
    return "needs K % (4 * group_size) == 0 (steps of 4 groups, 8-byte scale loads)";
  if ((p.k * p.format.bits / 8) % 16 != 0) return "needs K * bits % 128 == 0 (16-byte code rows)";
  if (p.compute_capability != 0 && p.compute_capability < 90)
    return "needs sm_90 (programmatic dependent launch)";
  return {};
}

void qmm_affine_i8(ConstMatrixView x, const QuantizedMatrix& w, const int32_t*, MatrixView y,
                   const Context& ctx) {
  constexpr std::string_view kName = "qmm_affine_i8", kOp = "matmul";
  require_device_operands(x, w, nullptr, y, kOp);
  if (!alignment_ok(w.codes, 16, ctx, kName, kOp, "w.codes") ||
      !alignment_ok(w.scales, 8, ctx, kName, kOp, "w.scales") ||
      !alignment_ok(w.biases, 8, ctx, kName, kOp, "w.biases"))
    return matmul_generic(x, w, nullptr, y, ctx);
  const cudaStream_t stream = stream_of(ctx);
  // Column tiles of 4 rows of x: 1 (M <= 4), 2 (M <= 8) or 4 (M <= 16, xc_four_tiles).
  const int column_tiles = x.rows <= 4 ? 1 : x.rows <= 8 ? 2 : 4;
  // Groups of the geometry that runs (xc_run_group: 64 for some groups of 128): x's (d, X) and
  // the steps are per one of them.
  const int groups =
      static_cast<int>(w.k / xc_run_group(w.format.bits, w.format.group_size, column_tiles));
  const std::size_t plane_bytes = static_cast<std::size_t>(x.rows) * w.k * 2;
  auto* scratch = static_cast<uint8_t*>(
      stream_scratch(stream, Scratch::x_planes,
                     plane_bytes + static_cast<std::size_t>(x.rows) * groups * sizeof(float2)));
  XcArgs a{};
  a.codes = reinterpret_cast<const uint8_t*>(w.codes);
  a.scales = w.scales;
  a.biases = w.biases;
  a.x = x.data;
  a.y = y.data;
  a.planes = reinterpret_cast<uint32_t*>(scratch);
  a.gx = reinterpret_cast<float2*>(scratch + plane_bytes);
  a.m = static_cast<int32_t>(x.rows);
  a.n = static_cast<int32_t>(w.n);
  a.k = static_cast<int32_t>(w.k);
  a.row_bytes = w.k * w.format.bits / 8;
  // Warps per block: xc_wave_warps at the instance's occupancy (the fewest waves times steps per
  // warp), which replaced the most warps that fit one wave and, where none did, a doubling rule
  // (H200, 192 width x group x dtype x M x shape cells: 1.03-1.41x on 52, 0.96-0.97x on 2 that
  // route here; docs/PERF.md). Where no count >= 2 is possible (fewer than 2 steps) one warp.
  // QUANTA_QMM_I8_WARPS=w forces w.
  const bool one_wave = !std::getenv("QUANTA_QMM_I8_WARPS");
  const int warps =
      i8_warps_for((a.n + kXcRows - 1) / kXcRows, groups / 4, 1, "QUANTA_QMM_I8_WARPS");
  cudaError_t status = cudaSuccess;
  bool served = false;
  dispatch_half_dtype(x.dtype, [&]<class T>() {
    served = dispatch_i8_width(w.format.bits, w.format.group_size, [&]<int BITS, int G>() {
      if constexpr (xc_serves(BITS, G)) {  // a lane's quarter of a group is whole unpack units
        if (a.m <= 4) {
          status = launch_qmm_affine_i8<T, BITS, G, 1>(a, warps, one_wave, stream);
        } else if (a.m <= 8) {
          status = launch_qmm_affine_i8<T, BITS, G, 2>(a, warps, one_wave, stream);
        } else if constexpr (xc_four_tiles(BITS, G)) {
          status = launch_qmm_affine_i8<T, BITS, G, 4>(a, warps, one_wave, stream);
        } else {
          throw Error("[quanta::matmul] qmm_affine_i8: M > 8 needs 5-bit g128 or 8-bit g64 codes");
        }
      } else
        throw i8_width_error(kName, BITS, G);
    });
  });
  if (!served) throw i8_width_error(kName, w.format.bits, w.format.group_size);
  QUANTA_CUDA_CHECK(status);
  QUANTA_CUDA_CHECK_LAUNCH();
}

}  // namespace quanta::cuda
