// qmm_affine_rf host side: the supports rule, the stream-K grid and the dispatch from runtime
// (dtype, width, M) to the instantiations in qmm_affine_rf_{f16,bf16}.cu (4 bits) and
// qmm_affine_rf_b{2,3,5,6,8}.cu. Kernel: qmm_affine_rf.cuh.
#include <algorithm>
#include <bit>
#include <string>

#include "cuda/checks.hpp"
#include "cuda/families.hpp"
#include "cuda/qmm_affine_rf.cuh"
#include "cuda/stream_k.hpp"
#include "cuda/workspace.hpp"
#include "quanta/error.hpp"

namespace quanta::cuda {

QUANTA_RF_EXTERN_ALL

// Where it runs besides 4-bit: the (width, group, dtype, M) where it measured faster than the
// kernel the selector ran there before it (H200, three shapes, docs/PERF.md "qmm_affine_rf at
// 2, 3, 6 and 8 bits"). Empty: take it.
std::string rf_slower_here(const Problem& p) {
  const int b = p.format.bits, g = p.format.group_size;
  const int64_t m = p.m;
  switch (b) {
    case 4:
      // On the small matrices qmm_affine_i8 wins (M = 5..8, 4096 x 4096 and 5120 x 5120: H100 g64
      // 1.29-1.55x, H200 f16 g128 1.2-1.5x, g32 1.15-1.22x; on 14336 x 5120 and above rf is
      // 0.94-1.5x faster and keeps them). Only where qmm_affine_i8 takes the problem, so rf stays
      // the fallback before sm_90.
      if (m <= 8 && p.n * p.k <= (int64_t{1} << 25) && qmm_affine_i8_supports(p).empty())
        return "4-bit at M <= 8 on N·K <= 2^25: qmm_affine_i8 is faster (4096 x 4096 and 5120 x "
               "5120, M = 5..8: H100 g64 1.29-1.55x, H200 g128 1.2-1.5x, g32 1.15-1.22x)";
      return {};
    case 2:  // 1.04-1.47x qmm_affine_i8 (g64, g128), 1.42-1.81x qmm_affine_tc (g32) at M = 5..8
      if (m > 8)
        return "2-bit M > 8: qmm_affine_tc is faster (H200 M = 9 0.85-1.04x, M = 16 0.76-0.88x; "
               "the (c, c + 8) code pairs take two 8-byte x loads per four pairs)";
      return {};
    case 3:  // 1.2-1.65x qmm_affine_tc at M = 5..6, 0.97-1.2x at M = 7 (g64) and 8 (g32)
      if (g == 128)
        return "3-bit groups of 128: qmm_affine_i8 serves M <= 8 (not measured against)";
      if (m > 8 || (g == 64 && m == 8))
        return "3-bit M > 8 (g64: M >= 8): qmm_affine_tc is faster (H200 g64 M = 8 0.95-1.12x, "
               "M = 9 0.81-0.83x)";
      return {};
    case 6:  // g32 1.02-1.86x qmm_affine_tc at M = 5..32; g64 1.09-1.21x at M = 8 and 24..32
      if (g == 128)
        return "6-bit groups of 128: within 0.92-1.15x of qmm_affine_tc at M = 16..32 (H200)";
      if (g == 64 && (m < 8 || (m > 8 && m < 24)))
        return "6-bit groups of 64 at M = 5..7 and 9..23: qmm_affine_i8 (M <= 7, 1.00x) and "
               "qmm_affine_tc (M = 9..16 0.97-1.04x) are as fast (H200)";
      return {};
    case 8:  // 1.13-2.06x qmm_affine_i8 / qmm_affine_tc at M = 5..20
      if (m >= 24 && g != 32)
        return "8-bit M >= 24 (groups of 64k): qmm_affine_wgmma is faster (H200 g64 M = 24 "
               "1.01-1.10x, M = 32 0.93-1.04x)";
      if (p.dtype == DType::bf16 && g == 64 && m <= 8)
        return "8-bit bf16 groups of 64 at M <= 8: qmm_affine_i8 is faster (H200 0.92-1.02x; "
               "bf16 codes are dequantized through f32 here)";
      return {};
    default:
      return "5-bit: within 0.99-1.08x of qmm_affine_tc at M = 5..9 and slower above (H200); no "
             "instances";
  }
}

std::string qmm_affine_rf_supports(const Problem& p) {
  if (p.format.scheme != Scheme::affine) return "needs the affine format";
  if (p.format.bits < 2 || p.format.bits > 8 || p.format.bits == 7)
    return "serves 2, 3, 4, 6 and 8-bit codes";
  if (p.layout != Layout::nk) return "needs the [N, K] layout (qvm_affine serves [K, N])";
  if (p.dtype == DType::f32) return "needs f16 or bf16 activations (tensor cores)";
  if (p.compute_capability < 80) return "needs sm_80 or newer (bf16 mma.sync)";
  if (p.k % 32 != 0) return "needs K % 32 == 0 (32-code chunks), K = " + std::to_string(p.k);
  if ((p.k / p.format.group_size) % 2 != 0)
    return "needs an even number of groups per row (4-byte scale copies), K / group = " +
           std::to_string(p.k / p.format.group_size);
  return rf_slower_here(p);
}

void qmm_affine_rf(ConstMatrixView x, const QuantizedMatrix& w, const int32_t*, MatrixView y,
                   const Context& ctx) {
  if (!stream_k_operands_ok(x, w, y, ctx, "qmm_affine_rf"))
    return matmul_generic(x, w, nullptr, y, ctx);
  TcArgs a = stream_k_args(x, w, y);
  const cudaStream_t stream = stream_of(ctx);

  dispatch_half_dtype(x.dtype, [&]<class T>() {
    auto run_width = [&]<int BITS>() {
      auto run = [&]<int MT>() {
        const int ctas = choose_stream_k_grid(a, occupancy_qmm_affine_rf<T, BITS, MT>());
        stream_k_scratch(a, stream);
        launch_qmm_affine_rf<T, BITS, MT>(a, dim3(static_cast<unsigned>(ctas)), stream);
      };
      if (a.m <= 8) return run.template operator()<1>();
      if constexpr (kRfTiles < BITS >> 1) {
        if (a.m <= 8 * 2) return run.template operator()<2>();
        if (a.m <= 8 * kRfMaxMT) return run.template operator()<kRfMaxMT>();
      }
      throw Error("[quanta::matmul] qmm_affine_rf: M = " + std::to_string(a.m) + " at " +
                  std::to_string(BITS) + " bits");
    };
    switch (w.format.bits) {
      case 2:
        return run_width.template operator()<2>();
      case 3:
        return run_width.template operator()<3>();
      case 4:
        return run_width.template operator()<4>();
      case 6:
        return run_width.template operator()<6>();
      case 8:
        return run_width.template operator()<8>();
      default:
        throw Error("[quanta::matmul] qmm_affine_rf: " + std::to_string(w.format.bits) +
                    "-bit codes");
    }
  });
}

}  // namespace quanta::cuda
