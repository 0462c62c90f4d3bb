// The operations. Each validates its arguments once (throwing quanta::Error that names the
// argument and the rule), then routes by where the buffers live (host -> CPU backend,
// device -> CUDA backend) and by the selector's table.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "quanta/matrix.hpp"

namespace quanta {

// Execution knobs shared by every op.
struct Context {
  int threads = 0;                   // CPU worker threads; 0 = all cores
  void* cuda_stream = nullptr;       // cudaStream_t for device ops; null = the default stream
  std::string_view kernel = "auto";  // force a named kernel (tests, bench); "auto" = selector
};

struct QuantizeOptions {
  Layout layout = Layout::nk;  // w is [N, K] for nk, [K, N] for kn; groups always along K
  // nvfp4 only: MLX's `global_scale` argument, the tensor's max |w|. When set, block scales
  // use the two-level encoding and the matrix stores global_scale = amax / (448 * 6).
  std::optional<float> nvfp4_tensor_amax;
};

// Quantizes dense weights, bit-exact with the format's owner (MLX for affine/mxfp4/mxfp8/
// nvfp4, ggml/gguf-py for GGUF blocks, OCP for fp8 with saturation). Affine scales and
// biases take w's dtype (MLX). Host memory in and out.
QuantizedMatrix quantize(ConstMatrixView w, const Format& format, const QuantizeOptions& opts = {},
                         const Context& ctx = {});

// out = dense W in the storage layout ([N, K] for nk, [K, N] for kn), any dtype.
void dequantize(const QuantizedMatrix& w, MatrixView out, const Context& ctx = {});

// y[M, N] = x[M, K] · Wᵀ (nk) or x · W (kn). x and y share a dtype; affine scales must have
// that dtype too (the MLX convention).
void matmul(ConstMatrixView x, const QuantizedMatrix& w, MatrixView y, const Context& ctx = {});

// MoE: y[i, :] = x[i, :] · W[expert_ids[i]]ᵀ for a stack of `w.batch` matrices.
// expert_ids has x.rows entries and lives where x lives.
void gather_matmul(ConstMatrixView x, const QuantizedMatrix& w, const int32_t* expert_ids,
                   MatrixView y, const Context& ctx = {});

// Packs a host matrix once for the host backend's M = 1..4 kernels and returns it with the pack
// attached (w.host_pack; w's own buffers are shared, not copied, and every other path still
// reads them). Today: affine (every width), GGUF q4_0, q4_1, q5_0 and q5_1, mxfp4 and nvfp4;
// W [N, K], K a multiple of 128, on a CPU whose kernels use AVX512-VNNI: each four rows' codes,
// scales and biases become one run of bytes (the GEMV then reads one stream per thread). W [K, N]
// in affine, mxfp4 or nvfp4 is packed as its [N, K] transpose and served the same way at M = 1..8
// (1.2-2.4x its own kernels, 8-bit a tie; packing 16384 x 14336 takes ~0.2-0.8 s on two cores).
// The pack costs a second copy of the weights. Where no packed kernel applies, w comes back as it
// was, without a pack.
// A device matrix (affine 2-, 4- or 8-bit, W [N, K], group a multiple of 64, N a multiple of 128,
// f16 or bf16 scales, on an sm_90 GPU with this build's sm_90a code) gets w.device_pack instead:
// its codes in the order of the large-M kernel's tensor-core operands (CUTLASS's reordered layout)
// and its scales and biases transposed to [K/G, N], made on ctx's stream and waited for (a
// load-time call, not for a graph capture). matmul reads it from M = 33 on (M = 24 for 8-bit).
// H200: int4 M = 48..64 1.09-1.22x, M = 96..384 1.05-1.38x, M >= 1024 1.04-1.24x faster; int8 M =
// 32..128 1.12-1.35x, M >= 256 1.02-1.14x; int2 M = 64..128 1.42-1.73x, M >= 256 1.15-1.32x
// (medians of two runs; docs/PERF.md). An affine W [K, N] device matrix (N a multiple of 32, one
// matrix) gets its [N, K] copy instead (a second copy of the weights), on which the [N, K]
// kernels then run at every M. Same terms as the host pack: a snapshot of the buffers it was made
// from.
QuantizedMatrix prepack(const QuantizedMatrix& w, const Context& ctx = {});

// Whether this build has the CUDA backend and a usable device.
bool cuda_available();

// Copies a host matrix into device memory owned by the returned matrix (and back).
// Throws quanta::NotSupported in a build without CUDA.
QuantizedMatrix to_device(const QuantizedMatrix& w, const Context& ctx = {});
QuantizedMatrix to_host(const QuantizedMatrix& w, const Context& ctx = {});

}  // namespace quanta
