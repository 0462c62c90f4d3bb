// dequantize_affine: affine codes to dense values in the storage layout, bit-exact with the
// host (codec::decode_storage_row): s·q is rounded to the output dtype, then + b is rounded
// again (MLX multiplies, then adds). One thread per 32-code chunk of a stored row: one or two
// 16-byte code loads, 32 values out with 16-byte stores.
//
// When the scales and the output are both f16 (or bf16, codes below 8 bits) the arithmetic runs
// on half2 pairs: s·q and then + b, each rounded to nearest once in the 16-bit type. That is the
// same result as the f32 path: s·q is exact in f32, and rounding an f32 sum of two 16-bit values
// to the 16-bit type cannot double-round (f32's 24 bits >= 2·11 + 2, Figueroa's condition), so
// both paths round the exact values once. It spares four f32<->16-bit conversions per value,
// which bound the f32 path at ~1.9 TB/s on the H200.
#include <algorithm>
#include <type_traits>

#include "cuda/affine_simt.cuh"
#include "cuda/checks.hpp"
#include "cuda/common.cuh"
#include "cuda/families.hpp"
#include "cuda/runtime.cuh"
#include "cuda/scaled_decode.cuh"
#include "cuda/scaled_rules.cuh"
#include "cuda/weights.cuh"  // make_desc

namespace quanta::cuda {

namespace {

constexpr int kThreads = 256;

struct DequantArgs {
  const uint8_t* codes;
  const uint8_t* scales;
  const uint8_t* biases;
  void* out;
  int64_t code_stride, scale_stride;  // bytes per matrix of the stack
  int64_t chunks;                     // 32-code chunks in the whole stack
  int32_t rows, cols;                 // storage rows and columns of one matrix
  int32_t n, groups, log2_group;
  DType scale_dtype;
  bool nk;
  bool sb_aligned;  // scales and biases 16-byte aligned: [K, N] loads a chunk's 32 of each at once
};

template <class TO>
__device__ __forceinline__ float round_to_out(float v) {
  return to_f32(from_f32<TO>(v));
}

// The half2 path: TO is __half (any width) or __nv_bfloat16 (codes below 8 bits: the magic
// number 0x4300 holds codes up to 127 exactly).
template <int BITS, class TO>
inline constexpr bool kPairPath = std::is_same_v<TO, __half> ||
                                  (std::is_same_v<TO, __nv_bfloat16> && BITS < 8);

template <class TO>
using Pair = std::conditional_t<std::is_same_v<TO, __half>, __half2, __nv_bfloat162>;

// 32 values of a chunk as 16 words of half2 pairs.
template <int BITS, class TO>
__device__ __forceinline__ void dequantize_pairs(const uint32_t (&w)[BITS], TO s, TO b,
                                                 uint32_t (&v)[16]) {
  using P = Pair<TO>;
  // Two codes under the magic number read offset + q exactly; subtracting the offset is exact.
  constexpr uint32_t kMagic = std::is_same_v<TO, __half> ? 0x64006400u : 0x43004300u;
  P off, s2, b2;
  *reinterpret_cast<uint32_t*>(&off) = kMagic;
  s2.x = s2.y = s;
  b2.x = b2.y = b;
#pragma unroll
  for (int i = 0; i < 16; ++i) {
    const uint32_t bits = code_u32<BITS>(w, 2 * i) | (code_u32<BITS>(w, 2 * i + 1) << 16) | kMagic;
    P q;
    *reinterpret_cast<uint32_t*>(&q) = bits;
    q = __hsub2(q, off);
    // _rn: no contraction into an fma (MLX rounds the product, then the sum).
    const P r = __hadd2_rn(__hmul2_rn(s2, q), b2);
    v[i] = *reinterpret_cast<const uint32_t*>(&r);
  }
}

// The same with a scale and bias per value ([K, N]: a chunk runs along N), as 16 pairs each.
template <int BITS, class TO>
__device__ __forceinline__ void dequantize_pairs(const uint32_t (&w)[BITS], const uint4 (&s)[4],
                                                 const uint4 (&b)[4], uint32_t (&v)[16]) {
  using P = Pair<TO>;
  constexpr uint32_t kMagic = std::is_same_v<TO, __half> ? 0x64006400u : 0x43004300u;
  P off;
  *reinterpret_cast<uint32_t*>(&off) = kMagic;
  const uint32_t* sw = reinterpret_cast<const uint32_t*>(s);
  const uint32_t* bw = reinterpret_cast<const uint32_t*>(b);
#pragma unroll
  for (int i = 0; i < 16; ++i) {
    const uint32_t bits = code_u32<BITS>(w, 2 * i) | (code_u32<BITS>(w, 2 * i + 1) << 16) | kMagic;
    P q, s2, b2;
    *reinterpret_cast<uint32_t*>(&q) = bits;
    *reinterpret_cast<uint32_t*>(&s2) = sw[i];
    *reinterpret_cast<uint32_t*>(&b2) = bw[i];
    const P r = __hadd2_rn(__hmul2_rn(s2, __hsub2(q, off)), b2);
    v[i] = *reinterpret_cast<const uint32_t*>(&r);
  }
}

// 32 consecutive values of T at p[i..] (16-byte aligned) as four 16-byte pieces.
__device__ __forceinline__ void load_run32_16bit(const uint8_t* p, int64_t i, uint4 (&out)[4]) {
  const uint4* q = reinterpret_cast<const uint4*>(p + i * 2);
#pragma unroll
  for (int j = 0; j < 4; ++j) out[j] = q[j];
}

// 32 consecutive scales (or biases) of dtype t from index i, as f32: 16-byte loads when aligned.
__device__ __forceinline__ void load_run32_f32(const uint8_t* p, DType t, int64_t i, bool aligned,
                                               float (&out)[32]) {
  if (aligned && t == DType::f32) {
    const float4* q = reinterpret_cast<const float4*>(p + i * 4);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const float4 f = q[j];
      out[4 * j] = f.x, out[4 * j + 1] = f.y, out[4 * j + 2] = f.z, out[4 * j + 3] = f.w;
    }
  } else if (aligned) {
    uint4 r[4];
    load_run32_16bit(p, i, r);
    const uint16_t* h = reinterpret_cast<const uint16_t*>(r);
#pragma unroll
    for (int j = 0; j < 32; ++j)
      out[j] = t == DType::f16 ? f16_bits_to_f32(h[j]) : bf16_bits_to_f32(h[j]);
  } else {
#pragma unroll
    for (int j = 0; j < 32; ++j) out[j] = load_as_f32(p, t, i + j);
  }
}

// A warp's 32 chunks are P x 512 bytes of consecutive output (P = 4 for 16-bit values, 8 for
// f32): each lane's P 16-byte pieces go through shared memory so that every store instruction
// writes 512 contiguous bytes (stored straight, each instruction wrote 16 bytes every 64 and
// dequantize ran at ~2 TB/s). Piece i of lane L sits in slot P·L + (i ^ (L / (8 / P) % P)):
// conflict-free both ways.
template <int P>
__device__ __forceinline__ void store_warp_coalesced(uint4* stage, const uint32_t (&v)[4 * P],
                                                     bool live, uint4* warp_out,
                                                     int64_t units_left) {
  const int lane = static_cast<int>(threadIdx.x) & 31;
  constexpr int kLanesPerSwizzle = 8 / P;
  if (live) {
#pragma unroll
    for (int i = 0; i < P; ++i)
      stage[P * lane + (i ^ ((lane / kLanesPerSwizzle) % P))] =
          make_uint4(v[4 * i], v[4 * i + 1], v[4 * i + 2], v[4 * i + 3]);
  }
  __syncwarp();
#pragma unroll
  for (int j = 0; j < P; ++j) {
    const int u = 32 * j + lane, src = u / P;
    if (u < units_left) warp_out[u] = stage[P * src + ((u % P) ^ ((src / kLanesPerSwizzle) % P))];
  }
}

template <int BITS, class TO>
__global__ void __launch_bounds__(kThreads) dequantize_affine_kernel(const DequantArgs a) {
  const int64_t chunk = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if constexpr (kPairPath<BITS, TO>) {
    // Whole warps stay (the coalesced store needs them): lanes past the end only help store.
    // [K, N] takes a chunk's 32 scales and biases (one a column) as 16-byte pieces.
    if (a.scale_dtype == DTypeOf<TO>::value && (a.nk || a.sb_aligned)) {
      __shared__ uint4 stage[kThreads / 32][128];
      const bool live = chunk < a.chunks;
      const int64_t c = live ? chunk : a.chunks - 1;
      const int64_t per_row = a.cols / 32, per_matrix = per_row * a.rows;
      const int64_t e = c / per_matrix;
      const int64_t r = (c % per_matrix) / per_row, c0 = (c % per_row) * 32;
      uint32_t w[BITS];
      load_chunk<BITS>(a.codes + e * a.code_stride + (r * a.cols + c0) * BITS / 8, w);
      const uint8_t* sc = a.scales + e * a.scale_stride;
      const uint8_t* bi = a.biases + e * a.scale_stride;
      uint32_t v[16];
      if (a.nk) {  // the chunk lies in one group of row r
        const int64_t si = r * a.groups + (c0 >> a.log2_group);
        dequantize_pairs<BITS, TO>(w, reinterpret_cast<const TO*>(sc)[si],
                                   reinterpret_cast<const TO*>(bi)[si], v);
      } else {
        const int64_t si = (r >> a.log2_group) * a.n + c0;
        uint4 sv[4], bv[4];
        load_run32_16bit(sc, si, sv);
        load_run32_16bit(bi, si, bv);
        dequantize_pairs<BITS, TO>(w, sv, bv, v);
      }
      // Output of chunk c starts at element 32c (rows of the stack are contiguous).
      const int64_t first = chunk - (threadIdx.x & 31);
      store_warp_coalesced<4>(stage[threadIdx.x / 32], v, live,
                              reinterpret_cast<uint4*>(static_cast<TO*>(a.out) + first * 32),
                              (a.chunks - first) * 4);
      return;
    }
  }
  if (chunk >= a.chunks) return;
  const int64_t per_row = a.cols / 32, per_matrix = per_row * a.rows;
  const int64_t e = chunk / per_matrix;
  const int64_t r = (chunk % per_matrix) / per_row, c0 = (chunk % per_row) * 32;
  uint32_t w[BITS];
  load_chunk<BITS>(a.codes + e * a.code_stride + (r * a.cols + c0) * BITS / 8, w);
  const uint8_t* sc = a.scales + e * a.scale_stride;
  const uint8_t* bi = a.biases + e * a.scale_stride;
  TO* out = static_cast<TO*>(a.out) + (e * a.rows + r) * a.cols + c0;
  float v[32];
  if (a.nk) {  // the chunk lies in one group of row r
    const int64_t si = r * a.groups + (c0 >> a.log2_group);
    const float s = load_as_f32(sc, a.scale_dtype, si), b = load_as_f32(bi, a.scale_dtype, si);
#pragma unroll
    for (int i = 0; i < 32; ++i)
      v[i] = round_to_out<TO>(__fadd_rn(round_to_out<TO>(__fmul_rn(s, code_f32<BITS>(w, i))), b));
  } else {  // kn: K-row r, columns c0.. each with its own scale
    const int64_t si = (r >> a.log2_group) * a.n + c0;
    float s[32], b[32];
    load_run32_f32(sc, a.scale_dtype, si, a.sb_aligned, s);
    load_run32_f32(bi, a.scale_dtype, si, a.sb_aligned, b);
#pragma unroll
    for (int i = 0; i < 32; ++i)
      v[i] = round_to_out<TO>(
          __fadd_rn(round_to_out<TO>(__fmul_rn(s[i], code_f32<BITS>(w, i))), b[i]));
  }
  constexpr int kPer16 = 16 / sizeof(TO);
#pragma unroll
  for (int i = 0; i < 32; i += kPer16) {
    TO t[kPer16];
#pragma unroll
    for (int j = 0; j < kPer16; ++j) t[j] = from_f32<TO>(v[i + j]);
    *reinterpret_cast<uint4*>(out + i) = *reinterpret_cast<const uint4*>(t);
  }
}

// ---- dequantize_scaled: mxfp4, nvfp4, mxfp8 and fp8 [N, K] --------------------------------------
// One thread per 32 codes of a row (16 or 32 bytes, one mx group, two nvfp4 ones), decoded exactly
// (scaled_decode.cuh) and scaled as the host does: microscaled round(v·s) to the output dtype,
// then · the global scale (nvfp4) and rounded again; fp8 v·s rounded once. The output leaves
// through store_warp_coalesced (f32 as 8 pieces a lane, 32 KB of shared memory a CTA).
struct ScaledDequantArgs {
  const uint8_t* codes;
  const uint8_t* scales;  // bytes [N][K / G] (microscaled), f32 [N] or [1] (fp8)
  void* out;
  int64_t code_stride, scale_stride, row_bytes;  // bytes per matrix of the stack, per row
  int64_t chunks;                                // 32-code chunks in the whole stack
  int32_t rows, cols;                            // N and K of one matrix
  int32_t per_row;                               // fp8: 1 for a scale per row, 0 for one
  float global;                                  // nvfp4's tensor scale (1 otherwise)
};

template <Scheme S, class TO>
__global__ void __launch_bounds__(kThreads) dequantize_scaled_kernel(const ScaledDequantArgs a) {
  using Tr = ScaledTraits<S>;
  constexpr bool kFp4 = Tr::kCode == ElementCode::e2m1, kMicro = Tr::kGroup > 0;
  constexpr int kWords = kFp4 ? 4 : 8, kPerWord = 32 / kWords;
  // Whole warps stay (the coalesced store needs them): lanes past the end only help store.
  const int64_t chunk = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  const bool live = chunk < a.chunks;
  const int64_t c = live ? chunk : a.chunks - 1;
  const int64_t per_row = a.cols / 32, per_matrix = per_row * a.rows;
  const int64_t e = c / per_matrix, r = (c % per_matrix) / per_row, j = c % per_row;
  const uint4* src = reinterpret_cast<const uint4*>(a.codes + e * a.code_stride + r * a.row_bytes) +
                     j * (kWords / 4);
  uint32_t w[kWords];
#pragma unroll
  for (int i = 0; i < kWords / 4; ++i) {
    const uint4 u = __ldcs(src + i);  // streamed: read once
    w[4 * i] = u.x, w[4 * i + 1] = u.y, w[4 * i + 2] = u.z, w[4 * i + 3] = u.w;
  }
  const uint8_t* sc = a.scales + e * a.scale_stride;
  float s[2] = {};
  if constexpr (S == Scheme::nvfp4) {  // groups 2j and 2j + 1 of the row
    chunk_scales<S>(sc + r * per_row * 2, static_cast<int>(j), s);
  } else if constexpr (kMicro) {  // group j of the row
    s[0] = codec::e8m0_to_float(sc[r * per_row + j]);
  } else {
    s[0] = reinterpret_cast<const float*>(sc)[a.per_row ? r : 0];
  }
  float v[32];
#pragma unroll
  for (int i = 0; i < kWords; ++i) {
    decode_word<Tr::kCode>(w[i], v + kPerWord * i);
#pragma unroll
    for (int t = 0; t < kPerWord; ++t) {
      float x = v[kPerWord * i + t];
      if constexpr (kFp4) x *= 16384.0f;  // decode_word's v · 2^-14 back to v (exact)
      float o = __fmul_rn(x, S == Scheme::nvfp4 ? s[kPerWord * i + t >= 16] : s[0]);
      if constexpr (S == Scheme::nvfp4) o = __fmul_rn(round_to_out<TO>(o), a.global);
      v[kPerWord * i + t] = o;
    }
  }
  // Output of chunk c starts at element 32c (rows of the stack are contiguous).
  const int64_t first = chunk - (threadIdx.x & 31);
  constexpr int kPieces = sizeof(TO) == 2 ? 4 : 8;  // 16-byte pieces a lane
  __shared__ uint4 stage[kThreads / 32][32 * kPieces];
  uint32_t h[4 * kPieces];
  if constexpr (sizeof(TO) == 2) {
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      const TO lo = from_f32<TO>(v[2 * i]), hi = from_f32<TO>(v[2 * i + 1]);
      h[i] = static_cast<uint32_t>(*reinterpret_cast<const uint16_t*>(&lo)) |
             static_cast<uint32_t>(*reinterpret_cast<const uint16_t*>(&hi)) << 16;
    }
  } else {
#pragma unroll
    for (int i = 0; i < 32; ++i) h[i] = __float_as_uint(v[i]);
  }
  store_warp_coalesced<kPieces>(stage[threadIdx.x / 32], h, live,
                                reinterpret_cast<uint4*>(static_cast<TO*>(a.out) + first * 32),
                                (a.chunks - first) * kPieces);
}

}  // namespace

std::string dequantize_affine_supports(const Problem& p) {
  if (p.format.scheme != Scheme::affine) return "needs the affine format";
  const int64_t cols = p.layout == Layout::nk ? p.k : p.n;
  if (cols % 32 != 0) return "needs whole 32-code chunks per stored row (columns % 32 == 0)";
  return {};
}

void dequantize_affine(const QuantizedMatrix& w, MatrixView out, const Context& ctx) {
  constexpr std::string_view kName = "dequantize_affine", kOp = "dequantize";
  require_device_weights(w, kOp);
  require_device_pointer(out.data, kOp, "out");
  if (!alignment_ok(out.data, 16, ctx, kName, kOp, "out") ||
      !alignment_ok(w.codes, 16, ctx, kName, kOp, "w.codes"))
    return dequantize_generic(w, out, ctx);
  const Footprint fp = w.footprint();
  DequantArgs a{};
  a.codes = reinterpret_cast<const uint8_t*>(w.codes);
  a.scales = reinterpret_cast<const uint8_t*>(w.scales);
  a.biases = reinterpret_cast<const uint8_t*>(w.biases);
  a.out = out.data;
  a.code_stride = static_cast<int64_t>(fp.code_bytes);
  a.scale_stride = static_cast<int64_t>(fp.scale_bytes);
  a.nk = w.layout == Layout::nk;
  a.rows = static_cast<int32_t>(a.nk ? w.n : w.k);
  a.cols = static_cast<int32_t>(a.nk ? w.k : w.n);
  a.n = static_cast<int32_t>(w.n);
  a.groups = static_cast<int32_t>(w.k / w.format.group_size);
  int lg = 0;
  while ((1 << lg) < w.format.group_size) ++lg;
  a.log2_group = lg;
  a.scale_dtype = w.scale_dtype;
  a.sb_aligned = is_aligned(w.scales, 16) && is_aligned(w.biases, 16) &&
                 (a.scale_stride % 16 == 0 || w.batch == 1);
  a.chunks = static_cast<int64_t>(a.rows) * (a.cols / 32) * w.batch;
  const unsigned grid = static_cast<unsigned>((a.chunks + kThreads - 1) / kThreads);
  const cudaStream_t stream = stream_of(ctx);
  dispatch_dtype(out.dtype, [&]<class TO>() {
    dispatch_value<kAffineBitsList>(w.format.bits, [&]<int BITS>() {
      dequantize_affine_kernel<BITS, TO><<<grid, kThreads, 0, stream>>>(a);
      QUANTA_CUDA_CHECK_LAUNCH();
    });
  });
}

std::string dequantize_scaled_supports(const Problem& p) {
  const Scheme s = p.format.scheme;
  if (!scaled_scheme(s)) return "mxfp4, nvfp4, mxfp8, e4m3 or e5m2 only";
  if (p.layout != Layout::nk) return "the [N, K] layout only";
  if (p.k % 32 != 0) return "needs K % 32 == 0 (32-code chunks), K = " + std::to_string(p.k);
  return {};
}

void dequantize_scaled(const QuantizedMatrix& w, MatrixView out, const Context& ctx) {
  constexpr std::string_view kName = "dequantize_scaled", kOp = "dequantize";
  require_device_weights(w, kOp);
  require_device_pointer(out.data, kOp, "out");
  const WeightDesc d = make_desc(w);
  if (w.layout != Layout::nk || w.k % 32 != 0 ||
      !alignment_ok(out.data, 16, ctx, kName, kOp, "out") ||
      !alignment_ok(w.codes, 16, ctx, kName, kOp, "w.codes") ||
      !alignment_ok(w.scales, scale_alignment(w.format.scheme), ctx, kName, kOp, "w.scales") ||
      d.code_stride % 16 != 0 ||
      d.scale_stride % static_cast<int64_t>(scale_alignment(w.format.scheme)) != 0)
    return dequantize_generic(w, out, ctx);
  ScaledDequantArgs a{};
  a.codes = d.codes;
  a.scales = d.scales;
  a.out = out.data;
  a.code_stride = d.code_stride;
  a.scale_stride = d.scale_stride;
  a.row_bytes = d.row_bytes;
  a.rows = d.n;
  a.cols = d.k;
  a.per_row = d.granularity == Granularity::channel ? 1 : 0;
  a.global = d.global;
  a.chunks = static_cast<int64_t>(d.n) * (d.k / 32) * d.batch;
  const unsigned grid = static_cast<unsigned>((a.chunks + kThreads - 1) / kThreads);
  const cudaStream_t stream = stream_of(ctx);
  dispatch_dtype(out.dtype, [&]<class TO>() {
    dispatch_scaled_scheme(w, "[quanta::dequantize] dequantize_scaled", [&]<Scheme S>() {
      dequantize_scaled_kernel<S, TO><<<grid, kThreads, 0, stream>>>(a);
      QUANTA_CUDA_CHECK_LAUNCH();
    });
  });
}

}  // namespace quanta::cuda
