#include "cpu/isa.hpp"

#include <fmt/format.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "quanta/error.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif
#define QUANTA_X86_HOST 1
#endif

namespace quanta::cpu {

namespace {

#if defined(QUANTA_X86_HOST)
struct Regs {
  unsigned a = 0, b = 0, c = 0, d = 0;
};

Regs cpuid(unsigned leaf, unsigned sub) {
  Regs r;
  if (!__get_cpuid_count(leaf, sub, &r.a, &r.b, &r.c, &r.d)) r = {};
  return r;
}

// XGETBV(0) without -mxsave: the OS-enabled register state (XCR0).
uint64_t xcr0() {
  unsigned lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<uint64_t>(hi) << 32) | lo;
}

bool bit(unsigned v, int i) {
  return (v >> i) & 1u;
}

// Linux keeps AMX tile data off until a process asks (arch_prctl ARCH_REQ_XCOMP_PERM).
bool request_amx_permission() {
#if defined(__linux__)
  constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
  return false;
#endif
}
#endif

CpuFeatures detect() {
  CpuFeatures f;
#if defined(QUANTA_X86_HOST)
  f.x86 = true;
  const Regs l0 = cpuid(0, 0);
  const unsigned max_leaf = l0.a;
  const Regs l1 = cpuid(1, 0);
  const bool osxsave = bit(l1.c, 27);
  const uint64_t xcr = osxsave ? xcr0() : 0;
  f.os_avx = osxsave && bit(l1.c, 28) && (xcr & 0x6) == 0x6;
  f.os_avx512 = f.os_avx && (xcr & 0xe0) == 0xe0;
  f.fma = f.os_avx && bit(l1.c, 12);
  f.f16c = f.os_avx && bit(l1.c, 29);
  if (max_leaf >= 7) {
    const Regs l7 = cpuid(7, 0);
    const Regs l7s1 = cpuid(7, 1);
    f.avx2 = f.os_avx && bit(l7.b, 5);
    f.avx512f = f.os_avx512 && bit(l7.b, 16);
    f.avx512dq = f.os_avx512 && bit(l7.b, 17);
    f.avx512bw = f.os_avx512 && bit(l7.b, 30);
    f.avx512vl = f.os_avx512 && bit(l7.b, 31);
    f.avx512vnni = f.os_avx512 && bit(l7.c, 11);
    f.avx512vbmi = f.os_avx512 && bit(l7.c, 1);
    f.gfni = f.os_avx512 && bit(l7.c, 8);
    f.avx512bf16 = f.os_avx512 && bit(l7s1.a, 5);
    f.avx_vnni = f.os_avx && bit(l7s1.a, 4);
    f.amx_bf16 = bit(l7.d, 22);
    f.amx_tile = bit(l7.d, 24);
    f.amx_int8 = bit(l7.d, 25);
    // Tile config and data state (XCR0 bits 17, 18), then the Linux permission.
    f.os_amx = f.amx_tile && (xcr & 0x60000) == 0x60000 && request_amx_permission();
    if (!f.os_amx) f.amx_tile = f.amx_int8 = f.amx_bf16 = false;
  }
  // L1 data cache: the deterministic cache parameters (leaf 4 on Intel, 0x8000001D on AMD,
  // same format), else AMD's legacy leaf 0x80000005 (ECX[31:24], KB).
  const unsigned max_ext = cpuid(0x80000000u, 0).a;
  const bool amd = f.amd = l0.b == 0x68747541u;  // "Auth"enticAMD
  const unsigned cache_leaf = amd ? 0x8000001Du : 4u;
  if (amd ? max_ext >= cache_leaf : max_leaf >= cache_leaf) {
    for (unsigned i = 0; i < 16; ++i) {
      const Regs r = cpuid(cache_leaf, i);
      const unsigned type = r.a & 0x1f, level = (r.a >> 5) & 0x7;
      if (type == 0) break;
      if (type == 1 && level == 1) {  // data cache, level 1
        const uint64_t bytes = uint64_t{((r.b >> 22) & 0x3ff) + 1} * (((r.b >> 12) & 0x3ff) + 1) *
                               ((r.b & 0xfff) + 1) * (uint64_t{r.c} + 1);
        f.l1d_kb = static_cast<int>(bytes / 1024);
        break;
      }
    }
  }
  if (f.l1d_kb == 0 && amd && max_ext >= 0x80000005u)
    f.l1d_kb = static_cast<int>(cpuid(0x80000005u, 0).c >> 24);
  if (max_ext >= 0x80000004u) {
    char name[49] = {};
    for (unsigned i = 0; i < 3; ++i) {
      const Regs r = cpuid(0x80000002u + i, 0);
      std::memcpy(name + 16 * i, &r, 16);
    }
    f.brand = name;
    while (!f.brand.empty() && f.brand.back() == ' ') f.brand.pop_back();
    while (!f.brand.empty() && f.brand.front() == ' ') f.brand.erase(0, 1);
  }
#endif
  return f;
}

// Index of the forced level, or -1 when automatic.
std::atomic<int> g_forced{-1};

}  // namespace

std::string_view isa_name(Isa isa) {
  switch (isa) {
    case Isa::scalar:
      return "scalar";
    case Isa::avx2:
      return "avx2";
    case Isa::avx512:
      return "avx512";
  }
  return "?";
}

std::optional<Isa> parse_isa(std::string_view name) {
  for (Isa i : kAllIsas)
    if (isa_name(i) == name) return i;
  return std::nullopt;
}

const CpuFeatures& cpu_features() {
  static const CpuFeatures f = detect();
  return f;
}

std::string CpuFeatures::describe() const {
  std::string s = brand.empty() ? std::string("cpu") : brand;
  s += ":";
  const std::pair<bool, const char*> flags[] = {{avx2, "avx2"},
                                                {fma, "fma"},
                                                {f16c, "f16c"},
                                                {avx512f, "avx512f"},
                                                {avx512bw, "avx512bw"},
                                                {avx512vl, "avx512vl"},
                                                {avx512dq, "avx512dq"},
                                                {avx512vnni, "vnni"},
                                                {avx512vbmi, "vbmi"},
                                                {gfni, "gfni"},
                                                {avx512bf16, "avx512bf16"},
                                                {avx_vnni, "avx_vnni"},
                                                {amx_tile, "amx"},
                                                {amx_int8, "amx_int8"},
                                                {amx_bf16, "amx_bf16"}};
  for (const auto& [on, name] : flags)
    if (on) s += fmt::format(" {}", name);
  s += fmt::format(" (best: {}", isa_name(best_isa()));
  s += l1d_kb > 0 ? fmt::format(", L1D {} KB)", l1d_kb) : std::string(")");
  return s;
}

bool isa_supported(Isa isa) {
  const CpuFeatures& f = cpu_features();
  switch (isa) {
    case Isa::scalar:
      return true;
    case Isa::avx2:
#if defined(QUANTA_CPU_X86)
      return f.avx2 && f.fma && f.f16c;
#else
      return false;
#endif
    case Isa::avx512:
#if defined(QUANTA_CPU_X86)
      return isa_supported(Isa::avx2) && f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq;
#else
      return false;
#endif
  }
  return false;
}

Isa best_isa() {
  static const Isa best = [] {
    Isa b = Isa::scalar;
    for (Isa i : kAllIsas)
      if (isa_supported(i)) b = i;
    return b;
  }();
  return best;
}

namespace {
Isa env_isa() {
  static const Isa level = [] {
    const char* v = std::getenv("QUANTA_CPU_ISA");
    if (v == nullptr) return best_isa();
    const std::optional<Isa> want = parse_isa(v);
    if (!want) return best_isa();
    return static_cast<int>(*want) < static_cast<int>(best_isa()) ? *want : best_isa();
  }();
  return level;
}
}  // namespace

Isa active_isa() {
  const int forced = g_forced.load(std::memory_order_relaxed);
  return forced >= 0 ? static_cast<Isa>(forced) : env_isa();
}

void force_isa(std::optional<Isa> isa) {
  if (isa && !isa_supported(*isa))
    throw Error(fmt::format("[quanta::cpu::force_isa] isa: {} is not available here ({})",
                            isa_name(*isa), cpu_features().describe()));
  g_forced.store(isa ? static_cast<int>(*isa) : -1, std::memory_order_relaxed);
}

namespace {
std::atomic<bool> g_vnni_off{false};
std::atomic<bool> g_amx_off{false};
std::atomic<int> g_avx_vnni{-1};  // force_avx_vnni: -1 none, 0 off, 1 on

// Whether the environment variable `name` is "0" (other values are ignored).
bool env_zero(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && std::string_view(v) == "0";
}
}  // namespace

bool vnni_active() {
  static const bool env_off = env_zero("QUANTA_CPU_VNNI");
  const CpuFeatures& f = cpu_features();
  return active_isa() == Isa::avx512 && f.avx512vnni && f.avx512vbmi && f.gfni && !env_off &&
         !g_vnni_off.load(std::memory_order_relaxed);
}

bool avx2_int8_active() {
  static const bool env_off = env_zero("QUANTA_CPU_VNNI");
  return active_isa() == Isa::avx2 && !env_off && !g_vnni_off.load(std::memory_order_relaxed);
}

bool int8_active() {
  return vnni_active() || avx2_int8_active();
}

bool avx_vnni_active() {
#if defined(QUANTA_EMULATE_AVX_VNNI)
  constexpr bool kEmulated = true;  // CI: vpdpbusd emulated (x86/avx2_common.hpp dpbusd)
#else
  constexpr bool kEmulated = false;
#endif
  // The environment's choice ("0" or "1"), else the default: on only where emulated.
  static const int env = [] {
    const char* v = std::getenv("QUANTA_CPU_AVX_VNNI");
    const std::string_view e = v != nullptr ? v : "";
    return e == "1" ? 1 : e == "0" ? 0 : -1;
  }();
  const int forced = g_avx_vnni.load(std::memory_order_relaxed);
  const bool wanted = forced >= 0 ? forced == 1 : env >= 0 ? env == 1 : kEmulated;
  return wanted && avx2_int8_active() && (cpu_features().avx_vnni || kEmulated);
}

void force_avx_vnni(std::optional<bool> on) {
  g_avx_vnni.store(on ? static_cast<int>(*on) : -1, std::memory_order_relaxed);
}

void disable_vnni(bool off) {
  g_vnni_off.store(off, std::memory_order_relaxed);
}

bool amx_active() {
  static const bool env_off = env_zero("QUANTA_CPU_AMX");
  const CpuFeatures& f = cpu_features();
  return active_isa() == Isa::avx512 && f.amx_bf16 && f.avx512bf16 && !env_off &&
         !g_amx_off.load(std::memory_order_relaxed);
}

void disable_amx(bool off) {
  g_amx_off.store(off, std::memory_order_relaxed);
}

GemvPrefetch gemv_prefetch() {
  static const GemvPrefetch choice = [] {
    const char* v = std::getenv("QUANTA_CPU_PREFETCH");
    const std::string_view e = v != nullptr ? v : "";
    if (e == "l1") return GemvPrefetch{false, false};
    if (e == "l2") return GemvPrefetch{true, false};
    if (e == "rows") return GemvPrefetch{true, true};
    const CpuFeatures& f = cpu_features();
    if (f.amd) return GemvPrefetch{f.l1d_kb < 48, false};
    return GemvPrefetch{true, true};
  }();
  return choice;
}

ScopedIsa::ScopedIsa(Isa isa) {
  const int prev = g_forced.load(std::memory_order_relaxed);
  if (prev >= 0) previous_ = static_cast<Isa>(prev);
  force_isa(isa);
}

ScopedIsa::~ScopedIsa() {
  g_forced.store(previous_ ? static_cast<int>(*previous_) : -1, std::memory_order_relaxed);
}

}  // namespace quanta::cpu
