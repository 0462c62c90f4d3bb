// qmm_affine_mma: y = x · Wᵀ for affine W [N, K], f16/bf16 activations, larger M (prefill),
// on mma.sync tensor cores with f32 accumulators.
//
//   CTA tile   128 rows of x (m) x 128 rows of W (n), K in stages of 128 codes.
//   pipeline   3 cp.async stages of [x tile | W code tile]; scales and biases of the next stage
//              are fetched into registers one stage ahead.
//   dequant    each stage's codes become a [128 n][128 k] T tile in shared memory (once per
//              CTA, shared by its 8 warps: 256 threads x 2 chunks of 32 codes, s·q + b rounded
//              once, written as 16-byte rows in natural k order).
//   math       8 warps as 2 (m) x 4 (n), 64 x 32 each: per k16 step 4 ldmatrix.x4 for x, 2 for
//              W, 16 mma.sync m16n8k16. Tiles are [rows][128] with 16-byte chunks XOR-swizzled by
//              row, so ldmatrix and the copies are conflict-free.
//   split-K    over gridDim.z when the (m, n) tiles alone would leave multiprocessors idle.
//   gather     (kGather, expert stacks) gridDim.y walks the passes of group_rows_by_expert: a
//              pass is up to 128 rows of x with one expert, gathered through `order` into the x
//              tile and scattered back into y the same way; K is not split.
//   scaled     (S a microscaled or fp8 scheme, expert stacks only) the tile holds v·s, exact in x's
//              dtype (E2M1 or fp8 values times an E8M0 or E4M3 scale; E8M0 with bf16 x only), and
//              fp8's row or tensor scale and nvfp4's global scale multiply the f32 sums.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

#include "cuda/affine_unpack.cuh"
#include "cuda/common.cuh"
#include "cuda/expert_passes.hpp"
#include "cuda/mma.cuh"
#include "cuda/runtime.cuh"
#include "cuda/scaled_decode.cuh"
#include "cuda/split_k.cuh"
#include "quanta/error.hpp"

namespace quanta::cuda {

struct MmaArgs {
  const uint8_t* codes;   // [N][K·bits/8]
  const uint8_t* scales;  // [N][K/G] of T
  const uint8_t* biases;
  const void* x;  // [M][K]
  void* y;        // [M][N]
  SplitTile split;
  ExpertPasses groups;                             // gather: the rows of x by expert
  int64_t code_stride, scale_stride, bias_stride;  // gather: bytes per expert
  float global;                                    // scaled: nvfp4's global scale (1 otherwise)
  int32_t per_row;  // fp8: 1 for a scale per row of W, 0 for one per matrix
  int32_t m, n, k, log2_group;
  int32_t kslice;  // codes of K per split, a multiple of kMmaBK
};

inline constexpr int kMmaThreads = 256;
inline constexpr int kMmaBM = 128, kMmaBN = 128, kMmaBK = 128;
inline constexpr int kMmaStages = 3;
inline constexpr int kMmaTileBytes = 128 * kMmaBK * 2;  // one [128][128] tile of T

template <int BITS>
struct MmaGeom {
  static constexpr int kCodeRow = kMmaBK * BITS / 8;  // bytes of one W row per stage
  static constexpr int kCodeBytes = kMmaBN * kCodeRow;
  static constexpr int kStageBytes = kMmaTileBytes + kCodeBytes;
  static constexpr int kSmemBytes = kMmaStages * kStageBytes + kMmaTileBytes;  // + dequantized W
};

// Byte offset of 16-byte chunk c of row r in a [128][128] T tile (256-byte rows).
__device__ __forceinline__ int tile_offset(int r, int c) {
  return r * 256 + ((c ^ (r & 7)) << 4);
}

// The pair (of the 16) holding code c, and whether c is its high half.
template <int BITS>
__device__ constexpr int pair_of(int c) {
  for (int i = 0; i < 16; ++i)
    if (pair_lo<BITS>(i) == c || pair_hi<BITS>(i) == c) return i;
  return 0;
}

// Codes per scale along K: the microscaled schemes' group, 0 for fp8 (a row or tensor scale) and
// for affine (its own scales).
template <Scheme S>
constexpr int scale_group() {
  if constexpr (S == Scheme::affine) {
    return 0;
  } else {
    return ScaledTraits<S>::kGroup;
  }
}

// Two floats as a pair of T, each rounded once.
template <class T>
__device__ __forceinline__ uint32_t pair_of_floats(float lo, float hi) {
  if constexpr (std::is_same_v<T, __half>)
    return as_u32(__floats2half2_rn(lo, hi));
  else
    return as_u32(__floats2bfloat162_rn(lo, hi));
}

// The scaled schemes' chunk of 32 codes (BITS 32-bit words, element order) as 16 pairs of T in
// natural order, each v·s exact; s covers codes 0-15 and 16-31 (fp8's scales come later).
template <class T, Scheme S, int BITS>
__device__ __forceinline__ void scaled_chunk(const uint32_t (&w)[BITS], const float (&s)[2],
                                             uint32_t (&nat)[16]) {
  constexpr ElementCode kCode = ScaledTraits<S>::kCode;
  constexpr int kPerWord = 32 / BITS;  // 8 fp4 or 4 fp8 codes a word
  constexpr float kUnit = kCode == ElementCode::e2m1 ? 16384.0f : 1.0f;  // e2m1 reads v·2^-14
#pragma unroll
  for (int i = 0; i < BITS; ++i) {
    float v[kPerWord];
    decode_word<kCode>(w[i], v);
    const float si = s[kPerWord * i / 16] * kUnit;
#pragma unroll
    for (int j = 0; j < kPerWord; j += 2)
      nat[(kPerWord * i + j) / 2] = pair_of_floats<T>(v[j] * si, v[j + 1] * si);
  }
}

template <class T, int BITS, bool kGather, Scheme S = Scheme::affine>
__global__ void __launch_bounds__(kMmaThreads, 1) qmm_affine_mma_kernel(const MmaArgs a) {
  constexpr bool kScaled = S != Scheme::affine;
  using Geo = MmaGeom<BITS>;
  extern __shared__ __align__(128) uint8_t smem[];
  uint8_t* wdq = smem + kMmaStages * Geo::kStageBytes;  // [128 n][128 k] dequantized W
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int wm = warp / 4, wn = warp % 4;  // warp tile: rows 64·wm.., columns 32·wn..
  const int n0 = blockIdx.x * kMmaBN;
  int m0 = blockIdx.y * kMmaBM, m_end = a.m;  // the tile's rows of x: [m0, min(m0 + 128, m_end))
  const int32_t* order = nullptr;             // gather: row r of the tile is x's row order[r]
  const uint8_t* codes = a.codes;
  const uint8_t* scale_bytes = a.scales;
  const uint8_t* bias_bytes = a.biases;
  if constexpr (kGather) {
    grid_dependency_wait();  // the passes: behind the grouping kernel
    if (static_cast<int>(blockIdx.y) >= *a.groups.count) return;
    const ExpertPass gp = a.groups.pass[blockIdx.y];
    codes += gp.expert * a.code_stride;
    scale_bytes += gp.expert * a.scale_stride;
    bias_bytes += gp.expert * a.bias_stride;
    order = a.groups.order + gp.start;
    m0 = 0;
    m_end = gp.rows;
  }
  const int kb = blockIdx.z * a.kslice, ke = min(a.k, kb + a.kslice);
  const int num_stages = (ke - kb + kMmaBK - 1) / kMmaBK;
  const int64_t row_bytes = static_cast<int64_t>(a.k) * BITS / 8;
  const int groups = a.k >> a.log2_group;
  const T* x = static_cast<const T*>(a.x);
  const T* sc = reinterpret_cast<const T*>(scale_bytes);
  const T* bi = reinterpret_cast<const T*>(bias_bytes);
  // The rows of x this thread copies into the x tile (rows tid / 16 + 16 i), null past the tile.
  constexpr int kXCopies = 128 * 16 / kMmaThreads;
  const T* xsrc[kXCopies];
#pragma unroll
  for (int i = 0; i < kXCopies; ++i) {
    const int r = (tid + i * kMmaThreads) / 16;
    xsrc[i] = m0 + r < m_end
                  ? x + static_cast<int64_t>(kGather ? order[r] : m0 + r) * a.k + 8 * (tid % 16)
                  : nullptr;
  }

  auto load_stage = [&](int st) {
    uint8_t* base = smem + (st % kMmaStages) * Geo::kStageBytes;
    const int k0 = kb + st * kMmaBK;
    // x tile: 128 rows x 16 chunks of 8 activations.
#pragma unroll
    for (int i = 0; i < kXCopies; ++i) {
      const int u = tid + i * kMmaThreads, r = u / 16, c = u % 16;
      const bool ok = xsrc[i] != nullptr && k0 + 8 * c < ke;
      cp_async_16(base + tile_offset(r, c), ok ? xsrc[i] + k0 : x, ok);
    }
    // W codes: 128 rows x kCodeRow bytes.
    uint8_t* cb = base + kMmaTileBytes;
    constexpr int kUnits = Geo::kCodeRow / 16;
    const int64_t end_byte = static_cast<int64_t>(ke) * BITS / 8;
#pragma unroll
    for (int i = 0; i < (128 * kUnits + kMmaThreads - 1) / kMmaThreads; ++i) {
      const int u = tid + i * kMmaThreads;
      if (u >= 128 * kUnits) break;
      const int r = u / kUnits, c = u % kUnits;
      const int64_t byte = static_cast<int64_t>(k0) * BITS / 8 + 16 * c;
      const bool ok = n0 + r < a.n && byte < end_byte;
      const uint8_t* src = ok ? codes + static_cast<int64_t>(n0 + r) * row_bytes + byte : codes;
      cp_async_16(cb + r * Geo::kCodeRow + 16 * c, src, ok);
    }
  };
  // This thread dequantizes row dr, codes [64·dh, 64·dh + 64) of each stage: two chunks.
  const int dr = tid / 2, dh = tid % 2;
  auto load_scales = [&](int st, T(&s)[2], T(&b)[2]) {
    const int k0 = kb + st * kMmaBK + 64 * dh;
#pragma unroll
    for (int c = 0; c < 2; ++c) {
      const int kc = k0 + 32 * c;
      const bool ok = st < num_stages && n0 + dr < a.n && kc < ke;
      const int64_t si =
          static_cast<int64_t>(ok ? n0 + dr : 0) * groups + (ok ? kc >> a.log2_group : 0);
      s[c] = ok ? sc[si] : from_f32<T>(0.0f);
      b[c] = ok ? bi[si] : from_f32<T>(0.0f);
    }
  };

  float acc[4][4][4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int c = 0; c < 4; ++c) acc[i][j][c] = 0.0f;

#pragma unroll
  for (int st = 0; st < kMmaStages - 1; ++st) {
    if (st < num_stages) load_stage(st);
    cp_async_commit();
  }
  T s_cur[2], b_cur[2], s_next[2], b_next[2];
  if constexpr (!kScaled) load_scales(0, s_cur, b_cur);
  // Scaled: row dr's scale bytes (E8M0 / E4M3 per group of 32 / 16 codes).
  constexpr int kScaleGroup = scale_group<S>();
  const uint8_t* srow =
      scale_bytes +
      (kScaleGroup ? static_cast<int64_t>(min(n0 + dr, a.n - 1)) * (a.k / max(kScaleGroup, 1)) : 0);

  // The warp's 16-row x tiles that hold rows of x: a short last tile or pass skips the mma of the
  // empty ones (the warp still dequantizes its share of W).
  const int live = min(4, max(0, (m_end - m0 - 64 * wm + 15) / 16));
  for (int st = 0; st < num_stages; ++st) {
    cp_async_wait<kMmaStages - 2>();
    __syncthreads();  // stage st landed; the previous stage's math is done with wdq
    if (st + kMmaStages - 1 < num_stages) load_stage(st + kMmaStages - 1);
    cp_async_commit();
    if constexpr (!kScaled) load_scales(st + 1, s_next, b_next);

    const uint8_t* base = smem + (st % kMmaStages) * Geo::kStageBytes;
    {  // dequantize W codes -> wdq, natural k order
      const uint8_t* cb = base + kMmaTileBytes + dr * Geo::kCodeRow + 8 * BITS * dh;
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        uint32_t w[BITS];
#pragma unroll
        for (int i = 0; i < BITS; ++i)
          w[i] = reinterpret_cast<const uint32_t*>(cb + 4 * BITS * c)[i];
        uint32_t nat[16];  // nat[j] = (code 2j, code 2j + 1)
        if constexpr (kScaled) {
          const int kc = kb + st * kMmaBK + 64 * dh + 32 * c;  // the chunk's first code
          float sg[2] = {1.0f, 1.0f};
          if (kc < ke) {
            if constexpr (S == Scheme::nvfp4) {
              sg[0] = codec::e4m3_to_float(srow[kc / 16]);
              sg[1] = codec::e4m3_to_float(srow[kc / 16 + 1]);
            } else if constexpr (S == Scheme::mxfp4 || S == Scheme::mxfp8) {
              sg[0] = sg[1] = codec::e8m0_to_float(srow[kc / 32]);
            }
          }
          scaled_chunk<T, S, BITS>(w, sg, nat);
        } else {
          uint32_t ap[16];
          dequant_chunk<T, BITS>(w, s_cur[c], b_cur[c], ap);
#pragma unroll
          for (int j = 0; j < 16; ++j) {
            const int p0 = pair_of<BITS>(2 * j), p1 = pair_of<BITS>(2 * j + 1);
            const uint32_t h0 = pair_hi<BITS>(p0) == 2 * j, h1 = pair_hi<BITS>(p1) == 2 * j + 1;
            nat[j] = __byte_perm(ap[p0], ap[p1], (h0 ? 0x0032 : 0x0010) | (h1 ? 0x7600 : 0x5400));
          }
        }
#pragma unroll
        for (int q4 = 0; q4 < 4; ++q4)
          *reinterpret_cast<uint4*>(wdq + tile_offset(dr, 8 * dh + 4 * c + q4)) =
              make_uint4(nat[4 * q4], nat[4 * q4 + 1], nat[4 * q4 + 2], nat[4 * q4 + 3]);
      }
    }
    __syncthreads();
    const uint8_t* xt = base;
#pragma unroll
    for (int kk = 0; kk < kMmaBK / 16; ++kk) {
      if (live == 0) break;
      uint32_t af[4][4], bf[4][2];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int r = 64 * wm + 16 * i + (lane % 8) + 8 * ((lane / 8) % 2);
        if (i < live) ldmatrix_x4(af[i], xt + tile_offset(r, 2 * kk + lane / 16));
      }
#pragma unroll
      for (int j = 0; j < 4; j += 2) {
        const int r = 32 * wn + 8 * (j + lane / 16) + (lane % 8);
        uint32_t t4[4];
        ldmatrix_x4(t4, wdq + tile_offset(r, 2 * kk + (lane / 8) % 2));
        bf[j][0] = t4[0];
        bf[j][1] = t4[1];
        bf[j + 1][0] = t4[2];
        bf[j + 1][1] = t4[3];
      }
#pragma unroll
      for (int i = 0; i < 4; ++i)
        if (i < live)
#pragma unroll
          for (int j = 0; j < 4; ++j) mma_16816<T>(acc[i][j], af[i], bf[j]);
    }
    if constexpr (!kScaled) {
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        s_cur[c] = s_next[c];
        b_cur[c] = b_next[c];
      }
    }
  }
  cp_async_wait<0>();

  // acc[i][j][c]: row m = m0 + 64·wm + 16·i + g + 8·(c/2), column n = n0 + 32·wn + 8·j + 2q + c%2.
  const int g = lane / 4, q = lane % 4;
  T* y = static_cast<T*>(a.y);
  float* part = a.split.partials + static_cast<int64_t>(blockIdx.z) * a.m * a.n;
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int m = m0 + 64 * wm + 16 * i + g + 8 * h, n = n0 + 32 * wn + 8 * j + 2 * q;
        if (m >= m_end || n >= a.n) continue;
        const int64_t idx = static_cast<int64_t>(kGather ? order[m] : m) * a.n + n;
        float v0 = acc[i][j][2 * h], v1 = acc[i][j][2 * h + 1];
        if constexpr (kScaled && kScaleGroup == 0) {
          const float* rs = reinterpret_cast<const float*>(scale_bytes);  // fp8: f32 [N] or [1]
          v0 *= rs[a.per_row ? n : 0];
          v1 *= rs[a.per_row ? min(n + 1, a.n - 1) : 0];
        } else if constexpr (S == Scheme::nvfp4) {
          v0 *= a.global;
          v1 *= a.global;
        }
        if (a.split.splits == 1) {
          y[idx] = from_f32<T>(v0);
          if (n + 1 < a.n) y[idx + 1] = from_f32<T>(v1);
        } else {
          __stcg(part + idx, v0);
          if (n + 1 < a.n) __stcg(part + idx + 1, v1);
        }
      }
  if (a.split.splits > 1)
    split_finish<T>(a.split, blockIdx.y * gridDim.x + blockIdx.x, m0, min(a.m, m0 + kMmaBM), n0,
                    kMmaBN, y);
}

// kGather: launched behind the grouping kernel (programmatic dependent launch).
template <class T, int BITS, bool kGather, Scheme S = Scheme::affine>
void launch_qmm_affine_mma(const MmaArgs& a, dim3 grid, cudaStream_t stream) {
  static_assert(kGather || S == Scheme::affine, "the scaled schemes run expert stacks only");
  constexpr int kSmem = MmaGeom<BITS>::kSmemBytes;
  static const cudaError_t attr =
      cudaFuncSetAttribute(qmm_affine_mma_kernel<T, BITS, kGather, S>,
                           cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
  QUANTA_CUDA_CHECK(attr);
  if constexpr (kGather) {
    QUANTA_CUDA_CHECK(launch_dependent(qmm_affine_mma_kernel<T, BITS, true, S>, grid,
                                       dim3(kMmaThreads), kSmem, stream, a));
  } else {
    qmm_affine_mma_kernel<T, BITS, false><<<grid, kMmaThreads, kSmem, stream>>>(a);
    QUANTA_CUDA_CHECK_LAUNCH();
  }
}

// An expert stack's launch set-up: the rows of x grouped by expert into passes of up to 128 rows
// (behind the previous kernel, no host sync), K whole; returns the grid (a column of passes per
// 128 rows of W). `kernel` names the caller in the error for more passes than a grid holds.
inline dim3 prepare_gather(MmaArgs& a, int32_t batch, const int32_t* ids, DType y_dtype, int* flag,
                           cudaStream_t stream, std::string_view kernel) {
  constexpr int32_t kMaxGridY = 65535;
  a.groups = group_rows_by_expert(ids, a.m, batch, kMmaBM, a.y, y_dtype, a.n, flag, stream);
  if (a.groups.max_passes > kMaxGridY)
    throw Error("[quanta::gather_matmul] " + std::string(kernel) + ": x: " + std::to_string(a.m) +
                " rows make more passes than a grid holds (" + std::to_string(kMaxGridY) + ")");
  a.kslice = (a.k + kMmaBK - 1) / kMmaBK * kMmaBK;
  a.split = split_tile(1, a.m, a.n, 0, stream);
  return dim3(static_cast<unsigned>((a.n + kMmaBN - 1) / kMmaBN),
              static_cast<unsigned>(a.groups.max_passes), 1);
}

#define QUANTA_MMA_ONE(EXTERN, T, BITS)                                                           \
  EXTERN template void launch_qmm_affine_mma<T, BITS, false>(const MmaArgs&, dim3, cudaStream_t); \
  EXTERN template void launch_qmm_affine_mma<T, BITS, true>(const MmaArgs&, dim3, cudaStream_t);
#define QUANTA_MMA_WIDTH(EXTERN, BITS) \
  QUANTA_MMA_ONE(EXTERN, __half, BITS) \
  QUANTA_MMA_ONE(EXTERN, __nv_bfloat16, BITS)

}  // namespace quanta::cuda
