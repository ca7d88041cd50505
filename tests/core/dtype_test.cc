// DType table and half-float conversions.
#include "core/dtype.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/fp16.h"

namespace cohort {
namespace {

TEST(DType, BlockGeometry) {
  EXPECT_EQ(RowBytes(DType::kQ4_0, 256), 8 * 18);
  EXPECT_EQ(RowBytes(DType::kQ4_K, 512), 2 * 144);
  EXPECT_EQ(RowBytes(DType::kF16, 3), 6);
  EXPECT_FALSE(FindDType(4).has_value());  // Q4_2, removed from the format
  EXPECT_EQ(ParseDType("Q6_K"), DType::kQ6_K);
  EXPECT_EQ(DTypeName(DType::kQ3_K), "q3_K");
}

// IQ2_XS and IQ2_S as GGUF numbers them, in 256-value blocks of 74 and 82 bytes: a tensor-parallel
// share of their rows' columns is whole blocks of 256.
TEST(DType, Iq2XsAndIq2SGeometry) {
  ASSERT_TRUE(FindDType(17).has_value() && FindDType(22).has_value());
  EXPECT_EQ(FindDType(17)->type, DType::kIQ2_XS);
  EXPECT_EQ(FindDType(22)->type, DType::kIQ2_S);
  EXPECT_EQ(RowBytes(DType::kIQ2_XS, 512), 2 * 74);
  EXPECT_EQ(RowBytes(DType::kIQ2_S, 768), 3 * 82);
  EXPECT_EQ(Traits(DType::kIQ2_XS).block_size, 256);
  EXPECT_EQ(Traits(DType::kIQ2_S).block_size, 256);
  EXPECT_EQ(ParseDType("IQ2_XS"), DType::kIQ2_XS);
  EXPECT_EQ(DTypeName(DType::kIQ2_S), "iq2_s");
}

TEST(Fp16, RoundTripsEveryHalf) {
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    const float f = Fp16ToFp32(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    EXPECT_EQ(Fp32ToFp16(f), h) << h;
  }
}

TEST(Fp16, RoundsToNearestEven) {
  EXPECT_EQ(Fp32ToFp16(1.0f), 0x3c00);
  EXPECT_EQ(Fp32ToFp16(1.0f + 1.0f / 2048.0f), 0x3c00);       // tie -> even
  EXPECT_EQ(Fp32ToFp16(1.0f + 3.0f / 2048.0f), 0x3c02);       // tie -> even (up)
  EXPECT_EQ(Fp32ToFp16(65520.0f), 0x7c00);                    // rounds to inf
  EXPECT_EQ(Fp32ToFp16(5.960464477539063e-08f), 0x0001);      // smallest subnormal
}

TEST(Bf16, RoundTrip) {
  EXPECT_EQ(Bf16ToFp32(Fp32ToBf16(1.5f)), 1.5f);
  EXPECT_EQ(Fp32ToBf16(1.0f + 1.0f / 256.0f), 0x3f80);  // tie -> even
}

}  // namespace
}  // namespace cohort
