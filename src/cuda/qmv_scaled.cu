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
// of f32, through L1), so x is loaded once per 4 rows of W. Decodes, all exact:
//   E2M1: the code's magnitude moved under an f16's exponent and mantissa (bits 9-11) and its sign
//   to bit 15 reads v · 2^-14, also for the subnormal 0.5; the 2^14 is restored per group sum.
//   E4M3: cvt.f16x2.e4m3x2 (sm_89+; cuda_fp8.h emulates it before). E5M2: the byte is the top half
//   of an f16.
// Groups: mxfp4 a chunk, nvfp4 two per chunk, mxfp8 two chunks; each group's sum is scaled once.
#include <cuda_fp8.h>

#include <cstdint>

#include "cuda/checks.hpp"
#include "cuda/common.cuh"
#include "cuda/families.hpp"
#include "cuda/runtime.cuh"
#include "format/minifloat.hpp"

namespace quanta::cuda {

namespace {

constexpr int kWarps = 4, kThreads = 32 * kWarps;
constexpr int kRows = 4;      // rows of W per warp
constexpr int kMaxRowsX = 4;  // rows of x per pass over W
constexpr int kRowsXChoices[] = {1, 2, 3, 4};
constexpr int kMaxGridY = 65535;  // tiles of rows of x beyond it loop

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

// What a scheme stores: codes per 16-byte chunk, elements per scale, the element code.
template <Scheme S>
struct Traits;
template <>
struct Traits<Scheme::mxfp4> {
  static constexpr int kCodes = 32, kGroup = 32;
  static constexpr ElementCode kCode = ElementCode::e2m1;
};
template <>
struct Traits<Scheme::nvfp4> {
  static constexpr int kCodes = 32, kGroup = 16;
  static constexpr ElementCode kCode = ElementCode::e2m1;
};
template <>
struct Traits<Scheme::mxfp8> {
  static constexpr int kCodes = 16, kGroup = 32;
  static constexpr ElementCode kCode = ElementCode::e4m3;
};
template <>
struct Traits<Scheme::fp8_e4m3> {
  static constexpr int kCodes = 16, kGroup = 0;
  static constexpr ElementCode kCode = ElementCode::e4m3;
};
template <>
struct Traits<Scheme::fp8_e5m2> {
  static constexpr int kCodes = 16, kGroup = 0;
  static constexpr ElementCode kCode = ElementCode::e5m2;
};

// The word's codes as f32, in element order: 8 E2M1 codes (as v · 2^-14) or 4 fp8 codes (exact).
template <ElementCode C>
__device__ __forceinline__ void decode_word(uint32_t w, float* v) {
  if constexpr (C == ElementCode::e2m1) {
#pragma unroll
    for (int t = 0; t < 4; ++t) {  // elements t and t + 4 share a half2
      const uint32_t s = w >> (4 * t);
      const uint32_t h = ((s & 0x00070007u) << 9) | ((s & 0x00080008u) << 12);
      const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&h));
      v[t] = f.x;
      v[t + 4] = f.y;
    }
  } else {
#pragma unroll
    for (int t = 0; t < 2; ++t) {  // elements 2t and 2t + 1
      uint32_t h;
      if constexpr (C == ElementCode::e4m3) {
        const __half2_raw r =
            __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(w >> (16 * t)), __NV_E4M3);
        h = static_cast<uint32_t>(r.x) | static_cast<uint32_t>(r.y) << 16;
      } else {
        h = __byte_perm(w, 0u, t == 0 ? 0x1404u : 0x3424u);
      }
      const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&h));
      v[2 * t] = f.x;
      v[2 * t + 1] = f.y;
    }
  }
}

// Elements [k0, k0 + E) of a row of x as f32 (E = 4 or 8, 16-byte aligned for f16/bf16).
template <class T, int E>
__device__ __forceinline__ void load_x(const T* row, int k0, float* out) {
  if constexpr (sizeof(T) == 4) {
#pragma unroll
    for (int i = 0; i < E; i += 4) {
      const float4 f = __ldg(reinterpret_cast<const float4*>(row + k0 + i));
      out[i] = f.x;
      out[i + 1] = f.y;
      out[i + 2] = f.z;
      out[i + 3] = f.w;
    }
  } else {
    uint32_t u[E / 2];
    if constexpr (E == 8) {
      const uint4 q = __ldg(reinterpret_cast<const uint4*>(row + k0));
      u[0] = q.x, u[1] = q.y, u[2] = q.z, u[3] = q.w;
    } else {
      const uint2 q = __ldg(reinterpret_cast<const uint2*>(row + k0));
      u[0] = q.x, u[1] = q.y;
    }
#pragma unroll
    for (int i = 0; i < E / 2; ++i) {
      if constexpr (sizeof(T) == 2 && DTypeOf<T>::value == DType::f16) {
        const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&u[i]));
        out[2 * i] = f.x, out[2 * i + 1] = f.y;
      } else {  // bf16: the f32 whose top half it is
        out[2 * i] = __uint_as_float(u[i] << 16);
        out[2 * i + 1] = __uint_as_float(u[i] & 0xFFFF0000u);
      }
    }
  }
}

// The scales a chunk needs, as f32 (microscaled: one or two groups; fp8: unused).
template <Scheme S>
__device__ __forceinline__ void chunk_scales(const uint8_t* srow, int chunk, float* s) {
  if constexpr (S == Scheme::mxfp4) {
    s[0] = codec::e8m0_to_float(srow[chunk]);
  } else if constexpr (S == Scheme::nvfp4) {
    const uint16_t b = *reinterpret_cast<const uint16_t*>(srow + 2 * chunk);
    s[0] = codec::e4m3_to_float(static_cast<uint8_t>(b));
    s[1] = codec::e4m3_to_float(static_cast<uint8_t>(b >> 8));
  } else if constexpr (S == Scheme::mxfp8) {
    s[0] = codec::e8m0_to_float(srow[chunk / 2]);
  }
}

template <class T, Scheme S, int MR>
__global__ void __launch_bounds__(kThreads) qmv_scaled_kernel(const ScaledArgs a) {
  using Tr = Traits<S>;
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
  for (int tile = static_cast<int>(blockIdx.y); tile < tiles; tile += static_cast<int>(gridDim.y)) {
    const int m0 = tile * MR;
    int64_t e = 0;  // the expert (gather: one row of x a tile)
    if (a.ids != nullptr) {
      e = a.ids[m0];
      if (e < 0 || e >= a.batch) {  // flagged; the row's outputs become NaN, W is not read
        if (lane == 0) atomicOr(a.flag, 1);
        if (lane < kRows && n0 + lane < a.n)
          y[static_cast<int64_t>(m0) * a.n + n0 + lane] = from_f32<T>(__int_as_float(0x7FC00000));
        continue;
      }
    }
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
  }
}

// Rows of x per pass: up to four for a plain matmul, one for gather (each row its own expert).
template <class T, Scheme S>
void launch(const ScaledArgs& a, cudaStream_t stream) {
  const int mr = a.ids ? 1 : a.m < kMaxRowsX ? a.m : kMaxRowsX;
  const int tiles = (a.m + mr - 1) / mr;
  const dim3 grid(static_cast<unsigned>((a.n + kRows * kWarps - 1) / (kRows * kWarps)),
                  static_cast<unsigned>(tiles < kMaxGridY ? tiles : kMaxGridY));
  auto go = [&]<int MR>() {
    qmv_scaled_kernel<T, S, MR><<<grid, kThreads, 0, stream>>>(a);
    QUANTA_CUDA_CHECK_LAUNCH();
  };
  dispatch_value<kRowsXChoices>(mr, go);
}

// nvfp4 reads a chunk's two scale bytes as one u16, fp8 an f32 per row.
std::size_t scale_alignment(Scheme s) {
  return s == Scheme::nvfp4 ? 2 : (s == Scheme::fp8_e4m3 || s == Scheme::fp8_e5m2) ? 4 : 1;
}

}  // namespace

std::string qmv_scaled_supports(const Problem& p) {
  const Scheme s = p.format.scheme;
  const bool fp4 = s == Scheme::mxfp4 || s == Scheme::nvfp4;
  if (!fp4 && s != Scheme::mxfp8 && s != Scheme::fp8_e4m3 && s != Scheme::fp8_e5m2)
    return "mxfp4, nvfp4, mxfp8, e4m3 or e5m2 only";
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

void qmv_scaled(ConstMatrixView x, const QuantizedMatrix& w, const int32_t* expert_ids,
                MatrixView y, const Context& ctx) {
  const std::string_view kName = expert_ids ? "gather_qmv_scaled" : "qmv_scaled";
  const std::string_view kOp = expert_ids ? "gather_matmul" : "matmul";
  require_device_operands(x, w, expert_ids, y, kOp);
  if (!alignment_ok(w.codes, 16, ctx, kName, kOp, "w.codes") ||
      !alignment_ok(x.data, 16, ctx, kName, kOp, "x") ||
      !alignment_ok(w.scales, scale_alignment(w.format.scheme), ctx, kName, kOp, "w.scales"))
    return matmul_generic(x, w, expert_ids, y, ctx);
  ExpertFlag flag;
  if (expert_ids) flag = expert_flag_begin(ctx);
  const Footprint fp = w.footprint();
  ScaledArgs a{};
  a.codes = reinterpret_cast<const uint8_t*>(w.codes);
  a.scales = reinterpret_cast<const uint8_t*>(w.scales);
  a.x = x.data;
  a.y = y.data;
  a.ids = expert_ids;
  a.flag = flag.device;
  a.row_bytes = static_cast<int64_t>(fp.code_bytes) / w.n;
  a.code_stride = static_cast<int64_t>(fp.code_bytes);
  a.scale_stride = static_cast<int64_t>(fp.scale_bytes);
  a.batch = static_cast<int32_t>(w.batch);
  a.m = static_cast<int32_t>(x.rows);
  a.n = static_cast<int32_t>(w.n);
  a.k = static_cast<int32_t>(w.k);
  a.per_row = w.format.granularity == Granularity::channel ? 1 : 0;
  a.global = w.global_scale ? *w.global_scale : 1.0f;
  const cudaStream_t stream = stream_of(ctx);
  dispatch_dtype(x.dtype, [&]<class T>() {
    switch (w.format.scheme) {
      case Scheme::mxfp4:
        return launch<T, Scheme::mxfp4>(a, stream);
      case Scheme::nvfp4:
        return launch<T, Scheme::nvfp4>(a, stream);
      case Scheme::mxfp8:
        return launch<T, Scheme::mxfp8>(a, stream);
      case Scheme::fp8_e4m3:
        return launch<T, Scheme::fp8_e4m3>(a, stream);
      case Scheme::fp8_e5m2:
        return launch<T, Scheme::fp8_e5m2>(a, stream);
      default:
        throw Error("[quanta::matmul] qmv_scaled: " + std::string(w.format.info().name) +
                    " is not a microscaled or fp8 format");
    }
  });
  if (expert_ids) expert_flag_end(flag, ctx, w.batch, kOp);
}

}  // namespace quanta::cuda
