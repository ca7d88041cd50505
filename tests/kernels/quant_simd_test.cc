// Every SIMD vec-dot kernel the CPU supports against the scalar reference, on odd block
// counts and rows starting 0..3 bytes past an aligned address. On x86 the scalar level sums
// in the x86 kernels' order (quant_ref_x86.cc), so every x86 level must give its bits
// exactly; the NEON kernels follow their own order and are held to a tolerance.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "kernels/quant.h"
#include "kernels/quant_internal.h"
#include "test_util.h"

namespace cohort::kernels {
namespace {

using testing::MisalignedRow;

TEST(VecDotSimd, MatchesScalarOnOddSizesAndMisalignedRows) {
  int checked_kernels = 0;
  for (SimdLevel level : SupportedSimdLevels()) {
    if (level == SimdLevel::kScalar) continue;
    for (DType type : testing::kWeightTypes) {
      const VecDotFn simd = GetVecDot(type, level);
      const VecDotFn scalar = GetVecDot(type, SimdLevel::kScalar);
      if (simd == scalar) continue;  // no kernel of its own at this level
      ++checked_kernels;
      const DType act_type = VecDotType(type);
      const int64_t block = std::max<int64_t>(Traits(type).block_size, Traits(act_type).block_size);
      // Plain types have block 1: use odd element counts around the vector widths too.
      const int64_t unit = block == 1 ? 32 : block;
      for (int64_t n_blocks : {1, 3, 7, 33}) {
        for (int64_t extra : {int64_t{0}, block == 1 ? int64_t{5} : int64_t{0}}) {
          const int64_t n = n_blocks * unit + extra;
          const std::vector<float> w = testing::RandomRow(n, static_cast<uint32_t>(n_blocks * 31 + 1));
          const std::vector<float> a = testing::RandomRow(n, static_cast<uint32_t>(n_blocks * 31 + 2), 2.0f);
          for (int offset = 0; offset < 4; ++offset) {
            SCOPED_TRACE(::testing::Message() << SimdLevelName(level) << " " << DTypeName(type)
                                              << " n=" << n << " offset=" << offset);
            MisalignedRow wq(type, n, offset), aq(act_type, n, 3 - offset);
            QuantizeRow(type, w.data(), wq.data(), n);
            QuantizeRow(act_type, a.data(), aq.data(), n);
            const auto ref = testing::FloatDot(testing::Dequantized(type, wq.data(), n),
                                               testing::Dequantized(act_type, aq.data(), n));
            const float want = scalar(wq.data(), aq.data(), n);
            const float got = simd(wq.data(), aq.data(), n);
#if defined(__x86_64__) || defined(__i386__)
            ASSERT_EQ(got, want) << "tolerance would have been " << 2e-6 * ref.abs_sum;
#else
            ASSERT_NEAR(got, want, 2e-6 * ref.abs_sum + 1e-30);
#endif
          }
        }
      }
    }
  }
  RecordProperty("checked_kernels", checked_kernels);
  if (BestSimdLevel() != SimdLevel::kScalar) {
    // A CPU with SIMD must have SIMD kernels for at least the priority types.
    EXPECT_NE(GetVecDot(DType::kQ4_0, BestSimdLevel()), GetVecDot(DType::kQ4_0, SimdLevel::kScalar));
    EXPECT_NE(GetVecDot(DType::kQ8_0, BestSimdLevel()), GetVecDot(DType::kQ8_0, SimdLevel::kScalar));
    EXPECT_NE(GetVecDot(DType::kQ4_K, BestSimdLevel()), GetVecDot(DType::kQ4_K, SimdLevel::kScalar));
    EXPECT_NE(GetVecDot(DType::kQ6_K, BestSimdLevel()), GetVecDot(DType::kQ6_K, SimdLevel::kScalar));
  }
}

// The activation quantizers: the AVX-512 Q8_0/Q8_1 rows byte for byte as the reference, on
// unaligned input, zero blocks, ties (x * 127 / amax landing on k + 0.5) and wide ranges.
TEST(QuantizeSimd, Q8RowsMatchTheReferenceByteForByte) {
  if (!HasAvx512(BestSimdLevel())) GTEST_SKIP() << "no AVX-512 on this CPU";
  for (DType type : {DType::kQ8_0, DType::kQ8_1}) {
    for (int64_t n_blocks : {1, 3, 7, 64}) {
      const int64_t n = n_blocks * 32;
      std::vector<float> x(static_cast<size_t>(n + 1));
      const std::vector<float> r = testing::RandomRow(n, static_cast<uint32_t>(n_blocks + 11), 3.0f);
      for (int64_t j = 0; j < n; ++j) {
        const int64_t b = j / 32;
        // Block 1: zeros; block 2: 127 and halves (exact ties); others: random, scaled widely.
        x[static_cast<size_t>(j + 1)] = b == 1 ? 0.0f
                                      : b == 2 ? (j % 32 == 0 ? 127.0f : static_cast<float>(j % 32) + 0.5f)
                                               : r[static_cast<size_t>(j)] * static_cast<float>(1 << (b % 9));
      }
      const float* src = x.data() + 1;  // 4 bytes past the vector's alignment
      const int64_t bytes = RowBytes(type, n);
      std::vector<uint8_t> want(static_cast<size_t>(bytes)), got(static_cast<size_t>(bytes));
      ref::QuantizeLegacyRow(type, src, want.data(), n);
      ASSERT_TRUE(avx512::QuantizeRow(type, src, got.data(), n));
      EXPECT_EQ(want, got) << DTypeName(type) << " n=" << n;
    }
  }
}

// The levels' values are names, not an order (simd_level_test.cc checks what COHORT_SIMD
// picks): scalar first, each level once, and the kernels run at one of them.
TEST(VecDotSimd, LevelsAreDistinctAndTheKernelsRunAtOne) {
  const auto levels = SupportedSimdLevels();
  ASSERT_FALSE(levels.empty());
  EXPECT_EQ(levels.front(), SimdLevel::kScalar);
  for (size_t i = 0; i < levels.size(); ++i) {
    for (size_t j = i + 1; j < levels.size(); ++j) EXPECT_NE(levels[i], levels[j]);
  }
  EXPECT_NE(std::find(levels.begin(), levels.end(), BestSimdLevel()), levels.end());
}

}  // namespace
}  // namespace cohort::kernels
