// qmm_affine_repack: affine weights in the [K, N] layout, run by the [N, K] kernels. Each call
// transposes W into a per-stream [N, K] copy (codes, scales, biases: exactly what quantizing Wᵀ
// in the [N, K] layout stores, since both layouts group along K), then runs the kernel the
// selector picks for that [N, K] problem. The copy reads and writes W once (~2 x 41 MB for
// 14336 x 5120 int4), which the [N, K] kernels repay from a few rows of x on: qvm_affine (CUDA
// cores) keeps the smallest M, dequantize + cuBLAS is no longer needed for [K, N]. Weights that
// are multiplied often are better stored [N, K] once (quantize with Layout::nk).
//
// Codes of 2, 4 and 8 bits: a 32-bit word holds W = 32 / BITS codes, so a block of W K-rows x one
// word of columns is a W x W matrix of codes that transposes in registers (log2 W rounds of
// masked swaps) into W words of [N, K] rows. A CTA stages 128-256 K-rows x 32 words through
// shared memory (rotated slots, so that both the row-wise stores and the block-wise loads meet 32
// banks); consecutive threads take consecutive blocks of one column, so each warp writes 128
// contiguous bytes of an [N, K] row. 3, 5 and 6 bits (codes across words) take a byte tile: one
// code per byte, 128 x 128 codes, each word of the [N, K] rows gathered from the bytes it covers.
// Scales and biases: transpose_pair.
//
// quanta::prepack of a [K, N] device matrix makes the same copy once, in buffers of its own
// (DevicePack::transposed); the packed entry then runs the [N, K] kernels on it at every M with
// no per-call copy.
#include <algorithm>
#include <cstdint>

#include "cuda/affine_simt.cuh"  // code_u32
#include "cuda/backend.hpp"
#include "cuda/checks.hpp"
#include "cuda/common.cuh"
#include "cuda/device_pack.hpp"
#include "cuda/families.hpp"
#include "cuda/runtime.cuh"
#include "cuda/transpose.cuh"
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

// The word tile for BITS in {2, 4, 8}.
template <int BITS>
struct WordTile {
  static constexpr int kCodes = 32 / BITS;                // W: codes per word
  static constexpr int kBlocks = kCodes == 16 ? 16 : 32;  // W-row blocks of K per tile
  static constexpr int kRows = kBlocks * kCodes;          // K-rows per tile: 128, 256, 256
  static constexpr int kWords = 32;                       // words of each K-row per tile
  static constexpr int kStride = 32 / kBlocks;
  // The shared slot of word c of the tile's K-row r: rotated by r and its block so that a
  // warp's 32 words of one row, and 32 lanes' words of consecutive blocks, take 32 banks.
  __device__ static int slot(int r, int c) { return (c + r + kStride * (r / kCodes)) & 31; }
};

// The W-bit mask of the code columns c with (c & h) == 0 (h codes of BITS bits set, h clear ...).
template <int BITS>
constexpr uint32_t low_half_mask(int h) {
  uint32_t m = 0;
  for (int c = 0; c < 32 / BITS; ++c)
    if ((c & h) == 0) m |= ((1u << BITS) - 1u) << (c * BITS);
  return m;
}

// w[r] holds codes (r, 0..W-1) of a W x W block, code c at bit c·BITS; afterwards w[c] holds
// (0..W-1, c). Each round swaps the off-diagonal h x h quarters of every 2h x 2h block.
template <int BITS>
__device__ __forceinline__ void transpose_codes(uint32_t (&w)[32 / BITS]) {
  constexpr int kW = 32 / BITS;
#pragma unroll
  for (int h = kW / 2; h >= 1; h /= 2) {
    const uint32_t mask = low_half_mask<BITS>(h);
    const int shift = h * BITS;
#pragma unroll
    for (int r = 0; r < kW; ++r)
      if ((r & h) == 0) {
        const uint32_t t = ((w[r] >> shift) ^ w[r + h]) & mask;
        w[r + h] ^= t;
        w[r] ^= t << shift;
      }
  }
}

// Tiles are numbered over a flat grid (column tiles fastest), so no grid dimension limits N or K.
template <int BITS>
__global__ void __launch_bounds__(kThreads) repack_words_kernel(const RepackArgs a, int col_tiles) {
  using T = WordTile<BITS>;
  constexpr int kW = T::kCodes;
  __shared__ uint32_t tile[T::kRows][T::kWords];
  const int words_kn = a.n / kW, words_nk = a.k / kW;  // words per stored row
  const int cw0 = static_cast<int>(blockIdx.x) % col_tiles * T::kWords;
  const int k0 = static_cast<int>(blockIdx.x) / col_tiles * T::kRows;
  const int lane = static_cast<int>(threadIdx.x) % 32, warp = static_cast<int>(threadIdx.x) / 32;
  const auto* src = reinterpret_cast<const uint32_t*>(a.codes_kn);
  auto* dst = reinterpret_cast<uint32_t*>(a.codes_nk);
  // Warp w loads K-rows w, w + 8, ...: one word per lane, 128 contiguous bytes per row; all of a
  // thread's loads are issued before the first store.
  constexpr int kLoads = T::kRows / (kThreads / 32);
  uint32_t v[kLoads];
#pragma unroll
  for (int i = 0; i < kLoads; ++i) {
    const int k = k0 + warp + 8 * i, cw = cw0 + lane;
    v[i] = k < a.k && cw < words_kn ? src[static_cast<int64_t>(k) * words_kn + cw] : 0u;
  }
#pragma unroll
  for (int i = 0; i < kLoads; ++i) {
    const int r = warp + 8 * i;
    tile[r][T::slot(r, lane)] = v[i];
  }
  __syncthreads();
  for (int j = static_cast<int>(threadIdx.x); j < T::kBlocks * T::kWords; j += kThreads) {
    const int kb = j % T::kBlocks, c = j / T::kBlocks;
    const int k = k0 + kb * kW, cw = cw0 + c;
    if (k >= a.k || cw >= words_kn) continue;  // K % 32 == 0: blocks are whole
    uint32_t w[kW];
#pragma unroll
    for (int r = 0; r < kW; ++r) w[r] = tile[kb * kW + r][T::slot(kb * kW + r, c)];
    transpose_codes<BITS>(w);
#pragma unroll
    for (int e = 0; e < kW; ++e) dst[static_cast<int64_t>(cw * kW + e) * words_nk + k / kW] = w[e];
  }
}

template <int BITS>
__global__ void __launch_bounds__(kThreads) repack_bytes_kernel(const RepackArgs a, int col_tiles) {
  // tile[r][c]: the code of K-row k0 + r, column n0 + c, one byte each; rows padded to 33 words
  // so that the chunk writes meet 32 banks.
  __shared__ __align__(4) uint8_t tile[kTileK][kTileN + 4];
  const int n0 = static_cast<int>(blockIdx.x) % col_tiles * kTileN;
  const int k0 = static_cast<int>(blockIdx.x) / col_tiles * kTileK;
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
  if (p.n > INT32_MAX || p.k > INT32_MAX || p.n * p.k / (kTileK * kTileN) >= INT32_MAX)
    return "needs N and K in int32 and N * K < 2^45 (the transpose's flat grid)";
  return {};
}

// The same kernel ahead of qvm_affine, for the M < 9 where the copy repays itself sooner: where
// the word tile transposes the codes and a tensor-core [N, K] kernel follows (H200, qvm_affine
// time / this path's over three shapes: 2/4-bit M = 4 0.75-1.32x, M = 6-7 1.11-2.06x; 8-bit M =
// 6 0.80-1.10x, M = 8 1.04-1.10x); f32 x (CUDA-core qmv_affine_f32 after the copy) and 3/5/6-bit
// (byte tile) lose at every M <= 8 (0.18-0.81x; docs/PERF.md).
std::string qmm_affine_repack_ahead_supports(const Problem& p) {
  if (std::string why = qmm_affine_repack_supports(p); !why.empty()) return why;
  const int b = p.format.bits;
  const bool half = p.dtype == DType::f16 || p.dtype == DType::bf16;
  if (!half || (!((b == 2 || b == 4) && p.m >= 6) && !(b == 8 && p.m >= 8)))
    return "ahead of qvm_affine only for 2/4-bit codes from M = 6 and 8-bit at M = 8, f16/bf16 x";
  return {};
}

std::string qmm_affine_repack_packed_supports(const Problem& p) {
  if (std::string why = qmm_affine_repack_supports(p); !why.empty()) return why;
  if (!p.device_packed) return "needs a device pack from quanta::prepack (the [N, K] copy)";
  return {};
}

namespace {

// A [K, N] matrix whose pack serves it: the [N, K] copy made by quanta::prepack, or null.
const QuantizedMatrix* packed_transpose(const QuantizedMatrix& w) {
  const DevicePack* p = w.device_pack.get();
  return p != nullptr && p->transposed && p->serves(w) ? &*p->transposed : nullptr;
}

// t = w's [N, K] copy, in t's buffers (codes, scales, biases of w's sizes), on `stream`.
void transpose_to_nk(const QuantizedMatrix& w, const QuantizedMatrix& t, cudaStream_t stream) {
  const Footprint fp = w.footprint();
  RepackArgs a{};
  a.codes_kn = reinterpret_cast<const uint8_t*>(w.codes);
  a.codes_nk = reinterpret_cast<uint8_t*>(t.codes);
  a.n = static_cast<int32_t>(w.n);
  a.k = static_cast<int32_t>(w.k);
  a.row_kn = static_cast<int64_t>(fp.code_bytes) / w.k;
  a.row_nk = static_cast<int64_t>(fp.code_bytes) / w.n;
  dispatch_value<kAffineBitsList>(w.format.bits, [&]<int BITS>() {
    // Tiles of (K-rows x columns): the word tile's for 2, 4, 8 bits, 128 x 128 codes otherwise.
    constexpr bool kWords = BITS == 2 || BITS == 4 || BITS == 8;
    int64_t tile_k = kTileK, tile_n = kTileN;
    if constexpr (kWords) {
      tile_k = WordTile<BITS>::kRows;
      tile_n = int64_t{WordTile<BITS>::kWords} * WordTile<BITS>::kCodes;
    }
    const int64_t col_tiles = (w.n + tile_n - 1) / tile_n, row_tiles = (w.k + tile_k - 1) / tile_k;
    const auto grid = static_cast<unsigned>(col_tiles * row_tiles);  // < 2^31: see supports
    if constexpr (kWords)
      repack_words_kernel<BITS><<<grid, kThreads, 0, stream>>>(a, static_cast<int>(col_tiles));
    else
      repack_bytes_kernel<BITS><<<grid, kThreads, 0, stream>>>(a, static_cast<int>(col_tiles));
    QUANTA_CUDA_CHECK_LAUNCH();
  });
  // MLX stores the [K, N] side arrays [K/G, N]; the [N, K] kernels read [N, K/G].
  const int64_t groups = w.k / w.format.group_size;
  if (dtype_size(w.scale_dtype) == 4)
    transpose_pair<uint32_t>(w.scales, w.biases, t.scales, t.biases, groups, w.n, stream);
  else
    transpose_pair<uint16_t>(w.scales, w.biases, t.scales, t.biases, groups, w.n, stream);
}

// w's [N, K] layout over `buf` (codes, then scales, then biases, each 256-byte aligned).
QuantizedMatrix nk_view(const QuantizedMatrix& w, std::byte* buf) {
  const Footprint fp = w.footprint();
  const std::size_t codes = round_up_256(fp.code_bytes), scales = round_up_256(fp.scale_bytes);
  QuantizedMatrix t = w;
  t.layout = Layout::nk;
  t.codes = buf;
  t.scales = buf + codes;
  t.biases = buf + codes + scales;
  t.keepalive = nullptr;
  t.host_pack = nullptr;
  t.device_pack = nullptr;
  return t;
}

std::size_t nk_copy_bytes(const QuantizedMatrix& w) {
  const Footprint fp = w.footprint();
  return round_up_256(fp.code_bytes) + 2 * round_up_256(fp.scale_bytes);
}

bool side_arrays_aligned(const QuantizedMatrix& w) {
  const std::size_t sd = dtype_size(w.scale_dtype);
  return is_aligned(w.codes, 4) && is_aligned(w.scales, sd) && is_aligned(w.biases, sd);
}

}  // namespace

void qmm_affine_repack(ConstMatrixView x, const QuantizedMatrix& w, const int32_t*, MatrixView y,
                       const Context& ctx) {
  constexpr std::string_view kName = "qmm_affine_repack", kOp = "matmul";
  require_device_operands(x, w, nullptr, y, kOp);
  Context inner = ctx;
  inner.kernel = "auto";
  if (const QuantizedMatrix* t = packed_transpose(w)) {
    select_kernel(matmul_problem(Op::matmul, x, *t), "auto").matmul(x, *t, nullptr, y, inner);
    return;
  }
  const std::size_t sd = dtype_size(w.scale_dtype);
  if (!alignment_ok(w.codes, 4, ctx, kName, kOp, "w.codes") ||
      !alignment_ok(w.scales, sd, ctx, kName, kOp, "w.scales") ||
      !alignment_ok(w.biases, sd, ctx, kName, kOp, "w.biases"))
    return matmul_generic(x, w, nullptr, y, ctx);
  const cudaStream_t stream = stream_of(ctx);
  const QuantizedMatrix t = nk_view(
      w, static_cast<std::byte*>(stream_scratch(stream, Scratch::kn_repack, nk_copy_bytes(w))));
  transpose_to_nk(w, t, stream);
  select_kernel(matmul_problem(Op::matmul, x, t), "auto").matmul(x, t, nullptr, y, inner);
}

// quanta::prepack of a [K, N] device matrix: its [N, K] copy in buffers of its own (itself
// prepacked for the [N, K] large-M kernel where that applies), made on ctx's stream and waited
// for; null where qmm_affine_repack does not take w.
std::shared_ptr<const DevicePack> make_kn_device_pack(const QuantizedMatrix& w,
                                                      const Context& ctx) {
  const ConstMatrixView one_row{nullptr, w.scale_dtype, 1, w.k, Location::device};
  if (!qmm_affine_repack_supports(matmul_problem(Op::matmul, one_row, w)).empty() ||
      !side_arrays_aligned(w))
    return nullptr;
  const cudaStream_t stream = stream_of(ctx);
  auto buf = std::make_shared<DeviceBuffer>(nk_copy_bytes(w));
  QuantizedMatrix t = nk_view(w, buf->as<std::byte>());
  t.keepalive = buf;
  transpose_to_nk(w, t, stream);
  t.device_pack = make_device_pack(t, ctx);  // waits for the stream
  if (!t.device_pack) QUANTA_CUDA_CHECK(cudaStreamSynchronize(stream));
  auto pack = std::make_shared<DevicePack>();
  pack->codes_src = w.codes;
  pack->scales_src = w.scales;
  pack->biases_src = w.biases;
  pack->format = w.format;
  pack->layout = Layout::kn;
  pack->scale_dtype = w.scale_dtype;
  pack->n = w.n;
  pack->k = w.k;
  pack->transposed = std::move(t);
  return pack;
}

}  // namespace quanta::cuda
