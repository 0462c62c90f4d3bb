// qmm_affine_rf host side: the supports rule, the stream-K grid and the dispatch from runtime
// (dtype, M) to the instantiations in qmm_affine_rf_{f16,bf16}.cu. Kernel: qmm_affine_rf.cuh.
#include <algorithm>
#include <bit>
#include <string>

#include "cuda/checks.hpp"
#include "cuda/families.hpp"
#include "cuda/qmm_affine_rf.cuh"
#include "cuda/workspace.hpp"
#include "quanta/error.hpp"

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
  // 16-byte loads of x rows and code chunks (scales are read as single entries).
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

  dispatch_half_dtype(x.dtype, [&]<class T>() {
    auto run = [&]<int MT>() {
      const int ctas = choose_grid(a, row_tiles, occupancy_qmm_affine_rf<T, MT>());
      const std::size_t partial_bytes =
          sizeof(float) * static_cast<std::size_t>(row_tiles) * a.max_contrib * a.m * kRfRows;
      a.partials =
          static_cast<float*>(stream_scratch(stream, Scratch::split_partials, partial_bytes));
      a.counters = static_cast<uint32_t*>(
          stream_scratch(stream, Scratch::split_counters, sizeof(uint32_t) * row_tiles));
      launch_qmm_affine_rf<T, MT>(a, dim3(static_cast<unsigned>(ctas)), stream);
    };
    a.m = static_cast<int32_t>(x.rows);
    a.x = x.data;
    a.y = y.data;
    if (a.m <= 8)
      run.template operator()<1>();
    else if (a.m <= 8 * 2)
      run.template operator()<2>();
    else if (a.m <= 8 * kRfMaxMT)
      run.template operator()<kRfMaxMT>();
    else
      throw Error("[quanta::matmul] qmm_affine_rf: M = " + std::to_string(a.m) + " > 32");
  });
}

}  // namespace quanta::cuda
