// MXFP4 (GGML type 39): blocks decoded by hand, the quantizer's choices, the scalar vec-dot
// against float sums of dequantized rows, every SIMD kernel against the scalar order it
// promises (bit for bit), and MatMul over MXFP4 weights against one vec-dot per row.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "core/fp16.h"
#include "core/tensor.h"
#include "kernels/matmul.h"
#include "kernels/quant.h"
#include "kernels/quant_blocks.h"
#include "kernels/quant_internal.h"
#include "kernels/tile_wide.h"
#include "test_util.h"

namespace cohort::kernels {
namespace {

using testing::MisalignedRow;

TEST(Mxfp4, TypeGeometryAndVecDotType) {
  const auto t = FindDType(39);
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->type, DType::kMXFP4);
  EXPECT_EQ(t->name, "mxfp4");
  EXPECT_EQ(t->block_size, 32);
  EXPECT_EQ(t->type_size, 17);
  EXPECT_EQ(RowBytes(DType::kMXFP4, 64), 34);
  EXPECT_EQ(ParseDType("MXFP4"), DType::kMXFP4);
  EXPECT_TRUE(IsWeightType(DType::kMXFP4));
  EXPECT_EQ(VecDotType(DType::kMXFP4), DType::kQ8_0);
}

// Element j is the low nibble of qs[j], element j + 16 the high nibble; e2m1 code c means
// sign (c >> 3) and magnitude {0, .5, 1, 1.5, 2, 3, 4, 6}[c & 7], times 2^(e - 127).
TEST(Mxfp4, DequantizesHandMadeBlocks) {
  const float magnitudes[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  for (uint8_t e : {uint8_t{127}, uint8_t{130}, uint8_t{120}, uint8_t{2}}) {
    BlockMxfp4 b;
    b.e = e;
    for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
    float out[32];
    DequantizeRow(DType::kMXFP4, &b, out, 32);
    const float scale = std::ldexp(1.0f, e - 127);
    for (int j = 0; j < 16; ++j) {
      const int lo = j, hi = 15 - j;
      EXPECT_EQ(out[j], (lo & 8 ? -1.0f : 1.0f) * magnitudes[lo & 7] * scale) << "e=" << int(e) << " j=" << j;
      EXPECT_EQ(out[j + 16], (hi & 8 ? -1.0f : 1.0f) * magnitudes[hi & 7] * scale) << "e=" << int(e);
    }
  }
  // e = 0 and 1: the subnormal scales 2^-127 and 2^-126 (halved: 2^-128, 2^-127).
  for (uint8_t e : {uint8_t{0}, uint8_t{1}}) {
    BlockMxfp4 b{};
    b.e = e;
    b.qs[0] = 0x07;  // element 0: 6, element 16: 0
    float out[32];
    DequantizeRow(DType::kMXFP4, &b, out, 32);
    EXPECT_EQ(out[0], 6.0f * std::ldexp(1.0f, e - 127));
    EXPECT_EQ(out[16], 0.0f);
  }
}

TEST(Mxfp4, QuantizerPicksTheExponentAndNearestLevels) {
  // amax = 6: exponent floor(log2 6) - 2 = 0 (e = 127); every level of the table is exact.
  float x[32];
  const float levels[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  for (int j = 0; j < 32; ++j) x[j] = (j % 16 >= 8 ? -1.0f : 1.0f) * levels[j % 8];
  BlockMxfp4 b;
  QuantizeRow(DType::kMXFP4, x, &b, 32);
  EXPECT_EQ(b.e, 127);
  float back[32];
  DequantizeRow(DType::kMXFP4, &b, back, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(back[j], x[j] == 0.0f ? 0.0f : x[j]) << j;
  // Scaled by 2^5 the block keeps its codes and moves its exponent.
  for (float& v : x) v *= 32.0f;
  BlockMxfp4 b5;
  QuantizeRow(DType::kMXFP4, x, &b5, 32);
  EXPECT_EQ(b5.e, 132);
  EXPECT_EQ(std::memcmp(b.qs, b5.qs, 16), 0);
  // 2.4 lies between the levels 2 and 3 (block amax 6): nearest is 2; 2.5 is a tie: the first
  // (lower) index wins, as in ggml.
  float y[32] = {6.0f, 2.4f, 2.5f, -0.76f};
  BlockMxfp4 c;
  QuantizeRow(DType::kMXFP4, y, &c, 32);
  float yb[32];
  DequantizeRow(DType::kMXFP4, &c, yb, 32);
  EXPECT_EQ(yb[0], 6.0f);
  EXPECT_EQ(yb[1], 2.0f);
  EXPECT_EQ(yb[2], 2.0f);
  EXPECT_EQ(yb[3], -1.0f);
  // An all-zero block gets e = 0 and zero codes.
  float z[32] = {};
  BlockMxfp4 zb;
  QuantizeRow(DType::kMXFP4, z, &zb, 32);
  EXPECT_EQ(zb.e, 0);
  for (uint8_t q : zb.qs) EXPECT_EQ(q, 0);
}

TEST(Mxfp4, QuantizeRoundTripErrorIsBounded) {
  const int64_t n = 32 * 64;
  const std::vector<float> x = testing::RandomRow(n, 7);
  std::vector<uint8_t> q(static_cast<size_t>(RowBytes(DType::kMXFP4, n)));
  QuantizeRow(DType::kMXFP4, x.data(), q.data(), n);
  const std::vector<float> back = testing::Dequantized(DType::kMXFP4, q.data(), n);
  double err = 0, norm = 0;
  for (int64_t i = 0; i < n; ++i) {
    err += (back[i] - x[i]) * (back[i] - x[i]);
    norm += x[i] * x[i];
  }
  EXPECT_LT(std::sqrt(err / norm), 0.2);  // 4-bit floats: ~10% RMS error on Gaussian data
  EXPECT_GT(std::sqrt(err / norm), 0.01);
}

// A hand-computed dot: weights all code 2 (value 1.0 at e = 127) against Q8_0 quants 1..32
// with d = 0.5: sum = 0.5 * (1 + ... + 32) = 264.
TEST(Mxfp4, ScalarVecDotOfAKnownBlock) {
  BlockMxfp4 w;
  w.e = 127;
  std::memset(w.qs, 0x22, sizeof w.qs);
  BlockQ8_0 a;
  a.d = Fp32ToFp16(0.5f);
  for (int j = 0; j < 32; ++j) a.qs[j] = static_cast<int8_t>(j + 1);
  EXPECT_EQ(ref::VecDotMxfp4Q8_0(&w, &a, 32), 264.0f);
  EXPECT_EQ(ref::VecDotMxfp4Q8_0Repacked(&w, &a, 32), 264.0f);
  EXPECT_EQ(VecDot(DType::kMXFP4, &w, &a, 32), 264.0f);
}

TEST(Mxfp4, ScalarVecDotMatchesTheFloatDotOfDequantizedRows) {
  for (int64_t n_blocks : {1, 3, 7, 33}) {
    const int64_t n = n_blocks * 32;
    const std::vector<float> w = testing::RandomRow(n, static_cast<uint32_t>(n_blocks + 100));
    const std::vector<float> a = testing::RandomRow(n, static_cast<uint32_t>(n_blocks + 200), 2.0f);
    std::vector<uint8_t> wq(RowBytes(DType::kMXFP4, n)), aq(RowBytes(DType::kQ8_0, n));
    QuantizeRow(DType::kMXFP4, w.data(), wq.data(), n);
    QuantizeRow(DType::kQ8_0, a.data(), aq.data(), n);
    const auto ref = testing::FloatDot(testing::Dequantized(DType::kMXFP4, wq.data(), n),
                                       testing::Dequantized(DType::kQ8_0, aq.data(), n));
    EXPECT_NEAR(ref::VecDotMxfp4Q8_0(wq.data(), aq.data(), n), ref.dot, 1e-6 * ref.abs_sum);
    EXPECT_NEAR(ref::VecDotMxfp4Q8_0Repacked(wq.data(), aq.data(), n), ref.dot, 1e-6 * ref.abs_sum);
  }
}

// The SIMD kernels promise the repacked order exactly (llama.cpp's x86 result).
TEST(Mxfp4, SimdVecDotEqualsItsScalarOrderBitForBit) {
  int checked = 0;
  for (SimdLevel level : SupportedSimdLevels()) {
    const VecDotFn fn = GetVecDot(DType::kMXFP4, level);
    if (level == SimdLevel::kScalar) {
      EXPECT_EQ(fn, &ref::VecDotMxfp4Q8_0);
      continue;
    }
    if (!HasAvx2(level)) continue;
    ++checked;
    for (int64_t n_blocks : {1, 2, 3, 7, 33, 90}) {
      const int64_t n = n_blocks * 32;
      const std::vector<float> w = testing::RandomRow(n, static_cast<uint32_t>(n_blocks * 7 + 1));
      const std::vector<float> a = testing::RandomRow(n, static_cast<uint32_t>(n_blocks * 7 + 2), 3.0f);
      for (int offset = 0; offset < 4; ++offset) {
        MisalignedRow wq(DType::kMXFP4, n, offset), aq(DType::kQ8_0, n, 3 - offset);
        QuantizeRow(DType::kMXFP4, w.data(), wq.data(), n);
        QuantizeRow(DType::kQ8_0, a.data(), aq.data(), n);
        const float want = ref::VecDotMxfp4Q8_0Repacked(wq.data(), aq.data(), n);
        EXPECT_EQ(fn(wq.data(), aq.data(), n), want) << SimdLevelName(level) << " n=" << n << " offset=" << offset;
      }
    }
  }
  RecordProperty("checked_levels", checked);
}

// The wide tiles (AVX2, AVX-VNNI, AVX-512) on raw blocks whose exponents span E8M0's range, the
// subnormal half scales of e = 0 and 1 included (quantized random rows only reach e near 127),
// and whose nibbles are random: every (row, token) equals the vec-dot's float bits.
TEST(Mxfp4, WideTilesEqualTheVecDotAcrossTheExponentRange) {
  constexpr int kRows = kWideRows;
  constexpr int64_t n = 4 * 32;
  const int64_t row_bytes = RowBytes(DType::kMXFP4, n);
  std::vector<uint8_t> w(static_cast<size_t>(kRows * row_bytes));
  uint32_t state = 12345;
  for (uint8_t& b : w) b = static_cast<uint8_t>((state = state * 1664525u + 1013904223u) >> 24);
  const uint8_t exponents[] = {0, 1, 2, 3, 100, 127, 128, 200, 254};
  int k = 0;
  for (int r = 0; r < kRows; ++r) {
    auto* blocks = reinterpret_cast<BlockMxfp4*>(w.data() + r * row_bytes);
    for (int i = 0; i < n / 32; ++i) blocks[i].e = exponents[k++ % 9];
  }
  int checked = 0;
  for (SimdLevel level : SupportedSimdLevels()) {
    const WideTile wide = GetWideTile(DType::kMXFP4, level, false);
    if (wide.fn == nullptr) continue;
    ++checked;
    SCOPED_TRACE(SimdLevelName(level));
    const VecDotFn dot = GetVecDot(DType::kMXFP4, level);
    const int tokens = wide.max_tokens;
    const int64_t act_stride = RowBytes(DType::kQ8_0, n);
    std::vector<uint8_t> act(static_cast<size_t>(tokens * act_stride));
    for (int t = 0; t < tokens; ++t) {
      const std::vector<float> a = testing::RandomRow(n, 40u + static_cast<uint32_t>(t), 3.0f);
      QuantizeRow(DType::kQ8_0, a.data(), act.data() + t * act_stride, n);
    }
    const int64_t side_stride = wide.side_per_256 * n / 256;
    std::vector<float> side(static_cast<size_t>(side_stride * tokens + 1));
    for (int t = 0; t < tokens; ++t) wide.side(act.data() + t * act_stride, n, side.data() + t * side_stride);
    std::vector<float> out(static_cast<size_t>(tokens * kRows));
    wide.fn(w.data(), row_bytes, act.data(), act_stride, side.data(), side_stride, tokens, n, out.data(), kRows);
    for (int t = 0; t < tokens; ++t) {
      for (int r = 0; r < kRows; ++r) {
        const float want = dot(w.data() + r * row_bytes, act.data() + t * act_stride, n);
        uint32_t got_bits, want_bits;
        std::memcpy(&got_bits, &out[t * kRows + r], 4);
        std::memcpy(&want_bits, &want, 4);
        ASSERT_EQ(got_bits, want_bits) << "row " << r << " token " << t;
      }
    }
  }
  if (HasAvx2(BestSimdLevel())) {
    EXPECT_GT(checked, 0);
  }
}

// MatMul and MatMulExperts over MXFP4 weights give each row's vec-dot with the token's Q8_0 row.
TEST(Mxfp4, MatMulIsOneVecDotPerRow) {
  const int64_t n_in = 96, n_rows = 24, n_tokens = 5;
  const std::vector<float> wf = testing::RandomRow(n_in * n_rows, 11);
  const std::vector<float> x = testing::RandomRow(n_in * n_tokens, 12);
  const int64_t row_bytes = RowBytes(DType::kMXFP4, n_in);
  std::vector<uint8_t> wq(static_cast<size_t>(row_bytes * n_rows));
  for (int64_t r = 0; r < n_rows; ++r) QuantizeRow(DType::kMXFP4, wf.data() + r * n_in, wq.data() + r * row_bytes, n_in);
  TensorView w;
  w.data = wq.data();
  w.type = DType::kMXFP4;
  w.ne[0] = n_in;
  w.ne[1] = n_rows;
  w.row_bytes = row_bytes;
  std::vector<float> y(n_tokens * n_rows), ye(n_tokens * n_rows);
  std::vector<uint8_t> scratch;
  MatMul(w, x.data(), n_tokens, y.data(), nullptr, &scratch);
  MatMulExperts(w, x.data(), n_tokens, ye.data(), nullptr, &scratch);
  std::vector<uint8_t> xq(RowBytes(DType::kQ8_0, n_in));
  for (int64_t t = 0; t < n_tokens; ++t) {
    QuantizeRow(DType::kQ8_0, x.data() + t * n_in, xq.data(), n_in);
    for (int64_t r = 0; r < n_rows; ++r) {
      const float want = VecDot(DType::kMXFP4, wq.data() + r * row_bytes, xq.data(), n_in);
      EXPECT_EQ(y[t * n_rows + r], want) << t << "," << r;
      EXPECT_EQ(ye[t * n_rows + r], want) << t << "," << r;
    }
  }
}

}  // namespace
}  // namespace cohort::kernels
