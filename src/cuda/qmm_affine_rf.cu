// qmm_affine_rf host side: the supports rule, the stream-K grid and the dispatch from runtime
// (dtype, M) to the instantiations in qmm_affine_rf_{f16,bf16}.cu. Kernel: qmm_affine_rf.cuh.
#include <algorithm>
#include <bit>
#include <cstdlib>
#include <string>

#include "cuda/checks.hpp"
#include "cuda/families.hpp"
#include "cuda/qmm_affine_rf.cuh"
#include "cuda/workspace.hpp"

namespace quanta::cuda {

QUANTA_RF_EXTERN_ALL

std::string qmm_affine_rf_supports(const Problem& p) {
  if (p.format.scheme != Scheme::affine) return "needs the affine format";
  if (p.format.bits != 4) return "serves 4-bit codes";
  if (p.layout != Layout::nk) return "needs the [N, K] layout (qvm_affine serves [K, N])";
  if (p.dtype == DType::f32) return "needs f16 or bf16 activations (tensor cores)";
  if (p.compute_capability < 80) return "needs sm_80 or newer (bf16 mma.sync)";
  if (p.k % 32 != 0) return "needs K % 32 == 0 (16-byte code chunks), K = " + std::to_string(p.k);
  if ((p.k / p.format.group_size) % 2 != 0)
    return "needs an even number of groups per row (4-byte scale copies), K / group = " +
           std::to_string(p.k / p.format.group_size);
  return {};
}

namespace {

int multiprocessors() {
  int dev = 0, sms = 0;
  QUANTA_CUDA_CHECK(cudaGetDevice(&dev));
  QUANTA_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  return sms;
}

// Persistent stream-K grid: one CTA per resident slot (never more than there are units).
int choose_grid(TcArgs& a, int row_tiles, int occupancy) {
  static const int sms = multiprocessors();
  a.tile_stages = (a.k + kRfBK - 1) / kRfBK;
  a.units = static_cast<int64_t>(row_tiles) * a.tile_stages;
  const int ctas =
      static_cast<int>(std::min<int64_t>(a.units, static_cast<int64_t>(sms) * occupancy));
  const int64_t per = std::max<int64_t>(1, a.units / ctas);
  a.max_contrib = static_cast<int32_t>((a.tile_stages + per - 1) / per + 1);
  return ctas;
}

}  // namespace

void qmm_affine_rf(ConstMatrixView x, const QuantizedMatrix& w, const int32_t*, MatrixView y,
                   const Context& ctx) {
  constexpr std::string_view kName = "qmm_affine_rf", kOp = "matmul";
  require_device_operands(x, w, nullptr, y, kOp);
  // 16-byte copies of x rows and code chunks, 4-byte copies of scale rows.
  if (!alignment_ok(x.data, 16, ctx, kName, kOp, "x") ||
      !alignment_ok(w.codes, 16, ctx, kName, kOp, "w.codes") ||
      !alignment_ok(w.scales, 4, ctx, kName, kOp, "w.scales") ||
      !alignment_ok(w.biases, 4, ctx, kName, kOp, "w.biases"))
    return matmul_generic(x, w, nullptr, y, ctx);

  TcArgs a{};
  a.codes = reinterpret_cast<const uint8_t*>(w.codes);
  a.scales = reinterpret_cast<const uint8_t*>(w.scales);
  a.biases = reinterpret_cast<const uint8_t*>(w.biases);
  a.n = static_cast<int32_t>(w.n);
  a.k = static_cast<int32_t>(w.k);
  a.log2_group = std::countr_zero(static_cast<unsigned>(w.format.group_size));
  const int row_tiles = (a.n + kRfRows - 1) / kRfRows;
  const cudaStream_t stream = stream_of(ctx);
  constexpr int64_t kPass = 8 * kRfMaxMT;  // rows of x per pass
  static const int variant_env = [] {
    const char* v = std::getenv("QUANTA_QMM_RF_VARIANT");
    const int i = v ? std::atoi(v) : 0;
    return i >= 0 && i < kRfVariants ? i : 0;
  }();
  static const int ctas_env = [] {  // CTAs per SM at most (measurement runs only)
    const char* v = std::getenv("QUANTA_QMM_RF_CTAS");
    return v ? std::atoi(v) : 0;
  }();

  dispatch_half_dtype(x.dtype, [&]<class T>() {
    auto run = [&]<int MT, int V>() {
      const int occ = occupancy_qmm_affine_rf<T, MT, V>();
      const int ctas = choose_grid(a, row_tiles, ctas_env > 0 ? std::min(occ, ctas_env) : occ);
      const std::size_t partial_bytes =
          sizeof(float) * static_cast<std::size_t>(row_tiles) * a.max_contrib * a.m * kRfRows;
      a.partials =
          static_cast<float*>(stream_scratch(stream, Scratch::split_partials, partial_bytes));
      a.counters = static_cast<uint32_t*>(
          stream_scratch(stream, Scratch::split_counters, sizeof(uint32_t) * row_tiles));
      launch_qmm_affine_rf<T, MT, V>(a, dim3(static_cast<unsigned>(ctas)), stream);
    };
    // Passes of up to 64 rows of x: each reads W again (from L2 where it fits).
    for (int64_t m0 = 0; m0 < x.rows; m0 += kPass) {
      a.m = static_cast<int32_t>(std::min(kPass, x.rows - m0));
      a.x = static_cast<const T*>(x.data) + m0 * a.k;
      a.y = static_cast<T*>(y.data) + m0 * a.n;
      auto variant = [&]<int MT>() {
        if (variant_env == 1)
          run.template operator()<MT, 1>();
        else if (variant_env == 2)
          run.template operator()<MT, 2>();
        else
          run.template operator()<MT, 0>();
      };
      if (a.m <= 8)
        variant.template operator()<1>();
      else if (a.m <= 16)
        variant.template operator()<2>();
      else if (a.m <= 32)
        variant.template operator()<4>();
      else
        variant.template operator()<8>();
    }
  });
}

}  // namespace quanta::cuda
