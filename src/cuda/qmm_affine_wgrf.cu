// qmm_affine_wgrf host side: the supports rule, the grid (row tiles x token tiles x K splits), the
// pre-pass and the instances. Kernel and design: qmm_affine_wgrf.cuh.
#include <algorithm>
#include <limits>
#include <string>

#include "cuda/checks.hpp"
#include "cuda/families.hpp"
#include "cuda/qmm_affine_wgrf.cuh"
#include "cuda/runtime.cuh"
#include "cuda/workspace.hpp"
#include "quanta/error.hpp"

namespace quanta::cuda {

namespace {

// One instance: NT tokens a tile, WG warpgroups a CTA (64 rows of W each), a ring of D k-blocks
// of codes in registers and S stages of x in shared memory.
template <class T, int BITS, int NT, int WG, int D, int S>
void run_wgrf(WgrfArgs a, cudaStream_t stream) {
  auto kernel = qmm_affine_wgrf_kernel<T, BITS, NT, WG, D, S>;
  constexpr int kSmem = kWgrfSmem<NT, S, WG>;
  static const int occupancy = [&] {
    QUANTA_CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
    int b = 0;
    QUANTA_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&b, kernel, 128 * WG, kSmem));
    return std::max(b, 1);
  }();
  static const int sms = multiprocessor_count();
  const int row_tiles = (a.n + 64 * WG - 1) / (64 * WG);
  const int token_tiles = (a.m + NT - 1) / NT;
  const int tiles = row_tiles * token_tiles;
  // K splits: as many as keep every CTA resident at once, each with >= 2D k-blocks.
  int splits = std::max(1, sms * occupancy / tiles);
  splits = std::clamp(splits, 1, std::max(1, a.kblocks / (2 * D)));
  a.split = split_tile(splits, a.m, a.n, tiles, stream);

  const int64_t total = static_cast<int64_t>(token_tiles) * a.kblocks * NT * 16;
  auto* img = static_cast<uint4*>(stream_scratch(stream, Scratch::wgrf_x_image, total * 16));
  QUANTA_CUDA_CHECK(launch_prepass(
      wgrf_x_image_kernel<T, BITS, NT>, dim3(static_cast<unsigned>((total + 255) / 256)), dim3(256),
      stream, static_cast<const T*>(a.x), img, a.m, a.k, a.kblocks, total));
  a.ximg = img;
  QUANTA_CUDA_CHECK(
      launch_dependent(kernel,
                       dim3(static_cast<unsigned>(row_tiles), static_cast<unsigned>(token_tiles),
                            static_cast<unsigned>(splits)),
                       dim3(128 * WG), kSmem, stream, a));
}

}  // namespace

// Where the selector takes it (the table entry ahead of qmm_affine_wgmma, M = 33..64): groups
// of 32 everywhere (1.9-3.0x qmm_affine_mma), groups of 64 and 128 only where W has >= 12288 rows.
// H200 f16/bf16 (docs/PERF.md): 14336 x 5120 and 27648 x 5120 1.01-1.24x qmm_affine_wgmma;
// 5120 x 14336 0.83-1.02x (40 row tiles: K split three ways, the partial sums cost more than they
// save); M = 96..128 0.94-0.98x. A matrix with a device pack goes to qmm_affine_wgmma on its
// reordered codes instead: H200 M = 48, 64 on 14336 x 5120 and 27648 x 5120, 1.09-1.22x.
std::string qmm_affine_wgrf_ahead_supports(const Problem& p) {
  if (p.format.group_size != 32 && p.n < 12288)
    return "selected for groups of 64k with N >= 12288 only (H200 5120 x 14336: 0.83-1.02x "
           "qmm_affine_wgmma)";
  if (p.device_packed)
    return "w has a device pack: qmm_affine_wgmma on its reordered codes is faster (H200 M = 48, "
           "64: 1.09-1.22x)";
  return qmm_affine_wgrf_supports(p);
}

std::string qmm_affine_wgrf_supports(const Problem& p) {
  if (p.format.scheme != Scheme::affine) return "needs the affine format";
  if (p.format.bits != 4) return "serves 4-bit codes";
  if (p.layout != Layout::nk) return "needs the [N, K] layout";
  if (p.dtype == DType::f32) return "needs f16 or bf16 activations (wgmma on 16-bit operands)";
  if (p.batch != 1) return "one matrix (no expert stack)";
  if (p.k % 32 != 0) return "needs K % 32 == 0 (32-code chunks), K = " + std::to_string(p.k);
  if (p.k > std::numeric_limits<int32_t>::max() / 2 || p.n > std::numeric_limits<int32_t>::max() ||
      p.m > std::numeric_limits<int32_t>::max())
    return "M, N and K must fit in int32";
#ifndef QUANTA_CUDA_SM90A
  return "this build has no sm_90a code (add 90a to CMAKE_CUDA_ARCHITECTURES)";
#endif
  if (p.compute_capability != 0 && p.compute_capability != 90)
    return "needs sm_90 (wgmma, compiled for sm_90a)";
  return {};
}

void qmm_affine_wgrf(ConstMatrixView x, const QuantizedMatrix& w, const int32_t*, MatrixView y,
                     const Context& ctx) {
  constexpr std::string_view kName = "qmm_affine_wgrf", kOp = "matmul";
  require_device_operands(x, w, nullptr, y, kOp);
  if (!alignment_ok(w.codes, 16, ctx, kName, kOp, "w.codes"))
    return matmul_generic(x, w, nullptr, y, ctx);
  WgrfArgs a{};
  set_affine_operands(a, x, w, y);
  a.kblocks = static_cast<int32_t>((w.k + kWgrfKB - 1) / kWgrfKB);
  a.row_bytes = w.k * w.format.bits / 8;
  const cudaStream_t stream = stream_of(ctx);
  // One instance shape: two warpgroups (128 rows of W) share x's stages, a ring of 4 k-blocks,
  // k-blocks in halves. H200 int4 g64 f16, 14336 x 5120 at M = 33..64 against the other shapes
  // measured (1 or 2 warpgroups, rings of 2 or 4, 3 or 4 stages, whole or halved k-blocks):
  // 37-41 us where the next best took 40-44 (docs/PERF.md).
  dispatch_half_dtype(x.dtype, [&]<class T>() {
    if (x.rows <= 64)
      run_wgrf<T, 4, 64, 2, 4, 3>(a, stream);
    else
      run_wgrf<T, 4, 128, 2, 4, 2>(a, stream);
  });
}

}  // namespace quanta::cuda
