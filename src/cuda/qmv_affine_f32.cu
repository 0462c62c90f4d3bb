// qmv_affine_f32: affine [N, K] weights, f32 activations, M <= 8, on CUDA cores:
//   y[m, n] = Σ_g s[n, g]·Σ_{k∈g} q[n, k]·x[m, k] + b[n, g]·Σ_{k∈g} x[m, k]
// (MLX's qdot split: the bias multiplies a sum of x that every row shares).
// A CTA of 8 warps owns 4 rows; its 256 lanes walk K in 32-code chunks (chunk c = lane +
// 256·i), each chunk inside one group; lanes and warps are summed at the end. f32 activations
// take this slower path: no tensor-core mode keeps f32 accuracy (tf32 rounds x to 10 bits).
#include <algorithm>

#include "cuda/affine_simt.cuh"
#include "cuda/checks.hpp"
#include "cuda/common.cuh"
#include "cuda/families.hpp"
#include "cuda/runtime.cuh"

namespace quanta::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kRows = 4;  // rows of W per CTA
constexpr int kMaxM = 8;

struct F32Args {
  const uint8_t* codes;
  const float* scales;
  const float* biases;
  const float* x;
  float* y;
  int32_t m, n, k, log2_group;
};

template <int BITS, int M>
__global__ void __launch_bounds__(kThreads) qmv_affine_f32_kernel(const F32Args a) {
  __shared__ float red[kThreads / 32][kRows * M];
  const int n0 = blockIdx.x * kRows;
  const int64_t row_bytes = static_cast<int64_t>(a.k) * BITS / 8;
  const int groups = a.k >> a.log2_group;
  const int chunks = a.k / 32;
  float acc[kRows][M] = {};
  for (int c = threadIdx.x; c < chunks; c += kThreads) {
    const int k0 = 32 * c, gi = k0 >> a.log2_group;
    uint32_t w[kRows][BITS];
    float s[kRows], b[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const int n = min(n0 + r, a.n - 1);  // rows past N compute a copy and are not stored
      load_chunk<BITS>(a.codes + n * row_bytes + 4 * BITS * c, w[r]);
      s[r] = __ldg(a.scales + static_cast<int64_t>(n) * groups + gi);
      b[r] = __ldg(a.biases + static_cast<int64_t>(n) * groups + gi);
    }
    float dot[kRows][M] = {}, sx[M] = {};
    // 8 activations of every row of x at a time keeps the register count flat in M.
#pragma unroll
    for (int i0 = 0; i0 < 32; i0 += 8) {
      float xs[M][8];
#pragma unroll
      for (int m = 0; m < M; ++m) {
        const int mm = min(m, a.m - 1);  // instantiations round M up; extra rows repeat the last
        const float4* xp =
            reinterpret_cast<const float4*>(a.x + static_cast<int64_t>(mm) * a.k + k0 + i0);
        const float4 v0 = __ldg(xp), v1 = __ldg(xp + 1);
        xs[m][0] = v0.x, xs[m][1] = v0.y, xs[m][2] = v0.z, xs[m][3] = v0.w;
        xs[m][4] = v1.x, xs[m][5] = v1.y, xs[m][6] = v1.z, xs[m][7] = v1.w;
        sx[m] += ((v0.x + v0.y) + (v0.z + v0.w)) + ((v1.x + v1.y) + (v1.z + v1.w));
      }
#pragma unroll
      for (int r = 0; r < kRows; ++r)
#pragma unroll
        for (int i = 0; i < 8; ++i) {
          const float qv = code_f32<BITS>(w[r], i0 + i);
#pragma unroll
          for (int m = 0; m < M; ++m) dot[r][m] = fmaf(qv, xs[m][i], dot[r][m]);
        }
    }
#pragma unroll
    for (int r = 0; r < kRows; ++r)
#pragma unroll
      for (int m = 0; m < M; ++m) acc[r][m] += fmaf(s[r], dot[r][m], b[r] * sx[m]);
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
#pragma unroll
  for (int r = 0; r < kRows; ++r)
#pragma unroll
    for (int m = 0; m < M; ++m) {
      const float v = warp_sum(acc[r][m]);
      if (lane == 0) red[warp][r * M + m] = v;
    }
  __syncthreads();
  if (threadIdx.x < kRows * M) {
    float v = 0.0f;
#pragma unroll
    for (int wp = 0; wp < kThreads / 32; ++wp) v += red[wp][threadIdx.x];
    const int r = threadIdx.x / M, m = threadIdx.x % M;
    if (n0 + r < a.n && m < a.m) a.y[static_cast<int64_t>(m) * a.n + n0 + r] = v;
  }
}

}  // namespace

std::string qmv_affine_f32_supports(const Problem& p) {
  if (p.format.scheme != Scheme::affine) return "needs the affine format";
  if (p.layout != Layout::nk) return "needs the [N, K] layout (qvm_affine serves [K, N])";
  if (p.dtype != DType::f32) return "needs f32 activations (f16/bf16 take qmm_affine_tc)";
  return {};
}

void qmv_affine_f32(ConstMatrixView x, const QuantizedMatrix& w, const int32_t*, MatrixView y,
                    const Context& ctx) {
  constexpr std::string_view kName = "qmv_affine_f32", kOp = "matmul";
  require_device_operands(x, w, nullptr, y, kOp);
  if (!alignment_ok(x.data, 16, ctx, kName, kOp, "x") ||
      !alignment_ok(w.codes, 16, ctx, kName, kOp, "w.codes"))
    return matmul_generic(x, w, nullptr, y, ctx);
  F32Args a{};
  a.codes = reinterpret_cast<const uint8_t*>(w.codes);
  a.scales = reinterpret_cast<const float*>(w.scales);
  a.biases = reinterpret_cast<const float*>(w.biases);
  a.x = static_cast<const float*>(x.data);
  a.y = static_cast<float*>(y.data);
  a.m = static_cast<int32_t>(x.rows);
  a.n = static_cast<int32_t>(w.n);
  a.k = static_cast<int32_t>(w.k);
  int lg = 0;
  while ((1 << lg) < w.format.group_size) ++lg;
  a.log2_group = lg;
  const dim3 grid(static_cast<unsigned>((a.n + kRows - 1) / kRows));
  const cudaStream_t stream = stream_of(ctx);
  dispatch_value<kAffineBitsList>(w.format.bits, [&]<int BITS>() {
    auto run = [&]<int M>() {
      qmv_affine_f32_kernel<BITS, M><<<grid, kThreads, 0, stream>>>(a);
      QUANTA_CUDA_CHECK_LAUNCH();
    };
    // Explicit list: M = 1, 2, 4, 8; other M run the next larger one, whose extra rows repeat
    // x's last row and are not stored.
    if (a.m == 1)
      run.template operator()<1>();
    else if (a.m == 2)
      run.template operator()<2>();
    else if (a.m <= 4)
      run.template operator()<4>();
    else
      run.template operator()<kMaxM>();
  });
}

}  // namespace quanta::cuda
