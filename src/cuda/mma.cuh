// Tensor-core and async-copy primitives (sm_80+): mma.sync m16n8k16 with f32 accumulators,
// ldmatrix, cp.async with zero fill, and the half2 magic-number code conversion.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace quanta::cuda {

// D = A·B + D, A 16x16 (row), B 16x8 (col), f32 accumulators. Fragment ownership (PTX ISA
// "mma.m16n8k16"), g = lane / 4, q = lane % 4:
//   a[0] = A[g][2q..2q+1]    a[1] = A[g+8][2q..2q+1]  a[2] = A[g][2q+8..]  a[3] = A[g+8][2q+8..]
//   b[0] = B[2q..2q+1][g]    b[1] = B[2q+8..2q+9][g]
//   c[0..1] = C[g][2q..2q+1] c[2..3] = C[g+8][2q..2q+1]
template <class T>
__device__ __forceinline__ void mma_16816(float (&c)[4], const uint32_t (&a)[4],
                                          const uint32_t (&b)[2]);

template <>
__device__ __forceinline__ void mma_16816<__half>(float (&c)[4], const uint32_t (&a)[4],
                                                  const uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

template <>
__device__ __forceinline__ void mma_16816<__nv_bfloat16>(float (&c)[4], const uint32_t (&a)[4],
                                                         const uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Four 8x8 b16 matrices; lanes 8i..8i+7 give the row addresses of matrix i.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* row_addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(row_addr)));
}

// cp.async of 16 (or 4) bytes; src_bytes = 0 fills the destination with zeros.
__device__ __forceinline__ void cp_async_16(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
               "r"(valid ? 16 : 0));
}
// The same, asking L2 to fetch the surrounding 256 bytes (the next stage's bytes of a row).
__device__ __forceinline__ void cp_async_16_l2(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)),
               "l"(src), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async_4(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
               "r"(valid ? 4 : 0));
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// ---- half2 magic numbers: unsigned code q in the low mantissa bits of `magic` reads as
// offset + q exactly (f16: 0x6400 = 1024, 10 mantissa bits; bf16: 0x4300 = 128, 7 bits).
template <class T>
struct Magic;
template <>
struct Magic<__half> {
  static constexpr uint32_t kBits2 = 0x64006400u;
  static constexpr int kOffset = 1024;
  static constexpr int kMantissa = 10;
  __device__ static __half2 one2() {
    return __halves2half2(__ushort_as_half(0x3C00), __ushort_as_half(0x3C00));
  }
  __device__ static __half2 offset2() {
    return __halves2half2(__ushort_as_half(0x6400), __ushort_as_half(0x6400));
  }
};
template <>
struct Magic<__nv_bfloat16> {
  static constexpr uint32_t kBits2 = 0x43004300u;
  static constexpr int kOffset = 128;
  static constexpr int kMantissa = 7;
  __device__ static __nv_bfloat162 one2() {
    return __halves2bfloat162(__ushort_as_bfloat16(0x3F80), __ushort_as_bfloat16(0x3F80));
  }
  __device__ static __nv_bfloat162 offset2() {
    return __halves2bfloat162(__ushort_as_bfloat16(0x4300), __ushort_as_bfloat16(0x4300));
  }
};

template <class T>
struct Vec2;
template <>
struct Vec2<__half> {
  using type = __half2;
};
template <>
struct Vec2<__nv_bfloat16> {
  using type = __nv_bfloat162;
};

template <class T>
__device__ __forceinline__ typename Vec2<T>::type as_vec2(uint32_t u) {
  typename Vec2<T>::type v;
  static_assert(sizeof(v) == 4);
  __builtin_memcpy(&v, &u, 4);
  return v;
}
template <class V>
__device__ __forceinline__ uint32_t as_u32(V v) {
  uint32_t u;
  __builtin_memcpy(&u, &v, 4);
  return u;
}

}  // namespace quanta::cuda
