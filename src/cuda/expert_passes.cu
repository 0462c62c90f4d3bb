// group_rows_by_expert (expert_passes.hpp): one CTA counts the rows of each expert in shared
// memory, scans the counts into each expert's first place in `order` and first pass, and writes
// both. Rows of one expert land in `order` in no particular order: each row of y depends only on
// its own row of x and its expert, so which rows share a pass does not change a result.
#include <cstddef>
#include <cstdint>
#include <string>

#include "cuda/common.cuh"
#include "cuda/expert_passes.hpp"
#include "cuda/runtime.cuh"
#include "cuda/workspace.hpp"
#include "quanta/error.hpp"

namespace quanta::cuda {

namespace {

constexpr int kThreads = 1024;
constexpr int kPerThread =
    static_cast<int>(kMaxGroupedExperts) / kThreads;  // experts a thread scans
static_assert(kPerThread * kThreads == kMaxGroupedExperts);

// Exclusive prefix sums over the CTA of a thread's (a, b); b's total goes to *tb.
__device__ __forceinline__ void block_exclusive_scan(int& a, int& b, int* tb) {
  __shared__ int wa[kThreads / 32], wb[kThreads / 32];
  const int lane = static_cast<int>(threadIdx.x) % 32, warp = static_cast<int>(threadIdx.x) / 32;
  int ia = a, ib = b;  // inclusive within the warp
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const int ua = __shfl_up_sync(0xffffffffu, ia, o), ub = __shfl_up_sync(0xffffffffu, ib, o);
    if (lane >= o) ia += ua, ib += ub;
  }
  if (lane == 31) wa[warp] = ia, wb[warp] = ib;
  __syncthreads();
  if (warp == 0) {  // the warps' totals, scanned exclusively in place
    const int va = wa[lane], vb = wb[lane];
    int sa = va, sb = vb;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const int ua = __shfl_up_sync(0xffffffffu, sa, o), ub = __shfl_up_sync(0xffffffffu, sb, o);
      if (lane >= o) sa += ua, sb += ub;
    }
    wa[lane] = sa - va, wb[lane] = sb - vb;
    if (lane == 31) *tb = sb;
  }
  __syncthreads();
  a = ia - a + wa[warp];
  b = ib - b + wb[warp];
}

template <class T>
__global__ void __launch_bounds__(kThreads)
    group_rows_kernel(const int32_t* ids, int m, int batch, int per_pass, int32_t* order,
                      ExpertPass* pass, int32_t* count, T* y, int64_t n, int* flag) {
  grid_dependency_wait();     // ids: behind the previous kernel
  grid_dependency_release();  // the gather kernel may launch; it waits for these passes
  __shared__ int rows[kMaxGroupedExperts];       // rows of each expert, later a cursor
  __shared__ int first_row[kMaxGroupedExperts];  // its first place in order
  __shared__ int total_passes;
  const int t = static_cast<int>(threadIdx.x);
  for (int e = t; e < batch; e += kThreads) rows[e] = 0;
  __syncthreads();
  int bad = 0;
  for (int r = t; r < m; r += kThreads) {
    const int e = ids[r];
    if (e >= 0 && e < batch) {
      atomicAdd(&rows[e], 1);
    } else {
      bad = 1;
    }
  }
  if (__syncthreads_or(bad) && t == 0) atomicOr(flag, 1);

  // Thread t scans experts [kPerThread t, kPerThread (t + 1)).
  int cr[kPerThread], cp[kPerThread], sr = 0, sp = 0;
#pragma unroll
  for (int i = 0; i < kPerThread; ++i) {
    const int e = kPerThread * t + i;
    cr[i] = e < batch ? rows[e] : 0;
    cp[i] = (cr[i] + per_pass - 1) / per_pass;
    sr += cr[i], sp += cp[i];
  }
  block_exclusive_scan(sr, sp, &total_passes);
#pragma unroll
  for (int i = 0; i < kPerThread; ++i) {
    const int e = kPerThread * t + i;
    if (e < batch) {
      first_row[e] = sr;
      for (int j = 0; j < cp[i]; ++j)
        pass[sp + j] = ExpertPass{e, sr + j * per_pass, min(per_pass, cr[i] - j * per_pass), 0};
      rows[e] = 0;  // now the cursor
    }
    sr += cr[i], sp += cp[i];
  }
  if (t == 0) *count = total_passes;
  __syncthreads();
  for (int r = t; r < m; r += kThreads) {
    const int e = ids[r];
    if (e >= 0 && e < batch) {
      order[first_row[e] + atomicAdd(&rows[e], 1)] = r;
    } else {  // an error path: the row's outputs become NaN, one thread a row
      for (int64_t j = 0; j < n; ++j) y[r * n + j] = from_f32<T>(__int_as_float(0x7FC00000));
    }
  }
}

}  // namespace

ExpertPasses group_rows_by_expert(const int32_t* ids, int32_t m, int32_t batch, int per_pass,
                                  void* y, DType y_dtype, int64_t n, int* flag,
                                  cudaStream_t stream) {
  if (batch > kMaxGroupedExperts)
    throw Error("[quanta::gather_matmul] expert grouping: w: " + std::to_string(batch) +
                " experts, more than the " + std::to_string(kMaxGroupedExperts) +
                " it counts on the device");
  ExpertPasses out;
  out.max_passes = static_cast<int32_t>(max_expert_passes(m, batch, per_pass));
  // [max_passes] passes | the count (16 bytes) | [M] order
  const std::size_t pass_bytes = sizeof(ExpertPass) * static_cast<std::size_t>(out.max_passes);
  auto* base = static_cast<uint8_t*>(
      stream_scratch(stream, Scratch::expert_passes,
                     pass_bytes + 16 + sizeof(int32_t) * static_cast<std::size_t>(m)));
  auto* pass = reinterpret_cast<ExpertPass*>(base);
  auto* count = reinterpret_cast<int32_t*>(base + pass_bytes);
  auto* order = reinterpret_cast<int32_t*>(base + pass_bytes + 16);
  dispatch_dtype(y_dtype, [&]<class T>() {
    QUANTA_CUDA_CHECK(launch_prepass(group_rows_kernel<T>, dim3(1), dim3(kThreads), stream, ids, m,
                                     batch, per_pass, order, pass, count, static_cast<T*>(y), n,
                                     flag));
  });
  out.order = order;
  out.pass = pass;
  out.count = count;
  return out;
}

}  // namespace quanta::cuda
