// The machine's DRAM read roof: every thread streams its share of one large buffer with
// vector loads folded by max (a read-only kernel: no stores, nothing for the compiler to drop).
#include "roof.hpp"

// GCC 12 flags the _mm512_undefined_* placeholders inside the intrinsic headers.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <new>
#include <vector>

#include "cpu/isa.hpp"
#include "cpu/pool.hpp"

namespace quanta::probe {

namespace {

// Software prefetch: kPf 0 none, 1 to L1 4 KB ahead once per 256 bytes (3-8 GB/s over the
// hardware prefetchers alone on the Zen 5 VM, a few GB/s slower on the Zen 4 one), 2 to L2 12 KB
// ahead for every line (the Zen 4 VM's fastest by 0-2 GB/s, like the GEMV's far prefetch).
// read_roof takes the fastest, so no kernel reads faster than the roof by its prefetch choice.
template <int kPf>
inline void roof_prefetch(const float* p) {
  const char* c = reinterpret_cast<const char*>(p);
  if constexpr (kPf == 1) _mm_prefetch(c + 4096, _MM_HINT_T0);
  if constexpr (kPf == 2)
    for (int l = 0; l < 256; l += 64) _mm_prefetch(c + l + 12288, _MM_HINT_T1);
}

template <int kPf>
__attribute__((target("avx512f"))) float max_avx512(const float* p, std::size_t n) {
  __m512 a0 = _mm512_set1_ps(-1e30f), a1 = a0, a2 = a0, a3 = a0;
  for (std::size_t i = 0; i + 64 <= n; i += 64) {
    roof_prefetch<kPf>(p + i);
    a0 = _mm512_max_ps(a0, _mm512_load_ps(p + i));
    a1 = _mm512_max_ps(a1, _mm512_load_ps(p + i + 16));
    a2 = _mm512_max_ps(a2, _mm512_load_ps(p + i + 32));
    a3 = _mm512_max_ps(a3, _mm512_load_ps(p + i + 48));
  }
  return _mm512_reduce_max_ps(_mm512_max_ps(_mm512_max_ps(a0, a1), _mm512_max_ps(a2, a3)));
}

template <int kPf>
__attribute__((target("avx2"))) float max_avx2(const float* p, std::size_t n) {
  __m256 a0 = _mm256_set1_ps(-1e30f), a1 = a0, a2 = a0, a3 = a0;
  for (std::size_t i = 0; i + 32 <= n; i += 32) {
    if (i % 64 == 0) roof_prefetch<kPf>(p + i);
    a0 = _mm256_max_ps(a0, _mm256_load_ps(p + i));
    a1 = _mm256_max_ps(a1, _mm256_load_ps(p + i + 8));
    a2 = _mm256_max_ps(a2, _mm256_load_ps(p + i + 16));
    a3 = _mm256_max_ps(a3, _mm256_load_ps(p + i + 24));
  }
  float t[8];
  _mm256_storeu_ps(t, _mm256_max_ps(_mm256_max_ps(a0, a1), _mm256_max_ps(a2, a3)));
  return *std::max_element(t, t + 8);
}

template <int>
float max_scalar(const float* p, std::size_t n) {
  float m = -1e30f;
  for (std::size_t i = 0; i < n; ++i) m = std::max(m, p[i]);
  return m;
}

using Fold = float (*)(const float*, std::size_t);

// The widest fold the CPU runs, with software-prefetch choice kPf.
template <int kPf>
Fold fold_for(const cpu::CpuFeatures& f) {
  return f.avx512f ? max_avx512<kPf> : f.avx2 ? max_avx2<kPf> : max_scalar<kPf>;
}

}  // namespace

RoofBuffer::RoofBuffer(std::size_t bytes) : n_(bytes / sizeof(float) / 1024 * 1024) {
  p_ = static_cast<float*>(::operator new[](n_ * sizeof(float), std::align_val_t(64)));
  cpu::parallel_for(64, cpu::resolve_threads(0), [&](int64_t t, int) {
    const std::size_t len = n_ / 64, b = len * static_cast<std::size_t>(t);
    for (std::size_t i = b; i < b + len; ++i) p_[i] = static_cast<float>(i % 1000);
  });
}

RoofBuffer::~RoofBuffer() {
  ::operator delete[](p_, std::align_val_t(64));
}

double roof_pass(std::size_t bytes, int threads, int loop, const RoofBuffer& rb) {
  const std::size_t n = std::min(bytes / sizeof(float) / 1024 * 1024, rb.floats());
  const float* buf = rb.data();
  const cpu::CpuFeatures& f = cpu::cpu_features();
  const Fold fold = loop == 1 ? fold_for<1>(f) : loop == 2 ? fold_for<2>(f) : fold_for<0>(f);
  static volatile float sink = 0;
  std::vector<float> part(static_cast<std::size_t>(threads));
  const auto t0 = std::chrono::steady_clock::now();
  cpu::parallel_for(threads, threads, [&](int64_t t, int) {
    const std::size_t len = n / static_cast<std::size_t>(threads);
    part[static_cast<std::size_t>(t)] = fold(buf + len * static_cast<std::size_t>(t), len);
  });
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  sink = sink + part[0];
  return static_cast<double>(n * sizeof(float)) / s / 1e9;
}

RoofResult read_roof(std::size_t bytes, int threads, int reps, const RoofBuffer& rb) {
  // The three loops in turn, each rep, so a slow phase of the shared machine hits them alike.
  // The fastest median wins: the best of several noisy passes would pick the machine's fast
  // phases, while a kernel's figure is a median of single runs.
  std::vector<double> gbs[3];
  for (int r = 0; r < reps; ++r)
    for (int loop = 0; loop < 3; ++loop) gbs[loop].push_back(roof_pass(bytes, threads, loop, rb));
  RoofResult res;
  for (int loop = 0; loop < 3; ++loop) {
    std::sort(gbs[loop].begin(), gbs[loop].end());
    const double med = gbs[loop][gbs[loop].size() / 2];
    if (med > res.median_gbs) res = {med, gbs[loop].back(), loop, {}};
  }
  const cpu::CpuFeatures& f = cpu::cpu_features();
  res.isa = f.avx512f ? "avx512" : f.avx2 ? "avx2" : "scalar";
  return res;
}

}  // namespace quanta::probe
