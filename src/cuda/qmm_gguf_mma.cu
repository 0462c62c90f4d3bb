// qmm_gguf_mma: GGUF block formats (q4_0 .. q8_0, q2_K .. q6_K) in the [N, K] layout with f16 /
// bf16 x past qmv_gguf's M, on mma.sync m16n8k16 with f32 accumulators. Before it these M ran
// dequantize_gguf + cuBLAS, which writes and reads a dense copy of W (~335 MB for 14336 x 5120
// against 41 MB of q4_0 blocks).
//
// Each stored value q + offset is an integer below 256, exact in f16 (and, below 128, in bf16:
// every type but q8_0, which goes through f16); the offset comes off in the same half2 operation
// that undoes the magic number, so A holds the block's integers q exactly and
//   Σ_k w·x = Σ_h sc_h · Σ_{k∈h} q_k·x_k − mn_h · Σ_{k∈h} x_k          (h: 16-element halves)
// is ggml's (d·sc)·q − dmin·m per element summed in another order, with x as it is (no int8
// planes). Σ q·x is one mma per half (two chained where both halves share a scale), scaled into the
// f32 accumulators; Σ x, for the types with a min, is an mma of an all-ones A.
//
// Layout of the work:
//   CTA    = 8 warps, 128 rows of W; a warp owns two A tiles of 16 rows and one of two parts of
//            K. K is walked in steps of 256 elements (8 pieces of 32: 8 legacy blocks or one
//            super-block), each step's bytes of the 128 rows brought to shared memory by 16-byte
//            cp.async, several stages ahead; part 0 takes pieces 0-3 of every step, part 1 pieces
//            4-7, and their sums meet in shared memory at the end. (With one part, ~7 warps an SM
//            kept the schedulers 25% busy, waiting on x's loads: two parts, with the prefetch
//            where it pays, ran 1.04-1.75x faster on an H200, q2_K least.)
//            Blocks are 18-210 bytes and only 2-byte aligned, so a row's step lands at its start
//            address's phase within 16 bytes and is read back through funnel shifts (word_at).
//   lane   = (g, q): rows g and g + 8 of each A tile. For piece p it decodes words q and q + 4 of
//            the piece (elements 4q..4q+3 of each half, gguf_piece.cuh's piece_word) and takes the
//            half's k positions {2q, 2q+1, 2q+8, 2q+9} as those elements, so its B fragment is
//            x[row g of the column tile][the same 4 elements]: one 8-byte load per half, straight
//            from x, a piece ahead of its use (prefetch_x).
//   grid   = row tiles x K splits x passes of 32 rows of x, the passes of one tile adjacent so
//            that they read its blocks from L2 together; splits leave f32 partial sums that a
//            second kernel adds in split order (deterministic).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include "cuda/checks.hpp"
#include "cuda/common.cuh"
#include "cuda/expert_passes.hpp"
#include "cuda/families.hpp"
#include "cuda/gguf_piece.cuh"
#include "cuda/mma.cuh"
#include "cuda/runtime.cuh"
#include "cuda/weights.cuh"  // make_desc
#include "cuda/workspace.hpp"

namespace quanta::cuda {

namespace {

constexpr int kWarps = 4;  // warps along N
constexpr int kParts = 2;  // warps along K: each takes half of a step's pieces
constexpr int kThreads = 32 * kWarps * kParts;
constexpr int kTiles = 2;                       // A tiles of 16 rows a warp
constexpr int kCtaRows = kWarps * kTiles * 16;  // rows of W a CTA
constexpr int kStepElems = 256;                 // K a pipeline stage
constexpr int kStepPieces = kStepElems / 32, kPartPieces = kStepPieces / kParts;
constexpr int kMaxMT = 4;  // column tiles of 8 rows of x a pass
constexpr int kMTChoices[] = {1, 2, kMaxMT};
constexpr std::size_t kSmemBudget = 100 * 1024;  // two CTAs an SM

template <Scheme S>
constexpr int step_bytes() {
  return kStepElems / Gguf<S>::kElems * Gguf<S>::kBytes;
}
// A row's slot of a stage: the 16-byte chunks covering its step from any even phase, a spare word
// for word_at, and a stride of 4 mod 8 words, so that the 8 rows g of a warp's loads fall on
// distinct banks.
template <Scheme S>
constexpr int slot_chunks() {
  return (14 + step_bytes<S>() + 15) / 16;
}
template <Scheme S>
constexpr int slot_words() {
  const int w = 4 * slot_chunks<S>() + 4;
  return w % 8 == 4 ? w : w + 4;
}
template <Scheme S>
constexpr std::size_t stage_bytes() {
  return sizeof(uint32_t) * kCtaRows * slot_words<S>();
}
template <Scheme S>
constexpr int stages() {
  return static_cast<int>(std::clamp<std::size_t>(kSmemBudget / stage_bytes<S>(), 2, 4));
}
// Whether x's fragments are loaded one piece ahead: for the blocks of 32 (H200, M = 32..64: q4_0
// 1.0-1.05x, q8_0 1.3-1.35x); the K-quants, whose scales hold more registers, ran 0.85-0.95x.
template <Scheme S>
constexpr bool prefetch_x() {
  return Gguf<S>::kElems == 32;
}
// Whether both halves of every piece share one scale and min (then one chain of two mma a piece).
template <Scheme S>
constexpr bool piece_scaled() {
  return S != Scheme::q2_K && S != Scheme::q3_K && S != Scheme::q6_K;
}

struct GgufMmaArgs {
  const uint8_t* codes;      // [batch][N][row_bytes], 16-byte aligned
  const uint8_t* codes_end;  // one past the last byte
  const void* x;             // [M][K]
  void* y;                   // [M][N]
  float* partial;            // [splits][M][N] when splits > 1
  ExpertPasses groups;       // gather: the rows of x by expert, a pass each (no K split)
  int64_t row_bytes, code_stride;
  int32_t m, n, k, passes, splits, steps_per_split;
};

// Word w of stored bytes (q + offset) as two pairs of T holding q exactly: bytes (0, 1) and (2, 3).
template <class T, Scheme S>
__device__ __forceinline__ void word_pairs(uint32_t w, uint32_t& lo, uint32_t& hi) {
  constexpr uint32_t kOff = Gguf<S>::kOffset;
  if constexpr (std::is_same_v<T, __half> || S == Scheme::q8_0) {
    // Under f16's 1024 (10 mantissa bits); minus 1024 + offset exactly.
    const __half2 sub = as_vec2<__half>((0x6400u + kOff) * 0x10001u);
    const __half2 a = __hsub2(as_vec2<__half>(__byte_perm(w, 0x64646464u, 0x4140)), sub);
    const __half2 b = __hsub2(as_vec2<__half>(__byte_perm(w, 0x64646464u, 0x4342)), sub);
    if constexpr (std::is_same_v<T, __half>) {
      lo = as_u32(a), hi = as_u32(b);
    } else {  // q8_0 with bf16 x: |q| <= 128, exact in bf16
      lo = as_u32(__float22bfloat162_rn(__half22float2(a)));
      hi = as_u32(__float22bfloat162_rn(__half22float2(b)));
    }
  } else {  // bf16, bytes below 128: under bf16's 128 (7 mantissa bits)
    const __nv_bfloat162 sub = as_vec2<__nv_bfloat16>((0x4300u + kOff) * 0x10001u);
    lo = as_u32(__hsub2(as_vec2<__nv_bfloat16>(__byte_perm(w, 0x43434343u, 0x4140)), sub));
    hi = as_u32(__hsub2(as_vec2<__nv_bfloat16>(__byte_perm(w, 0x43434343u, 0x4342)), sub));
  }
}

// kGather: pass p runs a.groups.pass[p], its expert's matrix against its rows of x (grid passes
// past the count the grouping found return at once).
template <class T, Scheme S, int MT, bool kGather>
__global__ void __launch_bounds__(kThreads, 2) qmm_gguf_mma_kernel(const GgufMmaArgs a) {
  using G = Gguf<S>;
  constexpr int kStepBytes = step_bytes<S>(), kChunks = slot_chunks<S>();
  constexpr int kSlotWords = slot_words<S>(), kStages = stages<S>();
  constexpr int kStageWords = kCtaRows * kSlotWords;
  constexpr bool kPiece = piece_scaled<S>();
  constexpr bool kPrefetch = prefetch_x<S>();
  extern __shared__ __align__(16) uint32_t ring[];  // [kStages][kCtaRows][kSlotWords]
  const int tid = static_cast<int>(threadIdx.x), lane = tid % 32;
  const int warp = tid / 32 % kWarps, part = tid / (32 * kWarps);
  const int g = lane / 4, q = lane % 4;
  // CTA id -> (row tile, split, pass), passes fastest.
  const int64_t cta = blockIdx.x;
  const int pass = static_cast<int>(cta % a.passes);
  const int split = static_cast<int>(cta / a.passes % a.splits);
  const int n0 = static_cast<int>(cta / (int64_t{a.passes} * a.splits)) * kCtaRows;
  const int steps = (a.k + kStepElems - 1) / kStepElems;
  const int s_begin = split * a.steps_per_split;
  const int nsteps = min(steps, s_begin + a.steps_per_split) - s_begin;
  int64_t wbase = 0;  // gather: the expert's first byte
  ExpertPass gp{};
  if constexpr (kGather) {
    grid_dependency_wait();  // the passes: behind the grouping kernel
    if (pass >= *a.groups.count) return;
    gp = a.groups.pass[pass];
    wbase = int64_t{gp.expert} * a.code_stride;
  }

  // Step st's bytes of the CTA's rows into stage b (rows past N repeat the last row).
  auto issue = [&](int st, int b) {
    const int64_t off = int64_t{st} * kStepBytes;
    const int bytes = static_cast<int>(min(int64_t{kStepBytes}, a.row_bytes - off));
    uint32_t* buf = ring + b * kStageWords;
#pragma unroll
    for (int j = 0; j < (kCtaRows * kChunks + kThreads - 1) / kThreads; ++j) {
      const int i = tid + kThreads * j, r = i / kChunks, c = i % kChunks;
      if (i >= kCtaRows * kChunks) break;
      const int64_t at = wbase + int64_t{min(n0 + r, a.n - 1)} * a.row_bytes + off;
      const int phase = static_cast<int>(at & 15);
      if (16 * c >= phase + bytes) continue;  // past the step
      const uint8_t* src = a.codes + (at - phase) + 16 * c;
      uint32_t* dst = buf + r * kSlotWords + 4 * c;
      const int64_t left = a.codes_end - src;
      if (left >= 16) {
        cp_async_16(dst, src, true);
      } else {  // the matrix's last bytes, byte by byte: no load reaches past its end
        for (int e = 0; e < left; ++e) reinterpret_cast<uint8_t*>(dst)[e] = src[e];
      }
    }
  };

#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < nsteps) issue(s_begin + s, s);
    cp_async_commit();
  }
  if constexpr (!kGather) grid_dependency_wait();  // x, y, partials: behind the previous kernel

  const int m0 = 32 * pass;
  const T* x = static_cast<const T*>(a.x);
  const T* xr[MT];
#pragma unroll
  for (int c = 0; c < MT; ++c) {  // rows past M (or the pass) read its last row (not stored)
    const int row = kGather ? a.groups.order[gp.start + min(8 * c + g, gp.rows - 1)]
                            : min(m0 + 8 * c + g, a.m - 1);
    xr[c] = x + int64_t{row} * a.k + 4 * q;
  }
  constexpr uint32_t kOne2 = std::is_same_v<T, __half> ? 0x3C003C00u : 0x3F803F80u;
  const uint32_t ones[4] = {kOne2, kOne2, kOne2, kOne2};

  float acc[kTiles][MT][4] = {};
  // x's fragments one piece ahead (kPrefetch): in flight while this piece decodes and multiplies
  // (x's slices do not stay in L1 beside the ring, so a load at the use waits for L2).
  uint2 xnext[MT][2];
  auto load_x = [&](int kp, uint2(&dst)[MT][2]) {  // the fragments of the piece at kp
#pragma unroll
    for (int c = 0; c < MT; ++c) {
      dst[c][0] = __ldg(reinterpret_cast<const uint2*>(xr[c] + kp));
      dst[c][1] = __ldg(reinterpret_cast<const uint2*>(xr[c] + kp + 16));
    }
  };
  if constexpr (kPrefetch) {
    const int k0 = s_begin * kStepElems + 32 * kPartPieces * part;
    if (nsteps > 0 && k0 < a.k) load_x(k0, xnext);
  }
  for (int it = 0; it < nsteps; ++it) {
    cp_async_wait<kStages - 2>();
    __syncthreads();  // stage it is in; every warp is done with stage it - 1
    if (it + kStages - 1 < nsteps) issue(s_begin + it + kStages - 1, (it + kStages - 1) % kStages);
    cp_async_commit();
    const int st = s_begin + it;
    const uint32_t* buf = ring + (it % kStages) * kStageWords;
    const int64_t off = int64_t{st} * kStepBytes;
    const int pieces = min(kStepPieces, (a.k - st * kStepElems) / 32);
    const int p_begin = kPartPieces * part, p_end = min(pieces, p_begin + kPartPieces);
    const uint32_t* rs[kTiles][2];
    int base[kTiles][2];
#pragma unroll
    for (int t = 0; t < kTiles; ++t)
#pragma unroll
      for (int rho = 0; rho < 2; ++rho) {
        const int r = 32 * warp + 16 * t + 8 * rho + g;
        rs[t][rho] = buf + r * kSlotWords;
        base[t][rho] =
            static_cast<int>((wbase + int64_t{min(n0 + r, a.n - 1)} * a.row_bytes + off) & 15);
      }
#pragma unroll 1
    for (int p = p_begin; p < p_end; ++p) {
      const int kp = st * kStepElems + 32 * p;
      uint2 xcur[MT][2];
      if constexpr (kPrefetch) {
#pragma unroll
        for (int c = 0; c < MT; ++c) xcur[c][0] = xnext[c][0], xcur[c][1] = xnext[c][1];
        const int kn = p + 1 < p_end ? kp + 32 : (st + 1) * kStepElems + 32 * p_begin;
        if (kn < a.k) load_x(kn, xnext);
      }
      // A fragments: av[t][h] = {row g k(2q, 2q+1), row g+8, row g k(2q+8, 2q+9), row g+8}.
      uint32_t av[kTiles][2][4];
      float sc[kTiles][2][2], mn[kTiles][2][2];  // [tile][rho][half]
#pragma unroll
      for (int t = 0; t < kTiles; ++t)
#pragma unroll
        for (int rho = 0; rho < 2; ++rho) {
          piece_scales<S>(rs[t][rho], base[t][rho], p, sc[t][rho], mn[t][rho]);
#pragma unroll
          for (int h = 0; h < 2; ++h)
            word_pairs<T, S>(piece_word<S>(rs[t][rho], base[t][rho], p, q + 4 * h), av[t][h][rho],
                             av[t][h][rho + 2]);
        }
      if constexpr (!kPrefetch) load_x(kp, xcur);
#pragma unroll
      for (int c = 0; c < MT; ++c) {
        const uint32_t b[2][2] = {{xcur[c][0].x, xcur[c][0].y}, {xcur[c][1].x, xcur[c][1].y}};
        float xs[2][4] = {};  // Σx of each half (or of the piece in xs[0]) for columns 2q, 2q + 1
        if constexpr (G::kMin) {
          mma_16816<T>(xs[0], ones, b[0]);
          mma_16816<T>(xs[kPiece ? 0 : 1], ones, b[1]);
        }
#pragma unroll
        for (int t = 0; t < kTiles; ++t) {
#pragma unroll
          for (int h = 0; h < (kPiece ? 1 : 2); ++h) {
            float d[4] = {};
            if constexpr (kPiece) {
              mma_16816<T>(d, av[t][0], b[0]);
              mma_16816<T>(d, av[t][1], b[1]);
            } else {
              mma_16816<T>(d, av[t][h], b[h]);
            }
#pragma unroll
            for (int i = 0; i < 4; ++i) {
              acc[t][c][i] = fmaf(sc[t][i / 2][h], d[i], acc[t][c][i]);
              if constexpr (G::kMin) acc[t][c][i] = fmaf(-mn[t][i / 2][h], xs[h][i], acc[t][c][i]);
            }
          }
        }
      }
    }
  }
  cp_async_wait<0>();
  grid_dependency_release();  // the reduction (or the next call) may launch now
  {  // the two parts' sums meet in the drained ring; part 0 adds them and stores
    static_assert(kParts == 2, "one part writes, the other adds");
    constexpr int kHalf = kThreads / 2;
    static_assert(sizeof(float) * kTiles * MT * 4 * kHalf <=
                  sizeof(uint32_t) * kStages * kStageWords);
    float* red = reinterpret_cast<float*>(ring);  // [tile][column tile][i][thread of part 0]
    __syncthreads();                              // every warp is done with the ring
    if (part == 1) {
#pragma unroll
      for (int t = 0; t < kTiles; ++t)
#pragma unroll
        for (int c = 0; c < MT; ++c)
#pragma unroll
          for (int i = 0; i < 4; ++i)
            red[((t * MT + c) * 4 + i) * kHalf + tid - kHalf] = acc[t][c][i];
    }
    __syncthreads();
    if (part == 1) return;
#pragma unroll
    for (int t = 0; t < kTiles; ++t)
#pragma unroll
      for (int c = 0; c < MT; ++c)
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[t][c][i] += red[((t * MT + c) * 4 + i) * kHalf + tid];
  }

  // C[g + 8(i / 2)][2q + i % 2] of tile t, column tile c: row n of W, row xm of x.
  const bool direct = a.splits == 1;
  T* y = static_cast<T*>(a.y);
  float* part_out = a.partial + int64_t{split} * a.m * a.n;
#pragma unroll
  for (int t = 0; t < kTiles; ++t)
#pragma unroll
    for (int c = 0; c < MT; ++c)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int n = n0 + 32 * warp + 16 * t + g + 8 * (i / 2), j = 8 * c + 2 * q + i % 2;
        int xm = m0 + j;
        if constexpr (kGather) xm = j < gp.rows ? a.groups.order[gp.start + j] : a.m;
        if (n >= a.n || xm >= a.m) continue;
        const int64_t at = int64_t{xm} * a.n + n;
        if (direct)
          y[at] = from_f32<T>(acc[t][c][i]);
        else
          part_out[at] = acc[t][c][i];
      }
}

// y = Σ over the splits of the partial sums, in split order.
template <class T>
__global__ void qmm_gguf_mma_reduce_kernel(const float* partial, T* y, int64_t mn, int splits) {
  grid_dependency_wait();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= mn) return;
  float v = partial[i];
  for (int s = 1; s < splits; ++s) v += partial[s * mn + i];
  y[i] = from_f32<T>(v);
}

// The kernel's shared-memory limit raised to its ring, once.
template <class T, Scheme S, int MT, bool kGather>
void allow_ring() {
  static const bool done = [] {
    QUANTA_CUDA_CHECK(cudaFuncSetAttribute(qmm_gguf_mma_kernel<T, S, MT, kGather>,
                                           cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           static_cast<int>(stages<S>() * stage_bytes<S>())));
    return true;
  }();
  (void)done;
}

// Resident CTAs an SM.
template <class T, Scheme S, int MT, bool kGather>
int ctas_per_sm() {
  static const int n = [] {
    allow_ring<T, S, MT, kGather>();
    constexpr std::size_t smem = stages<S>() * stage_bytes<S>();
    int b = 0;
    QUANTA_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &b, qmm_gguf_mma_kernel<T, S, MT, kGather>, kThreads, smem));
    return std::max(b, 1);
  }();
  return n;
}

template <class T, Scheme S>
void launch(GgufMmaArgs a, cudaStream_t stream) {
  const int mt = a.m <= 8 ? 1 : a.m <= 16 ? 2 : kMaxMT;
  a.passes = (a.m + 8 * kMaxMT - 1) / (8 * kMaxMT);
  const int64_t tiles = (a.n + kCtaRows - 1) / kCtaRows;
  const int steps = (a.k + kStepElems - 1) / kStepElems;
  dispatch_value<kMTChoices>(mt, [&]<int MT>() {
    // Splits of K fill the resident slots that the row tiles and passes leave empty, at least
    // two steps each.
    const int64_t slots = int64_t{ctas_per_sm<T, S, MT, false>()} * multiprocessor_count();
    const int64_t want = std::max<int64_t>(1, slots / (tiles * a.passes));
    a.splits = static_cast<int32_t>(std::min<int64_t>(want, std::max(1, steps / 2)));
    a.steps_per_split = (steps + a.splits - 1) / a.splits;
    a.splits = (steps + a.steps_per_split - 1) / a.steps_per_split;  // none empty
    const int64_t ctas = tiles * a.splits * a.passes;
    if (ctas > INT32_MAX) throw Error("[quanta::matmul] qmm_gguf_mma: the grid is too large");
    const int64_t mn = int64_t{a.m} * a.n;
    if (a.splits > 1)
      a.partial = static_cast<float*>(
          stream_scratch(stream, Scratch::split_partials,
                         sizeof(float) * static_cast<std::size_t>(mn) * a.splits));
    constexpr std::size_t smem = stages<S>() * stage_bytes<S>();
    QUANTA_CUDA_CHECK(launch_dependent(qmm_gguf_mma_kernel<T, S, MT, false>,
                                       dim3(static_cast<unsigned>(ctas)), dim3(kThreads), smem,
                                       stream, a));
    if (a.splits > 1) {
      constexpr int kReduceThreads = 256;
      QUANTA_CUDA_CHECK(
          launch_dependent(qmm_gguf_mma_reduce_kernel<T>,
                           dim3(static_cast<unsigned>((mn + kReduceThreads - 1) / kReduceThreads)),
                           dim3(kReduceThreads), 0, stream, static_cast<const float*>(a.partial),
                           static_cast<T*>(a.y), mn, a.splits));
    }
  });
}

// Expert stacks: the rows of x grouped by expert on the device (expert_passes.hpp), then a pass
// of up to 32 rows of one expert per grid column; K is not split.
template <class T, Scheme S>
void launch_gather(GgufMmaArgs a, const int32_t* ids, int32_t batch, DType y_dtype, int* flag,
                   cudaStream_t stream) {
  a.groups = group_rows_by_expert(ids, a.m, batch, 8 * kMaxMT, a.y, y_dtype, a.n, flag, stream);
  a.passes = a.groups.max_passes;
  a.splits = 1;
  a.steps_per_split = (a.k + kStepElems - 1) / kStepElems;
  const int64_t ctas = (a.n + kCtaRows - 1) / kCtaRows * int64_t{a.passes};
  if (ctas > INT32_MAX)
    throw Error("[quanta::gather_matmul] gather_qmm_gguf_mma: the grid is too large");
  allow_ring<T, S, kMaxMT, true>();
  constexpr std::size_t smem = stages<S>() * stage_bytes<S>();
  QUANTA_CUDA_CHECK(launch_dependent(qmm_gguf_mma_kernel<T, S, kMaxMT, true>,
                                     dim3(static_cast<unsigned>(ctas)), dim3(kThreads), smem,
                                     stream, a));
}

}  // namespace

std::string gather_qmm_gguf_mma_supports(const Problem& p) {
  if (p.format.info().family != Family::gguf) return "GGUF block formats only";
  if (p.layout != Layout::nk) return "the [N, K] layout only";
  if (p.op != Op::gather_matmul) return "expert stacks (gather_matmul) only";
  if (p.dtype == DType::f32) return "needs f16 or bf16 activations (tensor cores)";
  if (p.compute_capability != 0 && p.compute_capability < 80)
    return "needs sm_80 or newer (bf16 mma.sync, cp.async)";
  if (p.batch > kMaxGroupedExperts)
    return "at most " + std::to_string(kMaxGroupedExperts) + " experts (grouped on the device)";
  if (p.n > INT32_MAX || p.k > INT32_MAX || p.m > INT32_MAX) return "needs M, N and K in int32";
  return {};
}

// Selected past two rows an expert on average: below, most passes hold one row, and
// gather_qmv_gguf's single-row passes ran faster (H100: 0.3-0.9x at one row an expert or fewer;
// 1.1-1.6x at two, 2.0-3.4x at four, 4-27x from eight; docs/PERF.md).
std::string gather_qmm_gguf_mma_ahead_supports(const Problem& p) {
  if (std::string why = too_few_rows_an_expert(p, 2, "gather_qmv_gguf"); !why.empty()) return why;
  return gather_qmm_gguf_mma_supports(p);
}

std::string qmm_gguf_mma_supports(const Problem& p) {
  if (p.format.info().family != Family::gguf) return "GGUF block formats only";
  if (p.layout != Layout::nk) return "the [N, K] layout only";
  if (p.op != Op::matmul || p.batch != 1) return "one matrix (a stack runs gather_qmv_gguf)";
  if (p.dtype == DType::f32) return "needs f16 or bf16 activations (tensor cores)";
  if (p.compute_capability != 0 && p.compute_capability < 80)
    return "needs sm_80 or newer (bf16 mma.sync, cp.async)";
  if (p.n > INT32_MAX || p.k > INT32_MAX || p.m > INT32_MAX) return "needs M, N and K in int32";
  return {};
}

void qmm_gguf_mma(ConstMatrixView x, const QuantizedMatrix& w, const int32_t* expert_ids,
                  MatrixView y, const Context& ctx) {
  const std::string_view kName = expert_ids ? "gather_qmm_gguf_mma" : "qmm_gguf_mma";
  const std::string_view kOp = expert_ids ? "gather_matmul" : "matmul";
  require_device_operands(x, w, expert_ids, y, kOp);
  // 16-byte cp.async from aligned addresses; x in 8-byte pieces.
  if (!alignment_ok(x.data, 16, ctx, kName, kOp, "x") ||
      !alignment_ok(w.codes, 16, ctx, kName, kOp, "w.codes"))
    return matmul_generic(x, w, expert_ids, y, ctx);
  const WeightDesc d = make_desc(w);
  GgufMmaArgs a{};
  a.codes = d.codes;
  a.codes_end = d.codes + d.code_stride * (d.batch - 1) + d.row_bytes * d.n;
  a.code_stride = d.code_stride;
  a.x = x.data;
  a.y = y.data;
  a.row_bytes = d.row_bytes;
  a.m = static_cast<int32_t>(x.rows);
  a.n = d.n;
  a.k = d.k;
  const cudaStream_t stream = stream_of(ctx);
  if (expert_ids) {
    const ExpertFlag flag = expert_flag_begin(ctx);
    dispatch_half_dtype(x.dtype, [&]<class T>() {  // f16 / bf16: gather_qmm_gguf_mma_supports
      dispatch_gguf_scheme(w.format.scheme, "[quanta::gather_matmul] gather_qmm_gguf_mma",
                           [&]<Scheme S>() {
                             launch_gather<T, S>(a, expert_ids, static_cast<int32_t>(d.batch),
                                                 y.dtype, flag.device, stream);
                           });
    });
    expert_flag_end(flag, ctx, w.batch, kOp);
    return;
  }
  dispatch_half_dtype(x.dtype, [&]<class T>() {  // f16 / bf16: qmm_gguf_mma_supports
    dispatch_gguf_scheme(w.format.scheme, "[quanta::matmul] qmm_gguf_mma",
                         [&]<Scheme S>() { launch<T, S>(a, stream); });
  });
}

}  // namespace quanta::cuda
