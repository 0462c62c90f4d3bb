// gather_qmv_affine: gather_matmul for affine [N, K] expert stacks (every width and group, every
// dtype), y[m, :] = x[m, :] · W[ids[m]]ᵀ with MLX's qdot split per group:
//   y[m, n] = Σ_g s_e[n, g]·Σ_{k∈g} q_e[n, k]·x[m, k] + b_e[n, g]·Σ_{k∈g} x[m, k],  e = ids[m].
// Before it, affine gather ran gather_matmul_generic (a per-element decode, 1-3% of the roof).
// Each row of x is its own pass over its expert's matrix (rows of x that share an expert re-read
// it, mostly from L2). A warp owns 4 rows of W and walks K in 32-code chunks (4·bits bytes, one
// group), lane l taking chunks l, l + 32, ...; the next chunk's codes, scales and biases load
// while the current one is used. Codes are exact f32 (code_f32), x is converted once per chunk
// and shared by the 4 rows, f32 accumulation. An id outside the stack sets the flag and NaNs the
// row, reading nothing of W (an error after the launch, as gather_matmul_generic).
#include <bit>
#include <cstdint>
#include <string>

#include "cuda/affine_simt.cuh"
#include "cuda/checks.hpp"
#include "cuda/common.cuh"
#include "cuda/families.hpp"
#include "cuda/runtime.cuh"
#include "cuda/weights.cuh"  // make_desc

namespace quanta::cuda {

namespace {

constexpr int kWarps = 4, kThreads = 32 * kWarps;
constexpr int kRows = 4;          // rows of W per warp
constexpr int kMaxGridY = 65535;  // rows of x beyond it loop

struct GatherArgs {
  const uint8_t* codes;   // [batch][N][row_bytes]
  const uint8_t* scales;  // [batch][N][K / G] of scale_dtype
  const uint8_t* biases;
  const void* x;  // [M][K]
  void* y;        // [M][N]
  const int32_t* ids;
  int* flag;
  int64_t row_bytes, code_stride, scale_stride;
  int32_t m, n, k, batch, log2_group;
  DType scale_dtype;
};

template <class T, int BITS>
__global__ void __launch_bounds__(kThreads) gather_qmv_affine_kernel(const GatherArgs a) {
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int n0 =
      (static_cast<int>(blockIdx.x) * kWarps + static_cast<int>(threadIdx.x) / 32) * kRows;
  if (n0 >= a.n) return;
  const int chunks = a.k / 32, groups = a.k >> a.log2_group;
  T* y = static_cast<T*>(a.y);
  for (int m0 = static_cast<int>(blockIdx.y); m0 < a.m; m0 += static_cast<int>(gridDim.y)) {
    const int64_t e = a.ids[m0];
    if (e < 0 || e >= a.batch) {  // flagged; the row's outputs become NaN, W is not read
      if (lane == 0) atomicOr(a.flag, 1);
      if (lane < kRows && n0 + lane < a.n)
        y[static_cast<int64_t>(m0) * a.n + n0 + lane] = from_f32<T>(__int_as_float(0x7FC00000));
      continue;
    }
    const T* xr = static_cast<const T*>(a.x) + static_cast<int64_t>(m0) * a.k;
    const uint8_t* sc = a.scales + e * a.scale_stride;
    const uint8_t* bi = a.biases + e * a.scale_stride;
    const uint8_t* wr[kRows];
    int64_t sr[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) {  // rows past N repeat the last row (not stored)
      const int64_t n = min(n0 + r, a.n - 1);
      wr[r] = a.codes + e * a.code_stride + n * a.row_bytes;
      sr[r] = n * groups;
    }
    uint32_t cur[kRows][BITS] = {}, nxt[kRows][BITS] = {};
    float scur[kRows] = {}, bcur[kRows] = {}, snxt[kRows] = {}, bnxt[kRows] = {};
    auto load = [&](int c, uint32_t(&q)[kRows][BITS], float(&s)[kRows], float(&b)[kRows]) {
      const int64_t gi = (32 * c) >> a.log2_group;
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        load_chunk<BITS, ChunkLoad::stream>(wr[r] + 4 * BITS * c, q[r]);
        s[r] = load_as_f32(sc, a.scale_dtype, sr[r] + gi);
        b[r] = load_as_f32(bi, a.scale_dtype, sr[r] + gi);
      }
    };
    float acc[kRows] = {};
    int c = lane;
    if (c < chunks) load(c, cur, scur, bcur);
    for (; c < chunks; c += 32) {
      if (c + 32 < chunks) load(c + 32, nxt, snxt, bnxt);
      float dot[kRows] = {}, sx = 0.0f;
#pragma unroll
      for (int i0 = 0; i0 < 32; i0 += 8) {  // 8 activations at a time keeps registers flat
        float xv[8];
        load_x<T, 8>(xr, 32 * c + i0, xv);
        sx += ((xv[0] + xv[1]) + (xv[2] + xv[3])) + ((xv[4] + xv[5]) + (xv[6] + xv[7]));
#pragma unroll
        for (int r = 0; r < kRows; ++r)
#pragma unroll
          for (int i = 0; i < 8; ++i) dot[r] = fmaf(code_f32<BITS>(cur[r], i0 + i), xv[i], dot[r]);
      }
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        acc[r] += fmaf(scur[r], dot[r], bcur[r] * sx);
#pragma unroll
        for (int i = 0; i < BITS; ++i) cur[r][i] = nxt[r][i];
        scur[r] = snxt[r];
        bcur[r] = bnxt[r];
      }
    }
#pragma unroll
    for (int r = 0; r < kRows; ++r) acc[r] = warp_sum(acc[r]);
#pragma unroll
    for (int r = 0; r < kRows; ++r)
      if (lane == r && n0 + r < a.n)
        y[static_cast<int64_t>(m0) * a.n + n0 + r] = from_f32<T>(acc[r]);
  }
}

}  // namespace

std::string gather_qmv_affine_supports(const Problem& p) {
  if (p.format.scheme != Scheme::affine) return "needs the affine format";
  if (p.layout != Layout::nk) return "needs the [N, K] layout";
  if (p.k % 32 != 0) return "needs K % 32 == 0 (32-code chunks), K = " + std::to_string(p.k);
  if (p.n > INT32_MAX || p.k > INT32_MAX || p.m > INT32_MAX || p.batch > INT32_MAX)
    return "needs M, N, K and the experts in int32";
  return {};
}

void gather_qmv_affine(ConstMatrixView x, const QuantizedMatrix& w, const int32_t* expert_ids,
                       MatrixView y, const Context& ctx) {
  constexpr std::string_view kName = "gather_qmv_affine", kOp = "gather_matmul";
  require_device_operands(x, w, expert_ids, y, kOp);
  if (!alignment_ok(x.data, 16, ctx, kName, kOp, "x") ||
      !alignment_ok(w.codes, 16, ctx, kName, kOp, "w.codes"))
    return matmul_generic(x, w, expert_ids, y, ctx);
  const WeightDesc d = make_desc(w);
  const ExpertFlag flag = expert_flag_begin(ctx);
  GatherArgs a{};
  a.codes = d.codes;
  a.scales = d.scales;
  a.biases = d.biases;
  a.x = x.data;
  a.y = y.data;
  a.ids = expert_ids;
  a.flag = flag.device;
  a.row_bytes = d.row_bytes;
  a.code_stride = d.code_stride;
  a.scale_stride = d.scale_stride;
  a.m = static_cast<int32_t>(x.rows);
  a.n = d.n;
  a.k = d.k;
  a.batch = d.batch;
  a.log2_group = std::countr_zero(static_cast<unsigned>(w.format.group_size));
  a.scale_dtype = w.scale_dtype;
  const dim3 grid(static_cast<unsigned>((a.n + kRows * kWarps - 1) / (kRows * kWarps)),
                  static_cast<unsigned>(a.m < kMaxGridY ? a.m : kMaxGridY));
  const cudaStream_t stream = stream_of(ctx);
  dispatch_dtype(x.dtype, [&]<class T>() {
    dispatch_value<kAffineBitsList>(w.format.bits, [&]<int BITS>() {
      gather_qmv_affine_kernel<T, BITS><<<grid, kThreads, 0, stream>>>(a);
      QUANTA_CUDA_CHECK_LAUNCH();
    });
  });
  expert_flag_end(flag, ctx, w.batch, kOp);
}

}  // namespace quanta::cuda
