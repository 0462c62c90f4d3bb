// qmm_affine_repack: affine weights in the [K, N] layout, run by the [N, K] kernels. Each call
// transposes W into a per-stream [N, K] copy (codes, scales, biases: exactly what quantizing Wᵀ
// in the [N, K] layout stores, since both layouts group along K), then runs the kernel the
// selector picks for that [N, K] problem. The copy reads and writes W once (~2 x 41 MB for
// 14336 x 5120 int4), which the [N, K] kernels repay from a few rows of x on: qvm_affine (CUDA
// cores) keeps the smallest M, dequantize + cuBLAS is no longer needed for [K, N]. Weights that
// are multiplied often are better stored [N, K] once (quantize with Layout::nk).
//
// Codes: a CTA transposes a tile of 128 K-rows x 128 columns through shared memory, one byte a
// code: its 256 threads read the tile's 32-code chunks of each K-row (four adjacent chunks, 16·BITS
// bytes a row), then write each column's 128 codes as 4·BITS consecutive words of its [N, K] row,
// consecutive threads taking consecutive words (whole sectors both ways). Scales and biases: a
// 32 x 32 tile transpose.
#include <algorithm>
#include <cstdint>

#include "cuda/affine_simt.cuh"  // code_u32
#include "cuda/checks.hpp"
#include "cuda/common.cuh"
#include "cuda/families.hpp"
#include "cuda/runtime.cuh"
#include "cuda/workspace.hpp"

namespace quanta::cuda {

namespace {

constexpr int kTileK = 128, kTileN = 128, kThreads = 256;

struct RepackArgs {
  const uint8_t* codes_kn;
  uint8_t* codes_nk;
  int64_t row_kn, row_nk;  // bytes per stored row
  int32_t n, k;
};

template <int BITS>
__global__ void __launch_bounds__(kThreads) repack_codes_kernel(const RepackArgs a) {
  // tile[r][c]: the code of K-row k0 + r, column n0 + c, one byte each; rows padded to 33 words
  // so that the chunk writes meet 32 banks.
  __shared__ __align__(4) uint8_t tile[kTileK][kTileN + 4];
  const int n0 = static_cast<int>(blockIdx.x) * kTileN, k0 = static_cast<int>(blockIdx.y) * kTileK;
  constexpr int kChunks = kTileN / 32;  // per K-row of the tile: 16·BITS contiguous bytes
  for (int i = static_cast<int>(threadIdx.x); i < kTileK * kChunks; i += kThreads) {
    const int r = i / kChunks, c = i % kChunks;
    const int k = k0 + r, n = n0 + 32 * c;
    uint32_t w[BITS] = {};
    if (k < a.k && n < a.n) {
      const auto* src =
          reinterpret_cast<const uint32_t*>(a.codes_kn + static_cast<int64_t>(k) * a.row_kn) +
          n / 32 * BITS;
#pragma unroll
      for (int b = 0; b < BITS; ++b) w[b] = src[b];
    }
#pragma unroll
    for (int j = 0; j < 32; j += 4)
      *reinterpret_cast<uint32_t*>(&tile[r][32 * c + j]) =
          code_u32<BITS>(w, j) | code_u32<BITS>(w, j + 1) << 8 | code_u32<BITS>(w, j + 2) << 16 |
          code_u32<BITS>(w, j + 3) << 24;
  }
  __syncthreads();
  // Each [N, K] row of the tile is 4·BITS words (16·BITS bytes); consecutive threads write
  // consecutive words of a row, each gathering the codes that overlap its 32 bits.
  constexpr int kWords = kTileK * BITS / 32;
  const int live_words = (min(a.k - k0, kTileK) * BITS) / 32;  // K - k0: whole 32-code chunks
  for (int i = static_cast<int>(threadIdx.x); i < kTileN * kWords; i += kThreads) {
    const int c = i / kWords, wi = i % kWords, n = n0 + c;
    if (n >= a.n || wi >= live_words) continue;
    const int bit0 = 32 * wi;
    uint32_t word = 0;
    for (int j = bit0 / BITS; j <= (bit0 + 31) / BITS; ++j) {
      const uint32_t q = tile[j][c];
      const int sh = j * BITS - bit0;
      word |= sh >= 0 ? q << sh : q >> -sh;
    }
    reinterpret_cast<uint32_t*>(a.codes_nk + static_cast<int64_t>(n) * a.row_nk +
                                static_cast<int64_t>(k0) * BITS / 8)[wi] = word;
  }
}

// dst[c][r] = src[r][c] for an R x C matrix of E (scales: R = K / G, C = N), z: scales, biases.
template <class E>
__global__ void transpose_kernel(const E* src0, const E* src1, E* dst0, E* dst1, int rows,
                                 int cols) {
  __shared__ E tile[32][33];
  const E* src = blockIdx.z ? src1 : src0;
  E* dst = blockIdx.z ? dst1 : dst0;
  const int c0 = static_cast<int>(blockIdx.x) * 32, r0 = static_cast<int>(blockIdx.y) * 32;
  const int tx = static_cast<int>(threadIdx.x), ty = static_cast<int>(threadIdx.y);
  for (int i = ty; i < 32; i += 8) {
    const int r = r0 + i, c = c0 + tx;
    if (r < rows && c < cols) tile[i][tx] = src[static_cast<int64_t>(r) * cols + c];
  }
  __syncthreads();
  for (int i = ty; i < 32; i += 8) {
    const int c = c0 + i, r = r0 + tx;
    if (r < rows && c < cols) dst[static_cast<int64_t>(c) * rows + r] = tile[tx][i];
  }
}

std::size_t round_up_256(std::size_t v) {
  return (v + 255) / 256 * 256;
}

}  // namespace

std::string qmm_affine_repack_supports(const Problem& p) {
  if (p.format.scheme != Scheme::affine) return "needs the affine format";
  if (p.layout != Layout::kn)
    return "needs the [K, N] layout (it runs the [N, K] kernels on a transposed copy)";
  if (p.batch != 1) return "one matrix (no expert stack)";
  if (p.n % 32 != 0)
    return "needs N % 32 == 0 (whole 32-code chunks per K-row), N = " + std::to_string(p.n);
  return {};
}

void qmm_affine_repack(ConstMatrixView x, const QuantizedMatrix& w, const int32_t*, MatrixView y,
                       const Context& ctx) {
  constexpr std::string_view kName = "qmm_affine_repack", kOp = "matmul";
  require_device_operands(x, w, nullptr, y, kOp);
  const std::size_t sd = dtype_size(w.scale_dtype);
  if (!alignment_ok(w.codes, 4, ctx, kName, kOp, "w.codes") ||
      !alignment_ok(w.scales, sd, ctx, kName, kOp, "w.scales") ||
      !alignment_ok(w.biases, sd, ctx, kName, kOp, "w.biases"))
    return matmul_generic(x, w, nullptr, y, ctx);
  const Footprint fp = w.footprint();
  const std::size_t codes = round_up_256(fp.code_bytes), scales = round_up_256(fp.scale_bytes);
  const cudaStream_t stream = stream_of(ctx);
  auto* buf =
      static_cast<std::byte*>(stream_scratch(stream, Scratch::kn_repack, codes + 2 * scales));
  QuantizedMatrix t = w;
  t.layout = Layout::nk;
  t.codes = buf;
  t.scales = buf + codes;
  t.biases = buf + codes + scales;
  t.keepalive = nullptr;

  RepackArgs a{};
  a.codes_kn = reinterpret_cast<const uint8_t*>(w.codes);
  a.codes_nk = reinterpret_cast<uint8_t*>(t.codes);
  a.n = static_cast<int32_t>(w.n);
  a.k = static_cast<int32_t>(w.k);
  a.row_kn = static_cast<int64_t>(fp.code_bytes) / w.k;
  a.row_nk = static_cast<int64_t>(fp.code_bytes) / w.n;
  const dim3 grid(static_cast<unsigned>((w.n + kTileN - 1) / kTileN),
                  static_cast<unsigned>((w.k + kTileK - 1) / kTileK));
  dispatch_value<kAffineBitsList>(w.format.bits, [&]<int BITS>() {
    repack_codes_kernel<BITS><<<grid, kThreads, 0, stream>>>(a);
    QUANTA_CUDA_CHECK_LAUNCH();
  });
  const int rows = static_cast<int>(w.k / w.format.group_size), cols = static_cast<int>(w.n);
  const dim3 tgrid(static_cast<unsigned>((cols + 31) / 32), static_cast<unsigned>((rows + 31) / 32),
                   2);
  auto transpose = [&]<class E>() {
    transpose_kernel<E><<<tgrid, dim3(32, 8), 0, stream>>>(
        reinterpret_cast<const E*>(w.scales), reinterpret_cast<const E*>(w.biases),
        reinterpret_cast<E*>(t.scales), reinterpret_cast<E*>(t.biases), rows, cols);
    QUANTA_CUDA_CHECK_LAUNCH();
  };
  if (sd == 4)
    transpose.template operator()<uint32_t>();
  else
    transpose.template operator()<uint16_t>();

  Context inner = ctx;
  inner.kernel = "auto";
  select_kernel(matmul_problem(Op::matmul, x, t), "auto").matmul(x, t, nullptr, y, inner);
}

}  // namespace quanta::cuda
