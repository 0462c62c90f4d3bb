// The driver of the SIMD kernels: flattens the matrix (WeightPlan), converts activations to
// f32, splits the work over threads and calls the entry points of one ISA level.
//   M = 1, nk: fused GEMV over row ranges (rows of W are contiguous, one stream per thread).
//   M = 1, kn: fused GEMV over K ranges (one contiguous stream per thread), partial y summed.
//   M > 1 (or forced): per task of NC output features, per K block: decode the tile once,
//   then run the micro-kernel over every row of x (W [N, K] from pack_min_rows rows of x:
//   the tile packed K-major for the outer-product form).
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <new>
#include <vector>

#include "cpu/backend.hpp"
#include "cpu/pack.hpp"
#include "cpu/plan.hpp"
#include "cpu/pool.hpp"
#include "format/dense.hpp"
#include "format/gguf.hpp"
#include "format/minifloat.hpp"
#if defined(QUANTA_CPU_X86)
#include "cpu/x86/amx_gemm.hpp"
#endif

namespace quanta::cpu {

namespace {

// f32 scratch aligned for vector loads.
struct Buffer {
  struct Free {
    void operator()(float* mem) const { ::operator delete[](mem, std::align_val_t(64)); }
  };
  std::unique_ptr<float[], Free> p;
  explicit Buffer(int64_t n)
      : p(static_cast<float*>(
            ::operator new[](static_cast<std::size_t>(std::max<int64_t>(n, 1)) * sizeof(float),
                             std::align_val_t(64)))) {}
  float* get() const { return p.get(); }
};

// Below this many weights a call runs on one thread (waking helpers costs more).
constexpr int64_t kParallelWeights = int64_t{1} << 16;

// nk tiles: K block (a multiple of every group and of 256) and output features per task; of
// kc in {512, 1024, 2048} x nc in {64, 128, 256}, 1024 x 128 measured best at M = 16..256
// (the f32 tile, 512 KB, stays in L2).
constexpr int64_t kTileK = 1024, kTileN = 128;
constexpr int64_t kTileKn = 256;  // kn tiles: K block
// Packed nk tiles (outer form): K block and output features per task.
constexpr int64_t kPackK = 1024, kPackN = 128;

int64_t round_up(int64_t v, int64_t m) {
  return (v + m - 1) / m * m;
}

struct PlannedMatrix {
  WeightPlan plan;
  std::vector<uint8_t> tail;  // padded copy of the last storage rows
};

// w one matrix (batch 1); pack: the stack's pack (pack_of) or null, e: w's place in the stack.
PlannedMatrix make_plan(const QuantizedMatrix& w, const HostPack* pack = nullptr, int64_t e = 0) {
  PlannedMatrix pm;
  WeightPlan& p = pm.plan;
  const Footprint fp = w.footprint();
  p.scheme = w.format.scheme;
  p.layout = w.layout;
  p.granularity = w.format.granularity;
  p.scale_dtype = w.scale_dtype;
  p.bits = w.format.bits;
  p.group = w.format.group_size;
  p.n = w.n;
  p.k = w.k;
  const int64_t rows = w.layout == Layout::nk ? w.n : w.k;
  const auto code_bytes = static_cast<int64_t>(fp.code_bytes);
  p.row_bytes = code_bytes / rows;
  p.codes = reinterpret_cast<const uint8_t*>(w.codes);
  p.scales = reinterpret_cast<const uint8_t*>(w.scales);
  p.biases = reinterpret_cast<const uint8_t*>(w.biases);
  p.global = w.global_scale ? *w.global_scale : 1.0f;
  p.prefetch_l2 = gemv_prefetch().l2;
  p.prefetch_rows = gemv_prefetch().rows;
  p.avx_vnni = avx_vnni_active();
  // Rows whose whole-vector loads could leave the buffer are read from a padded copy.
  p.tail_row =
      code_bytes >= kRowOverread ? std::min(rows, (code_bytes - kRowOverread) / p.row_bytes) : 0;
  const int64_t tail_bytes = (rows - p.tail_row) * p.row_bytes;
  pm.tail.assign(static_cast<std::size_t>(tail_bytes + kRowOverread), 0);
  if (tail_bytes > 0)
    std::memcpy(pm.tail.data(), p.codes + p.tail_row * p.row_bytes,
                static_cast<std::size_t>(tail_bytes));
  p.tail_codes = pm.tail.data();
  if (pack != nullptr && pack->kquant_rows) {
    p.kquant_quad = pack->data.get() + e * pack->expert_bytes;
  } else if (pack != nullptr) {
    p.pack = pack->data.get() + e * pack->expert_bytes;
    p.pack_tile_bytes = pack->tile_bytes;
    p.pack_steps = pack->steps;
    p.scale_dtype = pack->pack_dtype;  // q4_1's d and m: f16
    p.pack_e2m1 = pack->format.scheme == Scheme::mxfp4 || pack->format.scheme == Scheme::nvfp4;
    p.pack_e4m3 = pack->format.scheme == Scheme::nvfp4;
  }
  return pm;
}

int workers_for(int threads, int64_t weights) {
  return weights < kParallelWeights ? 1 : threads;
}

// Whether the M = 1 GEMV of w may take x as integer planes (the VNNI kernels). Affine 4-bit in
// groups of 32 ran 8-12% slower on them than the float kernel from DRAM on the 2-core Zen 5
// (its scale and bias streams, a third of the bytes, read worse beside four rows' codes) but
// 1.2-1.5x faster from L3: there they run only while the matrix fits in L3
// (docs/perf-cpu.md). Other widths take them at any size: on the Zen 4 VM, from DRAM, 2/3-bit
// g32 ran 1.6-1.9x the float kernels (4-bit g32 1.25-1.6x, but that VM's sysconf reports a 320 MB
// L3, so the rule never fired there), and 5/6-bit ran the float kernels at half speed hot.
// With the next pass prefetched per row (Intel) 4-bit g32 read 1.15x the float kernel from DRAM
// on the Emerald Rapids VM, so the rule holds only for the run prefetch (gemv_prefetch()).
bool gemv_int8_pays(const WeightPlan& w) {
  if (w.scheme != Scheme::affine || w.group != 32 || w.pack != nullptr || w.bits != 4 ||
      w.prefetch_rows)
    return true;
  static const int64_t l3 = [] {
    const long v = ::sysconf(_SC_LEVEL3_CACHE_SIZE);
    return v > 0 ? static_cast<int64_t>(v) : int64_t{8} << 20;
  }();
  const int64_t sd = w.scale_dtype == DType::f32 ? 4 : 2;
  return w.n * (w.row_bytes + 2 * sd * (w.k / w.group)) <= l3;
}

void gemv_nk(const IsaKernels& kr, const WeightPlan& plan, const float* x, float* y, int threads) {
  WeightPlan w = plan;
  w.quad_pairs = true;
  w.int8_x = int8_active() && gemv_int8_pays(w);
  Buffer xp(w.k + kGemvXPad), xs(kr.gemv_xs_count(w));
  kr.gemv_prep(w, x, xp.get(), xs.get());
  const int workers = workers_for(threads, w.n * w.k);
  // Every task is a run of whole rows, read in address order (splitting K so each slice of x
  // stays in L1 turned the rows into strided runs and measured 2x slower). Several tasks per
  // worker balance a machine shared with other work.
  const int64_t chunk =
      std::max<int64_t>(16, round_up((w.n + 16 * workers - 1) / (16 * workers), 4));
  const int64_t tasks = (w.n + chunk - 1) / chunk;
  parallel_for(tasks, workers, [&](int64_t t, int) {
    const int64_t n0 = t * chunk;
    kr.gemv_nk(w, xp.get(), xs.get(), y, n0, std::min(w.n, n0 + chunk), 0, w.k);
  });
}

// M = 2..8, W [N, K]: passes of up to four rows of x, each streaming the weights once. The
// formats with VNNI kernels (K-quants, affine 2/3/4-bit) take every row of x as integer planes
// unless one row cannot be split, which sends them all to the float kernels. The K-quant ones
// take passes of two rows of x, and only up to M = 4 (q6_K: 3): with three or four rows of x
// per pass (one row of W, for registers) q4_K/q6_K at M = 4 ran 5.1-7.0 ms against the float
// kernels' 2.6-3.1 on 4096 x 14336; two passes of two run 2.4 for q4_K but 3.0-3.2 for q6_K,
// whose float kernel takes 2.5 (docs/perf-cpu.md). The avx2 level's quad pack of the K-quants
// takes x's planes at every M the fused GEMV serves (to 8 for q3_K, q5_K, q6_K): on 4096 x 14336,
// two threads, M = 5..8 ran 7.5-15.4 ms against the float kernels' 14.9-34.7, and one core at
// M = 4 q6_K 11.8-12.5 against 16.8-21.5 (docs/PERF.md, eighteenth session).
void gemv_nk_multi(const IsaKernels& kr, const WeightPlan& plan, const float* x, int64_t m,
                   float* y, int threads) {
  WeightPlan w = plan;
  const int64_t float_xs = kr.gemv_xs_count(w);
  const bool kquant = kquant_scheme(w.scheme);
  w.int8_x = int8_active() && gemv_int8_pays(w) &&
             !(kquant && m > (w.kquant_quad != nullptr   ? 8
                              : w.scheme == Scheme::q6_K ? 3
                                                         : 4));
  const int64_t xl = w.k + kGemvXPad, sl = std::max<int64_t>(kr.gemv_xs_count(w), 1);
  Buffer xp((m + 1) * xl), xs((m + 1) * sl);
  auto prep = [&] {
    for (int64_t i = 0; i < m; ++i)
      kr.gemv_prep(w, x + i * w.k, xp.get() + i * xl, xs.get() + i * sl);
  };
  prep();
  if (const int64_t n = kr.gemv_xs_count(w); n != float_xs) {  // planes: the last entry says
    for (int64_t i = 0; i < m; ++i)
      if (xs.get()[i * sl + n - 1] != 1.0f) {
        w.int8_x = false;
        prep();
        break;
      }
  }
  std::memset(xp.get() + m * xl, 0, static_cast<std::size_t>(xl) * sizeof(float));  // zero row
  std::memset(xs.get() + m * sl, 0, static_cast<std::size_t>(sl) * sizeof(float));
  const int workers = workers_for(threads, w.n * w.k * m);
  const int64_t chunk =
      std::max<int64_t>(16, round_up((w.n + 16 * workers - 1) / (16 * workers), 4));
  const int64_t tasks = (w.n + chunk - 1) / chunk;
  const int64_t pass = w.int8_x && kquant ? 2 : kGemvMultiRows;
  for (int64_t p0 = 0; p0 < m; p0 += pass) {
    const float* xps[kGemvMultiRows];
    const float* xss[kGemvMultiRows];
    const int mm = static_cast<int>(std::min<int64_t>(pass, m - p0));
    for (int i = 0; i < kGemvMultiRows; ++i) {
      const int64_t r = i < mm ? p0 + i : m;
      xps[i] = xp.get() + r * xl;
      xss[i] = xs.get() + r * sl;
    }
    parallel_for(tasks, workers, [&](int64_t t, int) {
      const int64_t n0 = t * chunk;
      kr.gemv_nk_multi(w, xps, xss, mm, y + p0 * w.n, w.n, n0, std::min(w.n, n0 + chunk));
    });
  }
}

// W [K, N], M = 1..kKnMaxRows: tasks are column panels (each read row by row, the sums of every
// row of x in L1: panels of kKnPanelCols / M columns, why 8192 in engine/gemv_kn.hpp) times K
// ranges when there are fewer panels than workers; partial sums of the K ranges are added. Each
// decoded code serves all M rows (the tiled path ran M = 2..4 at 10-15x the M = 1 time,
// docs/perf-cpu.md).
void gemv_kn_pass(const IsaKernels& kr, const WeightPlan& w, const float* x, int64_t m, float* y,
                  int threads) {
  const int workers = workers_for(threads, w.n * w.k * m);
  const int64_t panel = kKnPanelCols / (m == 1 ? 1 : m == 2 ? 2 : 4);
  const int64_t panels = (w.n + panel - 1) / panel;
  const int64_t blocks = (w.k + 15) / 16;  // K ranges start on 16-row boundaries
  const int64_t parts = std::min<int64_t>(blocks, std::max<int64_t>(1, workers / panels));
  const int64_t per = (blocks + parts - 1) / parts;
  const int64_t len = kr.gemv_kn_ylen(w);
  Buffer part((parts * m + 1) * len);  // [part][row of x][len], then one row for the sum
  std::memset(part.get(), 0, static_cast<std::size_t>(parts * m * len) * sizeof(float));
  parallel_for(panels * parts, workers, [&](int64_t t, int) {
    const int64_t p = t / panels, n0 = (t % panels) * panel;
    const int64_t k0 = p * per * 16;
    kr.gemv_kn(w, x, w.k, m, part.get() + p * m * len, len, n0, std::min(w.n, n0 + panel), k0,
               std::min(w.k, k0 + per * 16));
  });
  float* sum = part.get() + parts * m * len;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t n = 0; n < len; ++n) {
      float s = 0;
      for (int64_t q = 0; q < parts; ++q) s += part.get()[(q * m + i) * len + n];
      sum[n] = s;
    }
    kr.gemv_kn_finish(w, sum, y + i * w.n);
  }
}

// More rows of x than one pass holds: passes of up to kKnMaxRows, each streaming W once.
void gemv_kn(const IsaKernels& kr, const WeightPlan& w, const float* x, int64_t m, float* y,
             int threads) {
  for (int64_t i = 0; i < m; i += kKnMaxRows)
    gemv_kn_pass(kr, w, x + i * w.k, std::min<int64_t>(kKnMaxRows, m - i), y + i * w.n, threads);
}

int64_t pack_min_rows(const IsaKernels& kr, Scheme s, Layout layout) {
  if (kr.pack_min_rows == 0 || layout == Layout::kn) return INT64_MAX;
  switch (s) {
    case Scheme::q3_K:
    case Scheme::q5_K:
    case Scheme::q6_K:
    case Scheme::fp8_e4m3:
    case Scheme::fp8_e5m2:
      return 2;
    case Scheme::mxfp4:  // per level (simd/avx2.hpp, avx512.hpp)
      return kr.pack_min_rows_mxfp4;
    case Scheme::nvfp4:
      return kr.pack_min_rows_nvfp4;
    default:
      return kr.pack_min_rows;
  }
}

// Floats of scratch one task of packed_task needs.
int64_t packed_task_floats(const IsaKernels& kr, int64_t k) {
  return round_up(kPackN, kr.pack_cols) * std::min(kPackK, k) + kr.vector_width * kr.pack_chunk;
}

// y[i][n0 + j] for rows j < rows (<= kPackN) of W [N, K]: the tile packed K-major per K block,
// the outer-product micro-kernel over every row of x.
void packed_task(const IsaKernels& kr, const WeightPlan& w, const float* x, int64_t ldx, int64_t m,
                 float* y, int64_t ldy, int64_t n0, int64_t rows, float* scratch) {
  const int64_t kc = std::min(kPackK, w.k), tile_len = round_up(kPackN, kr.pack_cols) * kc;
  for (int64_t k0 = 0; k0 < w.k; k0 += kc) {
    const int64_t kk = std::min(kc, w.k - k0);
    kr.pack_nk(w, n0, rows, k0, kk, scratch + tile_len, scratch);
    kr.gemm_packed(x + k0, ldx, m, scratch, rows, kk, y + n0, ldy, k0 > 0);
  }
}

// W [K, N]: columns per task of the tiled path.
constexpr int64_t kKnCols = 256;

int64_t kn_task_floats(int64_t k) {
  return std::min(kTileKn, k) * kKnCols;
}

// y[i][n0 + j] for columns j < cols (<= kKnCols) of W [K, N]: a kn tile per K block, the
// outer-product micro-kernel over every row of x.
void kn_task(const IsaKernels& kr, const WeightPlan& w, const float* x, int64_t ldx, int64_t m,
             float* y, int64_t ldy, int64_t n0, int64_t cols, float* tile) {
  const int64_t kc = std::min(kTileKn, w.k);
  for (int64_t k0 = 0; k0 < w.k; k0 += kc) {
    const int64_t kk = std::min(kc, w.k - k0);
    kr.decode_kn(w, k0, kk, n0, cols, tile, kKnCols);
    kr.gemm_kn(x + k0, ldx, m, tile, kKnCols, cols, kk, y + n0, ldy, k0 > 0);
  }
}

void tiled(const IsaKernels& kr, const WeightPlan& w, const float* x, int64_t ldx, int64_t m,
           float* y, int64_t ldy, int threads) {
  const int workers = workers_for(threads, w.n * w.k * m);
  const int64_t vw = kr.vector_width;
  if (m >= pack_min_rows(kr, w.scheme, w.layout)) {
    // Large M: the tile packed K-major, outer-product micro-kernel (no lane reductions).
    const int64_t tasks = (w.n + kPackN - 1) / kPackN;
    const int used = static_cast<int>(std::min<int64_t>(workers, tasks));
    std::vector<Buffer> tiles;
    for (int i = 0; i < used; ++i) tiles.emplace_back(packed_task_floats(kr, w.k));
    parallel_for(tasks, used, [&](int64_t t, int worker) {
      const int64_t n0 = t * kPackN, rows = std::min(kPackN, w.n - n0);
      packed_task(kr, w, x, ldx, m, y, ldy, n0, rows,
                  tiles[static_cast<std::size_t>(worker)].get());
    });
    return;
  }
  if (w.layout == Layout::nk) {
    const int64_t kc = std::min(kTileK, w.k), ld = round_up(kc, vw);
    const int64_t nc = kTileN;
    const int64_t tasks = (w.n + nc - 1) / nc;
    const int used = static_cast<int>(std::min<int64_t>(workers, tasks));
    std::vector<Buffer> tiles;
    for (int i = 0; i < used; ++i) tiles.emplace_back(nc * ld);
    parallel_for(tasks, used, [&](int64_t t, int worker) {
      const int64_t n0 = t * nc, rows = std::min(nc, w.n - n0);
      float* tile = tiles[static_cast<std::size_t>(worker)].get();
      for (int64_t k0 = 0; k0 < w.k; k0 += kc) {
        const int64_t kk = std::min(kc, w.k - k0);
        kr.decode_nk(w, n0, rows, k0, kk, tile, ld);
        kr.gemm_nk(x + k0, ldx, m, tile, ld, rows, kk, y + n0, ldy, k0 > 0);
      }
    });
    return;
  }
  const int64_t tasks = (w.n + kKnCols - 1) / kKnCols;
  const int used = static_cast<int>(std::min<int64_t>(workers, tasks));
  std::vector<Buffer> tiles;
  for (int i = 0; i < used; ++i) tiles.emplace_back(kn_task_floats(w.k));
  parallel_for(tasks, used, [&](int64_t t, int worker) {
    const int64_t n0 = t * kKnCols;
    kn_task(kr, w, x, ldx, m, y, ldy, n0, std::min(kKnCols, w.n - n0),
            tiles[static_cast<std::size_t>(worker)].get());
  });
}

#if defined(QUANTA_CPU_X86)
// On AMX tile products: x cut into bf16 planes once (amx_gemm.hpp), then per task of kAmxN rows
// (W [N, K]) or columns (W [K, N]) of W and per K block: the tile decoded to f32 in L1-sized
// pieces (16 rows x kPackChunk, or 32 rows along K) and cut into w_planes bf16 planes (two, or
// one where amx_one_plane_w: for W [N, K] written straight from storage), the tile products over
// every row of x accumulated in ct, which goes to y at the end (times fp8's row or nvfp4's global
// scale).
// K block and rows of W per task: 128 x 1024 and 256 x 512 measured alike (q4_0, bf16 x, M = 64,
// 256, 512), 128 x 512 0.85-0.9x, 64 x 2048 within the spread (docs/perf-cpu.md).
constexpr int64_t kAmxK = 1024, kAmxN = 128;

// The AMX tasks (kAmxN rows or columns of W each) whose weights hold a value that is not finite,
// on the f32 path with `used` workers.
void f32_tasks(const IsaKernels& kr, const WeightPlan& w, const float* x, int64_t m, float* y,
               const std::vector<int64_t>& tasks, int used) {
  if (tasks.empty()) return;
  const bool kn = w.layout == Layout::kn;
  const int64_t K = w.k, nc = kAmxN;
  std::vector<Buffer> fallback;
  for (int i = 0; i < used; ++i)
    fallback.emplace_back(kn ? kn_task_floats(K) : packed_task_floats(kr, K));
  parallel_for(static_cast<int64_t>(tasks.size()), used, [&](int64_t i, int worker) {
    const int64_t n0 = tasks[static_cast<std::size_t>(i)] * nc;
    float* f = fallback[static_cast<std::size_t>(worker)].get();
    static_assert(kAmxN <= kKnCols);
    if (kn)
      kn_task(kr, w, x, K, m, y, w.n, n0, std::min(nc, w.n - n0), f);
    else
      for (int64_t j = n0; j < std::min(n0 + nc, w.n); j += kPackN)
        packed_task(kr, w, x, K, m, y, w.n, j, std::min(kPackN, w.n - j), f);
  });
}

void amx_tiled(const IsaKernels& kr, const WeightPlan& w, const float* x, int64_t m, float* y,
               int threads, int x_planes, int w_planes) {
  const bool kn = w.layout == Layout::kn;
  const int workers = workers_for(threads, w.n * w.k * m);
  const int64_t K = w.k, kp = round_up(K, amx::kStep), ks = kp / amx::kStep;
  const int64_t mp = round_up(m, amx::kBlock);
  std::unique_ptr<uint16_t[]> xp(
      new uint16_t[static_cast<std::size_t>(amx::x_elems(m, K, x_planes))]);
  std::atomic<bool> x_nonfinite{false};
  parallel_for(mp / amx::kBlock, workers, [&](int64_t b, int) {
    if (amx::prep_x_block(x, K, m, K, b, x_planes, kn, xp.get())) x_nonfinite = true;
  });
  if (x_nonfinite) {  // an infinity would meet the zero planes (amx_gemm.hpp): the f32 path
    tiled(kr, w, x, K, m, y, w.n, threads);
    return;
  }
  // One plane of fp8 or nvfp4 values: the plane holds them without the per-row (fp8) or global
  // (nvfp4) f32 scale, which multiplies the sums at the end instead (u: the plan that decodes so).
  WeightPlan u = w;
  const bool row_scaled = w.scheme == Scheme::fp8_e4m3 || w.scheme == Scheme::fp8_e5m2;
  const bool channel = w.granularity == Granularity::channel;
  const std::vector<float> unit(static_cast<std::size_t>(row_scaled ? (channel ? w.n : 1) : 0),
                                1.0f);
  if (w_planes == 1 && row_scaled) u.scales = reinterpret_cast<const uint8_t*>(unit.data());
  if (w_planes == 1 && w.scheme == Scheme::nvfp4) {
    if (!std::isfinite(w.global)) {  // every sum would meet it: the f32 path's classes
      tiled(kr, w, x, K, m, y, w.n, threads);
      return;
    }
    u.global = 1.0f;
  }
  const auto post_scale = [&](int64_t n) {
    if (w_planes != 1) return 1.0f;
    if (w.scheme == Scheme::nvfp4) return w.global;
    if (!row_scaled) return 1.0f;
    float s;
    std::memcpy(&s, w.scales + (channel ? n * 4 : 0), 4);
    return s;
  };
  // One plane of W [N, K] written from storage (no decode to f32), per block of 16 rows from
  // `row` (rr of them valid) over K from k0: true if a task must run the f32 path.
  using DirectRows = std::function<bool(int64_t row, int64_t rr, int64_t k0, int64_t kcp,
                                        uint16_t * wp, int64_t kcs, int64_t nb)>;
  DirectRows direct_rows;
  if (w_planes == 1 && !kn && K % amx::kStep == 0) {
    const int64_t ng32 = K / amx::kStep, ng16 = K / 16;  // E8M0 scales per 32, E4M3 per 16
    if (w.scheme == Scheme::mxfp4)
      direct_rows = [&w, ng32](int64_t row, int64_t rr, int64_t k0, int64_t kcp, uint16_t* wp,
                               int64_t kcs, int64_t nb) {
        return amx::mxfp4_w_direct(w.codes + row * w.row_bytes, w.row_bytes, w.scales + row * ng32,
                                   ng32, rr, k0, kcp, wp, kcs, nb, 0);
      };
    if (w.scheme == Scheme::nvfp4)
      direct_rows = [&w, ng16](int64_t row, int64_t rr, int64_t k0, int64_t kcp, uint16_t* wp,
                               int64_t kcs, int64_t nb) {
        return amx::nvfp4_w_direct(w.codes + row * w.row_bytes, w.row_bytes, w.scales + row * ng16,
                                   ng16, rr, k0, kcp, wp, kcs, nb, 0);
      };
  }
  if (w_planes == 1 && !kn && (row_scaled || w.scheme == Scheme::mxfp8)) {
    const bool mx8 = w.scheme == Scheme::mxfp8;  // with E8M0 scales per 32 (K % 32 == 0)
    const int64_t ng32 = K / amx::kStep;
    direct_rows = [&w, mx8, ng32, K](int64_t row, int64_t rr, int64_t k0, int64_t kcp, uint16_t* wp,
                                     int64_t kcs, int64_t nb) {
      return amx::fp8_w_direct(w.scheme == Scheme::fp8_e5m2, w.codes + row * w.row_bytes,
                               w.row_bytes, mx8 ? w.scales + row * ng32 : nullptr, ng32, rr,
                               std::clamp(K - k0, int64_t{0}, kcp), k0, kcp, wp, kcs, nb, 0);
    };
  }
  const int64_t kc = std::min(kAmxK, kp), nc = kAmxN, chunk = kr.pack_chunk;
  const int64_t tasks = (w.n + nc - 1) / nc;
  const int used = static_cast<int>(std::min<int64_t>(workers, tasks));
  const int64_t f32_floats = kn ? amx::kStep * nc : amx::kBlock * chunk;
  struct Scratch {
    std::unique_ptr<uint16_t[]> wp;
    Buffer f32, ct;
  };
  std::vector<Scratch> scratch;
  for (int i = 0; i < used; ++i)
    scratch.push_back(
        {std::unique_ptr<uint16_t[]>(new uint16_t[static_cast<std::size_t>(nc * kc * w_planes)]),
         Buffer(f32_floats), Buffer(nc * mp)});
  // Tasks whose weights hold an infinity or a NaN (fp8 codes, GGUF scales) run the f32 path
  // after the others.
  std::vector<int64_t> nonfinite_tasks;
  nonfinite_tasks.reserve(static_cast<std::size_t>(tasks));  // no allocation inside the workers
  std::mutex nonfinite_mutex;
  parallel_for(tasks, used, [&](int64_t t, int worker) {
    Scratch& sc = scratch[static_cast<std::size_t>(worker)];
    const int64_t n0 = t * nc,
                  rows = std::min(nc, w.n - n0);  // rows of W [N, K], columns of [K, N]
    const int64_t w_pad = round_up(rows, 2 * amx::kBlock);
    bool w_nonfinite = false;
    for (int64_t j = 0; j < rows && w_planes == 1; ++j)  // a row scale's inf or NaN: the f32 path
      w_nonfinite |= !std::isfinite(post_scale(n0 + j));
    for (int64_t k0 = 0; k0 < kp && !w_nonfinite; k0 += kc) {
      const int64_t kcp = std::min(kc, kp - k0), kcs = kcp / amx::kStep;
      if (kn) {
        for (int64_t s = 0; s < kcs; ++s) {
          const int64_t k1 = k0 + s * amx::kStep;
          const int64_t valid = std::clamp(K - k1, int64_t{0}, amx::kStep);
          if (valid > 0) kr.decode_kn(u, k1, valid, n0, rows, sc.f32.get(), nc);
          w_nonfinite |=
              amx::split_w_kn(sc.f32.get(), nc, valid, w_pad, sc.wp.get(), kcs, s, w_planes);
        }
      } else if (direct_rows) {
        for (int64_t r0 = 0; r0 < w_pad; r0 += amx::kBlock) {
          const int64_t rr = std::clamp<int64_t>(rows - r0, 0, amx::kBlock);
          w_nonfinite |=
              direct_rows(rr > 0 ? n0 + r0 : 0, rr, k0, kcp, sc.wp.get(), kcs, r0 / amx::kBlock);
        }
      } else {
        for (int64_t r0 = 0; r0 < w_pad; r0 += amx::kBlock) {
          const int64_t rr = std::clamp<int64_t>(rows - r0, 0, amx::kBlock);
          for (int64_t kb = 0; kb < kcp; kb += chunk) {
            const int64_t cols = std::min(chunk, kcp - kb);
            const int64_t valid = std::clamp(K - k0 - kb, int64_t{0}, cols);
            if (rr > 0 && valid > 0)
              kr.decode_nk(u, n0 + r0, rr, k0 + kb, valid, sc.f32.get(), chunk);
            w_nonfinite |= amx::split_w(sc.f32.get(), chunk, valid > 0 ? rr : 0, cols, sc.wp.get(),
                                        kcs, r0 / amx::kBlock, kb / amx::kStep, w_planes);
          }
        }
      }
      if (!w_nonfinite)
        amx::gemm(sc.wp.get(), w_planes, kcs, w_pad, xp.get(), x_planes, kn, ks, mp,
                  k0 / amx::kStep, sc.ct.get(), kn ? nc : mp, k0 > 0);
    }
    if (w_nonfinite) {
      const std::lock_guard<std::mutex> lock(nonfinite_mutex);
      nonfinite_tasks.push_back(t);
      return;
    }
    const float* ct = sc.ct.get();
    for (int64_t j = 0; j < rows; ++j) {
      const float s = post_scale(n0 + j);
      for (int64_t i = 0; i < m; ++i)
        y[i * w.n + n0 + j] = s * (kn ? ct[i * nc + j] : ct[j * mp + i]);
    }
  });
  f32_tasks(kr, w, x, m, y, nonfinite_tasks, used);
}

// The codes that amx::codes_w_direct writes from storage for this plan (none: the engine decodes
// them from a unit-scale copy of the plan).
amx::DirectCodes direct_codes(const WeightPlan& w) {
  switch (w.scheme) {
    case Scheme::q4_0:
      return amx::DirectCodes::q4_0;
    case Scheme::q4_1:
      return amx::DirectCodes::q4_1;
    case Scheme::q5_0:
      return amx::DirectCodes::q5_0;
    case Scheme::q5_1:
      return amx::DirectCodes::q5_1;
    case Scheme::q8_0:
      return amx::DirectCodes::q8_0;
    case Scheme::q3_K:
      return amx::DirectCodes::q3_K;
    case Scheme::q4_K:
      return amx::DirectCodes::q4_K;
    case Scheme::q5_K:
      return amx::DirectCodes::q5_K;
    default:
      return w.bits == 4   ? amx::DirectCodes::u4
             : w.bits == 8 ? amx::DirectCodes::u8
                           : amx::DirectCodes::none;
  }
}

// Scales and biases of groups [g0, g0 + count) (32 elements each) of a GGUF row, so that the
// weights are scale · q + bias for the codes q that codes_w_direct writes: the products below
// are exact in f32, as the codec's d · sc and dmin · m are. The switch sits outside the loops
// and a K-quant super-block's d and dmin are read once for its sub-blocks.
void gguf_row_scales(Scheme s, const uint8_t* row, int64_t g0, int64_t count, float* scale,
                     float* bias) {
  namespace gg = codec::gguf;
  const auto f16 = [](const uint8_t* p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return f16_bits_to_f32(h);
  };
  // Blocks of 32: f16 d at the block's start, (q4_1 / q5_1) f16 m after it.
  const auto blocks = [&](int64_t block, float bias_times_d, bool with_m) {
    for (int64_t i = 0; i < count; ++i) {
      const uint8_t* b = row + (g0 + i) * block;
      scale[i] = f16(b);
      bias[i] = with_m ? f16(b + 2) : bias_times_d * scale[i];
    }
  };
  switch (s) {
    case Scheme::q4_0:
      return blocks(sizeof(gg::block_q4_0), -8.0f, false);
    case Scheme::q5_0:
      return blocks(sizeof(gg::block_q5_0), -16.0f, false);
    case Scheme::q4_1:
      return blocks(sizeof(gg::block_q4_1), 0.0f, true);
    case Scheme::q5_1:
      return blocks(sizeof(gg::block_q5_1), 0.0f, true);
    case Scheme::q8_0:
      return blocks(sizeof(gg::block_q8_0), 0.0f, false);
    case Scheme::q3_K:  // d for each sub-block (its scales are in the codes), no bias
      for (int64_t i = 0; i < count; ++i) {
        scale[i] = f16(row + (g0 + i) / 8 * sizeof(gg::block_q3_K) + offsetof(gg::block_q3_K, d));
        bias[i] = 0.0f;
      }
      return;
    default: {  // q4_K, q5_K: sub-block g % 8 of super-block g / 8
      const int64_t block = s == Scheme::q4_K ? sizeof(gg::block_q4_K) : sizeof(gg::block_q5_K);
      for (int64_t i = 0; i < count;) {
        const int64_t g = g0 + i;
        const uint8_t* b = row + g / 8 * block;
        const float d = f16(b), dmin = f16(b + 2);
        for (int j = static_cast<int>(g % 8); j < 8 && i < count; ++j, ++i) {
          uint8_t sc, mn;
          // q5_K's scales sit where q4_K's do.
          static_assert(offsetof(gg::block_q4_K, scales) == offsetof(gg::block_q5_K, scales));
          gg::get_scale_min_k4(j, b + offsetof(gg::block_q4_K, scales), &sc, &mn);
          scale[i] = d * static_cast<float>(sc);
          bias[i] = -(dmin * static_cast<float>(mn));
        }
      }
      return;
    }
  }
}

// The AMX codes path (amx_gemm.hpp kCodeXPlanes) where amx_codes_pays (affine, and the GGUF
// blocks of 32 with f32 x; x_planes as x's dtype gives them). Per task (kAmxN rows of W) and K
// block: the codes q written from storage (4/8-bit affine, GGUF) or decoded by the engine from a
// copy of the plan whose scales are ones and biases zeros, the block's scales and biases as f32
// for the AVX side (GGUF: gguf_row_scales); then amx::gemm_codes over every row of x.
void amx_codes_tiled(const IsaKernels& kr, const WeightPlan& w, const float* x, int64_t m, float* y,
                     int threads, int x_planes) {
  const int workers = workers_for(threads, w.n * w.k * m);
  const amx::DirectCodes direct = direct_codes(w);
  const bool gguf = direct != amx::DirectCodes::none && direct != amx::DirectCodes::u4 &&
                    direct != amx::DirectCodes::u8;
  // The GGUF groups are blocks of 32, or the K-quants' sub-blocks of 32.
  const int64_t K = w.k, G = gguf ? amx::kStep : w.group, ng = K / G, ks = K / amx::kStep,
                gsteps = G / amx::kStep;
  const int64_t mp = round_up(m, amx::kBlock);
  std::unique_ptr<uint16_t[]> xp(
      new uint16_t[static_cast<std::size_t>(amx::x_elems(m, K, x_planes))]);
  Buffer xsum(ng * mp);  // [g][m]: Σ x over group g (zero past m), for the biases
  std::atomic<bool> x_nonfinite{false};
  parallel_for(mp / amx::kBlock, workers, [&](int64_t b, int) {
    if (amx::prep_x_block(x, K, m, K, b, x_planes, false, xp.get())) x_nonfinite = true;
    for (int64_t i = b * amx::kBlock; i < (b + 1) * amx::kBlock; ++i)
      for (int64_t g = 0; g < ng; ++g) {
        double s = 0;
        if (i < m)
          for (int64_t k = g * G; k < (g + 1) * G; ++k) s += x[i * K + k];
        xsum.get()[g * mp + i] = static_cast<float>(s);
      }
  });
  if (x_nonfinite) {  // an infinity would meet the zero planes (amx_gemm.hpp): the f32 path
    tiled(kr, w, x, K, m, y, w.n, threads);
    return;
  }
  // 4/8-bit affine codes and the GGUF blocks go into the tiles as they are stored (no decode to
  // f32; for GGUF, the only way: its scales sit in the blocks).
  // K block: x's planes over it (2 bytes an element, row and plane) kept to ~768 KB, so they
  // stay in L2 across the tasks (f32 x at M = 512 with 1024 ran 0.8-0.95x the tiled path).
  const int64_t kc_rows =
      std::max<int64_t>(G, std::min<int64_t>(kAmxK, 393216 / (mp * x_planes)) / G * G);
  const int64_t kc = std::min(kc_rows, K), nc = kAmxN, chunk = kr.pack_chunk, gb = kc / G;
  // The unit plan's scales and biases (the affine widths decoded by the engine), one per (row of
  // a task, group).
  const std::size_t units =
      direct == amx::DirectCodes::none ? static_cast<std::size_t>(nc * ng) : 0;
  const std::vector<float> ones(units, 1.0f), zeros(units, 0.0f);
  const int64_t tasks = (w.n + nc - 1) / nc;
  const int used = static_cast<int>(std::min<int64_t>(workers, tasks));
  const int64_t mp2 = round_up(mp, 2 * amx::kBlock);  // the sums, blocked by 32 rows of x
  struct Scratch {
    std::unique_ptr<uint16_t[]> wp;
    Buffer f32, ct, sb;
  };
  std::vector<Scratch> scratch;
  for (int i = 0; i < used; ++i)
    scratch.push_back({std::unique_ptr<uint16_t[]>(new uint16_t[static_cast<std::size_t>(nc * kc)]),
                       Buffer(amx::kBlock * chunk), Buffer(nc * mp2), Buffer(2 * nc * gb)});
  std::vector<int64_t> nonfinite_tasks;  // scales or codes not finite: the f32 path
  nonfinite_tasks.reserve(static_cast<std::size_t>(tasks));
  std::mutex nonfinite_mutex;
  parallel_for(tasks, used, [&](int64_t t, int worker) {
    Scratch& sc = scratch[static_cast<std::size_t>(worker)];
    const int64_t n0 = t * nc, rows = std::min(nc, w.n - n0);
    const int64_t w_pad = round_up(rows, 2 * amx::kBlock);
    WeightPlan u = w;  // the task's rows from 0, unit scales
    u.codes = w.codes + n0 * w.row_bytes;
    u.tail_row = w.tail_row - n0;
    u.scale_dtype = DType::f32;
    u.scales = reinterpret_cast<const uint8_t*>(ones.data());
    u.biases = reinterpret_cast<const uint8_t*>(zeros.data());
    std::fill(sc.ct.get(), sc.ct.get() + nc * mp2, 0.0f);
    float* sv = sc.sb.get();
    float* bv = sv + nc * gb;
    bool bad = false;
    for (int64_t k0 = 0; k0 < K && !bad; k0 += kc) {
      const int64_t kcp = std::min(kc, K - k0), kcs = kcp / amx::kStep, g0 = k0 / G;
      // The block's scales and biases (zero past the task's rows), as the decode takes them.
      const int64_t gc = kcp / G;
      for (int64_t r = 0; r < w_pad; ++r) {
        float* s = sv + r * gb;
        float* b = bv + r * gb;
        if (r >= rows) {
          std::fill(s, s + gc, 0.0f);
          std::fill(b, b + gc, 0.0f);
          continue;
        }
        if (gguf) {
          gguf_row_scales(w.scheme, w.codes + (n0 + r) * w.row_bytes, g0, gc, s, b);
        } else {
          for (int64_t g = 0; g < gc; ++g) {
            const std::size_t i = static_cast<std::size_t>((n0 + r) * ng + g0 + g);
            s[g] = dense::load(w.scales, w.scale_dtype, i);
            b[g] = dense::load(w.biases, w.scale_dtype, i);
          }
        }
        for (int64_t g = 0; g < gc; ++g) bad |= !std::isfinite(s[g]) || !std::isfinite(b[g]);
      }
      for (int64_t r0 = 0; r0 < w_pad && !bad; r0 += amx::kBlock) {
        const int64_t rr = std::clamp<int64_t>(rows - r0, 0, amx::kBlock);
        if (direct != amx::DirectCodes::none) {
          amx::codes_w_direct(direct, rr > 0 ? w.codes + (n0 + r0) * w.row_bytes : w.codes,
                              w.row_bytes, rr, k0, kcp, sc.wp.get(), kcs, r0 / amx::kBlock, 0);
          continue;
        }
        for (int64_t kb = 0; kb < kcp; kb += chunk) {
          const int64_t cols = std::min(chunk, kcp - kb);
          if (rr > 0) kr.decode_nk(u, r0, rr, k0 + kb, cols, sc.f32.get(), chunk);
          bad |= amx::codes_w(sc.f32.get(), chunk, rr, cols, sc.wp.get(), kcs, r0 / amx::kBlock,
                              kb / amx::kStep);
        }
      }
      if (!bad)
        amx::gemm_codes(sc.wp.get(), kcs, w_pad, xp.get(), x_planes, ks, mp, k0 / amx::kStep,
                        gsteps, sv, bv, gb, xsum.get() + g0 * mp, sc.ct.get(), nc);
    }
    if (bad) {
      const std::lock_guard<std::mutex> lock(nonfinite_mutex);
      nonfinite_tasks.push_back(t);
      return;
    }
    const float* ct = sc.ct.get();
    for (int64_t i = 0; i < m; ++i) {
      const float* block = ct + i / 32 * nc * 32 + i % 32;
      for (int64_t j = 0; j < rows; ++j) y[i * w.n + n0 + j] = block[j * 32];
    }
  });
  f32_tasks(kr, w, x, m, y, nonfinite_tasks, used);
}
#endif

// W [K, N] with a pack (the [N, K] matrix Wᵀ, cpu/pack.hpp) at M = 1..kGemvMaxRows: the packed
// [N, K] GEMV, which reads x as integer planes. False, with nothing written, when this level's
// kernels take no planes or a row of x cannot be split (both would read the [N, K] buffers that
// a [K, N] matrix does not have): the [K, N] kernels run instead.
bool gemv_kn_packed(const IsaKernels& kr, const WeightPlan& plan, const float* x, int64_t m,
                    float* y, int threads) {
  WeightPlan w = plan;
  w.layout = Layout::nk;
  w.quad_pairs = m == 1;  // as gemv_nk
  w.int8_x = false;
  const int64_t float_xs = kr.gemv_xs_count(w);
  w.int8_x = int8_active();
  const int64_t n = kr.gemv_xs_count(w);
  if (n == float_xs) return false;
  Buffer xp(w.k + kGemvXPad), xs(n);
  for (int64_t i = 0; i < m; ++i) {
    kr.gemv_prep(w, x + i * w.k, xp.get(), xs.get());
    if (xs.get()[n - 1] != 1.0f) return false;  // the planes' last entry says
  }
  if (m == 1)
    gemv_nk(kr, w, x, y, threads);
  else
    gemv_nk_multi(kr, w, x, m, y, threads);
  return true;
}

void run(const IsaKernels& kr, Path path, const WeightPlan& w, const float* x, int64_t m, float* y,
         int threads, int x_planes) {
  if (w.layout == Layout::kn && w.pack != nullptr) {
    if (path == Path::gemv && m <= kGemvMaxRows && gemv_kn_packed(kr, w, x, m, y, threads)) return;
    WeightPlan u = w;
    u.pack = nullptr;  // the [K, N] kernels read the matrix itself
    run(kr, path, u, x, m, y, threads, x_planes);
    return;
  }
#if defined(QUANTA_CPU_X86)
  // Path::amx, and the grouped experts' (Path::gemv) rows past the fused range where AMX pays.
  const bool amx_path = path == Path::amx || (path == Path::gemv && m >= kAmxMinRows);
  if (amx_path && &kr == &kAvx512Kernels && amx_active()) {
    const DType xt = x_planes == 0 ? DType::f32 : x_planes == 1 ? DType::bf16 : DType::f16;
    if (amx_codes_pays(w.scheme, w.group, w.layout, m, xt)) {
      amx_codes_tiled(kr, w, x, m, y, threads, x_planes == 0 ? amx::kCodeXPlanes : x_planes);
      return;
    }
    // W exact in one plane (amx_one_plane_w): f32 x in three planes against it, as on the codes
    // path.
    const bool one_plane = amx_one_plane_w(w.scheme);
    if (x_planes > 0 || one_plane) {
      amx_tiled(kr, w, x, m, y, threads, x_planes > 0 ? x_planes : amx::kCodeXPlanes,
                one_plane ? 1 : amx::kWPlanes);
      return;
    }
  }
#endif
  if (path == Path::amx) path = Path::tiled;
  if (path == Path::gemv && w.layout == Layout::kn) {
    gemv_kn(kr, w, x, m, y, threads);
    return;
  }
  if (m == 1 && path == Path::gemv) {
    gemv_nk(kr, w, x, y, threads);
    return;
  }
  if (path == Path::gemv && w.layout == Layout::nk && m <= kGemvMaxRows) {
    gemv_nk_multi(kr, w, x, m, y, threads);
    return;
  }
  tiled(kr, w, x, w.k, m, y, w.n, threads);
}

// Rows of a dense view as f32 (in parallel for large inputs).
void to_f32(const void* src, DType t, int64_t rows, int64_t cols, float* dst, int threads) {
  parallel_for(rows, workers_for(threads, rows * cols), [&](int64_t r, int) {
    const auto base = static_cast<std::size_t>(r * cols);
    for (int64_t c = 0; c < cols; ++c)
      dst[base + static_cast<std::size_t>(c)] =
          dense::load(src, t, base + static_cast<std::size_t>(c));
  });
}

}  // namespace

bool avx2_int8_format(Scheme s, int bits) {
  return (s == Scheme::affine && bits >= 2 && bits <= 6) || s == Scheme::q4_0 ||
         s == Scheme::q4_1 || s == Scheme::q5_0 || s == Scheme::q5_1 || s == Scheme::mxfp4 ||
         s == Scheme::nvfp4;
}

bool avx2_int8_gemv(const WeightPlan& w) {
  return w.pack != nullptr && avx2_int8_format(w.scheme, w.bits);
}

bool kquant_scheme(Scheme s) {
  return s == Scheme::q2_K || s == Scheme::q3_K || s == Scheme::q4_K || s == Scheme::q5_K ||
         s == Scheme::q6_K;
}

bool affine_planes_gemv(Scheme s, int64_t k) {
  constexpr int64_t kBlock = 128;  // vnni::kAffineBlock, pack.hpp kPackBlock
  static_assert(kBlock == kPackBlock);
  const bool fits = s == Scheme::affine || s == Scheme::q4_0 || s == Scheme::q4_1 ||
                    s == Scheme::q5_0 || s == Scheme::q5_1 || s == Scheme::q8_0 ||
                    s == Scheme::mxfp4 || s == Scheme::nvfp4;
  return fits && k % kBlock == 0;
}

int64_t fused_max_rows(const Format& f, Layout layout, int64_t k, Isa isa) {
  // [K, N]: two passes of kKnMaxRows rows of x ran M = 5..8 1.3-2.9x faster than the tiled
  // path; at M = 12..16 the two were within this VM's spread (docs/perf-cpu.md).
  if (layout == Layout::kn) return 2 * kKnMaxRows;
  switch (f.scheme) {
    case Scheme::q3_K:  // tiles of these cost the most to decode (high-bit planes)
    case Scheme::q5_K:
    case Scheme::q6_K:
      return 8;
    default:
      // Two passes of the VNNI GEMV (x as integer planes) against the tiled path at M = 5..8:
      // 1.2-2.0x (Zen 4, 16384 and 4096 x 14336, docs/perf-cpu.md).
      return isa == Isa::avx512 && vnni_active() && affine_planes_gemv(f.scheme, k) ? 8 : 4;
  }
}

int64_t packed_min_rows(const Format& f, Layout layout, Isa isa) {
  return pack_min_rows(isa_kernels(isa), f.scheme, layout);
}

const IsaKernels& isa_kernels(Isa isa) {
  switch (isa) {
#if defined(QUANTA_CPU_X86)
    case Isa::avx512:
      return kAvx512Kernels;
    case Isa::avx2:
      return kAvx2Kernels;
#endif
    default:
      return kScalarKernels;
  }
}

void matmul_simd(ConstMatrixView x, const QuantizedMatrix& w, const int32_t* ids, MatrixView y,
                 const Context& ctx, Isa isa, Path path) {
  const IsaKernels& kr = isa_kernels(isa);
  const int threads = resolve_threads(ctx.threads);
  const int64_t M = x.rows, K = w.k, N = w.n;
  std::unique_ptr<Buffer> xbuf, ybuf;
  const float* X = static_cast<const float*>(x.data);
  if (x.dtype != DType::f32) {
    xbuf = std::make_unique<Buffer>(M * K);
    to_f32(x.data, x.dtype, M, K, xbuf->get(), threads);
    X = xbuf->get();
  }
  float* Y = static_cast<float*>(y.data);
  if (y.dtype != DType::f32) {
    ybuf = std::make_unique<Buffer>(M * N);
    Y = ybuf->get();
  }
#if defined(QUANTA_CPU_X86)
  const int x_planes = amx::x_planes_for(x.dtype);
#else
  const int x_planes = 0;
#endif
  if (ids == nullptr) {
    PlannedMatrix pm = make_plan(w.expert(0), pack_for_rows(w, M), 0);
    pm.plan.x_bf16 = x.dtype == DType::bf16;
    run(kr, path, pm.plan, X, M, Y, threads, x_planes);
  } else {
    // Rows grouped by expert: each expert's weights stream once for all of its rows.
    std::vector<std::vector<int64_t>> rows(static_cast<std::size_t>(w.batch));
    for (int64_t m = 0; m < M; ++m) rows[static_cast<std::size_t>(ids[m])].push_back(m);
    for (int64_t e = 0; e < w.batch; ++e) {
      const auto& r = rows[static_cast<std::size_t>(e)];
      if (r.empty()) continue;
      const auto me = static_cast<int64_t>(r.size());
      Buffer xe(me * K), ye(me * N);
      for (int64_t i = 0; i < me; ++i)
        std::memcpy(xe.get() + i * K, X + r[static_cast<std::size_t>(i)] * K,
                    static_cast<std::size_t>(K) * sizeof(float));
      PlannedMatrix pm = make_plan(w.expert(e), pack_for_rows(w, me), e);
      pm.plan.x_bf16 = x.dtype == DType::bf16;
      run(kr, path, pm.plan, xe.get(), me, ye.get(), threads, x_planes);
      for (int64_t i = 0; i < me; ++i)
        std::memcpy(Y + r[static_cast<std::size_t>(i)] * N, ye.get() + i * N,
                    static_cast<std::size_t>(N) * sizeof(float));
    }
  }
  if (ybuf) {
    for (int64_t i = 0; i < M * N; ++i)
      dense::store(y.data, y.dtype, static_cast<std::size_t>(i), Y[i]);
  }
}

void dequantize_simd(const QuantizedMatrix& w, MatrixView out, const Context& ctx, Isa isa) {
  const IsaKernels& kr = isa_kernels(isa);
  const int threads = resolve_threads(ctx.threads);
  constexpr int64_t kRowsPerTask = 16;
  const std::size_t expert_bytes =
      static_cast<std::size_t>(w.n * w.k) * static_cast<std::size_t>(dtype_size(out.dtype));
  for (int64_t e = 0; e < w.batch; ++e) {
    const PlannedMatrix pm = make_plan(w.expert(e));
    void* dst = static_cast<std::byte*>(out.data) + static_cast<std::size_t>(e) * expert_bytes;
    parallel_for((w.n + kRowsPerTask - 1) / kRowsPerTask, workers_for(threads, w.n * w.k),
                 [&](int64_t t, int) {
                   const int64_t n0 = t * kRowsPerTask;
                   kr.dequantize_nk(pm.plan, n0, std::min(kRowsPerTask, w.n - n0), dst, out.dtype);
                 });
  }
}

}  // namespace quanta::cpu
