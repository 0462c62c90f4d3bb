// Which x86 vector ISA the CPU kernels use. Detected once from CPUID and XGETBV (the OS must
// save the wider register state, or the instructions fault even on a CPU that has them); a
// portable path needs nothing. Tests and benchmarks can cap the level (force_isa or the
// QUANTA_CPU_ISA environment variable) to run every path the machine supports.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace quanta::cpu {

// In increasing order: a level implies the ones below it.
enum class Isa : uint8_t {
  scalar = 0,  // portable C++, any CPU
  avx2 = 1,    // AVX2 + FMA + F16C (Haswell, Zen 1)
  avx512 = 2,  // AVX-512 F/BW/VL/DQ (Skylake-SP, Zen 4)
};

inline constexpr Isa kAllIsas[] = {Isa::scalar, Isa::avx2, Isa::avx512};

std::string_view isa_name(Isa isa);
std::optional<Isa> parse_isa(std::string_view name);

struct CpuFeatures {
  bool x86 = false;
  bool avx2 = false, fma = false, f16c = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false;
  bool avx512vnni = false, avx512vbmi = false, avx512bf16 = false, avx_vnni = false;
  bool gfni = false;  // GF(2^8) affine (EVEX forms with AVX-512)
  bool amx_tile = false, amx_int8 = false, amx_bf16 = false;
  bool os_avx = false;     // XCR0 saves YMM state
  bool os_avx512 = false;  // XCR0 saves opmask and ZMM state
  bool os_amx = false;     // XCR0 has tile state and Linux granted XTILEDATA (arch_prctl)
  int l1d_kb = 0;          // L1 data cache per core, KB (0: unknown)
  bool amd = false;        // vendor AuthenticAMD (the GEMV prefetch rule)
  std::string brand;
  std::string describe() const;  // "AMD EPYC: avx2 fma ... (best: avx512, L1D 32 KB)"
};

// Detected once, on first use; thread-safe.
const CpuFeatures& cpu_features();

// Whether this CPU and OS can run `isa` (and this build contains its kernels).
bool isa_supported(Isa isa);
Isa best_isa();

// The level the kernels use now: the forced level if any, else QUANTA_CPU_ISA (clamped to what
// the CPU supports; an unknown name is ignored), else best_isa().
Isa active_isa();

// Caps the level used from now on; nullopt returns to automatic. Throws quanta::Error if this
// CPU cannot run `isa`. Not meant to be flipped while other threads run matmuls.
void force_isa(std::optional<Isa> isa);

// Integer kernels inside the avx512 level (the K-quants' M = 1 GEMV with x split into integer
// planes, on AVX512-VNNI dot products, VBMI byte permutes and GFNI bit gathers): used where the
// CPU has all three and the level is avx512, unless QUANTA_CPU_VNNI=0 or disable_vnni(true) (tests
// run both paths).
bool vnni_active();
void disable_vnni(bool off);

// The avx2 level's integer GEMVs (on vpmaddubsw: x86/avx2_int8.hpp, packed 2-6-bit formats;
// x86/avx2_kquant.hpp, the K-quants): where the
// level is avx2, under the same switches as vnni_active() (QUANTA_CPU_VNNI=0, disable_vnni(true)
// turn off every integer GEMV). int8_active(): either one.
bool avx2_int8_active();
bool int8_active();

// Whether the avx2 level's packed GEMVs (x86/avx2_int8.hpp, x86/avx2_kquant.hpp) take AVX-VNNI's
// vpdpbusd in place of vpmaddubsw + vpmaddwd: where avx2_int8_active() and the CPU has AVX-VNNI
// (Intel from Alder Lake and Sapphire Rapids, AMD from Zen 5) or the build emulates it
// (QUANTA_EMULATE_AVX_VNNI, CI), when asked: QUANTA_CPU_AVX_VNNI=1 or force_avx_vnni(true). Off
// by default on real CPUs until the test suite has passed on one with the instruction (its one run
// there left tests unaccounted for: docs/PERF.md, twenty-fifth session); on by default in the
// emulating build. QUANTA_CPU_AVX_VNNI=0 or force_avx_vnni(false) turn it off; nullopt returns to
// the default.
bool avx_vnni_active();
void force_avx_vnni(std::optional<bool> on);

// The tiled path's AMX-BF16 tile products (src/cpu/x86/amx_gemm.*, kernel qmm_amx_avx512): where
// the CPU has AMX-BF16 and AVX512-BF16, Linux granted the tile state and the level is avx512,
// unless QUANTA_CPU_AMX=0 or disable_amx(true).
bool amx_active();
void disable_amx(bool off);

// How the integer GEMVs prefetch the next pass of rows (20-40 KB ahead at K = 14336), measured
// from DRAM (docs/perf-cpu.md):
// - AMD with an L1 of 48 KB or more (Zen 5): the next pass as one run in address order, into L1
//   (L2 measured 0.9-0.96x);
// - AMD with a smaller L1 (Zen 4's 32 KB evicts a prefetch that far ahead before it is read, 1.2-2x
//   slower): the same run, into L2;
// - anything else (Intel: Emerald Rapids, 48 KB L1): each next row at the current offset (R
//   streams), into L2: 1.04-1.2x the run into L2, which was 1.04-1.12x the run into L1.
// QUANTA_CPU_PREFETCH=l1, l2 (a run into L1 or L2) or rows overrides; other values are ignored.
struct GemvPrefetch {
  bool l2 = false;    // into L2, else L1
  bool rows = false;  // per row at the current offset, else the next pass as one run
};
GemvPrefetch gemv_prefetch();

// Sets a forced level for the lifetime of a scope (tests).
class ScopedIsa {
 public:
  explicit ScopedIsa(Isa isa);
  ~ScopedIsa();
  ScopedIsa(const ScopedIsa&) = delete;
  ScopedIsa& operator=(const ScopedIsa&) = delete;

 private:
  std::optional<Isa> previous_;
};

}  // namespace quanta::cpu
