// qmv_gguf: GGUF block formats (q4_0, q4_1, q5_0, q5_1, q8_0, q2_K .. q6_K) in the [N, K]
// layout, y = x · Wᵀ for small M on CUDA cores, f32 accumulation. Before it these formats ran
// dequantize + cuBLAS at every M (0.4-0.6 ms for 14336 x 5120, ~40x the time to read the blocks).
//
// A CTA owns 4 consecutive rows of W and its warps share K's segments of 1024 elements (32 legacy
// blocks or 4 super-blocks): as many warps (up to 8) as make the shares equal, e.g. 5 warps of one
// segment for K = 5120, 7 of two for K = 14336, so that no warp of a CTA idles while another
// works; their sums meet in shared memory. Blocks are 18-210 bytes and only 2-byte aligned, so a
// lane cannot load its own block with wide loads without touching a cache line per lane; instead
// the warp loads each row's segment with coalesced 4-byte loads (its next segment in flight in
// registers while the current one is used), parks it in its own shared memory, and lane l decodes
// piece l: the 32
// elements [32l, 32l + 32) of the segment (a legacy block, or sub-block l % 8 of a super-block).
// A piece becomes 32 bytes holding q + offset and meets 32 values of each row of x, loaded once for
// the 4 rows:
//   Σ w·x = Σ_h scale_h · Σ_{k∈h} q_k·x_k − min_h · Σ_{k∈h} x_k     (h: the piece's two halves)
// which is ggml's (d·sc)·q − dmin·m per element, summed in another order. f32 x meets each byte as
// the exact f32 q (a byte permute under 2^23 and one add); f16 / bf16 x as two int8 planes made by
// a pre-pass, through dp4a (GgufXBlock below): 1.1-1.6x faster at M = 1..16 (H100, docs/PERF.md).
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "cuda/checks.hpp"
#include "cuda/common.cuh"
#include "cuda/families.hpp"
#include "cuda/gguf_piece.cuh"
#include "cuda/runtime.cuh"
#include "cuda/weights.cuh"  // make_desc
#include "cuda/workspace.hpp"
#include "format/gguf.hpp"

namespace quanta::cuda {

namespace {

constexpr int kMaxWarps = 8, kMaxThreads = 32 * kMaxWarps;
constexpr int kRows = 4;            // rows of W per CTA
constexpr int kMaxRowsX = 4;        // rows of x per pass over W (f32 x; f16 / bf16 up to M = 4)
constexpr int kMaxRowsXPlanes = 8;  // f16 / bf16 x past M = 4
constexpr int kRowsXChoices[] = {1, 2, 3, 4, kMaxRowsXPlanes};
constexpr int kMaxGridY = 65535;  // gather: rows of x beyond it loop

// f16 / bf16 x as two int8 planes per block of 32 elements, written by a pre-pass:
//   x[k] ≈ d·(h[k] + l[k]/256),   d = max|x| / 127 over the block,   h, l in [-127, 127]
// which holds x to 16 bits relative to its block's max (finer than f16 and bf16 within 32x of
// it). The stored values (q + offset, bytes 0..255) meet h and l in dp4a (u8 x s8): per 16
// elements Σ(q + o)·h is exact in int32, and o·Σh comes off exactly, so per half
//   Σ q·x ≈ d·(Σ q·h + Σ q·l / 256)
// for ~1 instruction a code where the f32 path spends ~3 (byte permute, add, FMA).
struct GgufXBlock {
  float d;
  uint32_t sum_h, sum_l;  // Σh and Σl of elements 0..15 (low int16) and 16..31 (high int16)
  uint32_t unused;        // 16 bytes: one load
};

struct GgufArgs {
  const uint8_t* codes;      // [N][row_bytes]
  const void* x;             // [M][K]
  const uint32_t* xh;        // f16 / bf16: [M][K / 4] words of h (element i in byte i % 4)
  const uint32_t* xl;        // ... and of l
  const GgufXBlock* xb;      // [M][K / 32]
  void* y;                   // [M][N]
  const int32_t* ids;        // gather: the expert of each row of x (null for one matrix)
  int* flag;                 // gather: set when an id is outside [0, batch)
  const uint8_t* codes_end;  // one past the last code byte of the stack
  int64_t row_bytes, code_stride;
  int32_t m, n, k, batch;
};

// Σ of the four products of u8 bytes of a with s8 bytes of b, plus c.
__device__ __forceinline__ int dp4a_us(uint32_t a, uint32_t b, int c) {
  int d;
  asm("dp4a.u32.s32 %0, %1, %2, %3;\n" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}
__device__ __forceinline__ int low_i16(uint32_t v) {
  return static_cast<int16_t>(v & 0xFFFFu);
}
__device__ __forceinline__ int high_i16(uint32_t v) {
  return static_cast<int32_t>(v) >> 16;
}

// Pre-pass: x's planes (GgufXBlock). A thread makes one word of each plane (4 elements); the 8
// threads of a block of 32 are consecutive lanes and meet by shuffles (K is a multiple of 32, so
// a warp holds whole blocks, all live or all past the end).
template <class T>
__global__ void gguf_x_planes_kernel(const T* x, uint32_t* xh, uint32_t* xl, GgufXBlock* xb,
                                     int64_t words) {
  grid_dependency_release();  // the main kernel may start loading W now
  grid_dependency_wait();     // x and the planes: behind the previous kernel (common.cuh)
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const bool live = t < words;
  float v[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) v[i] = live ? to_f32(x[4 * t + i]) : 0.0f;
  // A NaN or infinity makes the block's d NaN, so it reaches y (fmaxf would drop a NaN).
  float amax = 0.0f;
  int bad = 0;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    amax = fmaxf(amax, fabsf(v[i]));
    bad |= !isfinite(v[i]);
  }
#pragma unroll
  for (int o = 1; o < 8; o <<= 1) {
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    bad |= __shfl_xor_sync(0xffffffffu, bad, o);
  }
  const float d = bad ? __int_as_float(0x7FC00000) : amax > 0.0f ? amax / 127.0f : 1.0f;
  const float inv = 1.0f / d;
  uint32_t wh = 0, wl = 0;
  int sh = 0, sl = 0;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float h = fminf(fmaxf(rintf(v[i] * inv), -127.0f), 127.0f);
    const float l = fminf(fmaxf(rintf(fmaf(-h, d, v[i]) * inv * 256.0f), -127.0f), 127.0f);
    sh += static_cast<int>(h);
    sl += static_cast<int>(l);
    wh |= (static_cast<uint32_t>(static_cast<int>(h)) & 0xFFu) << (8 * i);
    wl |= (static_cast<uint32_t>(static_cast<int>(l)) & 0xFFu) << (8 * i);
  }
#pragma unroll
  for (int o = 1; o < 4; o <<= 1) {  // over the 4 threads of each 16-element half
    sh += __shfl_xor_sync(0xffffffffu, sh, o);
    sl += __shfl_xor_sync(0xffffffffu, sl, o);
  }
  const int sh_hi = __shfl_down_sync(0xffffffffu, sh, 4),
            sl_hi = __shfl_down_sync(0xffffffffu, sl, 4);
  if (!live) return;
  xh[t] = wh;
  xl[t] = wl;
  if (t % 8 == 0)
    xb[t / 8] =
        GgufXBlock{d, (static_cast<uint32_t>(sh) & 0xFFFFu) | static_cast<uint32_t>(sh_hi) << 16,
                   (static_cast<uint32_t>(sl) & 0xFFFFu) | static_cast<uint32_t>(sl_hi) << 16, 0};
}

// Byte i of word v as the exact f32 (byte - offset): the byte under 2^23's exponent, minus
// 2^23 + offset.
template <int kOffset>
__device__ __forceinline__ float byte_value(uint32_t v, int i) {
  const uint32_t f = __byte_perm(v, 0x4B000000u, 0x7540u | static_cast<uint32_t>(i));
  return __uint_as_float(f) - (8388608.0f + static_cast<float>(kOffset));
}

template <class T, Scheme S, int MR, bool kGather>
// At most 128 registers: uncapped, the 4-rows-of-x instances took up to 196 and ran 2-2.3x slower
// at M = 4 (one CTA of 7 warps per SM); M = 1 is within a few % either way (H200, docs/PERF.md).
__global__ void __launch_bounds__(kMaxThreads, 2) qmv_gguf_kernel(const GgufArgs a) {
  // Chained calls (common.cuh): the next kernel may launch now; this one loads its first
  // segment of W before it waits for the previous kernel (gather: before it reads the ids).
  grid_dependency_release();
  if constexpr (kGather) grid_dependency_wait();
  using G = Gguf<S>;
  constexpr bool kPlanes = !std::is_same_v<T, float>;  // f16 / bf16 x: on its int8 planes
  constexpr int kSegBytes = seg_bytes<S>(), kLaneWords = lane_words<S>();
  constexpr int kBufWords = 32 * kLaneWords + 1;
  extern __shared__ uint32_t park_all[];  // [warps][kRows][kBufWords]
  __shared__ float part[kMaxWarps][kRows * MR];
  const int lane = static_cast<int>(threadIdx.x) % 32, warp = static_cast<int>(threadIdx.x) / 32;
  const int warps = static_cast<int>(blockDim.x) / 32;
  uint32_t(*park)[kBufWords] =
      reinterpret_cast<uint32_t(*)[kBufWords]>(park_all + warp * kRows * kBufWords);
  const int n0 = static_cast<int>(blockIdx.x) * kRows;  // the CTA's rows; its warps split K
  const int segs = (a.k + kSegElems - 1) / kSegElems;
  T* y = static_cast<T*>(a.y);

  auto run_tile = [&](const int m0, const int64_t e) {  // gather: MR = 1
    const uint8_t* codes = a.codes + e * a.code_stride;
    const T* xr[MR];
#pragma unroll
    for (int m = 0; m < MR; ++m)  // rows past M read the last row (their sums are not stored)
      xr[m] = static_cast<const T*>(a.x) + static_cast<int64_t>(min(m0 + m, a.m - 1)) * a.k;
    const uint8_t* wr[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r)  // rows past N repeat the last row (not stored)
      wr[r] = codes + static_cast<int64_t>(min(n0 + r, a.n - 1)) * a.row_bytes;

    // Segment g of every row as aligned words (the last segment of a row may be short).
    auto load = [&](int g, uint32_t(&out)[kRows][kLaneWords]) {
      const int bytes = min(kSegBytes, static_cast<int>(a.row_bytes - int64_t{g} * kSegBytes));
#pragma unroll
      for (int r = 0; r < kRows; ++r)
        load_segment(wr[r] + int64_t{g} * kSegBytes, bytes, a.codes_end, lane, out[r]);
    };

    // One register buffer: parked, it is free to take the next segment while this one is used.
    float acc[kRows][MR] = {};
    uint32_t buf[kRows][kLaneWords];
    if (warp < segs) load(warp, buf);
    grid_dependency_wait();  // x and y: behind the previous kernel
    for (int g = warp; g < segs; g += warps) {
#pragma unroll
      for (int r = 0; r < kRows; ++r)
#pragma unroll
        for (int i = 0; i < kLaneWords; ++i) park[r][lane + 32 * i] = buf[r][i];
      __syncwarp();
      if (g + warps < segs) load(g + warps, buf);
      const int pieces = min(kPieces, (a.k - g * kSegElems) / 32);
      if (lane < pieces) {
        uint32_t qb[kRows][8];
        float sc[kRows][2], mn[kRows][2];
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
          const int base =
              static_cast<int>(reinterpret_cast<uintptr_t>(wr[r] + int64_t{g} * kSegBytes) & 3);
          decode_piece<S>(park[r], base, lane, qb[r], sc[r], mn[r]);
        }
        const int k0 = g * kSegElems + 32 * lane;
        if constexpr (kPlanes) {
#pragma unroll
          for (int m = 0; m < MR; ++m) {
            const int64_t at = static_cast<int64_t>(min(m0 + m, a.m - 1)) * a.k + k0;
            const uint4* ph = reinterpret_cast<const uint4*>(a.xh + at / 4);
            const uint4* pl = reinterpret_cast<const uint4*>(a.xl + at / 4);
            const uint4 h0 = __ldg(ph), h1 = __ldg(ph + 1), l0 = __ldg(pl), l1 = __ldg(pl + 1);
            const uint4 xbw = __ldg(reinterpret_cast<const uint4*>(a.xb + at / 32));
            const uint32_t xh[8] = {h0.x, h0.y, h0.z, h0.w, h1.x, h1.y, h1.z, h1.w};
            const uint32_t xl[8] = {l0.x, l0.y, l0.z, l0.w, l1.x, l1.y, l1.z, l1.w};
            const float d = __uint_as_float(xbw.x);
            const int sh[2] = {low_i16(xbw.y), high_i16(xbw.y)};
            const int sl[2] = {low_i16(xbw.z), high_i16(xbw.z)};
#pragma unroll
            for (int r = 0; r < kRows; ++r) {
              int dh[2] = {}, dl[2] = {};
#pragma unroll
              for (int i = 0; i < 8; ++i) {
                dh[i / 4] = dp4a_us(qb[r][i], xh[i], dh[i / 4]);
                dl[i / 4] = dp4a_us(qb[r][i], xl[i], dl[i / 4]);
              }
#pragma unroll
              for (int h = 0; h < 2; ++h) {
                // Σ q·h and Σ q·l exactly: the offset's share comes off in int32.
                const int qh = dh[h] - G::kOffset * sh[h], ql = dl[h] - G::kOffset * sl[h];
                const float v = fmaf(static_cast<float>(ql), 1.0f / 256.0f, static_cast<float>(qh));
                acc[r][m] = fmaf(sc[r][h] * d, v, acc[r][m]);
                if constexpr (G::kMin) {  // Σx of the half from the same planes
                  const float xs =
                      d * fmaf(static_cast<float>(sl[h]), 1.0f / 256.0f, static_cast<float>(sh[h]));
                  acc[r][m] = fmaf(-mn[r][h], xs, acc[r][m]);
                }
              }
            }
          }
        } else {
#pragma unroll
          for (int m = 0; m < MR; ++m) {
            float sq[kRows][2] = {}, sx[2] = {};
#pragma unroll
            for (int t = 0; t < 4; ++t) {  // 8 elements at a time: words 2t, 2t + 1
              float xv[8];
              load_x<T, 8>(xr[m], k0 + 8 * t, xv);
              if constexpr (G::kMin)
#pragma unroll
                for (int i = 0; i < 8; ++i) sx[t / 2] += xv[i];
#pragma unroll
              for (int r = 0; r < kRows; ++r)
#pragma unroll
                for (int i = 0; i < 8; ++i)
                  sq[r][t / 2] = fmaf(byte_value<G::kOffset>(qb[r][2 * t + i / 4], i % 4), xv[i],
                                      sq[r][t / 2]);
            }
#pragma unroll
            for (int r = 0; r < kRows; ++r)
#pragma unroll
              for (int h = 0; h < 2; ++h)
                acc[r][m] = G::kMin ? fmaf(sc[r][h], sq[r][h], fmaf(-mn[r][h], sx[h], acc[r][m]))
                                    : fmaf(sc[r][h], sq[r][h], acc[r][m]);
          }
        }
      }
      __syncwarp();
    }
#pragma unroll
    for (int r = 0; r < kRows; ++r)
#pragma unroll
      for (int m = 0; m < MR; ++m) acc[r][m] = warp_sum(acc[r][m]);
    // The warps' sums in order; lane r * MR + m of warp 0 stores (row n0 + r, row m0 + m of x).
    __syncthreads();  // the previous tile's sums are read (gather)
    if (lane == 0)
#pragma unroll
      for (int r = 0; r < kRows; ++r)
#pragma unroll
        for (int m = 0; m < MR; ++m) part[warp][r * MR + m] = acc[r][m];
    __syncthreads();
    if (warp == 0 && lane < kRows * MR) {
      const int n = n0 + lane / MR, row = m0 + lane % MR;
      float v = 0.0f;
#pragma unroll
      for (int w = 0; w < warps; ++w) v += part[w][lane];
      if (n < a.n && row < a.m) y[static_cast<int64_t>(row) * a.n + n] = from_f32<T>(v);
    }
  };
  if constexpr (!kGather) {
    if (static_cast<int>(blockIdx.y) * MR < a.m) run_tile(static_cast<int>(blockIdx.y) * MR, 0);
  } else {
    for (int m0 = static_cast<int>(blockIdx.y); m0 < a.m; m0 += static_cast<int>(gridDim.y)) {
      const int64_t e = a.ids[m0];
      if (e >= 0 && e < a.batch) {
        run_tile(m0, e);
      } else {  // flagged; the row's outputs become NaN, W is not read
        if (threadIdx.x == 0) atomicOr(a.flag, 1);
        if (warp == 0 && lane < kRows && n0 + lane < a.n)
          y[static_cast<int64_t>(m0) * a.n + n0 + lane] = from_f32<T>(__int_as_float(0x7FC00000));
      }
    }
  }
}

// Rows of x per pass: one for gather (each row its own expert); for a plain matmul up to four, and
// eight past M = 4 on x's planes (their registers allow it: M = 8 and 16 ran 1.2-1.5x faster than
// passes of four on an H100, docs/PERF.md).
template <class T, Scheme S>
void launch(const GgufArgs& a, cudaStream_t stream) {
  constexpr bool kPlanes = !std::is_same_v<T, float>;
  const int mr = a.ids ? 1 : a.m <= kMaxRowsX ? a.m : kPlanes ? kMaxRowsXPlanes : kMaxRowsX;
  const int tiles = (a.m + mr - 1) / mr;
  if (!a.ids && tiles > kMaxGridY)
    throw Error("[quanta::matmul] qmv_gguf: M = " + std::to_string(a.m) + " is past its grid");
  const dim3 grid(static_cast<unsigned>((a.n + kRows - 1) / kRows),
                  static_cast<unsigned>(tiles < kMaxGridY ? tiles : kMaxGridY));
  // Segments per warp, then the fewest warps that take them all: equal shares but the last.
  const int segs = (a.k + kSegElems - 1) / kSegElems;
  const int per_warp = (segs + kMaxWarps - 1) / kMaxWarps;
  const int warps = (segs + per_warp - 1) / per_warp;
  const std::size_t smem = sizeof(uint32_t) * warps * kRows * (32 * lane_words<S>() + 1);
  auto go = [&]<int MR>() {
    if constexpr (MR > kMaxRowsX && !kPlanes) {
      throw Error("[quanta::matmul] qmv_gguf: f32 x runs at most 4 rows a pass");  // not reached
    } else {
      if constexpr (MR == 1) {
        if (a.ids) {
          QUANTA_CUDA_CHECK(launch_dependent(qmv_gguf_kernel<T, S, 1, true>, grid, dim3(32 * warps),
                                             smem, stream, a));
          return;
        }
      }
      QUANTA_CUDA_CHECK(launch_dependent(qmv_gguf_kernel<T, S, MR, false>, grid, dim3(32 * warps),
                                         smem, stream, a));
    }
  };
  dispatch_value<kRowsXChoices>(mr, go);
}

}  // namespace

std::string qmv_gguf_supports(const Problem& p) {
  if (p.format.info().family != Family::gguf) return "GGUF block formats only";
  if (p.layout != Layout::nk) return "the [N, K] layout only";
  if (p.op == Op::matmul && p.batch != 1) return "one matrix (a stack needs gather_matmul)";
  if (p.n > INT32_MAX || p.k > INT32_MAX || p.m > INT32_MAX || p.batch > INT32_MAX)
    return "needs M, N, K and the experts in int32";
  return {};
}

void qmv_gguf(ConstMatrixView x, const QuantizedMatrix& w, const int32_t* expert_ids, MatrixView y,
              const Context& ctx) {
  const std::string_view kName = expert_ids ? "gather_qmv_gguf" : "qmv_gguf";
  const std::string_view kOp = expert_ids ? "gather_matmul" : "matmul";
  require_device_operands(x, w, expert_ids, y, kOp);
  // Codes need only their natural 2-byte alignment (the kernel aligns its own loads); x is read
  // in 16-byte pieces.
  if (!alignment_ok(x.data, 16, ctx, kName, kOp, "x") ||
      !alignment_ok(w.codes, 4, ctx, kName, kOp, "w.codes"))
    return matmul_generic(x, w, expert_ids, y, ctx);
  const WeightDesc d = make_desc(w);
  ExpertFlag flag;
  if (expert_ids) flag = expert_flag_begin(ctx);
  GgufArgs a{};
  a.codes = d.codes;
  a.x = x.data;
  a.y = y.data;
  a.ids = expert_ids;
  a.flag = flag.device;
  a.codes_end = d.codes + d.code_stride * d.batch;
  a.row_bytes = d.row_bytes;
  a.code_stride = d.code_stride;
  a.m = static_cast<int32_t>(x.rows);
  a.n = d.n;
  a.k = d.k;
  a.batch = d.batch;
  const cudaStream_t stream = stream_of(ctx);
  dispatch_dtype(x.dtype, [&]<class T>() {
    if constexpr (!std::is_same_v<T, float>) {  // x's planes: h, l, then the blocks' (d, Σh, Σl)
      const int64_t elems = x.rows * d.k;
      auto* scratch = static_cast<uint8_t*>(
          stream_scratch(stream, Scratch::x_planes,
                         static_cast<std::size_t>(elems) * 2 + sizeof(GgufXBlock) * (elems / 32)));
      a.xh = reinterpret_cast<const uint32_t*>(scratch);
      a.xl = reinterpret_cast<const uint32_t*>(scratch + elems);
      a.xb = reinterpret_cast<const GgufXBlock*>(scratch + 2 * elems);
      const int64_t words = elems / 4;
      constexpr int kThreads = 256;
      QUANTA_CUDA_CHECK(launch_prepass(
          gguf_x_planes_kernel<T>, dim3(static_cast<unsigned>((words + kThreads - 1) / kThreads)),
          dim3(kThreads), stream, static_cast<const T*>(x.data),
          reinterpret_cast<uint32_t*>(scratch), reinterpret_cast<uint32_t*>(scratch + elems),
          reinterpret_cast<GgufXBlock*>(scratch + 2 * elems), words));
    }
    dispatch_gguf_scheme(w.format.scheme, "[quanta::matmul] qmv_gguf",
                         [&]<Scheme S>() { launch<T, S>(a, stream); });
  });
  if (expert_ids) expert_flag_end(flag, ctx, w.batch, kOp);
}

}  // namespace quanta::cuda
