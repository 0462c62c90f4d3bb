// The host pack of quanta::prepack (layout in pack.hpp).
#include "cpu/pack.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "cpu/isa.hpp"
#include "cpu/plan.hpp"
#include "cpu/pool.hpp"

namespace quanta::cpu {

namespace {

int64_t round_up(int64_t v, int64_t m) {
  return (v + m - 1) / m * m;
}

// Bytes of a chunk of ns steps.
int64_t chunk_bytes(const HostPack& p, int64_t ns) {
  const int64_t code = kPackRows * ns * 16 * p.format.bits;
  const int64_t sd = kPackRows * ns * (kPackBlock / p.format.group_size) *
                     static_cast<int64_t>(dtype_size(p.scale_dtype));
  return round_up(code + 2 * sd, 64);
}

}  // namespace

std::string pack_unsupported(const QuantizedMatrix& w) {
  const Format& f = w.format;
  if (f.scheme != Scheme::affine || (f.bits != 2 && f.bits != 3 && f.bits != 4))
    return fmt::format("{} has no packed kernel (affine 2-, 3- and 4-bit do)", f.name());
  if (w.layout != Layout::nk) return "W [K, N] has no packed kernel (W [N, K] does)";
  if (w.k % kPackBlock != 0) return fmt::format("K = {} is not a multiple of {}", w.k, kPackBlock);
  if (w.location != Location::host) return "the matrix is not in host memory";
  if (!vnni_active()) return "this CPU level has no VNNI kernel (needs AVX512-VNNI and VBMI)";
  return {};
}

std::shared_ptr<const HostPack> make_pack(const QuantizedMatrix& w, int threads) {
  auto p = std::make_shared<HostPack>();
  p->codes = w.codes;
  p->scales = w.scales;
  p->biases = w.biases;
  p->format = w.format;
  p->scale_dtype = w.scale_dtype;
  p->n = w.n;
  p->k = w.k;
  p->batch = w.batch;
  const int64_t gpv = kPackBlock / w.format.group_size;
  // 16 groups per row and chunk: the kernel turns a chunk's scales to f32 with one vector load
  // per row (a chunk of one step, its scales filling one line, ran 2-bit g64 1.5x slower).
  p->steps = static_cast<int>(16 / gpv);
  const int64_t steps = w.k / kPackBlock, full = steps / p->steps, rest = steps % p->steps;
  p->tile_bytes = full * chunk_bytes(*p, p->steps) + (rest ? chunk_bytes(*p, rest) : 0);
  const int64_t tiles = (w.n + kPackRows - 1) / kPackRows;
  p->expert_bytes = tiles * p->tile_bytes;
  const int64_t total = p->expert_bytes * w.batch + kRowOverread;
  p->data =
      std::shared_ptr<uint8_t[]>(static_cast<uint8_t*>(::operator new[](
                                     static_cast<std::size_t>(total), std::align_val_t(64))),
                                 [](uint8_t* q) { ::operator delete[](q, std::align_val_t(64)); });
  std::memset(p->data.get() + p->expert_bytes * w.batch, 0, kRowOverread);

  const Footprint fp = w.footprint();
  const int64_t row_code = static_cast<int64_t>(fp.code_bytes) / w.n;  // 16·bits per step
  const int64_t block_code = 16 * w.format.bits, groups = w.k / w.format.group_size;
  const auto* codes = reinterpret_cast<const uint8_t*>(w.codes);
  const auto* scales = reinterpret_cast<const uint8_t*>(w.scales);
  const auto* biases = reinterpret_cast<const uint8_t*>(w.biases);
  const int64_t jobs = w.batch * tiles;
  parallel_for(jobs, resolve_threads(threads), [&](int64_t j, int) {
    const int64_t e = j / tiles, t = j % tiles;
    uint8_t* out = p->data.get() + e * p->expert_bytes + t * p->tile_bytes;
    const uint8_t* ec = codes + e * static_cast<int64_t>(fp.code_bytes);
    const uint8_t* es = scales + e * static_cast<int64_t>(fp.scale_bytes);
    const uint8_t* eb = biases + e * static_cast<int64_t>(fp.bias_bytes);
    for (int64_t s0 = 0; s0 < steps; s0 += p->steps) {
      const int64_t ns = std::min<int64_t>(p->steps, steps - s0), bytes = chunk_bytes(*p, ns);
      std::memset(out, 0, static_cast<std::size_t>(bytes));
      uint8_t* sd_out = out + kPackRows * ns * block_code;
      const int64_t run = ns * gpv * static_cast<int64_t>(dtype_size(w.scale_dtype));  // one row's scale bytes in this chunk
      for (int64_t r = 0; r < kPackRows; ++r) {
        const int64_t row = kPackRows * t + r;
        if (row >= w.n) break;  // zero rows: zero codes, scales and biases
        for (int64_t s = 0; s < ns; ++s)
          std::memcpy(out + (kPackRows * s + r) * block_code,
                      ec + row * row_code + (s0 + s) * block_code,
                      static_cast<std::size_t>(block_code));
        const int64_t src = (row * groups + s0 * gpv) * (run / (ns * gpv));
        std::memcpy(sd_out + r * run, es + src, static_cast<std::size_t>(run));
        std::memcpy(sd_out + (kPackRows + r) * run, eb + src, static_cast<std::size_t>(run));
      }
      out += bytes;
    }
  });
  return p;
}

const HostPack* pack_of(const QuantizedMatrix& w) {
  const HostPack* p = w.host_pack.get();
  if (p == nullptr || p->codes != w.codes || p->scales != w.scales || p->biases != w.biases ||
      p->format != w.format || p->scale_dtype != w.scale_dtype || p->n != w.n || p->k != w.k ||
      p->batch != w.batch || w.layout != Layout::nk || w.location != Location::host)
    return nullptr;
  return p;
}

}  // namespace quanta::cpu
