// quanta::prepack on the host: affine (every width), GGUF q4_0, q4_1, q5_0 and q5_1, mxfp4 and
// nvfp4 W [N, K], and affine, mxfp4 and nvfp4 W [K, N] (packed as the [N, K] matrix Wᵀ: the
// [K, N] GEMV read 2- and 3-bit codes at 43-59% of the DRAM roof, compute-bound in its column
// decode; docs/perf-cpu.md), re-laid out so the VNNI GEMV (x86/vnni_affine.hpp,
// affine_packed_multi) reads each four rows as one run of bytes. The avx2 level packs codes
// of 2 to 6 bits only (affine 2-6-bit, q4_0 .. q5_1, mxfp4, nvfp4), for its own integer
// GEMV on the same layout (x86/avx2_int8.hpp), and GGUF q2_K-q6_K in their rows (below).
//
// The unpacked matrix is three streams per row (codes, scales, biases): the fused GEMV reads four
// rows' codes plus their scale and bias runs, twelve streams per thread, and reached 77-85% of
// the DRAM roof on the 2-core VM where q4_0 (one stream per row, its scale inside each block)
// reaches 87-92% (docs/perf-cpu.md); packed, 4-bit g64 read 1.1-1.3x faster, 90-93% of the roof
// in the VM's 40-45 GB/s phases. The pack puts everything a pass reads in address order:
//
//   tile t = rows 4t .. 4t + 3 (rows past N are zero), K in steps of 128 weights, steps grouped
//   in chunks of `steps` = 16 groups per row (the kernel converts a row's 16 scales at once):
//     chunk = [codes: step s, row r at (4s + r)·16·bits bytes, each row's block as stored (5-
//              and 6-bit: split into nibbles and masks of the high bits; 8-bit: in groups of four
//              bytes interleaved over two 64-byte halves; 3- to 6-bit at the avx2 level: its
//              own layouts; same size; pack.cpp)]
//             [scales: row r's ns·(128/G) entries, in the scale dtype, rows one after another]
//             [biases: likewise]
//             [zeros up to a multiple of 64 bytes]
//   ns = the chunk's steps (the last chunk may hold fewer); tiles follow one another, then
//   kRowOverread bytes of zeros (the 3-bit loads read past a block).
//
// GGUF q2_K-q6_K pack only at the avx2 level, and not in tiles: each block keeps its bytes and
// its place, with its 256 codes re-laid so that the four code vectors of each half read against x's
// planes in quad order (vector j byte i = element 4i + j of the half): an int32 lane of the
// vpmaddwd then sums one sub-block of 16, so four vectors' int16 pairs add before one vpmaddwd
// against the sub-block scales, where GGUF's order needs one per vector (x86/avx2_kquant.cpp).
//
// GGUF q4_1 (w = d·q + m per block of 32) packs as affine 4-bit g32 with f16 scales d and
// biases m: the same bytes per weight, and its own VNNI kernel (four row streams of 20-byte
// blocks) read 54-72% of the roof in some of the VM's phases where affine-4b-g32, with more
// bytes, read faster (docs/perf-cpu.md).
//
// GGUF q5_0 (w = d·(q - 16)) packs as affine 5-bit g32 (nibbles plus a mask of the fifth bits,
// from its qs and qh) with scales d in f16 and no biases: the kernel derives -16d; q4_0 likewise
// as 4-bit g32 with -8d; q5_1 as 5-bit g32 with its m as the biases.
//
// mxfp4 (w = 2^(E - 127)·v, v an E2M1 value) is affine with codes u = 2v + 12 (0..24: the kernel
// maps each nibble by a byte shuffle), scale 2^(E - 128) and bias -12 times the scale; nvfp4 the
// same with half its E4M3 scale per 16 and the tensor scale applied at the end. Their chunks hold
// the codes and the scale bytes as stored (the kernel converts them), no biases: the pack has the
// matrix's bytes per weight.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "quanta/matrix.hpp"

namespace quanta {

// The packed copy (one per expert, back to back) and what it was made from: a matrix whose
// buffers, shape or format differ does not use it.
struct HostPack {
  const std::byte* codes = nullptr;
  const std::byte* scales = nullptr;
  const std::byte* biases = nullptr;
  Format format{};
  Layout layout = Layout::nk;      // the matrix's: a [K, N] one is packed as its [N, K] transpose
  DType scale_dtype = DType::f16;  // the matrix's
  DType pack_dtype = DType::f16;   // of the scales and biases in the pack (affine, q4_1)
  int64_t n = 0, k = 0, batch = 0;
  int64_t entry_bytes = 0;    // per scale (and bias) in the pack: 1 for the E8M0 / E4M3 bytes
  bool stores_biases = true;  // after the scales (mxfp4, nvfp4: derived from them)
  // Codes of 3 to 6 bits (affine, q4_0 .. q5_1, mxfp4, nvfp4; q2_K-q6_K) in the avx2 level's
  // layouts (pack.cpp avx2_block), not the VNNI level's: made at that level and read only there
  // (pack_of).
  bool avx2_codes = false;
  // q2_K-q6_K (avx2 level only): the rows as stored, each block's codes re-laid in quad order
  // (pack.cpp kquant_block) and every other byte where GGUF keeps it; no tiles or chunks, and
  // expert_bytes is a matrix's code bytes.
  bool kquant_rows = false;
  int steps = 0;             // blocks of 128 weights per full chunk
  int64_t tile_bytes = 0;    // bytes per four rows
  int64_t expert_bytes = 0;  // bytes per matrix of the stack
  std::shared_ptr<uint8_t[]> data;
};

}  // namespace quanta

namespace quanta::cpu {

inline constexpr int64_t kPackRows = 4;     // rows of W per tile
inline constexpr int64_t kPackBlock = 128;  // weights per step along K

// Why w has no packed kernel ("" when it has one): the format, the layout, K, or this CPU.
std::string pack_unsupported(const QuantizedMatrix& w);

// The pack of a host matrix w for which pack_unsupported(w) is "" (threads as Context::threads).
std::shared_ptr<const HostPack> make_pack(const QuantizedMatrix& w, int threads);

// w's pack, or null when w carries none or one made from other buffers, shape or format.
const HostPack* pack_of(const QuantizedMatrix& w);

// The pack a GEMV of m rows of x reads: pack_of(w), except an [N, K] one at M <= 2 on CPUs whose
// GEMV prefetches the next rows one by one (gemv_prefetch().rows: Intel), where the plain rows
// (four code streams and their scale runs a thread, against the pack's one stream) read
// 1.04-1.24x faster at M = 1 and 1.0-1.13x at M = 2; from M = 4 the pack is 1.04-1.11x ahead
// (Emerald Rapids VM, docs/perf-cpu.md). Only where vnni_active(): the avx2 level has no integer
// kernel for the plain rows. prefer_pack(true) always takes the pack (tests that
// prove the pack is read).
const HostPack* pack_for_rows(const QuantizedMatrix& w, int64_t m);
void prefer_pack(bool on);
inline constexpr int64_t kPlainRowsMaxM = 2;

}  // namespace quanta::cpu
