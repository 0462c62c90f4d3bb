// qmm_affine_wgmma: the launcher, its `supports` rule and the choice of token tile. Design:
// qmm_affine_wgmma.cuh; CUTLASS instances: qmm_affine_wgmma_*.cu.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>

#include "cuda/checks.hpp"
#include "cuda/common.cuh"
#include "cuda/device_pack.hpp"
#include "cuda/families.hpp"
#include "cuda/qmm_affine_wgmma.cuh"
#include "cuda/runtime.cuh"
#include "cuda/transpose.cuh"
#include "cuda/workspace.hpp"

namespace quanta::cuda {

QUANTA_WGMMA_INSTANCES(extern, __half, 2)
QUANTA_WGMMA_INSTANCES(extern, __half, 4)
QUANTA_WGMMA_INSTANCES(extern, __half, 8)
QUANTA_WGMMA_INSTANCES(extern, __nv_bfloat16, 2)
QUANTA_WGMMA_INSTANCES(extern, __nv_bfloat16, 4)
QUANTA_WGMMA_INSTANCES(extern, __nv_bfloat16, 8)

namespace {

int env_int(const char* name, int fallback) {
  const char* e = std::getenv(name);
  return e && *e ? std::atoi(e) : fallback;
}

// Token-tile width for M rows of x. Measured on the H200 (int4 g64, three shapes, docs/PERF.md):
// 64-wide tiles are best up to M = 64, 128-wide up to 128, 256-wide beyond (0.9x cuBLAS from
// M = 1024), except M in (256, 384], where three 128-wide tiles beat two 256-wide ones padded
// to 512 on two shapes of three (120 / 216 us against 162 / 242). There two 192-wide tiles beat
// three 128-wide from M = 272 where W has 48+ row tiles (device packs: 4-bit 1.03-1.41x on five
// shapes, N = 6144..27648, 2- and 8-bit 0.97-1.42x; W's own codes 1.02-1.43x on three) and lost
// with 40 (packed 5120 x 14336: 0.82-0.93x, 80 tiles on 132 SMs) and at M = 257 (0.82-1.18x).
// QUANTA_QMM_WGMMA_TOKENS overrides it.
int token_tile(int64_t m, int64_t n) {
  const int t = env_int("QUANTA_QMM_WGMMA_TOKENS", 0);
  if (t == 64 || t == 128 || t == 192 || t == 256) return t;
  if (m <= 64) return 64;
  if (m > 256 && m <= 384) return m >= 272 && n >= 48 * 128 ? 192 : 128;
  return m <= 128 ? 128 : 256;
}

// CTAs per cluster for 256-token tiles: 2 from M = 1024, where sharing each x tile between two
// CTAs measured 2-4% faster at M = 4096 and up to 9% at 2048 (int4 g64 f16, three shapes,
// docs/PERF.md); at M = 512 it was 5-10% slower. QUANTA_QMM_WGMMA_CLUSTER (1 or 2) overrides.
int cluster_of(int64_t m) {
  if (const int c = env_int("QUANTA_QMM_WGMMA_CLUSTER", 0); c == 1 || c == 2) return c;
  return m >= 1024 ? 2 : 1;
}

// CUTLASS reads the scales and biases [K/G, N]; MLX stores them [N, K/G]. Writes w's scales
// transposed at dst and its biases right after them (N·K/G entries each), on `stream`.
void transpose_scales(const QuantizedMatrix& w, uint16_t* dst, cudaStream_t stream) {
  const int n = static_cast<int>(w.n), groups = static_cast<int>(w.k / w.format.group_size);
  transpose_pair<uint16_t>(w.scales, w.biases, dst, dst + static_cast<int64_t>(n) * groups, n,
                           groups, stream);
}

}  // namespace

std::string qmm_affine_wgmma_supports(const Problem& p) {
  if (p.format.scheme != Scheme::affine) return "affine only";
  if (p.format.bits != 2 && p.format.bits != 4 && p.format.bits != 8)
    return "2, 4 or 8-bit codes (CUTLASS's unsigned 2/4/8-bit types)";
  if (p.format.group_size % 64 != 0)
    return "needs group_size % 64 == 0 (a group spans whole 64-wide K tiles)";
  // H200, 2-bit g64 at M = 24 / 32 on 14336x5120, 5120x14336, 27648x5120: this kernel 59-105 us,
  // qmm_affine_tc 34-56 (docs/PERF.md, "qmm_affine_rf at 2, 3, 6 and 8 bits").
  if (p.format.bits == 2 && p.m <= 32)
    return "2-bit M <= 32: qmm_affine_tc is faster (H200 g64 M = 24..32: 34-56 against 59-105 us)";
  if (p.layout != Layout::nk) return "the [N, K] layout only";
  if (p.dtype == DType::f32) return "f16/bf16 activations only (wgmma on 16-bit operands)";
  if (p.batch != 1) return "one matrix (no expert stack)";
  if (p.n % 8 != 0) return "needs N % 8 == 0 (16-byte rows of y and of the scales for TMA)";
  if (p.k > std::numeric_limits<int32_t>::max() || p.m > std::numeric_limits<int32_t>::max())
    return "M and K must fit in int32";
#ifndef QUANTA_CUDA_SM90A
  return "this build has no sm_90a code (add 90a to CMAKE_CUDA_ARCHITECTURES)";
#endif
  if (p.compute_capability != 0 && p.compute_capability != 90)
    return "needs sm_90 (wgmma and TMA, compiled for sm_90a)";
  return {};
}

void qmm_affine_wgmma(ConstMatrixView x, const QuantizedMatrix& w, const int32_t*, MatrixView y,
                      const Context& ctx) {
  constexpr std::string_view kName = "qmm_affine_wgmma", kOp = "matmul";
  require_device_operands(x, w, nullptr, y, kOp);
  // TMA reads and writes 16-byte-aligned global tiles.
  if (!alignment_ok(w.codes, 16, ctx, kName, kOp, "w.codes") ||
      !alignment_ok(x.data, 16, ctx, kName, kOp, "x") ||
      !alignment_ok(y.data, 16, ctx, kName, kOp, "y"))
    return matmul_generic(x, w, nullptr, y, ctx);
  const cudaStream_t stream = stream_of(ctx);
  const int n = static_cast<int>(w.n), groups = static_cast<int>(w.k / w.format.group_size);
  // A device pack made for this matrix (quanta::prepack) and x's dtype: its scales are already
  // [K/G, N], and every token tile reads its reordered codes.
  const DevicePack* pack = w.device_pack && w.device_pack->serves(w) && w.scale_dtype == x.dtype
                               ? w.device_pack.get()
                               : nullptr;
  WgmmaArgs a{};
  a.codes = pack ? pack->codes : w.codes;
  if (pack) {
    a.scales_t = pack->scales_t;
    a.biases_t = pack->biases_t;
  } else {
    auto* scales_t = static_cast<uint16_t*>(stream_scratch(
        stream, Scratch::scales_t, static_cast<std::size_t>(2) * n * groups * sizeof(uint16_t)));
    transpose_scales(w, scales_t, stream);
    a.scales_t = scales_t;
    a.biases_t = scales_t + static_cast<int64_t>(n) * groups;
  }
  a.x = x.data;
  a.y = y.data;
  a.n = n;
  a.m = static_cast<int>(x.rows);
  a.k = static_cast<int>(w.k);
  a.group = w.format.group_size;
  a.splits = std::max(1, env_int("QUANTA_QMM_WGMMA_SPLITS", 1));
  a.decomposition = env_int("QUANTA_QMM_WGMMA_DECOMPOSITION", 0);
  a.swizzle = std::clamp(env_int("QUANTA_QMM_WGMMA_SWIZZLE", 1), 1, 8);
  a.raster = std::clamp(env_int("QUANTA_QMM_WGMMA_RASTER", 0), 0, 2);
  const char* failed = nullptr;
  bool served = false;
  const int tokens = token_tile(x.rows, w.n);
  dispatch_half_dtype(x.dtype, [&]<class T>() {
    served = dispatch_value<kWgmmaBits>(w.format.bits, [&]<int BITS>() {
      auto run = [&]<int TOKENS, int CLUSTER>() {
        if (pack) {  // a.codes are the pack's reordered ones
          const std::size_t bytes = qmm_affine_wgmma_workspace_packed<T, BITS, TOKENS, CLUSTER>(a);
          void* workspace =
              bytes ? stream_scratch(stream, Scratch::gemm_workspace, bytes) : nullptr;
          failed = launch_qmm_affine_wgmma_packed<T, BITS, TOKENS, CLUSTER>(a, workspace, stream);
          return;
        }
        const std::size_t bytes = qmm_affine_wgmma_workspace<T, BITS, TOKENS, CLUSTER>(a);
        void* workspace = bytes ? stream_scratch(stream, Scratch::gemm_workspace, bytes) : nullptr;
        failed = launch_qmm_affine_wgmma<T, BITS, TOKENS, CLUSTER>(a, workspace, stream);
      };
      dispatch_value<kWgmmaTokenTiles>(tokens, [&]<int TOKENS>() {
        if constexpr (TOKENS == 256) {
          if (cluster_of(x.rows) == 2) return run.template operator()<TOKENS, 2>();
        }
        run.template operator()<TOKENS, 1>();
      });
    });
  });
  if (!served)
    throw Error("[quanta::matmul] qmm_affine_wgmma: no instance for " +
                std::to_string(w.format.bits) + "-bit codes (2, 4 or 8)");
  if (failed)
    throw Error("[quanta::matmul] qmm_affine_wgmma: CUTLASS declined M=" + std::to_string(x.rows) +
                " N=" + std::to_string(w.n) + " K=" + std::to_string(w.k) + ": " + failed);
  QUANTA_CUDA_CHECK_LAUNCH();
}

// quanta::prepack of a device matrix: 2-, 4- and 8-bit affine weights that qmm_affine_wgmma serves,
// codes reordered for its tiles and scales and biases transposed to [K/G, N], made on ctx's stream
// and waited for; a [K, N] matrix gets its [N, K] copy instead.
std::shared_ptr<const DevicePack> make_device_pack(const QuantizedMatrix& w, const Context& ctx) {
  constexpr std::string_view op = "prepack";
  require_device_weights(w, op);
  if (w.layout == Layout::kn) return make_kn_device_pack(w, ctx);  // qmm_affine_repack.cu
  Problem p;
  p.format = w.format;
  p.layout = w.layout;
  p.dtype = w.scale_dtype;
  p.batch = w.batch;
  p.n = w.n;
  p.k = w.k;
  p.m = 1024;
  p.compute_capability = compute_capability();
  p.device = Location::device;
  // N a multiple of the 128-row CTA tile: on reordered codes a partial last row tile came out
  // wrong (H200, M = 1024: N = 136 and 264 rel-L2 0.11-0.16; N = 128, 256, 384, 1024 with K =
  // 4096, 4160, 4224 exact as the unpacked kernel).
  const int bits = w.format.bits;
  if (w.format.scheme != Scheme::affine || w.n % 128 != 0 || p.compute_capability != 90 ||
      !qmm_affine_wgmma_supports(p).empty() || !is_aligned(w.codes, 16))
    return nullptr;
  const cudaStream_t stream = stream_of(ctx);
  const int n = static_cast<int>(w.n), k = static_cast<int>(w.k);
  const int groups = static_cast<int>(w.k / w.format.group_size);
  const std::size_t code_bytes = static_cast<std::size_t>(w.n) * w.k * bits / 8;
  const std::size_t sb_entries = static_cast<std::size_t>(n) * groups;
  auto buf = std::make_shared<DeviceBuffer>(code_bytes + 2 * sb_entries * sizeof(uint16_t));
  auto pack = std::make_shared<DevicePack>();
  pack->codes_src = w.codes;
  pack->scales_src = w.scales;
  pack->biases_src = w.biases;
  pack->format = w.format;
  pack->scale_dtype = w.scale_dtype;
  pack->n = w.n;
  pack->k = w.k;
  auto* base = buf->as<std::byte>();
  auto* scales_t = reinterpret_cast<uint16_t*>(base + code_bytes);
  pack->codes = base;
  pack->scales_t = scales_t;
  pack->biases_t = scales_t + sb_entries;
  pack->storage = buf;
  dispatch_half_dtype(w.scale_dtype, [&]<class T>() {
    dispatch_value<kWgmmaBits>(
        bits, [&]<int BITS>() { reorder_codes<T, BITS>(w.codes, base, n, k, stream); });
  });
  QUANTA_CUDA_CHECK_LAUNCH();
  transpose_scales(w, scales_t, stream);
  QUANTA_CUDA_CHECK_LAUNCH();
  // Ready before it returns, whatever stream the matmuls then run on (a load-time call).
  QUANTA_CUDA_CHECK(cudaStreamSynchronize(stream));
  return pack;
}

}  // namespace quanta::cuda
