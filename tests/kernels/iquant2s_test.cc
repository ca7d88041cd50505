// IQ2_XS and IQ2_S: hand-decoded blocks (9- and 10-bit grid indices, IQ2_XS's sign parity,
// IQ2_S's explicit signs, a scale per 16 values), x86's 8-bit sign move in the single-token
// order (and true products in the panel and ARM orders), the orders' sums close to ggml's generic
// one, the quantizer's blocks valid and near their input, and every SIMD level equal to the
// scalar reference bit for bit (x86 and ARM orders, whichever this build runs), on quantized
// rows and on arbitrary block bytes.
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

constexpr DType kTypes[] = {DType::kIQ2_XS, DType::kIQ2_S};

TEST(IQuant2s, Iq2XsBlockDecodesNineBitIndicesWithEvenSignsAndScalesPer16) {
  BlockIq2Xs b{};
  b.d = Fp32ToFp16(1.0f);
  // Group 0: entry 300 = {8, 25, 25, 8, 8, 25, 8, 25}, one stored minus sign: the 8th takes one.
  b.qs[0] = static_cast<uint16_t>(300 | 0b0000001 << 9);
  b.qs[1] = static_cast<uint16_t>(1 | 0b0000011 << 9);  // entry 1 = {43, 8 x 7}: two, even
  b.qs[2] = 1;                                           // values 16..23: the high nibble's scale
  b.scales[0] = 3 | 0 << 4;  // ls 3 for values 0..15 (d * 3.5 / 4), 0 for 16..31 (d * 0.5 / 4)
  std::vector<float> out(256);
  DequantizeRow(DType::kIQ2_XS, &b, out.data(), 256);
  EXPECT_EQ(out[0], -7.0f);  // 8 * 0.875, stored sign bit
  EXPECT_EQ(out[1], 21.875f);
  EXPECT_EQ(out[7], -21.875f);  // the parity sign
  EXPECT_EQ(out[8], -37.625f);  // 43 * 0.875, two stored minus signs
  EXPECT_EQ(out[9], -7.0f);
  EXPECT_EQ(out[15], 7.0f);     // even: the 8th stays plus
  EXPECT_EQ(out[16], 5.375f);   // 43 * 0.125
  EXPECT_EQ(out[17], 1.0f);
  EXPECT_EQ(out[32], 1.0f);     // sub-block 1: zero bytes, entry 0 (all 8s), ls 0
}

TEST(IQuant2s, Iq2SBlockDecodesTenBitIndicesWithExplicitSigns) {
  BlockIq2S b{};
  b.d = Fp32ToFp16(1.0f);
  b.qs[0] = 0xc5;  // group 0: entry 0x2c5 = {25, 8, 43, 8, 8, 25, 25, 25}, high bits 2 in qh
  b.qs[1] = 1;     // group 1: entry 1 = {43, 8 x 7}
  b.qs[2] = 1;     // group 2: entry 0x101 = {8, 43, 25, 25, 25, 8, 25, 8}, high bits 1 in qh
  b.qh[0] = 0b01'00'10;
  b.qs[32] = 0b00000001;  // one minus sign, and no parity rule: the 8th stays plus
  b.qs[34] = 0xff;
  b.scales[0] = 3 | 1 << 4;  // ls 3 for values 0..15 (0.875), 1 for 16..31 (0.375)
  std::vector<float> out(256);
  DequantizeRow(DType::kIQ2_S, &b, out.data(), 256);
  EXPECT_EQ(out[0], -21.875f);
  EXPECT_EQ(out[1], 7.0f);
  EXPECT_EQ(out[2], 37.625f);
  EXPECT_EQ(out[7], 21.875f);
  EXPECT_EQ(out[8], 37.625f);
  EXPECT_EQ(out[16], -3.0f);
  EXPECT_EQ(out[17], -16.125f);
  EXPECT_EQ(out[23], -3.0f);
  EXPECT_EQ(out[24], 3.0f);  // group 3: entry 0, plus
  EXPECT_EQ(out[32], 1.0f);
}

// Weight -8 at position 0 with scale 1 against a Q8_K row whose first value is -128: the true
// product is 1024 (times d / 8: 128); x86's single-token kernels move the sign onto the
// activation in 8 bits, -(-128) wraps, and get -128.
void SignWrapBlocks(BlockIq2Xs* xs, BlockIq2S* s) {
  *xs = BlockIq2Xs{};
  xs->d = Fp32ToFp16(1.0f);
  xs->qs[0] = 1 << 9;  // entry 0, sign of value 0 (and, by parity, of value 7)
  *s = BlockIq2S{};
  s->d = Fp32ToFp16(1.0f);
  s->qs[32] = 1;  // entry 0, sign of value 0
}

TEST(IQuant2s, SingleTokenX86OrderKeepsSignWrap) {
  BlockIq2Xs xs;
  BlockIq2S s;
  SignWrapBlocks(&xs, &s);
  BlockQ8_K a{};
  a.d = 1.0f;
  a.qs[0] = -128;
  for (DType type : kTypes) {
    SCOPED_TRACE(DTypeName(type));
    const void* w = type == DType::kIQ2_XS ? static_cast<const void*>(&xs) : static_cast<const void*>(&s);
    EXPECT_EQ(ref::GetIqGridVecDot(type)(w, &a, 256), 128.0f);
    EXPECT_EQ(ref::GetIqGridX86OrderVecDot(type)(w, &a, 256), -128.0f);
    EXPECT_EQ(ref::GetIqGridX86OrderVecDotGrouped(type)(w, &a, 256), 128.0f);
    EXPECT_EQ(ref::GetIqGridArmOrderVecDot(type)(w, &a, 256), 128.0f);
#if defined(__x86_64__) || defined(__i386__)
    for (SimdLevel level : SupportedSimdLevels()) {
      SCOPED_TRACE(SimdLevelName(level));
      EXPECT_EQ(GetVecDot(type, level)(w, &a, 256), -128.0f);
      EXPECT_EQ(GetVecDotGrouped(type, level)(w, &a, 256), 128.0f);
    }
#endif
  }
}

TEST(IQuant2s, QuantizerIsNearItsInput) {
  const int64_t n = 256 * 8;
  const std::vector<float> x = testing::RandomRow(n, 5);
  for (DType type : kTypes) {
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
    // A 2-bit code of Gaussian values: well correlated with the input, far from exact.
    EXPECT_LT(std::sqrt(err / ref), 0.5);  // 0.37 (IQ2_XS), 0.32 (IQ2_S) measured
    EXPECT_GT(dot / ref, 0.8);  // 0.89, 0.92
    EXPECT_GT(err, 0.0);
  }
}

// Rows with arbitrary bytes (every grid entry, sign pattern and scale) and a sane fp16 scale.
std::vector<uint8_t> RandomRow(DType type, int64_t n_blocks, uint32_t seed) {
  std::mt19937 rng(seed);
  const size_t block_bytes = static_cast<size_t>(RowBytes(type, 256));
  std::vector<uint8_t> row(static_cast<size_t>(n_blocks) * block_bytes);
  for (uint8_t& byte : row) byte = static_cast<uint8_t>(rng());
  for (int64_t i = 0; i < n_blocks; ++i) {
    const uint16_t d = Fp32ToFp16(std::uniform_real_distribution<float>(-0.05f, 0.05f)(rng));
    std::memcpy(row.data() + static_cast<size_t>(i) * block_bytes, &d, 2);
  }
  return row;
}

TEST(IQuant2s, EverySimdLevelEqualsScalarBitForBit) {
  for (DType type : kTypes) {
    testing::ExpectSimdLevelsEqualScalar(
        type,
        {ref::GetIqGridVecDot(type), {ref::GetIqGridX86OrderVecDotGrouped(type), ref::GetIqGridArmOrderVecDot(type)}},
        [type](int64_t n_blocks, uint32_t seed) { return RandomRow(type, n_blocks, seed); });
  }
}

// The scalar level's single-token order is x86's (8 lanes, the sign wrap) and its batched one
// the panel's (one float step per super-block): on rows that hold -128s the two differ, so each
// entry point is the order it claims, not the other one.
TEST(IQuant2s, ScalarLevelTakesTheX86OrdersOnX86) {
#if defined(__x86_64__) || defined(__i386__)
  const int64_t n = 256 * 4;
  const std::vector<float> af = testing::RandomRow(n, 11, 2.0f);
  for (DType type : kTypes) {
    SCOPED_TRACE(DTypeName(type));
    const std::vector<uint8_t> w = RandomRow(type, 4, 3);
    std::vector<uint8_t> a(static_cast<size_t>(RowBytes(DType::kQ8_K, n)));
    QuantizeRow(DType::kQ8_K, af.data(), a.data(), n);
    EXPECT_EQ(GetVecDot(type, SimdLevel::kScalar)(w.data(), a.data(), n),
              ref::GetIqGridX86OrderVecDot(type)(w.data(), a.data(), n));
    EXPECT_EQ(GetVecDotGrouped(type, SimdLevel::kScalar)(w.data(), a.data(), n),
              ref::GetIqGridX86OrderVecDotGrouped(type)(w.data(), a.data(), n));
    EXPECT_NE(ref::GetIqGridX86OrderVecDot(type)(w.data(), a.data(), n),
              ref::GetIqGridX86OrderVecDotGrouped(type)(w.data(), a.data(), n));
  }
#else
  GTEST_SKIP() << "x86 only; AArch64 builds take the ARM order at every level";
#endif
}

}  // namespace
}  // namespace cohort::kernels
