// Quantize/dequantize round trips and the scalar vec-dot against the float dot product of the
// dequantized rows, for every row type.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "kernels/quant.h"
#include "test_util.h"

namespace cohort::kernels {
namespace {

using testing::Dequantized;
using testing::FloatDot;
using testing::kWeightTypes;
using testing::RandomRow;

struct RoundTripCase {
  DType type;
  double rel_rms_max;  // rms(error) / rms(x) for N(0,1) data
};

// Bounds sit ~1.5x above what these quantizers reach on Gaussian rows.
constexpr RoundTripCase kRoundTrip[] = {
    {DType::kF32, 0.0},      {DType::kF16, 3e-4},     {DType::kBF16, 2.5e-3},
    {DType::kQ8_0, 0.008},   {DType::kQ8_1, 0.008},   {DType::kQ8_K, 0.010},
    {DType::kQ6_K, 0.028},   {DType::kQ5_0, 0.060},   {DType::kQ5_1, 0.055},
    {DType::kQ5_K, 0.055},   {DType::kQ4_0, 0.120},   {DType::kQ4_1, 0.110},
    {DType::kQ4_K, 0.110},   {DType::kQ3_K, 0.230},   {DType::kQ2_K, 0.450},   {DType::kIQ2_XXS, 0.60},
    {DType::kIQ2_XS, 0.55},  {DType::kIQ2_S, 0.50},
};

TEST(QuantRoundTrip, ErrorIsBoundedForEveryType) {
  const int64_t n = 256 * 6;
  const std::vector<float> x = RandomRow(n, 7);
  for (const RoundTripCase& c : kRoundTrip) {
    SCOPED_TRACE(DTypeName(c.type));
    std::vector<uint8_t> q(static_cast<size_t>(RowBytes(c.type, n)));
    QuantizeRow(c.type, x.data(), q.data(), n);
    const std::vector<float> back = Dequantized(c.type, q.data(), n);
    double err = 0, ref = 0;
    for (int64_t i = 0; i < n; ++i) {
      err += (back[i] - x[i]) * (back[i] - x[i]);
      ref += x[i] * x[i];
    }
    const double rel = std::sqrt(err / ref);
    RecordProperty(std::string(DTypeName(c.type)), std::to_string(rel));
    EXPECT_LE(rel, c.rel_rms_max);
    if (c.type != DType::kF32) {
      EXPECT_GT(rel, 0.0) << "a lossy type reproduced x exactly";
    }
  }
}

TEST(QuantRoundTrip, ZeroRowsStayZero) {
  const int64_t n = 512;
  const std::vector<float> zeros(n, 0.0f);
  for (const RoundTripCase& c : kRoundTrip) {
    SCOPED_TRACE(DTypeName(c.type));
    std::vector<uint8_t> q(static_cast<size_t>(RowBytes(c.type, n)), 0xAB);
    QuantizeRow(c.type, zeros.data(), q.data(), n);
    const std::vector<float> back = Dequantized(c.type, q.data(), n);
    for (float v : back) ASSERT_EQ(v, 0.0f);
  }
}

// Dequantizing what was quantized and quantizing again must give the same bytes for the
// types whose grid the values then lie on exactly (the legacy symmetric types).
TEST(QuantRoundTrip, Q8_0IsIdempotentOnItsGrid) {
  const int64_t n = 64;
  std::vector<float> x = RandomRow(n, 3);
  std::vector<uint8_t> q1(RowBytes(DType::kQ8_0, n)), q2(RowBytes(DType::kQ8_0, n));
  QuantizeRow(DType::kQ8_0, x.data(), q1.data(), n);
  const std::vector<float> back = Dequantized(DType::kQ8_0, q1.data(), n);
  QuantizeRow(DType::kQ8_0, back.data(), q2.data(), n);
  const std::vector<float> back2 = Dequantized(DType::kQ8_0, q2.data(), n);
  for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(back2[i], back[i], 1e-3 * std::fabs(back[i]) + 1e-7);
}

TEST(VecDotType, MatchesGgml) {
  EXPECT_EQ(VecDotType(DType::kQ4_0), DType::kQ8_0);
  EXPECT_EQ(VecDotType(DType::kQ5_0), DType::kQ8_0);
  EXPECT_EQ(VecDotType(DType::kQ8_0), DType::kQ8_0);
  EXPECT_EQ(VecDotType(DType::kQ4_1), DType::kQ8_1);
  EXPECT_EQ(VecDotType(DType::kQ5_1), DType::kQ8_1);
  for (DType t : {DType::kQ2_K, DType::kQ3_K, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K}) {
    EXPECT_EQ(VecDotType(t), DType::kQ8_K);
  }
  EXPECT_EQ(VecDotType(DType::kF32), DType::kF32);
  EXPECT_EQ(VecDotType(DType::kF16), DType::kF16);
  EXPECT_EQ(VecDotType(DType::kBF16), DType::kBF16);
}

// The scalar vec-dot equals the float dot of both dequantized rows up to float rounding of
// the block sums. Q4_1/Q5_1 differ more: ggml's Q8_1 stores d*sum(q) rounded to fp16.
TEST(VecDot, ScalarMatchesDequantizedFloatDot) {
  const int64_t n = 256 * 4;
  const std::vector<float> w = RandomRow(n, 11);
  const std::vector<float> a = RandomRow(n, 12, 3.0f);
  for (DType type : kWeightTypes) {
    SCOPED_TRACE(DTypeName(type));
    const DType act_type = VecDotType(type);
    std::vector<uint8_t> wq(RowBytes(type, n)), aq(RowBytes(act_type, n));
    QuantizeRow(type, w.data(), wq.data(), n);
    QuantizeRow(act_type, a.data(), aq.data(), n);
    const auto expected = FloatDot(Dequantized(type, wq.data(), n), Dequantized(act_type, aq.data(), n));
    const float got = GetVecDot(type, SimdLevel::kScalar)(wq.data(), aq.data(), n);
    const bool fp16_sums = act_type == DType::kQ8_1;
    const double tol = (fp16_sums ? 2e-3 : 2e-6) * expected.abs_sum;
    EXPECT_NEAR(got, expected.dot, tol);
  }
}

TEST(VecDot, PublicEntryAgreesWithScalar) {
  const int64_t n = 512;
  const std::vector<float> w = RandomRow(n, 21);
  const std::vector<float> a = RandomRow(n, 22);
  for (DType type : kWeightTypes) {
    SCOPED_TRACE(DTypeName(type));
    const DType act_type = VecDotType(type);
    std::vector<uint8_t> wq(RowBytes(type, n)), aq(RowBytes(act_type, n));
    QuantizeRow(type, w.data(), wq.data(), n);
    QuantizeRow(act_type, a.data(), aq.data(), n);
    const float scalar = GetVecDot(type, SimdLevel::kScalar)(wq.data(), aq.data(), n);
    const auto ref = FloatDot(Dequantized(type, wq.data(), n), Dequantized(act_type, aq.data(), n));
    EXPECT_NEAR(VecDot(type, wq.data(), aq.data(), n), scalar, 1e-5 * ref.abs_sum);
  }
}

}  // namespace
}  // namespace cohort::kernels
