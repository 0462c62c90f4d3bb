// The CUDA kernel table, in order of preference (first that accepts wins). Each family's
// `supports` rule lives beside its launcher; the M ranges and the reasons live here.
#include <limits>

#include "cuda/families.hpp"

namespace quanta::cuda {

namespace {
constexpr int64_t kAnyM = std::numeric_limits<int32_t>::max();

// clang-format off
const KernelEntry kTable[] = {
  // name                    op                 device            M range       supports                 matmul          dequantize          why
  {"qmv_affine_i8",          Op::matmul,        Location::device, 1, 2,         qmv_affine_i8_supports,  qmv_affine_i8,  nullptr,            "affine f16/bf16 M<=2, every width: x as two int8 planes per group, codes as u8 operands of mma m16n8k32 shared by the rows of x (3/5/6-bit codes gathered by byte permutes, shifts and masks first), int32 accumulation; H200 3/5/6-bit: M=1 1.03-1.78x faster than qmv_affine_rd, M=2 1.17-2.06x faster than qmm_affine_tc (docs/perf-cuda-i8-widths.md); int4 g64: M=1 at 55-67% of the read roof (2.3-2.6x cuBLAS), M=2 at 1.07-1.19x the M=1 time; warps per block from the one-wave occupancy rule, contiguous steps per warp at 8 warps; M=3-4 (4 rows of accumulators) ran 1.7-3.3x slower than M=1 and lose to qmm_affine_tc (docs/PERF.md)"},
  {"qmm_affine_rf",          Op::matmul,        Location::device, 5, 32,        qmm_affine_rf_supports,  qmm_affine_rf,  nullptr,            "affine f16/bf16 M=5-32, 4-bit every group; 2-bit M=5-8; 3-bit g32/g64 M=5-8/5-7; 6-bit g32 M=5-32, g64 M=8 and 24-32; 8-bit M=5-23 (g32 to 32; bf16 g64 from M=9): codes and scales streamed register-direct, x through L1, dequantized in registers (s*q+b, MLX rounding; bf16 8-bit through f32) into mma.sync with the rows of x as columns, stream-K; H200 int4 g64: M=5-8 23-40 us, 1.2-1.4x faster than qmm_affine_i8 (g128: within 1% at M=5-6 on two shapes, 1.03-1.15x faster elsewhere; g32 1.6-2.3x), M=9-16 1.25-1.58x faster than qmm_affine_tc, M=24-32 1.02-1.26x faster than qmm_affine_wgmma, 0.89-1.12x cuBLAS fp16; other widths (three shapes) 2-bit 1.04-1.81x, 3-bit 1.01-1.65x (g64 M=7 0.97x on one shape), 6-bit 1.02-1.86x, 8-bit 1.13-2.06x at M=5-20 and 1.23-1.33x at g32 M=32 against the kernel they replaced; 5-bit never faster (docs/PERF.md)"},
  {"qmm_affine_i8",          Op::matmul,        Location::device, 3, 16,        qmm_affine_i8_supports,  qmm_affine_i8,  nullptr,            "affine f16/bf16 M=3-8 (qmm_affine_rf from M=5 for 2/4/8-bit; this kernel keeps bf16 8-bit g64, 3/5/6-bit g128 and 6-bit g64 M<=7), and M=9-16 for 5-bit g128 (four column tiles; H200: 1.02-1.25x faster than qmm_affine_tc; 8-bit g64 1.00-1.42x, now qmm_affine_rf; every other width slower there, int4 g64 0.57-0.74x): the integer-mma arithmetic of qmv_affine_i8 with the rows of x as the mma columns, so one mma serves 4 rows of x; 2/4/8-bit (group*bits >= 128), 3/5-bit groups of 128, 6-bit of 64/128 (a lane's quarter of a group is whole byte-permute unpack units; 6-bit g64 at M=8 left to qmm_affine_tc); H200 3/5/6-bit: 1.02-1.78x faster than qmm_affine_tc (median 1.32x, docs/perf-cuda-i8-widths.md); int4 figures in docs/PERF.md"},
  {"qmm_affine_wgmma",       Op::matmul,        Location::device, 24, kAnyM,    qmm_affine_wgmma_supports, qmm_affine_wgmma, nullptr,        "affine 2/4/8-bit f16/bf16 M>=24 on sm_90a (groups of 64k; 4-bit from M=33 and 8-bit from M=24, after qmm_affine_rf; 2-bit from M=33: qmm_affine_tc ran 34-56 against 59-105 us at M=24-32): CUTLASS's mixed-input wgmma GEMM (TMA, warp-specialized, codes scaled in registers, stream-K) after a transpose of the scales; ahead of qmm_affine_tc from M=24; H200 int4 g64: 0.94-1.04x cuBLAS fp16 at M=33-64, 0.85-1.0x at M>=1024, 2.1-3.2x faster than qmm_affine_mma (M=64-256) and 1.07-1.44x than qmm_affine_dq (M=512-1024) (docs/PERF.md)"},
  {"qmv_affine_rd",          Op::matmul,        Location::device, 1, 1,         qmv_affine_rd_supports,  qmv_affine_rd,  nullptr,            "affine f16/bf16 M=1: codes register-direct (16-byte streaming loads, two steps ahead), mma.sync with groups as columns, scale/bias per group in f32; runs where qmv_affine_i8 declines (K not a multiple of 4 groups, sm_80-89) (docs/PERF.md)"},
  {"qmv_affine_tc",          Op::matmul,        Location::device, 1, 1,         qmv_affine_tc_supports,  qmv_affine_tc,  nullptr,            "affine f16/bf16 M=1: codes into mma.sync under a magic number, groups as mma columns, scale*sum(q*x) + bias*sum(x) in f32; H200 int4 g64: 1.15-1.62 TB/s, 1.05-1.35x cuBLAS fp16 GEMV (docs/perf-cuda.md)"},
  {"qmm_affine_tc",          Op::matmul,        Location::device, 1, 32,        qmm_affine_tc_supports,  qmm_affine_tc,  nullptr,            "affine f16/bf16 M<=32: weights dequantized in registers into mma.sync (f32 accumulate), stream-K; M=2..4 within 1.1x of M=1, M=32 0.6-0.8x cuBLAS fp16"},
  {"qmm_affine_dq",          Op::matmul,        Location::device, 9, kAnyM,     qmm_affine_dq_supports,  qmm_affine_dq,  nullptr,            "affine M>=512 (f16/bf16) or M>=9 (f32) where no fused kernel serves: slabs of W dequantized to x's dtype (bit-exact with the host decode), then cuBLAS; H200 int4 g64: f16 0.76-0.84x cuBLAS at M=1024; f32 2.1-2.3x matmul_generic at M=9-16, 8-9.5x at M=64, 0.87-0.95x cuBLAS f32 at M=512 (docs/PERF.md)"},
  {"qmm_affine_mma",         Op::matmul,        Location::device, 33, kAnyM,    qmm_affine_mma_supports, qmm_affine_mma, nullptr,            "affine f16/bf16 M>32: 128x128 tiles dequantized into shared memory, ldmatrix + mma.sync, 3-stage cp.async; ~250 TFLOP/s at M=4096 (0.39x cuBLAS)"},
  {"qmv_affine_f32",         Op::matmul,        Location::device, 1, 8,         qmv_affine_f32_supports, qmv_affine_f32, nullptr,            "affine f32 M<=8: CUDA cores, scale*sum(q*x) + bias*sum(x) per group (no f32 tensor-core mode is exact enough); M=1 2.2-2.9x cuBLAS sgemv"},
  {"qvm_affine",             Op::matmul,        Location::device, 1, 8,         qvm_affine_supports,     qvm_affine,     nullptr,            "affine [K, N] layout M<=8: a lane per 32 columns, 8 warps a CTA splitting K in blocks of 8 rows, one wave of resident CTAs, each code entering its FFMA as the f32 1 + q/2^bits (2/4-bit codes by byte permutes); H200 int4 g64 M=1 22.1-30.6 us (was 103-112), 1.5-2.3x cuBLAS; compute-bound (2-, 4- and 8-bit take about the same time) (docs/PERF.md)"},
  {"qmm_generic_dq",         Op::matmul,        Location::device, 1, kAnyM,     qmm_generic_dq_supports, qmm_generic_dq, nullptr,            "every non-affine format [N, K], any M: slabs of W dequantized by dequantize_generic to x's dtype, then cuBLAS; H200 14336x5120 bf16: 1.2-3.5x matmul_generic already at M=1 (dequantize 0.25-0.6 ms against 0.5-1.1 ms), 7-18x at M=64, 0.21-0.34x cuBLAS at M=512 (docs/PERF.md)"},
  {"matmul_generic",         Op::matmul,        Location::device, 1, kAnyM,     nullptr,                 matmul_generic, nullptr,            "portable fallback: every format and layout, f32 accumulate"},
  {"gather_matmul_generic",  Op::gather_matmul, Location::device, 1, kAnyM,     nullptr,                 matmul_generic, nullptr,            "portable fallback: one row per tile, ids checked on the device"},
  {"dequantize_affine",      Op::dequantize,    Location::device, 0, 0,         dequantize_affine_supports, nullptr,     dequantize_affine,  "affine, 32 codes per thread, 16-byte stores; bit-exact with the host codec"},
  {"dequantize_generic",     Op::dequantize,    Location::device, 0, 0,         nullptr,                 nullptr,        dequantize_generic, "every format, bit-exact with the host codec"},
};
// clang-format on
}  // namespace

std::span<const KernelEntry> kernels() {
  return kTable;
}

}  // namespace quanta::cuda
