// Portable CUDA kernels for every format and layout: decode each element with the shared
// codecs (src/format/*.hpp via cuda/weights.cuh), multiply-accumulate in f32. They are the
// correct fallback the kernel table ends with; speed is the fast families' job.
//
//   nk:  y[m, n] = Σ_k x[m, k] · W[n, k]   one block per output column n and tile of rows m;
//        the block decodes W[n, :] chunk by chunk into shared memory (GGUF decodes whole
//        blocks), each warp dots it with its rows of x.
//   kn:  y[m, n] = Σ_k x[m, k] · W[k, n]   one thread per column n, walking K.
//   gather: the same with one row of x per tile and W = W[expert_ids[m]]; an id outside
//        [0, batch) sets a flag, writes NaN to the row and reads nothing.
#include <algorithm>
#include <cmath>

#include "cuda/checks.hpp"
#include "cuda/common.cuh"
#include "cuda/families.hpp"
#include "cuda/runtime.cuh"
#include "cuda/weights.cuh"

namespace quanta::cuda {

namespace {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
// Elements of one stored row decoded per pass: a multiple of every group and GGUF block.
constexpr int kChunk = 1024;
constexpr int kRowsPerWarp = 4;  // rows of x per warp in the nk kernel (plain matmul)
constexpr int kRowsKn = 8;       // rows of x per thread in the kn kernel (plain matmul)
constexpr int kMaxGridY = 65535;

template <class T>
struct GenericArgs {
  WeightDesc w;
  const T* x;
  T* y;
  const int32_t* ids;  // gather only
  int* flag;           // gather only
  int32_t m;
  int32_t rows;  // rows of x per tile: 1 for gather
};

// The expert of a tile starting at row m0, or -1 (flagged) when its id is out of range.
template <class T>
__device__ __forceinline__ int64_t tile_expert(const GenericArgs<T>& a, int64_t m0) {
  if (a.ids == nullptr) return 0;
  const int32_t e = a.ids[m0];
  if (e >= 0 && e < a.w.batch) return e;
  if (threadIdx.x == 0) atomicOr(a.flag, 1);
  return -1;
}

template <class T>
__global__ void __launch_bounds__(kThreads) generic_nk_kernel(GenericArgs<T> a) {
  __shared__ float w_s[kChunk];  // [kChunk] decoded W[n, c0 : c0 + kChunk)
  const int64_t n = blockIdx.x, N = a.w.n, K = a.w.k;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t tiles = (a.m + a.rows - 1) / a.rows;
  for (int64_t t = blockIdx.y; t < tiles; t += gridDim.y) {
    const int64_t m0 = t * a.rows;
    const int64_t e = tile_expert(a, m0);
    if (e < 0) {
      if (threadIdx.x == 0) a.y[m0 * N + n] = from_f32<T>(NAN);
      continue;
    }
    float acc[kRowsPerWarp] = {};
    for (int64_t c0 = 0; c0 < K; c0 += kChunk) {
      const int count = static_cast<int>(K - c0 < kChunk ? K - c0 : kChunk);
      __syncthreads();
      decode_row_span(a.w, e, n, c0, count, w_s, DType::f32);
      __syncthreads();
#pragma unroll
      for (int j = 0; j < kRowsPerWarp; ++j) {
        const int64_t m = m0 + warp + j * kWarps;
        if (m >= a.m || m >= m0 + a.rows) continue;
        const T* xr = a.x + m * K + c0;
        for (int i = lane; i < count; i += 32) acc[j] += to_f32(xr[i]) * w_s[i];
      }
    }
#pragma unroll
    for (int j = 0; j < kRowsPerWarp; ++j) {
      const int64_t m = m0 + warp + j * kWarps;
      const float s = warp_sum(acc[j]);
      if (lane == 0 && m < a.m && m < m0 + a.rows) a.y[m * N + n] = from_f32<T>(s);
    }
  }
}

template <class T>
__global__ void __launch_bounds__(kThreads) generic_kn_kernel(GenericArgs<T> a) {
  const int64_t n = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  const int64_t N = a.w.n, K = a.w.k;
  const int64_t tiles = (a.m + a.rows - 1) / a.rows;
  for (int64_t t = blockIdx.y; t < tiles; t += gridDim.y) {
    const int64_t m0 = t * a.rows;
    const int64_t e = tile_expert(a, m0);
    if (e < 0) {
      for (int64_t c = threadIdx.x; c < N && blockIdx.x == 0; c += kThreads)
        a.y[m0 * N + c] = from_f32<T>(NAN);
      continue;
    }
    if (n >= N) continue;
    const int rows = static_cast<int>(a.m - m0 < a.rows ? a.m - m0 : a.rows);
    float acc[kRowsKn] = {};
    for (int64_t k = 0; k < K; ++k) {
      const float wv = decode_element(a.w, e, k, n, DType::f32);
#pragma unroll
      for (int j = 0; j < kRowsKn; ++j)
        if (j < rows) acc[j] += to_f32(a.x[(m0 + j) * K + k]) * wv;
    }
#pragma unroll
    for (int j = 0; j < kRowsKn; ++j)
      if (j < rows) a.y[(m0 + j) * N + n] = from_f32<T>(acc[j]);
  }
}

// out[(e * R + r) * C + c] = W_e storage element (r, c), rounded as the host rounds.
__global__ void __launch_bounds__(kThreads)
    generic_dequantize_kernel(WeightDesc w, void* out, DType out_dtype) {
  __shared__ float row_s[kChunk];
  const int64_t R = w.storage_rows(), C = w.storage_cols();
  for (int64_t er = blockIdx.x; er < R * w.batch; er += gridDim.x) {
    const int64_t e = er / R, r = er % R;
    for (int64_t c0 = 0; c0 < C; c0 += kChunk) {
      const int count = static_cast<int>(C - c0 < kChunk ? C - c0 : kChunk);
      __syncthreads();
      decode_row_span(w, e, r, c0, count, row_s, out_dtype);
      __syncthreads();
      for (int i = threadIdx.x; i < count; i += kThreads)
        store_f32_as(out, out_dtype, er * C + c0 + i, row_s[i]);
    }
  }
}

// GGUF: a warp-sized CTA decodes 32 consecutive blocks, one per lane with ggml's arithmetic,
// into shared memory (rows padded by one float against bank conflicts) and then stores the 32
// blocks' values, which are contiguous in `out`, coalesced. (Through decode_row_span only
// 1024 / block_elems threads of a CTA had work: 4 of 128 for the K-quants.)
constexpr int kGgufWarpBlocks = 32;
constexpr int kGgufMaxBlockElems = 256;

__global__ void __launch_bounds__(kGgufWarpBlocks)
    gguf_dequantize_kernel(WeightDesc w, void* out, DType out_dtype) {
  __shared__ float vals[kGgufWarpBlocks * (kGgufMaxBlockElems + 1)];
  const int be = w.block_elems, stride = be + 1, lane = static_cast<int>(threadIdx.x);
  const int64_t R = w.storage_rows(), per_row = w.storage_cols() / be;
  const int64_t total = R * w.batch * per_row;
  for (int64_t b0 = static_cast<int64_t>(blockIdx.x) * kGgufWarpBlocks; b0 < total;
       b0 += static_cast<int64_t>(gridDim.x) * kGgufWarpBlocks) {
    const int64_t b = b0 + lane;
    if (b < total) {
      const int64_t er = b / per_row, j = b % per_row, e = er / R, r = er % R;
      decode_gguf_block(w.scheme, w.codes + e * w.code_stride + r * w.row_bytes + j * w.block_bytes,
                        vals + lane * stride);
    }
    __syncwarp();
    const int count =
        static_cast<int>(total - b0 < kGgufWarpBlocks ? total - b0 : kGgufWarpBlocks) * be;
    for (int i = lane; i < count; i += kGgufWarpBlocks)
      store_f32_as(out, out_dtype, b0 * be + i, vals[i / be * stride + i % be]);
    __syncwarp();
  }
}

// Microscaled (mxfp4, mxfp8, nvfp4) and fp8 matrices: a thread per 8 consecutive elements of a
// stored row (4 or 8 code bytes; [N, K]: one scale, [K, N]: a scale per column), decoded with
// decode_element's operations (so the bytes stay the host's) but without its per-element index
// divisions, and stored as 16 or 32 contiguous bytes. Through decode_row_span the same decode
// ran at 0.1 TB/s ([K, N] did until Dec 2: 1.0-1.4 ms for 14336 x 5120).
constexpr int kSpan = 8;

__global__ void __launch_bounds__(kThreads)
    scaled_dequantize_kernel(WeightDesc w, void* out, DType out_dtype, bool vector_stores) {
  const bool nk = w.layout == Layout::nk;
  const int64_t R = w.storage_rows(), C = w.storage_cols(), spans = C / kSpan,
                total = R * w.batch * spans;
  const bool micro = w.family == Family::microscaled;
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; t < total;
       t += static_cast<int64_t>(gridDim.x) * kThreads) {
    const int64_t er = t / spans, c0 = (t - er * spans) * kSpan, e = er / R, r = er - e * R;
    const uint8_t* row = w.codes + e * w.code_stride + r * w.row_bytes;
    // [N, K]: one scale for the span (a group, a channel or the tensor); [K, N]: the span runs
    // along N, so each column has its own (group row r / G, channel c, or the tensor's).
    const uint8_t* sc = w.scales + e * w.scale_stride;
    auto scale_at = [&](int64_t c) {
      if (micro) {
        const uint8_t sb = nk ? sc[r * (C / w.group) + c / w.group] : sc[(r / w.group) * C + c];
        return w.scale_enc == ScaleEncoding::e8m0 ? codec::e8m0_to_float(sb)
                                                  : codec::e4m3_to_float(sb);
      }
      const float* sp = reinterpret_cast<const float*>(sc);
      return w.granularity == Granularity::channel ? sp[nk ? r : c] : sp[0];
    };
    const float s_span = nk ? scale_at(c0) : 0.0f;
    float v[kSpan];
#pragma unroll
    for (int j = 0; j < kSpan; ++j) {
      const float s = nk ? s_span : scale_at(c0 + j);
      const float x = element_value(w.code, codec::affine_code(row, c0 + j, w.bits, C));
      v[j] = micro ? __fmul_rn(round_as(out_dtype, __fmul_rn(x, s)), w.global) : __fmul_rn(x, s);
    }
    const int64_t o = er * C + c0;
    if (vector_stores && out_dtype != DType::f32) {
      uint32_t h[kSpan / 2];
#pragma unroll
      for (int j = 0; j < kSpan / 2; ++j) {
        const uint32_t lo =
            out_dtype == DType::f16 ? f32_to_f16_bits(v[2 * j]) : f32_to_bf16_bits(v[2 * j]);
        const uint32_t hi = out_dtype == DType::f16 ? f32_to_f16_bits(v[2 * j + 1])
                                                    : f32_to_bf16_bits(v[2 * j + 1]);
        h[j] = lo | (hi << 16);
      }
      *reinterpret_cast<uint4*>(static_cast<uint16_t*>(out) + o) =
          make_uint4(h[0], h[1], h[2], h[3]);
    } else if (vector_stores) {
      auto* f = reinterpret_cast<float4*>(static_cast<float*>(out) + o);
      f[0] = make_float4(v[0], v[1], v[2], v[3]);
      f[1] = make_float4(v[4], v[5], v[6], v[7]);
    } else {
#pragma unroll
      for (int j = 0; j < kSpan; ++j) store_f32_as(out, out_dtype, o + j, v[j]);
    }
  }
}

}  // namespace

void matmul_generic(ConstMatrixView x, const QuantizedMatrix& w, const int32_t* expert_ids,
                    MatrixView y, const Context& ctx) {
  const std::string_view op = expert_ids ? "gather_matmul" : "matmul";
  require_device_operands(x, w, expert_ids, y, op);
  const cudaStream_t stream = stream_of(ctx);
  ExpertFlag flag;
  if (expert_ids) flag = expert_flag_begin(ctx);
  dispatch_dtype(x.dtype, [&]<class T>() {
    GenericArgs<T> a;
    a.w = make_desc(w);
    a.x = static_cast<const T*>(x.data);
    a.y = static_cast<T*>(y.data);
    a.ids = expert_ids;
    a.flag = flag.device;
    a.m = static_cast<int32_t>(x.rows);
    const bool nk = w.layout == Layout::nk;
    a.rows = expert_ids ? 1 : (nk ? kRowsPerWarp * kWarps : kRowsKn);
    const int64_t tiles = (x.rows + a.rows - 1) / a.rows;
    const dim3 grid(
        nk ? static_cast<unsigned>(w.n) : static_cast<unsigned>((w.n + kThreads - 1) / kThreads),
        static_cast<unsigned>(std::min<int64_t>(tiles, kMaxGridY)));
    if (nk)
      generic_nk_kernel<T><<<grid, kThreads, 0, stream>>>(a);
    else
      generic_kn_kernel<T><<<grid, kThreads, 0, stream>>>(a);
    QUANTA_CUDA_CHECK_LAUNCH();
  });
  if (expert_ids) expert_flag_end(flag, ctx, w.batch, op);
}

void dequantize_generic(const QuantizedMatrix& w, MatrixView out, const Context& ctx) {
  require_device_weights(w, "dequantize");
  require_device_pointer(out.data, "dequantize", "out");
  const WeightDesc d = make_desc(w);
  const int64_t rows = d.storage_rows() * d.batch;
  if (d.family == Family::gguf) {
    const int64_t blocks = rows * (d.storage_cols() / d.block_elems);
    const unsigned grid = static_cast<unsigned>(
        std::min<int64_t>((blocks + kGgufWarpBlocks - 1) / kGgufWarpBlocks, 1 << 20));
    gguf_dequantize_kernel<<<grid, kGgufWarpBlocks, 0, stream_of(ctx)>>>(d, out.data, out.dtype);
  } else if ((d.family == Family::microscaled || d.family == Family::fp8) &&
             d.storage_cols() % kSpan == 0) {
    const int64_t spans = rows * (d.storage_cols() / kSpan);
    const unsigned grid =
        static_cast<unsigned>(std::min<int64_t>((spans + kThreads - 1) / kThreads, 1 << 20));
    scaled_dequantize_kernel<<<grid, kThreads, 0, stream_of(ctx)>>>(d, out.data, out.dtype,
                                                                    is_aligned(out.data, 16));
  } else {
    const unsigned grid = static_cast<unsigned>(std::min<int64_t>(rows, 1 << 20));
    generic_dequantize_kernel<<<grid, kThreads, 0, stream_of(ctx)>>>(d, out.data, out.dtype);
  }
  QUANTA_CUDA_CHECK_LAUNCH();
}

}  // namespace quanta::cuda
