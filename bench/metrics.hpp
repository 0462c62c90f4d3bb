// The runner's arithmetic: bytes a row moves, its rates, its place under the measured roof and
// against the baseline. Pure functions, so tests can pin every formula.
//
//   bytes    = touched experts × footprint(format).total()  (packed codes + scales + biases)
//            + x + y (+ expert ids)                          matmul, gather_matmul
//            = footprint(format).total() + N·K·dtype          dequantize (read codes, write W)
//   flops    = 2·M·N·K (matmul, gather_matmul), 0 (dequantize)
//   GB/s     = bytes / t / 1e9           TFLOP/s = flops / t / 1e12
//   roof %   = 100 · max(bytes / read_roof, flops / compute_roof) / t: the share of the
//              roofline bound (the slower of streaming the bytes and doing the flops at the
//              rates the runner measured at start-up) that the kernel reaches
//   speedup  = baseline time / kernel time (> 1: the kernel is faster)
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/kernel.hpp"
#include "quanta/format.hpp"
#include "quanta/matrix.hpp"

namespace quanta::bench {

// One timed problem, in the runner's terms. For dequantize m = 0 and dtype is the output's.
struct ProblemSize {
  Op op = Op::matmul;
  Format format{};
  Layout layout = Layout::nk;
  DType dtype = DType::f32;
  int64_t m = 1, n = 1, k = 1;
  int64_t experts = 1;  // gather_matmul: matrices in the stack
};

// The runner's routing for gather_matmul: row i goes to expert (i + shift) % experts, so a row
// set touches min(m, experts) distinct matrices. Timed copies shift the routing by multiples
// of that count, so rotation walks through the stack's experts before cloning the stack.
int32_t expert_of_row(int64_t row, int64_t experts, int64_t shift = 0);
// Distinct experts that routing reads.
int64_t experts_touched(const ProblemSize& p);

// Bytes of the weights alone (one matrix: codes + scales + biases) from the format table.
std::size_t weight_bytes(const ProblemSize& p);
// Everything the row reads and writes once (see the formula above).
std::size_t bytes_moved(const ProblemSize& p);
double flops(const ProblemSize& p);

double gbps(double bytes, double seconds);
double tflops(double flop_count, double seconds);

// The measured hardware limits of the device a run uses.
struct Roof {
  double read_gbps = 0;       // streaming read
  double compute_tflops = 0;  // dense f32 GEMM (CPU) / dense bf16 GEMM (GPU)
};

// Percent of the roofline bound reached; NaN when the roof or the time is unknown.
double roof_pct(double bytes, double flop_count, double seconds, const Roof& roof);
// Which side of the roofline bounds the row: "memory" or "compute" ("" when unknown).
std::string_view roof_bound(double bytes, double flop_count, const Roof& roof);
// baseline / kernel; NaN when either is missing.
double speedup(double baseline_seconds, double kernel_seconds);

}  // namespace quanta::bench
