// The check every type with Q8_K activations and a family of reference orders shares (the
// i-quants, the ternary types): each SIMD level's vec-dots equal the scalar level's bit for bit,
// and the reference orders lie near ggml's generic sum, which lies near the float dot.
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/quant.h"
#include "test_util.h"

namespace cohort::kernels::testing {

// A type's reference orders (quant_internal.h's ref::): ggml's generic sum, and the orders that
// reorder its exact integer block sums (x86's batched one, ARM's).
struct Q8KOrders {
  VecDotFn generic = nullptr;
  std::vector<VecDotFn> reorderings;
};

// Raw blocks of a type: random bytes with a sane scale, n_blocks super-blocks.
using RawRowFn = std::function<std::vector<uint8_t>(int64_t n_blocks, uint32_t seed)>;

// For rows quantized from random floats and random raw rows, 1 to 8 super-blocks, each at 0-2
// bytes past a 64-byte boundary: GetVecDot and GetVecDotGrouped at every level this CPU runs
// give the scalar level's float bits; the generic sum is within 1e-5 of the products' absolute
// sum of the float dot of the dequantized rows, each reordering as near the generic sum.
inline void ExpectSimdLevelsEqualScalar(DType type, const Q8KOrders& orders, const RawRowFn& raw_row) {
  const auto bits = [](float f) {
    uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    return u;
  };
  int checked = 0;
  for (int64_t n_blocks : {1, 2, 3, 5, 8}) {
    const int64_t n = n_blocks * 256;
    const uint32_t seed = static_cast<uint32_t>(n_blocks * 7 + static_cast<int>(type));
    const std::vector<float> wf = RandomRow(n, seed + 1);
    const std::vector<float> af = RandomRow(n, seed + 2, 2.0f);
    const std::vector<uint8_t> raw = raw_row(n_blocks, seed);
    for (int offset = 0; offset < 3; ++offset) {
      for (bool quantized : {true, false}) {
        SCOPED_TRACE(::testing::Message() << DTypeName(type) << " n=" << n << " offset=" << offset
                                          << " quantized=" << quantized);
        MisalignedRow wq(type, n, offset), aq(DType::kQ8_K, n, 2 - offset);
        if (quantized) {
          QuantizeRow(type, wf.data(), wq.data(), n);
        } else {
          std::memcpy(wq.data(), raw.data(), raw.size());
        }
        QuantizeRow(DType::kQ8_K, af.data(), aq.data(), n);
        const float want = GetVecDot(type, SimdLevel::kScalar)(wq.data(), aq.data(), n);
        const float want_grouped = GetVecDotGrouped(type, SimdLevel::kScalar)(wq.data(), aq.data(), n);
        const DotResult exact = FloatDot(Dequantized(type, wq.data(), n), Dequantized(DType::kQ8_K, aq.data(), n));
        const double tol = 1e-5 * exact.abs_sum;
        const float generic = orders.generic(wq.data(), aq.data(), n);
        EXPECT_NEAR(generic, exact.dot, tol);
        for (VecDotFn order : orders.reorderings) EXPECT_NEAR(order(wq.data(), aq.data(), n), generic, tol);
        for (SimdLevel level : SupportedSimdLevels()) {
          if (level == SimdLevel::kScalar) continue;
          SCOPED_TRACE(SimdLevelName(level));
          ASSERT_EQ(bits(GetVecDot(type, level)(wq.data(), aq.data(), n)), bits(want));
          ASSERT_EQ(bits(GetVecDotGrouped(type, level)(wq.data(), aq.data(), n)), bits(want_grouped));
          ++checked;
        }
      }
    }
  }
  if (BestSimdLevel() != SimdLevel::kScalar) {
    EXPECT_GT(checked, 0);
  }
}

}  // namespace cohort::kernels::testing
