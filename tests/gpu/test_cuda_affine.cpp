// The affine CUDA families against the fp64 oracle: every bits x group x dtype the kernel
// serves, M in {1, 2, 3, 4, 7, 8, 16, 31, 32, 64, 257}, ragged N and K, split-K shapes, both
// layouts; outputs poisoned first. Plus the selector's choice run end to end.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>

#include "cuda/families.hpp"
#include "cuda/i8_layout.hpp"
#include "gpu/gpu_util.hpp"

namespace quanta {
namespace {

using gpu_test::DeviceDense;
using gpu_test::host_weights;

struct Case {
  int bits, group;
};

std::vector<Case> affine_cases() {
  std::vector<Case> v;
  for (int b : detail::kAffineBits)
    for (int g : detail::kAffineGroups) v.push_back({b, g});
  return v;
}

class CudaAffine : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  }
};

// Runs `kernel` (or the selector, "auto") and checks against the oracle. Returns y's bytes.
std::vector<unsigned char> run_check(const QuantizedMatrix& hw, const QuantizedMatrix& w, DType t,
                                     int64_t m, std::string_view kernel, uint32_t seed) {
  DeviceDense x(test::random_dense(t, m, hw.k, seed, 1.0f, false));
  DeviceDense y(t, m, hw.n);
  y.poison();
  Context ctx;
  ctx.kernel = kernel;
  matmul(x.view(), w, y.mut(), ctx);
  y.download();
  const auto c = ref::compare(y.host.view(), ref::matmul(x.host.view(), hw), t);
  EXPECT_TRUE(c.pass) << kernel << " " << gpu_test::describe(hw, t, m) << " rel_l2=" << c.rel_l2
                      << " nonfinite=" << c.nonfinite;
  return y.host.bytes;
}

TEST_P(CudaAffine, TensorCoreKernelEveryM) {
  const auto [bits, group] = GetParam();
  for (DType t : {DType::f16, DType::bf16}) {
    const QuantizedMatrix hw = host_weights(Format::affine(bits, group), t, 40, 256, Layout::nk, 3);
    const QuantizedMatrix w = to_device(hw);
    for (int64_t m : {1, 2, 3, 4, 7, 8, 9, 16, 17, 31, 32})
      run_check(hw, w, t, m, "qmm_affine_tc", static_cast<uint32_t>(m));
    if (!(bits == 8 && t == DType::bf16)) run_check(hw, w, t, 1, "qmv_affine_tc", 1);
  }
}

// qmm_affine_mma forced (on sm_90a the selector runs qmm_affine_wgmma at these M): one M tile
// and a partial one, a second tile holding two rows (its warps past them skip their mma), and
// split-K over the idle SMs; N = 136 (a partial column tile), K = 384 (three stages).
TEST_P(CudaAffine, TileMmaKernel) {
  const auto [bits, group] = GetParam();
  for (DType t : {DType::f16, DType::bf16}) {
    const QuantizedMatrix hw =
        host_weights(Format::affine(bits, group), t, 136, 384, Layout::nk, 9);
    const QuantizedMatrix w = to_device(hw);
    for (int64_t m : {33, 130, 200})
      run_check(hw, w, t, m, "qmm_affine_mma", static_cast<uint32_t>(m));
  }
}

// Split-K (several CTAs per row tile, the last one sums), ragged N, a K tail inside a stage.
TEST_P(CudaAffine, TensorCoreKernelSplitK) {
  const auto [bits, group] = GetParam();
  for (DType t : {DType::f16, DType::bf16}) {
    const int64_t k = 4096 + 256 + (group == 128 ? 256 : 128);  // not a multiple of 512
    const QuantizedMatrix hw = host_weights(Format::affine(bits, group), t, 264, k, Layout::nk, 4);
    const QuantizedMatrix w = to_device(hw);
    for (int64_t m : {1, 5, 20}) {
      const auto a = run_check(hw, w, t, m, "qmm_affine_tc", 7);
      const auto b = run_check(hw, w, t, m, "qmm_affine_tc", 7);
      EXPECT_EQ(a, b) << "split-K result changed between runs (bits " << bits << ", M " << m << ")";
    }
    if (bits == 8 && t == DType::bf16) continue;  // qmv_affine_tc declines it (7-bit mantissa)
    const auto a = run_check(hw, w, t, 1, "qmv_affine_tc", 8);
    const auto b = run_check(hw, w, t, 1, "qmv_affine_tc", 8);
    EXPECT_EQ(a, b) << "qmv_affine_tc result changed between runs (bits " << bits << ")";
  }
}

// The register-direct M = 1 kernel: ragged N (rows past N are never stored), one step and many
// steps, every warp count the launcher may pick; deterministic (no atomics).
TEST_P(CudaAffine, RegisterDirectQmv) {
  const auto [bits, group] = GetParam();
  for (DType t : {DType::f16, DType::bf16}) {
    if (bits == 8 && t == DType::bf16) continue;  // declined: bf16 cannot hold 8-bit codes
    for (const auto& [n, k] : {std::pair<int64_t, int64_t>{40, 128}, {264, 2048}, {17, 4480}}) {
      const QuantizedMatrix hw = host_weights(Format::affine(bits, group), t, n, k, Layout::nk, 11);
      const QuantizedMatrix w = to_device(hw);
      const auto a = run_check(hw, w, t, 1, "qmv_affine_rd", 12);
      const auto b = run_check(hw, w, t, 1, "qmv_affine_rd", 12);
      EXPECT_EQ(a, b) << "qmv_affine_rd result changed between runs";
    }
  }
}

// The integer-mma kernel (every width, M <= 2): the same shapes; x's int8 planes keep f16/bf16
// inside their bounds.
TEST_P(CudaAffine, IntegerMmaQmv) {
  const auto [bits, group] = GetParam();
  // The launcher's choice of how warps share K's steps, then each forced: interleaved and
  // contiguous ranges (with warps left without steps where K is short).
  for (const char* contig : {"", "0", "1"}) {
    if (*contig) ::setenv("QUANTA_QMV_I8_CONTIG", contig, 1);
    for (DType t : {DType::f16, DType::bf16}) {
      // K multiples of 4 groups of 128: one step, several, and an odd count per warp.
      for (const auto& [n, k] : {std::pair<int64_t, int64_t>{40, 512}, {264, 2048}, {17, 4608}}) {
        const QuantizedMatrix hw =
            host_weights(Format::affine(bits, group), t, n, k, Layout::nk, 13);
        const QuantizedMatrix w = to_device(hw);
        for (int64_t m : {1, 2}) {
          const auto a = run_check(hw, w, t, m, "qmv_affine_i8", 14);
          const auto b = run_check(hw, w, t, m, "qmv_affine_i8", 14);
          EXPECT_EQ(a, b) << "qmv_affine_i8 result changed between runs (M = " << m
                          << ", QUANTA_QMV_I8_CONTIG=" << contig << ")";
        }
      }
    }
  }
  ::unsetenv("QUANTA_QMV_I8_CONTIG");
}

// The integer-mma kernel for M = 3..16 (rows of x as mma columns; 1, 2 or 4 column tiles, M = 9
// and 12 with tiles holding no or few rows of x): every width whose lane quarter of a group is
// whole unpack units (3/5/6 bits through the byte-permute unpacks).
TEST_P(CudaAffine, IntegerMmaSmallM) {
  const auto [bits, group] = GetParam();
  if ((group / 4) % cuda::i8_unit_codes(bits) != 0)
    GTEST_SKIP() << "qmm_affine_i8 needs a lane's quarter of a group to be whole unpack units";
  for (DType t : {DType::f16, DType::bf16}) {
    // One step of 4 groups, several, an odd count per warp, ragged N.
    for (const auto& [n, k] : {std::pair<int64_t, int64_t>{40, 512}, {264, 2048}, {17, 4608}}) {
      const QuantizedMatrix hw = host_weights(Format::affine(bits, group), t, n, k, Layout::nk, 15);
      const QuantizedMatrix w = to_device(hw);
      for (int64_t m : {3, 4, 5, 7, 8, 9, 12, 16}) {
        if (bits == 6 && group == 64 && m == 8) continue;  // declined: qmm_affine_tc is faster
        // Four tiles exist for 5-bit g128 and 8-bit g64 only (qmm_affine_tc faster elsewhere).
        const bool four_tiles = (bits == 5 && group == 128) || (bits == 8 && group == 64);
        if (m > 8 && !four_tiles) continue;
        const auto a = run_check(hw, w, t, m, "qmm_affine_i8", 16);
        const auto b = run_check(hw, w, t, m, "qmm_affine_i8", 16);
        EXPECT_EQ(a, b) << "qmm_affine_i8 result changed between runs (M = " << m << ")";
      }
    }
  }
}

// The register-fed kernel (every width, M = 5..32): 1, 2 and 4 column tiles (M = 17 and 24 with
// tiles holding one or no rows of x), odd M, ragged N (rows past N never stored), K with a
// partial last stage (chunks past K zero) where the group allows it, stream-K splits (several
// CTAs per row tile) and deterministic reruns. Forced: the M where the selector runs it differ
// per width (qmm_affine_rf_supports).
TEST_P(CudaAffine, RegisterFedQmm) {
  const auto [bits, group] = GetParam();
  auto accepts = [&](DType t, int64_t m, int64_t n, int64_t k) {
    Problem p;
    p.format = Format::affine(bits, group);
    p.dtype = t;
    p.device = Location::device;
    p.m = m;
    p.n = n;
    p.k = k;
    p.compute_capability = cuda::compute_capability();
    return cuda::qmm_affine_rf_supports(p).empty();
  };
  int runs = 0;
  // K: one stage; a stage and a half (g32: 130 groups, g64: 70); many stages.
  const int64_t ragged_k = group == 32 ? 4160 : group == 64 ? 4480 : 4608;
  for (DType t : {DType::f16, DType::bf16})
    for (const auto& [n, k] : {std::pair<int64_t, int64_t>{40, 256}, {264, ragged_k}, {17, 2048}}) {
      const QuantizedMatrix hw = host_weights(Format::affine(bits, group), t, n, k, Layout::nk, 23);
      const QuantizedMatrix w = to_device(hw);
      for (int64_t m : {5, 8, 9, 12, 16, 17, 24, 31, 32}) {
        if (!accepts(t, m, n, k)) continue;
        ++runs;
        const auto a = run_check(hw, w, t, m, "qmm_affine_rf", static_cast<uint32_t>(m));
        if (m == 9 || m == 17 || m == 32) {
          const auto b = run_check(hw, w, t, m, "qmm_affine_rf", static_cast<uint32_t>(m));
          EXPECT_EQ(a, b) << "qmm_affine_rf result changed between runs (M = " << m << ")";
        }
      }
    }
  if (runs == 0) GTEST_SKIP() << "qmm_affine_rf does not serve " << bits << "-bit g" << group;
}

// The tensor-copy ring kernel (4-bit, M <= 16; K / group a multiple of 8): 1 and 2 column tiles
// (M = 9 with one row of x in the second), ragged N (rows past N read as zeros), row tiles split
// between CTAs (every CTA one unit) and CTAs crossing row tiles (4100 x 4096: 528 units for at
// most 2-3 CTAs per SM), deterministic reruns.
TEST_P(CudaAffine, SharedRingQmm) {
  const auto [bits, group] = GetParam();
  if (bits != 4) GTEST_SKIP() << "qmm_affine_ring serves 4-bit codes";
  Problem p;
  p.format = Format::affine(bits, group);
  p.dtype = DType::f16;
  p.device = Location::device;
  p.m = 16;
  p.n = 264;
  p.k = 9216;
  p.compute_capability = cuda::compute_capability();
  if (const std::string why = cuda::qmm_affine_ring_supports(p); !why.empty())
    GTEST_SKIP() << "qmm_affine_ring: " << why;  // before sm_90, or no sm_90a code built
  for (DType t : {DType::f16, DType::bf16})
    for (const auto& [n, k] :
         {std::pair<int64_t, int64_t>{40, 1024}, {264, 9216}, {17, 2048}, {4100, 4096}}) {
      const QuantizedMatrix hw = host_weights(Format::affine(bits, group), t, n, k, Layout::nk, 29);
      const QuantizedMatrix w = to_device(hw);
      for (int64_t m : {1, 2, 3, 5, 8, 9, 12, 16}) {
        if (n == 4100 && m != 1 && m != 16) continue;
        const auto a = run_check(hw, w, t, m, "qmm_affine_ring", static_cast<uint32_t>(m));
        if (m == 1 || m == 9) {
          const auto b = run_check(hw, w, t, m, "qmm_affine_ring", static_cast<uint32_t>(m));
          EXPECT_EQ(a, b) << "qmm_affine_ring result changed between runs (M = " << m << ")";
        }
      }
    }
}

TEST_P(CudaAffine, DequantizeThenCublas) {
  const auto [bits, group] = GetParam();
  for (DType t : {DType::f16, DType::bf16}) {
    const QuantizedMatrix hw =
        host_weights(Format::affine(bits, group), t, 136, 256, Layout::nk, 17);
    const QuantizedMatrix w = to_device(hw);
    for (int64_t m : {512, 515}) run_check(hw, w, t, m, "qmm_affine_dq", 18);
    // [K, N] past qvm_affine's M <= 8.
    const QuantizedMatrix hk =
        host_weights(Format::affine(bits, group), t, 96, 512, Layout::kn, 19);
    const QuantizedMatrix wk = to_device(hk);
    for (int64_t m : {9, 64}) run_check(hk, wk, t, m, "qmm_affine_dq", 20);
  }
}

// [K, N] weights through a transposed [N, K] copy: whole and partial transpose tiles (128 x 128
// codes for 3/5/6 bits; 128-256 K-rows x 128-512 columns for 2/4/8), one tile and several in each
// direction, M from the decode range to the wgmma one, every dtype.
TEST_P(CudaAffine, RepackedKnRunsTheNkKernels) {
  const auto [bits, group] = GetParam();
  for (DType t : kAllDTypes)
    for (const auto& [n, k] :
         {std::pair<int64_t, int64_t>{128, 512}, {160, 3 * group}, {544, 640}}) {
      const QuantizedMatrix hw = host_weights(Format::affine(bits, group), t, n, k, Layout::kn, 25);
      const QuantizedMatrix w = to_device(hw);
      for (int64_t m : {1, 2, 9, 33, 300})
        run_check(hw, w, t, m, "qmm_affine_repack", static_cast<uint32_t>(m + 26));
    }
}

// quanta::prepack of a [K, N] device matrix: its [N, K] copy made once (N = 256: with the copy's
// own wgmma pack where the width has one; N = 160: without), read by the [N, K] kernels at every
// M after the original buffers are overwritten (only the copy gives the right product); the pack
// carried over to another matrix is not used.
TEST_P(CudaAffine, KnDevicePack) {
  const auto [bits, group] = GetParam();
  const Format f = Format::affine(bits, group);
  for (DType t : kAllDTypes)
    for (const auto& [n, k] : {std::pair<int64_t, int64_t>{256, 640}, {160, 3 * group}}) {
      const QuantizedMatrix hw = host_weights(f, t, n, k, Layout::kn, 51);
      const QuantizedMatrix w = to_device(hw);
      const QuantizedMatrix p = prepack(w);
      ASSERT_TRUE(p.device_pack) << gpu_test::describe(hw, t, 1);
      EXPECT_EQ(p.codes, w.codes);  // the original buffers are shared
      run_check(hw, p, t, 9, "qmm_affine_repack", 52);
      const Footprint fp = w.footprint();
      QUANTA_CUDA_CHECK(cudaMemset(w.codes, 0x5A, fp.code_bytes));
      QUANTA_CUDA_CHECK(cudaMemset(w.scales, 0x11, fp.scale_bytes));
      QUANTA_CUDA_CHECK(cudaMemset(w.biases, 0x22, fp.bias_bytes));
      for (int64_t m : {1, 2, 3, 8, 16, 33, 64, 257})
        run_check(hw, p, t, m, "auto", static_cast<uint32_t>(53 + m));
      const QuantizedMatrix hw2 = host_weights(f, t, n, k, Layout::kn, 54);
      QuantizedMatrix w2 = to_device(hw2);
      w2.device_pack = p.device_pack;  // made from other buffers: must not be read
      for (int64_t m : {1, 9}) run_check(hw2, w2, t, m, "auto", 55);
    }
}

// CUTLASS's mixed-input wgmma GEMM (sm_90a): every token tile (M picks 64, 128 or 256 wide; 192
// forced), ragged M, N not a multiple of the 128-row tile, K in one stage and in many (stream-K
// splits K when the tiles are fewer than the SMs, so partial tiles are reduced across CTAs).
TEST_P(CudaAffine, WgmmaKernel) {
  const auto [bits, group] = GetParam();
  if ((bits != 2 && bits != 4 && bits != 8) || group % 64 != 0)
    GTEST_SKIP() << "qmm_affine_wgmma serves 2, 4 and 8-bit codes in groups of 64k";
  if (cuda::compute_capability() != 90) GTEST_SKIP() << "qmm_affine_wgmma needs sm_90";
  for (DType t : {DType::f16, DType::bf16})
    for (const auto& [n, k] : {std::pair<int64_t, int64_t>{136, 256}, {264, 4224}}) {
      const QuantizedMatrix hw = host_weights(Format::affine(bits, group), t, n, k, Layout::nk, 21);
      const QuantizedMatrix w = to_device(hw);
      for (int64_t m : {24, 33, 64, 100, 200, 300, 515})
        if (bits != 2 || m > 32) run_check(hw, w, t, m, "qmm_affine_wgmma", 22);  // 2-bit: M > 32
      ::setenv("QUANTA_QMM_WGMMA_TOKENS", "192", 1);  // chosen only where W has 48+ row tiles
      for (int64_t m : {100, 300}) run_check(hw, w, t, m, "qmm_affine_wgmma", 23);
      ::unsetenv("QUANTA_QMM_WGMMA_TOKENS");
    }
}

// quanta::prepack of a device matrix: 2/4/8-bit codes reordered for qmm_affine_wgmma's tiles (M =
// 40: 64 tokens, 100, 300 and 384: 128, and 192 forced, 515: 256 in one CTA per
// cluster, 1024: clusters of two; K = 4160 ends on a partial 128-wide K step) and scales
// transposed once;
// a pack carried over to another matrix is not used; widths and N the pack does not serve get
// none (N not a multiple of 128 computed wrong on reordered codes) and still compute right.
TEST_P(CudaAffine, WgmmaDevicePack) {
  const auto [bits, group] = GetParam();
  if ((bits != 2 && bits != 4 && bits != 8) || group % 64 != 0)
    GTEST_SKIP() << "the device pack serves 2-, 4- and 8-bit groups of 64k";
  if (cuda::compute_capability() != 90) GTEST_SKIP() << "qmm_affine_wgmma needs sm_90";
  const int64_t k = group == 128 ? 4224 : 4160;
  const Format f = Format::affine(bits, group);
  for (DType t : {DType::f16, DType::bf16}) {
    const QuantizedMatrix hw = host_weights(f, t, 256, k, Layout::nk, 41);
    const QuantizedMatrix p = prepack(to_device(hw));
    ASSERT_TRUE(p.device_pack) << gpu_test::describe(hw, t, 1);
    EXPECT_TRUE(p.describe().ends_with(" packed")) << p.describe();
    for (int64_t m : {40, 100, 300, 384, 515, 1024}) run_check(hw, p, t, m, "qmm_affine_wgmma", 42);
    // 192-token tiles (chosen only where W has 48+ row tiles), forced.
    ::setenv("QUANTA_QMM_WGMMA_TOKENS", "192", 1);
    for (int64_t m : {100, 300, 384}) run_check(hw, p, t, m, "qmm_affine_wgmma", 49);
    ::unsetenv("QUANTA_QMM_WGMMA_TOKENS");
    for (int64_t m : {1, 1024}) run_check(hw, p, t, m, "auto", 43);
    const QuantizedMatrix hw2 = host_weights(f, t, 256, k, Layout::nk, 44);
    QuantizedMatrix w2 = to_device(hw2);
    w2.device_pack = p.device_pack;  // made from other buffers: must not be read
    run_check(hw2, w2, t, 1024, "qmm_affine_wgmma", 45);
    const QuantizedMatrix hw3 = host_weights(f, t, 264, k, Layout::nk, 47);
    const QuantizedMatrix p3 = prepack(to_device(hw3));
    EXPECT_FALSE(p3.device_pack);
    run_check(hw3, p3, t, 1024, "qmm_affine_wgmma", 48);
  }
  const QuantizedMatrix other =
      host_weights(Format::affine(3, group), DType::f16, 256, k, Layout::nk, 46);
  EXPECT_FALSE(prepack(to_device(other)).device_pack);
}

// The register-fed wgmma kernel (sm_90a, 4-bit): 64- and 128-token tiles (M = 33..64 and
// 65..128), several token tiles (M = 200), ragged M and N (rows past N never stored), K with a
// partial last k-block (chunks past K are zeros: K = 4160 leaves two of four), one k-block, K
// split over CTAs (few row tiles), and deterministic reruns.
TEST_P(CudaAffine, WgmmaRegisterFed) {
  const auto [bits, group] = GetParam();
  if (bits != 4) GTEST_SKIP() << "qmm_affine_wgrf serves 4-bit codes";
  if (cuda::compute_capability() != 90) GTEST_SKIP() << "qmm_affine_wgrf needs sm_90";
  const int64_t ragged_k = group == 128 ? 4224 : 4160;
  for (DType t : {DType::f16, DType::bf16})
    for (const auto& [n, k] :
         {std::pair<int64_t, int64_t>{136, 128}, {264, ragged_k}, {1000, 2048}}) {
      const QuantizedMatrix hw = host_weights(Format::affine(bits, group), t, n, k, Layout::nk, 27);
      const QuantizedMatrix w = to_device(hw);
      for (int64_t m : {1, 33, 64, 65, 100, 128, 200}) {
        const auto a = run_check(hw, w, t, m, "qmm_affine_wgrf", static_cast<uint32_t>(m + 28));
        if (m == 33 || m == 100) {
          const auto b = run_check(hw, w, t, m, "qmm_affine_wgrf", static_cast<uint32_t>(m + 28));
          EXPECT_EQ(a, b) << "qmm_affine_wgrf result changed between runs (M = " << m << ")";
        }
      }
    }
}

// A 1 MB slab budget leaves 1024 dense rows of K = 512 per slab: N = 2100 takes three equal
// slabs of 768 rows.
TEST(CudaAffineDq, SeveralSlabs) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  const QuantizedMatrix hw =
      host_weights(Format::affine(4, 64), DType::bf16, 2100, 512, Layout::nk, 19);
  ::setenv("QUANTA_QMM_DQ_SLAB_MB", "1", 1);
  run_check(hw, to_device(hw), DType::bf16, 512, "qmm_affine_dq", 20);
  ::unsetenv("QUANTA_QMM_DQ_SLAB_MB");
}

TEST_P(CudaAffine, F32Kernel) {
  const auto [bits, group] = GetParam();
  const QuantizedMatrix hw =
      host_weights(Format::affine(bits, group), DType::f32, 36, 384, Layout::nk, 5);
  const QuantizedMatrix w = to_device(hw);
  for (int64_t m : {1, 2, 3, 5, 8}) run_check(hw, w, DType::f32, m, "qmv_affine_f32", 3);
}

TEST_P(CudaAffine, QvmKernel) {
  const auto [bits, group] = GetParam();
  for (DType t : kAllDTypes) {
    const QuantizedMatrix hw = host_weights(Format::affine(bits, group), t, 96, 512, Layout::kn, 6);
    const QuantizedMatrix w = to_device(hw);
    for (int64_t m : {1, 2, 3, 8}) run_check(hw, w, t, m, "qvm_affine", 9);
  }
  // Split over K and more than one column tile.
  const QuantizedMatrix hw =
      host_weights(Format::affine(bits, group), DType::bf16, 1056, 2048, Layout::kn, 7);
  const QuantizedMatrix w = to_device(hw);
  run_check(hw, w, DType::bf16, 1, "qvm_affine", 1);
}

// Whatever the selector picks, over the M sweep (bits 4 and one odd width run every M).
TEST_P(CudaAffine, AutoSelectionEveryM) {
  const auto [bits, group] = GetParam();
  if (group != 64) GTEST_SKIP() << "group 64 covers the routing";
  for (DType t : kAllDTypes) {
    const QuantizedMatrix hw = host_weights(Format::affine(bits, group), t, 72, 512, Layout::nk, 8);
    const QuantizedMatrix w = to_device(hw);
    for (int64_t m : {1, 2, 3, 4, 7, 8, 16, 31, 32, 33, 64, 257})
      run_check(hw, w, t, m, "auto", static_cast<uint32_t>(m + 100));
  }
}

// gather_qmv_affine: a stack of 3 experts, each row of x with its own (repeats included), every
// dtype; K = 1152 (36 chunks: lanes 0-3 take two, the others one; whole groups of 128), N = 37
// (a partial warp of rows); out-of-range ids flagged: those rows NaN, the others right, an error
// after the launch.
TEST_P(CudaAffine, GatherKernel) {
  const auto [bits, group] = GetParam();
  for (DType t : kAllDTypes) {
    const QuantizedMatrix hw =
        host_weights(Format::affine(bits, group), t, 37, 1152, Layout::nk, 17, /*batch=*/3);
    gpu_test::check_gather(hw, to_device(hw), t, "gather_qmv_affine", 18);
  }
}

// gather_qmv_affine_i8: qmv_affine_i8 against each row's expert, f16 and bf16 x, 3 experts of
// 37 x 1536 (K a multiple of 4 groups of 128; a partial 16-row tile). From 1.5 rows an expert
// (M >= 5) passes of up to two rows of one expert on the M = 2 instance: check_grouped_gather's
// row sets (repeats, bad ids: NaN rows and an error; runs of odd length; an unused expert;
// shuffled ids). Below it a grid row per row of x: four rows, and three with a bad id.
TEST_P(CudaAffine, GatherI8Kernel) {
  const auto [bits, group] = GetParam();
  for (DType t : {DType::f16, DType::bf16}) {
    const QuantizedMatrix hw =
        host_weights(Format::affine(bits, group), t, 37, 1536, Layout::nk, 29, /*batch=*/3);
    const QuantizedMatrix w = to_device(hw);
    gpu_test::check_grouped_gather(hw, w, t, "gather_qmv_affine_i8", 41, 30);
    gpu_test::check_gather_ids(hw, w, t, "gather_qmv_affine_i8", {2, 0, 1, 2}, 31);
    gpu_test::check_gather_ids(hw, w, t, "gather_qmv_affine_i8", {1, 5, 0}, 32);
  }
}

// gather_qmm_affine_mma: rows grouped by expert on the device, passes of up to 128 rows of one
// expert on qmm_affine_mma's tiles. check_gather's six rows (repeats, then two bad ids: NaN rows
// and an error), then 173 rows in runs over three experts (140 of expert 2: a full pass and a
// partial one; 22; 11), 9 rows with an expert unused and 70 with ids shuffled; N = 300 (a
// partial third column tile), K = 1152 (nine stages of 128).
TEST_P(CudaAffine, GroupedGather) {
  const auto [bits, group] = GetParam();
  for (DType t : {DType::f16, DType::bf16}) {
    const QuantizedMatrix hw =
        host_weights(Format::affine(bits, group), t, 300, 1152, Layout::nk, 23, /*batch=*/3);
    gpu_test::check_grouped_gather(hw, to_device(hw), t, "gather_qmm_affine_mma", 140, 24);
  }
}

INSTANTIATE_TEST_SUITE_P(All, CudaAffine, ::testing::ValuesIn(affine_cases()), [](const auto& p) {
  return "b" + std::to_string(p.param.bits) + "_g" + std::to_string(p.param.group);
});

}  // namespace
}  // namespace quanta
