// qmm_affine_wgrf: affine [N, K] times x [M, K] for M = 33..128 on sm_90a, the register-fed design
// of qmm_affine_rf on warpgroup MMA:
//
//   W      = codes and scales streamed from global memory straight into registers, D k-blocks
//            ahead, and dequantized there (s·q + b rounded once to T, affine_unpack.cuh's pairs:
//            MLX's rounding, as qmm_affine_rf) into the A fragments of wgmma's register form.
//            A thread owns chunks of 32 codes of two rows (g and g + 8 of its warp's 16): chunk q
//            of each 128-code k-block, 16 pairs = the four A registers of each of 8 k16 steps.
//   x      = B in shared memory, K-major under the 128-byte swizzle. A pre-pass
//            (wgrf_x_image_kernel, programmatic dependent launch) writes, per token tile and
//            k-block, the exact shared-memory image: the 128 codes' activations in the order the
//            A pairs hold their codes (wgrf_phys), zeros past M and K; a CTA copies each stage
//            with linear 16-byte cp.async (S stages).
//   tile   = a warpgroup per 64 rows of W, WG warpgroups per CTA sharing x's stages; NT tokens
//            (wgmma m64nNTk16, f32 accumulators in registers); K split over gridDim.z CTAs when
//            the row tiles alone leave SMs idle, summed by split_finish (deterministic).
//
// Why: at M = 33..128 the mma.sync kernels spend their issue slots on B fragments and the CUTLASS
// mixed-input kernel measured flat at ~40 us for 14336 x 5120 from M = 24 to 64 (its 4-bit
// conversion, docs/PERF.md); here one wgmma serves NT tokens from shared memory, so the only
// per-code work is the dequantization, which the other warpgroups' MMAs overlap.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "cuda/affine_simt.cuh"    // load_chunk
#include "cuda/affine_unpack.cuh"  // dequant_pairs, pair_lo, pair_hi
#include "cuda/common.cuh"
#include "cuda/mma.cuh"
#include "cuda/split_k.cuh"

namespace quanta::cuda {

inline constexpr int kWgrfKB = 128;  // codes of K per k-block: one 32-code chunk per quad lane

struct WgrfArgs {
  const uint8_t* codes;
  const void* scales;  // T [N, K/G]
  const void* biases;  // T [N, K/G]
  const void* x;       // T [M, K]
  const uint4* ximg;   // the pre-pass's image: [token tile][k-block][NT x 256 bytes]
  void* y;             // T [M, N]
  SplitTile split;
  int32_t m, n, k, log2_group;
  int32_t kblocks;  // ceil(K / 128)
  int64_t row_bytes;
};

// Code offset (0..127) in a k-block of the activation at logical position l of the smem image:
// step j = l / 16 of the k-block's eight k16 steps, slot t = l % 16 of A's 16 columns. Lane
// quad q holds slots (2q, 2q + 1) as pair 2j and (2q + 8, 2q + 9) as pair 2j + 1 of its chunk q.
template <int BITS>
__host__ __device__ constexpr int wgrf_phys(int l) {
  const int j = l / 16, t = l % 16;
  const int h = t / 8, q = (t % 8) / 2, e = t % 2;
  const int i = 2 * j + h;
  return 32 * q + (e ? pair_hi<BITS>(i) : pair_lo<BITS>(i));
}

// One 16-byte chunk of the image per thread: chunk c16 of row (token) r of half h (64 logical
// positions, 128 bytes a row, eight rows a 1024-byte swizzle atom: the chunk holds logical chunk
// c16 ^ (r % 8)).
template <class T, int BITS, int NT>
__global__ void wgrf_x_image_kernel(const T* x, uint4* img, int m, int k, int kblocks,
                                    int64_t total) {
  grid_dependency_release();  // the main kernel may start loading codes now
  grid_dependency_wait();     // x and the scratch: behind the previous kernel (common.cuh)
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= total) return;
  const int c16 = static_cast<int>(i % 8), r = static_cast<int>(i / 8 % NT);
  const int h = static_cast<int>(i / (8 * NT) % 2);
  const int64_t kb = i / (16 * NT) % kblocks, tile = i / (16 * static_cast<int64_t>(NT) * kblocks);
  const int64_t tok = tile * NT + r;
  const int l0 = 64 * h + 8 * (c16 ^ (r % 8));
  uint16_t v[8];
#pragma unroll
  for (int e = 0; e < 8; ++e) {
    const int64_t kk = kb * kWgrfKB + wgrf_phys<BITS>(l0 + e);
    v[e] = tok < m && kk < k ? __ldg(reinterpret_cast<const uint16_t*>(x) + tok * k + kk) : 0;
  }
  img[i] = make_uint4(
      v[0] | static_cast<uint32_t>(v[1]) << 16, v[2] | static_cast<uint32_t>(v[3]) << 16,
      v[4] | static_cast<uint32_t>(v[5]) << 16, v[6] | static_cast<uint32_t>(v[7]) << 16);
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// wgmma's shared-memory descriptor for a K-major operand under the 128-byte swizzle: 8-row
// atoms of 128 bytes 1024 bytes apart (the leading offset is unused in this mode).
__device__ __forceinline__ uint64_t wgrf_desc(uint32_t saddr) {
  return static_cast<uint64_t>((saddr & 0x3FFFF) >> 4) | (uint64_t{1} << 16) |
         (uint64_t{1024 >> 4} << 32) | (uint64_t{1} << 62);
}

// D (64 x N, f32) += A (64 x 16, registers) · B (16 x N, shared memory): wgmma's register form,
// f16 or bf16 operands, f32 accumulators d[0..N/2), no transposes or negations. The operand lists
// are spelled once (QUANTA_WGRF_*); N = 64 uses the first 32 accumulators of them.
#define QUANTA_WGRF_REGS32                                                                     \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, " \
  "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define QUANTA_WGRF_REGS64                                                                       \
  QUANTA_WGRF_REGS32                                                                             \
  ", %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, " \
  "%50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define QUANTA_WGRF_ACC8(i)                                                                   \
  "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), \
      "+f"(d[i + 6]), "+f"(d[i + 7])
#define QUANTA_WGRF_ACC32(i) \
  QUANTA_WGRF_ACC8(i), QUANTA_WGRF_ACC8(i + 8), QUANTA_WGRF_ACC8(i + 16), QUANTA_WGRF_ACC8(i + 24)
#define QUANTA_WGRF_IN "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(desc)

template <bool F16>
__device__ __forceinline__ void wgmma_m64n64k16(float (&d)[32], uint32_t a0, uint32_t a1,
                                                uint32_t a2, uint32_t a3, uint64_t desc) {
  if constexpr (F16)
    asm volatile("wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {" QUANTA_WGRF_REGS32
                 "}, {%32, %33, %34, %35}, %36, 1, 1, 1, 0;\n"
                 : QUANTA_WGRF_ACC32(0)
                 : QUANTA_WGRF_IN);
  else
    asm volatile("wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {" QUANTA_WGRF_REGS32
                 "}, {%32, %33, %34, %35}, %36, 1, 1, 1, 0;\n"
                 : QUANTA_WGRF_ACC32(0)
                 : QUANTA_WGRF_IN);
}

template <bool F16>
__device__ __forceinline__ void wgmma_m64n128k16(float (&d)[64], uint32_t a0, uint32_t a1,
                                                 uint32_t a2, uint32_t a3, uint64_t desc) {
  if constexpr (F16)
    asm volatile("wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {" QUANTA_WGRF_REGS64
                 "}, {%64, %65, %66, %67}, %68, 1, 1, 1, 0;\n"
                 : QUANTA_WGRF_ACC32(0), QUANTA_WGRF_ACC32(32)
                 : QUANTA_WGRF_IN);
  else
    asm volatile("wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {" QUANTA_WGRF_REGS64
                 "}, {%64, %65, %66, %67}, %68, 1, 1, 1, 0;\n"
                 : QUANTA_WGRF_ACC32(0), QUANTA_WGRF_ACC32(32)
                 : QUANTA_WGRF_IN);
}
#undef QUANTA_WGRF_REGS32
#undef QUANTA_WGRF_REGS64
#undef QUANTA_WGRF_ACC8
#undef QUANTA_WGRF_ACC32
#undef QUANTA_WGRF_IN

template <class T, int NT>
__device__ __forceinline__ void wgrf_mma(float (&d)[NT / 2], uint32_t a0, uint32_t a1, uint32_t a2,
                                         uint32_t a3, uint64_t desc) {
  static_assert(NT == 64 || NT == 128);
  constexpr bool kF16 = std::is_same_v<T, __half>;
  if constexpr (NT == 64)
    wgmma_m64n64k16<kF16>(d, a0, a1, a2, a3, desc);
  else
    wgmma_m64n128k16<kF16>(d, a0, a1, a2, a3, desc);
}

template <int N>
__device__ __forceinline__ void wgrf_pin(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

#endif

template <class T, int BITS, int NT, int WG, int D, int S>
__global__ void __launch_bounds__(128 * WG) qmm_affine_wgrf_kernel(const WgrfArgs a) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  grid_dependency_release();  // the next call's pre-pass may launch (common.cuh)
  extern __shared__ uint8_t wgrf_smem[];
  constexpr int kStageBytes = NT * 256;
  const uint32_t smem0 = (smem_addr(wgrf_smem) + 1023u) & ~1023u;
  const int tid = static_cast<int>(threadIdx.x), lane = tid % 32, warp = tid / 32;
  const int g = lane / 4, q = lane % 4;
  const int row_cta = static_cast<int>(blockIdx.x) * 64 * WG;
  const int row = row_cta + 16 * warp + g;  // and row + 8 (warp w of the CTA: rows 16w..16w+15)
  const int r0 = min(row, a.n - 1), r1 = min(row + 8, a.n - 1);  // past N: loaded, never stored
  const int tile = static_cast<int>(blockIdx.y), split = static_cast<int>(blockIdx.z);
  const int splits = static_cast<int>(gridDim.z);
  const int kb0 = static_cast<int>(static_cast<int64_t>(split) * a.kblocks / splits);
  const int kb1 = static_cast<int>(static_cast<int64_t>(split + 1) * a.kblocks / splits);
  const int nkb = kb1 - kb0;

  // ---- the code ring: chunk q of k-block kb for both rows, D k-blocks ahead -----------------
  const uint8_t* p0 = a.codes + static_cast<int64_t>(r0) * a.row_bytes + q * 4 * BITS;
  const uint8_t* p1 = a.codes + static_cast<int64_t>(r1) * a.row_bytes + q * 4 * BITS;
  const T* s0p = static_cast<const T*>(a.scales) + static_cast<int64_t>(r0) * (a.k >> a.log2_group);
  const T* s1p = static_cast<const T*>(a.scales) + static_cast<int64_t>(r1) * (a.k >> a.log2_group);
  const T* b0p = static_cast<const T*>(a.biases) + static_cast<int64_t>(r0) * (a.k >> a.log2_group);
  const T* b1p = static_cast<const T*>(a.biases) + static_cast<int64_t>(r1) * (a.k >> a.log2_group);
  uint32_t w0[D][BITS], w1[D][BITS];
  T sb[D][4];
  auto load = [&](int u, int kb) {
    const int kc = kb * kWgrfKB + 32 * q;  // first code of the chunk
    if (kb < kb1 && kc < a.k) {
      const int64_t off = static_cast<int64_t>(kb) * (kWgrfKB * BITS / 8);
      load_chunk<BITS>(p0 + off, w0[u]);
      load_chunk<BITS>(p1 + off, w1[u]);
      const int grp = kc >> a.log2_group;
      sb[u][0] = s0p[grp], sb[u][1] = b0p[grp], sb[u][2] = s1p[grp], sb[u][3] = b1p[grp];
    } else {  // A = 0 (zero codes, scale and bias)
#pragma unroll
      for (int i = 0; i < BITS; ++i) w0[u][i] = w1[u][i] = 0u;
      const T z = from_f32<T>(0.0f);
      sb[u][0] = sb[u][1] = sb[u][2] = sb[u][3] = z;
    }
  };
#pragma unroll
  for (int u = 0; u < D; ++u) load(u, kb0 + u);

  // ---- x's stages ------------------------------------------------------------------------------
  grid_dependency_wait();  // the image is complete past this point
  const uint4* img = a.ximg + (static_cast<int64_t>(tile) * a.kblocks) * (kStageBytes / 16);
  auto issue_stage = [&](int it) {  // k-block kb0 + it into slot it % S
    if (it < nkb) {
      const uint4* src = img + static_cast<int64_t>(kb0 + it) * (kStageBytes / 16);
      const uint32_t dst = smem0 + static_cast<uint32_t>(it % S) * kStageBytes;
#pragma unroll
      for (int c = tid; c < kStageBytes / 16; c += 128 * WG)
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst + 16 * c),
                     "l"(src + c));
    }
    cp_async_commit();
  };
#pragma unroll
  for (int s = 0; s < S - 1; ++s) issue_stage(s);

  float acc[NT / 2];
#pragma unroll
  for (int i = 0; i < NT / 2; ++i) acc[i] = 0.0f;

  // Each k-block's wgmma are waited for before the next is dequantized: overlapping them inside
  // a warpgroup (wait_group 1, two A buffers) makes ptxas serialize the wgmma (C7513: registers
  // of a wgmma defined inside its pipeline stage). Instead a k-block goes in halves: the second
  // half's pairs are dequantized while the first half's four wgmma run (different registers, one
  // accumulator chain), and the SM's other warpgroups fill the rest.
  const uint32_t magic = magic_register(Magic<T>::kBits2);
  auto step = [&](int u, int it) {
    cp_async_wait<S - 2>();
    __syncthreads();  // stage it is in; every warpgroup is done with stage it - 1
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    issue_stage(it + S - 1);  // into it - 1's slot
    const uint32_t base = smem0 + static_cast<uint32_t>(it % S) * kStageBytes;
    uint32_t ag[16], ah[16];
    auto half = [&]<int H>() {  // pairs 8H..8H+7 = k16 steps 4H..4H+3 = the image's half H
      dequant_pairs<T, BITS, 8 * H, 8>(w0[u], sb[u][0], sb[u][1], magic, ag);
      dequant_pairs<T, BITS, 8 * H, 8>(w1[u], sb[u][2], sb[u][3], magic, ah);
      if constexpr (H == 0) wgrf_pin(acc);
      asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
      for (int j = 4 * H; j < 4 * H + 4; ++j)
        wgrf_mma<T, NT>(acc, ag[2 * j], ah[2 * j], ag[2 * j + 1], ah[2 * j + 1],
                        wgrf_desc(base + H * (NT * 128) + 32 * (j % 4)));
    };
    half.template operator()<0>();
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
    half.template operator()<1>();
    load(u, kb0 + it + D);  // refill, D k-blocks ahead
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
    wgrf_pin(acc);
  };
  for (int it0 = 0; it0 < nkb; it0 += D) {
#pragma unroll
    for (int u = 0; u < D; ++u) {
      if (it0 + u >= nkb) break;
      step(u, it0 + u);
    }
  }
  cp_async_wait<0>();

  // ---- y: acc[4i + 2e + c] is (row + 8e, token 8i + 2q + c) of the tile. Through shared memory
  // (the stages are free now) so that each warp stores whole runs of a token's rows: stored
  // straight from the fragments, the partial sums took ~37% of the samples at M = 64 (Nsight
  // Compute, 14336 x 5120 f16, two K splits).
  constexpr int kLd = 64 * WG + 4;  // floats a token row (+4: the fragment writes meet 32 banks)
  float* tile_f = reinterpret_cast<float*>(wgrf_smem + (smem0 - smem_addr(wgrf_smem)));
  __syncthreads();  // every warpgroup is done with the stages
#pragma unroll
  for (int i = 0; i < NT / 8; ++i)
#pragma unroll
    for (int e = 0; e < 2; ++e)
#pragma unroll
      for (int c = 0; c < 2; ++c)
        tile_f[(8 * i + 2 * q + c) * kLd + 16 * warp + g + 8 * e] = acc[4 * i + 2 * e + c];
  __syncthreads();
  const int tok0 = tile * NT;
  T* y = static_cast<T*>(a.y);
  float* part = splits > 1 ? a.split.partials + static_cast<int64_t>(split) * a.m * a.n : nullptr;
  const int toks = min(NT, a.m - tok0), rows = min(64 * WG, a.n - row_cta);
  for (int idx = tid; idx < toks * 64 * WG; idx += 128 * WG) {
    const int t = idx / (64 * WG), r = idx % (64 * WG);
    if (r >= rows) continue;
    const int64_t at = static_cast<int64_t>(tok0 + t) * a.n + row_cta + r;
    if (part)
      part[at] = tile_f[t * kLd + r];
    else
      y[at] = from_f32<T>(tile_f[t * kLd + r]);
  }
  if (part)
    split_finish<T>(a.split, static_cast<int>(blockIdx.y * gridDim.x + blockIdx.x), tok0,
                    min(a.m, tok0 + NT), row_cta, 64 * WG, y);
#endif
}

// Dynamic shared memory of an instance: S stages (or the f32 output tile, if larger) and the
// slack to align them to 1024 bytes.
template <int NT, int S, int WG>
inline constexpr int kWgrfSmem = (S * NT * 256 > NT * (64 * WG + 4) * 4 ? S * NT * 256
                                                                        : NT * (64 * WG + 4) * 4) +
                                 1024;

}  // namespace quanta::cuda
