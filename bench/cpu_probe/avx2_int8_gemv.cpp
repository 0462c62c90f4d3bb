// quanta_avx2_int8_gemv: a prototype of the GEMV the AVX2 level lacks (docs/PERF.md, "an
// AVX2-only VM"): GGUF q4_0 rows against x as one int8 plane per 32-element block (llama.cpp's
// q8_0 activations), u8 x s8 products by vpmaddubsw + vpmaddwd, f32 sums. It measures how fast
// such a kernel reads on this CPU beside a streaming read of the same threads, before any of it
// goes into the engine. One int8 plane is not f32-accurate (quanta's planes are two or three):
// the rate, not the result, is the point; the result is still checked against a scalar loop on
// the same quantized x, so a wrong kernel cannot report a rate.
// Usage: quanta_avx2_int8_gemv [--n 16384] [--k 14336] [--threads 2] [--reps 9]
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

namespace {

constexpr int kBlock = 32, kBlockBytes = 18;  // q4_0: f16 d, then 16 bytes of nibbles

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

template <class F>
void parallel(int threads, int64_t n, F f) {
  std::vector<std::thread> t;
  for (int i = 0; i < threads; ++i)
    t.emplace_back([&, i] { f(n * i / threads, n * (i + 1) / threads); });
  for (auto& x : t) x.join();
}

__attribute__((target("avx2,fma,f16c"))) float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// y[r] for rows [r0, r1): Σ_b d_b · dx_b · (Σ_j q_j · x_j − 8 Σ_j x_j) over the row's blocks.
__attribute__((target("avx2,fma,f16c"))) void gemv_rows(const uint8_t* w, const int8_t* xq,
                                                        const float* dx, const float* sx,
                                                        int64_t blocks, int64_t r0, int64_t r1,
                                                        float* y) {
  const __m128i low = _mm_set1_epi8(0x0F);
  const __m256i ones = _mm256_set1_epi16(1);
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* row = w + r * blocks * kBlockBytes;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    float off = 0.0f;
    for (int64_t b = 0; b < blocks; b += 2) {
      for (int u = 0; u < 2; ++u) {
        const uint8_t* blk = row + (b + u) * kBlockBytes;
        uint16_t h;
        std::memcpy(&h, blk, 2);
        const float d = _cvtsh_ss(h);
        const __m128i qs = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 2));
        const __m256i q =
            _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(qs, 4), low), _mm_and_si128(qs, low));
        const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + (b + u) * 32));
        const __m256i dot = _mm256_madd_epi16(_mm256_maddubs_epi16(q, xv), ones);
        const __m256 scale = _mm256_set1_ps(d * dx[b + u]);
        if (u == 0)
          acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), scale, acc0);
        else
          acc1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), scale, acc1);
        off = std::fma(d, sx[b + u], off);
      }
    }
    y[r] = hsum(_mm256_add_ps(acc0, acc1)) - 8.0f * off;
  }
}

// The same sums on a packed copy of the rows (as quanta::prepack lays rows out for the AVX-512
// kernels): each row's f16 scales apart from its codes, so eight scales convert in one
// instruction and two blocks' codes come in one 32-byte load. x's plane is permuted once per call
// to match: for blocks 2i and 2i+1, bytes [x0 0..15 | x1 0..15] then [x0 16..31 | x1 16..31], so
// the low nibbles of the 32 code bytes meet the first and the high nibbles the second.
__attribute__((target("avx2,fma,f16c"))) void gemv_rows_packed(const uint8_t* codes,
                                                               const uint16_t* scales,
                                                               const int8_t* xp, const float* dx,
                                                               const float* sx, int64_t blocks,
                                                               int64_t r0, int64_t r1, float* y) {
  const __m256i low = _mm256_set1_epi8(0x0F);
  const __m256i ones = _mm256_set1_epi16(1);
  const __m256i pair[4] = {
      _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1), _mm256_setr_epi32(2, 2, 2, 2, 3, 3, 3, 3),
      _mm256_setr_epi32(4, 4, 4, 4, 5, 5, 5, 5), _mm256_setr_epi32(6, 6, 6, 6, 7, 7, 7, 7)};
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* c = codes + r * blocks * 16;
    const uint16_t* sc = scales + r * blocks;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps(), off = _mm256_setzero_ps();
    for (int64_t b = 0; b < blocks; b += 8) {  // eight blocks: one conversion of their scales
      const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sc + b)));
      const __m256 ds = _mm256_mul_ps(d, _mm256_loadu_ps(dx + b));
      off = _mm256_fmadd_ps(d, _mm256_loadu_ps(sx + b), off);
#pragma GCC unroll 4
      for (int i = 0; i < 4; ++i) {  // blocks b + 2i, b + 2i + 1
        const __m256i q =
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(c + (b + 2 * i) * 16));
        const __m256i lo = _mm256_and_si256(q, low);
        const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), low);
        const int8_t* xb = xp + (b + 2 * i) * 32;
        const __m256i x0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb));
        const __m256i x1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb + 32));
        const __m256i dot = _mm256_add_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(lo, x0), ones),
                                             _mm256_madd_epi16(_mm256_maddubs_epi16(hi, x1), ones));
        const __m256 scale = _mm256_permutevar8x32_ps(ds, pair[i]);
        if (i % 2 == 0)
          acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), scale, acc0);
        else
          acc1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), scale, acc1);
      }
    }
    y[r] = hsum(_mm256_add_ps(acc0, acc1)) - 8.0f * hsum(off);
  }
}

// The streaming read the rows are set against: the same threads, 256-bit loads, OR-reduced.
__attribute__((target("avx2"))) uint64_t read_rows(const uint8_t* p, int64_t bytes) {
  __m256i a = _mm256_setzero_si256(), b = a;
  int64_t i = 0;
  for (; i + 64 <= bytes; i += 64) {
    a = _mm256_or_si256(a, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i)));
    b = _mm256_or_si256(b, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 32)));
  }
  a = _mm256_or_si256(a, b);
  return static_cast<uint64_t>(_mm256_extract_epi64(a, 0) ^ _mm256_extract_epi64(a, 3));
}

// binary16 to double without F16C (the check runs on any CPU this builds for).
double half_to_double(uint16_t h) {
  const int e = (h >> 10) & 0x1F, m = h & 0x3FF;
  const double v = e == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, e - 25);
  return h & 0x8000 ? -v : v;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int64_t n = 16384, k = 14336;
  int threads = 2, reps = 9;
  for (int i = 1; i < argc; i += 2) {
    if (i + 1 >= argc) {
      std::fprintf(stderr, "%s needs a value\n", argv[i]);
      return 2;
    }
    const long v = std::atol(argv[i + 1]);
    if (!std::strcmp(argv[i], "--n"))
      n = v;
    else if (!std::strcmp(argv[i], "--k"))
      k = v;
    else if (!std::strcmp(argv[i], "--threads"))
      threads = static_cast<int>(v);
    else if (!std::strcmp(argv[i], "--reps"))
      reps = static_cast<int>(v);
    else {
      std::fprintf(stderr, "unknown argument %s\n", argv[i]);
      return 2;
    }
  }
  if (n < 1 || k < 256 || k % 256 != 0 || threads < 1 || threads > 256 || reps < 1) {
    std::fprintf(stderr, "needs n >= 1, k a multiple of 256, threads 1..256, reps >= 1\n");
    return 2;
  }
  if (n > (int64_t{1} << 24) || k > (int64_t{1} << 24) || n * (k / kBlock) > (int64_t{1} << 28)) {
    std::fprintf(stderr, "n x k too large for this probe (at most 2^28 blocks of 32, ~4.8 GB)\n");
    return 2;
  }
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) {
    std::printf("this CPU has no AVX2 + FMA: nothing to measure\n");
    return 0;
  }
  const int64_t blocks = k / kBlock;
  const std::size_t bytes = static_cast<std::size_t>(n * blocks * kBlockBytes);
  std::vector<uint8_t> w(bytes);
  std::mt19937 rng(7);
  parallel(threads, static_cast<int64_t>(bytes), [&](int64_t a, int64_t b) {
    std::mt19937 g(static_cast<uint32_t>(a));
    for (int64_t i = a; i < b; ++i) w[i] = static_cast<uint8_t>(g());
  });
  for (int64_t i = 0; i < n * blocks; ++i) {  // finite positive scales: f16 exponent 10..15
    const uint16_t h = static_cast<uint16_t>(0x2800 | (rng() & 0x0FFF));
    std::memcpy(&w[i * kBlockBytes], &h, 2);
  }
  // x, then its int8 plane per block (round(x / dx), dx = max|x| / 127) and each block's Σq.
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(k), dx(blocks), sx(blocks);
  std::vector<int8_t> xq(k);
  for (float& v : x) v = normal(rng);
  for (int64_t b = 0; b < blocks; ++b) {
    float m = 0.0f;
    for (int j = 0; j < kBlock; ++j) m = std::max(m, std::fabs(x[b * kBlock + j]));
    dx[b] = m > 0.0f ? m / 127.0f : 1.0f;
    int s = 0;
    for (int j = 0; j < kBlock; ++j) {
      xq[b * kBlock + j] = static_cast<int8_t>(std::lrint(x[b * kBlock + j] / dx[b]));
      s += xq[b * kBlock + j];
    }
    sx[b] = dx[b] * static_cast<float>(s);
  }
  // The packed copy: codes [n][blocks][16], scales [n][blocks]; x permuted for two blocks a load.
  std::vector<uint8_t> pc(static_cast<std::size_t>(n * blocks * 16));
  std::vector<uint16_t> ps(static_cast<std::size_t>(n * blocks));
  for (int64_t i = 0; i < n * blocks; ++i) {
    std::memcpy(&ps[i], &w[i * kBlockBytes], 2);
    std::memcpy(&pc[i * 16], &w[i * kBlockBytes + 2], 16);
  }
  std::vector<int8_t> xp(k);
  for (int64_t b = 0; b < blocks; b += 2)
    for (int j = 0; j < 16; ++j) {
      xp[b * 32 + j] = xq[b * 32 + j];
      xp[b * 32 + 16 + j] = xq[(b + 1) * 32 + j];
      xp[b * 32 + 32 + j] = xq[b * 32 + 16 + j];
      xp[b * 32 + 48 + j] = xq[(b + 1) * 32 + 16 + j];
    }
  std::vector<float> y(n, std::nanf("")), yp(n, std::nanf(""));
  std::vector<double> t_gemv, t_packed, t_read;
  uint64_t sink = 0;
  for (int r = 0; r < reps; ++r) {
    double t0 = now();
    parallel(threads, n, [&](int64_t a, int64_t b) {
      gemv_rows(w.data(), xq.data(), dx.data(), sx.data(), blocks, a, b, y.data());
    });
    t_gemv.push_back(now() - t0);
    t0 = now();
    parallel(threads, n, [&](int64_t a, int64_t b) {
      gemv_rows_packed(pc.data(), ps.data(), xp.data(), dx.data(), sx.data(), blocks, a, b,
                       yp.data());
    });
    t_packed.push_back(now() - t0);
    t0 = now();
    std::vector<uint64_t> part(threads);
    parallel(threads, static_cast<int64_t>(bytes), [&](int64_t a, int64_t b) {
      part[static_cast<std::size_t>(a * threads / static_cast<int64_t>(bytes))] =
          read_rows(w.data() + a, (b - a) / 64 * 64);
    });
    t_read.push_back(now() - t0);
    for (uint64_t p : part) sink ^= p;
  }
  // The check: every 97th row against a scalar loop over the same quantized x (f64 sums).
  double worst = 0.0;
  for (int64_t r = 0; r < n; r += 97) {
    double want = 0.0, mag = 0.0;
    for (int64_t b = 0; b < blocks; ++b) {
      const uint8_t* blk = &w[(r * blocks + b) * kBlockBytes];
      uint16_t h;
      std::memcpy(&h, blk, 2);
      const double d = half_to_double(h);
      for (int j = 0; j < kBlock; ++j) {
        const int q = j < 16 ? (blk[2 + j] & 0x0F) : (blk[2 + j - 16] >> 4);
        const double term = d * (q - 8) * dx[b] * xq[b * kBlock + j];
        want += term;
        mag += std::fabs(term);
      }
    }
    for (float got : {y[r], yp[r]}) {
      const double err = std::fabs(got - want) / std::max(mag, 1e-30);
      if (!(err <= 1e-5)) worst = std::isnan(err) ? INFINITY : std::max(worst, err);
    }
  }
  const double gb = static_cast<double>(bytes) / 1e9;
  std::printf("q4_0 [%lld x %lld] %.1f MB, %d threads, median of %d (read check %llx)\n",
              static_cast<long long>(n), static_cast<long long>(k), gb * 1e3, threads, reps,
              static_cast<unsigned long long>(sink & 0xF));
  std::printf("streaming read: %.3f ms, %.2f GB/s\n", median(t_read) * 1e3, gb / median(t_read));
  std::printf("int8 gemv, q4_0 blocks: %.3f ms, %.2f GB/s, %.1f%% of the read\n",
              median(t_gemv) * 1e3, gb / median(t_gemv), 100.0 * median(t_read) / median(t_gemv));
  std::printf("int8 gemv, packed rows: %.3f ms, %.2f GB/s, %.1f%% of the read\n",
              median(t_packed) * 1e3, gb / median(t_packed),
              100.0 * median(t_read) / median(t_packed));
  if (worst > 0.0) {
    std::printf("CHECK FAILED: a row is off by %.3g (relative to its sum of |terms|)\n", worst);
    return 1;
  }
  std::printf("check: every 97th row of both matches the scalar loop within 1e-5\n");
  return 0;
}
