// The host pack of quanta::prepack (layout in pack.hpp).
#include "cpu/pack.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstring>
#include <vector>

#include "cpu/isa.hpp"
#include "cpu/plan.hpp"
#include "cpu/pool.hpp"
#include "format/affine.hpp"
#include "format/gguf.hpp"

namespace quanta::cpu {

namespace {

// The formats whose codes the avx2 level packs in its own layouts (avx2_block) rather than the
// VNNI level's: all it packs but 2-bit affine, whose MLX bytes both levels read (the K-quants only
// it packs).
bool avx2_own_layout(const Format& f) {
  return (avx2_int8_format(f.scheme, f.bits) && !(f.scheme == Scheme::affine && f.bits == 2)) ||
         kquant_scheme(f.scheme);
}

int64_t round_up(int64_t v, int64_t m) {
  return (v + m - 1) / m * m;
}

// Bytes of a chunk of ns steps.
int64_t chunk_bytes(const HostPack& p, int64_t ns) {
  const int64_t code = kPackRows * ns * 16 * p.format.bits;
  const int64_t sd = kPackRows * ns * (kPackBlock / p.format.group_size) * p.entry_bytes;
  return round_up(code + (p.stores_biases ? 2 : 1) * sd, 64);
}

// A block of 128 5- or 6-bit codes (16·bits bytes, MLX's bit stream) as the kernel takes it, in
// the same bytes: 64 bytes of nibbles (byte i: code 2i low, code 2i + 1 high, as 4-bit codes),
// then 64-bit masks of the fifth bit of the even codes and of the odd ones, then (6-bit) of the
// sixth bit likewise. Eight codes at a time from their `bits` bytes.
void split_high_bits(const uint8_t* block, int bits, uint8_t* out) {
  uint8_t nibbles[64] = {};
  uint64_t high[4] = {};  // bit 4 of the even codes, of the odd ones; then bit 5 (6-bit)
  for (int c8 = 0; c8 < 16; ++c8) {
    uint64_t v = 0;
    std::memcpy(&v, block + c8 * bits, static_cast<std::size_t>(bits));
    for (int c = 0; c < 8; ++c) {
      const int j = 8 * c8 + c, i = j / 2, odd = j % 2;
      const auto q = static_cast<uint32_t>((v >> (c * bits)) & ((1u << bits) - 1u));
      nibbles[i] |= static_cast<uint8_t>((q & 15u) << (4 * odd));
      high[odd] |= static_cast<uint64_t>((q >> 4) & 1u) << i;
      high[2 + odd] |= static_cast<uint64_t>((q >> 5) & 1u) << i;
    }
  }
  std::memcpy(out, nibbles, 64);
  std::memcpy(out + 64, high, bits == 5 ? 16 : 32);
}

// The avx2 level's own layouts of a block of 128 2- to 6-bit codes (q: one code a byte, in
// element order), 16·bits bytes as MLX's bit stream: the kernel splits them into four vectors,
// vector j byte i = code 4i + j, with a few shifts and masks (x86/avx2_common.hpp quad3_codes,
// quad5_codes, quad6_codes), where
// MLX's bit stream (3-bit) or the nibbles with bit masks of split_high_bits (5-, 6-bit) took
// ~20-27 operations per 64 codes.
//   3-bit: column i (0..15) of eight codes c0 .. c7 = codes 4i, 4i + 1, 64 + 4i, 65 + 4i, 4i + 2,
//          66 + 4i, 4i + 3, 67 + 4i in bytes i, 16 + i, 32 + i as A = c0 | c1 << 3 | (c6 & 3) << 6,
//          B = c2 | c3 << 3 | (c6 >> 2) << 6 | (c7 & 1) << 7, C = c4 | c5 << 3 | (c7 >> 1) << 6.
//   5-bit: column i (0..31) of codes c0 .. c3 = 4i .. 4i + 3 in bytes i, 32 + i and a nibble of
//          byte 64 + i % 16 (low for i < 16): A = c0 | (c2 & 7) << 5,
//          B = c1 | (c2 >> 3) << 5 | (c3 & 1) << 7, nibble = c3 >> 1.
//   6-bit: byte i of vector j (32 bytes, j < 3) = code 4i + j | bits 2j, 2j + 1 of code 4i + 3
//   << 6.
//   4-bit: byte i (i < 32) = code 4i | code 4i + 2 << 4, byte 32 + i = code 4i + 1 | code 4i + 3
//          << 4 (quad4_codes; the VNNI level reads MLX's nibbles).
//   2-bit: MLX's bytes, byte i = codes 4i .. 4i + 3 from the low bits up (the K-quant pack).
void avx2_block(const uint8_t (&q)[128], int bits, uint8_t* out) {
  if (bits == 2) {
    for (int i = 0; i < 32; ++i)
      out[i] = static_cast<uint8_t>(q[4 * i] | q[4 * i + 1] << 2 | q[4 * i + 2] << 4 |
                                    q[4 * i + 3] << 6);
    return;
  }
  if (bits == 4) {
    for (int i = 0; i < 32; ++i) {
      out[i] = static_cast<uint8_t>(q[4 * i] | q[4 * i + 2] << 4);
      out[32 + i] = static_cast<uint8_t>(q[4 * i + 1] | q[4 * i + 3] << 4);
    }
    return;
  }
  if (bits == 3) {
    for (int i = 0; i < 16; ++i) {
      const uint32_t c0 = q[4 * i], c1 = q[4 * i + 1], c4 = q[4 * i + 2], c6 = q[4 * i + 3],
                     c2 = q[64 + 4 * i], c3 = q[65 + 4 * i], c5 = q[66 + 4 * i], c7 = q[67 + 4 * i];
      out[i] = static_cast<uint8_t>(c0 | c1 << 3 | (c6 & 3u) << 6);
      out[16 + i] = static_cast<uint8_t>(c2 | c3 << 3 | (c6 >> 2) << 6 | (c7 & 1u) << 7);
      out[32 + i] = static_cast<uint8_t>(c4 | c5 << 3 | (c7 >> 1) << 6);
    }
    return;
  }
  if (bits == 5) {
    std::memset(out + 64, 0, 16);
    for (int i = 0; i < 32; ++i) {
      const uint32_t c0 = q[4 * i], c1 = q[4 * i + 1], c2 = q[4 * i + 2], c3 = q[4 * i + 3];
      out[i] = static_cast<uint8_t>(c0 | (c2 & 7u) << 5);
      out[32 + i] = static_cast<uint8_t>(c1 | (c2 >> 3) << 5 | (c3 & 1u) << 7);
      out[64 + i % 16] |= static_cast<uint8_t>((c3 >> 1) << (i < 16 ? 0 : 4));
    }
    return;
  }
  for (int i = 0; i < 32; ++i)  // 6-bit
    for (int j = 0; j < 3; ++j)
      out[32 * j + i] = static_cast<uint8_t>(q[4 * i + j] | ((q[4 * i + 3] >> (2 * j)) & 3u) << 6);
}

// Where a K-quant block's codes start (its bytes before them stay as they are, as do those after).
int64_t kquant_codes_at(Scheme s) {
  using namespace codec::gguf;
  switch (s) {
    case Scheme::q2_K:
      return offsetof(block_q2_K, qs);
    case Scheme::q4_K:
      return offsetof(block_q4_K, qs);
    case Scheme::q5_K:
      return offsetof(block_q5_K, qh);
    default:  // q3_K (hmask, then qs), q6_K (ql, then qh)
      return 0;
  }
}

// A K-quant block b (as GGUF stores it) re-laid for the avx2 level (pack.hpp) into out: every
// byte but the codes copied, then each half n of 128 codes u (unsigned: q3_K's low two bits plus
// four times its high bit, 0..7; q6_K's stored six bits, 0..63), one a byte, written at the codes'
// start in quad order, in avx2_block's 2- to 6-bit layouts (16·bits bytes per half).
// GGUF's element 128n + 32j + l: q2_K bits 2j of qs[32n + l]; q3_K the same with bit 4n + j of
// hmask[l] above; q6_K nibble j / 2 of ql[64n + 32 (j % 2) + l] with bits 2j, 2j + 1 of
// qh[32n + l] above; q4_K's element 64c + l and 64c + 32 + l are the nibbles of qs[32c + l], and
// q5_K's element 32v + l takes bit v of qh[l] above.
void kquant_block(const Format& f, const uint8_t* b, uint8_t* out) {
  const Scheme s = f.scheme;
  std::memcpy(out, b, static_cast<std::size_t>(f.info().block_bytes));
  uint8_t u[256];
  for (int e = 0; e < 256; ++e) {
    const int n = e / 128, j = e % 128 / 32, l = e % 32, c = e / 64, hi = e % 64 / 32;
    switch (s) {
      case Scheme::q2_K:
        u[e] = (b[16 + 32 * n + l] >> (2 * j)) & 3;
        break;
      case Scheme::q3_K:
        u[e] = static_cast<uint8_t>(((b[32 + 32 * n + l] >> (2 * j)) & 3) |
                                    ((b[l] >> (4 * n + j)) & 1) << 2);
        break;
      case Scheme::q4_K:
      case Scheme::q5_K: {
        const uint8_t q = b[(s == Scheme::q5_K ? 48 : 16) + 32 * c + l];
        u[e] = (q >> (4 * hi)) & 15;
        if (s == Scheme::q5_K) u[e] |= static_cast<uint8_t>(((b[16 + l] >> (e / 32)) & 1) << 4);
        break;
      }
      default:  // q6_K
        u[e] = static_cast<uint8_t>(((b[64 * n + 32 * (j % 2) + l] >> (4 * (j / 2))) & 15) |
                                    ((b[128 + 32 * n + l] >> (2 * j)) & 3) << 4);
    }
  }
  for (int n = 0; n < 2; ++n)
    avx2_block(*reinterpret_cast<const uint8_t(*)[128]>(u + 128 * n), f.bits,
               out + kquant_codes_at(s) + 16 * f.bits * n);
}

// total bytes, 64-byte aligned.
std::shared_ptr<uint8_t[]> aligned_bytes(int64_t total) {
  return std::shared_ptr<uint8_t[]>(
      static_cast<uint8_t*>(
          ::operator new[](static_cast<std::size_t>(total), std::align_val_t(64))),
      [](uint8_t* q) { ::operator delete[](q, std::align_val_t(64)); });
}

// Where a packed GGUF block keeps its parts (d first, f16), or null for other schemes.
struct GgufBlock {
  int bytes, nibbles, min, qh;  // min, qh: -1 when the block has none
};
const GgufBlock* gguf_block(Scheme s) {
  static constexpr GgufBlock q4_0{18, 2, -1, -1}, q4_1{20, 4, 2, -1}, q5_0{22, 6, -1, 2},
      q5_1{24, 8, 2, 4};
  return s == Scheme::q4_0   ? &q4_0
         : s == Scheme::q4_1 ? &q4_1
         : s == Scheme::q5_0 ? &q5_0
         : s == Scheme::q5_1 ? &q5_1
                             : nullptr;
}

// One row's step of 128 weights into the pack: its 16·bits bytes of codes, and 4 (GGUF) or
// 128 / G (affine) scales and biases in the pack's dtype.
struct StepSource {
  const uint8_t* codes;   // the row's codes (affine) or blocks (GGUF)
  const uint8_t* scales;  // affine: the row's scales and biases
  const uint8_t* biases;
};
void copy_step(const QuantizedMatrix& w, const HostPack& pack, const StepSource& src, int64_t step,
               uint8_t* code_out, uint8_t* scale_out, uint8_t* bias_out) {
  if (w.format.scheme == Scheme::mxfp4 || w.format.scheme == Scheme::nvfp4) {
    // Codes as stored (at the avx2 level in its 4-bit layout), the step's E8M0 (4) or E4M3 (8)
    // scale bytes as stored.
    const int64_t scales = kPackBlock / w.format.group_size;
    if (pack.avx2_codes) {
      uint8_t q[128];
      for (int j = 0; j < 128; ++j)
        q[j] = static_cast<uint8_t>(codec::affine_code(src.codes + step * 64, j, 4, kPackBlock));
      avx2_block(q, 4, code_out);
    } else {
      std::memcpy(code_out, src.codes + step * 64, 64);
    }
    std::memcpy(scale_out, src.scales + scales * step, static_cast<std::size_t>(scales));
    return;
  }
  if (const GgufBlock* g = gguf_block(w.format.scheme)) {
    // Four blocks of 32 as affine g32: scale d (f16 as stored), bias m (q4_1, q5_1) or derived in
    // the kernel (-8d, -16d); the 16 bytes of nibbles (element i low, i + 16 high) are already in
    // the order the planes of x take for GGUF blocks (vnni_affine.cpp, Ctl::block32); q5_0/q5_1's
    // high bits of elements i and i + 16 (qh bits i and 16 + i) become the masks of the 5-bit
    // layout; at the avx2 level the codes go to its own 4- or 5-bit layout (avx2_block).
    uint64_t high[2] = {};
    uint8_t q[128];  // avx2_codes: the step's codes, one a byte
    for (int b = 0; b < 4; ++b) {
      const uint8_t* blk = src.codes + (4 * step + b) * g->bytes;
      std::memcpy(scale_out + 2 * b, blk, 2);
      if (g->min >= 0) std::memcpy(bias_out + 2 * b, blk + g->min, 2);
      uint32_t qh = 0;
      if (g->qh >= 0) std::memcpy(&qh, blk + g->qh, 4);
      if (pack.avx2_codes) {
        for (int j = 0; j < 32; ++j)
          q[32 * b + j] = static_cast<uint8_t>(
              ((blk[g->nibbles + j % 16] >> (4 * (j / 16))) & 15u) | ((qh >> j) & 1u) << 4);
        continue;
      }
      std::memcpy(code_out + 16 * b, blk + g->nibbles, 16);
      high[0] |= static_cast<uint64_t>(qh & 0xFFFFu) << (16 * b);
      high[1] |= static_cast<uint64_t>(qh >> 16) << (16 * b);
    }
    if (pack.avx2_codes)
      avx2_block(q, g->qh >= 0 ? 5 : 4, code_out);
    else if (g->qh >= 0)
      std::memcpy(code_out + 64, high, 16);
    return;
  }
  const int64_t block_code = 16 * w.format.bits, gpv = kPackBlock / w.format.group_size;
  const int64_t sz = static_cast<int64_t>(dtype_size(w.scale_dtype));
  if (pack.avx2_codes) {
    uint8_t q[128];
    for (int j = 0; j < 128; ++j)
      q[j] = static_cast<uint8_t>(
          codec::affine_code(src.codes + step * block_code, j, w.format.bits, kPackBlock));
    avx2_block(q, w.format.bits, code_out);
  } else if (w.format.bits == 5 || w.format.bits == 6) {
    split_high_bits(src.codes + step * block_code, w.format.bits, code_out);
  } else if (w.format.bits == 8) {
    // Byte 4t + j of vector v (64 bytes each) is code 8t + 4v + j: int32 lane t of both vectors
    // then covers codes 8t .. 8t + 7, inside one group, as the kernel's lanes need.
    const uint8_t* block = src.codes + step * block_code;
    for (int v = 0; v < 2; ++v)
      for (int t = 0; t < 16; ++t) std::memcpy(code_out + 64 * v + 4 * t, block + 8 * t + 4 * v, 4);
  } else {
    std::memcpy(code_out, src.codes + step * block_code, static_cast<std::size_t>(block_code));
  }
  std::memcpy(scale_out, src.scales + step * gpv * sz, static_cast<std::size_t>(gpv * sz));
  std::memcpy(bias_out, src.biases + step * gpv * sz, static_cast<std::size_t>(gpv * sz));
}

// Rows n0 .. n0 + rows - 1 of a [K, N] matrix (one of the stack: codes kc, scales ks, biases kb)
// as [N, K] rows: row r's K codes as one bit stream (row_code bytes) at codes + r·row_code, its
// K / G scale and bias entries (ent bytes each) at scales / biases + r·groups·ent. The [K, N]
// rows are read in address order, one run of `rows` codes per K-row.
void transpose_kn_rows(const QuantizedMatrix& w, const uint8_t* kc, const uint8_t* ks,
                       const uint8_t* kb, int64_t n0, int64_t rows, int64_t ent, uint8_t* codes,
                       uint8_t* scales, uint8_t* biases) {
  const int bits = w.format.bits;
  const int64_t k = w.k, n = w.n, groups = k / w.format.group_size;
  const int64_t kn_row = n * bits / 8, row_code = k * bits / 8;
  std::memset(codes, 0, static_cast<std::size_t>(rows * row_code));
  for (int64_t i = 0; i < k; ++i) {
    const uint8_t* src = kc + i * kn_row;
    for (int64_t r = 0; r < rows; ++r)
      codec::affine_put_code(codes + r * row_code, i, bits,
                             codec::affine_code(src, n0 + r, bits, n));
  }
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t from = (g * n + n0 + r) * ent, to = (r * groups + g) * ent;
      std::memcpy(scales + to, ks + from, static_cast<std::size_t>(ent));
      if (biases != nullptr) std::memcpy(biases + to, kb + from, static_cast<std::size_t>(ent));
    }
}

}  // namespace

std::string pack_unsupported(const QuantizedMatrix& w) {
  const Format& f = w.format;
  if (kquant_scheme(f.scheme)) {
    if (w.layout == Layout::kn)
      return fmt::format("W [K, N] in {} has no packed kernel (W [N, K] does)", f.name());
    if (w.location != Location::host) return "the matrix is not in host memory";
    if (!avx2_int8_active())
      return fmt::format(
          "{} packs only at the avx2 level (the VNNI level reads GGUF's blocks as stored)",
          f.name());
    return {};
  }
  if (f.scheme != Scheme::affine && gguf_block(f.scheme) == nullptr && f.scheme != Scheme::mxfp4 &&
      f.scheme != Scheme::nvfp4)
    return fmt::format(
        "{} has no packed kernel (affine, q4_0, q4_1, q5_0, q5_1, mxfp4 and nvfp4 do, and "
        "q2_K-q6_K at the avx2 level)",
        f.name());
  if (w.layout == Layout::kn && f.scheme != Scheme::affine && f.scheme != Scheme::mxfp4 &&
      f.scheme != Scheme::nvfp4)
    return fmt::format("W [K, N] in {} has no packed kernel (affine, mxfp4 and nvfp4 do)",
                       f.name());
  if (w.k % kPackBlock != 0) return fmt::format("K = {} is not a multiple of {}", w.k, kPackBlock);
  if (w.location != Location::host) return "the matrix is not in host memory";
  if (avx2_int8_active() && !avx2_int8_format(f.scheme, f.bits))
    return fmt::format(
        "the avx2 level packs only codes of 2 to 6 bits (affine 2-6-bit, q4_0 .. q5_1, "
        "mxfp4, nvfp4, q2_K-q6_K), not {}; "
        "the other widths need AVX512-VNNI, VBMI and GFNI",
        f.name());
  if (!int8_active())
    return "this CPU level has no packed kernel (needs AVX2, or AVX512-VNNI, VBMI and GFNI)";
  if (f.scheme == Scheme::mxfp4) {
    // The packed kernel's bias, -12 · 2^(E - 128), overflows f32 from E = 253.
    const auto* sc = reinterpret_cast<const uint8_t*>(w.scales);
    const std::size_t count = w.footprint().scale_bytes * static_cast<std::size_t>(w.batch);
    for (std::size_t i = 0; i < count; ++i)
      if (sc[i] == 253 || sc[i] == 254)
        return fmt::format("scale {} is 2^{} (E8M0 {}): the packed kernel takes up to 2^124", i,
                           sc[i] - 127, sc[i]);
  }
  return {};
}

namespace {

// A K-quant matrix's pack (p's fields from the matrix already set): its blocks one by one through
// kquant_block, rows in place.
void pack_kquant_rows(const QuantizedMatrix& w, HostPack& p, int threads) {
  const int64_t bytes = w.format.info().block_bytes;
  p.kquant_rows = true;
  p.avx2_codes = true;  // pack_unsupported: made only at the avx2 level
  p.expert_bytes = static_cast<int64_t>(w.footprint().code_bytes);
  const int64_t total = p.expert_bytes * w.batch + kRowOverread;
  p.data = aligned_bytes(total);
  std::memset(p.data.get() + p.expert_bytes * w.batch, 0, kRowOverread);
  const int64_t row_blocks = w.k / 256, rows = w.n * w.batch;
  constexpr int64_t kRowsATask = 64;
  const auto* in = reinterpret_cast<const uint8_t*>(w.codes);
  parallel_for((rows + kRowsATask - 1) / kRowsATask, resolve_threads(threads), [&](int64_t t, int) {
    const int64_t r1 = std::min(rows, (t + 1) * kRowsATask);
    for (int64_t b = t * kRowsATask * row_blocks; b < r1 * row_blocks; ++b)
      kquant_block(w.format, in + b * bytes, p.data.get() + b * bytes);
  });
}

}  // namespace

std::shared_ptr<const HostPack> make_pack(const QuantizedMatrix& w, int threads) {
  auto p = std::make_shared<HostPack>();
  p->codes = w.codes;
  p->scales = w.scales;
  p->biases = w.biases;
  p->format = w.format;
  p->scale_dtype = w.scale_dtype;
  p->layout = w.layout;
  p->n = w.n;
  p->k = w.k;
  p->batch = w.batch;
  if (kquant_scheme(w.format.scheme)) {
    pack_kquant_rows(w, *p, threads);
    return p;
  }
  // GGUF blocks (q4_0, q4_1, q5_0, q5_1): d (and m) from the blocks, in f16; q4_0 and q5_0 store no
  // biases (the kernel derives -8d, -16d).
  const GgufBlock* gguf = gguf_block(w.format.scheme);
  // mxfp4 and nvfp4: scales only, their E8M0 / E4M3 bytes as stored (the kernel converts them).
  const bool fp4 = w.format.scheme == Scheme::mxfp4 || w.format.scheme == Scheme::nvfp4;
  p->pack_dtype = gguf ? DType::f16 : w.scale_dtype;
  p->entry_bytes = fp4 ? 1 : static_cast<int64_t>(dtype_size(p->pack_dtype));
  p->stores_biases = !fp4 && (gguf == nullptr || gguf->min >= 0);
  p->avx2_codes = avx2_own_layout(w.format) && avx2_int8_active();
  const int64_t gpv = kPackBlock / w.format.group_size, sz = p->entry_bytes;
  // 16 groups per row and chunk: the kernel turns a chunk's scales to f32 with one vector load
  // per row (a chunk of one step, its scales filling one line, ran 2-bit g64 1.5x slower).
  p->steps = static_cast<int>(16 / gpv);
  const int64_t steps = w.k / kPackBlock, full = steps / p->steps, rest = steps % p->steps;
  p->tile_bytes = full * chunk_bytes(*p, p->steps) + (rest ? chunk_bytes(*p, rest) : 0);
  const int64_t tiles = (w.n + kPackRows - 1) / kPackRows;
  p->expert_bytes = tiles * p->tile_bytes;
  const int64_t total = p->expert_bytes * w.batch + kRowOverread;
  p->data = aligned_bytes(total);
  std::memset(p->data.get() + p->expert_bytes * w.batch, 0, kRowOverread);

  const Footprint fp = w.footprint();
  const int64_t row_code = static_cast<int64_t>(fp.code_bytes) / w.n;  // one row's, along K
  const int64_t block_code = 16 * w.format.bits, groups = w.k / w.format.group_size;
  // The matrix's own scale entries: E8M0 / E4M3 bytes or scale_dtype (affine).
  const int64_t wsz = fp4 ? 1 : static_cast<int64_t>(dtype_size(w.scale_dtype));
  // Tile t of expert e from its four rows (row_codes(r) etc. give row 4t + r as [N, K] rows).
  auto pack_tile = [&](int64_t e, int64_t t, auto&& source) {
    uint8_t* out = p->data.get() + e * p->expert_bytes + t * p->tile_bytes;
    for (int64_t s0 = 0; s0 < steps; s0 += p->steps) {
      const int64_t ns = std::min<int64_t>(p->steps, steps - s0), bytes = chunk_bytes(*p, ns);
      std::memset(out, 0, static_cast<std::size_t>(bytes));  // rows past N, and the padding
      uint8_t* sd_out = out + kPackRows * ns * block_code;
      const int64_t run = ns * gpv * sz;  // one row's scale bytes in this chunk
      for (int64_t r = 0; r < kPackRows && kPackRows * t + r < w.n; ++r) {
        const StepSource src = source(r);
        for (int64_t s = 0; s < ns; ++s)
          copy_step(w, *p, src, s0 + s, out + (kPackRows * s + r) * block_code,
                    sd_out + r * run + s * gpv * sz,
                    p->stores_biases ? sd_out + (kPackRows + r) * run + s * gpv * sz : nullptr);
      }
      out += bytes;
    }
  };
  const auto* codes = reinterpret_cast<const uint8_t*>(w.codes);
  const auto* scales = reinterpret_cast<const uint8_t*>(w.scales);
  const auto* biases = reinterpret_cast<const uint8_t*>(w.biases);
  if (w.layout == Layout::nk) {
    parallel_for(w.batch * tiles, resolve_threads(threads), [&](int64_t j, int) {
      const int64_t e = j / tiles, t = j % tiles;
      const auto ue = static_cast<std::size_t>(e);
      const uint8_t* ec = codes + ue * fp.code_bytes;
      const uint8_t* es = scales + ue * fp.scale_bytes;
      const uint8_t* eb = biases + ue * fp.bias_bytes;
      pack_tile(e, t, [&](int64_t r) {
        const int64_t row = kPackRows * t + r;
        return StepSource{ec + row * row_code, gguf ? nullptr : es + row * groups * wsz,
                          p->stores_biases && !gguf ? eb + row * groups * wsz : nullptr};
      });
    });
    return p;
  }
  // [K, N] (affine, mxfp4, nvfp4): blocks of kBlockRows rows transposed to [N, K] rows first,
  // then packed as above; the same pack, so the same kernel, as the [N, K] matrix W^T.
  constexpr int64_t kBlockRows = 16 * kPackRows;
  const int64_t blocks = (w.n + kBlockRows - 1) / kBlockRows;
  parallel_for(w.batch * blocks, resolve_threads(threads), [&](int64_t j, int) {
    const int64_t e = j / blocks, n0 = (j % blocks) * kBlockRows;
    const int64_t rows = std::min(kBlockRows, w.n - n0);
    const auto ue = static_cast<std::size_t>(e);
    std::vector<uint8_t> rc(static_cast<std::size_t>(rows * row_code)),
        rs(static_cast<std::size_t>(rows * groups * wsz)), rb(p->stores_biases ? rs.size() : 0);
    transpose_kn_rows(w, codes + ue * fp.code_bytes, scales + ue * fp.scale_bytes,
                      p->stores_biases ? biases + ue * fp.bias_bytes : nullptr, n0, rows, wsz,
                      rc.data(), rs.data(), p->stores_biases ? rb.data() : nullptr);
    for (int64_t t = n0 / kPackRows; t * kPackRows < n0 + rows; ++t)
      pack_tile(e, t, [&](int64_t r) {
        const int64_t i = kPackRows * t + r - n0;
        return StepSource{rc.data() + i * row_code, rs.data() + i * groups * wsz,
                          p->stores_biases ? rb.data() + i * groups * wsz : nullptr};
      });
  });
  return p;
}

namespace {
std::atomic<bool> g_prefer_pack{false};
}  // namespace

void prefer_pack(bool on) {
  g_prefer_pack.store(on, std::memory_order_relaxed);
}

const HostPack* pack_for_rows(const QuantizedMatrix& w, int64_t m) {
  const HostPack* p = pack_of(w);
  // Only the VNNI level has an integer kernel for the plain rows; the avx2 level's reads the pack.
  if (p != nullptr && m <= kPlainRowsMaxM && w.layout == Layout::nk && gemv_prefetch().rows &&
      vnni_active() && !g_prefer_pack.load(std::memory_order_relaxed))
    return nullptr;
  return p;
}

const HostPack* pack_of(const QuantizedMatrix& w) {
  const HostPack* p = w.host_pack.get();
  if (p == nullptr || p->codes != w.codes || p->scales != w.scales || p->biases != w.biases ||
      p->format != w.format || p->scale_dtype != w.scale_dtype || p->n != w.n || p->k != w.k ||
      p->batch != w.batch || p->layout != w.layout || w.location != Location::host)
    return nullptr;
  // Codes of 3 to 6 bits and the K-quants' are laid out for the level that packed them (a test
  // may switch levels).
  if (avx2_own_layout(p->format) && p->avx2_codes != avx2_int8_active()) return nullptr;
  return p;
}

}  // namespace quanta::cpu
