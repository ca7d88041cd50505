// The SIMD float ops of the level the kernels run at (ops_avx512.cc at avx512, ops_avx2.cc at
// avx2 and avx_vnni; COHORT_SIMD picks it, and ctest runs this binary once per level), through
// ops.h's dispatchers, against their scalar references (ref:: in ops_internal.h, the loops
// ops.cc runs at the scalar level), on odd lengths (SIMD chunks plus tails) and misaligned
// pointers. Softmax, SwiGlu and AddScaled must be
// bit-identical; the double-accumulated dot products may differ only in the order of their
// double additions.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/fp16.h"
#include "kernels/ops.h"
#include "kernels/ops_internal.h"
#include "kernels/quant.h"
#include "test_util.h"

namespace cohort::kernels {
namespace {

// Whether ops.h's dispatchers take SIMD forms at this level (the x86 levels; the float ops
// have no NEON forms).
bool HaveSimdOps() { return HasAvx2(BestSimdLevel()); }

TEST(OpsSimd, SoftmaxAndSwiGluAreBitIdenticalToScalar) {
  if (!HaveSimdOps()) GTEST_SKIP() << "level " << SimdLevelName(BestSimdLevel()) << ": the scalar ops are the only path";
  for (int64_t n : {1, 15, 16, 17, 33, 100, 257}) {
    for (int offset = 0; offset < 3; ++offset) {
      SCOPED_TRACE(::testing::Message() << "n=" << n << " offset=" << offset);
      std::vector<float> base = testing::RandomRow(n + offset, static_cast<uint32_t>(n), 30.0f);
      if (n > 20) base[offset + 5] = -std::numeric_limits<float>::infinity();  // a masked cell
      if (n > 40) base[offset + 30] = -150.0f;  // exp underflows into the subnormals
      std::vector<float> want(base), got(base);
      ref::Softmax(want.data() + offset, n);
      Softmax(got.data() + offset, n);
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(got[offset + i], want[offset + i]) << "i=" << i;

      const std::vector<float> gate = testing::RandomRow(n + offset, 5 + static_cast<uint32_t>(n), 8.0f);
      const std::vector<float> up = testing::RandomRow(n + offset, 9 + static_cast<uint32_t>(n));
      std::vector<float> out(n + offset), expect(n + offset);
      SwiGlu(gate.data() + offset, up.data() + offset, n, out.data() + offset);
      ref::SwiGlu(gate.data() + offset, up.data() + offset, n, expect.data() + offset);
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(out[offset + i], expect[offset + i]) << "i=" << i;
    }
  }
}

TEST(OpsSimd, ExpPolyLanesMatchScalarAcrossTheRange) {
  if (!HaveSimdOps()) GTEST_SKIP() << "level " << SimdLevelName(BestSimdLevel()) << ": no SIMD float ops";
  // Softmax of 16 values with max 0 runs every value through one SIMD ExpPoly lane.
  for (float start : {-200.0f, -120.0f, -87.5f, -20.0f, -1.0f}) {
    std::vector<float> x(16), want(16);
    for (int k = 0; k < 16; ++k) x[k] = start * (1.0f - k / 16.0f);
    x[15] = 0.0f;
    want = x;
    ref::Softmax(want.data(), 16);
    Softmax(x.data(), 16);
    for (int k = 0; k < 16; ++k) ASSERT_EQ(x[k], want[k]) << "start=" << start << " k=" << k;
  }
}

// Every ExpPoly lane across exp's whole range in small steps, bit for bit (sign of zero
// included): normal results, the subnormals (x below about -87.3) where the SIMD forms must
// round the scaling by 2^n once, as ldexp does, flush to zero, and SwiGlu's overflow to inf.
TEST(OpsSimd, ExpPolyLanesAreBitIdenticalInSmallSteps) {
  if (!HaveSimdOps()) GTEST_SKIP() << "level " << SimdLevelName(BestSimdLevel()) << ": no SIMD float ops";
#if defined(__x86_64__) || defined(__i386__)  // the x86 files' chunked exp, called directly
  constexpr int64_t kN = 16 * 1024;
  std::vector<float> x(kN), gate(kN), up(kN, 1.0f);
  for (int64_t i = 0; i < kN; ++i) {
    x[i] = -110.0f + 110.0f * static_cast<float>(i) / static_cast<float>(kN - 1);  // max 0
    gate[i] = -100.0f + 200.0f * static_cast<float>(i) / static_cast<float>(kN - 1);
  }
  // The level's chunked exp directly (Softmax's normalisation could hide a differing
  // subnormal), against the scalar ExpPoly of each value.
  auto* exp_chunks = HasAvx512(BestSimdLevel()) ? &avx512::ExpChunks : &avx2::ExpChunks;
  std::vector<float> want(kN);
  for (int64_t i = 0; i < kN; ++i) want[i] = ExpPoly(x[i]);
  exp_chunks(x.data(), kN / 16, 0.0f);
  std::vector<float> out(kN), expect(kN);
  SwiGlu(gate.data(), up.data(), kN, out.data());
  ref::SwiGlu(gate.data(), up.data(), kN, expect.data());
  for (int64_t i = 0; i < kN; ++i) {
    ASSERT_EQ(std::memcmp(&x[i], &want[i], sizeof(float)), 0) << "exp i=" << i << " " << x[i] << " vs " << want[i];
    ASSERT_EQ(std::memcmp(&out[i], &expect[i], sizeof(float)), 0) << "swiglu i=" << i << " " << out[i] << " vs " << expect[i];
  }
#endif
}

TEST(OpsSimd, DotsAndAddScaledMatchScalar) {
  if (!HaveSimdOps()) GTEST_SKIP() << "level " << SimdLevelName(BestSimdLevel()) << ": no SIMD float ops";
  for (int64_t n : {1, 7, 8, 15, 16, 17, 64, 129}) {
    for (int offset = 0; offset < 3; ++offset) {
      SCOPED_TRACE(::testing::Message() << "n=" << n << " offset=" << offset);
      const std::vector<float> a = testing::RandomRow(n + offset, 1 + static_cast<uint32_t>(n));
      const std::vector<float> b = testing::RandomRow(n + offset, 2 + static_cast<uint32_t>(n));
      std::vector<uint16_t> h(n + offset);
      for (int64_t i = 0; i < n + offset; ++i) h[i] = Fp32ToFp16(a[i]);
      // The tolerance comes from the inputs: the sum of the products' magnitudes.
      double mag = 0;
      for (int64_t i = 0; i < n; ++i) mag += std::fabs(static_cast<double>(a[offset + i]) * b[offset + i]);
      // The AVX2 path takes the scalar reference's order exactly (ops.cc, DotDoubleLanes).
      if (!HasAvx512(BestSimdLevel())) {
        EXPECT_EQ(Dot(a.data() + offset, b.data() + offset, n), ref::Dot(a.data() + offset, b.data() + offset, n));
        EXPECT_EQ(DotF16(h.data() + offset, b.data() + offset, n),
                  ref::DotF16(h.data() + offset, b.data() + offset, n));
      }
      // AVX-512's 8 double lanes reorder only the double additions: far below one float ulp
      // of the magnitude.
      EXPECT_NEAR(Dot(a.data() + offset, b.data() + offset, n), ref::Dot(a.data() + offset, b.data() + offset, n),
                  1e-6 * mag);
      EXPECT_NEAR(DotF16(h.data() + offset, b.data() + offset, n),
                  ref::DotF16(h.data() + offset, b.data() + offset, n), 1e-6 * mag);

      std::vector<float> y(b), y_h(b), want(b), want_h(b);
      AddScaled(a.data() + offset, 0.37f, n, y.data() + offset);
      AddScaledF16(h.data() + offset, -1.25f, n, y_h.data() + offset);
      ref::AddScaled(a.data() + offset, 0.37f, n, want.data() + offset);
      ref::AddScaledF16(h.data() + offset, -1.25f, n, want_h.data() + offset);
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(y[offset + i], want[offset + i]) << "i=" << i;
        ASSERT_EQ(y_h[offset + i], want_h[offset + i]) << "i=" << i;
      }
    }
  }
}

// Attention's batched calls for one head: every score and every output value bit-identical
// to calling DotF16 / AddScaledF16 once per cached row, for head sizes with and without a fast path
// (multiples of 8 up to 512, others), row counts around the 8-row blocks and odd strides.
TEST(OpsSimd, BatchedCacheRowOpsEqualTheirPerRowCalls) {
  for (int64_t n : {8, 16, 24, 64, 72, 128, 136, 256, 512, 520, 5, 63}) {
    for (int64_t n_rows : {1, 7, 8, 9, 16, 23}) {
      SCOPED_TRACE(::testing::Message() << "n=" << n << " rows=" << n_rows);
      const int64_t stride = n + 3;  // halves between rows: unaligned rows
      const std::vector<float> raw = testing::RandomRow(stride * n_rows, 7 + static_cast<uint32_t>(n * 31 + n_rows));
      std::vector<uint16_t> rows(raw.size());
      for (size_t i = 0; i < raw.size(); ++i) rows[i] = Fp32ToFp16(raw[i]);
      const std::vector<float> q = testing::RandomRow(n, 3 + static_cast<uint32_t>(n));
      const float scale = 0.125f;

      std::vector<float> scores(n_rows);
      DotsF16Heads(rows.data(), stride, n_rows, q.data(), n, 1, n, scale, scores.data(), n_rows);
      for (int64_t p = 0; p < n_rows; ++p) {
        ASSERT_EQ(scores[p], DotF16(rows.data() + p * stride, q.data(), n) * scale) << "row " << p;
      }

      std::vector<float> w = testing::RandomRow(n_rows, 11 + static_cast<uint32_t>(n_rows));
      std::vector<float> want(n, 0.0f), got(n, 1.0f);
      for (int64_t p = 0; p < n_rows; ++p) AddScaledF16(rows.data() + p * stride, w[p], n, want.data());
      WeightedRowSumF16Heads(w.data(), n_rows, 1, rows.data(), stride, n_rows, n, got.data(), n);
      for (int64_t j = 0; j < n; ++j) ASSERT_EQ(got[j], want[j]) << "element " << j;
    }
  }
}

// The GQA forms: several heads' queries and weights against the same rows, each head's
// scores and outputs bit-identical to its own DotF16 / AddScaledF16 calls.
TEST(OpsSimd, BatchedCacheRowOpsForSeveralHeadsEqualPerHeadCalls) {
  for (int64_t n : {64, 128, 72, 192}) {
    for (int heads : {1, 3, 4, 5, 8, 9}) {
      for (int64_t n_rows : {1, 8, 13, 40}) {
        SCOPED_TRACE(::testing::Message() << "n=" << n << " heads=" << heads << " rows=" << n_rows);
        const int64_t stride = 8 * n + 5;
        const std::vector<float> raw = testing::RandomRow(stride * n_rows, 5 + static_cast<uint32_t>(n + heads * 7 + n_rows));
        std::vector<uint16_t> rows(raw.size());
        for (size_t i = 0; i < raw.size(); ++i) rows[i] = Fp32ToFp16(raw[i]);
        const int64_t q_stride = n + 16, s_stride = n_rows + 3;
        const std::vector<float> q = testing::RandomRow(q_stride * heads, 9 + static_cast<uint32_t>(heads));
        std::vector<float> scores(s_stride * heads, -1.0f);
        DotsF16Heads(rows.data(), stride, n_rows, q.data(), q_stride, heads, n, 0.25f, scores.data(), s_stride);
        for (int h = 0; h < heads; ++h) {
          for (int64_t p = 0; p < n_rows; ++p) {
            ASSERT_EQ(scores[h * s_stride + p], DotF16(rows.data() + p * stride, q.data() + h * q_stride, n) * 0.25f)
                << "head " << h << " row " << p;
          }
        }
        const std::vector<float> w = testing::RandomRow(s_stride * heads, 13 + static_cast<uint32_t>(n_rows));
        const int64_t o_stride = n + 7;
        std::vector<float> got(o_stride * heads, 2.0f);
        WeightedRowSumF16Heads(w.data(), s_stride, heads, rows.data(), stride, n_rows, n, got.data(), o_stride);
        for (int h = 0; h < heads; ++h) {
          std::vector<float> want(n, 0.0f);
          for (int64_t p = 0; p < n_rows; ++p) AddScaledF16(rows.data() + p * stride, w[h * s_stride + p], n, want.data());
          for (int64_t j = 0; j < n; ++j) ASSERT_EQ(got[h * o_stride + j], want[j]) << "head " << h << " element " << j;
        }
      }
    }
  }
}

}  // namespace
}  // namespace cohort::kernels
