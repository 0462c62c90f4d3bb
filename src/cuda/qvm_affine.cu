// qvm_affine: affine weights in the [K, N] layout (codes packed along N per K-row, scales
// [K/G, N]), y = x · W for small M, on CUDA cores with f32 accumulation:
//   y[m, n] = Σ_g s[g, n]·Σ_{k∈g} x[m, k]·q[k, n] + b[g, n]·Σ_{k∈g} x[m, k]
// A thread owns 32 consecutive columns (one 4·bits-byte chunk of each K-row) and whole groups
// of K-rows; a warp's 32 threads read 32 adjacent chunks (coalesced); the 4 warps of a CTA take
// interleaved groups and are summed in shared memory; CTAs split K (split_k.cuh) and pairs of
// x rows (gridDim.z).
#include <algorithm>

#include "cuda/affine_simt.cuh"
#include "cuda/checks.hpp"
#include "cuda/common.cuh"
#include "cuda/families.hpp"
#include "cuda/runtime.cuh"
#include "cuda/split_k.cuh"
#include "cuda/workspace.hpp"

namespace quanta::cuda {

namespace {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kCols = 32 * 32;  // columns per CTA: 32 lanes x 32-column chunks
constexpr int kRowsPerZ = 2;    // rows of x per CTA

struct QvmArgs {
  const uint8_t* codes;   // [K][N·bits/8]
  const uint8_t* scales;  // [K/G][N] of T
  const uint8_t* biases;
  const void* x;
  void* y;
  SplitTile split;
  int32_t m, n, k, log2_group;
  int32_t groups_per_split;
};

template <class T, int BITS>
__global__ void __launch_bounds__(kThreads) qvm_affine_kernel(const QvmArgs a) {
  __shared__ float red[kWarps][kRowsPerZ][kCols];  // [warp][row][column] partial sums
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int n0 = blockIdx.x * kCols;
  const int nc = n0 + 32 * lane;  // first column of this thread's chunk
  const int m0 = blockIdx.z * kRowsPerZ, rows = min(kRowsPerZ, a.m - m0);
  const int G = 1 << a.log2_group, groups = a.k >> a.log2_group;
  const int g_begin = blockIdx.y * a.groups_per_split;
  const int g_end = min(groups, g_begin + a.groups_per_split);
  const int64_t row_bytes = static_cast<int64_t>(a.n) * BITS / 8;
  const T* x = static_cast<const T*>(a.x);
  const T* sc = reinterpret_cast<const T*>(a.scales);
  const T* bi = reinterpret_cast<const T*>(a.biases);
  const bool active = nc < a.n;  // N * bits % 32 == 0 makes chunks whole; N % 32 == 0 too
  float acc[kRowsPerZ][32] = {};
  for (int gi = g_begin + warp; gi < g_end && active; gi += kWarps) {
    float dq[kRowsPerZ][32] = {}, sx[kRowsPerZ] = {};
    const int k0 = gi * G;
#pragma unroll 4
    for (int k = k0; k < k0 + G; ++k) {
      uint32_t w[BITS];
      load_chunk<BITS>(a.codes + k * row_bytes + (nc / 32) * 4 * BITS, w);
      float xv[kRowsPerZ];
#pragma unroll
      for (int r = 0; r < kRowsPerZ; ++r) {
        xv[r] = to_f32(x[static_cast<int64_t>(m0 + min(r, rows - 1)) * a.k + k]);
        sx[r] += xv[r];
      }
#pragma unroll
      for (int j = 0; j < 32; ++j) {
        const float qv = code_f32<BITS>(w, j);
#pragma unroll
        for (int r = 0; r < kRowsPerZ; ++r) dq[r][j] = fmaf(qv, xv[r], dq[r][j]);
      }
    }
    const int64_t si = static_cast<int64_t>(gi) * a.n + nc;
#pragma unroll
    for (int j = 0; j < 32; ++j) {
      const float s = to_f32(sc[si + j]), b = to_f32(bi[si + j]);
#pragma unroll
      for (int r = 0; r < kRowsPerZ; ++r) acc[r][j] += fmaf(s, dq[r][j], b * sx[r]);
    }
  }
#pragma unroll
  for (int r = 0; r < kRowsPerZ; ++r)
#pragma unroll
    for (int j = 0; j < 32; ++j) red[warp][r][32 * lane + j] = acc[r][j];
  __syncthreads();
  T* y = static_cast<T*>(a.y);
  for (int i = threadIdx.x; i < rows * kCols; i += kThreads) {
    const int r = i / kCols, c = i % kCols, n = n0 + c;
    if (n >= a.n) continue;
    float v = 0.0f;
#pragma unroll
    for (int wp = 0; wp < kWarps; ++wp) v += red[wp][r][c];
    const int64_t idx = static_cast<int64_t>(m0 + r) * a.n + n;
    if (a.split.splits == 1)
      y[idx] = from_f32<T>(v);
    else
      __stcg(a.split.partials + static_cast<int64_t>(blockIdx.y) * a.m * a.n + idx, v);
  }
  if (a.split.splits > 1)
    split_finish<T>(a.split, blockIdx.z * gridDim.x + blockIdx.x, m0, m0 + rows, n0, kCols, y);
}

}  // namespace

std::string qvm_affine_supports(const Problem& p) {
  if (p.format.scheme != Scheme::affine) return "needs the affine format";
  if (p.layout != Layout::kn) return "needs the [K, N] layout";
  if (p.n % 32 != 0)
    return "needs N % 32 == 0 (whole 32-column chunks), N = " + std::to_string(p.n);
  return {};
}

void qvm_affine(ConstMatrixView x, const QuantizedMatrix& w, const int32_t*, MatrixView y,
                const Context& ctx) {
  constexpr std::string_view kName = "qvm_affine", kOp = "matmul";
  require_device_operands(x, w, nullptr, y, kOp);
  if (!alignment_ok(w.codes, 16, ctx, kName, kOp, "w.codes"))
    return matmul_generic(x, w, nullptr, y, ctx);
  QvmArgs a{};
  a.codes = reinterpret_cast<const uint8_t*>(w.codes);
  a.scales = reinterpret_cast<const uint8_t*>(w.scales);
  a.biases = reinterpret_cast<const uint8_t*>(w.biases);
  a.x = x.data;
  a.y = y.data;
  a.m = static_cast<int32_t>(x.rows);
  a.n = static_cast<int32_t>(w.n);
  a.k = static_cast<int32_t>(w.k);
  int lg = 0;
  while ((1 << lg) < w.format.group_size) ++lg;
  a.log2_group = lg;
  const int groups = a.k >> lg;
  const int col_tiles = (a.n + kCols - 1) / kCols;
  const int zs = (a.m + kRowsPerZ - 1) / kRowsPerZ;
  int dev = 0, sms = 0;
  QUANTA_CUDA_CHECK(cudaGetDevice(&dev));
  QUANTA_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  // ~4 CTAs per multiprocessor in all, each warp keeping >= 2 groups.
  const int max_splits = std::max(1, groups / (2 * kWarps));
  int splits = std::clamp((4 * sms + col_tiles * zs - 1) / (col_tiles * zs), 1, max_splits);
  a.groups_per_split = (groups + splits - 1) / splits;
  splits = (groups + a.groups_per_split - 1) / a.groups_per_split;
  const cudaStream_t stream = stream_of(ctx);
  a.split = SplitTile{nullptr, nullptr, splits, a.m, a.n};
  if (splits > 1) {
    a.split.partials = static_cast<float*>(
        stream_scratch(stream, Scratch::split_partials,
                       sizeof(float) * static_cast<std::size_t>(splits) * a.m * a.n));
    a.split.counters = static_cast<uint32_t*>(
        stream_scratch(stream, Scratch::split_counters, sizeof(uint32_t) * col_tiles * zs));
  }
  const dim3 grid(static_cast<unsigned>(col_tiles), static_cast<unsigned>(splits),
                  static_cast<unsigned>(zs));
  dispatch_dtype(x.dtype, [&]<class T>() {
    dispatch_value<kAffineBitsList>(w.format.bits, [&]<int BITS>() {
      qvm_affine_kernel<T, BITS><<<grid, kThreads, 0, stream>>>(a);
      QUANTA_CUDA_CHECK_LAUNCH();
    });
  });
}

}  // namespace quanta::cuda
