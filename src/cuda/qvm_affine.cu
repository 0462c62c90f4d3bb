// qvm_affine: affine weights in the [K, N] layout (codes packed along N per K-row, scales
// [K/G, N]), y = x · W for small M, on CUDA cores with f32 accumulation:
//   y[m, n] = Σ_g s[g, n]·Σ_{k∈g} x[m, k]·q[k, n] + b[g, n]·Σ_{k∈g} x[m, k]
// A lane owns 32 consecutive columns (one 4·bits-byte chunk of each K-row, a warp's 32 lanes
// read 32 adjacent chunks); the 8 warps of a CTA take eighths of the CTA's share of K (in blocks
// of 8 K-rows) and are summed in shared memory; CTAs split K (split_k.cuh) and rows of x
// (gridDim.z, MR a CTA).
//
// Why this shape (H200): [K, N] has only N / 32 lanes of independent columns, so K must be split
// across the GPU; the first version (4 warps, splits capped at 2 groups a warp, every CTA
// computing two rows of x) ran ~4 warps an SM at 8-16% of the read roof. Here the splits fill
// one wave of resident CTAs (8 warps each), a warp's share is as small as 8 K-rows, each lane
// keeps kDepth K-rows of codes in flight, and code q enters its FMA as the f32 1 + q/2^bits (the
// code shifted under the exponent of 1.0: a shift and a LOP3, no int-to-float conversion; 2- and
// 4-bit codes a byte permute each, BytePlanes); Σ x·q = 2^bits·(Σ x·(1 + q/2^bits) - Σx) is taken
// per group, where both sums are of comparable size.
#include <algorithm>

#include "cuda/affine_simt.cuh"
#include "cuda/affine_unpack.cuh"  // and_or, magic_register
#include "cuda/checks.hpp"
#include "cuda/common.cuh"
#include "cuda/families.hpp"
#include "cuda/runtime.cuh"
#include "cuda/split_k.cuh"
#include "cuda/workspace.hpp"

namespace quanta::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kCols = 32 * 32;  // columns per CTA: 32 lanes x 32-column chunks
constexpr int kDepth = 4;       // K-rows of chunks in flight per lane

struct QvmArgs {
  const uint8_t* codes;   // [K][N·bits/8]
  const uint8_t* scales;  // [K/G][N] of T
  const uint8_t* biases;
  const void* x;
  void* y;
  SplitTile split;
  int32_t m, n, k, log2_group;
};

// Code i (0..31, constant after unrolling) of a chunk as the f32 1 + q/2^BITS: the code moved to
// the top BITS mantissa bits and ORed with 1.0's exponent (`one` = 0x3F800000 in a register).
template <int BITS>
__device__ __forceinline__ float code_unit(const uint32_t (&w)[BITS], int i, uint32_t one) {
  constexpr int kTop = 23 - BITS;  // the code's lowest bit lands here
  constexpr uint32_t kMask = ((1u << BITS) - 1u) << kTop;
  const int bit = i * BITS, wi = bit / 32, sh = bit % 32;
  uint32_t t;
  if (sh + BITS <= 32)
    t = sh <= kTop ? w[wi] << (kTop - sh) : w[wi] >> (sh - kTop);
  else
    t = __funnelshift_r(w[wi], w[wi + 1 < BITS ? wi + 1 : BITS - 1], sh) << kTop;
  return __uint_as_float(and_or<kMask>(t, one));
}

// 2- and 4-bit codes by byte permutes: plane p of word w holds, in each byte, one of its codes
// at the byte's bits 8 - BITS..6 under bit 7 set (0x80 | q << (7 - BITS)); a PRMT of that byte
// into byte 2 beside 0x3F in byte 3 is the f32 1 + q/2^BITS. A word of 8/BITS·4 codes costs
// 8/BITS shifts and LOP3s and a PRMT per code, against a shift and a LOP3 per code.
template <int BITS>
struct BytePlanes {
  static constexpr int kPlanes = 8 / BITS;  // codes per byte
  uint32_t p[kPlanes];
  __device__ __forceinline__ BytePlanes(uint32_t w, uint32_t x80) {
    constexpr uint32_t kMask = 0x01010101u * (((1u << BITS) - 1u) << (7 - BITS));
#pragma unroll
    for (int c = 0; c < kPlanes; ++c) {  // code c of each byte: bits c·BITS.. -> 7 - BITS..6
      constexpr int kTo = 7 - BITS;
      const int from = c * BITS;
      p[c] = and_or<kMask>(from <= kTo ? w << (kTo - from) : w >> (from - kTo), x80);
    }
  }
  // Code i of the word (byte i / kPlanes, code i % kPlanes of it) as 1 + q/2^BITS.
  __device__ __forceinline__ float code(int i, uint32_t c3f) const {
    const uint32_t b = static_cast<uint32_t>(i / kPlanes);
    return __uint_as_float(__byte_perm(p[i % kPlanes], c3f, 0x7054u | (b << 8)));
  }
};

// Eight scale or bias entries of type T at p (16-byte aligned for 2-byte T, 32 for f32) as f32.
template <class T>
__device__ __forceinline__ void load8(const T* p, float (&v)[8]) {
  if constexpr (sizeof(T) == 2) {
    const uint4 u = __ldg(reinterpret_cast<const uint4*>(p));
    const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      T lo, hi;
      const uint16_t l = static_cast<uint16_t>(w[i] & 0xFFFFu),
                     h = static_cast<uint16_t>(w[i] >> 16);
      __builtin_memcpy(&lo, &l, 2);
      __builtin_memcpy(&hi, &h, 2);
      v[2 * i] = to_f32(lo);
      v[2 * i + 1] = to_f32(hi);
    }
  } else {
    const float4 a = __ldg(reinterpret_cast<const float4*>(p));
    const float4 b = __ldg(reinterpret_cast<const float4*>(p) + 1);
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
  }
}

template <class T, int BITS, int MR>
__global__ void __launch_bounds__(kThreads, MR == 1 ? 2 : 1) qvm_affine_kernel(const QvmArgs a) {
  extern __shared__ float red[];  // [warp][row][column], columns XOR-swizzled by lane
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int n0 = blockIdx.x * kCols;
  const int nc = n0 + 32 * lane;  // first column of this lane's chunk
  const int m0 = blockIdx.z * MR, rows = min(MR, a.m - m0);
  const bool active = nc < a.n;  // N % 32 == 0 makes chunks whole
  // This warp's K-rows: its eighth (in blocks of 8 rows) of the CTA's split of K.
  const int blocks = a.k / 8, splits = static_cast<int>(gridDim.y);
  const int c0 = static_cast<int>(static_cast<int64_t>(blockIdx.y) * blocks / splits);
  const int c1 = static_cast<int>(static_cast<int64_t>(blockIdx.y + 1) * blocks / splits);
  const int kb = 8 * (c0 + (c1 - c0) * warp / kWarps);
  const int ke = active ? 8 * (c0 + (c1 - c0) * (warp + 1) / kWarps) : kb;
  const int64_t row_bytes = static_cast<int64_t>(a.n) * BITS / 8;
  const uint8_t* cbase = a.codes + (nc / 32) * 4 * BITS;
  const T* x = static_cast<const T*>(a.x);
  const T* xr[MR];
#pragma unroll
  for (int r = 0; r < MR; ++r) xr[r] = x + static_cast<int64_t>(m0 + min(r, rows - 1)) * a.k;
  uint32_t ring[kDepth][BITS];
  float xring[kDepth][MR];
  auto load = [&](int k, uint32_t(&w)[BITS], float(&xv)[MR]) {
    if (k < ke) {
      load_chunk<BITS, ChunkLoad::stream>(cbase + k * row_bytes, w);
#pragma unroll
      for (int r = 0; r < MR; ++r) xv[r] = to_f32(xr[r][k]);
    }
  };
#pragma unroll
  for (int d = 0; d < kDepth; ++d) load(kb + d, ring[d], xring[d]);
  const uint32_t one = magic_register(0x3F800000u);
  const uint32_t x80 = magic_register(0x80808080u), c3f = magic_register(0x3F000000u);
  const T* sc = reinterpret_cast<const T*>(a.scales);
  const T* bi = reinterpret_cast<const T*>(a.biases);
  const int gmask = (1 << a.log2_group) - 1;
  float acc[MR][32] = {}, dq[MR][32] = {}, sx[MR] = {};
  // kb and ke are multiples of 8, so a pass of kDepth rows never straddles a group boundary.
  for (int k = kb; k < ke; k += kDepth) {
#pragma unroll
    for (int d = 0; d < kDepth; ++d) {
      if constexpr (BITS == 2 || BITS == 4) {  // byte permutes: 1.04-1.26x (H200, PERF.md)
        constexpr int kPerWord = 32 / BITS;
#pragma unroll
        for (int wi = 0; wi < BITS; ++wi) {
          const BytePlanes<BITS> bp(ring[d][wi], x80);
#pragma unroll
          for (int i = 0; i < kPerWord; ++i) {
            const float v = bp.code(i, c3f);
#pragma unroll
            for (int r = 0; r < MR; ++r)
              dq[r][wi * kPerWord + i] = fmaf(xring[d][r], v, dq[r][wi * kPerWord + i]);
          }
        }
      } else {
#pragma unroll
        for (int j = 0; j < 32; ++j) {
          const float v = code_unit<BITS>(ring[d], j, one);
#pragma unroll
          for (int r = 0; r < MR; ++r) dq[r][j] = fmaf(xring[d][r], v, dq[r][j]);
        }
      }
#pragma unroll
      for (int r = 0; r < MR; ++r) sx[r] += xring[d][r];
      load(k + d + kDepth, ring[d], xring[d]);
    }
    if (((k + kDepth) & gmask) != 0 && k + kDepth < ke) continue;
    // The end of a group (or of this warp's rows):
    // y += s·2^bits·(Σ x·(1 + q/2^bits) - Σx) + b·Σx with the group's scales.
    const int64_t si = static_cast<int64_t>(k >> a.log2_group) * a.n + nc;
#pragma unroll
    for (int j0 = 0; j0 < 32; j0 += 8) {
      float s8[8], b8[8];
      load8(sc + si + j0, s8);
      load8(bi + si + j0, b8);
#pragma unroll
      for (int j = 0; j < 8; ++j)
#pragma unroll
        for (int r = 0; r < MR; ++r) {
          acc[r][j0 + j] = fmaf(s8[j] * static_cast<float>(1 << BITS), dq[r][j0 + j] - sx[r],
                                fmaf(b8[j], sx[r], acc[r][j0 + j]));
          dq[r][j0 + j] = 0.0f;
        }
    }
#pragma unroll
    for (int r = 0; r < MR; ++r) sx[r] = 0.0f;
  }
#pragma unroll
  for (int r = 0; r < MR; ++r)
#pragma unroll
    for (int j = 0; j < 32; ++j) red[(warp * MR + r) * kCols + 32 * lane + (j ^ lane)] = acc[r][j];
  __syncthreads();
  T* y = static_cast<T*>(a.y);
  for (int i = threadIdx.x; i < rows * kCols; i += kThreads) {
    const int r = i / kCols, c = i % kCols, n = n0 + c;
    if (n >= a.n) continue;
    const int at = 32 * (c / 32) + ((c % 32) ^ (c / 32));
    float v = 0.0f;
#pragma unroll
    for (int wp = 0; wp < kWarps; ++wp) v += red[(wp * MR + r) * kCols + at];
    const int64_t idx = static_cast<int64_t>(m0 + r) * a.n + n;
    if (a.split.splits == 1)
      y[idx] = from_f32<T>(v);
    else
      __stcg(a.split.partials + static_cast<int64_t>(blockIdx.y) * a.m * a.n + idx, v);
  }
  if (a.split.splits > 1)
    split_finish<T>(a.split, blockIdx.z * gridDim.x + blockIdx.x, m0, m0 + rows, n0, kCols, y);
}

template <class T, int BITS, int MR>
void launch_qvm(const QvmArgs& a, dim3 grid, cudaStream_t stream) {
  constexpr int kSmem = kWarps * MR * kCols * static_cast<int>(sizeof(float));
  static const cudaError_t attr = cudaFuncSetAttribute(
      qvm_affine_kernel<T, BITS, MR>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
  QUANTA_CUDA_CHECK(attr);
  qvm_affine_kernel<T, BITS, MR><<<grid, kThreads, kSmem, stream>>>(a);
  QUANTA_CUDA_CHECK_LAUNCH();
}

// CTAs of one instantiation resident on the whole GPU at once (queried once).
template <class T, int BITS, int MR>
int resident_qvm() {
  static const int n = [] {
    constexpr int kSmem = kWarps * MR * kCols * static_cast<int>(sizeof(float));
    QUANTA_CUDA_CHECK(cudaFuncSetAttribute(qvm_affine_kernel<T, BITS, MR>,
                                           cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
    int per_sm = 0;
    QUANTA_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &per_sm, qvm_affine_kernel<T, BITS, MR>, kThreads, kSmem));
    return std::max(1, per_sm) * multiprocessor_count();
  }();
  return n;
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
  if (!alignment_ok(w.codes, 16, ctx, kName, kOp, "w.codes") ||
      !alignment_ok(w.scales, 16, ctx, kName, kOp, "w.scales") ||
      !alignment_ok(w.biases, 16, ctx, kName, kOp, "w.biases"))
    return matmul_generic(x, w, nullptr, y, ctx);
  QvmArgs a{};
  set_affine_operands(a, x, w, y);
  const int mr = a.m == 1 ? 1 : 2;
  const int col_tiles = (a.n + kCols - 1) / kCols;
  const int zs = (a.m + mr - 1) / mr;
  // One wave of resident CTAs; every warp keeps at least one block of 8 K-rows.
  int resident = 1;
  dispatch_dtype(x.dtype, [&]<class T>() {
    dispatch_value<kAffineBitsList>(w.format.bits, [&]<int BITS>() {
      resident = mr == 1 ? resident_qvm<T, BITS, 1>() : resident_qvm<T, BITS, 2>();
    });
  });
  const int splits = std::clamp(resident / (col_tiles * zs), 1, std::max(1, a.k / 8 / kWarps));
  const cudaStream_t stream = stream_of(ctx);
  a.split = split_tile(splits, a.m, a.n, col_tiles * zs, stream);
  const dim3 grid(static_cast<unsigned>(col_tiles), static_cast<unsigned>(splits),
                  static_cast<unsigned>(zs));
  dispatch_dtype(x.dtype, [&]<class T>() {
    dispatch_value<kAffineBitsList>(w.format.bits, [&]<int BITS>() {
      if (mr == 1)
        launch_qvm<T, BITS, 1>(a, grid, stream);
      else
        launch_qvm<T, BITS, 2>(a, grid, stream);
    });
  });
}

}  // namespace quanta::cuda
