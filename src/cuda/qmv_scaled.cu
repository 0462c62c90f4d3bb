// qmv_scaled: the microscaled (mxfp4, nvfp4, mxfp8) and fp8 (e4m3, e5m2, per channel or per
// tensor) formats in the [N, K] layout, y = x · Wᵀ for small M on CUDA cores, f32 accumulation:
//   y[m, n] = global · Σ_g s[n, g] · Σ_{k∈g} x[m, k] · v(q[n, k])     (fp8: s[n] · Σ_k x·v)
// Each code is read once per four rows of x (gather_matmul: one row of x, its expert's matrix, a
// pass; an id outside the stack sets the flag and NaNs the row, reading nothing); before it, these
// formats ran dequantize + cuBLAS at every M (300-500 us for 14336 x 5120, ~30x the time to read
// the codes; docs/PERF.md).
//
// A warp owns 4 consecutive rows of W and walks K in 16-byte chunks (32 fp4 or 16 fp8 codes),
// lane l taking chunks l, l + 32, ... of all 4 rows, the next chunk's codes and scales loaded
// while the current one is used. A chunk is decoded a word (8 fp4 / 4 fp8 codes) at a time into
// f32 and meets that word's 8 or 4 values of each row of x (one 16-byte load of f16/bf16 x, two
// of f32, through L1), so x is loaded once per 4 rows of W. The decodes (scaled_decode.cuh) are
// exact; E2M1 reads v · 2^-14, the 2^14 restored per group sum.
// Groups: mxfp4 a chunk, nvfp4 two per chunk, mxfp8 two chunks; each group's sum is scaled once.
// qmv_scaled_mma (below) computes the same sums on tensor cores for f16/bf16 x from M = 2.
#include <cstdint>
#include <type_traits>

#include "cuda/checks.hpp"
#include "cuda/common.cuh"
#include "cuda/families.hpp"
#include "cuda/mma.cuh"
#include "cuda/runtime.cuh"
#include "cuda/scaled_decode.cuh"
#include "cuda/scaled_rules.cuh"
#include "cuda/weights.cuh"  // make_desc

namespace quanta::cuda {

namespace {

constexpr int kWarps = 4, kThreads = 32 * kWarps;
constexpr int kRows = 4;      // rows of W per warp
constexpr int kMaxRowsX = 4;  // rows of x per pass over W
constexpr int kRowsXChoices[] = {1, 2, 3, 4};
constexpr int kMaxGridY = 65535;  // gather: rows of x beyond it loop
// Past two passes of four rows of x (f16/bf16) or four (f32, whose cuBLAS GEMM is slower),
// dequantize_scaled + cuBLAS is faster (H200, docs/PERF.md).
constexpr int64_t kAheadMaxMHalf = 8, kAheadMaxMF32 = 16;

struct ScaledArgs {
  const uint8_t* codes;   // [N][row_bytes]
  const uint8_t* scales;  // [N][K / G] bytes (microscaled), f32 [N] or [1] (fp8)
  const void* x;          // [M][K]
  void* y;                // [M][N]
  const int32_t* ids;     // gather: the expert of each row of x (null for one matrix)
  int* flag;              // gather: set when an id is outside [0, batch)
  int64_t row_bytes;
  int64_t code_stride, scale_stride;  // bytes per expert of the stack
  int32_t m, n, k, batch;
  int32_t per_row;  // fp8: 1 for a scale per row, 0 for one scale
  float global;     // nvfp4's tensor scale (1 otherwise)
};

template <class T, Scheme S, int MR, bool kGather>
__global__ void __launch_bounds__(kThreads) qmv_scaled_kernel(const ScaledArgs a) {
  using Tr = ScaledTraits<S>;
  constexpr int kWordCodes = Tr::kCodes / 4;  // 8 fp4 or 4 fp8 codes a word
  // Groups per chunk (nvfp4 2, mxfp4 1) and whether a group spans two chunks (mxfp8).
  constexpr int kGroups =
      Tr::kGroup == 0 ? 1 : (Tr::kCodes >= Tr::kGroup ? Tr::kCodes / Tr::kGroup : 1);
  constexpr bool kScaled = Tr::kGroup > 0;
  // E2M1 decodes to v · 2^-14: a group's sum is scaled back before its scale (first, so that a
  // huge E8M0 scale cannot overflow where the weight itself would not).
  constexpr float kUnit = Tr::kCode == ElementCode::e2m1 ? 16384.0f : 1.0f;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int n0 =
      (static_cast<int>(blockIdx.x) * kWarps + static_cast<int>(threadIdx.x) / 32) * kRows;
  if (n0 >= a.n) return;
  const int chunks = a.k / Tr::kCodes;
  const int groups = kScaled ? a.k / Tr::kGroup : 0;
  const int tiles = (a.m + MR - 1) / MR;
  T* y = static_cast<T*>(a.y);
  // One tile of rows of x (from m0) against expert e's matrix.
  auto run_tile = [&](const int m0, const int64_t e) {  // gather: MR = 1
    const uint8_t* codes = a.codes + e * a.code_stride;
    const uint8_t* scales = a.scales + e * a.scale_stride;
    const T* x = static_cast<const T*>(a.x);
    const T* xr[MR];
#pragma unroll
    for (int m = 0; m < MR; ++m)  // rows past M read the last row (their sums are not stored)
      xr[m] = x + static_cast<int64_t>(min(m0 + m, a.m - 1)) * a.k;
    const uint8_t* wr[kRows];
    const uint8_t* sr[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) {  // rows past N repeat the last row (not stored)
      const int n = min(n0 + r, a.n - 1);
      wr[r] = codes + static_cast<int64_t>(n) * a.row_bytes;
      sr[r] = scales + static_cast<int64_t>(n) * groups;
    }

    float acc[kRows][MR] = {};
    uint4 cur[kRows] = {}, nxt[kRows] = {};
    float scur[kRows][kGroups] = {}, snxt[kRows][kGroups] = {};
    auto load = [&](int c, uint4(&q)[kRows], float(&sc)[kRows][kGroups]) {
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        q[r] = __ldcs(reinterpret_cast<const uint4*>(wr[r]) + c);  // streamed: read once
        if constexpr (kScaled) chunk_scales<S>(sr[r], c, sc[r]);
      }
    };
    int c = lane;
    if (c < chunks) load(c, cur, scur);
    // Chained calls (common.cuh): W's first chunk is loaded before waiting for the previous
    // kernel, which writes x and may read y.
    if constexpr (!kGather) grid_dependency_wait();
    for (; c < chunks; c += 32) {
      if (c + 32 < chunks) load(c + 32, nxt, snxt);
      float part[kRows][MR][kGroups] = {};
#pragma unroll
      for (int wi = 0; wi < 4; ++wi) {
        constexpr int kPerGroup = kGroups == 2 ? 2 : 4;  // words per group within the chunk
        const int g = kGroups == 2 ? wi / kPerGroup : 0;
        float v[kRows][kWordCodes];
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
          const uint32_t word = wi == 0   ? cur[r].x
                                : wi == 1 ? cur[r].y
                                : wi == 2 ? cur[r].z
                                          : cur[r].w;
          decode_word<Tr::kCode>(word, v[r]);
        }
#pragma unroll
        for (int m = 0; m < MR; ++m) {
          float xv[kWordCodes];
          load_x<T, kWordCodes>(xr[m], c * Tr::kCodes + wi * kWordCodes, xv);
#pragma unroll
          for (int r = 0; r < kRows; ++r)
#pragma unroll
            for (int i = 0; i < kWordCodes; ++i)
              part[r][m][g] = fmaf(v[r][i], xv[i], part[r][m][g]);
        }
      }
#pragma unroll
      for (int r = 0; r < kRows; ++r)
#pragma unroll
        for (int m = 0; m < MR; ++m)
#pragma unroll
          for (int g = 0; g < kGroups; ++g)
            acc[r][m] = kScaled ? fmaf(part[r][m][g] * kUnit, scur[r][g], acc[r][m])
                                : acc[r][m] + part[r][m][g];
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        cur[r] = nxt[r];
#pragma unroll
        for (int g = 0; g < kGroups; ++g) scur[r][g] = snxt[r][g];
      }
    }
    // The next call may launch once this CTA's loads are done: released at the start instead,
    // the next call's CTAs took SM slots while this grid's were still spreading, and on
    // 5120 x 14336 (320 CTAs, 2-3 an SM) e4m3 ran 0.84x, mxfp8 0.89x (H200, docs/PERF.md).
    if constexpr (!kGather) grid_dependency_release();
#pragma unroll
    for (int r = 0; r < kRows; ++r)
#pragma unroll
      for (int m = 0; m < MR; ++m)
#pragma unroll
        for (int o = 16; o >= 1; o /= 2) acc[r][m] += __shfl_xor_sync(0xFFFFFFFFu, acc[r][m], o);
          // Lane r * MR + m stores (row n0 + r, row m0 + m of x).
#pragma unroll
    for (int r = 0; r < kRows; ++r)
#pragma unroll
      for (int m = 0; m < MR; ++m) {
        const int n = n0 + r, row = m0 + m;
        if (lane != r * MR + m || n >= a.n || row >= a.m) continue;
        float v = acc[r][m];
        if constexpr (!kScaled)
          v *= reinterpret_cast<const float*>(scales)[a.per_row ? n : 0];
        else
          v *= a.global;
        y[static_cast<int64_t>(row) * a.n + n] = from_f32<T>(v);
      }
  };
  if constexpr (!kGather) {
    if (static_cast<int>(blockIdx.y) < tiles) run_tile(static_cast<int>(blockIdx.y) * MR, 0);
  } else {
    for (int m0 = static_cast<int>(blockIdx.y); m0 < a.m; m0 += static_cast<int>(gridDim.y)) {
      const int64_t e = a.ids[m0];
      if (e >= 0 && e < a.batch) {
        run_tile(m0, e);
      } else {  // flagged; the row's outputs become NaN, W is not read
        if (lane == 0) atomicOr(a.flag, 1);
        if (lane < kRows && n0 + lane < a.n)
          y[static_cast<int64_t>(m0) * a.n + n0 + lane] = from_f32<T>(__int_as_float(0x7FC00000));
      }
    }
  }
}

// ---- qmv_scaled_mma: the same sums on tensor cores, f16/bf16 x, M = 2..32 -------------------
// A warp owns 16 rows of W (the mma's A rows g and g + 8 of each lane) and walks K in runs of 128
// codes: lane q of each quad takes the run's q-th 32 codes (one mxfp4 / mxfp8 group, two nvfp4
// ones) of both its rows, decoded exactly into f16/bf16 pairs as A. Groups are the mma's columns:
// B's column 2G + i holds row i of x (of a pair) on the k-slots of group G and zeros elsewhere, so
// C's columns 2q, 2q + 1, which lane q holds, are its own group's partial sums for the two rows of
// x, scaled once per group with the scales it loaded with the codes. Each pair of rows of x costs
// one mma per 256 codes, nothing per code, so M = 2..8 cost about M = 1 (pairs in one pass; 16
// rows in two). The 4 warps of a CTA share the 16 rows and split K's runs; shared memory sums them.
constexpr int kMmaRows = 16, kRunCodes = 128, kMaxPairs = 4;
constexpr int kPairChoices[] = {1, 2, 3, 4};

// An exact f16 pair as T's pair (bf16 holds every value these codes take).
template <class T>
__device__ __forceinline__ uint32_t as_t_pair(uint32_t h) {
  if constexpr (std::is_same_v<T, __half>) {
    return h;
  } else {
    const float2 f = __half22float2(as_vec2<__half>(h));
    return as_u32(__floats2bfloat162_rn(f.x, f.y));
  }
}

template <class T, Scheme S, int NP>
__global__ void __launch_bounds__(kThreads) qmv_scaled_mma_kernel(const ScaledArgs a) {
  using Tr = ScaledTraits<S>;
  constexpr bool kFp4 = Tr::kCode == ElementCode::e2m1, kScaled = Tr::kGroup > 0;
  constexpr int kBytes = kFp4 ? 16 : 32;  // a lane's 32 codes of a row per run
  constexpr int kWords = kBytes / 4;
  const int lane = static_cast<int>(threadIdx.x) % 32, warp = static_cast<int>(threadIdx.x) / 32;
  const int g = lane >> 2, q = lane & 3;
  const int n0 = static_cast<int>(blockIdx.x) * kMmaRows;
  const int m0 = static_cast<int>(blockIdx.y) * 2 * NP;
  const int runs = a.k / kRunCodes;
  const int groups = kScaled ? a.k / Tr::kGroup : 0;
  const int rows[2] = {min(n0 + g, a.n - 1), min(n0 + g + 8, a.n - 1)};  // past N: repeats
  // Lanes whose B column g is their own group's (g / 2 == q) feed row 2p + g % 2 of x.
  const bool feeder = (g >> 1) == q;
  const T* xr[NP];
#pragma unroll
  for (int p = 0; p < NP; ++p)
    xr[p] =
        static_cast<const T*>(a.x) + static_cast<int64_t>(min(m0 + 2 * p + (g & 1), a.m - 1)) * a.k;

  // A run's codes and scales for both rows, the next run's loaded while this one is used.
  auto load = [&](int r, uint32_t(&code)[2][kWords], float(&sc)[2][2]) {
    const int k0 = r * kRunCodes + q * 32;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const uint4* src =
          reinterpret_cast<const uint4*>(a.codes + static_cast<int64_t>(rows[h]) * a.row_bytes) +
          k0 * (kFp4 ? 1 : 2) / 32;
#pragma unroll
      for (int v = 0; v < kBytes / 16; ++v) {
        const uint4 u = __ldcs(src + v);
        code[h][4 * v] = u.x;
        code[h][4 * v + 1] = u.y;
        code[h][4 * v + 2] = u.z;
        code[h][4 * v + 3] = u.w;
      }
      if constexpr (kScaled) {
        const uint8_t* srow = a.scales + static_cast<int64_t>(rows[h]) * groups;
        chunk_scales<S>(srow, k0 / Tr::kCodes, sc[h]);
      }
    }
  };
  float acc[NP][4] = {};
  uint32_t code[2][kWords] = {}, next_code[2][kWords] = {};
  float sc[2][2] = {}, next_sc[2][2] = {};
  if (warp < runs) load(warp, code, sc);
  for (int r = warp; r < runs; r += kWarps) {
    if (r + kWarps < runs) load(r + kWarps, next_code, next_sc);
    const int k0 = r * kRunCodes + q * 32;  // this lane's 32 codes
    uint32_t xv[NP][16] = {};               // the feeder's 32 values of x, as pairs (2i, 2i + 1)
    if (feeder)
#pragma unroll
      for (int p = 0; p < NP; ++p)
#pragma unroll
        for (int v = 0; v < 4; ++v) {
          const uint4 u = __ldg(reinterpret_cast<const uint4*>(xr[p] + k0) + v);
          xv[p][4 * v] = u.x;
          xv[p][4 * v + 1] = u.y;
          xv[p][4 * v + 2] = u.z;
          xv[p][4 * v + 3] = u.w;
        }
    float c[NP][4] = {};
#pragma unroll
    for (int j = 0; j < 8; ++j) {  // 8 mma k16 steps over the lane's 32 codes
      uint32_t fa[4], fb[NP][2];
      if constexpr (kFp4) {  // word j / 2; j even: pairs (0, 4), (1, 5); odd: (2, 6), (3, 7)
        const int w = j / 2, i0 = (j & 1) * 2;
        fa[0] = as_t_pair<T>(e2m1_pair(code[0][w], i0));
        fa[1] = as_t_pair<T>(e2m1_pair(code[1][w], i0));
        fa[2] = as_t_pair<T>(e2m1_pair(code[0][w], i0 + 1));
        fa[3] = as_t_pair<T>(e2m1_pair(code[1][w], i0 + 1));
#pragma unroll
        for (int p = 0; p < NP; ++p) {  // x elements 8w + i0 + {0, 4} and 8w + i0 + 1 + {0, 4}
          const uint32_t lo = xv[p][4 * w + (j & 1)], hi = xv[p][4 * w + 2 + (j & 1)];
          fb[p][0] = __byte_perm(lo, hi, 0x5410);
          fb[p][1] = __byte_perm(lo, hi, 0x7632);
        }
      } else {  // word j: pairs (0, 1), (2, 3)
        fa[0] = as_t_pair<T>(fp8_pair<Tr::kCode>(code[0][j], 0));
        fa[1] = as_t_pair<T>(fp8_pair<Tr::kCode>(code[1][j], 0));
        fa[2] = as_t_pair<T>(fp8_pair<Tr::kCode>(code[0][j], 1));
        fa[3] = as_t_pair<T>(fp8_pair<Tr::kCode>(code[1][j], 1));
#pragma unroll
        for (int p = 0; p < NP; ++p) {
          fb[p][0] = xv[p][2 * j];
          fb[p][1] = xv[p][2 * j + 1];
        }
      }
#pragma unroll
      for (int p = 0; p < NP; ++p) mma_16816<T>(c[p], fa, fb[p]);
      if constexpr (S == Scheme::nvfp4) {
        if (j == 3 || j == 7) {  // nvfp4: the codes' first group ends at j = 3
          const int gi = j / 4;
#pragma unroll
          for (int p = 0; p < NP; ++p) {
            acc[p][0] = fmaf(c[p][0], sc[0][gi], acc[p][0]);
            acc[p][1] = fmaf(c[p][1], sc[0][gi], acc[p][1]);
            acc[p][2] = fmaf(c[p][2], sc[1][gi], acc[p][2]);
            acc[p][3] = fmaf(c[p][3], sc[1][gi], acc[p][3]);
            c[p][0] = c[p][1] = c[p][2] = c[p][3] = 0.0f;
          }
        }
      }
    }
    if constexpr (S != Scheme::nvfp4) {
#pragma unroll
      for (int p = 0; p < NP; ++p) {
        if constexpr (kScaled) {
          acc[p][0] = fmaf(c[p][0], sc[0][0], acc[p][0]);
          acc[p][1] = fmaf(c[p][1], sc[0][0], acc[p][1]);
          acc[p][2] = fmaf(c[p][2], sc[1][0], acc[p][2]);
          acc[p][3] = fmaf(c[p][3], sc[1][0], acc[p][3]);
        } else {
#pragma unroll
          for (int i = 0; i < 4; ++i) acc[p][i] += c[p][i];
        }
      }
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
#pragma unroll
      for (int i = 0; i < kWords; ++i) code[h][i] = next_code[h][i];
      sc[h][0] = next_sc[h][0];
      sc[h][1] = next_sc[h][1];
    }
  }
  // The quad's four groups, then the CTA's four warps.
#pragma unroll
  for (int p = 0; p < NP; ++p)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      acc[p][i] += __shfl_xor_sync(0xFFFFFFFFu, acc[p][i], 1);
      acc[p][i] += __shfl_xor_sync(0xFFFFFFFFu, acc[p][i], 2);
    }
  __shared__ float part[kWarps][32][kMaxPairs * 4];
#pragma unroll
  for (int p = 0; p < NP; ++p)
#pragma unroll
    for (int i = 0; i < 4; ++i) part[warp][lane][4 * p + i] = acc[p][i];
  __syncthreads();
  if (warp != 0) return;
  // Lane (g, q) stores C element q of each pair: W row g (q < 2) or g + 8, row 2p + q % 2 of x.
  T* y = static_cast<T*>(a.y);
#pragma unroll
  for (int p = 0; p < NP; ++p) {
    float v = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) v += part[w][lane][4 * p + q];
    const int n = n0 + g + (q >= 2 ? 8 : 0), m = m0 + 2 * p + (q & 1);
    if (n >= a.n || m >= a.m) continue;
    if constexpr (!kScaled)
      v *= reinterpret_cast<const float*>(a.scales)[a.per_row ? n : 0];
    else
      v *= a.global;
    y[static_cast<int64_t>(m) * a.n + n] = from_f32<T>(v);
  }
}

template <class T, Scheme S>
void launch_mma(const ScaledArgs& a, cudaStream_t stream) {
  const int np = a.m >= 2 * kMaxPairs ? kMaxPairs : (a.m + 1) / 2;
  const int tiles = (a.m + 2 * np - 1) / (2 * np);
  const dim3 grid(static_cast<unsigned>((a.n + kMmaRows - 1) / kMmaRows),
                  static_cast<unsigned>(tiles));
  dispatch_value<kPairChoices>(np, [&]<int NP>() {
    qmv_scaled_mma_kernel<T, S, NP><<<grid, kThreads, 0, stream>>>(a);
    QUANTA_CUDA_CHECK_LAUNCH();
  });
}

// Rows of x per pass: up to four for a plain matmul, one for gather (each row its own expert).
template <class T, Scheme S>
void launch(const ScaledArgs& a, cudaStream_t stream) {
  const int mr = a.ids ? 1 : a.m < kMaxRowsX ? a.m : kMaxRowsX;
  const int tiles = (a.m + mr - 1) / mr;
  const dim3 grid(static_cast<unsigned>((a.n + kRows * kWarps - 1) / (kRows * kWarps)),
                  static_cast<unsigned>(tiles < kMaxGridY ? tiles : kMaxGridY));
  // A plain matmul takes one tile of rows of x a CTA (M <= 32 here, so they fit the grid); gather
  // loops over its rows. Keeping the loop out of the plain kernel keeps its registers at 96-168
  // (123-188 with it, when nvfp4 M = 2..4 measured up to 1.6x slower on the H200).
  if (!a.ids && tiles > kMaxGridY)
    throw Error("[quanta::matmul] qmv_scaled: M = " + std::to_string(a.m) + " is past its grid");
  auto go = [&]<int MR>() {
    if constexpr (MR == 1) {
      if (a.ids) {
        qmv_scaled_kernel<T, S, 1, true><<<grid, kThreads, 0, stream>>>(a);
        QUANTA_CUDA_CHECK_LAUNCH();
        return;
      }
    }
    QUANTA_CUDA_CHECK(
        launch_dependent(qmv_scaled_kernel<T, S, MR, false>, grid, dim3(kThreads), 0, stream, a));
  };
  dispatch_value<kRowsXChoices>(mr, go);
}

ScaledArgs scaled_args(ConstMatrixView x, const QuantizedMatrix& w, const int32_t* expert_ids,
                       const ExpertFlag& flag, MatrixView y) {
  const WeightDesc d = make_desc(w);
  ScaledArgs a{};
  a.codes = reinterpret_cast<const uint8_t*>(w.codes);
  a.scales = reinterpret_cast<const uint8_t*>(w.scales);
  a.x = x.data;
  a.y = y.data;
  a.ids = expert_ids;
  a.flag = flag.device;
  a.row_bytes = d.row_bytes;
  a.code_stride = d.code_stride;
  a.scale_stride = d.scale_stride;
  a.batch = d.batch;
  a.m = static_cast<int32_t>(x.rows);
  a.n = d.n;
  a.k = d.k;
  a.per_row = d.granularity == Granularity::channel ? 1 : 0;
  a.global = d.global;
  return a;
}

}  // namespace

std::string qmv_scaled_supports(const Problem& p) {
  const Scheme s = p.format.scheme;
  const bool fp4 = s == Scheme::mxfp4 || s == Scheme::nvfp4;
  if (!scaled_scheme(s)) return "mxfp4, nvfp4, mxfp8, e4m3 or e5m2 only";
  if (p.layout != Layout::nk) return "the [N, K] layout only";
  if (p.op == Op::matmul && p.batch != 1) return "one matrix (a stack needs gather_matmul)";
  const int chunk = fp4 ? 32 : 16;
  if (p.k % chunk != 0)
    return "needs K % " + std::to_string(chunk) +
           " == 0 (whole 16-byte chunks of codes), K = " + std::to_string(p.k);
  if (p.n > INT32_MAX || p.k > INT32_MAX || p.m > INT32_MAX || p.batch > INT32_MAX)
    return "needs M, N, K and the experts in int32";
  return {};
}

std::string qmv_scaled_ahead_supports(const Problem& p) {
  if (std::string why = qmv_scaled_supports(p); !why.empty()) return why;
  const int64_t max_m = p.dtype == DType::f32 ? kAheadMaxMF32 : kAheadMaxMHalf;
  if (p.m > max_m)
    return "ahead of dequantize + cuBLAS up to M = " + std::to_string(max_m) + " only for " +
           std::string(dtype_name(p.dtype)) + " x";
  return {};
}

void qmv_scaled(ConstMatrixView x, const QuantizedMatrix& w, const int32_t* expert_ids,
                MatrixView y, const Context& ctx) {
  const std::string_view kName = expert_ids ? "gather_qmv_scaled" : "qmv_scaled";
  const std::string_view kOp = expert_ids ? "gather_matmul" : "matmul";
  require_device_operands(x, w, expert_ids, y, kOp);
  if (!scaled_operands_aligned(x, w, ctx, kName, kOp))
    return matmul_generic(x, w, expert_ids, y, ctx);
  ExpertFlag flag;
  if (expert_ids) flag = expert_flag_begin(ctx);
  const ScaledArgs a = scaled_args(x, w, expert_ids, flag, y);
  const cudaStream_t stream = stream_of(ctx);
  dispatch_dtype(x.dtype, [&]<class T>() {
    dispatch_scaled_scheme(w, "[quanta::matmul] qmv_scaled",
                           [&]<Scheme S>() { launch<T, S>(a, stream); });
  });
  if (expert_ids) expert_flag_end(flag, ctx, w.batch, kOp);
}

std::string qmv_scaled_mma_supports(const Problem& p) {
  if (std::string why = qmv_scaled_supports(p); !why.empty()) return why;
  if (p.op != Op::matmul) return "matmul only (gather runs gather_qmv_scaled)";
  if (p.dtype == DType::f32) return "f16/bf16 activations only (mma.sync on 16-bit operands)";
  if (p.k % kRunCodes != 0)
    return "needs K % 128 == 0 (runs of 4 lanes x 32 codes), K = " + std::to_string(p.k);
  if (p.compute_capability != 0 && p.compute_capability < 80) return "needs sm_80 (mma.sync)";
  return {};
}

void qmv_scaled_mma(ConstMatrixView x, const QuantizedMatrix& w, const int32_t*, MatrixView y,
                    const Context& ctx) {
  constexpr std::string_view kName = "qmv_scaled_mma", kOp = "matmul";
  require_device_operands(x, w, nullptr, y, kOp);
  if (!scaled_operands_aligned(x, w, ctx, kName, kOp)) return matmul_generic(x, w, nullptr, y, ctx);
  const ScaledArgs a = scaled_args(x, w, nullptr, ExpertFlag{}, y);
  const cudaStream_t stream = stream_of(ctx);
  dispatch_half_dtype(x.dtype, [&]<class T>() {
    dispatch_scaled_scheme(w, "[quanta::matmul] qmv_scaled",
                           [&]<Scheme S>() { launch_mma<T, S>(a, stream); });
  });
}

}  // namespace quanta::cuda
