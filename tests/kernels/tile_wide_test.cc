// Every wide tile kernel (16 rows as register lanes) against the vec-dot kernel of the same
// order, which the vec-dot tests hold to the scalar reference: every token count up to the
// kernel's maximum, odd block counts (for the K-quants 1, 3, 7 super-blocks), rows and
// activations at odd byte offsets and odd strides. Equality is exact.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "kernels/pack.h"
#include "kernels/quant.h"
#include "kernels/tile_wide.h"
#include "test_util.h"

namespace cohort::kernels {
namespace avx2 {
// tile_wide_avx2_k.cc, for tests: its AVX-VNNI kernels with the VNNI instructions done in AVX2.
WideTile GetWideTileKVnniInAvx2(DType weight, bool grouped, bool packed);
}  // namespace avx2
namespace {

struct Rows {
  std::vector<uint8_t> storage;
  uint8_t* data = nullptr;
  int64_t stride = 0;
};

// `count` quantized rows of n elements, stride = RowBytes + pad, starting `offset` bytes past
// a 64-byte boundary; `extra` bytes of slack after the last row (the kernels prefetch past it).
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

TEST(WideTileKernels, EqualVecDotForEveryTokenCountSizeAndAlignment) {
  int checked = 0;
  for (SimdLevel level : SupportedSimdLevels()) {
    for (DType type : testing::kWeightTypes) {
      for (bool grouped : {false, true}) {
        const WideTile wide = GetWideTile(type, level, grouped);
        if (wide.fn == nullptr) continue;
        ++checked;
        const VecDotFn dot = grouped ? GetVecDotGrouped(type, level) : GetVecDot(type, level);
        const DType act_type = VecDotType(type);
        const int64_t block = std::max<int64_t>(Traits(type).block_size, Traits(act_type).block_size);
        for (int64_t n_blocks : {1, 3, 7}) {
          const int64_t n = n_blocks * block;
          for (int offset : {0, 1, 3}) {
            SCOPED_TRACE(::testing::Message() << SimdLevelName(level) << " " << DTypeName(type)
                                              << (grouped ? " grouped" : "") << " n=" << n
                                              << " offset=" << offset);
            const Rows w = MakeRows(type, n, kWideRows, offset == 0 ? 0 : 5, offset, 11 * n_blocks, 1.0f);
            const Rows a = MakeRows(act_type, n, kWideTokens, offset == 0 ? 0 : 3, 3 - offset, 17 * n_blocks, 2.0f);
            const int64_t side_stride = wide.side_per_256 * n / 256;
            std::vector<float> side(static_cast<size_t>(side_stride * kWideTokens + 1));
            if (wide.side != nullptr) {
              for (int t = 0; t < kWideTokens; ++t) wide.side(a.data + t * a.stride, n, side.data() + t * side_stride);
            }
            for (int tokens = 1; tokens <= wide.max_tokens; ++tokens) {
              const int64_t out_stride = kWideRows + 3;
              std::vector<float> out(static_cast<size_t>(out_stride * (kWideTokens + 1)), -99.0f);
              wide.fn(w.data, w.stride, a.data, a.stride, side.data(), side_stride, tokens, n,
                      out.data(), out_stride);
              for (int t = 0; t <= kWideTokens; ++t) {
                for (int r = 0; r < out_stride; ++r) {
                  const float got = out[t * out_stride + r];
                  if (t < tokens && r < kWideRows) {
                    ASSERT_EQ(got, dot(w.data + r * w.stride, a.data + t * a.stride, n))
                        << "tokens=" << tokens << " r=" << r << " t=" << t;
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
  RecordProperty("checked_wide_tiles", checked);
  // Every AVX2 level has the K-quant wide tiles (tile_wide_avx2_k.cc), in both orders.
  for (SimdLevel level : SupportedSimdLevels()) {
    if (level != SimdLevel::kAvx2 && level != SimdLevel::kAvxVnni) continue;
    for (DType type : {DType::kQ4_K, DType::kQ6_K}) {
      for (bool grouped : {false, true}) {
        EXPECT_NE(GetWideTile(type, level, grouped).fn, nullptr) << SimdLevelName(level) << " " << DTypeName(type);
      }
    }
  }
  if (BestSimdLevel() == SimdLevel::kAvx512) {
    for (DType type : {DType::kQ4_0, DType::kQ8_0, DType::kQ4_K, DType::kQ6_K}) {
      for (bool grouped : {false, true}) EXPECT_NE(GetWideTile(type, SimdLevel::kAvx512, grouped).fn, nullptr);
    }
  }
  // The AVX2 levels (AVX2, AVX-VNNI) have wide tiles, plain and packed, for Q4_0 and Q8_0.
  for (SimdLevel level : SupportedSimdLevels()) {
    if (level != SimdLevel::kAvx2 && level != SimdLevel::kAvxVnni) continue;
    for (DType type : {DType::kQ4_0, DType::kQ8_0}) {
      for (bool grouped : {false, true}) {
        EXPECT_NE(GetWideTile(type, level, grouped).fn, nullptr) << SimdLevelName(level) << " " << DTypeName(type);
        EXPECT_NE(GetWideTilePacked(type, level, grouped).fn, nullptr) << SimdLevelName(level) << " " << DTypeName(type);
      }
    }
  }
  // Every NEON level this CPU runs has wide tiles, plain and packed, for the types with NEON
  // vec-dots, in both orders.
  for (SimdLevel level : SupportedSimdLevels()) {
    if (!HasNeonDot(level)) continue;
    for (DType type : {DType::kQ4_0, DType::kQ8_0, DType::kQ4_K, DType::kQ6_K}) {
      for (bool grouped : {false, true}) {
        EXPECT_NE(GetWideTile(type, level, grouped).fn, nullptr) << SimdLevelName(level) << " " << DTypeName(type);
        EXPECT_NE(GetWideTilePacked(type, level, grouped).fn, nullptr) << SimdLevelName(level) << " " << DTypeName(type);
      }
    }
  }
}

// Every packed wide tile (GetWideTilePacked, reading rows as PackRows lays them out) against
// the vec-dot of the same order on the rows as stored, at every level this CPU runs that has
// one (MatMul's packed test covers only the best level): the second of two groups (so the
// kernel is handed a group that is not the buffer's start), odd block counts (Q8_0 past one
// chunk of its layout, with a short last chunk), the packed copy at odd byte offsets.
TEST(WideTileKernels, PackedEqualVecDotAtEveryLevel) {
  int checked = 0;
  constexpr int kRows = 2 * kWideRows;
  for (DType type : {DType::kQ4_0, DType::kQ8_0, DType::kQ4_K, DType::kQ6_K, DType::kIQ4_XS}) {
    const DType act_type = VecDotType(type);
    const int64_t block = std::max<int64_t>(Traits(type).block_size, Traits(act_type).block_size);
    for (int64_t n_blocks : type == DType::kQ8_0 ? std::vector<int64_t>{1, 3, 67} : std::vector<int64_t>{1, 3, 7}) {
      const int64_t n = n_blocks * block;
      const int64_t row_bytes = RowBytes(type, n);
      if (!CanPackRows(type, kRows, row_bytes)) continue;  // no packed kernel at the best level
      const Rows w = MakeRows(type, n, kRows, 0, 0, 23 * n_blocks, 1.0f);
      const Rows a = MakeRows(act_type, n, kWideTokens, 3, 1, 29 * n_blocks, 2.0f);
      for (int offset : {0, 1, 3}) {
        std::vector<uint8_t> storage(static_cast<size_t>(kRows * row_bytes + 128));
        uint8_t* packed = storage.data() + (64 - reinterpret_cast<uintptr_t>(storage.data()) % 64) % 64 + offset;
        PackRows(type, w.data, row_bytes, kRows, packed);
        const uint8_t* group = packed + kWideRows * row_bytes;  // rows 16..31
        for (SimdLevel level : SupportedSimdLevels()) {
          for (bool grouped : {false, true}) {
            const WideTile wide = GetWideTilePacked(type, level, grouped);
            if (wide.fn == nullptr) continue;
            ++checked;
            const VecDotFn dot = grouped ? GetVecDotGrouped(type, level) : GetVecDot(type, level);
            SCOPED_TRACE(::testing::Message() << SimdLevelName(level) << " " << DTypeName(type)
                                              << (grouped ? " grouped" : "") << " n=" << n << " offset=" << offset);
            const int64_t side_stride = wide.side_per_256 * n / 256;
            std::vector<float> side(static_cast<size_t>(side_stride * kWideTokens + 1));
            if (wide.side != nullptr) {
              for (int t = 0; t < kWideTokens; ++t) wide.side(a.data + t * a.stride, n, side.data() + t * side_stride);
            }
            for (int tokens = 1; tokens <= wide.max_tokens; ++tokens) {
              const int64_t out_stride = kWideRows + 3;
              std::vector<float> out(static_cast<size_t>(out_stride * (kWideTokens + 1)), -99.0f);
              wide.fn(group, kWideRows * row_bytes, a.data, a.stride, side.data(), side_stride, tokens, n, out.data(),
                      out_stride);
              for (int t = 0; t <= kWideTokens; ++t) {
                for (int r = 0; r < out_stride; ++r) {
                  const float got = out[t * out_stride + r];
                  if (t < tokens && r < kWideRows) {
                    ASSERT_EQ(got, dot(w.data + (kWideRows + r) * w.stride, a.data + t * a.stride, n))
                        << "tokens=" << tokens << " r=" << r << " t=" << t;
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
  RecordProperty("checked_packed_wide_tiles", checked);
  if (checked == 0) GTEST_SKIP() << "no packed wide kernel on this CPU";
}

// Every packed wide kernel (GetWideTilePacked) of every level against the vec-dot on the rows
// as stored: two groups of 16 rows packed by PackRows (one layout for every ISA), odd block
// counts (Q8_0: up to two whole chunks of its layout and an odd last one), every token count,
// activations at odd offsets. Equality is exact.
TEST(WideTileKernels, PackedEqualVecDotForEveryTokenCountAndSize) {
  constexpr int kRows = 2 * kWideRows;
  int checked = 0;
  for (SimdLevel level : SupportedSimdLevels()) {
    for (DType type : testing::kWeightTypes) {
      for (bool grouped : {false, true}) {
        const WideTile wide = GetWideTilePacked(type, level, grouped);
        if (wide.fn == nullptr) continue;
        const VecDotFn dot = grouped ? GetVecDotGrouped(type, level) : GetVecDot(type, level);
        const DType act_type = VecDotType(type);
        const int64_t block = std::max<int64_t>(Traits(type).block_size, Traits(act_type).block_size);
        for (int64_t n_blocks : {1, 3, 7, 67}) {
          const int64_t n = n_blocks * block;
          const int64_t row_bytes = RowBytes(type, n);
          if (!CanPackRows(type, kRows, row_bytes)) continue;  // the best level packs no such rows
          ++checked;
          SCOPED_TRACE(::testing::Message() << SimdLevelName(level) << " " << DTypeName(type)
                                            << (grouped ? " grouped" : "") << " n=" << n);
          const Rows w = MakeRows(type, n, kRows, 0, 0, 23 * n_blocks, 1.0f);
          std::vector<uint8_t> packed(static_cast<size_t>(kRows * row_bytes + 128));
          PackRows(type, w.data, row_bytes, kRows, packed.data());
          const Rows a = MakeRows(act_type, n, kWideTokens, 3, 1, 29 * n_blocks, 2.0f);
          const int64_t side_stride = wide.side_per_256 * n / 256;
          std::vector<float> side(static_cast<size_t>(side_stride * kWideTokens + 1));
          if (wide.side != nullptr) {
            for (int t = 0; t < kWideTokens; ++t) wide.side(a.data + t * a.stride, n, side.data() + t * side_stride);
          }
          const int64_t group_stride = kWideRows * row_bytes;
          for (int g = 0; g < kRows / kWideRows; ++g) {
            for (int tokens = 1; tokens <= wide.max_tokens; ++tokens) {
              const int64_t out_stride = kWideRows + 3;
              std::vector<float> out(static_cast<size_t>(out_stride * (kWideTokens + 1)), -99.0f);
              wide.fn(packed.data() + g * group_stride, group_stride, a.data, a.stride, side.data(), side_stride,
                      tokens, n, out.data(), out_stride);
              for (int t = 0; t <= kWideTokens; ++t) {
                for (int r = 0; r < out_stride; ++r) {
                  const float got = out[t * out_stride + r];
                  if (t < tokens && r < kWideRows) {
                    ASSERT_EQ(got, dot(w.data + (g * kWideRows + r) * w.stride, a.data + t * a.stride, n))
                        << "group=" << g << " tokens=" << tokens << " r=" << r << " t=" << t;
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
  RecordProperty("checked_packed_wide_tiles", checked);
  if (checked == 0) GTEST_SKIP() << "no packed wide kernel on this CPU";
}

// The packed wide kernels (GetWideTilePacked) on rows packed by PackRows, against the vec-dot
// of the same order on the stored rows: two groups (the kernel's group stride), every token
// count, odd super-block counts. The plain and the packed kernel of a type share side data
// and token count (MatMul takes one activation layout for both).
TEST(WideTileKernels, PackedEqualVecDotOnTheStoredRows) {
  int checked = 0;
  for (SimdLevel level : SupportedSimdLevels()) {
    for (DType type : testing::kWeightTypes) {
      for (bool grouped : {false, true}) {
        const WideTile wide = GetWideTilePacked(type, level, grouped);
        if (wide.fn == nullptr) continue;
        const WideTile stored = GetWideTile(type, level, grouped);
        EXPECT_EQ(wide.side, stored.side);
        EXPECT_EQ(wide.max_tokens, stored.max_tokens);
        const VecDotFn dot = grouped ? GetVecDotGrouped(type, level) : GetVecDot(type, level);
        const DType act_type = VecDotType(type);
        const int64_t block = std::max<int64_t>(Traits(type).block_size, Traits(act_type).block_size);
        for (int64_t n_blocks : {1, 3, 7}) {
          const int64_t n = n_blocks * block;
          const int rows = 2 * kWideRows;
          if (!CanPackRows(type, rows, RowBytes(type, n))) continue;
          ++checked;
          SCOPED_TRACE(::testing::Message() << SimdLevelName(level) << " " << DTypeName(type)
                                            << (grouped ? " grouped" : "") << " n=" << n);
          const Rows w = MakeRows(type, n, rows, 0, 0, 23 * n_blocks, 1.0f);
          std::vector<uint8_t> packed(static_cast<size_t>(w.stride * rows + 128));
          PackRows(type, w.data, w.stride, rows, packed.data());
          const Rows a = MakeRows(act_type, n, kWideTokens, 3, 1, 29 * n_blocks, 2.0f);
          const int64_t side_stride = wide.side_per_256 * n / 256;
          std::vector<float> side(static_cast<size_t>(side_stride * kWideTokens + 1));
          if (wide.side != nullptr) {
            for (int t = 0; t < kWideTokens; ++t) wide.side(a.data + t * a.stride, n, side.data() + t * side_stride);
          }
          const int64_t group_stride = kWideRows * w.stride;
          for (int g = 0; g < 2; ++g) {
            for (int tokens = 1; tokens <= wide.max_tokens; ++tokens) {
              const int64_t out_stride = kWideRows + 3;
              std::vector<float> out(static_cast<size_t>(out_stride * (kWideTokens + 1)), -99.0f);
              wide.fn(packed.data() + g * group_stride, group_stride, a.data, a.stride, side.data(), side_stride,
                      tokens, n, out.data(), out_stride);
              for (int t = 0; t <= kWideTokens; ++t) {
                for (int r = 0; r < out_stride; ++r) {
                  const float got = out[t * out_stride + r];
                  if (t < tokens && r < kWideRows) {
                    ASSERT_EQ(got, dot(w.data + (g * kWideRows + r) * w.stride, a.data + t * a.stride, n))
                        << "group=" << g << " tokens=" << tokens << " r=" << r << " t=" << t;
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
  RecordProperty("checked_packed_wide_tiles", checked);
  for (SimdLevel level : SupportedSimdLevels()) {
    if (level != SimdLevel::kAvx2 && level != SimdLevel::kAvxVnni) continue;
    for (DType type : {DType::kQ4_K, DType::kQ6_K}) {
      for (bool grouped : {false, true}) {
        EXPECT_NE(GetWideTilePacked(type, level, grouped).fn, nullptr) << SimdLevelName(level) << " " << DTypeName(type);
      }
    }
  }
  if (checked == 0) GTEST_SKIP() << "no packed wide kernel on this CPU";
}

// The AVX-VNNI K-quant kernels' code (scales as int32 for mullo, dpbusd / dpwssd sums) on a
// CPU without AVX-VNNI: the same kernels with the two instructions done in AVX2 must equal the
// AVX2 vec-dots (which the AVX-VNNI level uses for these types), stored and packed, both orders.
TEST(WideTileKernels, AvxVnniKernelsInAvx2EqualVecDot) {
  bool avx2 = false;
  for (SimdLevel level : SupportedSimdLevels()) avx2 = avx2 || level == SimdLevel::kAvx2;
  if (!avx2) GTEST_SKIP() << "no AVX2";
  for (DType type : {DType::kQ4_K, DType::kQ6_K}) {
    for (bool grouped : {false, true}) {
      const VecDotFn dot = grouped ? GetVecDotGrouped(type, SimdLevel::kAvx2) : GetVecDot(type, SimdLevel::kAvx2);
      for (bool packed : {false, true}) {
        const WideTile wide = avx2::GetWideTileKVnniInAvx2(type, grouped, packed);
        ASSERT_NE(wide.fn, nullptr);
        for (int64_t n_blocks : {1, 3, 7}) {
          const int64_t n = n_blocks * kQK_K;
          if (packed && !CanPackRows(type, kWideRows, RowBytes(type, n))) continue;  // e.g. COHORT_SIMD=scalar
          SCOPED_TRACE(::testing::Message() << DTypeName(type) << (grouped ? " grouped" : "")
                                            << (packed ? " packed" : "") << " n=" << n);
          const Rows w = MakeRows(type, n, kWideRows, 0, 0, 31 * n_blocks, 1.0f);
          std::vector<uint8_t> packed_rows(static_cast<size_t>(w.stride * kWideRows + 128));
          if (packed) PackRows(type, w.data, w.stride, kWideRows, packed_rows.data());
          const Rows a = MakeRows(VecDotType(type), n, kWideTokens, 3, 1, 37 * n_blocks, 2.0f);
          const int64_t side_stride = wide.side_per_256 * n / 256;
          std::vector<float> side(static_cast<size_t>(side_stride * kWideTokens + 1));
          if (wide.side != nullptr) {
            for (int t = 0; t < kWideTokens; ++t) wide.side(a.data + t * a.stride, n, side.data() + t * side_stride);
          }
          for (int tokens = 1; tokens <= wide.max_tokens; ++tokens) {
            std::vector<float> out(static_cast<size_t>(kWideRows * tokens), -99.0f);
            wide.fn(packed ? packed_rows.data() : w.data, packed ? kWideRows * w.stride : w.stride, a.data, a.stride,
                    side.data(), side_stride, tokens, n, out.data(), kWideRows);
            for (int t = 0; t < tokens; ++t) {
              for (int r = 0; r < kWideRows; ++r) {
                ASSERT_EQ(out[t * kWideRows + r], dot(w.data + r * w.stride, a.data + t * a.stride, n))
                    << "tokens=" << tokens << " r=" << r << " t=" << t;
              }
            }
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace cohort::kernels
