// qmm_affine_tc host side: the supports rule, the stream-K helpers it shares with qmm_affine_rf
// (stream_k.hpp) and the dispatch from runtime (dtype, bits, M) to the instantiations in
// qmm_affine_tc_b*.cu.
#include <algorithm>
#include <bit>
#include <string>

#include "cuda/checks.hpp"
#include "cuda/families.hpp"
#include "cuda/qmm_affine_tc.cuh"
#include "cuda/stream_k.hpp"
#include "cuda/workspace.hpp"

namespace quanta::cuda {

QUANTA_TC_EXTERN_ALL

bool stream_k_operands_ok(ConstMatrixView x, const QuantizedMatrix& w, MatrixView y,
                          const Context& ctx, std::string_view kernel) {
  constexpr std::string_view kOp = "matmul";
  require_device_operands(x, w, nullptr, y, kOp);
  return alignment_ok(x.data, 16, ctx, kernel, kOp, "x") &&
         alignment_ok(w.codes, 16, ctx, kernel, kOp, "w.codes") &&
         alignment_ok(w.scales, 4, ctx, kernel, kOp, "w.scales") &&
         alignment_ok(w.biases, 4, ctx, kernel, kOp, "w.biases");
}

TcArgs stream_k_args(ConstMatrixView x, const QuantizedMatrix& w, MatrixView y) {
  TcArgs a{};
  set_affine_operands(a, x, w, y);
  return a;
}

int choose_stream_k_grid(TcArgs& a, int occupancy) {
  static const int sms = multiprocessor_count();
  const int row_tiles = (a.n + kTcRows - 1) / kTcRows;
  a.tile_stages = (a.k + kTcBK - 1) / kTcBK;
  a.units = static_cast<int64_t>(row_tiles) * a.tile_stages;
  const int ctas =
      static_cast<int>(std::min<int64_t>(a.units, static_cast<int64_t>(sms) * occupancy));
  const int64_t per = std::max<int64_t>(1, a.units / ctas);
  a.max_contrib = static_cast<int32_t>((a.tile_stages + per - 1) / per + 1);
  return ctas;
}

void stream_k_scratch(TcArgs& a, cudaStream_t stream) {
  const int row_tiles = (a.n + kTcRows - 1) / kTcRows;
  const std::size_t partial_bytes =
      sizeof(float) * static_cast<std::size_t>(row_tiles) * a.max_contrib * a.m * kTcRows;
  a.partials = static_cast<float*>(stream_scratch(stream, Scratch::split_partials, partial_bytes));
  a.counters = static_cast<uint32_t*>(
      stream_scratch(stream, Scratch::split_counters, sizeof(uint32_t) * row_tiles));
}

std::string qmm_affine_tc_supports(const Problem& p) {
  if (p.format.scheme != Scheme::affine) return "needs the affine format";
  if (p.layout != Layout::nk) return "needs the [N, K] layout (qvm_affine serves [K, N])";
  if (p.dtype == DType::f32) return "needs f16 or bf16 activations (tensor cores)";
  if (p.compute_capability < 80) return "needs sm_80 or newer (bf16 mma.sync)";
  if ((p.k * p.format.bits) % 128 != 0)
    return "needs K * bits % 128 == 0 (16-byte code rows), K = " + std::to_string(p.k);
  if ((p.k / p.format.group_size) % 2 != 0)
    return "needs an even number of groups per row (4-byte scale copies), K / group = " +
           std::to_string(p.k / p.format.group_size);
  return {};
}

std::string qmv_affine_tc_supports(const Problem& p) {
  if (std::string why = qmm_affine_tc_supports(p); !why.empty()) return why;
  // The split feeds codes to the mma as offset + q in T: bf16 has 7 mantissa bits, too few for
  // 8-bit codes (qmm_affine_tc dequantizes those through f32 instead).
  if (p.dtype == DType::bf16 && p.format.bits == 8) return "bf16 cannot hold 8-bit codes exactly";
  return {};
}

namespace {

template <bool kSplit>
void run_tc(std::string_view kName, ConstMatrixView x, const QuantizedMatrix& w, MatrixView y,
            const Context& ctx) {
  if (!stream_k_operands_ok(x, w, y, ctx, kName)) return matmul_generic(x, w, nullptr, y, ctx);
  TcArgs a = stream_k_args(x, w, y);
  const cudaStream_t stream = stream_of(ctx);

  dispatch_half_dtype(x.dtype, [&]<class T>() {
    dispatch_value<kAffineBitsList>(w.format.bits, [&]<int BITS>() {
      auto run = [&]<int MT, bool SPLIT>() {
        const int x_rows = std::min(a.m, 8 * MT);
        a.stage_bytes = TcGeom<BITS, MT>::stage_bytes(x_rows);
        const int ctas =
            choose_stream_k_grid(a, occupancy_qmm_affine_tc<T, BITS, MT, SPLIT>(x_rows));
        stream_k_scratch(a, stream);
        launch_qmm_affine_tc<T, BITS, MT, SPLIT>(a, dim3(static_cast<unsigned>(ctas)), stream);
      };
      if constexpr (kSplit)
        run.template operator()<1, true>();
      else if (a.m <= 8)
        run.template operator()<1, false>();
      else if (a.m <= 16)
        run.template operator()<2, false>();
      else
        run.template operator()<4, false>();
    });
  });
}

}  // namespace

void qmm_affine_tc(ConstMatrixView x, const QuantizedMatrix& w, const int32_t*, MatrixView y,
                   const Context& ctx) {
  run_tc<false>("qmm_affine_tc", x, w, y, ctx);
}

void qmv_affine_tc(ConstMatrixView x, const QuantizedMatrix& w, const int32_t*, MatrixView y,
                   const Context& ctx) {
  run_tc<true>("qmv_affine_tc", x, w, y, ctx);
}

}  // namespace quanta::cuda
