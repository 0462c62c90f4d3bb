// Device vocabulary shared by the CUDA kernel families: activation element types, conversions,
// warp reductions, and the host-side dispatch that turns runtime values (dtype, bits) into
// template parameters. Accepted values come from the format table (kSchemes), never restated.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <bit>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "quanta/dtype.hpp"
#include "quanta/format.hpp"
#include "quanta/numeric.hpp"
#include "quanta/ops.hpp"

namespace quanta::cuda {

inline cudaStream_t stream_of(const Context& ctx) {
  return static_cast<cudaStream_t>(ctx.cuda_stream);
}

// Programmatic dependent launch (sm_90; no-ops before). The pre-pass kernels and their main
// kernels form a chain across calls: each main kernel releases at its start, so the next call's
// pre-pass may launch behind it and waits (grid_dependency_wait) before it reads x or writes its
// scratch; that pre-pass releases at once, so the next main kernel's CTAs land on the SMs as the
// previous ones retire and load weights (which no kernel of the chain writes) before they
// wait for the pre-pass. Each wait covers the whole chain behind it: a grid completes only after
// the grids it waited for. A kernel with no pre-pass (qmv_gguf) does both in one: it releases at
// its start and waits after its first loads of W. qmv_scaled releases only after its main loop:
// its grid spreads 2-3 CTAs an SM, and the next call's CTAs, let in at its start, cost 10-16%.
__device__ __forceinline__ void grid_dependency_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void grid_dependency_release() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}
// Launches `kernel` behind the stream's previous kernel with programmatic dependent launch: it may
// start once that kernel has called grid_dependency_release, and must grid_dependency_wait before
// reading what that kernel writes.
template <class... Params, class... Args>
cudaError_t launch_dependent(void (*kernel)(Params...), dim3 grid, dim3 block, std::size_t smem,
                             cudaStream_t stream, Args&&... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
}
// A pre-pass of the chain above: launched dependent on the stream's previous kernel (a no-op
// unless that kernel released early); it must grid_dependency_wait before it reads its inputs.
template <class... Params, class... Args>
cudaError_t launch_prepass(void (*kernel)(Params...), dim3 grid, dim3 block, cudaStream_t stream,
                           Args&&... args) {
  return launch_dependent(kernel, grid, block, 0, stream, std::forward<Args>(args)...);
}

// ---- activation element types: f32 -> float, f16 -> __half, bf16 -> __nv_bfloat16 ----------

template <class T>
__device__ __forceinline__ float to_f32(T v);
template <>
__device__ __forceinline__ float to_f32<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ float to_f32<__half>(__half v) {
  return __half2float(v);
}
template <>
__device__ __forceinline__ float to_f32<__nv_bfloat16>(__nv_bfloat16 v) {
  return __bfloat162float(v);
}

// Round-to-nearest-even, like the host conversions in quanta/numeric.hpp.
template <class T>
__device__ __forceinline__ T from_f32(float v);
template <>
__device__ __forceinline__ float from_f32<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ __half from_f32<__half>(float v) {
  return __float2half_rn(v);
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

// A value of dtype `t` at element i of an untyped buffer (cold paths: generic kernels).
__device__ __forceinline__ float load_as_f32(const void* p, DType t, int64_t i) {
  switch (t) {
    case DType::f32:
      return static_cast<const float*>(p)[i];
    case DType::f16:
      return f16_bits_to_f32(static_cast<const uint16_t*>(p)[i]);
    case DType::bf16:
      return bf16_bits_to_f32(static_cast<const uint16_t*>(p)[i]);
  }
  return 0.0f;
}

// Stores with quanta's own host/device conversions (bit-identical to dense::store on the host).
__device__ __forceinline__ void store_f32_as(void* p, DType t, int64_t i, float v) {
  switch (t) {
    case DType::f32:
      static_cast<float*>(p)[i] = v;
      break;
    case DType::f16:
      static_cast<uint16_t*>(p)[i] = f32_to_f16_bits(v);
      break;
    case DType::bf16:
      static_cast<uint16_t*>(p)[i] = f32_to_bf16_bits(v);
      break;
  }
}

// The value v takes once stored as t (dense::round_as on the device).
__device__ __forceinline__ float round_as(DType t, float v) {
  switch (t) {
    case DType::f32:
      return v;
    case DType::f16:
      return f16_bits_to_f32(f32_to_f16_bits(v));
    case DType::bf16:
      return bf16_bits_to_f32(f32_to_bf16_bits(v));
  }
  return v;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// A 16-row tile split over a block's warps and the four lanes of each mma quad: lane
// (g = lane/4, q = lane%4) of every warp holds partial sums of rows g and g+8. Sums them over q,
// then over the warps through `smem` (>= warps·16 floats; the caller's buffers are dead), and
// stores rows row0..row0+15 that are < n. Must be reached by every thread of the block.
template <class T>
__device__ __forceinline__ void store_row_tile(float acc_lo, float acc_hi, void* smem, int row0,
                                               int n, T* y) {
  constexpr int kRows = 16;
  const int lane = static_cast<int>(threadIdx.x) & 31, warp = static_cast<int>(threadIdx.x) >> 5;
  const int warps = static_cast<int>(blockDim.x) >> 5;
  acc_lo += __shfl_xor_sync(0xffffffffu, acc_lo, 1);
  acc_lo += __shfl_xor_sync(0xffffffffu, acc_lo, 2);
  acc_hi += __shfl_xor_sync(0xffffffffu, acc_hi, 1);
  acc_hi += __shfl_xor_sync(0xffffffffu, acc_hi, 2);
  __syncthreads();
  float* partial = static_cast<float*>(smem);  // [warp][row]
  if ((lane & 3) == 0) {
    partial[warp * kRows + (lane >> 2)] = acc_lo;
    partial[warp * kRows + (lane >> 2) + 8] = acc_hi;
  }
  __syncthreads();
  if (threadIdx.x < kRows) {
    float sum = 0.0f;
    for (int w = 0; w < warps; ++w) sum += partial[w * kRows + static_cast<int>(threadIdx.x)];
    const int row = row0 + static_cast<int>(threadIdx.x);
    if (row < n) y[row] = from_f32<T>(sum);
  }
}

// ---- host dispatch ---------------------------------------------------------------------------

template <class T>
struct DTypeOf;
template <>
struct DTypeOf<float> {
  static constexpr DType value = DType::f32;
};
template <>
struct DTypeOf<__half> {
  static constexpr DType value = DType::f16;
};
template <>
struct DTypeOf<__nv_bfloat16> {
  static constexpr DType value = DType::bf16;
};

// Elements [k0, k0 + E) of a row of activations as f32 (E = 4 or 8; 16-byte loads through the
// read-only cache, so row + k0 is 16-byte aligned for f16/bf16 and E = 8, 8-byte for E = 4).
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

// f.template operator()<T>() with T the device type of `t`.
template <class F>
decltype(auto) dispatch_dtype(DType t, F&& f) {
  switch (t) {
    case DType::f16:
      return f.template operator()<__half>();
    case DType::bf16:
      return f.template operator()<__nv_bfloat16>();
    case DType::f32:
      break;
  }
  return f.template operator()<float>();
}

// Only the 16-bit activation types (tensor-core kernels).
template <class F>
decltype(auto) dispatch_half_dtype(DType t, F&& f) {
  if (t == DType::bf16) return f.template operator()<__nv_bfloat16>();
  return f.template operator()<__half>();
}

namespace detail {
template <const auto& Values, class F, std::size_t... I>
bool dispatch_value_impl(int v, F&& f, std::index_sequence<I...>) {
  return ((Values[I] == v ? (f.template operator()<Values[I]>(), true) : false) || ...);
}
}  // namespace detail

// f.template operator()<V>() for the entry V of the constexpr array `Values` equal to v;
// false when v is not listed (the caller names the rule it broke).
template <const auto& Values, class F>
bool dispatch_value(int v, F&& f) {
  constexpr std::size_t n = sizeof(Values) / sizeof(Values[0]);
  return detail::dispatch_value_impl<Values>(v, f, std::make_index_sequence<n>{});
}

inline constexpr auto& kAffineBitsList = quanta::detail::kAffineBits;

// The operand fields the affine kernels' argument blocks share (TcArgs, MmaArgs, QvmArgs):
// codes, scales and biases of w, x, y, and M, N, K and log2 of the group size.
template <class Args>
void set_affine_operands(Args& a, ConstMatrixView x, const QuantizedMatrix& w, MatrixView y) {
  a.codes = reinterpret_cast<const uint8_t*>(w.codes);
  a.scales = reinterpret_cast<const uint8_t*>(w.scales);
  a.biases = reinterpret_cast<const uint8_t*>(w.biases);
  a.x = x.data;
  a.y = y.data;
  a.m = static_cast<int32_t>(x.rows);
  a.n = static_cast<int32_t>(w.n);
  a.k = static_cast<int32_t>(w.k);
  a.log2_group = std::countr_zero(static_cast<unsigned>(w.format.group_size));
}

}  // namespace quanta::cuda
