// The grid i-quants (IQ2_XXS): hand-decoded blocks, the sign-parity rule, x86's 8-bit sign move
// in its single-token order (and true products in the panel and ARM orders), the orders' sums
// close to ggml's generic one, the quantizer's blocks valid and near their input, and every
// SIMD level equal to the scalar reference bit for bit (x86 and ARM orders, whichever this
// build runs), on quantized rows and on arbitrary block bytes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/fp16.h"
#include "kernels/quant.h"
#include "kernels/quant_blocks.h"
#include "kernels/quant_internal.h"
#include "q8k_levels_check.h"
#include "test_util.h"

namespace cohort::kernels {
namespace {

// Sub-block ib32 of b: grid indices g0..g3, 7-bit signs s0..s3, scale ls.
void SetSubBlock(BlockIq2Xxs* b, int ib32, const uint8_t g[4], const uint32_t s[4], uint32_t ls) {
  const uint32_t grid = g[0] | g[1] << 8 | g[2] << 16 | static_cast<uint32_t>(g[3]) << 24;
  const uint32_t signs = s[0] | s[1] << 7 | s[2] << 14 | s[3] << 21 | ls << 28;
  std::memcpy(b->qs + 8 * ib32, &grid, 4);
  std::memcpy(b->qs + 8 * ib32 + 4, &signs, 4);
}

TEST(IQuantGrid, Iq2XxsBlockDecodesToGridTimesScaleWithEvenSigns) {
  BlockIq2Xxs b{};
  b.d = Fp32ToFp16(1.0f);
  const uint8_t g[4] = {0, 1, 0, 0};        // entry 0: all 8s; entry 1: 43 then seven 8s
  const uint32_t s[4] = {0b0000001, 0, 0b0000011, 0};  // one minus sign: the 8th takes one too
  SetSubBlock(&b, 0, g, s, 3);              // ls 3: d * 3.5 / 4 = 0.875
  std::vector<float> out(256);
  DequantizeRow(DType::kIQ2_XXS, &b, out.data(), 256);
  EXPECT_EQ(out[0], -7.0f);     // 8 * 0.875, stored sign bit
  EXPECT_EQ(out[1], 7.0f);
  EXPECT_EQ(out[7], -7.0f);     // the parity sign
  EXPECT_EQ(out[8], 37.625f);   // 43 * 0.875
  EXPECT_EQ(out[16], -7.0f);    // two stored minus signs: even, the 8th stays plus
  EXPECT_EQ(out[17], -7.0f);
  EXPECT_EQ(out[23], 7.0f);
  EXPECT_EQ(out[32], 1.0f);     // sub-block 1: all zero bytes, ls 0: 8 * 0.5 / 4
}

// Weight -8 (a stored minus sign on entry 0) at position 0 with scale 1 against a Q8_K row
// whose first value is -128: the true product is 1024 (times d / 8: 128); x86's single-token
// kernel moves the sign onto the activation in 8 bits, -(-128) wraps, and gets -128.
TEST(IQuantGrid, Iq2XxsSingleTokenX86OrderKeepsSignWrap) {
  BlockIq2Xxs w{};
  w.d = Fp32ToFp16(1.0f);
  const uint8_t g[4] = {0, 0, 0, 0};
  const uint32_t s[4] = {1, 0, 0, 0};
  SetSubBlock(&w, 0, g, s, 0);
  BlockQ8_K a{};
  a.d = 1.0f;
  a.qs[0] = -128;
  EXPECT_EQ(ref::GetIqGridVecDot(DType::kIQ2_XXS)(&w, &a, 256), 128.0f);
  EXPECT_EQ(ref::GetIqGridX86OrderVecDot(DType::kIQ2_XXS)(&w, &a, 256), -128.0f);
  EXPECT_EQ(ref::GetIqGridX86OrderVecDotGrouped(DType::kIQ2_XXS)(&w, &a, 256), 128.0f);
  EXPECT_EQ(ref::GetIqGridArmOrderVecDot(DType::kIQ2_XXS)(&w, &a, 256), 128.0f);
#if defined(__x86_64__) || defined(__i386__)
  for (SimdLevel level : SupportedSimdLevels()) {
    SCOPED_TRACE(SimdLevelName(level));
    EXPECT_EQ(GetVecDot(DType::kIQ2_XXS, level)(&w, &a, 256), -128.0f);
    EXPECT_EQ(GetVecDotGrouped(DType::kIQ2_XXS, level)(&w, &a, 256), 128.0f);
  }
#endif
}

TEST(IQuantGrid, Iq2XxsQuantizerIsNearItsInput) {
  const int64_t n = 256 * 8;
  const std::vector<float> x = testing::RandomRow(n, 5);
  std::vector<uint8_t> q(static_cast<size_t>(RowBytes(DType::kIQ2_XXS, n)));
  QuantizeRow(DType::kIQ2_XXS, x.data(), q.data(), n);
  const std::vector<float> back = testing::Dequantized(DType::kIQ2_XXS, q.data(), n);
  double err = 0, ref = 0, dot = 0;
  for (int64_t i = 0; i < n; ++i) {
    err += (back[i] - x[i]) * (back[i] - x[i]);
    ref += x[i] * x[i];
    dot += back[i] * x[i];
  }
  // A 2-bit code of Gaussian values: well correlated with the input, far from exact.
  EXPECT_LT(std::sqrt(err / ref), 0.6);  // 0.40 measured
  EXPECT_GT(dot / ref, 0.5);
  EXPECT_GT(err, 0.0);
}

// Rows with arbitrary bytes (every grid entry, sign pattern and scale) and a sane fp16 scale.
std::vector<uint8_t> RandomIq2XxsRow(int64_t n_blocks, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> row(static_cast<size_t>(n_blocks) * sizeof(BlockIq2Xxs));
  for (uint8_t& byte : row) byte = static_cast<uint8_t>(rng());
  for (int64_t i = 0; i < n_blocks; ++i) {
    const uint16_t d = Fp32ToFp16(std::uniform_real_distribution<float>(-0.05f, 0.05f)(rng));
    std::memcpy(row.data() + i * sizeof(BlockIq2Xxs), &d, 2);
  }
  return row;
}

TEST(IQuantGrid, EverySimdLevelEqualsScalarBitForBit) {
  const DType type = DType::kIQ2_XXS;
  testing::ExpectSimdLevelsEqualScalar(
      type, {ref::GetIqGridVecDot(type), {ref::GetIqGridX86OrderVecDotGrouped(type), ref::GetIqGridArmOrderVecDot(type)}},
      RandomIq2XxsRow);
}

}  // namespace
}  // namespace cohort::kernels
