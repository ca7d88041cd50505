// IQ3_XXS and IQ3_S: hand-decoded blocks (IQ3_XXS's sign parity and IQ3_S's 9th index bit and
// free signs), x86's 8-bit sign move in the single-token order (true products in the panel and
// ARM orders), the orders' sums close to ggml's generic one, the quantizer's blocks near their
// input, the panel taking batches of >= 8 tokens, and every SIMD level equal to the scalar
// reference bit for bit (x86 and ARM orders, whichever this build runs), on quantized rows and on
// arbitrary block bytes.
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

// Sub-block ib32 of an IQ3_XXS block: 8 grid indices, 7-bit signs s0..s3, scale ls.
void SetSubBlock(BlockIq3Xxs* b, int ib32, const uint8_t g[8], const uint32_t s[4], uint32_t ls) {
  std::memcpy(b->qs + 8 * ib32, g, 8);
  const uint32_t word = s[0] | s[1] << 7 | s[2] << 14 | s[3] << 21 | ls << 28;
  std::memcpy(b->qs + 64 + 4 * ib32, &word, 4);
}

TEST(IQuant3, Iq3XxsBlockDecodesToGridTimesScaleWithEvenSigns) {
  BlockIq3Xxs b{};
  b.d = Fp32ToFp16(1.0f);
  const uint8_t g[8] = {5, 0, 0, 0, 0, 0, 0, 0};  // entry 5: 62, 12, 4, 4; entry 0: all 4s
  const uint32_t s[4] = {0b0000001, 0b0000011, 0, 0};  // one minus sign: the 8th takes one too
  SetSubBlock(&b, 0, g, s, 3);                      // ls 3: d * 3.5 / 2 = 1.75
  std::vector<float> out(256);
  DequantizeRow(DType::kIQ3_XXS, &b, out.data(), 256);
  EXPECT_EQ(out[0], -108.5f);  // 62 * 1.75, stored sign bit
  EXPECT_EQ(out[1], 21.0f);
  EXPECT_EQ(out[2], 7.0f);
  EXPECT_EQ(out[7], -7.0f);  // the parity sign
  EXPECT_EQ(out[8], -7.0f);  // two stored minus signs: even, the 8th stays plus
  EXPECT_EQ(out[9], -7.0f);
  EXPECT_EQ(out[15], 7.0f);
  EXPECT_EQ(out[32], 1.0f);  // sub-block 1: all zero bytes, ls 0: 4 * 0.5 / 2
}

TEST(IQuant3, Iq3SBlockDecodesNinthIndexBitFreeSignsAndOddScale) {
  BlockIq3S b{};
  b.d = Fp32ToFp16(1.0f);
  b.qh[1] = 1;         // sub-block 1, index 0: entry 256 (7, 5, 9, 5)
  b.signs[4] = 1;      // one minus sign, no parity rule
  b.scales[0] = 2 << 4;  // sub-block 1 (the high nibble): ls 2, 1 + 2 * 2 = 5; sub-block 0: 1
  std::vector<float> out(256);
  DequantizeRow(DType::kIQ3_S, &b, out.data(), 256);
  EXPECT_EQ(out[0], 1.0f);  // entry 0: all 1s
  EXPECT_EQ(out[31], 1.0f);
  EXPECT_EQ(out[32], -35.0f);
  EXPECT_EQ(out[33], 25.0f);
  EXPECT_EQ(out[34], 45.0f);
  EXPECT_EQ(out[35], 25.0f);
  EXPECT_EQ(out[36], 5.0f);
  EXPECT_EQ(out[39], 5.0f);  // stays plus
  EXPECT_EQ(out[64], 1.0f);
}

// A weight with a minus sign at position 0 (magnitude 4 or 1, scale 1) against a Q8_K row whose
// first value is -128: x86's single-token kernels move the sign onto the activation in 8 bits,
// -(-128) wraps, and the product's sign flips; the other orders keep the true product.
TEST(IQuant3, SingleTokenX86OrderKeepsSignWrap) {
  BlockIq3Xxs xxs{};
  xxs.d = Fp32ToFp16(1.0f);
  const uint8_t g[8] = {};
  const uint32_t s[4] = {1, 0, 0, 0};
  SetSubBlock(&xxs, 0, g, s, 0);
  BlockIq3S is{};
  is.d = Fp32ToFp16(1.0f);
  is.signs[0] = 1;
  BlockQ8_K a{};
  a.d = 1.0f;
  a.qs[0] = -128;
  // IQ3_XXS: -4 * -128 * d / 4 = 128; IQ3_S: -1 * -128 = 128.
  for (auto [type, w] : {std::pair<DType, const void*>{DType::kIQ3_XXS, &xxs}, {DType::kIQ3_S, &is}}) {
    SCOPED_TRACE(DTypeName(type));
    EXPECT_EQ(ref::GetIq3VecDot(type)(w, &a, 256), 128.0f);
    EXPECT_EQ(ref::GetIq3X86OrderVecDot(type)(w, &a, 256), -128.0f);
    EXPECT_EQ(ref::GetIq3X86OrderVecDotGrouped(type)(w, &a, 256), 128.0f);
    EXPECT_EQ(ref::GetIq3ArmOrderVecDot(type)(w, &a, 256), 128.0f);
#if defined(__x86_64__) || defined(__i386__)
    for (SimdLevel level : SupportedSimdLevels()) {
      SCOPED_TRACE(SimdLevelName(level));
      EXPECT_EQ(GetVecDot(type, level)(w, &a, 256), -128.0f);
      EXPECT_EQ(GetVecDotGrouped(type, level)(w, &a, 256), 128.0f);
    }
#else
    for (SimdLevel level : SupportedSimdLevels()) {
      SCOPED_TRACE(SimdLevelName(level));
      EXPECT_EQ(GetVecDot(type, level)(w, &a, 256), 128.0f);
      EXPECT_EQ(GetVecDotGrouped(type, level)(w, &a, 256), 128.0f);
    }
#endif
  }
}

TEST(IQuant3, PanelTakesWholeBatchesOfAtLeastEight) {
  for (DType type : {DType::kIQ3_XXS, DType::kIQ3_S}) {
    EXPECT_EQ(VecDotType(type), DType::kQ8_K);
    EXPECT_EQ(GroupedTokens(type, 7), 0);
    EXPECT_EQ(GroupedTokens(type, 8), 8);
    EXPECT_EQ(GroupedTokens(type, 13), 13);
  }
}

TEST(IQuant3, QuantizerIsNearItsInput) {
  const int64_t n = 256 * 8;
  const std::vector<float> x = testing::RandomRow(n, 5);
  // A 3-bit code of Gaussian values: well correlated with the input, far from exact.
  for (auto [type, rel_max] : {std::pair{DType::kIQ3_XXS, 0.35}, std::pair{DType::kIQ3_S, 0.35}}) {
    SCOPED_TRACE(DTypeName(type));
    std::vector<uint8_t> q(static_cast<size_t>(RowBytes(type, n)));
    QuantizeRow(type, x.data(), q.data(), n);
    const std::vector<float> back = testing::Dequantized(type, q.data(), n);
    double err = 0, ref = 0, dot = 0;
    for (int64_t i = 0; i < n; ++i) {
      err += (back[i] - x[i]) * (back[i] - x[i]);
      ref += x[i] * x[i];
      dot += back[i] * x[i];
    }
    EXPECT_LT(std::sqrt(err / ref), rel_max);
    EXPECT_GT(dot / ref, 0.8);
    EXPECT_GT(err, 0.0);
  }
}

// Rows with arbitrary bytes (every grid entry, sign pattern and scale) and a sane fp16 scale.
std::vector<uint8_t> RandomRow(DType type, int64_t n_blocks, uint32_t seed) {
  const size_t block_bytes = Traits(type).type_size;
  std::mt19937 rng(seed);
  std::vector<uint8_t> row(static_cast<size_t>(n_blocks) * block_bytes);
  for (uint8_t& byte : row) byte = static_cast<uint8_t>(rng());
  for (int64_t i = 0; i < n_blocks; ++i) {
    const uint16_t d = Fp32ToFp16(std::uniform_real_distribution<float>(-0.05f, 0.05f)(rng));
    std::memcpy(row.data() + i * block_bytes, &d, 2);
  }
  return row;
}

TEST(IQuant3, EverySimdLevelEqualsScalarBitForBit) {
  for (DType type : {DType::kIQ3_XXS, DType::kIQ3_S}) {
    testing::ExpectSimdLevelsEqualScalar(
        type, {ref::GetIq3VecDot(type), {ref::GetIq3X86OrderVecDotGrouped(type), ref::GetIq3ArmOrderVecDot(type)}},
        [type](int64_t n_blocks, uint32_t seed) { return RandomRow(type, n_blocks, seed); });
  }
}

}  // namespace
}  // namespace cohort::kernels
