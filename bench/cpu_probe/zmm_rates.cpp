// quanta_zmm_rates: what one core issues per cycle of the 512-bit instructions the VNNI kernels
// are made of, alone and beside vpdpbusd, so a kernel's instruction count can be set against
// its measured time (docs/perf-cpu.md, "What one Zen 4 core issues"). Each case runs eight
// independent chains (no latency bound for ops of latency <= 8) for a fixed number of rounds;
// the clock comes from a chain of dependent 64-bit multiplies (3 cycles each on current x86
// cores; a chain of adds of an immediate ran 2-4x the clock on the Emerald Rapids VM, whose
// renamer folds them).
// Usage: quanta_zmm_rates [--rounds N]   (pin it: taskset -c 1 quanta_zmm_rates)
#include <immintrin.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

alignas(64) uint8_t g_buffer[64 * 32];

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Cycles per second from 4 dependent imuls a round (latency 3).
double clock_hz() {
  constexpr long kRounds = 100'000'000;
  uint64_t x = 3;
  const auto t0 = std::chrono::steady_clock::now();
  for (long i = 0; i < kRounds; ++i)
    __asm__ volatile("imul %0, %0\n\timul %0, %0\n\timul %0, %0\n\timul %0, %0" : "+r"(x));
  return 12.0 * kRounds / seconds_since(t0);
}

// Seconds per round of op(a[i], i) and other(b[i], i) over eight chains each (other may do
// nothing). The asm takes every chain's value each round, so no round can be left out.
template <class Op, class Other>
double time_rounds(long rounds, Op op, Other other) {
  __m512i a[8], b[8];
  for (int i = 0; i < 8; ++i) a[i] = b[i] = _mm512_set1_epi32(i + 1);
  const auto t0 = std::chrono::steady_clock::now();
  for (long t = 0; t < rounds; ++t) {
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) {
      a[i] = op(a[i], i);
      b[i] = other(b[i], i);
    }
    __asm__ volatile("" ::"v"(a[0]), "v"(a[1]), "v"(a[2]), "v"(a[3]), "v"(a[4]), "v"(a[5]),
                     "v"(a[6]), "v"(a[7]));
    __asm__ volatile("" ::"v"(b[0]), "v"(b[1]), "v"(b[2]), "v"(b[3]), "v"(b[4]), "v"(b[5]),
                     "v"(b[6]), "v"(b[7]));
  }
  return seconds_since(t0) / rounds;
}

// Operands as functions, not globals: a global would run AVX-512 code before main's CPUID check.
__m512i kb() {
  return _mm512_set1_epi32(0x03010207);
}
__m512i kc() {
  return _mm512_set1_epi32(0x05020301);
}

__m512 as_ps(__m512i v) {
  return _mm512_castsi512_ps(v);
}
__m512i as_si(__m512 v) {
  return _mm512_castps_si512(v);
}
const uint8_t* buffer_at(int i, int offset) {
  const uint8_t* p = g_buffer + 64 * i + offset;
  __asm__ volatile("" : "+r"(p));  // an address the compiler cannot hoist
  return p;
}

// Prints cycles per instruction of op alone and per pair of op and one vpdpbusd.
struct Meter {
  long rounds;
  double hz;
  template <class Op>
  void operator()(const char* name, Op op) const {
    auto none = [](__m512i v, int) { return v; };
    auto dp = [](__m512i v, int) { return _mm512_dpbusd_epi32(v, kb(), kc()); };
    time_rounds(rounds / 10, op, none);  // warm up
    const double alone = time_rounds(rounds, op, none) * hz / 8;
    const double paired = time_rounds(rounds, op, dp) * hz / 8;
    std::printf("%-16s %8.2f %14.2f\n", name, alone, paired);
  }
};

}  // namespace

int main(int argc, char** argv) {
  long rounds = 20'000'000;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) {
      rounds = std::atol(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: quanta_zmm_rates [--rounds N]\n");
      return 2;
    }
  }
  if (rounds < 1000) {
    std::fprintf(stderr, "quanta_zmm_rates: --rounds must be >= 1000\n");
    return 2;
  }
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx512vnni") || !__builtin_cpu_supports("avx512vbmi") ||
      !__builtin_cpu_supports("gfni")) {
    std::printf(
        "quanta_zmm_rates: this CPU lacks AVX-512 VNNI, VBMI or GFNI; nothing to measure\n");
    return 0;
  }
  const double hz = clock_hz();
  std::printf("clock %.2f GHz (dependent imuls); cycles per instruction over 8 chains\n", hz / 1e9);
  std::printf("%-16s %8s %14s\n", "instruction", "alone", "+ vpdpbusd");
  const Meter measure{rounds, hz};
  // clang-format off
  measure("vpaddd", [](__m512i v, int) { return _mm512_add_epi32(v, kb()); });
  measure("vpxord", [](__m512i v, int) { return _mm512_xor_si512(v, kb()); });
  measure("vpsrlw imm", [](__m512i v, int) { return _mm512_srli_epi16(v, 2); });
  measure("vpternlogd", [](__m512i v, int) { return _mm512_ternarylogic_epi32(v, kb(), kc(), 0xCA); });
  measure("vpdpbusd", [](__m512i v, int) { return _mm512_dpbusd_epi32(v, kb(), kc()); });
  measure("vpdpwssd", [](__m512i v, int) { return _mm512_dpwssd_epi32(v, kb(), kc()); });
  measure("vfmadd231ps", [](__m512i v, int) { return as_si(_mm512_fmadd_ps(as_ps(v), as_ps(kb()), as_ps(kc()))); });
  measure("vmulps", [](__m512i v, int) { return as_si(_mm512_mul_ps(as_ps(v), as_ps(kb()))); });
  measure("vaddps", [](__m512i v, int) { return as_si(_mm512_add_ps(as_ps(v), as_ps(kb()))); });
  measure("vcvtdq2ps", [](__m512i v, int) { return as_si(_mm512_cvtepi32_ps(v)); });
  measure("vcvtph2ps", [](__m512i v, int) { return as_si(_mm512_cvtph_ps(_mm512_castsi512_si256(v))); });
  measure("vpmulld", [](__m512i v, int) { return _mm512_mullo_epi32(v, kb()); });
  measure("vpshufb", [](__m512i v, int) { return _mm512_shuffle_epi8(v, kb()); });
  measure("vpermb", [](__m512i v, int) { return _mm512_permutexvar_epi8(v, kb()); });
  measure("vpermt2b", [](__m512i v, int) { return _mm512_permutex2var_epi8(v, kb(), kc()); });
  measure("vpermt2w", [](__m512i v, int) { return _mm512_permutex2var_epi16(v, kb(), kc()); });
  measure("vpmultishiftqb", [](__m512i v, int) { return _mm512_multishift_epi64_epi8(kb(), v); });
  measure("vgf2p8affineqb", [](__m512i v, int) { return _mm512_gf2p8affine_epi64_epi8(v, kb(), 0); });
  measure("vpaddb masked", [](__m512i v, int) { return _mm512_mask_add_epi8(v, 0x5555555555555555ull, v, kb()); });
  measure("load (aligned)", [](__m512i v, int i) { return _mm512_add_epi32(v, _mm512_load_si512(buffer_at(i, 0))); });
  measure("load (2 lines)", [](__m512i v, int i) { return _mm512_add_epi32(v, _mm512_loadu_si512(buffer_at(i, 8))); });
  // clang-format on
  std::printf(
      "('+ vpdpbusd': cycles per pair of this instruction and one vpdpbusd;\n"
      " vpdpbusd alone sets the floor of that column)\n");
  return 0;
}
