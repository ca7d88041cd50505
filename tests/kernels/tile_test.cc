// Every tile kernel against the vec-dot kernel of the same SIMD level (which the vec-dot
// tests hold to the scalar reference): every (rows, tokens) shape, odd block counts, rows
// and activations at odd byte offsets and odd strides. Equality is exact: MatMul's output
// must not depend on whether a tile kernel or the vec-dot loop ran.
#include <gtest/gtest.h>

#include <vector>

#include "kernels/quant.h"
#include "kernels/tile.h"
#include "test_util.h"

namespace cohort::kernels {
namespace {

struct Rows {
  std::vector<uint8_t> storage;
  uint8_t* data = nullptr;
  int64_t stride = 0;
};

// `count` quantized rows of n elements, stride = RowBytes + pad, starting `offset` bytes
// past a 64-byte boundary.
Rows MakeRows(DType type, int64_t n, int count, int64_t pad, int offset, uint32_t seed, float scale) {
  Rows r;
  r.stride = RowBytes(type, n) + pad;
  r.storage.resize(static_cast<size_t>(r.stride * count + 128));
  const auto base = reinterpret_cast<uintptr_t>(r.storage.data());
  r.data = r.storage.data() + ((64 - base % 64) % 64) + offset;
  for (int i = 0; i < count; ++i) {
    const std::vector<float> v = testing::RandomRow(n, seed + static_cast<uint32_t>(i), scale);
    QuantizeRow(type, v.data(), r.data + i * r.stride, n);
  }
  return r;
}

TEST(TileKernels, EqualVecDotForEveryShapeSizeAndAlignment) {
  int checked = 0;
  for (SimdLevel level : SupportedSimdLevels()) {
    for (DType type : testing::kWeightTypes) {
     for (bool grouped : {false, true}) {  // grouped: llama.cpp's repacked-GEMM order (quant.h)
      const TileFn tile = grouped ? GetTileGrouped(type, level) : GetTile(type, level);
      if (tile == nullptr) continue;
      ++checked;
      const VecDotFn dot = grouped ? GetVecDotGrouped(type, level) : GetVecDot(type, level);
      const DType act_type = VecDotType(type);
      const int64_t block = std::max<int64_t>(Traits(type).block_size, Traits(act_type).block_size);
      for (int64_t n_blocks : {1, 3, 7}) {
        const int64_t n = n_blocks * block;
        for (int offset : {0, 1, 3}) {
          const Rows w = MakeRows(type, n, kTileRows, offset == 0 ? 0 : 5, offset, 11 * n_blocks, 1.0f);
          const Rows a = MakeRows(act_type, n, kTileTokens, offset == 0 ? 0 : 3, 3 - offset, 17 * n_blocks, 2.0f);
          for (int rows = 1; rows <= kTileRows; ++rows) {
            for (int tokens = 1; tokens <= kTileTokens; ++tokens) {
              SCOPED_TRACE(::testing::Message() << SimdLevelName(level) << " " << DTypeName(type)
                                                << (grouped ? " grouped" : "") << " n=" << n
                                                << " offset=" << offset << " rows=" << rows << " tokens=" << tokens);
              const int64_t out_stride = kTileRows + 1;
              std::vector<float> out(static_cast<size_t>(out_stride * kTileTokens), -99.0f);
              tile(w.data, w.stride, rows, a.data, a.stride, tokens, n, out.data(), out_stride);
              for (int t = 0; t < kTileTokens; ++t) {
                for (int r = 0; r < out_stride; ++r) {
                  const float got = out[t * out_stride + r];
                  if (t < tokens && r < rows) {
                    ASSERT_EQ(got, dot(w.data + r * w.stride, a.data + t * a.stride, n)) << "r=" << r << " t=" << t;
                  } else {
                    ASSERT_EQ(got, -99.0f) << "wrote outside the tile: r=" << r << " t=" << t;
                  }
                }
              }
            }
          }
        }
      }
     }
    }
  }
  RecordProperty("checked_tiles", checked);
  if (BestSimdLevel() == SimdLevel::kAvx512) {
    for (DType type : {DType::kQ4_0, DType::kQ8_0, DType::kQ4_K, DType::kQ6_K}) {
      EXPECT_NE(GetTile(type, SimdLevel::kAvx512), nullptr) << DTypeName(type);
    }
  }
  // The AVX2 levels (AVX2, AVX-VNNI) have tiles for every legacy type.
  for (SimdLevel level : SupportedSimdLevels()) {
    if (level != SimdLevel::kAvx2 && level != SimdLevel::kAvxVnni) continue;
    for (DType type : {DType::kQ4_0, DType::kQ4_1, DType::kQ5_0, DType::kQ5_1, DType::kQ8_0}) {
      EXPECT_NE(GetTile(type, level), nullptr) << SimdLevelName(level) << " " << DTypeName(type);
      EXPECT_NE(GetTileGrouped(type, level), nullptr) << SimdLevelName(level) << " " << DTypeName(type);
    }
  }
  // Every NEON level this CPU runs has tiles for the types with NEON vec-dots, both orders.
  for (SimdLevel level : SupportedSimdLevels()) {
    if (!HasNeonDot(level)) continue;
    for (DType type : {DType::kQ4_0, DType::kQ8_0, DType::kQ4_K, DType::kQ6_K}) {
      EXPECT_NE(GetTile(type, level), nullptr) << SimdLevelName(level) << " " << DTypeName(type);
      EXPECT_NE(GetTileGrouped(type, level), nullptr) << SimdLevelName(level) << " " << DTypeName(type);
    }
  }
}

}  // namespace
}  // namespace cohort::kernels
