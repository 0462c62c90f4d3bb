// dequantize_gguf: GGUF block formats [N, K] (expert stacks too) to f32 / f16 / bf16, bit-exact
// with the host codec. A warp per row segment of 1024 elements (gguf_piece.cuh): the segment's
// bytes loaded coalesced and parked in shared memory, lane l decoding piece l and writing its 32
// values with 16-byte stores. dequantize_generic (a lane per block through the codec, staged as
// f32 in shared memory, stored an element at a time) took 0.38-0.65 ms on 14336 x 5120 (H100),
// ~10x the time to read the blocks, and qmm_generic_dq runs a dequantize before cuBLAS.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include "cuda/checks.hpp"
#include "cuda/common.cuh"
#include "cuda/families.hpp"
#include "cuda/gguf_piece.cuh"
#include "cuda/runtime.cuh"
#include "cuda/weights.cuh"  // make_desc

namespace quanta::cuda {

namespace {

constexpr int kWarps = 8;                       // segments per CTA, one a warp
constexpr int64_t kMaxCtas = int64_t{1} << 20;  // the grid strides past it

struct GgufDequantArgs {
  const uint8_t* codes;                  // [batch][N][row_bytes]
  const uint8_t* codes_end;              // one past the last code byte of the stack
  void* out;                             // [batch][N][K]
  int64_t row_bytes, code_stride, rows;  // rows: N · batch
  int32_t n, k;
};

// 32 values as the output dtype, 16 bytes a store (out is 16-byte aligned and K % 32 == 0).
template <class TO>
__device__ __forceinline__ void store32(TO* out, const float (&v)[32]) {
  if constexpr (sizeof(TO) == 4) {
    auto* o = reinterpret_cast<float4*>(out);
#pragma unroll
    for (int i = 0; i < 8; ++i)
      o[i] = make_float4(v[4 * i], v[4 * i + 1], v[4 * i + 2], v[4 * i + 3]);
  } else {
    uint32_t h[16];
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      const bool f16 = std::is_same_v<TO, __half>;
      const uint32_t lo = f16 ? f32_to_f16_bits(v[2 * i]) : f32_to_bf16_bits(v[2 * i]);
      const uint32_t hi = f16 ? f32_to_f16_bits(v[2 * i + 1]) : f32_to_bf16_bits(v[2 * i + 1]);
      h[i] = lo | hi << 16;
    }
    auto* o = reinterpret_cast<uint4*>(out);
#pragma unroll
    for (int i = 0; i < 4; ++i)
      o[i] = make_uint4(h[4 * i], h[4 * i + 1], h[4 * i + 2], h[4 * i + 3]);
  }
}

template <Scheme S, class TO>
__global__ void __launch_bounds__(32 * kWarps) dequantize_gguf_kernel(const GgufDequantArgs a) {
  using G = Gguf<S>;
  constexpr int kSegBytes = seg_bytes<S>(), kLaneWords = lane_words<S>();
  constexpr int kBufWords = 32 * kLaneWords + 1;  // a spare word for words_at's funnel shifts
  __shared__ uint32_t park_all[kWarps][kBufWords];
  const int lane = static_cast<int>(threadIdx.x) % 32, warp = static_cast<int>(threadIdx.x) / 32;
  uint32_t* park = park_all[warp];
  const int segs = (a.k + kSegElems - 1) / kSegElems;
  const int64_t total = a.rows * segs;
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * kWarps + warp; t < total;
       t += static_cast<int64_t>(gridDim.x) * kWarps) {
    const int64_t er = t / segs, e = er / a.n, r = er - e * a.n;
    const int g = static_cast<int>(t - er * segs);
    const uint8_t* p = a.codes + e * a.code_stride + r * a.row_bytes + int64_t{g} * kSegBytes;
    const int bytes = min(kSegBytes, static_cast<int>(a.row_bytes - int64_t{g} * kSegBytes));
    uint32_t words[kLaneWords];
    load_segment(p, bytes, a.codes_end, lane, words);
#pragma unroll
    for (int i = 0; i < kLaneWords; ++i) park[lane + 32 * i] = words[i];
    __syncwarp();
    const int pieces = min(kPieces, (a.k - g * kSegElems) / 32);
    if (lane < pieces) {
      uint32_t qb[8];
      float sc[2], mn[2];
      decode_piece<S>(park, static_cast<int>(reinterpret_cast<uintptr_t>(p) & 3), lane, qb, sc, mn);
      float v[32];
#pragma unroll
      for (int i = 0; i < 32; ++i) {
        const float q =
            static_cast<float>(static_cast<int>((qb[i / 4] >> (8 * (i % 4))) & 0xFFu) - G::kOffset);
        // The codec's value: scale·q exact, the min's subtraction the one rounding.
        v[i] = G::kMin ? sc[i / 16] * q - mn[i / 16] : sc[i / 16] * q;
      }
      store32(static_cast<TO*>(a.out) + er * a.k + int64_t{g} * kSegElems + 32 * lane, v);
    }
    __syncwarp();  // the park is rewritten by the warp's next segment
  }
}

}  // namespace

std::string dequantize_gguf_supports(const Problem& p) {
  if (p.format.info().family != Family::gguf) return "GGUF block formats only";
  if (p.layout != Layout::nk) return "the [N, K] layout only";
  if (p.n > INT32_MAX || p.k > INT32_MAX) return "needs N and K in int32";
  return {};
}

void dequantize_gguf(const QuantizedMatrix& w, MatrixView out, const Context& ctx) {
  constexpr std::string_view kName = "dequantize_gguf", kOp = "dequantize";
  require_device_weights(w, kOp);
  require_device_pointer(out.data, kOp, "out");
  // Rows start 2 bytes apart at worst, pieces read 2-byte fields: codes 4-byte aligned as for
  // qmv_gguf; out takes 16-byte stores.
  if (w.layout != Layout::nk || !alignment_ok(w.codes, 4, ctx, kName, kOp, "w.codes") ||
      !alignment_ok(out.data, 16, ctx, kName, kOp, "out"))
    return dequantize_generic(w, out, ctx);
  const WeightDesc d = make_desc(w);
  GgufDequantArgs a{};
  a.codes = d.codes;
  a.codes_end = d.codes + d.code_stride * d.batch;
  a.out = out.data;
  a.row_bytes = d.row_bytes;
  a.code_stride = d.code_stride;
  a.rows = static_cast<int64_t>(d.n) * d.batch;
  a.n = static_cast<int32_t>(d.n);
  a.k = static_cast<int32_t>(d.k);
  const int64_t segs = a.rows * ((a.k + kSegElems - 1) / kSegElems);
  const unsigned grid =
      static_cast<unsigned>(std::min<int64_t>((segs + kWarps - 1) / kWarps, kMaxCtas));
  const cudaStream_t stream = stream_of(ctx);
  dispatch_dtype(out.dtype, [&]<class TO>() {
    dispatch_gguf_scheme(w.format.scheme, "[quanta::dequantize] dequantize_gguf", [&]<Scheme S>() {
      dequantize_gguf_kernel<S, TO><<<grid, 32 * kWarps, 0, stream>>>(a);
      QUANTA_CUDA_CHECK_LAUNCH();
    });
  });
}

}  // namespace quanta::cuda
