// qmv_affine_i8: affine nk, M <= 2, f16/bf16 activations, 2-6 and 8-bit codes, on integer mma.
//
//   x[k] ≈ d_g·(h[k] + l[k]/256)        per group g of x: d_g = max|x|/127; h, l int8 planes
//   H[n,g] = Σ_{k∈g} q[n,k]·h[k], L = Σ q·l      exact int32 (mma m16n8k32, u8 x s8)
//   y[n] = Σ_g s[n,g]·d_g·(H + L/256) + b[n,g]·X_g,    X_g = Σ_{k∈g} x[k] (f32)
//
// Why: at M = 1 the H200 needs ~35 codes per cycle per SM on its memory roof, so the work per
// code must be tiny. Stored bytes are mma operands almost as they are: one AND (and a shift for
// 2/4 bits) makes four u8 codes, 8-bit words are operands as loaded, and one mma multiplies
// 512 codes. The f16 "split" kernels (qmv_affine_rd/_tc) spend ~0.1 instructions per code and
// stall at ~40% of the roof (docs/PERF.md). 3/5/6-bit codes take byte permutes, shifts and
// masks first (~0.7-1.2 instructions per code, cuda/i8_layout.hpp), in an order of codes over
// the registers that x's planes follow.
//
// Groups of 128 of 4-, 6- and 8-bit codes (5-bit at M = 1) run as pairs of groups of 64 that
// share the scale and bias (i8_run_group): below, G is the group of the geometry that runs.
//
// Tile: a block owns 16 rows (the mma's M); its warps split K in steps of 4 groups, and each
// serves every row of x (MT = M: both rows share the code registers). In a step,
// lane (g = lane/4, q = lane%4) streams group 4s+q of rows g and g+8 in pieces (16 bytes for
// 2/4/8 bits; whole unpack units of up to 48 bytes for 3/5/6, see I8Geom). mma
// columns 2q and 2q+1 are that group's h and l planes: lane (2q, q) feeds h and (2q+1, q) feeds
// l into B, every other lane feeds zeros, so C[g][2q..2q+1] held by lane (g, q) are exactly its
// own group's H and L: every lane applies scales for its own (row, group) pairs.
//
// x becomes its planes once per call in a pre-pass (qmv_x_planes) that writes them in B-fragment
// order; the main kernel uses programmatic dependent launch so its first code loads overlap it.
// Measured and dropped (docs/PERF.md): persistent blocks building the planes themselves (24-31
// us against 17-29 us), skipping the pre-pass entirely (only ~1.3 us saved: the main kernel is
// the cost), persistent blocks fed by bulk copies + mbarriers through shared memory (22-26 us),
// and M = 3..8 as pairs of rows of x on further warps of the block (2-5x the M = 1 time: more
// than qmm_affine_tc).
// gather_matmul (gather_qmv_affine_i8): the same kernel with a grid row per row of x, each
// against its expert's matrix (I8Args::ids), so a MoE decode step reads each chosen expert at the
// M = 1 kernel's rate; or, where rows share experts, a grid row per pass of two rows of one
// expert (group_rows_by_expert) on the M = 2 instance, which reads the expert once for both.
// The planes hold x to 16 bits relative to each group's max |x|: finer than bf16 for elements
// within 256x of their group's max and than f16 within 32x; smaller elements of a group with a
// stronger outlier lose precision (at most max|x|/65024 each).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "cuda/common.cuh"
#include "cuda/expert_passes.hpp"
#include "cuda/i8_layout.hpp"
#include "cuda/i8_warps.hpp"
#include "cuda/mma.cuh"
#include "quanta/error.hpp"

namespace quanta::cuda {

inline constexpr int kI8Rows = 16;  // rows per block (the mma's M)

struct I8Args {
  const uint8_t* codes;
  const void* scales;  // T [N, K/G]
  const void* biases;  // T [N, K/G]
  const void* x;       // T [K], 16-byte aligned
  void* y;             // T [N]
  uint32_t* planes;    // written by the pre-pass, B-fragment order (see I8Geom)
  float2* gx;          // [K/G]: (d_g, X_g), written by the pre-pass
  int32_t m, n, k;     // m <= MT rows of x; the planes and (d, X) are per row of x
  int64_t row_bytes;
  // How the warps share K's steps: 0 interleaved (warp w takes w, w + warps, ...), 1 a
  // contiguous range each, -1 the launcher decides (i8_contiguous_steps).
  int32_t contiguous = -1;
  // gather_matmul (ids null for one matrix): the expert of each row of x, whose matrix lies
  // code_stride bytes and sb_stride scales after the previous one. With pass null (MT == 1),
  // grid row m runs row m of x against expert ids[m]'s matrix; an id outside [0, batch) sets
  // *flag and NaNs the row, reading nothing of W. With passes (group_rows_by_expert, up to MT rows
  // of one expert a pass, bad ids already NaN-ed and flagged), grid row p runs pass p.
  const int32_t* ids = nullptr;
  int* flag = nullptr;
  int64_t code_stride = 0, sb_stride = 0;
  int32_t batch = 1;
  ExpertPasses passes;
};
// Geometry of one (bits, group) instance.
template <int BITS, int G>
struct I8Geom {
  static constexpr bool kWholeBytes = BITS == 2 || BITS == 4 || BITS == 8;
  static constexpr int kGroupBytes = G * BITS / 8;
  // One load per row and piece for 2/4/8 bits. 3/5/6-bit pieces are whole unpack units: the
  // whole group up to 48 bytes (12-48), else half of it (40 for 5-bit g128, 48 for 6-bit g128),
  // loaded in 16, 8 or 4-byte parts as the piece's offsets allow (rows are 16-byte aligned).
  static constexpr int kPieceBytes = kWholeBytes         ? std::min(kGroupBytes, 16)
                                     : kGroupBytes <= 48 ? kGroupBytes
                                                         : kGroupBytes / 2;
  static constexpr int kLoadWords = kPieceBytes % 16 == 0 ? 4 : kPieceBytes % 8 == 0 ? 2 : 1;
  static constexpr int kPieces = kGroupBytes / kPieceBytes;  // per group
  static constexpr int kWords = kPieceBytes / 4;             // code words per piece
  static constexpr int kUnits = kWords / I8Unit<BITS>::kWords;
  static constexpr int kRegs = kUnits * I8Unit<BITS>::kRegs;  // per piece and row
  static constexpr int kSlices = kRegs / 2;                   // mma k32 slices per piece
  static constexpr int kCodes = kPieceBytes * 8 / BITS;       // codes per piece
  // Steps held in registers; each piece is refilled right after use, so about 4-6 pieces are in
  // flight per lane (H200 int4 g64: at M = 1, 6 pieces ran 5-15% faster than 4 and 8 slower; at
  // M = 2, where the registers are capped, 6 ran 10-20% slower than 4). 4-bit at M = 1 now takes
  // 4 pieces with its codes loaded L1::evict_first (below): 1.02-1.15x the 6 pieces without it,
  // where either change alone ran 0.82-1.06x. 3/5/6 bits: the steps nearest to 96 bytes per row
  // at M = 1 (at least 2 below 96-byte groups: 5-bit g128 ran 3-15% faster with 2 than 1) and to
  // 64 at M = 2; ~2/3 and ~1.5x of that ran slower on most shapes.
  template <int MT>
  static constexpr int kDepth =
      kWholeBytes ? (kPieces == 1 ? 4 : std::max(1, (MT == 1 && BITS != 4 ? 6 : 4) / kPieces))
      : MT == 1   ? std::max(kGroupBytes < 96 ? 2 : 1, (96 + kGroupBytes / 2) / kGroupBytes)
                  : std::max(1, (64 + kGroupBytes / 2) / kGroupBytes);
  static_assert(kCodes == kSlices * 8 && kRegs % 2 == 0 && kSlices % 2 == 0);
  static_assert(kWords % I8Unit<BITS>::kWords == 0 && kGroupBytes % kPieceBytes == 0);
  // B words of one (group, plane): [piece][slice][2].
  static constexpr int kPlaneWords = kPieces * kSlices * 2;
};

// D = A·B + D, A 16x32 u8 (row), B 32x8 s8 (col), s32 accumulate. Fragments (PTX ISA,
// "mma.m16n8k32"), g = lane / 4, q = lane % 4: a[0] = A[g][4q..4q+3], a[1] = A[g+8][4q..],
// a[2] = A[g][4q+16..], a[3] = A[g+8][4q+16..]; b0 = B[4q..4q+3][g], b1 = B[4q+16..][g];
// c[0..1] = C[g][2q..2q+1], c[2..3] = C[g+8][2q..2q+1].
__device__ __forceinline__ void imma_16832(int (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                           uint32_t a3, uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// Pre-pass: one thread per unpack unit of x's positions (I8Unit: 32/BITS elements for 2/4/8
// bits, 32 for 3/5 bits, 16 for 6). Group max and sum by shuffles among the group's threads
// (consecutive lanes of one warp).
// Slot blockIdx.y of the planes and (d, X) holds row blockIdx.y of x, or with passes (a gather's
// passes of up to `per_pass` rows) row j of pass p in slot p·per_pass + j, so that a pass's rows
// lie side by side as the main kernel reads them; slots of no row are left unwritten.
template <class T, int BITS, int G>
__global__ void qmv_x_planes_kernel(const T* x_rows, uint32_t* planes_rows, float2* gx_rows, int k,
                                    ExpertPasses passes, int per_pass) {
  grid_dependency_release();  // the main kernel may start loading codes now
  grid_dependency_wait();     // x and the planes: behind the previous kernel (common.cuh)
  int row = static_cast<int>(blockIdx.y);
  if (passes.pass) {
    const int p = row / per_pass, j = row % per_pass;
    if (p >= *passes.count) return;  // uniform across the block
    const ExpertPass ps = passes.pass[p];
    if (j >= ps.rows) return;
    row = passes.order[ps.start + j];
  }
  const T* x = x_rows + static_cast<int64_t>(row) * k;
  uint32_t* planes = planes_rows + static_cast<int64_t>(blockIdx.y) * k / 2;
  float2* gx = gx_rows + static_cast<int64_t>(blockIdx.y) * (k / G);
  using Geom = I8Geom<BITS, G>;
  constexpr int kPerThread = I8Unit<BITS>::kCodes;  // x elements: one unit's positions
  constexpr int kThreadsPerGroup = G / kPerThread;
  constexpr int kRegs = I8Unit<BITS>::kRegs;  // B registers this unit makes per plane
  const int t = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  const bool live = t < k / kPerThread;
  float v[kPerThread];
  const T* src = x + static_cast<int64_t>(live ? t : 0) * kPerThread;
#pragma unroll
  for (int i = 0; i < kPerThread; ++i) v[i] = to_f32(src[i]);
  float amax = 0.0f, sum = 0.0f;
#pragma unroll
  for (int i = 0; i < kPerThread; ++i) {
    amax = fmaxf(amax, fabsf(v[i]));
    sum += v[i];
  }
#pragma unroll
  for (int o = 1; o < kThreadsPerGroup; o <<= 1) {
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    sum += __shfl_xor_sync(0xffffffffu, sum, o);
  }
  if (!live) return;
  const float d = amax > 0.0f ? amax / 127.0f : 1.0f;
  const float inv = 1.0f / d;
  const int group = t / kThreadsPerGroup, unit_in_group = t % kThreadsPerGroup;
  if (unit_in_group == 0) gx[group] = make_float2(d, sum);
  const int piece = unit_in_group / Geom::kUnits, unit_in_piece = unit_in_group % Geom::kUnits;
  uint32_t* out = planes + static_cast<int64_t>(group) * 2 * Geom::kPlaneWords;
#pragma unroll
  for (int j = 0; j < kRegs; ++j) {
    uint32_t wh = 0, wl = 0;
#pragma unroll
    for (int b = 0; b < 4; ++b) {
      const float xv = v[i8_pos<BITS>(j, b)];  // register j of this unit
      const float h = fminf(fmaxf(rintf(xv * inv), -127.0f), 127.0f);
      const float r = fmaf(-h, d, xv);  // |r| <= d/2
      const float l = fminf(fmaxf(rintf(r * inv * 256.0f), -127.0f), 127.0f);
      wh |= (static_cast<uint32_t>(static_cast<int32_t>(h)) & 0xffu) << (8 * b);
      wl |= (static_cast<uint32_t>(static_cast<int32_t>(l)) & 0xffu) << (8 * b);
    }
    // Code register r = unit_in_piece·kRegs + j of the piece is slice r/2, half r%2.
    const int r = unit_in_piece * kRegs + j;
    const int idx = (piece * Geom::kSlices + r / 2) * 2 + r % 2;
    out[idx] = wh;
    out[Geom::kPlaneWords + idx] = wl;
  }
}

// WORDS words at src in loads of LOAD words (src aligned to them). kEvictFirst: read-only loads
// marked first for eviction from L1 (L1::evict_first), so the codes streaming past do not push
// out the planes of x that every step reads again (where that measured faster: qmv_affine_i8).
template <int WORDS, int LOAD, bool kEvictFirst = false>
__device__ __forceinline__ void i8_load_piece(const uint8_t* src, uint32_t (&w)[WORDS]) {
  static_assert(WORDS % LOAD == 0);
#pragma unroll
  for (int i = 0; i < WORDS; i += LOAD) {
    const uint8_t* p = src + 4 * i;
    if constexpr (kEvictFirst && LOAD == 4) {
      asm("ld.global.nc.L1::evict_first.v4.u32 {%0, %1, %2, %3}, [%4];\n"
          : "=r"(w[i]), "=r"(w[i + 1]), "=r"(w[i + 2]), "=r"(w[i + 3])
          : "l"(p));
    } else if constexpr (kEvictFirst && LOAD == 2) {
      asm("ld.global.nc.L1::evict_first.v2.u32 {%0, %1}, [%2];\n"
          : "=r"(w[i]), "=r"(w[i + 1])
          : "l"(p));
    } else if constexpr (kEvictFirst) {
      static_assert(LOAD == 1);
      asm("ld.global.nc.L1::evict_first.u32 %0, [%1];\n" : "=r"(w[i]) : "l"(p));
    } else if constexpr (LOAD == 4) {
      const uint4 a = *reinterpret_cast<const uint4*>(p);
      w[i] = a.x, w[i + 1] = a.y, w[i + 2] = a.z, w[i + 3] = a.w;
    } else if constexpr (LOAD == 2) {
      const uint2 a = *reinterpret_cast<const uint2*>(p);
      w[i] = a.x, w[i + 1] = a.y;
    } else {
      static_assert(LOAD == 1);
      w[i] = *reinterpret_cast<const uint32_t*>(p);
    }
  }
}

// The group of the geometry that runs a matrix with groups of `group` at MT rows of x: groups of
// 128 run as two groups of 64 that share a scale and bias (x's planes and sums per 64) for 4-, 6-
// and 8-bit codes, and 5-bit at M = 1. H200, three shapes, M = 1 and 2 (docs/PERF.md): 4-bit
// 1.07-1.25x (twice as many steps per row of W, so warps take even shares, and the g64
// instances' L1 eviction policy), 8-bit 1.33-1.44x on 14336 x 5120 and 5120 x 14336 (1.01-1.02x
// on 27648 x 5120), 6-bit 1.03-1.11x, 5-bit at M = 1 1.01-1.26x (M = 2 0.76-0.94x). 2-bit
// (0.79-0.94x) and 3-bit (0.91-1.13x) keep their groups, as does every width's g64 (as two
// groups of 32: 0.5-1.09x but for 8-bit on 27648 x 5120).
constexpr int i8_run_group(int bits, int group, int mt) {
  const bool halve = bits == 4 || bits == 6 || bits == 8 || (bits == 5 && mt == 1);
  return group == 128 && halve ? 64 : group;
}

// Bytes of x's two int8 planes per row of x (the pre-pass's scratch holds them, then (d, X)).
__host__ __device__ inline std::size_t i8_planes_bytes(int k) {
  return static_cast<std::size_t>(k) * 2;
}

// ---- host side shared with qmm_affine_i8 ------------------------------------------------------

// Every affine width: 2/4/8-bit words are whole bytes of codes, 3/5/6-bit units are unpacked by
// byte permutes (cuda/i8_layout.hpp).
inline constexpr int kI8Bits[] = {2, 3, 4, 5, 6, 8};

// f.template operator()<BITS, G>() for the runtime width and group; false when either is not
// an affine width or group.
template <class F>
bool dispatch_i8_width(int bits, int group, F&& f) {
  bool hit = false;
  dispatch_value<kI8Bits>(bits, [&]<int BITS>() {
    hit = dispatch_value<quanta::detail::kAffineGroups>(
        group, [&]<int G>() { f.template operator()<BITS, G>(); });
  });
  return hit;
}

// Whether a block's warps take contiguous ranges of K's steps rather than interleaved ones: with
// 8 warps and at least 3 steps each. H200, M = 1 and 2, f16, 2-8 bits (docs/PERF.md): 1.01-1.14x
// on 4096x14336, 4096x11008 and 2048x8192 (int4 g64 4096x14336 f16 14.0 -> 12.4 us); with fewer
// warps or steps it was 0.93-1.02x.
inline bool i8_contiguous_steps(int warps, int steps) {
  return warps >= kI8MaxWarps && steps >= 3 * warps;
}

// Blocks of w = 1..8 warps of `kernel` resident per multiprocessor (blocks_per_sm[w - 1]), with
// smem_per_warp bytes of dynamic shared memory per warp, and the multiprocessor count. Launchers
// keep one per kernel instance (a static: queried once per process).
struct I8Occupancy {
  int blocks_per_sm[kI8MaxWarps] = {}, sms = 0;
  cudaError_t error = cudaSuccess;
};
template <class Kernel>
I8Occupancy i8_occupancy(Kernel kernel, std::size_t smem_per_warp) {
  I8Occupancy o;
  for (int w = 1; w <= kI8MaxWarps && o.error == cudaSuccess; ++w)
    o.error = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&o.blocks_per_sm[w - 1], kernel, 32 * w,
                                                            w * smem_per_warp);
  int dev = 0;
  if (o.error == cudaSuccess) o.error = cudaGetDevice(&dev);
  if (o.error == cudaSuccess)
    o.error = cudaDeviceGetAttribute(&o.sms, cudaDevAttrMultiProcessorCount, dev);
  return o;
}

// The error for a width the supports rule should have refused (a kernel forced past it).
inline Error i8_width_error(std::string_view kernel, int bits, int group) {
  return Error("[quanta::matmul] " + std::string(kernel) + ": no instance for " +
               std::to_string(bits) + "-bit codes in groups of " + std::to_string(group));
}

// Blocks of 8 warps the register cap must allow per multiprocessor (0: no cap). 2-bit groups of
// 64 at M = 1 took 98 registers, so one wave of 896 blocks (14336 rows) fit only 2 warps a block;
// capped at 80 (no spills) the launcher picks more warps: H100, three shapes, f16 and bf16,
// 1.14-1.27x. At M = 2, 2- and 3-bit groups of 64 and 128 capped at 128 (116-128 registers, were
// 128-151, no spills): 1.07-1.25x. Caps of 64-128 on the other instances ran 0.39-1.17x, losses,
// mixed across the shapes or within 6% (docs/PERF.md).
constexpr int qmv_i8_min_blocks(int bits, int group, int mt) {
  if (bits == 2 && group == 64 && mt == 1) return 3;
  return mt == 2 && (bits == 2 || bits == 3) && group >= 64 ? 2 : 0;
}

// G: the geometry's group (codes, x's planes and (d, X) per group of G); SG: the matrix's group,
// a multiple of G, whose scale and bias serve SG / G consecutive groups of the geometry.
template <class T, int BITS, int G, int MT, int SG = G>
__global__ void __launch_bounds__(kI8MaxWarps * 32, qmv_i8_min_blocks(BITS, G, MT))
    qmv_affine_i8_kernel(I8Args a) {
  grid_dependency_release();  // the next call's pre-pass may launch (common.cuh)
  using Geom = I8Geom<BITS, G>;
  constexpr int P = Geom::kPieces, W = Geom::kWords, DS = Geom::template kDepth<MT>;
  constexpr int LW = Geom::kLoadWords;
  extern __shared__ __align__(16) uint8_t smem[];
  const int lane = static_cast<int>(threadIdx.x) & 31, warp = static_cast<int>(threadIdx.x) >> 5;
  const int warps = static_cast<int>(blockDim.x) >> 5;
  const int g = lane >> 2, q = lane & 3;
  const int row0 = static_cast<int>(blockIdx.x) * kI8Rows;
  const int groups = a.k / G;
  const uint8_t* codes = a.codes;
  const T* scales = static_cast<const T*>(a.scales);
  const T* biases = static_cast<const T*>(a.biases);
  T* y = static_cast<T*>(a.y);
  // x's planes and (d, X) of this block's first row of x; its rows of x are rows_x slots there.
  const uint32_t* planes = a.planes;
  const float2* gx = a.gx;
  int rows_x = a.m;
  if (a.ids) {  // gather. The ids and passes were written before the pre-pass, which a gather
                // launches without programmatic dependent launch: complete once this kernel runs.
    const int slot = static_cast<int>(blockIdx.y);  // a row of x, or a pass (slots MT·slot ...)
    int64_t e = 0;
    if (a.passes.pass) {                    // pass blockIdx.y: up to MT rows of one expert
      if (slot >= *a.passes.count) return;  // uniform across the block
      const ExpertPass ps = a.passes.pass[slot];
      e = ps.expert;
      rows_x = ps.rows;
    } else {  // row blockIdx.y of x
      rows_x = 1;
      e = a.ids[slot];
      if (e < 0 || e >= a.batch) {  // flagged; the row's outputs become NaN, W is not read
        grid_dependency_wait();     // y: behind the previous kernel, as every store of y
        if (threadIdx.x == 0) atomicOr(a.flag, 1);
        if (threadIdx.x < kI8Rows && row0 + static_cast<int>(threadIdx.x) < a.n)
          y[static_cast<int64_t>(slot) * a.n + row0 + threadIdx.x] =
              from_f32<T>(__int_as_float(0x7FC00000));
        return;  // uniform across the block
      }
    }
    planes += static_cast<int64_t>(slot) * MT * (a.k / 2);
    gx += static_cast<int64_t>(slot) * MT * groups;
    codes += e * a.code_stride;
    scales += e * a.sb_stride;
    biases += e * a.sb_stride;
  }
  const int r_lo = min(row0 + g, a.n - 1), r_hi = min(row0 + g + 8, a.n - 1);  // past N: not stored
  const int all_steps = groups / 4;
  // Warp w takes steps w, w + warps, ... or, contiguous, [w·per, (w+1)·per) one after another.
  const int per = (all_steps + warps - 1) / warps;
  const int first = a.contiguous ? min(all_steps, warp * per) : warp;
  const int stride = a.contiguous ? 1 : warps;
  const int steps = a.contiguous ? min(all_steps, first + per) : all_steps;
  // B: lane (2q, q) feeds plane h and (2q+1, q) plane l of its own group; others feed zeros.
  const bool b_lane = (g >> 1) == q;
  const int plane = g & 1;

  // Codes, scales and biases of this warp's steps run DS steps ahead in registers, issued
  // before waiting for the pre-pass. (Scales loaded when their step ran stalled the warp on a
  // DRAM miss once per 32-byte sector: +13-15% from riding the ring.)
  const uint8_t* w_lo = codes + static_cast<int64_t>(r_lo) * a.row_bytes + q * Geom::kGroupBytes;
  const uint8_t* w_hi = codes + static_cast<int64_t>(r_hi) * a.row_bytes + q * Geom::kGroupBytes;
  static_assert(SG % G == 0);
  const int64_t sb_lo = static_cast<int64_t>(r_lo) * (a.k / SG),
                sb_hi = static_cast<int64_t>(r_hi) * (a.k / SG);
  uint32_t ring_lo[DS][P][W], ring_hi[DS][P][W];
  T ring_sb[DS][4];
  // Codes marked first for L1 eviction where that measured faster: 4-bit (M = 2: g64 1.08-1.20x,
  // g32 1.04-1.08x; M = 1 with a ring of 4 pieces: g64 1.02-1.15x, g32 1.07x; groups of 128 run
  // the g64 geometry, i8_run_group), 2-bit (g64 1.03-1.10x) but groups of 128 at M = 2
  // (0.92-0.99x). Not 8-bit (M = 2 0.91-1.24x). H200, f16 and bf16, three shapes (docs/PERF.md).
  constexpr bool kEvictFirst = BITS == 4 || (BITS == 2 && !(MT == 2 && G == 128));
  auto load_piece = [&](int s, int p, uint32_t(&lo)[W], uint32_t(&hi)[W]) {
    if (s < steps) {
      const int64_t off = static_cast<int64_t>(s) * 4 * Geom::kGroupBytes + p * Geom::kPieceBytes;
      i8_load_piece<W, LW, kEvictFirst>(w_lo + off, lo);
      i8_load_piece<W, LW, kEvictFirst>(w_hi + off, hi);
    }
  };
  auto load_sb = [&](int s, T(&sb)[4]) {
    if (s < steps) {
      const int grp = (4 * s + q) / (SG / G);
      sb[0] = scales[sb_lo + grp], sb[1] = biases[sb_lo + grp];
      sb[2] = scales[sb_hi + grp], sb[3] = biases[sb_hi + grp];
    }
  };
#pragma unroll
  for (int u = 0; u < DS; ++u) {
    load_sb(first + u * stride, ring_sb[u]);
#pragma unroll
    for (int p = 0; p < P; ++p) load_piece(first + u * stride, p, ring_lo[u][p], ring_hi[u][p]);
  }

  grid_dependency_wait();  // the pre-pass's planes and (d, X) are complete past this point
  // B fragments and (d, X) straight from the pre-pass's global buffers: a few KB that every
  // block reads, so they stay in L1/L2 (a shared-memory copy per block measured no faster).
  float acc_lo[MT] = {}, acc_hi[MT] = {};
  // 3/5/6-bit groups of 32 (rings of 3-8 steps) run whole rounds of the ring with no exit
  // between steps, so the compiler may overlap one step's mma with the next one's unpack: H200
  // f16, three shapes, M = 1 1.04-1.14x, M = 2 1.01-1.07x; for groups of 64 and 128 it ranged
  // 0.91-1.11x (docs/PERF.md).
  constexpr bool kWholeRounds = !Geom::kWholeBytes && G == 32;
  // One step: ring slot u (a constant once unrolled) holds step s.
  auto step = [&](int u, int s) {
    const int grp = 4 * s + q;
    const float sl = to_f32(ring_sb[u][0]), bl = to_f32(ring_sb[u][1]);
    const float sh = to_f32(ring_sb[u][2]), bh = to_f32(ring_sb[u][3]);
    load_sb(s + DS * stride, ring_sb[u]);  // refill, DS steps ahead
    const std::size_t boff = static_cast<std::size_t>(grp * 2 + plane) * Geom::kPlaneWords;
    // Two accumulator chains per row of x (even and odd k32 slices, summed after the step) where
    // that measured faster: M = 2 with 6-bit g64 (1.06-1.27x; also 4-bit g128 1.10-1.12x, before
    // that ran the g64 geometry). Every other M = 2 instance ran 0.78-1.05x with them (3-bit g128
    // 0.78-0.80x), and M = 1 0.74-1.16x, as the registers moved the one-wave warp count (H200,
    // f16, three shapes; docs/PERF.md).
    constexpr bool kSplit = MT == 2 && BITS == 6 && G == 64;
    int c[MT][4] = {}, c2[MT][4] = {};
#pragma unroll
    for (int p = 0; p < P; ++p) {
      // The codes of this piece, as u8x4 mma registers, serve every row of x.
      uint32_t a_lo[Geom::kRegs], a_hi[Geom::kRegs];
      if constexpr (Geom::kWholeBytes) {  // (row by row for 3/5/6: the permutes share work)
#pragma unroll
        for (int r = 0; r < Geom::kRegs; ++r) {
          a_lo[r] = i8_code_reg<BITS, W>(ring_lo[u][p], r);
          a_hi[r] = i8_code_reg<BITS, W>(ring_hi[u][p], r);
        }
      } else {
        i8_unpack<BITS, W>(ring_lo[u][p], a_lo);
        i8_unpack<BITS, W>(ring_hi[u][p], a_hi);
      }
#pragma unroll
      for (int m = 0; m < MT; ++m) {
        const uint32_t* bsrc =
            planes + static_cast<int64_t>(m) * (a.k / 2) + boff + p * Geom::kSlices * 2;
        uint32_t bw[Geom::kSlices * 2];
#pragma unroll
        for (int i = 0; i < Geom::kSlices * 2; i += 4) {
          const uint4 v = b_lane && m < rows_x ? *reinterpret_cast<const uint4*>(bsrc + i)
                                               : make_uint4(0u, 0u, 0u, 0u);
          bw[i] = v.x, bw[i + 1] = v.y, bw[i + 2] = v.z, bw[i + 3] = v.w;
        }
#pragma unroll
        for (int j = 0; j < Geom::kSlices; ++j)
          imma_16832(kSplit && j % 2 ? c2[m] : c[m], a_lo[2 * j], a_hi[2 * j], a_lo[2 * j + 1],
                     a_hi[2 * j + 1], bw[2 * j], bw[2 * j + 1]);
      }
      load_piece(s + DS * stride, p, ring_lo[u][p], ring_hi[u][p]);  // refill, DS steps ahead
    }
    if constexpr (kSplit) {
#pragma unroll
      for (int m = 0; m < MT; ++m)
#pragma unroll
        for (int i = 0; i < 4; ++i) c[m][i] += c2[m][i];
    }
    // c[m][0], c[m][1] = H, L of row g; c[m][2], c[m][3] of row g+8; all for group grp.
#pragma unroll
    for (int m = 0; m < MT; ++m) {
      if (m >= rows_x) break;
      const float2 dx = gx[static_cast<int64_t>(m) * groups + grp];
      const float v_lo =
          dx.x * fmaf(static_cast<float>(c[m][1]), 1.0f / 256.0f, static_cast<float>(c[m][0]));
      const float v_hi =
          dx.x * fmaf(static_cast<float>(c[m][3]), 1.0f / 256.0f, static_cast<float>(c[m][2]));
      acc_lo[m] = fmaf(sl, v_lo, fmaf(bl, dx.y, acc_lo[m]));
      acc_hi[m] = fmaf(sh, v_hi, fmaf(bh, dx.y, acc_hi[m]));
    }
  };
  int s0 = first;
  if constexpr (kWholeRounds) {
    for (; s0 + (DS - 1) * stride < steps; s0 += DS * stride) {
#pragma unroll
      for (int u = 0; u < DS; ++u) step(u, s0 + u * stride);
    }
#pragma unroll
    // The last, partial round, straight-line: left to the loop below instead, 3-bit g32 on
    // 27648 x 5120 ran 40.1 us, the time without whole rounds (docs/PERF.md).
    for (int u = 0; u < DS; ++u) {
      if (s0 + u * stride >= steps) break;
      step(u, s0 + u * stride);
    }
  } else {
    for (; s0 < steps; s0 += DS * stride) {
#pragma unroll
      for (int u = 0; u < DS; ++u) {
        const int s = s0 + u * stride;
        if (s >= steps) break;  // uniform across the warp
        step(u, s);
      }
    }
  }

  // Row sums: the quad's lanes, then the warps through shared memory ([warp][m][16 rows]).
  float* part = reinterpret_cast<float*>(smem);
#pragma unroll
  for (int m = 0; m < MT; ++m) {
    acc_lo[m] += __shfl_xor_sync(0xffffffffu, acc_lo[m], 1);
    acc_lo[m] += __shfl_xor_sync(0xffffffffu, acc_lo[m], 2);
    acc_hi[m] += __shfl_xor_sync(0xffffffffu, acc_hi[m], 1);
    acc_hi[m] += __shfl_xor_sync(0xffffffffu, acc_hi[m], 2);
    if (q == 0) {
      part[(warp * MT + m) * kI8Rows + g] = acc_lo[m];
      part[(warp * MT + m) * kI8Rows + g + 8] = acc_hi[m];
    }
  }
  __syncthreads();
  for (int i = static_cast<int>(threadIdx.x); i < rows_x * kI8Rows;
       i += static_cast<int>(blockDim.x)) {
    const int m = i / kI8Rows, r = i % kI8Rows, row = row0 + r;
    float sum = 0.0f;
    for (int w = 0; w < warps; ++w) sum += part[(w * MT + m) * kI8Rows + r];
    // The row of x (and y): m; a gather's row blockIdx.y, or row m of pass blockIdx.y.
    int x_row = m;
    if (a.passes.pass)
      x_row = a.passes.order[a.passes.pass[blockIdx.y].start + m];
    else if (a.ids)
      x_row = static_cast<int>(blockIdx.y);
    if (row < a.n) y[static_cast<int64_t>(x_row) * a.n + row] = from_f32<T>(sum);
  }
}

// Pre-pass (one grid row per row of x), then the main kernel with programmatic dependent launch
// (its first code loads overlap the pre-pass), on the geometry of groups of RG (i8_run_group) for
// a matrix with groups of G. A gather (a.ids) runs a grid row per row of x (MT == 1) or per pass
// of rows, and its pre-pass waits for the previous kernel to complete, so the ids and passes are
// there for the main kernel's first loads.
// warps == 0: i8_one_wave_warps at this instance's occupancy (queried once per process), over
// every row's blocks for a gather.
template <class T, int BITS, int RG, int MT, int G>
cudaError_t launch_qmv_affine_i8_on(const I8Args& a, int warps, cudaStream_t stream) {
  const int tiles = (a.n + kI8Rows - 1) / kI8Rows, steps = a.k / RG / 4;
  const int grid_rows = a.passes.pass ? a.passes.max_passes : a.ids ? a.m : 1;
  if (warps == 0) {
    static const I8Occupancy occ =
        i8_occupancy(qmv_affine_i8_kernel<T, BITS, RG, MT, G>, MT * kI8Rows * sizeof(float));
    if (occ.error != cudaSuccess) return occ.error;
    // Where no count >= 2 fits one wave (0): qmv_i8_fallback_warps; a gather's many blocks,
    // i8_gather_warps.
    const int blocks = static_cast<int>(std::min<int64_t>(int64_t{tiles} * grid_rows, INT32_MAX));
    warps = i8_one_wave_warps(blocks, steps, occ.sms, occ.blocks_per_sm, 0);
    if (warps == 0)
      warps = a.ids ? i8_gather_warps(steps)
                    : qmv_i8_fallback_warps(BITS, blocks, steps, occ.sms, occ.blocks_per_sm);
  }
  const int threads = a.k / I8Unit<BITS>::kCodes;
  const dim3 prepass_grid((threads + 127) / 128, a.passes.pass ? grid_rows * MT : a.m);
  if (a.ids) {
    qmv_x_planes_kernel<T, BITS, RG><<<prepass_grid, 128, 0, stream>>>(
        static_cast<const T*>(a.x), a.planes, a.gx, a.k, a.passes, MT);
    if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  } else if (cudaError_t e =
                 launch_prepass(qmv_x_planes_kernel<T, BITS, RG>, prepass_grid, dim3(128), stream,
                                static_cast<const T*>(a.x), a.planes, a.gx, a.k, ExpertPasses{}, 1);
             e != cudaSuccess) {
    return e;
  }
  I8Args b = a;
  if (b.contiguous < 0) b.contiguous = i8_contiguous_steps(warps, steps) ? 1 : 0;
  return launch_dependent(qmv_affine_i8_kernel<T, BITS, RG, MT, G>,
                          dim3(static_cast<unsigned>(tiles), static_cast<unsigned>(grid_rows)),
                          dim3(static_cast<unsigned>(warps * 32)),
                          static_cast<std::size_t>(warps) * MT * kI8Rows * sizeof(float), stream,
                          b);
}

// The matrix's groups of G on the geometry i8_run_group picks.
template <class T, int BITS, int G, int MT>
cudaError_t launch_qmv_affine_i8(const I8Args& a, int warps, cudaStream_t stream) {
  return launch_qmv_affine_i8_on<T, BITS, i8_run_group(BITS, G, MT), MT, G>(a, warps, stream);
}

}  // namespace quanta::cuda
