// The CUDA kernel table as host data: which kernel the selector picks for each (format, dtype,
// layout, M, N, K, compute capability), and that every valid shape has a correct fallback.
// Needs no GPU (Problem carries the compute capability); skips in a build without CUDA.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>

#include "core/kernel.hpp"
#include "cuda/device_pack.hpp"
#include "cuda/families.hpp"
#include "cuda/i8_warps.hpp"
#include "quanta/error.hpp"

namespace quanta {
namespace {

class SelectCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda::kernels().empty()) GTEST_SKIP() << "this build has no CUDA kernel table";
  }
};

Problem affine_problem(int64_t m, DType t = DType::bf16, int bits = 4, int group = 64,
                       int64_t n = 14336, int64_t k = 5120, Layout layout = Layout::nk,
                       int cc = 90) {
  Problem p;
  p.op = Op::matmul;
  p.format = Format::affine(bits, group);
  p.layout = layout;
  p.dtype = t;
  p.device = Location::device;
  p.m = m;
  p.n = n;
  p.k = k;
  p.compute_capability = cc;
  return p;
}

std::string pick(const Problem& p) {
  return std::string(select_kernel(p, "auto").name);
}

TEST_F(SelectCuda, AffineHalfActivationsByM) {
  for (DType t : {DType::f16, DType::bf16}) {
    EXPECT_EQ(pick(affine_problem(1, t)), "qmv_affine_i8");
    EXPECT_EQ(pick(affine_problem(1, t, 3)), "qmv_affine_i8");
    // K a multiple of 128 but not of 4 groups: the register-direct kernel takes M = 1.
    EXPECT_EQ(pick(affine_problem(1, t, 3, 128, 4096, 4224)), "qmv_affine_rd");
    EXPECT_EQ(pick(affine_problem(1, t, 4, 32, 4096, 4160)), "qmv_affine_tc");  // K % 128 != 0
    EXPECT_EQ(pick(affine_problem(2, t)), "qmv_affine_i8");
    for (int64_t m : {3, 4}) EXPECT_EQ(pick(affine_problem(m, t)), "qmm_affine_i8") << "M=" << m;
    for (int64_t m : {5, 8, 9, 16, 23, 24, 32})
      EXPECT_EQ(pick(affine_problem(m, t)), "qmm_affine_rf") << "M=" << m;
    // M = 33..64 on the register-fed wgmma kernel where W has >= 12288 rows.
    for (int64_t m : {33, 48, 64})
      EXPECT_EQ(pick(affine_problem(m, t)), "qmm_affine_wgrf") << "M=" << m;
    EXPECT_EQ(pick(affine_problem(33, t, 4, 128)), "qmm_affine_wgrf");
    EXPECT_EQ(pick(affine_problem(64, t, 4, 64, 5120, 14336)), "qmm_affine_wgmma");
    EXPECT_EQ(pick(affine_problem(64, t, 4, 64, 12280, 5120)), "qmm_affine_wgmma");
    // A device pack (quanta::prepack): qmm_affine_wgmma reads its reordered codes from M = 33;
    // below, qmm_affine_rf still wins.
    Problem packed = affine_problem(48, t);
    packed.device_packed = true;
    EXPECT_EQ(pick(packed), "qmm_affine_wgmma");
    packed.m = 32;
    EXPECT_EQ(pick(packed), "qmm_affine_rf");
    for (int64_t m : {65, 257, 511, 512, 4096})
      EXPECT_EQ(pick(affine_problem(m, t)), "qmm_affine_wgmma") << "M=" << m;
    EXPECT_EQ(pick(affine_problem(33, t, 2, 64)), "qmm_affine_wgmma");
    EXPECT_EQ(pick(affine_problem(1024, t, 8, 128)), "qmm_affine_wgmma");
    // Widths and groups without a wgmma instance, and GPUs without sm_90a code.
    EXPECT_EQ(pick(affine_problem(32, t, 3)), "qmm_affine_tc");
    EXPECT_EQ(pick(affine_problem(33, t, 3)), "qmm_affine_mma");
    EXPECT_EQ(pick(affine_problem(512, t, 3)), "qmm_affine_dq");
    EXPECT_EQ(pick(affine_problem(257, t, 4, 32)), "qmm_affine_mma");
    EXPECT_EQ(pick(affine_problem(257, t, 4, 64, 14336, 5120, Layout::nk, 80)), "qmm_affine_mma");
    EXPECT_EQ(pick(affine_problem(512, t, 4, 64, 14336, 5120, Layout::nk, 100)), "qmm_affine_dq");
  }
}

// matmul_problem marks a matrix with a device pack, but only for x of the scales' dtype (the pack
// holds scales of that dtype; qmm_affine_wgmma reads it only then); for W [K, N], for every dtype.
TEST_F(SelectCuda, ProblemMarksADevicePackForItsDtype) {
  QuantizedMatrix w;
  w.format = Format::affine(4, 64);
  w.scale_dtype = DType::f16;
  w.location = Location::device;
  w.n = 14336;
  w.k = 5120;
  const ConstMatrixView x{nullptr, DType::f16, 48, 5120, Location::device};
  EXPECT_FALSE(matmul_problem(Op::matmul, x, w).device_packed);
  w.device_pack = std::make_shared<const DevicePack>();
  EXPECT_TRUE(matmul_problem(Op::matmul, x, w).device_packed);
  ConstMatrixView xb = x;
  xb.dtype = DType::bf16;
  EXPECT_FALSE(matmul_problem(Op::matmul, xb, w).device_packed);
  // A [K, N] matrix's pack is its [N, K] copy: it serves x of any dtype.
  w.layout = Layout::kn;
  EXPECT_TRUE(matmul_problem(Op::matmul, xb, w).device_packed);
  xb.dtype = DType::f32;
  EXPECT_TRUE(matmul_problem(Op::matmul, xb, w).device_packed);
}

TEST_F(SelectCuda, EveryAffineWidthAndGroupTakesTheFastPath) {
  for (int b : detail::kAffineBits)
    for (int g : detail::kAffineGroups) {
      EXPECT_EQ(pick(affine_problem(1, DType::f16, b, g)), "qmv_affine_i8") << b << " " << g;
      EXPECT_EQ(pick(affine_problem(1, DType::bf16, b, g)), "qmv_affine_i8") << b << " " << g;
      EXPECT_EQ(pick(affine_problem(2, DType::bf16, b, g)), "qmv_affine_i8") << b << " " << g;
      EXPECT_EQ(pick(affine_problem(1, DType::f32, b, g)), "qmv_affine_f32") << b << " " << g;
      EXPECT_EQ(pick(affine_problem(1, DType::bf16, b, g, 14336, 5120, Layout::kn)), "qvm_affine")
          << b << " " << g;
    }
}

// M = 9..16 run qmm_affine_i8's four column tiles only where they beat qmm_affine_tc (5-bit g128;
// 8-bit g64 went to qmm_affine_rf); 4 and 8-bit codes and 6-bit groups of 32 run qmm_affine_rf,
// every other width keeps qmm_affine_tc there.
TEST_F(SelectCuda, IntegerMmaFourTiles) {
  for (DType t : {DType::f16, DType::bf16})
    for (int b : detail::kAffineBits)
      for (int g : detail::kAffineGroups)
        for (int64_t m : {9, 12, 16, 17}) {
          const bool rf = b == 4 || b == 8 || (b == 6 && g == 32);
          const bool four = b == 5 && g == 128 && m <= 16;
          EXPECT_EQ(pick(affine_problem(m, t, b, g)), rf     ? "qmm_affine_rf"
                                                      : four ? "qmm_affine_i8"
                                                             : "qmm_affine_tc")
              << b << " " << g << " M=" << m;
        }
}

// The other widths run the register-fed kernel where it measured faster (qmm_affine_rf.cu,
// docs/PERF.md): 2-bit M = 5..8; 3-bit M = 5..8 (g64 5..7, g128 left to qmm_affine_i8); 6-bit
// g32 M = 5..32, g64 M = 8 and 24..32; 8-bit M = 5..23 (g32 to 32; bf16 g64 M <= 8 left to
// qmm_affine_i8). 5-bit never. And 2-bit M = 24..32 run qmm_affine_tc, not qmm_affine_wgmma.
TEST_F(SelectCuda, RegisterFedOtherWidths) {
  for (DType t : {DType::f16, DType::bf16})
    for (int g : detail::kAffineGroups)
      for (int64_t m : {4, 5, 6, 7, 8, 9, 16, 17, 23, 24, 25, 32, 33}) {
        auto want = [&](int b) {
          if (m < 5 || m > 32) return false;
          switch (b) {
            case 2:
              return m <= 8;
            case 3:
              return g != 128 && m <= (g == 64 ? 7 : 8);
            case 6:
              return g == 32 || (g == 64 && (m == 8 || m >= 24));
            case 8:
              return (m < 24 || g == 32) && !(t == DType::bf16 && g == 64 && m <= 8);
            default:
              return false;
          }
        };
        for (int b : {2, 3, 5, 6, 8}) {
          const std::string k = pick(affine_problem(m, t, b, g));
          EXPECT_EQ(k == "qmm_affine_rf", want(b)) << k << " " << b << " " << g << " M=" << m;
        }
        if (m >= 24 && m <= 32) {
          EXPECT_EQ(pick(affine_problem(m, t, 2, g)), "qmm_affine_tc") << g << " M=" << m;
        }
        if (m > 24 && m <= 32 && g != 32) {
          EXPECT_EQ(pick(affine_problem(m, t, 8, g)), "qmm_affine_wgmma") << g << " M=" << m;
        }
      }
  EXPECT_EQ(pick(affine_problem(33, DType::f16, 2, 64)), "qmm_affine_wgmma");
  EXPECT_EQ(pick(affine_problem(5, DType::bf16, 8, 64)), "qmm_affine_i8");
  EXPECT_EQ(pick(affine_problem(5, DType::f16, 3, 128)), "qmm_affine_i8");
  EXPECT_EQ(pick(affine_problem(7, DType::f16, 6, 64)), "qmm_affine_i8");
  EXPECT_EQ(pick(affine_problem(16, DType::f16, 6, 64)), "qmm_affine_tc");
}

// 4-bit codes at M = 5..32 run the register-fed kernel for every group size; M = 4 stays on the
// integer mma, M = 33 on the wgmma kernel (groups of 64k) or qmm_affine_mma (groups of 32).
TEST_F(SelectCuda, RegisterFedInt4) {
  for (DType t : {DType::f16, DType::bf16})
    for (int g : detail::kAffineGroups) {
      for (int64_t m : {5, 6, 8, 9, 12, 16, 17, 24, 31, 32})
        EXPECT_EQ(pick(affine_problem(m, t, 4, g)), "qmm_affine_rf") << g << " M=" << m;
      EXPECT_EQ(pick(affine_problem(4, t, 4, g)), "qmm_affine_i8") << g;
      EXPECT_EQ(pick(affine_problem(33, t, 4, g)), "qmm_affine_wgrf") << g;
      EXPECT_EQ(pick(affine_problem(33, t, 4, g, 5120, 14336)),
                g == 32 ? "qmm_affine_wgrf" : "qmm_affine_wgmma")
          << g;
      EXPECT_EQ(pick(affine_problem(65, t, 4, g)), g == 32 ? "qmm_affine_mma" : "qmm_affine_wgmma")
          << g;
      // Before sm_80 there is no bf16 mma.sync; f32 activations take the dequantize path.
      EXPECT_NE(pick(affine_problem(16, t, 4, g, 14336, 5120, Layout::nk, 75)), "qmm_affine_rf");
    }
  EXPECT_EQ(pick(affine_problem(16, DType::f32)), "qmm_affine_dq");
  // M = 5..8 on matrices of up to 2^25 weights run qmm_affine_i8 (faster there), unless it
  // declines (before sm_90): then qmm_affine_rf.
  for (DType t : {DType::f16, DType::bf16})
    for (int g : detail::kAffineGroups)
      for (int64_t m : {5, 6, 7, 8}) {
        EXPECT_EQ(pick(affine_problem(m, t, 4, g, 4096, 4096)), "qmm_affine_i8") << g << " M=" << m;
        EXPECT_EQ(pick(affine_problem(m, t, 4, g, 5120, 5120)), "qmm_affine_i8") << g << " M=" << m;
        EXPECT_EQ(pick(affine_problem(m, t, 4, g, 4096, 4096, Layout::nk, 80)), "qmm_affine_rf")
            << g << " M=" << m;
        EXPECT_EQ(pick(affine_problem(m, t, 4, g, 5120, 14336)), "qmm_affine_rf")
            << g << " M=" << m;
      }
  EXPECT_EQ(pick(affine_problem(9, DType::f16, 4, 64, 4096, 4096)), "qmm_affine_rf");
  // An odd number of groups per row (4-byte scale copies elsewhere): declined.
  EXPECT_NE(pick(affine_problem(16, DType::f16, 4, 64, 4096, 4160)), "qmm_affine_rf");
}

TEST_F(SelectCuda, F32ActivationsByM) {
  for (int64_t m : {1, 2, 3, 4, 8})
    EXPECT_EQ(pick(affine_problem(m, DType::f32)), "qmv_affine_f32") << "M=" << m;
  for (int64_t m : {9, 16, 32, 33, 257, 4096})
    EXPECT_EQ(pick(affine_problem(m, DType::f32)), "qmm_affine_dq") << "M=" << m;
  // A K too long for 128 dense f32 rows in a 64 MB slab.
  EXPECT_EQ(pick(affine_problem(16, DType::f32, 4, 64, 4096, 262144)), "matmul_generic");
}

TEST_F(SelectCuda, RaggedShapesFallBack) {
  // An odd number of groups per row: the tensor-core kernel declines (4-byte scale copies).
  EXPECT_EQ(pick(affine_problem(1, DType::f16, 4, 32, 4096, 4128)), "matmul_generic");
  // Code rows that are not whole 16-byte units (3 bits x 4128).
  EXPECT_EQ(pick(affine_problem(1, DType::f16, 3, 32, 4096, 4128)), "matmul_generic");
  EXPECT_EQ(pick(affine_problem(257, DType::f16, 3, 32, 4096, 4128)), "matmul_generic");
  EXPECT_EQ(pick(affine_problem(512, DType::f16, 3, 32, 4096, 4128)), "qmm_affine_dq");
  EXPECT_EQ(pick(affine_problem(512, DType::f16, 3, 32, 4096, 4112)), "matmul_generic");
  // The shared-memory MMA kernel reads scales per chunk and takes odd group counts.
  EXPECT_EQ(pick(affine_problem(257, DType::f16, 4, 32, 4096, 4128)), "qmm_affine_mma");
  EXPECT_EQ(pick(affine_problem(512, DType::f16, 4, 32, 4096, 4128)), "qmm_affine_dq");
  // Odd M and N are fine for the fast paths.
  EXPECT_EQ(pick(affine_problem(7, DType::f16, 4, 64, 4099, 5120)), "qmm_affine_i8");
  EXPECT_EQ(pick(affine_problem(7, DType::f16, 4, 128, 4099, 5120)), "qmm_affine_i8");
  EXPECT_EQ(pick(affine_problem(7, DType::f16, 2, 64, 4099, 5120)), "qmm_affine_rf");
  EXPECT_EQ(pick(affine_problem(9, DType::f16, 4, 64, 4099, 5120)), "qmm_affine_rf");
  EXPECT_EQ(pick(affine_problem(9, DType::f16, 3, 64, 4099, 5120)), "qmm_affine_tc");
  EXPECT_EQ(pick(affine_problem(9, DType::f16, 8, 64, 4099, 5120)), "qmm_affine_rf");
  // 2-bit groups of 32 are 2 bytes per lane: qmm_affine_i8 declines them.
  EXPECT_EQ(pick(affine_problem(4, DType::f16, 2, 32, 4096, 4096)), "qmm_affine_tc");
  // 3/5/6 bits: a lane's quarter of a group must be whole unpack units (32 codes, 6-bit 16);
  // 6-bit groups of 64 at M = 8 run qmm_affine_rf (qmm_affine_tc before), and so do 3-bit groups
  // of 32/64 and 6-bit groups of 32 at M = 5..8 (3-bit g64 to 7).
  for (int b : {3, 5, 6})
    for (int g : detail::kAffineGroups)
      for (int64_t m : {3, 4, 5, 7, 8}) {
        const bool units = g == 128 || (b == 6 && g == 64);
        const bool rf = m >= 5 && ((b == 3 && g != 128 && !(g == 64 && m == 8)) ||
                                   (b == 6 && (g == 32 || (g == 64 && m == 8))));
        EXPECT_EQ(pick(affine_problem(m, DType::bf16, b, g)),
                  rf                                        ? "qmm_affine_rf"
                  : units && !(b == 6 && g == 64 && m == 8) ? "qmm_affine_i8"
                                                            : "qmm_affine_tc")
            << b << " " << g << " M=" << m;
      }
  EXPECT_EQ(pick(affine_problem(257, DType::bf16, 4, 64, 1000, 5120)), "qmm_affine_wgmma");
  // N not a multiple of 8: rows of y are not 16-byte units for TMA.
  EXPECT_EQ(pick(affine_problem(257, DType::bf16, 4, 64, 1001, 5120)), "qmm_affine_mma");
  EXPECT_EQ(pick(affine_problem(513, DType::bf16, 4, 64, 1001, 5120)), "qmm_affine_dq");
  // [K, N] with N not a multiple of 32.
  EXPECT_EQ(pick(affine_problem(1, DType::bf16, 4, 64, 8, 512, Layout::kn)), "matmul_generic");
  EXPECT_EQ(pick(affine_problem(9, DType::bf16, 4, 64, 40, 512, Layout::kn)), "matmul_generic");
  // [K, N] past qvm_affine's M <= 8: the [N, K] kernels on a transposed copy, every dtype; an
  // expert stack: dequantize + cuBLAS declines too.
  for (DType t : kAllDTypes)
    for (int64_t m : {9, 64, 257, 4096})
      EXPECT_EQ(pick(affine_problem(m, t, 4, 64, 64, 512, Layout::kn)), "qmm_affine_repack")
          << dtype_name(t) << " M=" << m;
  // Below M = 9 the copy takes over where it measured faster: 2/4-bit from M = 6, 8-bit at M = 8,
  // f16/bf16 only.
  for (DType t : kAllDTypes)
    for (int b : {2, 3, 4, 8})
      for (int64_t m = 1; m <= 8; ++m) {
        const bool half = t != DType::f32;
        const bool repack = half && (((b == 2 || b == 4) && m >= 6) || (b == 8 && m == 8));
        EXPECT_EQ(pick(affine_problem(m, t, b, 64, 64, 512, Layout::kn)),
                  repack ? "qmm_affine_repack" : "qvm_affine")
            << dtype_name(t) << " " << b << "-bit M=" << m;
      }
  // A device pack (quanta::prepack: the [N, K] copy made once): the copy's kernels at every M,
  // every width and dtype, ahead of qvm_affine; N not a multiple of 32 still declines.
  for (DType t : kAllDTypes)
    for (int b : {2, 3, 4, 5, 6, 8})
      for (int64_t m : {1, 2, 5, 8, 9, 300}) {
        Problem packed = affine_problem(m, t, b, 64, 64, 512, Layout::kn);
        packed.device_packed = true;
        EXPECT_EQ(pick(packed), "qmm_affine_repack") << dtype_name(t) << " " << b << "-bit M=" << m;
      }
  Problem ragged = affine_problem(1, DType::bf16, 4, 64, 8, 512, Layout::kn);
  ragged.device_packed = true;
  EXPECT_EQ(pick(ragged), "matmul_generic");
  Problem stack = affine_problem(9, DType::f16, 4, 64, 64, 512, Layout::kn);
  stack.batch = 4;
  EXPECT_EQ(pick(stack), "matmul_generic");
  // Before sm_80 there is no bf16 mma.sync.
  EXPECT_EQ(pick(affine_problem(1, DType::bf16, 4, 64, 4096, 4096, Layout::nk, 75)),
            "matmul_generic");
}

TEST_F(SelectCuda, EveryFormatHasADeviceKernel) {
  for (const Format& f : all_formats())
    for (DType t : kAllDTypes)
      for (int64_t m : {1, 2, 3, 4, 5, 12, 20, 32, 33, 64, 65, 257}) {
        Problem p = affine_problem(m, t);
        p.format = f;
        p.k = 1024;
        EXPECT_NO_THROW(select_kernel(p, "auto")) << f.name() << " M=" << m;
        if (f.scheme != Scheme::affine) {
          const Family fam = f.info().family;
          // K = 1024: qmm_scaled_rf (f16/bf16 x, E8M0-scaled codes with bf16 only) from M = 3
          // (nvfp4: 2) to 64 (passes of 32 rows past 32); whole runs of 128 codes for
          // qmv_scaled_mma (M = 2..16); qmv_scaled to M = 8 (f32 x: 16); dequantize_scaled + cuBLAS
          // beyond.
          const bool micro_or_fp8 = fam == Family::microscaled || fam == Family::fp8;
          const bool rf = micro_or_fp8 && t != DType::f32 && m <= 64 &&
                          (t == DType::bf16 || f.info().scale != ScaleEncoding::e8m0);
          const bool rf_ahead = rf && (m >= 3 || (m == 2 && f.scheme == Scheme::nvfp4));
          const bool mma = micro_or_fp8 && t != DType::f32 && m >= 2 && m <= 16;
          const bool scaled = micro_or_fp8 && (mma || m <= (t == DType::f32 ? 16 : 8));
          // GGUF: qmm_gguf_mma at M = 5..64 with f16 / bf16 x, qmv_gguf to M = 16 otherwise, then
          // dequantize + cuBLAS.
          const bool gguf_mma = fam == Family::gguf && t != DType::f32 && m >= 5 && m <= 64;
          const bool gguf = fam == Family::gguf && m <= 16;
          EXPECT_EQ(pick(p), rf_ahead   ? "qmm_scaled_rf"
                             : mma      ? "qmv_scaled_mma"
                             : scaled   ? "qmv_scaled"
                             : rf       ? "qmm_scaled_rf"
                             : gguf_mma ? "qmm_gguf_mma"
                             : gguf     ? "qmv_gguf"
                                        : "qmm_generic_dq")
              << f.name() << " M=" << m;
          p.layout = Layout::kn;
          if (f.info().kn_layout) {
            EXPECT_EQ(pick(p), "qmm_generic_dq") << f.name();
          }
          p.layout = Layout::nk;
        }
        // One expert: GGUF f16 / bf16 x grouped from M = 2, the 8-bit scaled formats from M = 4,
        // fp4 from M = 8 (E8M0-scaled codes with bf16 x only).
        p.op = Op::gather_matmul;
        const Family fam = f.info().family;
        const bool scaled = fam == Family::microscaled || fam == Family::fp8;
        const bool affine = f.scheme == Scheme::affine;
        const bool grouped = fam == Family::gguf && t != DType::f32 && m >= 2;
        // Affine: gather_qmv_affine_i8 (f16 / bf16 x; K = 1024 suits every group), the tiles
        // from the crossing measured on the H100 (qmm_affine_mma.cu, tile_rows_an_expert).
        const int g = f.group_size;
        const int64_t affine_rows = f.bits >= 5 || g == 32 ? 8
                                    : g == 128             ? 12
                                    : f.bits == 4          ? 11
                                                           : 10;
        const bool affine_grouped = affine && t != DType::f32 && m >= affine_rows;
        const bool affine_i8 = affine && t != DType::f32;
        const bool scaled_grouped =
            scaled && m >= (f.bits == 4 ? 8 : 4) &&
            (t == DType::bf16 || (t == DType::f16 && f.info().scale != ScaleEncoding::e8m0));
        EXPECT_EQ(pick(p), scaled_grouped   ? "gather_qmm_scaled_mma"
                           : scaled         ? "gather_qmv_scaled"
                           : affine_grouped ? "gather_qmm_affine_mma"
                           : affine_i8      ? "gather_qmv_affine_i8"
                           : affine         ? "gather_qmv_affine"
                           : grouped        ? "gather_qmm_gguf_mma"
                                            : "gather_qmv_gguf")
            << f.name() << " M=" << m;
        p.op = Op::dequantize;
        p.m = 0;
        EXPECT_EQ(pick(p), f.scheme == Scheme::affine ? "dequantize_affine"
                           : scaled                   ? "dequantize_scaled"
                           : fam == Family::gguf      ? "dequantize_gguf"
                                                      : "dequantize_generic")
            << f.name();
        p.layout = Layout::kn;  // dequantize_scaled reads [N, K] rows only
        if (f.info().kn_layout && f.scheme != Scheme::affine) {
          EXPECT_EQ(pick(p), "dequantize_generic") << f.name();
        }
        p.layout = Layout::nk;
      }
  // qmv_scaled reads whole 16-byte chunks: nvfp4 with K % 32 == 16 and fp8 with K % 16 != 0 keep
  // dequantize + cuBLAS.
  Problem p = affine_problem(1, DType::f16);
  p.format = Format::nvfp4();
  p.k = 48;
  EXPECT_EQ(pick(p), "qmm_generic_dq");
  p.k = 64;
  EXPECT_EQ(pick(p), "qmv_scaled");
  p.m = 2;  // nvfp4: qmm_scaled_rf from M = 2 (K in whole 32-code chunks)
  EXPECT_EQ(pick(p), "qmm_scaled_rf");
  p.k = 128;
  EXPECT_EQ(pick(p), "qmm_scaled_rf");  // nvfp4 from M = 2; the others from M = 3
  p.format = Format::fp8_e4m3(Granularity::channel);
  EXPECT_EQ(pick(p), "qmv_scaled_mma");
  p.m = 3;
  EXPECT_EQ(pick(p), "qmm_scaled_rf");
  p.format = Format::mxfp4();  // E8M0 scales: qmm_scaled_rf with bf16 x only
  EXPECT_EQ(pick(p), "qmv_scaled_mma");
  p.format = Format::nvfp4();
  p.m = 1;
  EXPECT_EQ(pick(p), "qmv_scaled");
  p.format = Format::fp8_e4m3(Granularity::channel);
  p.k = 40;
  EXPECT_EQ(pick(p), "qmm_generic_dq");
  p.k = 48;
  EXPECT_EQ(pick(p), "qmv_scaled");
  p.dtype = DType::f32;  // CUDA cores only
  p.k = 1024;
  EXPECT_EQ(pick(p), "qmv_scaled");
  // Past M = 8 (qmv_scaled) and 64 (qmm_scaled_rf) dequantize_scaled + cuBLAS is faster; forced,
  // qmv_scaled and qmv_scaled_mma still run to M = 32 and 16.
  p.m = 16;
  EXPECT_EQ(pick(p), "qmv_scaled");
  p.m = 17;
  EXPECT_EQ(pick(p), "qmm_generic_dq");
  p.m = 9;
  p.dtype = DType::bf16;
  EXPECT_EQ(pick(p), "qmm_scaled_rf");
  p.m = 17;
  EXPECT_EQ(pick(p), "qmm_scaled_rf");
  p.m = 33;  // two passes of qmm_scaled_rf
  EXPECT_EQ(pick(p), "qmm_scaled_rf");
  p.m = 64;
  EXPECT_EQ(pick(p), "qmm_scaled_rf");
  p.m = 65;
  EXPECT_EQ(pick(p), "qmm_generic_dq");
  p.k = 48;  // not whole runs: qmv_scaled to M = 8, and no whole 32-code chunks for qmm_scaled_rf
  p.m = 8;
  EXPECT_EQ(pick(p), "qmv_scaled");
  p.m = 9;
  EXPECT_EQ(pick(p), "qmm_generic_dq");
  p.m = 32;
  EXPECT_EQ(std::string(select_kernel(p, "qmv_scaled").name), "qmv_scaled");
  p.k = 1024;
  p.m = 16;
  EXPECT_EQ(std::string(select_kernel(p, "qmv_scaled_mma").name), "qmv_scaled_mma");
}

TEST_F(SelectCuda, AffineGatherRunsItsKernel) {
  for (int b : detail::kAffineBits) {
    Problem p = affine_problem(5, DType::bf16, b, 64, 256, 1024);
    p.op = Op::gather_matmul;
    p.batch = 8;
    EXPECT_EQ(pick(p), "gather_qmv_affine_i8") << b << "-bit";
    p.dtype = DType::f32;  // x as int8 planes needs f16 / bf16
    EXPECT_EQ(pick(p), "gather_qmv_affine") << b << "-bit";
    p.dtype = DType::bf16;
    p.k = 1088;  // not 4 groups of 64 a step
    EXPECT_EQ(pick(p), "gather_qmv_affine") << b << "-bit";
    p.k = 1024;
    p.layout = Layout::kn;
    EXPECT_EQ(pick(p), "gather_matmul_generic") << b << "-bit";
  }
}

// Affine expert stacks: rows grouped by expert on the tensor cores with f16 / bf16 x and
// K * bits % 128 == 0 from eight rows an expert on average (2-bit: twelve); below that
// gather_qmv_affine_i8 where K is whole steps of 4 groups (f16 / bf16 x), else gather_qmv_affine
// (grouped from four rows where the i8 kernel declines); forced, the grouped kernel takes any M
// it supports.
TEST_F(SelectCuda, AffineGatherGroupsWhereTheTilesPay) {
  for (int b : {2, 3, 4, 5, 6, 8})
    for (int g : {32, 64, 128})
      for (int64_t experts : {1, 8, 128})
        for (DType t : kAllDTypes) {
          // The crossings measured on the H100 (qmm_affine_mma.cu, tile_rows_an_expert).
          const int64_t rows = b >= 5 || g == 32 ? 8 : g == 128 ? 12 : b == 4 ? 11 : 10;
          for (int64_t m : {int64_t{1}, rows * experts - 1, rows * experts, 512 * experts}) {
            Problem p = affine_problem(m, t, b, g, 768, 2048);
            p.op = Op::gather_matmul;
            p.batch = experts;
            const bool grouped = t != DType::f32 && m >= rows * experts;
            const char* one_row = t == DType::f32 ? "gather_qmv_affine" : "gather_qmv_affine_i8";
            EXPECT_EQ(pick(p), grouped ? "gather_qmm_affine_mma" : one_row)
                << b << "-bit g" << g << " " << dtype_name(t) << " M=" << m
                << " experts=" << experts;
            if (t != DType::f32) {
              EXPECT_EQ(std::string(select_kernel(p, "gather_qmm_affine_mma").name),
                        "gather_qmm_affine_mma");
            }
          }
        }
  Problem p = affine_problem(4096, DType::f16, 3, 64, 768, 2080);  // K * 3 % 128 != 0
  p.op = Op::gather_matmul;
  p.batch = 8;
  EXPECT_EQ(pick(p), "gather_qmv_affine");
  p = affine_problem(32, DType::bf16, 4, 64, 768, 2112);  // tile kernel yes, i8 no (K % 256)
  p.op = Op::gather_matmul;
  p.batch = 8;
  EXPECT_EQ(pick(p), "gather_qmm_affine_mma");  // four rows an expert
  p.m = 31;
  EXPECT_EQ(pick(p), "gather_qmv_affine");
  p.k = 2048;
  p.batch = cuda::kMaxGroupedExperts + 1;
  p.m = 5 * p.batch;
  EXPECT_EQ(pick(p), "gather_qmv_affine_i8");  // more experts than the device grouping counts
  p.m = 65536;                                 // past a grid's rows
  p.batch = 8;
  EXPECT_EQ(pick(p), "gather_qmm_affine_mma");
  p.batch = cuda::kMaxGroupedExperts + 1;
  EXPECT_EQ(pick(p), "gather_qmv_affine");
  p.m = 4;
  p.compute_capability = 80;  // no programmatic dependent launch
  EXPECT_EQ(pick(p), "gather_qmv_affine");
}

// Microscaled and fp8 expert stacks: the same from eight rows an expert for the 4-bit codes and
// four for the 8-bit ones, with bf16 x for the E8M0-scaled codes and f16 / bf16 x for the others;
// f32 x and fewer rows run one row a pass.
TEST_F(SelectCuda, ScaledGatherGroupsFromEightOrFourRowsAnExpert) {
  for (Format f : {Format::mxfp4(), Format::nvfp4(), Format::mxfp8(), Format::fp8_e4m3(),
                   Format::fp8_e5m2(Granularity::tensor)})
    for (int64_t experts : {1, 32})
      for (DType t : kAllDTypes)
        for (int64_t rows : {1, 4, 8, 512})
          for (int64_t m : {rows * experts - 1, rows * experts}) {
            if (m < 1) continue;
            Problem p = affine_problem(m, t, 4, 64, 2880, 2880);  // gpt-oss's expert shape
            p.format = f;
            p.op = Op::gather_matmul;
            p.batch = experts;
            const bool dtype_ok =
                t == DType::bf16 || (t == DType::f16 && f.info().scale != ScaleEncoding::e8m0);
            const bool grouped = dtype_ok && m >= (f.bits == 4 ? 8 : 4) * experts;
            EXPECT_EQ(pick(p), grouped ? "gather_qmm_scaled_mma" : "gather_qmv_scaled")
                << f.name() << " " << dtype_name(t) << " M=" << m << " experts=" << experts;
          }
}

// GGUF expert stacks: rows grouped by expert on the tensor cores from two rows an expert on
// average, one row a pass below that and for f32 x (which the tensor-core kernel declines);
// forced, the grouped kernel takes any M.
TEST_F(SelectCuda, GgufGatherGroupsFromTwoRowsAnExpert) {
  for (Format f : {Format::gguf(Scheme::q4_0), Format::gguf(Scheme::q6_K)})
    for (int64_t experts : {1, 8, 128})
      for (DType t : kAllDTypes)
        for (int64_t m : {int64_t{1}, experts, 2 * experts - 1, 2 * experts, 4096 * experts}) {
          Problem p = affine_problem(m, t, 4, 64, 768, 2048);
          p.format = f;
          p.op = Op::gather_matmul;
          p.batch = experts;
          const bool grouped = t != DType::f32 && m >= 2 * experts;
          EXPECT_EQ(pick(p), grouped ? "gather_qmm_gguf_mma" : "gather_qmv_gguf")
              << f.name() << " " << dtype_name(t) << " M=" << m << " experts=" << experts;
          if (t != DType::f32) {
            EXPECT_EQ(std::string(select_kernel(p, "gather_qmm_gguf_mma").name),
                      "gather_qmm_gguf_mma");
          }
        }
  Problem p = affine_problem(64, DType::bf16, 4, 64, 768, 2048);
  p.format = Format::gguf(Scheme::q4_K);
  p.op = Op::gather_matmul;
  p.batch = cuda::kMaxGroupedExperts + 1;
  EXPECT_EQ(pick(p), "gather_qmv_gguf");  // more experts than the device grouping counts
  p.m = 2 * p.batch;
  EXPECT_EQ(pick(p), "gather_qmv_gguf");
}

TEST_F(SelectCuda, ForcedKernelOutsideItsRangeNamesTheReason) {
  try {
    select_kernel(affine_problem(64), "qmm_affine_tc");
    ADD_FAILURE() << "M = 64 must be refused";
  } catch (const NotSupported& e) {
    EXPECT_NE(std::string(e.what()).find("qmm_affine_tc: M = 64 is outside [1, 32]"),
              std::string::npos)
        << e.what();
  }
  const std::string why = explain(affine_problem(1, DType::f32));
  EXPECT_NE(why.find("qmm_affine_tc"), std::string::npos);
  EXPECT_NE(why.find("needs f16 or bf16 activations"), std::string::npos) << why;
}

// The integer-mma kernels' warp count on occupancies the H200 reported (132 SMs; blocks of 1..8
// warps resident per SM for each instance): host arithmetic, no GPU needed.
TEST(I8Warps, FewestWavesTimesSteps) {
  constexpr int kSms = 132;
  const int lean[cuda::kI8MaxWarps] = {16, 8, 5, 4, 3, 2, 2, 2};    // e.g. 4-bit g64
  const int heavy[cuda::kI8MaxWarps] = {12, 6, 4, 3, 2, 2, 1, 1};   // e.g. 4-bit g32 bf16
  const int light[cuda::kI8MaxWarps] = {24, 12, 8, 6, 4, 4, 3, 3};  // e.g. 3-bit g128 bf16
  // 14336 rows (896 tiles), K = 5120 in groups of 64 (20 steps): 2 warps fit one wave, 4 take two
  // at the same steps per warp: one wave wins the tie.
  EXPECT_EQ(cuda::xc_wave_warps(4, 896, 20, kSms, lean, 2), 2);
  // Groups of 32 (40 steps), six blocks of 2 per SM: 2 warps need 2 waves of 20 steps, 3 take 2
  // waves of 14.
  EXPECT_EQ(cuda::xc_wave_warps(4, 896, 40, kSms, heavy, 2), 3);
  // 5120 rows, K = 14336 in groups of 128 (28 steps): 7 and 8 warps both fit one wave in 4
  // steps: the most warps.
  EXPECT_EQ(cuda::xc_wave_warps(3, 320, 28, kSms, light, 2), 8);
  // 27648 rows (1728 tiles), 20 steps: 2, 4 and 5 warps tie at 20 over 2, 4 and 5 waves: 2-bit
  // codes take the most warps, the others the fewest waves.
  EXPECT_EQ(cuda::xc_wave_warps(2, 1728, 20, kSms, lean, 2), 5);
  EXPECT_EQ(cuda::xc_wave_warps(4, 1728, 20, kSms, lean, 2), 2);
  // No count >= 2 possible (one step, or no block resident): the fallback.
  EXPECT_EQ(cuda::xc_wave_warps(4, 896, 1, kSms, lean, 1), 1);
  const int none[cuda::kI8MaxWarps] = {};
  EXPECT_EQ(cuda::xc_wave_warps(4, 896, 20, kSms, none, 4), 4);
  // One wave with the most warps that fit it (qmv_affine_i8's rule).
  EXPECT_EQ(cuda::i8_one_wave_warps(896, 20, kSms, lean, 1), 2);
}

// qmv_affine_i8 where no count >= 2 fits one wave: 8 warps for 8-bit codes; the others the
// fewest waves times steps a warp, 1-warp blocks included and 2+ steps a warp, ties to the
// fewest waves. Occupancies of the H100's instances (132 SMs; from their registers).
TEST(I8Warps, QmvFallback) {
  constexpr int kSms = 132;
  const int r128[cuda::kI8MaxWarps] = {16, 8, 5, 4, 3, 2, 2, 2};  // e.g. 4-bit g64, M = 2
  const int r144[cuda::kI8MaxWarps] = {12, 6, 4, 3, 2, 2, 1, 1};  // e.g. 3-bit g128, M = 2
  const int r80[cuda::kI8MaxWarps] = {24, 12, 8, 6, 4, 4, 3, 3};  // e.g. 5-bit g64, M = 1
  // 27648 rows (1728 tiles), K = 5120 in groups of 64 (20 steps): 1, 2, 4 and 5 warps tie at 20
  // steps over 1, 2, 4 and 5 waves.
  EXPECT_EQ(cuda::qmv_i8_fallback_warps(4, 1728, 20, kSms, r128), 1);
  EXPECT_EQ(cuda::qmv_i8_fallback_warps(2, 1728, 20, kSms, r128), 1);
  // 28672 rows (1792 tiles), 8 steps: 8 warps would take 7 waves of 1 step (7), but a warp runs
  // 2+ steps; 1, 2 and 4 warps tie at 8.
  EXPECT_EQ(cuda::qmv_i8_fallback_warps(2, 1792, 8, kSms, r128), 1);
  // 3 warps: 2 waves of 7 steps, where 1 and 2 warps take 20.
  EXPECT_EQ(cuda::qmv_i8_fallback_warps(5, 1728, 20, kSms, r80), 3);
  // 14336 rows, groups of 128 (10 steps): 3, 5 and 6 warps tie at 8 over 2, 4 and 4 waves.
  EXPECT_EQ(cuda::qmv_i8_fallback_warps(3, 896, 10, kSms, r144), 3);
  // Groups of 32 (40 steps): 8 warps, 7 waves of 5 steps.
  EXPECT_EQ(cuda::qmv_i8_fallback_warps(3, 1728, 40, kSms, r128), 8);
  // 8-bit codes: 8 whatever the occupancy; no step or no resident block: 1.
  EXPECT_EQ(cuda::qmv_i8_fallback_warps(8, 1728, 10, kSms, r128), 8);
  EXPECT_EQ(cuda::qmv_i8_fallback_warps(4, 1728, 0, kSms, r128), 1);
  const int none[cuda::kI8MaxWarps] = {};
  EXPECT_EQ(cuda::qmv_i8_fallback_warps(4, 1728, 20, kSms, none), 1);
}

// A gather's warps: the largest power of two with at least 8 of K's steps each, at most 8.
TEST(I8Warps, GatherTakesEightStepsAWarp) {
  const std::pair<int, int> cases[] = {{1, 1},  {3, 1},  {8, 1},  {15, 1}, {16, 2},
                                       {31, 2}, {32, 4}, {56, 4}, {64, 8}, {400, 8}};
  for (auto [steps, warps] : cases)
    EXPECT_EQ(cuda::i8_gather_warps(steps), warps) << steps << " steps";
}

}  // namespace
}  // namespace quanta
